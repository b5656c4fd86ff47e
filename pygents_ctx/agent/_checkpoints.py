"""An agent's checkpoints: its turns, queue and pool saved in its transcript's store.

`Agent.checkpoint()` writes the agent's state at the current end of its
conversation (`ContextStore.save_checkpoint`); `Agent.rewind(to)` rewinds the
conversation to message `to` and gives the agent back the state it saved
there, when it saved one. A model loop whose context says `checkpoints=True`
saves one before each new prompt and before each model call (`auto_checkpoint`).

The saved state is JSON: the agent's name, its queued turns (as `Turn.to_dict()`),
and the items of its queue and its pool (as `ContextItem.to_dict()`). The
containers themselves (their limits, hooks, counter, selector) are the agent's
configuration, not its state: a rewind refills them and keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pygents_ctx._json import dumps, is_mapping, loads, shown
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.stores._lineage import check_at
from pygents_ctx.context.stores.base import (
    CheckpointInfo,
    ContextStore,
    HistoryRetention,
    keeps_checkpoints,
)
from pygents_ctx.errors import SafeExecutionError
from pygents_ctx.turns import Turn

if TYPE_CHECKING:
    from pygents_ctx.context.config import ContextConfig

__all__ = [
    "Rewind",
    "auto_checkpoint",
    "list_checkpoints",
    "read_state",
    "rewind_agent",
    "save_checkpoint",
]

_KEYS = ("agent", "turns", "queue", "pool")


@dataclass(frozen=True, slots=True)
class Rewind:
    """What `Agent.rewind(to)` did.

    Attributes:
        removed: How many messages left the conversation (after message `to`).
        restored: Whether the agent's turns, queue and pool were given back as
            its checkpoint at message `to` saved them. False: the agent saved
            none there, so only the conversation was rewound and the agent kept
            its turns, queue and pool as they were.
    """

    removed: int
    restored: bool


class _State(NamedTuple):
    """A checkpoint read back and checked: what the agent gets, built before it changes."""

    turns: list[Turn]
    queue: list[ContextItem[Any]]
    pool: list[ContextItem[Any]]


def state_of(agent: Any) -> bytes:
    """The agent's state as a checkpoint keeps it.

    Raises:
        TypeError: A turn's arguments or an item's content is not JSON; the
            message names it.
    """
    turns = [turn._saved(True) for turn in agent._turns]
    queue = [item.to_dict() for item in agent.context_queue.items]
    pool = [item.to_dict() for item in agent.context_pool.items]
    data = {"agent": agent.name, "turns": turns, "queue": queue, "pool": pool}
    users = [*Turn._user_values_of(turns), *ContextItem._user_values_of([*queue, *pool])]
    return dumps(data, f"agent {agent.name!r}'s checkpoint", users)


async def _store_of(agent: Any, call: str) -> ContextStore:
    """The store an agent's checkpoints are kept in.

    Raises:
        ValueError: The agent has no context, or one that writes no store.
    """
    context: ContextConfig | None = agent.context
    if context is None:
        raise ValueError(
            f"agent {agent.name!r} has no conversation to {call}: give it "
            "context=ContextConfig(store), whose store keeps its messages and checkpoints"
        )
    if context.retention is HistoryRetention.NONE:
        raise ValueError(
            f"agent {agent.name!r} keeps its conversation in memory only "
            f"(HistoryRetention.NONE): nothing to {call}; use HistoryRetention.PERMANENT "
            "or RUN"
        )
    return await context.ready()


async def save_checkpoint(agent: Any) -> int:
    """`Agent.checkpoint()`."""
    store = await _store_of(agent, "checkpoint")
    return await store.save_checkpoint(agent.name, state_of(agent))


async def list_checkpoints(agent: Any) -> list[CheckpointInfo]:
    """`Agent.checkpoints()`."""
    store = await _store_of(agent, "list checkpoints of")
    return await store.list_checkpoints(agent.name)


async def auto_checkpoint(agent: Any, context: ContextConfig) -> None:
    """What a model loop does before a new prompt and before each model call: save
    the agent's checkpoint if its context asks for them (`checkpoints=True`)."""
    if context.checkpoints and context.retention is not HistoryRetention.NONE:
        store = await context.ready()
        await store.save_checkpoint(agent.name, state_of(agent))


def read_state(agent: Any, data: bytes, at: int) -> _State:
    """Check a checkpoint of `agent` and build what it holds, changing nothing.

    Raises:
        ValueError: It is not a checkpoint of this agent, or a turn's tool is
            not one of the agent's tools now.
        UnregisteredToolError: A turn names a tool no longer registered.
    """
    where = f"agent {agent.name!r}'s checkpoint at message {at}"
    parsed = loads(data, where)
    if not is_mapping(parsed) or sorted(parsed) != sorted(_KEYS):
        raise ValueError(
            f"{where} is not a saved agent state (keys {_KEYS}); it was not written "
            "by Agent.checkpoint()"
        )
    if parsed["agent"] != agent.name:
        raise ValueError(
            f"{where} holds the state of agent {shown(parsed['agent'])}, not "
            f"{agent.name!r}; rewind that agent, or rename this one back"
        )
    for key in ("turns", "queue", "pool"):
        if not isinstance(parsed[key], list):
            raise ValueError(f"{where}: {key!r} must be a list")
    tools = dict(agent._tools)  # turns resolve to the agent's own tools first
    turns = [Turn._from_saved(turn, tools, True) for turn in parsed["turns"]]
    for turn in turns:
        if agent._tools.get(turn.tool.key) is not turn.tool:
            raise ValueError(
                f"{where} has a turn of tool {turn.tool.key!r}, which agent "
                f"{agent.name!r} does not have now; give it that tool again to rewind here"
            )
    queue = [ContextItem._load(item) for item in parsed["queue"]]
    pool = [ContextItem._load(item) for item in parsed["pool"]]
    for item in pool:
        if item.id is None or item.description is None:
            raise ValueError(f"{where}: a pool item without an id or a description")
    return _State(turns, queue, pool)


def _apply(agent: Any, state: _State) -> None:
    """Give the agent `state`'s turns, queue items and pool items (the queue first: its
    token counter is the one thing that can fail, and then nothing changed)."""
    agent.context_queue._restore_items(state.queue)
    agent.context_pool._restore_items(state.pool)
    agent._turns.clear()
    agent._turns.extend(state.turns)


async def rewind_agent(agent: Any, to: int) -> Rewind:
    """`Agent.rewind(to)`."""
    if agent.is_running or agent.is_paused:
        raise SafeExecutionError(
            f"agent {agent.name!r} is {'running' if agent.is_running else 'paused'}: "
            "rewind it when its run has ended"
        )
    store = await _store_of(agent, "rewind")
    count = await store.count()
    check_at(to, count, store.session_id, "rewind(to=...)")
    state = None
    if keeps_checkpoints(store):
        data = await store.get_checkpoint(agent.name, to)
        # Every check before the first change: a bad checkpoint changes nothing.
        state = None if data is None else read_state(agent, data, to)
    if state is None:
        return Rewind(await store.rewind(to), False)
    before = _State(list(agent._turns), agent.context_queue.items, agent.context_pool.items)
    _apply(agent, state)
    try:
        removed = await store.rewind(to)
    except BaseException:  # the store changed nothing: neither does the agent
        _apply(agent, before)
        raise
    return Rewind(removed, True)
