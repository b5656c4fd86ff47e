"""Stores for the tests: one fixture per backend, and a factory parametrized over them.

The PostgreSQL backend runs on a real server started once per test session
(the `postgres` fixture of tests/conftest.py, from `postgres_server.py`); each
test starts with empty tables.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from pygents_ctx import Message
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SQLiteConnection,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores.postgres import (
    PostgresConnection,
    PostgresContextStore,
    connect_postgres,
)

from . import postgres_server

MakeStore = Callable[..., Awaitable[ContextStore]]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ctx.db"


@pytest.fixture
async def conn(db_path: Path) -> AsyncIterator[SQLiteConnection]:
    async with connect(db_path) as conn:
        yield conn


@pytest.fixture
async def pg_conn(postgres: postgres_server.PostgresServer) -> AsyncIterator[PostgresConnection]:
    """A connection to the test server's database, its context tables emptied."""
    async with connect_postgres(postgres.dsn) as conn:
        # The messages and the archive reference the sessions: they go with them.
        await conn.run(lambda db: db.execute("DELETE FROM pygents_sessions"))
        yield conn


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(backend: str, request: pytest.FixtureRequest) -> MakeStore:
    """`await make_store(*messages, session_id=None)`: a store of the backend under test."""
    conn: SQLiteConnection | PostgresConnection | None = None
    if backend == "sqlite":
        conn = request.getfixturevalue("conn")
    elif backend == "postgres":
        conn = request.getfixturevalue("pg_conn")

    async def make(*messages: Message, session_id: str | None = None) -> ContextStore:
        store: ContextStore
        if isinstance(conn, SQLiteConnection):
            store = SQLiteContextStore(conn, session_id=session_id)
        elif isinstance(conn, PostgresConnection):
            store = PostgresContextStore(conn, session_id=session_id)
        else:
            store = MemoryContextStore(session_id=session_id)
        await store.append_many(messages)
        return store

    return make
