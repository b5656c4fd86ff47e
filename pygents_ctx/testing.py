"""Test doubles for code built on `pygents_ctx`: nothing here touches the network.

- `ScriptedSummarizer`: a `Summarizer` that replies from a script and records
  every call.
- `FixedTokenCounter`: a `TokenCounter` that gives every text the same count
  and counts how often it was asked.
- `ScriptedModel`: a chat model (a `Model`) that answers from a script and
  records every window it was shown; `assistant()` and `tool_call()` write its
  replies.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import orjson

from pygents_ctx._checks import number, whole_number
from pygents_ctx.context.messages import Message, TextBlock, ToolUseBlock
from pygents_ctx.context.tokens import count_tokens
from pygents_ctx.context.usage import Usage
from pygents_ctx.model.base import (
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    TextDelta,
    ToolCallDelta,
    window_parts,
)

if TYPE_CHECKING:
    from pygents_ctx.model.base import Tools, Window
    from pygents_ctx.tools import Tool

__all__ = [
    "FixedTokenCounter",
    "ModelCall",
    "ScriptedModel",
    "ScriptedSummarizer",
    "SummarizerCall",
    "assistant",
    "tool_call",
]

SummaryReply: TypeAlias = str | BaseException | type[BaseException]
SummaryFunction: TypeAlias = Callable[[list[Message], str | None], str | Awaitable[str]]


# ----------------------------------------------------------------------------- summarizers


@dataclass(frozen=True, slots=True)
class SummarizerCall:
    """One call a `ScriptedSummarizer` received: the messages and the previous summary."""

    messages: tuple[Message, ...]
    previous_summary: str | None


class ScriptedSummarizer:
    """A `Summarizer` that replies from a script and records every call in `calls`.

    Args:
        script: The replies, in call order: a string is returned, an exception
            (instance or class) is raised. Or a function
            `(messages, previous_summary) -> str`, sync or async, that writes
            each reply. Default: `"summary 1"`, `"summary 2"`, ...
        error: When set, every call raises it instead of replying. It is a
            plain attribute: set it to make the summarizer fail, set it back to
            `None` to make it work again.

    A call is recorded before it replies or fails. A call failed by `error`
    uses no reply from the script. A script that runs out raises `RuntimeError`.

    Raises:
        TypeError: `script` is a single string (wrap it in a list) or not a
            list of replies or a function.

    Examples:
        >>> import asyncio
        >>> summarizer = ScriptedSummarizer(["They said hello."])
        >>> asyncio.run(summarizer([Message("user", "hello")], None))
        'They said hello.'
        >>> summarizer.calls[0].previous_summary is None
        True
    """

    def __init__(
        self,
        script: Iterable[SummaryReply] | SummaryFunction | None = None,
        *,
        error: BaseException | type[BaseException] | None = None,
    ) -> None:
        if isinstance(script, str | bytes):
            raise TypeError(
                f"ScriptedSummarizer script must be a list of replies, not one string; "
                f"write [{script!r}]"
            )
        self._function: SummaryFunction | None = None
        self._replies: list[SummaryReply] | None = None
        if callable(script):
            self._function = script
        elif script is not None:
            if not isinstance(script, Iterable):
                raise TypeError(
                    "ScriptedSummarizer script must be a list of replies or a function "
                    f"(messages, previous_summary) -> str, not {type(script).__name__}"
                )
            self._replies = list(script)
        self.error = error
        self.calls: list[SummarizerCall] = []
        self._used = 0  # replies taken from the script; a call failed by `error` takes none

    def __repr__(self) -> str:
        return f"ScriptedSummarizer(calls={len(self.calls)})"

    async def __call__(self, messages: list[Message], previous_summary: str | None, /) -> str:
        """Record the call, then reply (or raise) as scripted."""
        self.calls.append(SummarizerCall(tuple(messages), previous_summary))
        if self.error is not None:
            raise self.error
        if self._function is not None:
            reply = self._function(list(messages), previous_summary)
            return await reply if inspect.isawaitable(reply) else reply
        self._used += 1
        if self._replies is None:
            return f"summary {self._used}"
        if self._used > len(self._replies):
            raise RuntimeError(
                f"ScriptedSummarizer has no reply for call {len(self.calls)}: the script has "
                f"{len(self._replies)}; add replies or pass a function"
            )
        scripted = self._replies[self._used - 1]
        if isinstance(scripted, str):
            return scripted
        raise scripted


# ----------------------------------------------------------------------------- models

ModelReply: TypeAlias = (
    Message
    | str
    | ModelResponse
    | BaseException
    | type[BaseException]
    | Callable[[list[Message]], Message | str | Awaitable[Message | str]]
)
# A streamed reply's text comes a word at a time, with the space before it.
_WORDS = re.compile(r"\s*\S+|\s+")


def tool_call(name: str, /, **arguments: Any) -> ToolUseBlock:
    """A tool call block with a fresh unique id, for scripting a model's reply.

    Examples:
        >>> call = tool_call("search", query="tides")
        >>> call.name, call.input
        ('search', {'query': 'tides'})
    """
    return ToolUseBlock(f"call_{uuid.uuid4().hex[:16]}", name, arguments)


def assistant(*parts: str | ToolUseBlock) -> Message:
    """An assistant message from text and tool calls, in order.

    Examples:
        >>> assistant("Let me look.", tool_call("search", query="tides")).role
        'assistant'
    """
    blocks: list[TextBlock | ToolUseBlock] = []
    for part in parts:
        if isinstance(part, str):
            blocks.append(TextBlock(part))
        elif isinstance(part, ToolUseBlock):
            blocks.append(part)
        else:
            raise TypeError(
                f"assistant() takes text and tool_call() blocks, not {type(part).__name__}"
            )
    return Message("assistant", blocks)


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call a `ScriptedModel` received: the window it was shown and its size.

    Attributes:
        messages: The window.
        input_tokens: Its size, with `count_tokens`.
        tools: The names of the tools offered (through `complete` or `stream`).
        settings: The settings given, if any.
    """

    messages: tuple[Message, ...]
    input_tokens: int
    tools: tuple[str, ...] = ()
    settings: ModelSettings | None = None


