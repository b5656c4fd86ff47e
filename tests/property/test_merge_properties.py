"""Invariant: `merge` brings back exactly what the branch set, by the documented rule.

Random adds and removes on a parent's and a branch's pool and queue, then a
merge under each `on_conflict`, checked against a model: the ids the branch
set (added or replaced) since the branch was made go into the parent's pool,
except where the parent set them too (a conflict: refused with nothing
changed, or settled by `on_conflict`); the items the branch appended and still
holds go to the end of the parent's queue, in order.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import Agent, AgentRegistry, ContextItem, ContextPool, ContextQueue

SETTINGS = settings(max_examples=200, deadline=None)

key = st.sampled_from("abcd")
pool_op = st.tuples(st.sampled_from(["add", "remove"]), key)
queue_op = st.integers(min_value=0, max_value=99)
start = st.lists(key, max_size=4, unique=True)


def _item(item_id: str, text: str) -> ContextItem[str]:
    return ContextItem(content=text, description=f"about {item_id}", id=item_id)


async def _apply(pool: ContextPool[str], ops: list[tuple[str, str]], side: str) -> set[str]:
    """Apply `ops` to `pool`; return the ids this side set (and still holds)."""
    set_here: set[str] = set()
    for n, (op, item_id) in enumerate(ops):
        if op == "add":
            await pool.add(_item(item_id, f"{side} {n}"))
            set_here.add(item_id)
        elif item_id in pool:
            await pool.remove(item_id)
            set_here.discard(item_id)
    return set_here


@SETTINGS
@given(
    initial=start,
    parent_ops=st.lists(pool_op, max_size=6),
    branch_ops=st.lists(pool_op, max_size=6),
    parent_notes=st.lists(queue_op, max_size=4),
    branch_notes=st.lists(queue_op, max_size=6),
    on_conflict=st.sampled_from(["raise", "branch", "parent"]),
)
def test_merge_follows_the_rule(
    initial: list[str],
    parent_ops: list[tuple[str, str]],
    branch_ops: list[tuple[str, str]],
    parent_notes: list[int],
    branch_notes: list[int],
    on_conflict: Any,
) -> None:
    async def scenario() -> None:
        AgentRegistry.clear()
        parent = Agent("p", "d", [], context_queue=ContextQueue(limit=100))
        for item_id in initial:
            await parent.context_pool.add(_item(item_id, "initial"))
        await parent.context_queue.append(ContextItem(content="before"))
        sub = parent.branch()

        branch_set = await _apply(sub.context_pool, branch_ops, "branch")
        parent_set = await _apply(parent.context_pool, parent_ops, "parent")
        for n in branch_notes:
            await sub.context_queue.append(ContextItem(content=f"branch {n}"))
        for n in parent_notes:
            await parent.context_queue.append(ContextItem(content=f"parent {n}"))
        pool_before = {i.id: i.content for i in parent.context_pool}
        queue_before = [i.content for i in parent.context_queue]
        conflicts = sorted(branch_set & parent_set)

        if conflicts and on_conflict == "raise":
            with pytest.raises(ValueError, match=re.escape(str(conflicts))):
                await parent.merge(sub)
            assert {i.id: i.content for i in parent.context_pool} == pool_before
            assert [i.content for i in parent.context_queue] == queue_before
            return

        merged = await parent.merge(sub, on_conflict=on_conflict)

        taken = branch_set - set(conflicts) if on_conflict == "parent" else branch_set
        expected = dict(pool_before)
        expected.update({i: sub.context_pool.get(i).content for i in taken})
        assert {i.id: i.content for i in parent.context_pool} == expected
        assert set(merged.pool_ids) == taken
        assert set(merged.kept) == (set(conflicts) if on_conflict == "parent" else set())
        appended = [f"branch {n}" for n in branch_notes]
        assert [i.content for i in parent.context_queue] == [*queue_before, *appended]
        assert [i.content for i in merged.queue_items] == appended

    asyncio.run(scenario())
