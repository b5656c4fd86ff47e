"""A graph store of each backend, for the contract tests."""

from __future__ import annotations

import pytest

from pygents_ctx.memory import GraphStore, InMemoryGraphStore, PostgresGraphStore, SQLiteGraphStore


@pytest.fixture
def graph(backend: str, request: pytest.FixtureRequest) -> GraphStore:
    """An empty graph store of the backend under test."""
    if backend == "sqlite":
        return SQLiteGraphStore(request.getfixturevalue("sqlite_conn"))
    if backend == "postgres":
        return PostgresGraphStore(request.getfixturevalue("pg_conn"))
    return InMemoryGraphStore()
