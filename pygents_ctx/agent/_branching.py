"""Branches for sub-tasks: their names, what they started from, and merging them back.

`Agent.branch()` and `Agent.merge()` are thin; the rules live here:

- A branch without a name is called `"<parent>/<n>"`, `n` counting the
  parent's branches from 1 (skipping names taken in the namespace).
- A branch remembers its parent and the pool and queue items it started with
  (`Lineage`), without copying them: both are copy-on-write.
- `merge` brings back what the branch produced since: pool items it added or
  replaced, queue items it appended (not `Message`s, when it has a transcript:
  they are its conversation, which stays its own). An id both sides set since
  the branch was made is a conflict, settled by `on_conflict`.
- Usage is not moved: each model call's usage is counted once, in the session
  that made the call, so the branch's stays in its forked transcript (the fork
  starts with none of its parent's), and `merge` reports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import Message
from pygents_ctx.errors import SafeExecutionError

if TYPE_CHECKING:
    from pygents_ctx.agent._names import AgentNames
    from pygents_ctx.context.config import ContextConfig
    from pygents_ctx.context.pool import ContextPool
    from pygents_ctx.context.queue import ContextQueue
    from pygents_ctx.context.usage import UsageRecord

__all__ = [
    "ON_CONFLICT",
    "BranchMerge",
    "Lineage",
    "OnConflict",
    "merge_branch",
    "unique_branch_name",
]

OnConflict = Literal["raise", "branch", "parent"]
ON_CONFLICT: tuple[OnConflict, ...] = ("raise", "branch", "parent")


class Branching(Protocol):
    """What merging needs of an agent (`Agent` is one)."""

    name: str
    context_pool: ContextPool[Any]
    context_queue: ContextQueue[Any]
    context: ContextConfig | None
    _lineage: Lineage | None

    @property
    def is_running(self) -> bool: ...


class Lineage:
    """What a branch started from: its parent, and the pool and queue items at that moment."""

    __slots__ = ("merged", "parent", "pool", "queue")

    def __init__(self, parent: Branching, child: Branching) -> None:
        self.parent = parent
        # The child's items are the parent's at this moment: one frozen view serves both.
        self.pool: Mapping[str, ContextItem[Any]] = child.context_pool._frozen_items()
        self.queue = child.context_queue._frozen_items()
        self.merged = False


@dataclass(frozen=True, slots=True)
class BranchMerge:
    """What `await agent.merge(branch)` brought back into the agent.

    Attributes:
        pool_ids: The ids of the pool items added or replaced, in the branch's order.
        queue_items: The items appended to the queue, oldest first.
        usage: The branch's usage records: the model calls made on its forked
            transcript, which stay counted there, in the branch's session (a
            call counts once, in the session that made it).
        kept: Ids both sides set, where the agent's item was kept (`on_conflict="parent"`).
    """

    pool_ids: tuple[str, ...] = ()
    queue_items: tuple[ContextItem[Any], ...] = ()
    usage: tuple[UsageRecord, ...] = ()
    kept: tuple[str, ...] = ()


def unique_branch_name(parent_name: str, made: int, names: AgentNames) -> tuple[str, int]:
    """`"<parent>/<n>"` for the first `n > made` not taken in `names`, and that `n`."""
    n = made + 1
    while names.held(f"{parent_name}/{n}") is not None:
        n += 1
    return f"{parent_name}/{n}", n


async def merge_branch(
    parent: Branching, branch: Branching, on_conflict: OnConflict
) -> BranchMerge:
    """Bring back what `branch` produced into `parent` (see the module docstring).

    Everything is checked, and read, before anything changes. A hook of the
    parent that raises while the items go in stops the merge there: what went
    in stays, and the branch counts as merged (merging again would add twice).

    Raises:
        ValueError: `branch` is not a branch of `parent`, was merged already,
            ids conflict and `on_conflict` is `"raise"`, or `on_conflict` is
            not one of its values.
        SafeExecutionError: `branch` is running.
    """
    if on_conflict not in ON_CONFLICT:
        raise ValueError(f"merge on_conflict must be one of {ON_CONFLICT}, not {on_conflict!r}")
    lineage = branch._lineage
    if lineage is None or lineage.parent is not parent:
        made = "it was not made by" if lineage is None else "it is a branch of another agent, not"
        raise ValueError(
            f"agent {branch.name!r} is not a branch of agent {parent.name!r} ({made} "
            f"{parent.name}.branch()); merge a branch into the agent it was branched from"
        )
    if lineage.merged:
        raise ValueError(
            f"branch {branch.name!r} was merged into agent {parent.name!r} already (or is being "
            f"merged); a branch merges once: make a new branch for more work"
        )
    if branch.is_running:
        raise SafeExecutionError(f"branch {branch.name!r} is running; merge it after its run ends")
    lineage.merged = True  # claimed now: a second merge is refused, even while this one reads
    try:
        usage = await _branch_usage(branch)
        # After the last await before the changes: the conflicts are those of this moment.
        pool_items, kept = _pool_changes(parent, branch, lineage, on_conflict)
        queue_items = _queue_changes(branch, lineage)
    except BaseException:
        lineage.merged = False  # nothing changed: it may be merged again
        raise
    for item in pool_items:
        await parent.context_pool.add(item)
    if queue_items:
        await parent.context_queue.append(*queue_items)
    return BranchMerge(
        tuple(str(item.id) for item in pool_items), tuple(queue_items), tuple(usage), kept
    )


def _pool_changes(
    parent: Branching, branch: Branching, lineage: Lineage, on_conflict: OnConflict
) -> tuple[list[ContextItem[Any]], tuple[str, ...]]:
    """The branch's pool items to add to the parent's, and the conflicting ids kept as they are.

    Raises:
        ValueError: Ids conflict and `on_conflict` is `"raise"`.
    """
    base, ours = lineage.pool, parent.context_pool
    changed = [item for item in branch.context_pool if base.get(str(item.id)) is not item]
    conflicts = [
        item_id
        for item_id in (str(item.id) for item in changed)
        if item_id in ours and ours.get(item_id) is not base.get(item_id)
    ]
    if conflicts and on_conflict == "raise":
        ids = sorted(conflicts)
        raise ValueError(
            f"cannot merge branch {branch.name!r} into agent {parent.name!r}: both set the pool "
            f"items {ids} since the branch was made; pass on_conflict='branch' to take "
            f"the branch's items, or on_conflict='parent' to keep the agent's"
        )
    if on_conflict == "parent" and conflicts:
        dropped = set(conflicts)
        return [item for item in changed if item.id not in dropped], tuple(conflicts)
    return changed, ()


def _queue_changes(branch: Branching, lineage: Lineage) -> list[ContextItem[Any]]:
    """The items the branch appended to its queue since it was made (and still holds).

    With a transcript, `Message` items are its conversation: they stay with it.
    """
    slots, start = lineage.queue
    before = {id(item) for item in slots[start:]}
    keeps_messages = branch.context is not None
    return [
        item
        for item in branch.context_queue
        if id(item) not in before and not (keeps_messages and isinstance(item.content, Message))
    ]


async def _branch_usage(branch: Branching) -> list[UsageRecord]:
    """The usage records of the branch's forked transcript (none before its fork is made)."""
    context = branch.context
    if context is None or not context.forked:
        return []
    return await context.store.get_usage()
