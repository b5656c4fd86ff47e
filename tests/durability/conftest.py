"""The database each durability test runs on: a SQLite file, or the session's PostgreSQL server.

PostgreSQL tests share one database and tell their data apart by session id
(a fresh uuid per test), so no test waits for a database to be created.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from .children import Database


async def _ready(database: Database) -> Database:
    async with database.store("schema"):  # opening creates the schema: children start equal
        pass
    return database


@pytest.fixture
async def sqlite_db(tmp_path: Path) -> Database:
    """A new SQLite database."""
    return await _ready(Database("sqlite", str(tmp_path / "durable.db")))


@pytest.fixture(params=["sqlite", "postgres"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    """Each backend in turn: a new SQLite database, or the test session's PostgreSQL server."""
    if request.param == "sqlite":
        return await _ready(Database("sqlite", str(tmp_path / "durable.db")))
    return await _ready(Database("postgres", request.getfixturevalue("postgres").dsn))


@pytest.fixture
def session() -> str:
    """A session id no other test uses."""
    return f"durable-{uuid.uuid4().hex}"
