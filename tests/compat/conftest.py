"""Differential tests: each scenario runs against pygents 0.7.0 and pygents_ctx.

The `impl` fixture gives the test one of the two packages (`impl.m`); the test
makes the same public calls and asserts the same observable behaviour, so it
passes for both or shows a difference. Deliberate differences are listed in
`differences.py` and documented on guides/guides/migrating-from-pygents.md.

pygents 0.7.0 needs Python 3.12 or newer: on 3.11 these tests are skipped, and
on 3.12+ it must be installed (the `dev` extra pins it), or they fail.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest

import pygents_ctx

PYGENTS_VERSION = "0.7.0"
NEEDS_PYTHON = (3, 12)
SKIP_REASON = (
    f"pygents {PYGENTS_VERSION} needs Python >= 3.12 (this is "
    f"{sys.version_info.major}.{sys.version_info.minor}); the differential tests run on 3.12 "
    f"and 3.13"
)
IMPLEMENTATIONS = ("pygents", "pygents_ctx")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "covers(*names): the pygents public names a differential test exercises"
    )
    config.addinivalue_line(
        "markers", "shows(*differences): the deliberate differences from pygents a test shows"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if sys.version_info >= NEEDS_PYTHON:
        return
    here = str(__file__).rsplit("/", 1)[0]
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


def load_pygents() -> ModuleType:
    """pygents itself, checked to be the version these tests were written against."""
    module = importlib.import_module("pygents")
    from importlib.metadata import version

    found = version("pygents")
    assert found == PYGENTS_VERSION, (
        f"the differential tests expect pygents {PYGENTS_VERSION}, found {found}; "
        f"reinstall the dev extra (pip install -e '.[dev]')"
    )
    return module


@dataclass(frozen=True)
class Impl:
    """One of the two packages under test."""

    name: str
    m: ModuleType  # the top-level package: m.Agent, m.tool, ...

    @property
    def is_pygents(self) -> bool:
        return self.name == "pygents"

    @property
    def context(self) -> ModuleType:
        """Its `context` subpackage, where the seed page imports ContextItem from."""
        return importlib.import_module(f"{self.name}.context")

    def clear(self) -> None:
        """Empty pygents' registries: they are its globals (pygents_ctx's tests each
        have registries of their own, see tests/conftest.py)."""
        if not self.is_pygents:
            return
        self.m.ToolRegistry.clear()
        self.m.AgentRegistry.clear()
        self.m.HookRegistry.clear()


# The keys pygents_ctx's schemas add to the shape pygents writes (see the migration page).
ADDED_SCHEMA_KEYS = frozenset({"description", "default", "$defs"})


def pygents_shape(schema: Any) -> Any:
    """`schema` without the keys pygents_ctx adds to pygents' shape, at any depth."""
    if isinstance(schema, list):
        return [pygents_shape(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    shaped = {}
    for key, value in schema.items():
        if key == "properties":  # names of parameters, not keywords: none is dropped
            shaped[key] = {name: pygents_shape(prop) for name, prop in value.items()}
        elif key not in ADDED_SCHEMA_KEYS:
            shaped[key] = pygents_shape(value)
    return shaped


def _module(name: str) -> ModuleType:
    return load_pygents() if name == "pygents" else pygents_ctx


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest) -> Iterator[Impl]:
    """pygents or pygents_ctx, with empty registries: pygents' emptied before and after
    the test, pygents_ctx's the test's own."""
    chosen = Impl(request.param, _module(request.param))
    chosen.clear()
    yield chosen
    chosen.clear()
