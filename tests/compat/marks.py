"""How differential tests say what they cover: `@covers("Agent.pause", ...)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])


def covers(*names: str) -> Callable[[F], F]:
    """Mark a differential test with the pygents public names it exercises.

    A name is a top-level name (`"tool"`, `"Agent"`) or a member
    (`"Agent.pause"`); `tests/compat/test_coverage.py` checks that every
    public name of pygents is covered here or listed in `differences.py`.
    """
    mark: Callable[[F], F] = pytest.mark.covers(*names)
    return mark


def shows(*differences: str) -> Callable[[F], F]:
    """Mark a test that shows a deliberate difference (a key of `differences.DIFFERENCES`)."""
    mark: Callable[[F], F] = pytest.mark.shows(*differences)
    return mark
