"""Running the tool calls of one reply: in turn or several at once, results kept when stopped,
and calls a stopped run left unanswered answered as cancelled.

A reply's calls end as one user message holding every call's result, in the
calls' order, after the values the tools produced for routing. Stopped early
(cancelled, or the caller left `stream()`), the calls that finished keep their
results and the others are answered as cancelled, routed at once so nothing a
tool did is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from pygents_ctx.agent import Agent
from pygents_ctx.context.config import ContextConfig
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.hooks import Hook
from pygents_ctx.model._replies import closing
from pygents_ctx.model._steps import STEP_TOOLS
from pygents_ctx.model._tool_calls import CANCELLED, run_call, unanswered_calls
from pygents_ctx.model.events import ToolCallFinished, ToolCallStarted
from pygents_ctx.tools import Tool

__all__ = ["Finish", "cancel_unanswered", "run_calls"]

# What a call's result becomes before the model sees it (offloaded when too large).
Finish: TypeAlias = Callable[[ToolUseBlock, ToolResultBlock], Awaitable[ToolResultBlock]]


async def run_calls(
    agent: Agent,
    tools: Mapping[str, Tool[..., Any]],
    step: int,
    calls: list[ToolUseBlock],
    *,
    parallel: int,
    seconds: float,
    finish: Finish,
) -> AsyncGenerator[Any, None]:
    """Run `calls` for `agent`: their events as they happen, then what to route and store.

    Up to `parallel` calls run at once, each for at most `seconds`; each
    result goes through `finish` before it is shown or kept.
    """
    hooks = list(agent.turn_hooks)
    if len(calls) == 1 or parallel == 1:
        steps = _one_by_one(agent, tools, hooks, step, calls, seconds, finish)
    else:
        steps = _at_once(agent, tools, hooks, step, calls, parallel, seconds, finish)
    async with closing(steps) as values:
        async for value in values:
            yield value


async def _one_by_one(
    agent: Agent,
    tools: Mapping[str, Tool[..., Any]],
    hooks: list[Hook],
    step: int,
    calls: list[ToolUseBlock],
    seconds: float,
    finish: Finish,
) -> AsyncGenerator[Any, None]:
    """The calls in turn, in this task (one call needs no task of its own)."""
    results: dict[str, ToolResultBlock] = {}
    routed: dict[str, list[Any]] = {}
    try:
        for call in calls:
            yield ToolCallStarted(step, call)
            result, values = await run_call(call, tools, hooks, seconds)
            result = await finish(call, result)
            results[call.id], routed[call.id] = result, values
            yield ToolCallFinished(step, call, result)
    except BaseException:
        await _keep_results(agent, calls, results, routed)
        raise
    for value in _stored(calls, results, routed):
        yield value


async def _at_once(
    agent: Agent,
    tools: Mapping[str, Tool[..., Any]],
    hooks: list[Hook],
    step: int,
    calls: list[ToolUseBlock],
    parallel: int,
    seconds: float,
    finish: Finish,
) -> AsyncGenerator[Any, None]:
    """The calls as tasks, up to `parallel` at once; events as they happen."""
    events: asyncio.Queue[ToolCallStarted | ToolCallFinished] = asyncio.Queue()
    gate = asyncio.Semaphore(parallel)
    results: dict[str, ToolResultBlock] = {}
    routed: dict[str, list[Any]] = {}

    async def one(call: ToolUseBlock) -> None:
        async with gate:
            events.put_nowait(ToolCallStarted(step, call))
            result, values = await run_call(call, tools, hooks, seconds)
            result = await finish(call, result)
            results[call.id], routed[call.id] = result, values
            events.put_nowait(ToolCallFinished(step, call, result))

    tasks = [asyncio.create_task(one(call)) for call in calls]
    try:
        finished = 0
        while finished < len(calls):
            event = await events.get()
            finished += isinstance(event, ToolCallFinished)
            yield event
    except BaseException:
        # Stopped early: what finished is kept, the rest is answered as cancelled.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await _keep_results(agent, calls, results, routed)
        raise
    for value in _stored(calls, results, routed):
        yield value


def _stored(
    calls: list[ToolUseBlock],
    results: dict[str, ToolResultBlock],
    routed: dict[str, list[Any]],
) -> list[Any]:
    """What the tools produced for routing, in the calls' order, then all results."""
    values = [value for call in calls for value in routed[call.id]]
    values.append(ContextItem(content=Message("user", [results[call.id] for call in calls])))
    return values


async def _keep_results(
    agent: Agent,
    calls: list[ToolUseBlock],
    results: dict[str, ToolResultBlock],
    routed: dict[str, list[Any]],
) -> None:
    """Route what the finished calls produced, and every call's result (cancelled if none)."""
    for call in calls:
        for value in routed.get(call.id, ()):
            if isinstance(value, ContextItem):
                await agent._route(value)
    kept = [
        results.get(call.id) or ToolResultBlock(call.id, CANCELLED, is_error=True) for call in calls
    ]
    await agent._route(ContextItem(content=Message("user", kept)))


async def cancel_unanswered(agent: Agent, context: ContextConfig, run_id: str | None) -> None:
    """Answer stored calls left without results as cancelled, unless a step will answer them.

    A run stopped while paused, or cancelled inside a step, keeps that step on
    the agent (and in `to_json()`): it runs the calls next time. A step the
    stopped stream closed is gone: its calls are answered here.
    """
    if any(t is not None and t.tool in STEP_TOOLS for t in (agent.current_turn, *agent.queue)):
        return
    calls = unanswered_calls(await context.history())
    if not calls:
        return
    message = Message("user", [ToolResultBlock(c.id, CANCELLED, is_error=True) for c in calls])
    await context.record(message, run_id or ContextConfig.new_run_id())
    await agent.context_queue.append(ContextItem(content=message))
