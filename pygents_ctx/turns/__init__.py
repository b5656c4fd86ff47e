"""Turns: the *what* of an agent, as plain data naming a tool and its arguments.

`Turn` (in `_turn`) is built from its fields (`_state`), how it runs
(`_running`) and how it is saved and loaded (`_saving`).
"""

from pygents_ctx.turns._turn import StopReason, Turn, TurnMetadata

__all__ = ["StopReason", "Turn", "TurnMetadata"]
