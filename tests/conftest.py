"""Shared fixtures: every test starts and ends with empty registries; one PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pygents_ctx import AgentRegistry, HookRegistry, ToolRegistry
from tests.context.stores import postgres_server


def _clear_registries() -> None:
    ToolRegistry.clear()
    AgentRegistry.clear()
    HookRegistry.clear()


@pytest.fixture(autouse=True)
def clean_registries() -> Iterator[None]:
    """Tools, agents and hooks are global by name: isolate each test."""
    _clear_registries()
    yield
    _clear_registries()


@pytest.fixture(scope="session")
def postgres() -> Iterator[postgres_server.PostgresServer]:
    """A real PostgreSQL server for the whole test session, shared by every PostgreSQL
    backend's tests. No server here fails the tests."""
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
