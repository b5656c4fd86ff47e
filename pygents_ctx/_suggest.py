"""Did-you-mean suggestions for names that were mistyped: a tool, a parameter, a field."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest"]


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate `name` most likely meant, or None when none is close enough."""
    found = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None
