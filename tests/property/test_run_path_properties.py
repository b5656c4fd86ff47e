"""Invariant: however an agent runs a turn, the user sees the same thing.

A turn that no hook watches takes the agent's fast path (no coroutine of its
own, the tool called bare, generator values stepped one by one); a watched
turn takes the general path. For any mix of tools that return, yield, suspend
or fail, both give the same values, errors, outputs, stop reasons and routed
items.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import AgentRegistry, ContextItem, ToolRegistry, Turn, tool
from pygents_ctx.agent import Agent

SETTINGS = settings(max_examples=80, deadline=None)


@dataclass(frozen=True)
class Plan:
    """One turn: what its tool does."""

    generator: bool
    values: int  # how many values (a coroutine tool returns the last, or a routed item)
    suspends: bool  # await once before each value
    fails_after: int | None  # raise after this many values
    routes: bool  # produce ContextItems (routed into the queue) rather than plain values


plans = st.lists(
    st.builds(
        Plan,
        generator=st.booleans(),
        values=st.integers(0, 3),
        suspends=st.booleans(),
        fails_after=st.none() | st.integers(0, 3),
        routes=st.booleans(),
    ),
    min_size=1,
    max_size=5,
)


def _value(plan: Plan, i: int) -> Any:
    return ContextItem(content=i) if plan.routes else i


async def _coroutine(plan: Plan) -> Any:
    result: Any = None
    for i in range(plan.values):
        if plan.fails_after == i:
            raise ValueError(f"failed at {i}")
        if plan.suspends:
            await asyncio.sleep(0)
        result = _value(plan, i)
    if plan.fails_after == plan.values:
        raise ValueError("failed at the end")
    return result


async def _generator(plan: Plan) -> AsyncIterator[Any]:
    for i in range(plan.values):
        if plan.fails_after == i:
            raise ValueError(f"failed at {i}")
        if plan.suspends:
            await asyncio.sleep(0)
        yield _value(plan, i)
    if plan.fails_after == plan.values:
        raise ValueError("failed at the end")


async def _observe(plans: list[Plan], watched: bool) -> list[Any]:
    """Run the plans on a fresh agent; what a user could see of it."""
    ToolRegistry.clear()
    AgentRegistry.clear()

    @tool
    async def returns(plan: Plan) -> Any:
        return await _coroutine(plan)

    @tool
    async def yields(plan: Plan) -> AsyncIterator[Any]:
        async for value in _generator(plan):
            yield value

    async def note(*args: Any) -> None:
        return None

    agent = Agent("runner", "runs", [returns, yields])
    turns = []
    for plan in plans:
        turn = Turn(yields if plan.generator else returns, args=[plan])
        if watched:
            turn.on_complete(note)
        turns.append(turn)
        await agent.put(turn)

    seen: list[Any] = []
    while agent.queue:
        try:
            async for _, value in agent.run():
                seen.append(value)
        except ValueError as exc:
            seen.append(("raised", str(exc)))
    for turn in turns:
        output = turn.output
        if isinstance(output, list):
            output = [getattr(v, "content", v) for v in output]
        seen.append((getattr(output, "content", output), turn.metadata.stop_reason))
        seen.append(turn.is_running)
    seen.append([item.content for item in agent.context_queue])
    return seen


@SETTINGS
@given(plans=plans)
def test_the_fast_path_and_the_watched_path_look_the_same(plans: list[Plan]) -> None:
    assert asyncio.run(_observe(plans, watched=False)) == asyncio.run(_observe(plans, watched=True))
