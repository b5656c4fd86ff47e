"""Reading a saved agent: every field is checked, and its parts built, before the agent.

`Agent.from_dict` (and `from_json`) call `read_saved_agent`, then make and
register the agent from what it returns, so a malformed document raises before
anything is registered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pygents_ctx._json import check_writable_depth
from pygents_ctx.agent._checks import require_tools, saved_field
from pygents_ctx.context.config import ContextConfig
from pygents_ctx.context.pool import ContextPool
from pygents_ctx.context.queue import ContextQueue
from pygents_ctx.hooks import AgentHook, TurnHook
from pygents_ctx.hooks._dispatch import AgentHookList, TurnHookList, hooks_from_dict, hooks_to_dict
from pygents_ctx.tools import Tool, ToolRegistry
from pygents_ctx.turns import Turn

if TYPE_CHECKING:
    from collections import deque
    from collections.abc import Iterable

    from pygents_ctx.agent._run_state import RunState
    from pygents_ctx.hooks import Hook

__all__ = ["SAVED_KEYS", "SavedAgent", "read_saved_agent", "save_agent", "saved_user_values"]

SAVED_KEYS = (
    "name",
    "description",
    "tool_names",
    "queue",
    "current_turn",
    "hooks",
    "turn_hooks",
    "context_pool",
    "is_paused",
    "context_queue",
    "tags",
    "context",
    "on_tool_error",
)


class SavedAgent(NamedTuple):
    """A saved agent's fields, checked, with its parts built (not its hooks fired)."""

    label: str  # how error messages name it
    name: Any  # checked when the agent is made
    description: Any  # likewise
    tools: list[Tool[..., Any]]
    queue: ContextQueue[Any] | None
    pool: ContextPool[Any] | None
    tags: list[str] | None
    hooks: list[Hook]
    turn_hooks: list[Hook]
    turns: list[Turn]
    current_turn: Turn | None
    is_paused: bool
    on_tool_error: Any  # checked when the agent is made

    def fill(self, agent: Any, queued: deque[Turn], state: RunState) -> None:
        """Give the agent just made from this its hooks, turns and pause."""
        agent.hooks = self.hooks
        agent.turn_hooks = self.turn_hooks
        queued.extend(self.turns)
        state.current_turn = self.current_turn
        if self.is_paused:
            state.pause()


def save_agent(
    agent: Any, turns: Iterable[Turn], current: Turn | None, fresh: bool
) -> dict[str, Any]:
    """`agent.to_dict()`; unless `fresh`, the turns share their containers (see `Turn._saved`).

    Raises:
        UnserializableHookError: A hook cannot be saved by name.
    """
    owner = f"agent {agent.name!r}"
    return {
        "name": agent.name,
        "description": agent.description,
        "tool_names": [t.key for t in agent.tools],
        "queue": [turn._saved(fresh) for turn in turns],
        "current_turn": None if current is None else current._saved(fresh),
        "hooks": hooks_to_dict(agent.hooks, AgentHook, owner),
        "turn_hooks": hooks_to_dict(agent.turn_hooks, TurnHook, owner),
        "context_pool": agent.context_pool.to_dict(),
        "is_paused": agent.is_paused,
        "context_queue": agent.context_queue.to_dict(),
        "tags": sorted(agent.tags),
        **({} if agent.context is None else {"context": agent.context.to_dict()}),
        # New keys only when not the default, so older readers load the rest.
        **({} if agent.on_tool_error == "raise" else {"on_tool_error": agent.on_tool_error}),
    }


def saved_user_values(data: dict[str, Any]) -> list[Any]:
    """The values in a saved agent that came from users (see `JsonSerializable._user_values`)."""
    current = data["current_turn"]
    turns = data["queue"] if current is None else [*data["queue"], current]
    return [
        data["description"],  # not checked when assigned
        data.get("context"),  # from the store, which may be anyone's
        *Turn._user_values_of(turns),
        *ContextQueue._user_values(data["context_queue"]),
        *ContextPool._user_values(data["context_pool"]),
    ]


def read_saved_agent(
    data: object, context: ContextConfig | None, parsed: bool, registry: ToolRegistry
) -> SavedAgent:
    """Check a saved agent and build its parts, its tools from `registry`; `parsed` as for
    `Turn._from_saved`.

    Raises:
        ValueError: The data is malformed (nested deeper than `to_json()` writes
            included), or the saved agent had a context and
            `context` is missing or is for another session.
        UnregisteredToolError: A tool name is not registered.
        UnregisteredHookError: A hook name is not registered.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a saved Agent must be a dict, not {type(data).__name__}")
    check_writable_depth(data, "Agent")  # what loads can be saved again
    unknown = sorted(set(data) - set(SAVED_KEYS))
    if unknown:
        raise ValueError(f"saved Agent has unknown keys {unknown}; expected {SAVED_KEYS}")
    for key in ("name", "description", "tool_names"):
        if key not in data:
            raise ValueError(f"saved Agent is missing the {key!r} key")
    name, tool_names = data["name"], data["tool_names"]
    label = f"saved agent {name!r}"
    if not isinstance(tool_names, list) or not all(isinstance(n, str) for n in tool_names):
        raise ValueError(f"{label}: 'tool_names' must be a list of strings")
    queued = saved_field(data, "queue", list, [], label) or []
    current = saved_field(data, "current_turn", dict, None, label)
    is_paused = bool(saved_field(data, "is_paused", bool, False, label))
    # The tools themselves are checked once, by the agent they are given to; here,
    # only that they include every saved turn's tool.
    tools = [registry.get(n) for n in tool_names]
    used: dict[str, Tool[..., Any]] = {}  # the turns' tools, each looked up once
    turns = [Turn._from_saved(turn, used, parsed) for turn in queued]
    current_turn = None if current is None else Turn._from_saved(current, used, parsed)
    require_tools({t.key: t for root in tools for t in root.walk()}, used.values(), label)
    queue = (
        ContextQueue._from_saved(data["context_queue"])
        if data.get("context_queue") is not None
        else None
    )
    pool = (
        ContextPool._from_saved(data["context_pool"])
        if data.get("context_pool") is not None
        else None
    )
    hooks = hooks_from_dict(data.get("hooks", {}), AgentHookList, label)
    turn_hooks = hooks_from_dict(data.get("turn_hooks", {}), TurnHookList, label)
    tags = saved_field(data, "tags", list, [], label)
    saved_context = saved_field(data, "context", dict, None, label)
    on_tool_error = saved_field(data, "on_tool_error", str, "raise", label)
    if saved_context is not None:
        ContextConfig.check_saved(saved_context, context, label)
    return SavedAgent(
        label,
        name,
        data["description"],
        tools,
        queue,
        pool,
        tags,
        hooks,
        turn_hooks,
        turns,
        current_turn,
        is_paused,
        on_tool_error,
    )
