"""The served example (examples/service): in process through its ASGI interface, and under
load in real processes (`python -m bench service`), on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from bench.fake_openai import FakeOpenAI
from bench.service import transcript_problems
from examples.service.app import Settings, create_app
from pygents_ctx import AgentRegistry, SQLiteContextStore, UnregisteredAgentError, connect

ROOT = Path(__file__).resolve().parents[1]


# -- in process -------------------------------------------------------------------------


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    server = await FakeOpenAI(latency=0.05).start()
    yield server
    await server.close()


@pytest.fixture
async def client(model: FakeOpenAI, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(
        db_path=str(tmp_path / "service.db"), base_url=model.url, api_key="unused", model="fake"
    )
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://app") as c,
    ):
        yield c


def events_of(body: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in body.strip().split("\n\n"):
        name, data = block.split("\n")
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


async def test_a_message_streams_the_tool_call_its_result_the_text_and_the_answer(
    client: httpx2.AsyncClient,
) -> None:
    response = await client.post("/sessions/s1/messages", json={"content": "returns?"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = events_of(response.text)
    names = [name for name, _ in events]
    assert names[:4] == ["step", "tool_call", "tool_result", "step"]
    assert set(names[4:-1]) == {"text"}
    assert names[-1] == "done"
    data = dict(events)
    assert data["tool_call"] == {
        "id": data["tool_call"]["id"],
        "name": "search_faq",
        "input": {"question": "returns?"},
    }
    faq = "returns: Unused items can be returned within 30 days for a full refund."
    assert data["tool_result"] == {
        "id": data["tool_call"]["id"],
        "name": "search_faq",
        "content": faq,
        "is_error": False,
    }
    answer = f"answer to returns?: {faq}"
    assert "".join(d["text"] for name, d in events if name == "text") == answer
    assert data["done"]["reason"] == "answer"
    assert data["done"]["text"] == answer
    assert data["done"]["steps"] == 2
    assert data["done"]["usage"]["input_tokens"] > 0


async def test_the_transcript_comes_back_in_both_formats_and_a_second_turn_continues_it(
    client: httpx2.AsyncClient,
) -> None:
    for content in ("shipping?", "payment?"):
        response = await client.post("/sessions/s1/messages", json={"content": content})
        assert response.status_code == 200
    ours = (await client.get("/sessions/s1")).json()
    assert ours["session_id"] == "s1"
    assert [m["role"] for m in ours["messages"]] == ["user", "assistant", "user", "assistant"] * 2
    assert ours["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": "shipping?"}],
    }
    wire = (await client.get("/sessions/s1", params={"format": "openai"})).json()["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "assistant"] * 2
    assert transcript_problems(wire, ["shipping?", "payment?"]) == []  # valid for the provider


async def test_an_unknown_session_is_404_and_a_bad_format_400(client: httpx2.AsyncClient) -> None:
    response = await client.get("/sessions/nobody")
    assert response.status_code == 404
    assert response.json() == {
        "error": "no session 'nobody': POST a message to /sessions/nobody/messages to start it"
    }
    response = await client.get("/sessions/nobody", params={"format": "xml"})
    assert response.status_code == 400
    assert "format must be 'pygents' or 'openai'" in response.json()["error"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "the body must be JSON"),
        (b'["Hi"]', "the body must be a JSON object"),
        (b"{}", '"content" must be a non-empty string'),
        (b'{"content": "   "}', '"content" must be a non-empty string'),
        (b'{"content": 3}', '"content" must be a non-empty string'),
        (b'{"content": "Hi", "role": "system"}', "unknown field(s) ['role']"),
    ],
)
async def test_a_bad_body_is_400_naming_the_fix_and_stores_nothing(
    client: httpx2.AsyncClient, model: FakeOpenAI, body: bytes, says: str
) -> None:
    response = await client.post("/sessions/s1/messages", content=body)
    assert response.status_code == 400
    assert says in response.json()["error"]
    assert (await client.get("/sessions/s1")).status_code == 404
    assert model.completions == 0


async def test_a_body_over_the_limit_is_413(client: httpx2.AsyncClient) -> None:
    response = await client.post("/sessions/s1/messages", json={"content": "x" * 100_001})
    assert response.status_code == 413
    assert response.json() == {"error": "the body has at most 100,000 bytes"}


async def test_a_second_message_to_a_busy_session_is_409_while_other_sessions_go_on(
    client: httpx2.AsyncClient,
) -> None:
    first, second, other = await asyncio.gather(
        client.post("/sessions/s1/messages", json={"content": "one"}),
        client.post("/sessions/s1/messages", json={"content": "two"}),
        client.post("/sessions/s2/messages", json={"content": "three"}),
    )
    assert (first.status_code, second.status_code, other.status_code) == (200, 409, 200)
    assert "session 's1' is busy" in second.json()["error"]
    # Answered, the session takes the next message.
    again = await client.post("/sessions/s1/messages", json={"content": "two"})
    assert again.status_code == 200
    users = [
        m["content"]
        for m in (await client.get("/sessions/s1", params={"format": "openai"})).json()["messages"]
        if m["role"] == "user"
    ]
    assert users == ["one", "two"]


async def test_a_model_failure_is_an_error_event_and_no_agent_is_left_behind(
    client: httpx2.AsyncClient,
) -> None:
    response = await client.post("/sessions/s1/messages", json={"content": "[fail] please"})
    assert response.status_code == 200
    names_and_data = events_of(response.text)
    assert names_and_data[-1][0] == "error"
    assert names_and_data[-1][1]["error"] == "ModelAPIError"
    assert "[fail]" in names_and_data[-1][1]["message"]
    # The session goes on: the next message is answered after the unanswered one.
    again = await client.post("/sessions/s1/messages", json={"content": "hello"})
    assert events_of(again.text)[-1][0] == "done"
    wire = (await client.get("/sessions/s1", params={"format": "openai"})).json()["messages"]
    assert [m["role"] for m in wire] == ["user", "user", "assistant", "tool", "assistant"]
    await asyncio.gather(
        *(client.post(f"/sessions/n{i}/messages", json={"content": "hi"}) for i in range(10))
    )
    with pytest.raises(UnregisteredAgentError):  # each request's agent went with its scope
        AgentRegistry.get("support")


async def test_a_client_that_disconnects_does_not_cut_its_answer_off(
    model: FakeOpenAI, tmp_path: Path
) -> None:
    app = create_app(
        Settings(db_path=str(tmp_path / "s.db"), base_url=model.url, api_key="-", model="fake")
    )
    streamed: list[bytes] = []
    first_event = asyncio.Event()
    requests = iter([{"type": "http.request", "body": b'{"content": "returns?"}'}])

    async def receive() -> dict[str, Any]:
        request = next(requests, None)
        if request is not None:
            return request
        await first_event.wait()  # the client reads the first event, then goes away
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            streamed.append(message["body"])
            first_event.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/sessions/s1/messages",
        "raw_path": b"/sessions/s1/messages",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 5000),
        "server": ("app", 80),
    }
    async with app.router.lifespan_context(app):
        await app(scope, receive, send)
        assert b"event: done" not in b"".join(streamed)  # gone before the answer
        if app.state.worker.answering:  # still answering, for no one
            await asyncio.wait(app.state.worker.answering)
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://app") as client:
            wire = (await client.get("/sessions/s1", params={"format": "openai"})).json()
    assert [m["role"] for m in wire["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert wire["messages"][-1]["content"].startswith("answer to returns?:")


@pytest.mark.parametrize("value", ["0", "four", "-1"])
def test_a_bad_pg_connections_is_refused_at_start(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PG_CONNECTIONS", value)
    with pytest.raises(ValueError, match="PG_CONNECTIONS must be a whole number >= 1"):
        Settings.from_env()


# -- the check itself ---------------------------------------------------------------------

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
GOOD = [
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "r"},
    {"role": "assistant", "content": "answer to q: r"},
]


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        (GOOD[:2] + GOOD[3:], "before the results of ['c1']"),
        (GOOD[:3] + GOOD[2:], "a result for 'c1' where None was due"),
        (GOOD + GOOD, "the user messages are ['q', 'q']"),
        (GOOD[:3], "not an answer"),
        ([GOOD[0], {"role": "assistant", "content": ""}], "an empty assistant message"),
        ([GOOD[0], {"role": "assistant", "content": "answer to x: r"}], "does not answer 'q'"),
        ([GOOD[0], GOOD[0], *GOOD[1:]], "a user message after an unanswered"),
    ],
)
def test_the_transcript_check_finds_what_breaks_a_transcript(
    messages: list[dict[str, Any]], says: str
) -> None:
    assert transcript_problems(GOOD, ["q"]) == []
    problems = transcript_problems(messages, ["q"])
    assert any(says in problem for problem in problems), problems


def test_the_load_test_exits_1_and_keeps_the_run_when_its_check_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.service

    failed = {
        "backend": "sqlite",
        "sessions": 1,
        "turns_per_session": 1,
        "workers": 1,
        "model_latency_s": 0.0,
        "turns": 0,
        "seconds": 1.0,
        "turns_per_s": 0.0,
        "latency_ms": {"p50": float("nan"), "p99": float("nan")},
        "added_latency_ms": {"p50": float("nan"), "p99": float("nan")},
        "one_client_ms": {"turn_p50": 5.0, "direct_sdk_p50": 4.0},
        "model_calls": 2,
        "check": {
            "passed": False,
            "transcripts": 1,
            "messages": 1,
            "failed_turns": ["'session 0 turn 0': HTTP 500"],
            "problems": ["session 0: it ends with a user message, not an answer"],
        },
    }
    monkeypatch.setattr(bench.service, "run", lambda options: failed)
    out = tmp_path / "service.json"
    assert bench.service.main(["--out", str(out)]) == 1
    assert "check: FAILED" in capsys.readouterr().out
    assert json.loads(out.read_text())["runs"]["sqlite"]["check"]["passed"] is False


# -- under load, in real processes ---------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_load_test_passes_its_check_on_each_backend(backend: str, tmp_path: Path) -> None:
    out = tmp_path / "service.json"
    command = [sys.executable, "-m", "bench", "service", "--sessions", "20", "--turns", "3",
               "--workers", "2", "--latency", "0.01", "--alone", "5",
               "--out", str(out)]  # fmt: skip
    if backend == "postgres":
        command.append("--postgres")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads(out.read_text())["runs"][backend]
    assert run["check"] == {
        "passed": True,
        "transcripts": 20,
        "messages": 20 * 3 * 4,  # the question, the tool call, its result, the answer
        "failed_turns": [],
        "problems": [],
    }
    assert run["turns"] == 60
    assert run["model_calls"] == 2 * (60 + 2 * 5)  # and one client's 5 turns, served and direct
    assert run["one_client_ms"]["turn_p50"] > 0
    assert run["one_client_ms"]["direct_sdk_p50"] > 0
    assert run["turns_per_s"] > 0
    assert run["added_latency_ms"]["p50"] <= run["added_latency_ms"]["p99"]


# -- bounded input and owners -----------------------------------------------------------


async def test_a_chunked_body_over_the_limit_is_413_before_it_is_read_whole(
    client: httpx2.AsyncClient, model: FakeOpenAI
) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: sent chunked
        nonlocal sent
        yield b'{"content": "'
        for _ in range(1_000):  # 64 MB if it were all read
            sent += 1
            yield b"x" * 65_536
        yield b'"}'

    response = await client.post("/sessions/s1/messages", content=chunks())
    assert response.status_code == 413
    assert sent < 10  # it stopped reading at the limit
    assert model.completions == 0


async def test_a_nul_in_a_session_id_is_400(client: httpx2.AsyncClient) -> None:
    for response in (
        await client.get("/sessions/a%00b"),
        await client.post("/sessions/a%00b/messages", json={"content": "Hi"}),
    ):
        assert response.status_code == 400
        assert "none of them NUL" in response.json()["error"]


@pytest.fixture
async def owned(model: FakeOpenAI, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(
        db_path=str(tmp_path / "service.db"),
        base_url=model.url,
        api_key="unused",
        model="fake",
        tokens={"t-ann": "ann", "t-bob": "bob"},
    )
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://app") as c,
    ):
        yield c


async def test_with_tokens_each_owner_sees_only_their_own_sessions(
    owned: httpx2.AsyncClient,
) -> None:
    ann, bob = {"Authorization": "Bearer t-ann"}, {"Authorization": "Bearer t-bob"}
    assert (await owned.post("/sessions/s1/messages", json={"content": "Hi"})).status_code == 401
    assert (
        await owned.get("/sessions/s1", headers={"Authorization": "Bearer nope"})
    ).status_code == 401
    answered = await owned.post("/sessions/s1/messages", json={"content": "Hi"}, headers=ann)
    assert answered.status_code == 200
    mine = await owned.get("/sessions/s1", headers=ann)
    assert mine.status_code == 200
    assert mine.json()["session_id"] == "s1"
    assert (await owned.get("/sessions/s1", headers=bob)).status_code == 404  # ann's, not bob's


async def test_an_owners_sessions_carry_the_owner_so_they_can_be_listed_and_erased(
    owned: httpx2.AsyncClient, tmp_path: Path
) -> None:
    ann, bob = {"Authorization": "Bearer t-ann"}, {"Authorization": "Bearer t-bob"}
    for session in ("s1", "s2"):
        answered = await owned.post(
            f"/sessions/{session}/messages", json={"content": "Hi"}, headers=ann
        )
        assert answered.status_code == 200
    assert (
        await owned.post("/sessions/s1/messages", json={"content": "Hi"}, headers=bob)
    ).status_code == 200

    async with connect(tmp_path / "service.db") as conn:
        store = SQLiteContextStore(conn, session_id="any")
        listed = await store.list_sessions(owner="ann")
        assert sorted(info.owner for info in listed) == ["ann", "ann"]
        assert await store.erase(owner="ann") == 2
        assert [info.owner for info in await store.list_sessions()] == ["bob"]


def test_service_tokens_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_TOKENS", "t1=ann,t2=bob")
    assert Settings.from_env().tokens == {"t1": "ann", "t2": "bob"}
    monkeypatch.setenv("SERVICE_TOKENS", "t1=ann,t2")
    with pytest.raises(ValueError, match="token=owner pairs"):
        Settings.from_env()


# -- approvals over HTTP ------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
async def two_workers(
    request: pytest.FixtureRequest, model: FakeOpenAI, tmp_path: Path
) -> AsyncIterator[tuple[httpx2.AsyncClient, httpx2.AsyncClient]]:
    """Two apps (as two worker processes would be) on one database of each backend."""
    where: dict[str, Any] = {"db_path": str(tmp_path / "service.db")}
    if request.param == "postgres":
        where = {"database_url": request.getfixturevalue("postgres").dsn, "pg_connections": 1}
    settings = Settings(base_url=model.url, api_key="unused", model="fake", **where)
    apps = [create_app(settings), create_app(settings)]
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for app in apps:
            await stack.enter_async_context(app.router.lifespan_context(app))
            transport = httpx2.ASGITransport(app=app)
            clients.append(
                await stack.enter_async_context(
                    httpx2.AsyncClient(transport=transport, base_url="http://app")
                )
            )
        yield clients[0], clients[1]


async def ask_for_a_refund(client: httpx2.AsyncClient, session: str) -> dict[str, Any]:
    """Ask for a refund: the run stops at the refund call; its `approval` event."""
    response = await client.post(f"/sessions/{session}/messages", json={"content": "refund A-1"})
    assert response.status_code == 200
    events = events_of(response.text)
    assert [name for name, _ in events] == ["step", "approval", "done"]
    data = dict(events)
    assert data["approval"]["name"] == "refund"
    assert data["done"]["reason"] == "approval"
    assert data["done"]["pending"] == [data["approval"]["id"]]
    return data["approval"]


async def test_a_refund_waits_and_another_worker_approves_it_and_the_run_goes_on(
    two_workers: tuple[httpx2.AsyncClient, httpx2.AsyncClient], tmp_path: Path
) -> None:
    first, second = two_workers
    session = f"s-{tmp_path.name}"  # its own in the shared PostgreSQL
    call = await ask_for_a_refund(first, session)

    listed = await second.get(f"/sessions/{session}/approvals")
    assert listed.status_code == 200
    assert listed.json() == {"session_id": session, "pending": [call]}

    response = await second.post(
        f"/sessions/{session}/approvals/{call['id']}", json={"approve": True}
    )
    assert response.status_code == 200
    events = events_of(response.text)
    data = dict(events)
    refunded = "order refund A-1 refunded; the money is back within 5 days"
    assert data["tool_result"] == {
        "id": call["id"],
        "name": "refund",
        "content": refunded,
        "is_error": False,
    }
    assert data["done"]["reason"] == "answer"
    assert data["done"]["text"] == f"answer to refund A-1: {refunded}"
    assert data["done"]["pending"] == []
    assert (await first.get(f"/sessions/{session}/approvals")).json()["pending"] == []
    wire = (await first.get(f"/sessions/{session}", params={"format": "openai"})).json()
    assert [m["role"] for m in wire["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert transcript_problems(wire["messages"], ["refund A-1"]) == []

    # Decided and done: deciding it again is a 409, whichever way, and changes nothing.
    again = await first.post(
        f"/sessions/{session}/approvals/{call['id']}", json={"approve": False, "reason": "no"}
    )
    assert again.status_code == 409
    assert "no longer waits" in again.json()["error"]
    assert again.json()["pending"] == []
    assert (await first.get(f"/sessions/{session}", params={"format": "openai"})).json() == wire


async def test_a_rejected_refund_reaches_the_model_with_the_reason(
    client: httpx2.AsyncClient,
) -> None:
    call = await ask_for_a_refund(client, "s1")
    response = await client.post(
        f"/sessions/s1/approvals/{call['id']}",
        json={"approve": False, "reason": "bought 40 days ago"},
    )
    assert response.status_code == 200
    data = dict(events_of(response.text))
    rejected = "rejected: a person did not approve this call: bought 40 days ago"
    assert "tool_result" not in data  # it did not run
    assert data["done"]["reason"] == "answer"
    # The model read why (an error result goes to OpenAI as "Error: ...").
    assert data["done"]["text"] == f"answer to refund A-1: Error: {rejected}"
    wire = (await client.get("/sessions/s1", params={"format": "openai"})).json()["messages"]
    assert wire[2] == {"role": "tool", "tool_call_id": call["id"], "content": f"Error: {rejected}"}


async def test_a_call_that_does_not_wait_is_409_and_an_unknown_session_404(
    client: httpx2.AsyncClient, model: FakeOpenAI
) -> None:
    for response in (
        await client.get("/sessions/nobody/approvals"),
        await client.post("/sessions/nobody/approvals/call_1", json={"approve": True}),
    ):
        assert response.status_code == 404
        assert "no session 'nobody'" in response.json()["error"]

    call = await ask_for_a_refund(client, "s1")
    unknown = await client.post("/sessions/s1/approvals/call_nope", json={"approve": True})
    assert unknown.status_code == 409
    assert unknown.json()["pending"] == [call["id"]]
    assert "no tool call 'call_nope'" in unknown.json()["error"]

    # A newer message answers the waiting call as not run: deciding it then is a 409.
    assert (await client.post("/sessions/s1/messages", json={"content": "shipping?"})).is_success
    completions = model.completions
    stale = await client.post(f"/sessions/s1/approvals/{call['id']}", json={"approve": True})
    assert stale.status_code == 409
    assert "a newer message answered it" in stale.json()["error"]
    assert model.completions == completions  # nothing ran, no model call
    assert (await client.get("/sessions/s1/approvals")).json()["pending"] == []


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "the body must be JSON"),
        (b"[true]", "the body must be a JSON object"),
        (b"{}", '"approve" must be true or false'),
        (b'{"approve": "yes"}', '"approve" must be true or false'),
        (b'{"approve": true, "reason": "ok"}', '"reason" goes with "approve": false only'),
        (b'{"approve": false, "reason": 3}', '"reason" goes with "approve": false only'),
        (b'{"approve": true, "by": "ann"}', "unknown field(s) ['by']"),
    ],
)
async def test_a_bad_decision_body_is_400_and_decides_nothing(
    client: httpx2.AsyncClient, body: bytes, says: str
) -> None:
    call = await ask_for_a_refund(client, "s1")
    response = await client.post(f"/sessions/s1/approvals/{call['id']}", content=body)
    assert response.status_code == 400
    assert says in response.json()["error"]
    assert (await client.get("/sessions/s1/approvals")).json()["pending"] == [call]
