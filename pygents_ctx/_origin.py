"""Where an agent was made: the line of code that called `Agent(...)`.

An agent made again by the same line (a re-run notebook cell) replaces the
registered one instead of colliding with it (see `AgentRegistry.register`).
"""

from __future__ import annotations

import sys

__all__ = ["caller_line"]


def caller_line(internal: str) -> tuple[str, int] | None:
    """`(module, line)` of the code that called the caller of this function.

    A subclass's `__init__` calling `super().__init__` is passed over, so the
    line is the one that made the object. None when that code is in the module
    named `internal` (an agent made by `branch()` or `from_dict()`, which no
    line of the user's code stands for).
    """
    frame = sys._getframe(2)
    while frame.f_code.co_name == "__init__" and frame.f_back is not None:
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "")
    return None if module == internal else (module, frame.f_lineno)
