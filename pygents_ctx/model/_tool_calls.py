"""Running one tool call of a model's: checked once, run as a turn, and the result the model reads.

The route of a call's arguments: the adapter parses the model's JSON into
`ToolUseBlock.input`; `check_call` finds the tool and drops the nulls a
strict model sends for optional parameters (a `CheckedCall`, which the
approval rules read too); `run_call` gives those arguments to a `Turn` of the
tool, which checks them against its signature and calls the function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

import orjson

from pygents_ctx._suggest import closest
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.hooks import Hook
from pygents_ctx.hooks._calls import CALL_KEY, IdempotencyKey
from pygents_ctx.model._observers import OBSERVERS, ToolCallWatch, watch_tool_call
from pygents_ctx.model._sdk import RAW_ARGUMENTS
from pygents_ctx.model.definitions import accepts_null, input_schema
from pygents_ctx.tools import Tool
from pygents_ctx.turns import Turn

__all__ = [
    "CANCELLED",
    "CURRENT_CALL",
    "INTERRUPTED",
    "NOT_RUN",
    "CheckedCall",
    "answer_of",
    "check_call",
    "run_call",
    "tool_arguments",
    "unanswered_calls",
]

CANCELLED: Final = (
    "cancelled: the run stopped before this call finished; call the tool again if still needed"
)
NOT_RUN: Final = "not run: a new message came before this call ran; call the tool again if needed"
INTERRUPTED: Final = "interrupted: it started and may have run; check before calling again"

# The model's tool call whose tool is running (in its task and the tasks it starts):
# a sub-agent's tool reads it to link its model calls to the call that ran it.
CURRENT_CALL: ContextVar[ToolUseBlock | None] = ContextVar("pygents_ctx_tool_call", default=None)


def unanswered_calls(history: Sequence[Message]) -> list[ToolUseBlock]:
    """The tool calls of the newest assistant message that no later message answers."""
    answered: set[str] = set()
    for message in reversed(history):
        if message.role == "assistant":
            return [call for call in message.tool_uses if call.id not in answered]
        answered.update(result.tool_use_id for result in message.tool_results)
    return []


def _error(call: ToolUseBlock, text: str) -> ToolResultBlock:
    return ToolResultBlock(call.id, text, is_error=True)


def answer_of(
    call: ToolUseBlock, kept: Mapping[str, ToolResultBlock | None], never_started: str
) -> ToolResultBlock:
    """The result of `call` the step journal `kept` tells, for a call that will not run now.

    A call that finished has its kept result; one that started and did not
    finish is `INTERRUPTED` (it may have run); one never started gets
    `never_started` (`NOT_RUN`, `CANCELLED`).
    """
    if call.id not in kept:
        return _error(call, never_started)
    result = kept[call.id]
    return _error(call, INTERRUPTED) if result is None else result


def tool_arguments(item: Tool[..., Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """`given`, less the nulls sent for optional parameters that do not take null.

    A model in strict mode must send every parameter, and sends null for one it
    leaves out: dropping that null lets the tool's default apply.
    """
    schema = input_schema(item)
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    return {
        name: value
        for name, value in given.items()
        if not (
            value is None
            and name in properties
            and name not in required
            and not accepts_null(properties[name])
        )
    }


@dataclass(frozen=True, slots=True)
class CheckedCall:
    """A model's tool call, checked before it runs: its tool and arguments, or why it cannot run.

    Attributes:
        call: The call as the model made it (and as it is stored).
        tool: The tool it names; None when there is no such tool.
        arguments: The arguments as the tool gets them: the call's input, less
            the nulls sent for optional parameters that do not take null.
        problem: Why the call cannot run (an unknown tool, arguments that are
            not a JSON object), as the model reads it; None when it can.
    """

    call: ToolUseBlock
    tool: Tool[..., Any] | None
    arguments: Mapping[str, Any]
    problem: str | None = None


def check_call(call: ToolUseBlock, tools: Mapping[str, Tool[..., Any]]) -> CheckedCall:
    """`call` with its tool among `tools` and its arguments, or the problem that stops it."""
    item = tools.get(call.name)
    if item is None:
        names = ", ".join(sorted(tools)) or "none"
        meant = closest(call.name, tools)
        guess = "" if meant is None else f" (did you mean {meant!r}?)"
        problem = f"there is no tool {call.name!r}{guess}; the tools are: {names}"
        return CheckedCall(call, None, {}, problem)
    if RAW_ARGUMENTS in call.input:
        problem = (
            f"the arguments are not a JSON object ({call.input[RAW_ARGUMENTS]!r}); call "
            f"{call.name} again with its arguments as a JSON object"
        )
        return CheckedCall(call, item, {}, problem)
    return CheckedCall(call, item, tool_arguments(item, call.input))


async def run_call(
    checked: CheckedCall,
    hooks: list[Hook],
    seconds: float,
    key: IdempotencyKey | None = None,
) -> tuple[ToolResultBlock, list[Any]]:
    """Run the call as a `Turn`: the result the model reads, and the values to route (see `_run`).

    `key` is what a tool parameter annotated `IdempotencyKey` receives.
    """
    call = checked.call
    token = CURRENT_CALL.set(call)
    key_token = CALL_KEY.set(key)
    try:
        if not OBSERVERS:
            return await _run(checked, hooks, seconds, None)
        watch = watch_tool_call(call, checked.tool)  # tracing: current while it runs
        try:
            result, routed = await _run(checked, hooks, seconds, watch)
        except BaseException as error:
            watch.end(None, error)
            raise
        watch.end(result, None)
        return result, routed
    finally:
        CALL_KEY.reset(key_token)
        CURRENT_CALL.reset(token)


async def _run(
    checked: CheckedCall, hooks: list[Hook], seconds: float, watch: ToolCallWatch | None
) -> tuple[ToolResultBlock, list[Any]]:
    """Run the call as a `Turn`: the result the model reads, and the values to route.

    Failures become error results: a call that cannot run (`CheckedCall.problem`),
    arguments the tool refuses (`ToolArgumentsError`, which lists every
    problem), and any exception the tool raises (a timeout included),
    whatever the tool's or the agent's `on_tool_error`: in a model loop the
    model is the caller that handles a tool's failure.
    Values the tool produces that an agent routes (`ContextItem`, `Turn`) are
    returned for routing; an item's content is part of the result too.
    """
    call, item = checked.call, checked.tool
    if checked.problem is not None:
        return _error(call, checked.problem), []
    assert item is not None  # a call without a problem has its tool
    try:
        turn = Turn(item, kwargs=checked.arguments, timeout=seconds)
        if item.is_generator:
            values = [value async for value in turn._yielding(hooks)]
        else:
            values = [await turn._returning(hooks)]
    except Exception as exc:  # the model reads what went wrong, and can try again
        if watch is not None:
            watch.failed(exc)
        return _error(call, f"{type(exc).__name__}: {exc}"), []
    routed = [value for value in values if isinstance(value, ContextItem | Turn)]
    shown = [
        value.content if isinstance(value, ContextItem) else value
        for value in values
        if not isinstance(value, Turn)
    ]
    return ToolResultBlock(call.id, _content(shown)), routed


def _content(values: list[Any]) -> str | list[TextBlock | ImageBlock]:
    if len(values) == 1:
        return _one(values[0])
    if all(isinstance(value, str) for value in values):
        return "\n".join(values)
    return _json(values)


def _one(value: Any) -> str | list[TextBlock | ImageBlock]:
    if isinstance(value, str):
        return value
    if isinstance(value, TextBlock | ImageBlock):
        return [value]
    if isinstance(value, Message):
        value = list(value.content)
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(block, TextBlock | ImageBlock) for block in value)
    ):
        return list(value)
    return _json(value)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return str(value)
