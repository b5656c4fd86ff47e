"""The help-desk example (examples/help_desk) through its ASGI interface, against the fake
OpenAI server of bench/ (no network): chat, research, approval, verdict, spans, the store;
and the same app on the OpenAI Agents SDK, the docs' side-by-side, through the same calls."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import httpx2
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.fake_openai import FakeOpenAI
from pygents_ctx import SQLiteContextStore, connect
from pygents_ctx.integrations.tracing import uninstrument

MODULE = "examples.help_desk.app"
PEER = "examples.help_desk.openai_agents_app"


@pytest.fixture
async def help_desk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[ModuleType, httpx2.AsyncClient]]:
    async with _served(MODULE, tmp_path, monkeypatch) as served:
        yield served


@contextlib.asynccontextmanager
async def _served(
    module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[ModuleType, httpx2.AsyncClient]]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = await FakeOpenAI().start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("PYGENTS_CTX_DB", str(tmp_path / "help_desk.db"))
    monkeypatch.setenv("HELP_DESK_DB", str(tmp_path / "peer.db"))
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # it would export to OpenAI
    sys.modules.pop(module, None)  # imported afresh: its tools registered, its model on this server
    app = importlib.import_module(module)
    transport = httpx2.ASGITransport(app=app.app)
    try:
        async with (
            app.app.router.lifespan_context(app.app),  # the peer's is Starlette's default
            httpx2.AsyncClient(transport=transport, base_url="http://app") as client,
        ):
            yield app, client
    finally:
        uninstrument()
        sys.modules.pop(module, None)
        if module == MODULE:
            await app.model.client.close()
        await server.close()


async def test_the_help_desk_answers_researches_waits_for_approval_and_judges(
    help_desk: tuple[ModuleType, httpx2.AsyncClient], tmp_path: Path
) -> None:
    app, client = help_desk
    spans = InMemorySpanExporter()
    app.tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tenant = {"x-tenant": "acme"}

    status = await client.post("/chat/alice", json={"message": "A-1"}, headers=tenant)
    assert status.json() == {"text": "answer to A-1: shipped", "reason": "answer", "pending": []}

    research = await client.post(
        "/chat/alice", json={"message": "research: how long does shipping take?"}, headers=tenant
    )
    assert "Parcels take 3 to 5 working days." in research.json()["text"]

    asked = await client.post("/chat/alice", json={"message": "refund A-1"}, headers=tenant)
    stopped = asked.json()
    assert (stopped["reason"], len(stopped["pending"])) == ("approval", 1)

    done = await client.post("/approve/alice", json={"approve": stopped["pending"]}, headers=tenant)
    assert done.json()["text"] == "answer to refund A-1: refunded 10.00 EUR of order refund A-1"

    verdict = await client.get("/verdict/alice", headers=tenant)
    assert verdict.json() == {
        "satisfied": True,
        "summary": "Was the customer satisfied? Summarise.",
    }

    async with connect(tmp_path / "help_desk.db") as db:
        store = SQLiteContextStore(db, session_id="alice")
        assert len(await store.get_history()) == 3 * 4  # three questions, each with one tool call
        sessions = await store.list_sessions(owner="acme")
    assert len(sessions) == 2  # alice's, and the research sub-agent's transcript
    names = {span.name for span in spans.get_finished_spans()}
    assert {"invoke_agent support", "execute_tool research", "execute_tool refund"} <= names
    assert any(name.startswith("invoke_agent researcher") for name in names)  # on its branch


async def test_another_tenants_session_is_refused(
    help_desk: tuple[ModuleType, httpx2.AsyncClient],
) -> None:
    _, client = help_desk
    await client.post("/chat/bob", json={"message": "A-2"}, headers={"x-tenant": "acme"})

    with pytest.raises(ValueError, match="owner"):
        await client.post("/chat/bob", json={"message": "A-2"}, headers={"x-tenant": "other"})


async def test_the_openai_agents_version_answers_the_same_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _served(PEER, tmp_path, monkeypatch) as (_, client):
        tenant = {"x-tenant": "acme"}
        status = await client.post("/chat/alice", json={"message": "A-1"}, headers=tenant)
        assert status.json()["text"] == "answer to A-1: shipped"
        research = await client.post(
            "/chat/alice", json={"message": "research: how long?"}, headers=tenant
        )
        assert "Parcels take 3 to 5 working days." in research.json()["text"]
        stopped = (
            await client.post("/chat/alice", json={"message": "refund A-1"}, headers=tenant)
        ).json()
        assert (stopped["reason"], len(stopped["pending"])) == ("approval", 1)
        done = await client.post(
            "/approve/alice", json={"approve": stopped["pending"]}, headers=tenant
        )
        assert done.json()["text"].endswith("refunded 10.00 EUR of order refund A-1")
        verdict = await client.get("/verdict/alice", headers=tenant)
        assert verdict.json()["satisfied"] is True


def test_the_side_by_side_page_counts_the_lines_of_both_apps() -> None:
    root = Path(__file__).resolve().parents[1]
    ours = len((root / "examples/help_desk/app.py").read_text().splitlines())
    theirs = len((root / "examples/help_desk/openai_agents_app.py").read_text().splitlines())
    page = (root / "guides/guides/help-desk.md").read_text()

    assert ours <= 100  # the bound for the common path
    assert f"| {ours} | {theirs} |" in page
