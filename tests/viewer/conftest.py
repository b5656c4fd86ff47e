"""The viewer's fixtures: a store built by real runs, in SQLite and in PostgreSQL, served."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message as Headers
from pathlib import Path
from typing import Any

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
from pygents_ctx.memory import (
    PostgresBlobStore,
    PostgresGraphStore,
    PostgresTaskStore,
    PostgresVectorStore,
    SQLiteBlobStore,
    SQLiteGraphStore,
    SQLiteTaskStore,
    SQLiteVectorStore,
)
from pygents_ctx.model.base import Pricing
from tests import postgres_server
from tests.viewer.store import fill, fill_memory, saved_agent

PRICES = Prices({"scripted": Pricing(3.0, 15.0), "gpt-4o*": Pricing(2.5, 10.0, 1.25)})


async def _fill_sqlite(path: Path) -> None:
    async with connect(path) as conn:
        await fill(lambda session: SQLiteContextStore(conn, session_id=session))
        await fill_memory(
            conn, SQLiteGraphStore, SQLiteBlobStore, SQLiteTaskStore, SQLiteVectorStore
        )


async def _fill_postgres(dsn: str) -> None:
    async with connect_postgres(dsn) as conn:
        await fill(lambda session: PostgresContextStore(conn, session_id=session))
        await fill_memory(
            conn, PostgresGraphStore, PostgresBlobStore, PostgresTaskStore, PostgresVectorStore
        )


def build_sqlite(path: Path) -> Path:
    """The test store in a new SQLite file at `path`."""
    asyncio.run(_fill_sqlite(path))
    return path


@pytest.fixture(scope="session")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sqlite(tmp_path_factory.mktemp("viewer") / "store.db")


@pytest.fixture(scope="session")
def postgres_dsn(postgres: postgres_server.PostgresServer) -> Iterator[str]:
    name = f"viewer_{uuid.uuid4().hex}"
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        dsn = postgres.dsn_for(name)
        asyncio.run(_fill_postgres(dsn))
        yield dsn
    finally:
        with psycopg.connect(postgres.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def serving(viewer: Viewer) -> Iterator[ViewerServer]:
    """The viewer's server on a free 127.0.0.1 port, in a background thread."""
    server = ViewerServer(viewer, port=0)
    server.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def agent_file(sqlite_db: Path) -> Path:
    """A saved agent beside the database, as `make demo` leaves one."""
    path = sqlite_db.with_suffix(".agent.json")
    path.write_bytes(asyncio.run(saved_agent()))
    return path


@pytest.fixture(scope="session")
def sqlite_server(sqlite_db: Path, agent_file: Path) -> Iterator[ViewerServer]:
    viewer = Viewer(SQLiteSource(str(sqlite_db)), PRICES, agents=(str(agent_file),))
    with serving(viewer) as server:
        yield server


@pytest.fixture(scope="session")
def postgres_viewer(postgres_dsn: str) -> Iterator[ViewerServer]:
    with serving(Viewer(PostgresSource(postgres_dsn), PRICES)) as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> ViewerServer:
    """The same store served from SQLite, then from PostgreSQL."""
    name = "sqlite_server" if request.param == "sqlite" else "postgres_viewer"
    found: ViewerServer = request.getfixturevalue(name)
    return found


@dataclass(frozen=True)
class Page:
    """What a GET returned: the status, the headers and the body."""

    status: int
    headers: Headers
    body: str


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def get(server: ViewerServer, path: str, *, follow: bool = True) -> Page:
    """GET `path` from the server (redirects followed unless `follow` is False)."""
    opener = urllib.request.build_opener() if follow else _OPENER
    try:
        with opener.open(server.url.rstrip("/") + path, timeout=30) as reply:
            return Page(reply.status, reply.headers, reply.read().decode())
    except urllib.error.HTTPError as error:
        with error:
            return Page(error.code, error.headers, error.read().decode())
