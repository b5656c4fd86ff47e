"""What changes while an agent runs, kept apart from its guarded attributes."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pygents_ctx.turns import Turn

__all__ = ["RunState"]


class RunState:
    """What changes while an agent runs, kept apart from its guarded attributes."""

    __slots__ = ("current_turn", "gate", "paused", "run_id", "running")

    def __init__(self) -> None:
        self.running = False
        self.run_id: str | None = None
        self.current_turn: Turn | None = None
        # `paused` says what the gate does, as a plain flag: a run reads it every turn.
        self.paused = False
        self.gate = asyncio.Event()  # set = open
        self.gate.set()

    def pause(self) -> bool:
        """Close the gate; whether it was open."""
        if self.paused:
            return False
        self.paused = True
        self.gate.clear()
        return True

    def resume(self) -> bool:
        """Open the gate; whether it was closed."""
        if not self.paused:
            return False
        self.paused = False
        self.gate.set()
        return True
