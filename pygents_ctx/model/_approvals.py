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
is answered with an error result carrying the reason (`refused_results`), all
in one results message in the calls' order.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any, Final

from pygents_ctx.agent import Agent
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores.base import ApprovalDecision, ContextStore
from pygents_ctx.errors import ApprovalError
from pygents_ctx.model._tool_calls import CheckedCall, check_call, unanswered_calls
from pygents_ctx.tools import Tool
from pygents_ctx.turns import Turn

__all__ = [
    "REJECTED",
    "approval_state",
    "check_decision",
    "decisions_of",
    "needs_approval",
    "pending_of",
    "refused_results",
    "waiting_step",
]

REJECTED: Final = "rejected: a person did not approve this call"

logger = logging.getLogger("pygents_ctx")


async def needs_approval(checked: CheckedCall) -> bool:
    """Whether a person must approve the call before it runs (its tool's `needs_approval`).

    A rule is given the arguments as the tool will get them (without the nulls
    a strict model sends for optional parameters). A call that cannot run (an
    unknown tool, arguments that are not JSON) needs none: it gets its error
    result. A rule that raises counts as True, so a person sees the call
    rather than it running unchecked (and a warning is logged).
    """
    if checked.tool is None or checked.problem is not None:
        return False
    rule = checked.tool.needs_approval
    if isinstance(rule, bool):
        return rule
    call = checked.call
    try:
        answer = rule(dict(checked.arguments))  # its own copy: the tool gets the arguments
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
    return calls, await decisions_of([check_call(call, tools) for call in calls], store)


async def decisions_of(
    calls: list[CheckedCall], store: ContextStore
) -> dict[str, ApprovalDecision | None]:
    """Each of `calls` that needs approval, mapped to its recorded decision (None: waits)."""
    needed = [checked.call.id for checked in calls if await needs_approval(checked)]
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


def refused_results(
    calls: list[CheckedCall], approvals: Mapping[str, ApprovalDecision | None]
) -> dict[str, ToolResultBlock]:
    """The results the model reads for the rejected calls: an error with the person's reason."""
    refused: dict[str, ToolResultBlock] = {}
    for checked in calls:
        call_id = checked.call.id
        decision = approvals.get(call_id)
        if decision is not None and not decision.approved:
            reason = decision.reason
            text = f"{REJECTED}: {reason}" if reason else REJECTED
            refused[call_id] = ToolResultBlock(call_id, text, is_error=True)
    return refused
