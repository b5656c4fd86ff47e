"""A person's approval of a model's tool calls: which calls need it, the decisions, the results.

A `model_act` step that finds calls needing approval stops the run and waits
on the agent's queue. Its kwargs hold the reply's calls and `approvals`: each
call that needs a decision, mapped to None while undecided, then to
`{"approved": True}` or `{"approved": False, "reason": ...}`. Being kwargs of
a queued turn, they are saved with the agent and loaded with it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
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
    "LoopApprovals",
    "decide",
    "needs_approval",
    "refused_results",
    "waiting_calls",
    "with_refused",
]

REJECTED: Final = "rejected: a person did not approve this call"


async def needs_approval(call: ToolUseBlock, tools: Mapping[str, Tool[..., Any]]) -> bool:
    """Whether a person must approve `call` before it runs (its tool's `needs_approval`).

    A rule is given the arguments as the tool will get them (without the nulls
    a strict model sends for optional parameters). A call that cannot run (an
    unknown tool, arguments that are not JSON) needs none: it gets its error
    result. A rule that raises counts as True, so a person sees the call
    rather than it running unchecked.
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
        return True
    return bool(answer)


def _step_state(step: Turn) -> tuple[list[ToolUseBlock], dict[str, Any]]:
    kwargs = step.kwargs
    calls = [call for call in map(from_dict, kwargs["calls"]) if isinstance(call, ToolUseBlock)]
    return calls, dict(kwargs["approvals"])


def waiting_calls(step: Turn) -> list[ToolUseBlock]:
    """The calls of a waiting `model_act` step that no one has decided yet, in the reply's order."""
    calls, approvals = _step_state(step)
    return [call for call in calls if call.id in approvals and not approvals[call.id]]


def decide(step: Turn, call_id: object, decision: dict[str, Any]) -> None:
    """Record `decision` for `call_id` on the waiting `step`; an error changes nothing.

    Raises:
        TypeError: `call_id` is not a str.
        ValueError: `step` holds no call `call_id` that needs a decision, or
            the call was decided otherwise already.
    """
    if not isinstance(call_id, str):
        raise TypeError(f"a tool call id is a str (ToolUseBlock.id), not {call_id!r}")
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


def refused_results(
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


async def with_refused(
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
        if refused:
            await route(ContextItem(content=Message("user", [*refused.values()])))
        raise


class LoopApprovals:
    """`ModelLoop`'s side of approvals: the waiting calls and the decisions on them."""

    __slots__ = ()
    agent: Agent

    @property
    def pending_approvals(self) -> list[ToolUseBlock]:
        """The tool calls waiting for a person's decision, in the order the model made them.

        Read from the `model_act` step the agent holds, so an agent saved and
        loaded in another process lists them too. Empty when none waits.
        """
        step = self._approval_step()
        return [] if step is None else waiting_calls(step)

    def approve(self, call_id: str) -> None:
        """Let the waiting call `call_id` run when the loop runs again.

        Decisions are kept on the agent's queued step (saved by `to_json()`).
        The reply's calls run once every waiting call is decided: run the loop
        again without a prompt (`run()` or `stream()`). Approving a call twice
        changes nothing.

        Raises:
            ValueError: No call `call_id` waits for approval (no run stopped
                for approval, the call needs none, or it was rejected).
        """
        self._decide(call_id, {"approved": True})

    def reject(self, call_id: str, reason: str | None = None) -> None:
        """Refuse the waiting call `call_id`: the model reads `reason` as the call's error result.

        The result says the call was rejected by a person, then `reason`. It
        is stored with the other results of the reply when the loop runs again
        (see `approve`). Rejecting a call twice with the same reason changes
        nothing.

        Raises:
            TypeError: `reason` is not a str.
            ValueError: No call `call_id` waits for approval (see `approve`),
                or it was approved, or rejected with another reason.
        """
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reject() reason must be a str, not {reason!r}")
        self._decide(call_id, {"approved": False, "reason": reason})

    def _decide(self, call_id: str, decision: dict[str, Any]) -> None:
        step = self._approval_step()
        if step is None:
            raise ValueError(
                f"no tool call of agent {self.agent.name!r} waits for approval, so {call_id!r} "
                "cannot be decided; decide after a run ends with LoopStop.APPROVAL"
            )
        decide(step, call_id, decision)

    def _stopped_for_approval(self) -> Turn | None:
        """The `model_act` step that stopped the run in progress for approvals, if any."""
        raise NotImplementedError

    def _approval_step(self) -> Turn | None:
        """The `model_act` step waiting for decisions: the running one's, or the queued one."""
        stopped = self._stopped_for_approval()
        if stopped is not None:
            return stopped
        for turn in self.agent.queue:
            if turn.tool_name == "model_act" and turn.kwargs.get("approvals"):
                return turn
        return None
