"""What a `ModelLoop` reports while it runs: one typed event per thing that happened.

`loop.stream()` yields them all, as they happen; `loop.run()` consumes them
and returns the last, `LoopFinished`. The text of a reply arrives as
`TextDelta`s, a reasoning model's thinking as `ThinkingDelta`s and its tool
calls as `ToolCallDelta`s (streaming only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias

from pygents_ctx.context.config import PromptWindow
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.usage import Usage
from pygents_ctx.errors import ModelAPIError
from pygents_ctx.model.base import ModelResponse, TextDelta, ThinkingDelta, ToolCallDelta

if TYPE_CHECKING:
    from pygents_ctx.turns import Turn

__all__ = [
    "AgentValue",
    "LoopEvent",
    "LoopFinished",
    "LoopStop",
    "ModelReplied",
    "ModelRetry",
    "StepStarted",
    "ToolApprovalRequired",
    "ToolCallFinished",
    "ToolCallStarted",
]


class LoopStop(Enum):
    """Why a `ModelLoop` run ended.

    `LENGTH`: the model's reply was cut by its token limit (`max_tokens`),
    unfinished. Its text so far is stored and is `LoopFinished.message`; its
    tool calls are not stored (the last one's arguments are cut) and do not
    run. Raise `ModelSettings.max_tokens`, then ask again.

    `REFUSAL`: the model declined to answer (`ModelResponse.refusal`). The run
    ends at once, without asking again (a refusal is no malformed answer to
    correct): `LoopFinished.refusal` is its text, `LoopFinished.output` is
    None. The refusal is stored as the assistant's reply (its text alone,
    with `metadata={"refusal": True}`): the reply's tool calls do not run and
    are not stored, so the conversation is valid for the next prompt.
    """

    ANSWER = "answer"
    MAX_STEPS = "max_steps"
    TOKEN_BUDGET = "token_budget"
    COST_BUDGET = "cost_budget"
    APPROVAL = "approval"
    LENGTH = "length"
    REFUSAL = "refusal"


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A model call is about to be made: step `step` of the run, shown `window`."""

    step: int
    window: PromptWindow


@dataclass(frozen=True, slots=True)
class ModelRetry:
    """A model call failed transiently and will be tried again after `delay` seconds.

    When streaming, the deltas of the failed attempt are void: the reply
    starts over.

    Attributes:
        step: The step whose call failed.
        attempt: How many attempts have failed so far (1 after the first).
        delay: Seconds until the next attempt.
        error: What went wrong.
    """

    step: int
    attempt: int
    delay: float
    error: ModelAPIError


@dataclass(frozen=True, slots=True)
class ModelReplied:
    """The model replied, and the reply is stored (of a reply its token limit cut, the text).

    Attributes:
        step: The step.
        response: The reply, with the usage the provider reported.
        estimated_input_tokens: The window's size as this library counted it,
            to compare with `response.usage.input_tokens`.
    """

    step: int
    response: ModelResponse
    estimated_input_tokens: int

    @property
    def message(self) -> Message:
        """The reply."""
        return self.response.message


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call of the model's begins to run."""

    step: int
    call: ToolUseBlock


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call of the model's ended: `result` is what the model will read.

    An error (an unknown tool, arguments that are not JSON, an exception the
    tool raised) is a result with `is_error=True`.
    """

    step: int
    call: ToolUseBlock
    result: ToolResultBlock


@dataclass(frozen=True, slots=True)
class ToolApprovalRequired:
    """A tool call of the model's waits for a person's decision; the run ends after these.

    Decide with `await loop.approve(call.id)` or `await loop.reject(call.id, reason)`,
    then run the loop again. `step` is the run's step count: 0 when a run
    that continues stops again before calling the model.
    """

    step: int
    call: ToolUseBlock


@dataclass(frozen=True, slots=True)
class LoopFinished:
    """The run ended: with the model's answer, at a limit, refused, or waiting for approvals.

    Attributes:
        reason: Why it ended.
        message: The answer (`reason` is `ANSWER`), the stored part of a reply
            its token limit cut (`LENGTH`; None when it had no text), the
            stored refusal (`REFUSAL`), the reply whose tool calls wait for a
            person (`APPROVAL`: its text is what the model wrote beside
            them), or None.
        steps: The model calls this run made.
        usage: The tokens they used, as the provider reported them.
        pending: The tool calls waiting for a person's decision (`reason`
            is `APPROVAL`), in the order the model made them; else empty.
        output: The answer as the loop's `output_type` (`ModelLoop(output_type=T)`):
            a `T`; None without an output type, or when the run ended without
            an answer (at a limit, or refused).
        refusal: The model's refusal, in words (`reason` is `REFUSAL`); else None.
    """

    reason: LoopStop
    message: Message | None
    steps: int
    usage: Usage = field(default_factory=Usage)
    pending: tuple[ToolUseBlock, ...] = ()
    output: Any = None
    refusal: str | None = None

    @property
    def text(self) -> str:
        """The message's text: the answer, the refusal, the text beside waiting calls; else `""`."""
        return "" if self.message is None else self.message.text


@dataclass(frozen=True, slots=True)
class AgentValue:
    """A value another turn of the agent produced during the run (not one of the loop's)."""

    turn: Turn
    value: Any


LoopEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ToolCallDelta
    | StepStarted
    | ModelRetry
    | ModelReplied
    | ToolCallStarted
    | ToolCallFinished
    | ToolApprovalRequired
    | LoopFinished
    | AgentValue
)
