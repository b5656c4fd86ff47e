"""What an agent keeps apart from its public attributes: its run state, its tools indexed.

`RunState` is what changes while an agent runs (the guarded attributes must
not); the functions check an agent's name and tools, for `Agent` itself, its
branches and its loading (`_agent.loading`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pygents_ctx.errors import UnregisteredToolError
from pygents_ctx.tools import Tool, ToolRegistry

if TYPE_CHECKING:
    from pygents_ctx.turns import Turn

__all__ = ["RunState", "check_name", "index_tools", "require_tools"]


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


def index_tools(
    tools: Iterable[Tool[..., Any]],
) -> tuple[list[Tool[..., Any]], dict[str, Tool[..., Any]]]:
    """The root tools as a list, and them with their subtools by key.

    Raises:
        UnregisteredToolError: Something is not a registered `Tool` (pygents' error for it).
        ValueError: A tool is not the instance held by `ToolRegistry`.
    """
    roots = list(tools)
    for t in roots:
        name = t.key if isinstance(t, Tool) else getattr(t, "__name__", repr(t))
        try:
            registered: Tool[..., Any] | None = ToolRegistry.get(name)
        except UnregisteredToolError:
            registered = None
        if not isinstance(t, Tool) or registered is None:
            raise UnregisteredToolError(
                f"tool {name!r} not found: Agent tools must be tools made by @tool (and "
                f"registered), not {t!r}"
            )
        if registered is not t:
            raise ValueError(
                f"tool {t.key!r} is not the instance held by ToolRegistry; "
                f"pass the decorated tool itself"
            )
    return roots, {t.key: t for root in roots for t in root.walk()}


def check_name(name: object) -> None:
    """Refuse a name that is not a non-empty string (`ValueError`)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"Agent name must be a non-empty string, not {name!r}")


def require_tools(
    index: dict[str, Tool[..., Any]], needed: Iterable[Tool[..., Any]], owner: str
) -> None:
    """Refuse tools that leave a pending turn without its tool (it could not run or load).

    `needed` are the pending turns' tools, each once or more.

    Raises:
        ValueError: A tool is not in `index`.
    """
    for tool in needed:
        if index.get(tool.key) is not tool:
            raise ValueError(
                f"{owner} has a pending turn for tool {tool.key!r} but not the tool; "
                f"include it in the tools"
            )
