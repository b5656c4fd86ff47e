"""Behaviour that the runtime's caches and shortcuts must keep.

Global hooks are matched once per tag set and cached, a turn reads only the
monotonic clock while it runs, and loading skips work for empty fields and
keeps the parsed dicts as the items' fields. Each test pins what a user would
see if one of those shortcuts went wrong.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentHook,
    ContextItem,
    ContextPool,
    ContextQueue,
    HookRegistry,
    StopReason,
    ToolRegistry,
    Turn,
    TurnHook,
    hook,
    tool,
)


async def _run_turn(tags: list[str] | None = None) -> None:
    """Run one turn of a fresh tool with these tags."""

    @tool
    async def work() -> int:
        return 1

    await Turn(work, tags=tags).returning()
    ToolRegistry.unregister("work")


async def test_a_global_hook_registered_between_events_fires_from_the_next_one() -> None:
    seen: list[str] = []

    @hook(TurnHook.BEFORE_RUN)
    async def first(turn: Turn) -> None:
        seen.append("first")

    await _run_turn()

    @hook(TurnHook.BEFORE_RUN)
    async def second(turn: Turn) -> None:
        seen.append("second")

    await _run_turn()

    assert seen == ["first", "first", "second"]


@pytest.mark.parametrize("how", ["unregister", "clear_globals"])
async def test_a_detached_global_hook_stops_firing(how: str) -> None:
    seen: list[str] = []

    @hook(TurnHook.BEFORE_RUN)
    async def watcher(turn: Turn) -> None:
        seen.append("fired")

    await _run_turn()
    if how == "unregister":
        HookRegistry.unregister("watcher")
    else:
        HookRegistry.clear_globals()
    await _run_turn()

    assert seen == ["fired"]


async def test_tagged_global_hooks_keep_matching_each_owners_tags() -> None:
    seen: list[str] = []

    @hook(TurnHook.BEFORE_RUN, tags=["billing"])
    async def billed(turn: Turn) -> None:
        seen.append(f"billed {sorted(turn.tags)}")

    @hook(TurnHook.BEFORE_RUN)
    async def everyone(turn: Turn) -> None:
        seen.append(f"everyone {sorted(turn.tags)}")

    for tags in (["billing"], None, ["other"], ["billing", "other"], None):
        await _run_turn(tags)

    assert seen == [
        "billed ['billing']",
        "everyone ['billing']",
        "everyone []",
        "everyone ['other']",
        "billed ['billing', 'other']",
        "everyone ['billing', 'other']",
        "everyone []",
    ]


async def test_a_lone_global_hook_still_gets_its_fixed_kwargs_and_its_lock() -> None:
    seen: list[tuple[str, str]] = []
    inside = 0
    overlapped = False

    @hook(AgentHook.BEFORE_TURN, lock=True, env="prod")
    async def audit(agent: Agent, env: str) -> None:
        nonlocal inside, overlapped
        inside += 1
        overlapped = overlapped or inside > 1
        await asyncio.sleep(0)
        seen.append((agent.name, env))
        inside -= 1

    @tool
    async def work() -> int:
        return 1

    agents = [Agent(name, "d", [work]) for name in ("a", "b")]
    for agent in agents:
        await agent.put(Turn(work))

    async def drain(agent: Agent) -> None:
        async for _ in agent.run():
            pass

    await asyncio.gather(*(drain(agent) for agent in agents))

    assert sorted(seen) == [("a", "prod"), ("b", "prod")]
    assert not overlapped


async def test_a_turn_reports_the_same_times_on_every_read_and_after_a_round_trip() -> None:
    @tool
    async def slow() -> str:
        await asyncio.sleep(0.01)
        return "done"

    turn = Turn(slow)
    task = asyncio.create_task(turn.returning())
    await asyncio.sleep(0)
    while_running = turn.metadata
    await task

    first, second = turn.metadata, turn.metadata
    assert first == second
    assert first.start_time == while_running.start_time
    assert first.start_time is not None
    assert first.end_time is not None
    assert first.start_time <= first.end_time
    assert first.stop_reason is StopReason.COMPLETED
    assert Turn.from_dict(turn.to_dict()).metadata == first


def test_a_saved_turn_with_hooks_that_are_not_a_dict_is_refused() -> None:
    @tool
    async def work() -> int:
        return 1

    with pytest.raises(ValueError, match="'hooks' must be a dict"):
        Turn.from_dict({"tool_name": "work", "hooks": []})


@pytest.mark.parametrize("kwargs", [{1: "x"}, {"a": 1, None: 2}, ["a"]])
def test_turn_kwargs_need_a_mapping_with_str_keys(kwargs: Any) -> None:
    @tool
    async def work(**extra: Any) -> int:
        return 1

    with pytest.raises(TypeError, match="Turn kwargs must be a dict with str keys"):
        Turn(work, kwargs=kwargs)


async def test_a_full_pool_without_hooks_replaces_a_known_id_without_evicting() -> None:
    pool: ContextPool[str] = ContextPool(limit=2)
    for key in ("a", "b"):
        await pool.add(ContextItem(content=key, description=key, id=key))

    await pool.add(ContextItem(content="A", description="a again", id="a"))
    assert [(i.id, i.content) for i in pool] == [("a", "A"), ("b", "b")]

    await pool.add(ContextItem(content="c", description="c", id="c"))
    assert [i.id for i in pool] == ["b", "c"]


# A loaded queue or pool keeps the parsed dicts as its items' fields: nothing
# the caller does to the saved data afterwards, nor a branch, may reach them.


async def _saved_queue_and_pool() -> tuple[dict[str, Any], dict[str, Any]]:
    queue: ContextQueue[Any] = ContextQueue(limit=5)
    pool: ContextPool[Any] = ContextPool(limit=5)
    for i in range(3):
        await queue.append(ContextItem(content={"n": i}))
        await pool.add(ContextItem(content={"n": i}, description=f"doc {i}", id=f"d{i}"))
    return queue.to_dict(), pool.to_dict()


async def test_a_loaded_pool_and_its_branch_are_independent() -> None:
    _, saved = await _saved_queue_and_pool()
    parent = ContextPool.from_dict(saved)

    child = parent.branch()
    await child.add(ContextItem(content="new", description="new", id="d9"))
    await parent.remove("d0")

    assert type(parent) is ContextPool
    assert type(child) is ContextPool
    assert [item.id for item in parent] == ["d1", "d2"]
    assert [item.id for item in child] == ["d0", "d1", "d2", "d9"]


async def test_changing_the_saved_dict_after_loading_does_not_reach_the_unread_items() -> None:
    saved_queue, saved_pool = await _saved_queue_and_pool()
    queue, pool = ContextQueue.from_dict(saved_queue), ContextPool.from_dict(saved_pool)

    saved_queue["items"][0]["description"] = "changed"
    saved_queue["items"].clear()
    saved_pool["items"][0]["id"] = "changed"

    assert [item.description for item in queue] == [None, None, None]
    assert [item.id for item in pool] == ["d0", "d1", "d2"]
    assert pool.get("d0").content == {"n": 0}


async def test_a_loaded_subclass_of_the_queue_keeps_its_class() -> None:
    class Notes(ContextQueue[Any]):
        def newest(self) -> object:
            return self.items[-1].content

    saved, _ = await _saved_queue_and_pool()
    loaded = Notes.from_dict(saved)

    assert loaded.newest() == {"n": 2}
    assert type(loaded) is Notes