class ScriptedModel:
    """A chat model that replies from a script and records every call in `calls`.

    It is a `Model`: a `ModelLoop` calls `complete()` or `stream()`. Called
    directly (`await model(messages)`), it returns the next scripted reply as
    an assistant `Message`.

    Args:
        script: The replies, in call order: a `Message` is returned as is, a
            string as an assistant text message, a `ModelResponse` as it is
            (with its usage), an exception (instance or class) is raised, and a
            function `(messages) -> Message | str`, sync or async, writes the
            reply from the window it is shown.
        chunk_delay: Seconds `stream()` waits before each piece it yields, to
            watch a reply being written (or to interrupt it in a test).

    The usage of a reply that is not a `ModelResponse` is counted with
    `count_tokens`: the window's size as input, the reply's as output. A
    script that runs out raises `RuntimeError`.

    Examples:
        >>> import asyncio
        >>> model = ScriptedModel(["Hello!"])
        >>> asyncio.run(model([Message("user", "hi")])).text
        'Hello!'
        >>> model.calls[0].input_tokens
        5
    """

    def __init__(self, script: Iterable[ModelReply], *, chunk_delay: float = 0.0) -> None:
        if isinstance(script, str | bytes) or not isinstance(script, Iterable):
            raise TypeError(
                f"ScriptedModel script must be a list of replies, not {type(script).__name__}"
            )
        number(chunk_delay, "ScriptedModel chunk_delay", fix="a number of seconds")
        self._replies = list(script)
        self.chunk_delay = chunk_delay
        self.calls: list[ModelCall] = []

    def __repr__(self) -> str:
        return f"ScriptedModel(calls={len(self.calls)}, left={self.remaining})"

    @property
    def remaining(self) -> int:
        """How many scripted replies are left."""
        return max(0, len(self._replies) - len(self.calls))

    async def __call__(self, messages: list[Message], /) -> Message:
        """Record the window, then reply (or raise) as scripted."""
        return (await self._reply(list(messages), (), None)).message

    async def complete(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """Record the call, then reply (or raise) as scripted (see `Model.complete`)."""
        messages, _ = window_parts(window)
        return await self._reply(messages, tools, settings)

    async def stream(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> AsyncIterator[ModelStreamEvent]:
        """The scripted reply in pieces: its text a word at a time, each tool call whole.

        Then the `ModelResponse`, as `complete` returns it.
        """
        messages, _ = window_parts(window)
        response = await self._reply(messages, tools, settings)
        pieces: list[ModelStreamEvent] = [
            TextDelta(word)
            for block in response.message.content
            if isinstance(block, TextBlock)
            for word in _WORDS.findall(block.text)
        ]
        pieces += [
            ToolCallDelta(index, call.id, call.name, orjson.dumps(call.input).decode())
            for index, call in enumerate(response.message.tool_uses)
        ]
        for piece in [*pieces, response]:
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield piece

    async def _reply(
        self, window: list[Message], tools: Sequence[Tool[..., Any]], settings: ModelSettings | None
    ) -> ModelResponse:
        tokens = count_tokens(window)
        names = tuple(t.metadata.name for t in tools)
        self.calls.append(ModelCall(tuple(window), tokens, names, settings))
        if len(self.calls) > len(self._replies):
            raise RuntimeError(
                f"ScriptedModel has no reply for call {len(self.calls)}: the script has "
                f"{len(self._replies)}; add replies"
            )
        scripted = self._replies[len(self.calls) - 1]
        if isinstance(scripted, BaseException) or (
            isinstance(scripted, type) and issubclass(scripted, BaseException)
        ):
            raise scripted
        if isinstance(scripted, ModelResponse):
            return scripted
        reply: object = scripted
        if not isinstance(scripted, Message | str) and callable(scripted):
            write: Callable[[list[Message]], object] = scripted
            reply = write(window)
            if inspect.isawaitable(reply):
                reply = await reply
        if isinstance(reply, str):
            reply = Message("assistant", reply)
        if isinstance(reply, Message):
            usage = Usage(tokens, count_tokens([reply]))
            return ModelResponse(
                reply, usage, "scripted", "tool_calls" if reply.tool_uses else "stop"
            )
        raise TypeError(
            f"ScriptedModel reply {len(self.calls)} is {type(reply).__name__}; "
            "script a Message, a string, a ModelResponse, an exception or a function"
        )


# ----------------------------------------------------------------------------- token counters


class FixedTokenCounter:
    """A `TokenCounter` that counts every text as `tokens`, and counts its own calls.

    Useful to make token arithmetic obvious in tests, and to check that code
    reuses cached counts instead of tokenizing again (`calls` stays put).

    Args:
        tokens: The count every text gets, even an empty one.

    Raises:
        TypeError: `tokens` is not an int.
        ValueError: `tokens` is negative.

    Examples:
        >>> counter = FixedTokenCounter(3)
        >>> counter("any text"), counter.calls
        (3, 1)
    """

    __slots__ = ("calls", "tokens")

    def __init__(self, tokens: int = 1) -> None:
        whole_number(tokens, "FixedTokenCounter tokens")
        self.tokens = tokens
        self.calls = 0

    def __repr__(self) -> str:
        return f"FixedTokenCounter({self.tokens})"

    def __call__(self, text: str, /) -> int:
        """`tokens`, whatever the text."""
        self.calls += 1
        return self.tokens
