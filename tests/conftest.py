"""Shared fixtures: every test starts and ends with empty registries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pygents_ctx import AgentRegistry, HookRegistry, ToolRegistry


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
