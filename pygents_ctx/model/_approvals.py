"""A person's approval of a model's tool calls: which calls need it, the decisions, the results.

The store is the truth (`approval_state`): the calls waiting are the newest
assistant message's calls that no later message answers and whose tool
`needs_approval`, and the decisions are kept on the session
(`ContextStore.record_decision`). So a loop made in another request or
process, over the same store, lists and decides them with nothing else saved.

A `model_act` step that finds a call undecided stops the run, and stays
queued on the agent (its `approvals` kwarg marks it) so a stream stopped
there does not answer the calls as cancelled, and a new prompt drops it
(`ModelLoop`); `model_ask` then answers its calls as not run. In agents
saved by older versions the kwarg also holds decisions: they are recorded in
the store on the first look.

None of the reply's calls runs until every waiting one is decided; then the
approved calls and those that needed no approval run, and each rejected call
is answered with an error result carrying the reason, all in one results
message in the calls' order (`run_decided`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

from pygents_ctx.agent import Agent
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores.base import ApprovalDecision, ContextStore
from pygents_ctx.errors import ApprovalError
from pygents_ctx.model._sdk import RAW_ARGUMENTS
from pygents_ctx.model._tool_calls import tool_arguments, unanswered_calls
from pygents_ctx.tools import Tool
from pygents_ctx.turns import Turn

__all__ = [
    "REJECTED",
    "approval_state",
    "approvals_needed",
    "check_decision",
    "decisions_of",
    "needs_approval",
    "pending_of",
    "run_decided",
    "waiting_step",
]

REJECTED: Final = "rejected: a person did not approve this call"

logger = logging.getLogger("pygents_ctx")


async def needs_approval(call: ToolUseBlock, tools: Mapping[str, Tool[..., Any]]) -> bool:
    """Whether a person must approve `call` before it runs (its tool's `needs_approval`).

    A rule is given the arguments as the tool will get them (without the nulls
    a strict model sends for optional parameters). A call that cannot run (an
    unknown tool, arguments that are not JSON) needs none: it gets its error
    result. A rule that raises counts as True, so a person sees the call
    rather than it running unchecked (and a warning is logged).
    """
    item = tools.get(call.name)
    if item is None or RAW_ARGUMENTS in call.input:
        return False
    rule = item.needs_approval
    if isinstance(rule, bool):
        return rule
    try:
        answer = rule(tool_arguments(item, call.input))
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception:
        logger.warning(
            "the needs_approval rule of tool %r raised for call %s; a person decides",
            call.name,
            call.id,
            exc_info=True,
        )
        return True
    return bool(answer)


async def approvals_needed(
    calls: list[ToolUseBlock], tools: Mapping[str, Tool[..., Any]]
) -> dict[str, None]:
    """The calls a person must approve, each undecided (None), for a step's `approvals`."""
    return {call.id: None for call in calls if await needs_approval(call, tools)}


def waiting_step(agent: Agent) -> Turn | None:
    """The `model_act` step a run that stopped for approvals left queued on `agent`, if any."""
    for turn in agent.queue:
        if turn.tool_name == "model_act" and "approvals" in turn.kwargs:
            return turn
    return None


async def approval_state(
    history: list[Message], tools: Mapping[str, Tool[..., Any]], store: ContextStore
) -> tuple[list[ToolUseBlock], dict[str, ApprovalDecision | None]]:
    """The stored calls without results, and those that need approval mapped to their decisions.

    The truth is the store: the newest assistant message's calls that no
    later message answers, the tools' `needs_approval`, and the decisions
    recorded on the session (`ContextStore.record_decision`). A call mapped
    to None waits.
    """
    calls = unanswered_calls(history)
    return calls, await decisions_of(calls, tools, store)


async def decisions_of(
    calls: list[ToolUseBlock], tools: Mapping[str, Tool[..., Any]], store: ContextStore
) -> dict[str, ApprovalDecision | None]:
    """Each of `calls` that needs approval, mapped to its recorded decision (None: waits)."""
    needed = await approvals_needed(calls, tools)
    if not needed:
        return {}
    decisions = await store.get_decisions()
    return {call_id: decisions.get(call_id) for call_id in needed}


def pending_of(
    calls: list[ToolUseBlock], approvals: Mapping[str, ApprovalDecision | None]
) -> list[ToolUseBlock]:
    """The calls no one has decided yet, in the reply's order."""
    return [call for call in calls if call.id in approvals and approvals[call.id] is None]


def check_decision(
    agent: Agent,
    history: list[Message],
    calls: list[ToolUseBlock],
    approvals: Mapping[str, ApprovalDecision | None],
    call_id: object,
    decision: ApprovalDecision,
) -> bool:
    """Whether `decision` on `call_id` is still to record (False: it is already).

    Raises:
        TypeError: `call_id` is not a str.
        ApprovalError: The call does not wait for a decision: unknown, needs
            none, answered by a newer message, or decided the other way.
    """
    if not isinstance(call_id, str):
        raise TypeError(f"a tool call id is a str (ToolUseBlock.id), not {call_id!r}")
    waiting = pending_of(calls, approvals)
    ids = tuple(call.id for call in waiting)
    listed = ", ".join(f"{call.id!r} ({call.name})" for call in waiting)
    now = (
        f"the calls waiting now are {listed} (loop.pending_approvals())"
        if waiting
        else "no call waits now; decide after a run ends with LoopStop.APPROVAL"
    )
    if call_id not in approvals:
        names = {call.id: call.name for call in calls}
        if call_id in names:
            problem = f"call {call_id!r} ({names[call_id]}) needs no approval: it runs as it is"
        elif any(call.id == call_id for message in history for call in message.tool_uses):
            problem = (
                f"call {call_id!r} of agent {agent.name!r} no longer waits for approval: a "
                "newer message answered it (the conversation moved on), so a decision would "
                "run nothing; to have it run, ask the model again"
            )
        else:
            problem = f"agent {agent.name!r} has no tool call {call_id!r} waiting for approval"
        raise ApprovalError(f"{problem}; {now}", call_id=call_id, pending=ids)
    held = approvals[call_id]
    if held is None:
        return True
    if held != decision:
        was = "approved" if held.approved else f"rejected (reason {held.reason!r})"
        raise ApprovalError(
            f"call {call_id!r} was already {was}, and a decision is final; to drop the "
            f"waiting calls instead, give the loop a new prompt; {now}",
            call_id=call_id,
            pending=ids,
        )
    return False


def _refused_results(
    calls: list[ToolUseBlock], approvals: Mapping[str, ApprovalDecision | None]
) -> dict[str, ToolResultBlock]:
    """The results the model reads for the rejected calls: an error with the person's reason."""
    refused: dict[str, ToolResultBlock] = {}
    for call in calls:
        decision = approvals.get(call.id)
        if decision is not None and not decision.approved:
            reason = decision.reason
            text = f"{REJECTED}: {reason}" if reason else REJECTED
            refused[call.id] = ToolResultBlock(call.id, text, is_error=True)
    return refused


async def run_decided(
    calls: list[ToolUseBlock],
    approvals: Mapping[str, ApprovalDecision | None],
    run: Callable[[list[ToolUseBlock]], AsyncIterator[Any]],
    route: Callable[[ContextItem[Any]], Awaitable[None]],
) -> AsyncGenerator[Any, None]:
    """The values of `calls` once all are decided: `run` runs all but the rejected ones.

    The rejected ones are answered with their reasons, in the same results
    message as the others (see `_with_refused`).
    """
    refused = _refused_results(calls, approvals)
    to_run = [call for call in calls if call.id not in refused]
    if not to_run:
        if refused:
            yield ContextItem(content=Message("user", list(refused.values())))
        return
    values = run(to_run)
    if refused:
        values = _with_refused(values, calls, refused, route)
    try:
        async for value in values:
            yield value
    finally:
        await _close(values)


async def _with_refused(
    values: AsyncIterator[Any],
    calls: list[ToolUseBlock],
    refused: dict[str, ToolResultBlock],
    route: Callable[[ContextItem[Any]], Awaitable[None]],
) -> AsyncIterator[Any]:
    """`values` of the approved calls' run, the rejected calls' results joined to their message.

    The results message holds every call's result, each where its call stood in
    the reply. Stopped before that message, the rejections are routed (stored)
    at once, with their reasons.
    """
    ran = {call.id for call in calls} - set(refused)
    try:
        async for value in values:
            if (
                isinstance(value, ContextItem)
                and isinstance(value.content, Message)
                and {result.tool_use_id for result in value.content.tool_results} == ran
            ):
                results = {r.tool_use_id: r for r in value.content.tool_results} | refused
                value = ContextItem(content=Message("user", [results[c.id] for c in calls]))
                refused = {}
            yield value
    except BaseException:
        await _close(values)  # what the run kept is routed first
        if refused:
            await route(ContextItem(content=Message("user", [*refused.values()])))
        raise


async def _close(values: AsyncIterator[Any]) -> None:
    """Close an async generator left early at once, so its own clean-up runs now, in order."""
    close = getattr(values, "aclose", None)
    if close is not None:
        await close()
