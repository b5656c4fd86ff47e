"""Running the tool calls of one reply: in turn or several at once, results kept when stopped,
and calls a stopped run left unanswered answered as cancelled.

A reply's calls end as one user message holding every call's result, in the
calls' order, after the values the tools produced for routing. Stopped early
(cancelled, or the caller left `stream()`), the calls that finished keep their
results and the others are answered as cancelled, routed at once so nothing a
tool did is lost.

Each call is recorded in the step journal of the session's store (`Journal`):
started before its tool runs, finished with the result the model reads. A
call the journal already holds does not run again: it is answered with its
kept result, or `INTERRUPTED` if it started and did not finish (it may have
run), so a run resumed after a crash never repeats a finished tool call and
never calls a started one "not run".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from pygents_ctx.agent import Agent
from pygents_ctx.context.config import ContextConfig
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores.base import ContextStore, HistoryRetention
from pygents_ctx.hooks import Hook
from pygents_ctx.model._replies import closing
from pygents_ctx.model._steps import STEP_TOOLS
from pygents_ctx.model._tool_calls import CANCELLED, answer_of, run_call, unanswered_calls
from pygents_ctx.model.events import ToolCallFinished, ToolCallStarted
from pygents_ctx.tools import IdempotencyKey, Tool

__all__ = ["Finish", "Journal", "cancel_unanswered", "run_calls"]

# What a call's result becomes before the model sees it (offloaded when too large).
Finish: TypeAlias = Callable[[ToolUseBlock, ToolResultBlock], Awaitable[ToolResultBlock]]


@dataclass(frozen=True)
class Journal:
    """The step journal of a reply's calls: the store that keeps it, and what it held.

    Attributes:
        store: The session's store, where each call is recorded as started
            and finished (under the run's lease, if it holds one); None for a
            conversation that is never written (`HistoryRetention.NONE`),
            which no later run can resume.
        session_id: The session, the first half of each call's idempotency key.
        kept: What the journal held for the calls when the step began: a
            finished call's result, None for a call that started and did not
            finish. Such calls do not run again.
    """

    store: ContextStore | None
    session_id: str
    kept: Mapping[str, ToolResultBlock | None]

    @classmethod
    async def of(cls, context: ContextConfig, calls: list[ToolUseBlock] | None) -> Journal:
        """The journal of `context`'s session, with what it holds of `calls` (None: fresh calls)."""
        if context.retention is HistoryRetention.NONE:
            return cls(None, context.session_id, {})
        store = await context.ready()
        kept = {} if calls is None else await store.get_journal(call.id for call in calls)
        return cls(store, context.session_id, kept)

    def key(self, call: ToolUseBlock) -> IdempotencyKey:
        """The call's idempotency key: the same whenever and wherever it runs."""
        return IdempotencyKey(f"{self.session_id}:{call.id}")


async def _one(
    call: ToolUseBlock,
    tools: Mapping[str, Tool[..., Any]],
    hooks: list[Hook],
    seconds: float,
    finish: Finish,
    journal: Journal,
) -> tuple[ToolResultBlock, list[Any]]:
    """Run `call`, recorded in the journal as started, then finished with its result."""
    if journal.store is not None:
        await journal.store.journal_start(call.id)
    result, values = await run_call(call, tools, hooks, seconds, journal.key(call))
    result = await finish(call, result)
    if journal.store is not None:
        await journal.store.journal_finish(call.id, result)
    return result, values


async def run_calls(
    agent: Agent,
    tools: Mapping[str, Tool[..., Any]],
    step: int,
    calls: list[ToolUseBlock],
    *,
    parallel: int,
    seconds: float,
    finish: Finish,
    journal: Journal,
) -> AsyncGenerator[Any, None]:
    """Run `calls` for `agent`: their events as they happen, then what to route and store.

    Up to `parallel` calls run at once, each for at most `seconds`; each
    result goes through `finish` before it is shown or kept. A call `journal`
    holds does not run: its result is the kept one, or `INTERRUPTED`.
    """
    hooks = list(agent.turn_hooks)
    if len(calls) == 1 or parallel == 1:
        steps = _one_by_one(agent, tools, hooks, step, calls, seconds, finish, journal)
    else:
        steps = _at_once(agent, tools, hooks, step, calls, parallel, seconds, finish, journal)
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
    journal: Journal,
) -> AsyncGenerator[Any, None]:
    """The calls in turn, in this task (one call needs no task of its own)."""
    results: dict[str, ToolResultBlock] = {}
    routed: dict[str, list[Any]] = {}
    try:
        for call in calls:
            values: list[Any] = []
            if call.id in journal.kept:  # started or finished before: it does not run again
                result = answer_of(call, journal.kept, CANCELLED)
            else:
                yield ToolCallStarted(step, call)
                result, values = await _one(call, tools, hooks, seconds, finish, journal)
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
    journal: Journal,
) -> AsyncGenerator[Any, None]:
    """The calls as tasks, up to `parallel` at once; events as they happen."""
    events: asyncio.Queue[ToolCallStarted | ToolCallFinished] = asyncio.Queue()
    gate = asyncio.Semaphore(parallel)
    results: dict[str, ToolResultBlock] = {}
    routed: dict[str, list[Any]] = {}

    async def one(call: ToolUseBlock) -> None:
        values: list[Any] = []
        if call.id in journal.kept:  # started or finished before: it does not run again
            result = answer_of(call, journal.kept, CANCELLED)
        else:
            async with gate:
                events.put_nowait(ToolCallStarted(step, call))
                result, values = await _one(call, tools, hooks, seconds, finish, journal)
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
