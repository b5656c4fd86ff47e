"""What every model adapter speaks: the `Model` protocol, its settings, replies and stream.

A model is shown a window of messages and the tools it may call, and answers
with one assistant `Message` and the usage the provider reported
(`ModelResponse`). Streaming yields the reply as it is written (`TextDelta`,
`ToolCallDelta`) and then the same `ModelResponse`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from pygents_ctx._checks import number, whole_number
from pygents_ctx.context.config import PromptWindow
from pygents_ctx.context.messages import Message
from pygents_ctx.context.usage import Usage

if TYPE_CHECKING:
    from pygents_ctx.tools import Tool

Window: TypeAlias = PromptWindow | Sequence[Message]
"""What a model is shown: a `PromptWindow`, or a list of `Message`s."""
Tools: TypeAlias = "Sequence[Tool[..., Any]]"
"""The tools a model is offered."""

__all__ = [
    "Model",
    "ModelResponse",
    "ModelSettings",
    "ModelStreamEvent",
    "OutputSchema",
    "Pricing",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
]


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """The shape a model's final answer must take: a JSON schema the provider enforces.

    Each adapter asks for it the provider's native way: OpenAI's
    `response_format` (a strict JSON schema), the Responses API's
    `text.format`, Anthropic's through a final tool the model is made to
    call, whose input becomes the reply's text. Either way the reply's text is
    the JSON document. `ModelLoop(output_type=...)` builds one for you.

    Attributes:
        name: A name for the schema (letters, digits, `_` and `-`; at most 64).
        schema: The JSON schema of an object.
        description: What the answer is, shown to the model.
        strict: Ask the provider to enforce the schema exactly.

    Raises:
        ValueError: `name` is not a valid name, or `schema` does not describe an object.
    """

    name: str
    schema: Mapping[str, Any] = field(repr=False)
    description: str | None = None
    strict: bool = True

    def __post_init__(self) -> None:
        if (
            not isinstance(self.name, str)
            or not 0 < len(self.name) <= 64
            or not all(c.isascii() and (c.isalnum() or c in "_-") for c in self.name)
        ):
            raise ValueError(
                f"OutputSchema.name must be 1-64 letters, digits, '_' or '-', not {self.name!r}"
            )
        if not isinstance(self.schema, Mapping) or self.schema.get("type") != "object":
            raise ValueError(
                f"OutputSchema.schema must be the JSON schema of an object "
                f"({{'type': 'object', ...}}), not {self.schema!r}"
            )


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How a model should answer; `None` leaves a setting to the provider's default.

    An adapter's own settings are the defaults; settings given for one call
    (or to a `ModelLoop`) override them field by field (`merged`).

    Attributes:
        max_tokens: The most tokens the reply may have (Anthropic requires one;
            its adapter uses 4096 when none is set).
        temperature: Sampling temperature.
        top_p: Nucleus sampling.
        stop: Sequences that end the reply.
        tool_choice: `"auto"`, `"required"` (call at least one tool), `"none"`,
            or a tool's name (call that tool).
        parallel_tool_calls: Whether the model may call several tools in one
            reply (False asks for one at a time).
        extra_body: More request fields, sent as they are (provider-specific
            options such as `{"reasoning_effort": "low"}`).
        extra_headers: More HTTP headers (such as an `anthropic-beta` header).
        output_schema: The shape the answer must take (`OutputSchema`); None: free text.

    Raises:
        ValueError: A number is out of range.
        TypeError: A field has the wrong type.

    Examples:
        >>> ModelSettings(max_tokens=500).merged(ModelSettings(temperature=0.0))
        ModelSettings(max_tokens=500, temperature=0.0)
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    tool_choice: Literal["auto", "required", "none"] | str | None = None
    parallel_tool_calls: bool | None = None
    extra_body: Mapping[str, Any] | None = field(default=None, repr=False)
    extra_headers: Mapping[str, str] | None = field(default=None, repr=False)
    output_schema: OutputSchema | None = None

    def __post_init__(self) -> None:
        if self.max_tokens is not None:
            whole_number(self.max_tokens, "ModelSettings.max_tokens", least=1)
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if value is not None:
                number(value, f"ModelSettings.{name}", fix="None leaves it to the provider")
        stop: object = self.stop
        if stop is not None:
            if (
                isinstance(stop, str)
                or not isinstance(stop, Iterable)
                or not all(isinstance(s, str) for s in stop)
            ):
                raise TypeError(
                    f"ModelSettings.stop must be a tuple of strings, not {self.stop!r}; "
                    "write stop=('END',)"
                )
            object.__setattr__(self, "stop", tuple(stop))
        if self.tool_choice is not None and (
            not isinstance(self.tool_choice, str) or not self.tool_choice
        ):
            raise TypeError(
                "ModelSettings.tool_choice must be 'auto', 'required', 'none' or a tool name, "
                f"not {self.tool_choice!r}"
            )
        if self.parallel_tool_calls is not None and not isinstance(self.parallel_tool_calls, bool):
            raise TypeError(
                f"ModelSettings.parallel_tool_calls must be a bool or None, "
                f"not {self.parallel_tool_calls!r}"
            )
        for name in ("extra_body", "extra_headers"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(f"ModelSettings.{name} must be a dict or None, not {value!r}")
        if self.output_schema is not None and not isinstance(self.output_schema, OutputSchema):
            raise TypeError(
                f"ModelSettings.output_schema must be an OutputSchema or None, "
                f"not {self.output_schema!r}"
            )

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) is not None and f.repr
        )
        hidden = any(getattr(self, name) for name in ("extra_body", "extra_headers"))
        more = (", ..." if shown else "...") if hidden else ""
        return f"ModelSettings({shown}{more})"

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every field `override` sets replacing them.

        `extra_body` and `extra_headers` merge key by key, the override winning.
        """
        if override is None:
            return self
        changes: dict[str, Any] = {
            f.name: getattr(override, f.name)
            for f in fields(override)
            if getattr(override, f.name) is not None
        }
        for name in ("extra_body", "extra_headers"):
            mine, theirs = getattr(self, name), getattr(override, name)
            if mine and theirs:
                changes[name] = {**mine, **theirs}
        return replace(self, **changes)


