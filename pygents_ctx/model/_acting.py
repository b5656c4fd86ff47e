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

`CALL_RUNNER` is the one seam for a durable-execution engine: set, it runs each
call's work (the tool, then `finish`) where the engine records it, such as a
DBOS step (`pygents_ctx.integrations.dbos`); the journal's records stay here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pygents_ctx.agent import Agent
from pygents_ctx.context.config import ContextConfig
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores.base import ContextStore, HistoryRetention
from pygents_ctx.hooks import Hook
from pygents_ctx.model._replies import closing
from pygents_ctx.model._steps import STEP_TOOLS
from pygents_ctx.model._tool_calls import (
    CANCELLED,
    CheckedCall,
    answer_of,
    run_call,
    unanswered_calls,
)
from pygents_ctx.model.events import ToolCallFinished, ToolCallStarted
from pygents_ctx.tools import IdempotencyKey

__all__ = [
    "CALL_RUNNER",
    "CallRunner",
    "CallWork",
    "Finish",
    "Journal",
    "cancel_unanswered",
    "run_calls",
]

# What a call's result becomes before the model sees it (offloaded when too large).
Finish: TypeAlias = Callable[[ToolUseBlock, ToolResultBlock], Awaitable[ToolResultBlock]]

# One call's work: run the tool, then `finish` its result; the result, and what to route.
CallWork: TypeAlias = Callable[[], Awaitable[tuple[ToolResultBlock, list[Any]]]]
# Runs a call's work for the call (an engine's recorded step); it returns what the work did.
CallRunner: TypeAlias = Callable[
    [ToolUseBlock, CallWork], Awaitable[tuple[ToolResultBlock, list[Any]]]
]
# Set by a durable-execution integration around a run (its tasks inherit it); None: run here.
CALL_RUNNER: ContextVar[CallRunner | None] = ContextVar("pygents_ctx_call_runner", default=None)


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
    checked: CheckedCall, hooks: list[Hook], seconds: float, finish: Finish, journal: Journal
) -> tuple[ToolResultBlock, list[Any]]:
    """Run the call, recorded in the journal as started, then finished with its result."""
    call = checked.call
    if journal.store is not None:
        await journal.store.journal_start(call.id)

    async def work() -> tuple[ToolResultBlock, list[Any]]:
        result, values = await run_call(checked, hooks, seconds, journal.key(call))
        return await finish(call, result), values

    runner = CALL_RUNNER.get()
    result, values = await (work() if runner is None else runner(call, work))
    if journal.store is not None:
        await journal.store.journal_finish(call.id, result)
    return result, values


@dataclass
class _Results:
    """What a reply's calls have come to so far: each call's result, and what its tool routed."""

    calls: list[ToolUseBlock]
    results: dict[str, ToolResultBlock]
    routed: dict[str, list[Any]] = field(default_factory=dict)

    def stored(self) -> list[Any]:
        """What the tools produced for routing, in the calls' order, then all results."""
        calls = self.calls
        values = [value for call in calls for value in self.routed.get(call.id, ())]
        values.append(ContextItem(content=Message("user", [self.results[c.id] for c in calls])))
        return values

    async def keep(self, agent: Agent) -> None:
        """Route what the finished calls produced, and every call's result (cancelled if none)."""
        for call in self.calls:
            for value in self.routed.get(call.id, ()):
                if isinstance(value, ContextItem):
                    await agent._route(value)
        kept = [
            self.results.get(call.id) or ToolResultBlock(call.id, CANCELLED, is_error=True)
            for call in self.calls
        ]
        await agent._route(ContextItem(content=Message("user", kept)))


async def run_calls(
    agent: Agent,
    calls: list[CheckedCall],
    step: int,
    *,
    parallel: int,
    seconds: float,
    finish: Finish,
    journal: Journal,
    answered: Mapping[str, ToolResultBlock],
) -> AsyncGenerator[Any, None]:
    """Run `calls` for `agent`: their events as they happen, then what to route and store.

    Up to `parallel` calls run at once, each for at most `seconds`; each
    result goes through `finish` before it is shown or kept. A call
    `answered` holds (rejected by a person) does not run and has no events:
    its result is that one. A call `journal` holds does not run either: its
    result is the kept one, or `INTERRUPTED`.
    """
    if not calls:  # all answered already (the step ran again): nothing to store
        return
    done = _Results([checked.call for checked in calls], dict(answered))
    todo = [checked for checked in calls if checked.call.id not in answered]
    hooks = list(agent.turn_hooks)
    try:
        if len(todo) <= 1 or parallel == 1:
            for checked in todo:
                call = checked.call
                if call.id in journal.kept:  # started or finished before: it does not run again
                    done.results[call.id] = answer_of(call, journal.kept, CANCELLED)
                else:
                    yield ToolCallStarted(step, call)
                    result, done.routed[call.id] = await _one(
                        checked, hooks, seconds, finish, journal
                    )
                    done.results[call.id] = result
                yield ToolCallFinished(step, call, done.results[call.id])
        else:
            async with closing(
                _at_once(todo, hooks, step, parallel, seconds, finish, journal, done)
            ) as events:
                async for event in events:
                    yield event
    except BaseException:
        await done.keep(agent)  # stopped early: what finished is kept, the rest cancelled
        raise
    for value in done.stored():
        yield value


async def _at_once(
    calls: list[CheckedCall],
    hooks: list[Hook],
    step: int,
    parallel: int,
    seconds: float,
    finish: Finish,
    journal: Journal,
    done: _Results,
) -> AsyncGenerator[ToolCallStarted | ToolCallFinished, None]:
    """The calls as tasks, up to `parallel` at once; their events as they happen.

    Stopped early, the tasks still running are cancelled and awaited before
    the caller keeps what finished.
    """
    events: asyncio.Queue[ToolCallStarted | ToolCallFinished] = asyncio.Queue()
    gate = asyncio.Semaphore(parallel)

    async def one(checked: CheckedCall) -> None:
        call = checked.call
        if call.id in journal.kept:  # started or finished before: it does not run again
            result = answer_of(call, journal.kept, CANCELLED)
        else:
            async with gate:
                events.put_nowait(ToolCallStarted(step, call))
                result, done.routed[call.id] = await _one(checked, hooks, seconds, finish, journal)
        done.results[call.id] = result
        events.put_nowait(ToolCallFinished(step, call, result))

    tasks = [asyncio.create_task(one(checked)) for checked in calls]
    try:
        finished = 0
        while finished < len(calls):
            event = await events.get()
            finished += isinstance(event, ToolCallFinished)
            yield event
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
