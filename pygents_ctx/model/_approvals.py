"""A person's approval of a model's tool calls: which calls need it, the decisions, the results.

A `model_act` step that finds calls needing approval stops the run and waits
on the agent's queue. Its kwargs hold the reply's calls and `approvals`: each
call that needs a decision, mapped to None while undecided, then to
`{"approved": True}` or `{"approved": False, "reason": ...}`. Being kwargs of
a queued turn, they are saved with the agent and loaded with it.

None of the reply's calls runs until every waiting one is decided; then the
approved calls and those that needed no approval run, and each rejected call
is answered with an error result carrying the reason, all in one results
message in the calls' order (`run_decided`). A new prompt drops the waiting
step (`ModelLoop`), and `model_ask` answers its calls as not run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

from pygents_ctx.agent import Agent
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock, from_dict
from pygents_ctx.model._sdk import RAW_ARGUMENTS
from pygents_ctx.model._tool_calls import tool_arguments
from pygents_ctx.tools import Tool
from pygents_ctx.turns import Turn

__all__ = [
    "REJECTED",
    "approvals_needed",
    "decide",
    "needs_approval",
    "run_decided",
    "waiting_calls",
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
) -> dict[str, Any]:
    """The calls a person must approve, each undecided (None), for a step's `approvals`."""
    return {call.id: None for call in calls if await needs_approval(call, tools)}


def _step_state(step: Turn) -> tuple[list[ToolUseBlock], dict[str, Any]]:
    kwargs = step.kwargs
    calls = [call for call in map(from_dict, kwargs["calls"]) if isinstance(call, ToolUseBlock)]
    return calls, dict(kwargs["approvals"])


def waiting_calls(step: Turn) -> list[ToolUseBlock]:
    """The calls of a waiting `model_act` step that no one has decided yet, in the reply's order."""
    calls, approvals = _step_state(step)
    return [call for call in calls if call.id in approvals and not approvals[call.id]]


def waiting_step(agent: Agent, stopped: Turn | None) -> Turn | None:
    """The `model_act` step holding calls to decide: `stopped` (by this run), or the queued one."""
    if stopped is not None:
        return stopped
    for turn in agent.queue:
        if turn.tool_name == "model_act" and turn.kwargs.get("approvals"):
            return turn
    return None


def decide(agent: Agent, step: Turn | None, call_id: object, decision: dict[str, Any]) -> None:
    """Record `decision` for `call_id` on the waiting `step`; an error changes nothing.

    Raises:
        TypeError: `call_id` is not a str.
        ValueError: There is no waiting step, it holds no call `call_id` that
            needs a decision, or the call was decided otherwise already.
    """
    if not isinstance(call_id, str):
        raise TypeError(f"a tool call id is a str (ToolUseBlock.id), not {call_id!r}")
    if step is None:
        raise ValueError(
            f"no tool call of agent {agent.name!r} waits for approval, so {call_id!r} "
            "cannot be decided; decide after a run ends with LoopStop.APPROVAL"
        )
    calls, approvals = _step_state(step)
    if call_id not in approvals:
        names = {call.id: call.name for call in calls}
        if call_id in names:
            problem = f"call {call_id!r} ({names[call_id]}) needs no approval: it runs as it is"
        else:
            problem = f"there is no waiting call {call_id!r}"
        waiting = ", ".join(f"{c.id!r} ({c.name})" for c in calls if c.id in approvals)
        raise ValueError(f"{problem}; the calls to decide are {waiting} (loop.pending_approvals)")
    held = approvals[call_id]
    if held == decision:
        return
    if held:
        was = "approved" if held["approved"] else f"rejected (reason {held['reason']!r})"
        raise ValueError(
            f"call {call_id!r} was already {was}, and a decision is final; to drop the "
            "waiting calls instead, give the loop a new prompt"
        )
    step.kwargs = {**step.kwargs, "approvals": {**approvals, call_id: decision}}


def _refused_results(
    calls: list[ToolUseBlock], approvals: Mapping[str, Any]
) -> dict[str, ToolResultBlock]:
    """The results the model reads for the rejected calls: an error with the person's reason."""
    refused: dict[str, ToolResultBlock] = {}
    for call in calls:
        decision = approvals.get(call.id)
        if decision and not decision["approved"]:
            reason = decision.get("reason")
            text = f"{REJECTED}: {reason}" if reason else REJECTED
            refused[call.id] = ToolResultBlock(call.id, text, is_error=True)
    return refused


async def run_decided(
    calls: list[ToolUseBlock],
    approvals: Mapping[str, Any],
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
