"""Invariant: restoring a saved agent gives back the same saved state."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentHook,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextPoolHook,
    ContextQueue,
    ContextQueueHook,
    Tool,
    Turn,
    TurnHook,
    hook,
    tool,
)

SETTINGS = settings(max_examples=60, deadline=None)

text = st.text(max_size=8)
# Values JSON holds exactly: no NaN (it is not equal to itself), ints within 64 bits.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
tags = st.lists(st.text(min_size=1, max_size=5), max_size=3)


@dataclass(frozen=True)
class TurnPlan:
    tool_name: str
    args: list[Any]
    kwargs: dict[str, Any]
    timeout: float
    tags: list[str]
    hooked: bool


@dataclass(frozen=True)
class AgentPlan:
    description: str
    tags: list[str]
    turns: list[TurnPlan]
    in_flight: TurnPlan | None
    queue_limit: int
    queue_items: list[Any]
    pool_limit: int | None
    pool_items: dict[str, tuple[str, Any]]
    agent_hooks: bool
    store_hooks: bool
    paused: bool


turn_plans = st.builds(
    TurnPlan,
    tool_name=st.sampled_from(["work", "work.part", "stream"]),
    args=st.lists(json_values, max_size=3),
    kwargs=st.dictionaries(text, json_values, max_size=3),
    timeout=st.sampled_from([0.5, 1, 30, 60]),
    tags=tags,
    hooked=st.booleans(),
)

agent_plans = st.builds(
    AgentPlan,
    description=text,
    tags=tags,
    turns=st.lists(turn_plans, max_size=4),
    in_flight=st.none() | turn_plans,
    queue_limit=st.integers(min_value=1, max_value=6),
    queue_items=st.lists(json_values, max_size=8),
    pool_limit=st.none() | st.integers(min_value=1, max_value=4),
    pool_items=st.dictionaries(text, st.tuples(text, json_values), max_size=6),
    agent_hooks=st.booleans(),
    store_hooks=st.booleans(),
    paused=st.booleans(),
)


def _define_tools_and_hooks() -> tuple[list[Tool[..., Any]], dict[str, Any]]:
    @tool
    async def work(*args: Any, **kwargs: Any) -> Any:
        return args, kwargs

    @work.subtool
    async def part(*args: Any, **kwargs: Any) -> Any:
        return args

    @tool
    async def stream(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        yield args

    @hook(AgentHook.AFTER_TURN)
    async def saved_after_turn(agent: Agent, turn: Turn) -> None:
        return None

    @hook(TurnHook.ON_COMPLETE)
    async def saved_on_complete(*args: Any) -> None:
        return None

    @hook(ContextQueueHook.ON_EVICT)
    async def saved_on_evict(*args: Any) -> None:
        return None

    @hook(ContextPoolHook.AFTER_ADD)
    async def saved_after_add(*args: Any) -> None:
        return None

    hooks = {
        "agent": saved_after_turn,
        "turn": saved_on_complete,
        "queue": saved_on_evict,
        "pool": saved_after_add,
    }
    return [work, stream], hooks


def _turn(plan: TurnPlan, hooks: dict[str, Any]) -> Turn:
    turn = Turn(plan.tool_name, plan.args, plan.kwargs, timeout=plan.timeout, tags=plan.tags)
    if plan.hooked:
        turn.hooks.append(hooks["turn"])
    return turn


async def _build(plan: AgentPlan, tools: list[Tool[..., Any]], hooks: dict[str, Any]) -> Agent:
    queue: ContextQueue[Any] = ContextQueue(limit=plan.queue_limit, tags=plan.tags)
    pool: ContextPool[Any] = ContextPool(limit=plan.pool_limit, tags=plan.tags[:1])
    if plan.store_hooks:
        queue.hooks.append(hooks["queue"])
        pool.hooks.append(hooks["pool"])
    agent = Agent(
        "random",
        plan.description,
        tools,
        context_queue=queue,
        context_pool=pool,
        tags=plan.tags,
    )
    if plan.agent_hooks:
        agent.hooks.append(hooks["agent"])
        agent.turn_hooks.append(hooks["turn"])
    for turn_plan in plan.turns:
        await agent.put(_turn(turn_plan, hooks))
    for content in plan.queue_items:
        await queue.append(ContextItem(content=content))
    for item_id, (description, content) in plan.pool_items.items():
        await pool.add(ContextItem(content=content, description=description, id=item_id))
    if plan.paused:
        agent.pause()
    return agent


def _with_turn_in_flight(agent: Agent, plan: AgentPlan, hooks: dict[str, Any]) -> dict[str, Any]:
    """The saved state as it would be if `plan.in_flight` were running."""
    saved = agent.to_dict()
    if plan.in_flight is not None:
        saved["current_turn"] = _turn(plan.in_flight, hooks).to_dict()
    return saved


def _check(runner: asyncio.Runner, round_trip: Callable[[Agent, dict[str, Any]], Agent]) -> None:
    tools, hooks = _define_tools_and_hooks()

    @SETTINGS
    @given(plan=agent_plans)
    def restored_state_equals_saved_state(plan: AgentPlan) -> None:
        agent = runner.run(_build(plan, tools, hooks))
        saved = _with_turn_in_flight(agent, plan, hooks)
        AgentRegistry.unregister("random")

        restored = round_trip(agent, saved)
        try:
            assert restored.to_dict() == saved
            assert restored.is_paused is plan.paused
            assert len(restored.queue) == len(plan.turns)
            assert (restored.current_turn is None) is (plan.in_flight is None)
            assert len(restored.context_queue) == min(len(plan.queue_items), plan.queue_limit)
        finally:
            AgentRegistry.unregister("random")

    restored_state_equals_saved_state()


def test_from_dict_of_to_dict_reproduces_the_agent() -> None:
    with asyncio.Runner() as runner:
        _check(runner, lambda agent, saved: Agent.from_dict(saved))


def test_from_json_of_the_saved_state_reproduces_the_agent() -> None:
    with asyncio.Runner() as runner:
        _check(runner, _via_json)


def _via_json(agent: Agent, saved: dict[str, Any]) -> Agent:
    # agent.to_json() itself when nothing is in flight; else the edited saved state.
    data = agent.to_json() if saved["current_turn"] is None else json.dumps(saved)
    return Agent.from_json(data)
