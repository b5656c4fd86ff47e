"""The viewer follows a sub-agent's call to its transcript, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import html
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pygents_ctx.cli.viewer import PostgresSource, Prices, SQLiteSource, Viewer, ViewerServer
from pygents_ctx.context.stores import (
    PostgresContextStore,
    SQLiteContextStore,
    connect,
    connect_postgres,
)
from tests import postgres_server
from tests.viewer.conftest import get, serving
from tests.viewer.store import calls_two_sub_agents


async def _on_sqlite(path: Path) -> list[str]:
    async with connect(path) as conn:
        return await calls_two_sub_agents(lambda s: SQLiteContextStore(conn, session_id=s))


async def _on_postgres(dsn: str) -> list[str]:
    async with connect_postgres(dsn) as conn:
        return await calls_two_sub_agents(lambda s: PostgresContextStore(conn, session_id=s))


@pytest.fixture(params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ViewerServer, list[str]]]:
    if request.param == "sqlite":
        path = tmp_path / "store.db"
        calls = asyncio.run(_on_sqlite(path))
        with serving(Viewer(SQLiteSource(str(path)), Prices())) as server:
            yield server, calls
        return
    server_pg: postgres_server.PostgresServer = request.getfixturevalue("postgres")
    name = f"viewer_sub_{uuid.uuid4().hex}"
    with psycopg.connect(server_pg.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        dsn = server_pg.dsn_for(name)
        calls = asyncio.run(_on_postgres(dsn))
        with serving(Viewer(PostgresSource(dsn), Prices())) as server:
            yield server, calls
    finally:
        with psycopg.connect(server_pg.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_sub_agents_result_links_to_its_transcript_page(
    served: tuple[ViewerServer, list[str]],
) -> None:
    server, (kept_call, dropped_call) = served
    page = get(server, "/session/chat")
    assert page.status == 200

    links = re.findall(r'<a class=subagent href="(/session/[^"]+)">', page.body)
    assert len(links) == 1  # the kept sub-agent's; the dropped one says so instead
    result = re.search(rf"id=\"result-{kept_call}\".*?</div>", page.body, re.S)
    assert result is not None
    assert "class=subagent" in result.group(0)
    dropped = re.search(rf"id=\"result-{dropped_call}\".*?</div>", page.body, re.S)
    assert dropped is not None
    assert "transcript not kept" in dropped.group(0)
    transcript = get(server, html.unescape(links[0]))
    assert transcript.status == 200
    assert "Why tides?" in transcript.body
    assert "The Moon pulls." in transcript.body
    assert "Explain tides" not in transcript.body  # its own conversation, not the lead's


def test_the_spend_page_shows_each_sub_agent_call_with_its_call_and_transcript(
    served: tuple[ViewerServer, list[str]],
) -> None:
    server, (kept_call, dropped_call) = served
    page = get(server, "/session/chat/spend")
    assert page.status == 200

    assert "sub-agent" in page.body
    calls = re.findall(r'<a class=subagent-call href="([^"]+)">', page.body)
    assert len(calls) == 2
    for href in calls:  # each goes to the lead's call that ran the sub-agent
        found = get(server, html.unescape(href), follow=False)
        assert found.status in (302, 303)
        assert found.headers["Location"].startswith("/session/chat")
    assert f"call {kept_call}" in page.body
    assert f"call {dropped_call}" in page.body
    (transcript,) = re.findall(r'<a class=subagent href="(/session/[^"]+)">', page.body)
    assert get(server, html.unescape(transcript)).status == 200
