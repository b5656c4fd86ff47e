"""Where an agent was made: the module and line of the code that called `Agent(...)`.

An agent made again by the same line (a re-run notebook cell) replaces the
registered one instead of colliding with it (see `AgentRegistry.register`).
The module is kept as its namespace (its globals), compared by identity: a
re-run cell or a reloaded module keeps its namespace. Nothing else of the
caller's frame is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import FrameType
from typing import Any, TypeAlias

__all__ = ["Origin", "caller_origin", "same_origin"]

Origin: TypeAlias = tuple[Mapping[str, Any], int]


def caller_origin(frame: FrameType) -> Origin:
    """`(module namespace, line)` where `frame`, the caller of `__init__`, is.

    A subclass's `__init__` calling `super().__init__` is passed over, so the
    line is the one that made the object.
    """
    while frame.f_code.co_name == "__init__" and frame.f_back is not None:
        frame = frame.f_back
    return frame.f_globals, frame.f_lineno


def same_origin(first: Origin | None, second: Origin | None) -> bool:
    """Whether both were made by the same line of the same module (never for None)."""
    return (
        first is not None and second is not None and first[0] is second[0] and first[1] == second[1]
    )
