"""Test doubles for code built on `pygents_ctx`: nothing here touches the network.

- `ScriptedSummarizer`: a `Summarizer` that replies from a script and records
  every call.
- `FixedTokenCounter`: a `TokenCounter` that gives every text the same count
  and counts how often it was asked.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias

from pygents_ctx.context.messages import Message

__all__ = ["FixedTokenCounter", "ScriptedSummarizer", "SummarizerCall"]

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

    Example:
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


# ----------------------------------------------------------------------------- token counters


class FixedTokenCounter:
    """A `TokenCounter` that counts every text as `tokens`, and counts its own calls.

    Useful to make token arithmetic obvious in tests, and to check that code
    reuses cached counts instead of tokenizing again (`calls` stays put).

    Args:
        tokens: The count every text gets, even an empty one.

    Raises:
        ValueError: `tokens` is not an int of at least 0.

    Example:
        >>> counter = FixedTokenCounter(3)
        >>> counter("any text"), counter.calls
        (3, 1)
    """

    __slots__ = ("calls", "tokens")

    def __init__(self, tokens: int = 1) -> None:
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ValueError(
                f"FixedTokenCounter tokens must be an int of at least 0, not {tokens!r}"
            )
        self.tokens = tokens
        self.calls = 0

    def __repr__(self) -> str:
        return f"FixedTokenCounter({self.tokens})"

    def __call__(self, text: str, /) -> int:
        """`tokens`, whatever the text."""
        self.calls += 1
        return self.tokens