# The finish reasons of a reply stopped by its token limit, in each API's words.
LENGTH_REASONS: Final = frozenset({"length", "max_tokens", "max_output_tokens"})


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A model's reply: the assistant message, and what the provider reported about it.

    Attributes:
        message: The reply, an assistant `Message` of text and tool calls.
        usage: The tokens the provider counted (all zero when it reported none).
        model: The model that answered, as the provider named it.
        finish_reason: Why the reply ended, in the provider's words
            (`"stop"`, `"tool_calls"`, `"end_turn"`, `"max_tokens"`, ...).
        refusal: The model declined to answer: its refusal, in words (None:
            it did not). Chat Completions' `message.refusal`, the Responses
            API's `refusal` content part, or, for Anthropic's
            `stop_reason: "refusal"`, the API's explanation (`stop_details`)
            or a sentence saying so. `message` still holds what the reply
            held; a `ModelLoop` ends its run with `LoopStop.REFUSAL`.

    Raises:
        TypeError: `refusal` is neither None nor a non-empty str.
    """

    message: Message
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    refusal: str | None = None

    def __post_init__(self) -> None:
        if self.refusal is not None and (not isinstance(self.refusal, str) or not self.refusal):
            raise TypeError(
                f"ModelResponse.refusal must be the refusal's text (a non-empty str) or None, "
                f"not {self.refusal!r}"
            )

    @property
    def hit_length_limit(self) -> bool:
        """Whether the reply was stopped by its token limit (`max_tokens`), unfinished.

        `finish_reason` is `"length"` (OpenAI), `"max_tokens"` (Anthropic) or
        `"max_output_tokens"` (the Responses API).
        """
        return self.finish_reason in LENGTH_REASONS


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's text, as it was streamed."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of a reasoning model's thinking, as it was streamed (kept as a `ThinkingBlock`)."""

    thinking: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a tool call, as it was streamed.

    The first piece of a call has its `id` and `name`; later pieces carry more
    of its `arguments`, JSON text to be joined in order.

    Attributes:
        index: Which call of the reply this piece belongs to (0 for the first).
        id: The call's id (on its first piece; None after).
        name: The tool's name (on its first piece; None after).
        arguments: The next piece of the arguments' JSON text.
    """

    index: int
    id: str | None
    name: str | None
    arguments: str


ModelStreamEvent: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta | ModelResponse


@runtime_checkable
class Model(Protocol):
    """A chat model: shown a window and tools, it replies with an assistant message.

    The window (`Window`) is a `PromptWindow` or a list of `Message`s; the
    tools (`Tools`) a sequence of `Tool`s.

    `OpenAIModel`, `AnthropicModel` and `pygents_ctx.testing.ScriptedModel`
    implement it; so can any class with these two methods.
    """

    async def complete(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """The model's reply to `window`, offered `tools`.

        Raises:
            ModelAPIError: The provider refused the call or could not be reached.
            ModelResponseError: The reply cannot be read as a `Message`.
        """
        ...

    def stream(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> AsyncIterator[ModelStreamEvent]:
        """The reply as it is written (text, thinking and tool-call deltas), then the reply.

        Raises:
            ModelAPIError, ModelResponseError: As for `complete`, also mid-stream.
        """
        ...


def window_parts(window: Window) -> tuple[list[Message], int | None]:
    """The messages of `window`, and its stable prefix (None when it promises none).

    Raises:
        TypeError: `window` is not a `PromptWindow` or a sequence of `Message`s.
    """
    if isinstance(window, PromptWindow):
        return list(window.messages), window.stable_prefix
    given: object = window
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise TypeError(
            f"a model is shown a PromptWindow or a list of Messages, not {type(given).__name__}"
        )
    messages = list(given)
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"window[{index}] must be a Message, not {type(message).__name__}")
    return messages, None


@dataclass(frozen=True, slots=True)
class Pricing:
    """What a model's tokens cost, per million, for a `ModelLoop`'s cost budget.

    Attributes:
        input: The price of a million input tokens that the cache did not serve.
        output: The price of a million output tokens.
        cached_input: The price of a million input tokens read from the cache
            (default: `input`).
        cache_write: The price of a million input tokens written to the cache
            (default: `input`).

    Raises:
        TypeError: A price is not a number.
        ValueError: A price is negative or not finite.

    Examples:
        >>> prices = Pricing(input=3.0, output=15.0, cached_input=0.3)
        >>> round(prices.cost(Usage(1_000_000, 100_000, cached_tokens=500_000)), 2)
        3.15
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input", "cache_write"):
            value = getattr(self, name)
            if value is None and name in ("cached_input", "cache_write"):
                continue
            number(value, f"Pricing.{name}", fix="a price per million tokens")

    def cost(self, usage: Usage) -> float:
        """What `usage` costs at these prices."""
        cached = self.input if self.cached_input is None else self.cached_input
        written = self.input if self.cache_write is None else self.cache_write
        fresh = usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens
        return (
            fresh * self.input
            + usage.cached_tokens * cached
            + usage.cache_write_tokens * written
            + usage.output_tokens * self.output
        ) / 1_000_000
