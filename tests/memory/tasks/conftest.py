"""A task store of each backend, for the contract tests."""

from __future__ import annotations

import pytest

from pygents_ctx.memory import InMemoryTaskStore, PostgresTaskStore, SQLiteTaskStore, TaskStore


@pytest.fixture
def tasks(backend: str, request: pytest.FixtureRequest) -> TaskStore:
    """An empty task store of the backend under test."""
    if backend == "sqlite":
        return SQLiteTaskStore(request.getfixturevalue("sqlite_conn"))
    if backend == "postgres":
        return PostgresTaskStore(request.getfixturevalue("pg_conn"))
    return InMemoryTaskStore()
