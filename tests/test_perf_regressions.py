"""Behaviour that the runtime's fast paths must keep.

Global hooks are matched once per tag set and cached, a lone plain hook is
called without a wrapper, a turn reads only the monotonic clock while it runs,
and loading skips work for empty fields. Each test pins what a user would see
if one of those shortcuts went wrong.
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
