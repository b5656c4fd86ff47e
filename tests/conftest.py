"""Shared fixtures: every test has registries of its own, and a PostgreSQL server
runs for the whole session when a test asks for one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pygents_ctx import AgentRegistry
from tests import postgres_server


@pytest.fixture(autouse=True)
def registry() -> Iterator[AgentRegistry]:
    """The test's own registries (agents, tools, hooks), current while it runs.

    Tools, agents and hooks the test makes are named there, not in the process
    default, so tests never see each other's; the global hooks it makes with
    `@hook` (which fire process-wide) are detached when it ends.
    """
    own = AgentRegistry()
    with own.use():
        yield own
    own.hooks.clear_globals()


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
