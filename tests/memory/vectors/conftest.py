"""Vector stores for the tests: every backend behind one factory.

`backend` is parametrized over the in-memory, SQLite and PostgreSQL stores;
SQLite with the sqlite-vec extension joins them wherever this Python's
sqlite3 can load it (its scores are single precision, like PostgreSQL's).
PostgreSQL runs on the session's throwaway server (tests/conftest.py), with
the pgvector extension that `make test` installs; each test starts with no
collections.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import (
    Embedder,
    InMemoryVectorStore,
    PostgresVectorStore,
    SQLiteVectorStore,
    connect,
    connect_postgres,
)
from pygents_ctx.memory.vectors.base import VectorStoreBase
from pygents_ctx.memory.vectors.sqlite import sqlite_vec_loads
from tests import postgres_server

SQLITE_VEC = sqlite_vec_loads()
BACKENDS = ["memory", "sqlite", "postgres", *(["sqlite-vec"] if SQLITE_VEC else [])]
# How far a backend's scores may be from exact: PostgreSQL and sqlite-vec compute
# in single precision; the others in double precision from the 32-bit values.
TOLERANCE = {"memory": 1e-12, "sqlite": 1e-12, "postgres": 1e-5, "sqlite-vec": 1e-5}


@contextlib.asynccontextmanager
async def open_store(
    backend: str,
    *,
    embedder: Embedder | None = None,
    directory: Path | None = None,
    dsn: str | None = None,
    empty: bool = True,
) -> AsyncIterator[VectorStoreBase]:
    """A store of `backend` on a new connection (closed at the end).

    With `empty`, a PostgreSQL store starts without collections.
    """
    if backend == "memory":
        yield InMemoryVectorStore(embedder=embedder)
    elif backend in ("sqlite", "sqlite-vec"):
        with contextlib.ExitStack() as stack:
            if directory is None:
                directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            async with connect(directory / "vectors.db") as conn:
                yield SQLiteVectorStore(conn, embedder=embedder, sqlite_vec=backend == "sqlite-vec")
    else:
        assert dsn is not None
        async with connect_postgres(dsn) as conn:
            store = PostgresVectorStore(conn, embedder=embedder)
            if empty:
                await store._run(lambda db: db.execute("DELETE FROM pygents_vector_collections"))
            yield store


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def dsn(backend: str, request: pytest.FixtureRequest) -> str | None:
    if backend != "postgres":
        return None
    server: postgres_server.PostgresServer = request.getfixturevalue("postgres")
    return server.dsn


MakeStore = Callable[..., Any]


@pytest.fixture
async def make_store(
    backend: str, dsn: str | None, tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    """`await make_store(embedder=None)`: a store of the backend under test.

    SQLite and PostgreSQL stores made in one test share their data (the same
    file, the same database) through connections of their own, as two
    processes would; in-memory stores share nothing.
    """
    async with contextlib.AsyncExitStack() as stack:
        made = 0

        async def make(embedder: Embedder | None = None) -> VectorStoreBase:
            nonlocal made
            made += 1
            return await stack.enter_async_context(
                open_store(backend, embedder=embedder, directory=tmp_path, dsn=dsn, empty=made == 1)
            )

        yield make
