"""Stores for the tests: one fixture per backend, and a factory parametrized over both."""

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

MakeStore = Callable[..., Awaitable[ContextStore]]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ctx.db"


@pytest.fixture
async def conn(db_path: Path) -> AsyncIterator[SQLiteConnection]:
    async with connect(db_path) as conn:
        yield conn


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(backend: str, request: pytest.FixtureRequest) -> MakeStore:
    """`await make_store(*messages, session_id=None)`: a store of the backend under test."""
    conn: SQLiteConnection | None = request.getfixturevalue("conn") if backend == "sqlite" else None

    async def make(*messages: Message, session_id: str | None = None) -> ContextStore:
        store: ContextStore
        if backend == "memory":
            store = MemoryContextStore(session_id=session_id)
        else:
            assert conn is not None
            store = SQLiteContextStore(conn, session_id=session_id)
        await store.append_many(messages)
        return store

    return make
