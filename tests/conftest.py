"""Shared fixtures: every test has registries of its own, and a PostgreSQL server
runs for the whole session when a test asks for one."""

from __future__ import annotations

import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pygents_ctx import AgentRegistry
from tests import postgres_server


@pytest.fixture(autouse=True)
def registry() -> Iterator[AgentRegistry]:
    """The test's own registries (agents, tools, hooks), current while it runs.

    Tools, agents and hooks the test makes are named there, not in the process
    default, and its global hooks (`@hook`) are that registry's: they fire only
    where it is current, so tests never see each other's.
    """
    own = AgentRegistry()
    with own.use():
        yield own


@pytest.fixture(scope="session")
def postgres() -> Iterator[postgres_server.PostgresServer]:
    """A real PostgreSQL server for the whole test session. No server here fails the tests.

    The context stores', the memory stores' and the durability tests share it.
    """
    try:
        server = postgres_server.start()
    except postgres_server.ServerUnavailableError as exc:
        unavailable = str(exc)
    else:
        unavailable = ""
    if unavailable:
        pytest.fail(unavailable, pytrace=False)
    try:
        yield server
    finally:
        server.stop()


# DBOS's SQLite system database needs SQLite 3.42+ under Python 3.12+ (its schema's
# defaults call unixepoch('subsec')); older, its launch fails on an insert.
DBOS_ON_SQLITE = sys.version_info < (3, 12) or sqlite3.sqlite_version_info >= (3, 42)


@pytest.fixture
def dbos_system_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new system database for DBOS: a SQLite file, or where DBOS cannot use this
    Python's SQLite (`DBOS_ON_SQLITE`), a new database on the session's PostgreSQL server."""
    if DBOS_ON_SQLITE:
        return f"sqlite:///{tmp_path}/dbos.sqlite"
    server = request.getfixturevalue("postgres")
    return f"postgresql://postgres@/dbos_{uuid.uuid4().hex[:12]}?host={server.directory}&port=5432"
