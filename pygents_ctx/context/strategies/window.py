"""Windows by count: `SlidingWindow`, `TrimRounds`, and the `Truncate` backstop.

All three keep the head (leading system messages) and the task, then the
newest whole rounds that stay within their limit, so the window is always the
head plus a suffix of whole rounds: no tool call loses its result, no result
loses its call, and parallel calls stay together. The newest round is always
kept, even when it alone is over the limit (a model must see the result it is
answering). Rounds are found from the newest end, so a call costs time in
proportion to the window kept, not to the history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from pygents_ctx.context.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.strategies._rounds import head_end, rounds_newest_first
from pygents_ctx.context.strategies.base import OnOverflow, check_count, check_on_overflow
from pygents_ctx.errors import ContextOverflowError

__all__ = ["SlidingWindow", "TrimRounds", "Truncate"]


class SlidingWindow:
    """Keep the newest messages, at most `max_messages` in all, cutting only between rounds.

    The head and the task are kept and count toward `max_messages`, so the
    window never has more than `max_messages` messages, with one exception:
    the head, the task and the newest round are always kept whole, even when
    together they are more (a round is never split to meet the count).

    Args:
        max_messages: The most messages the window holds, head and task included.

    Raises:
        TypeError: `max_messages` is not an int.
        ValueError: `max_messages` is below 1.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> history = [Message("system", "Be brief."), Message("user", "task")] + [
        ...     Message("assistant" if i % 2 else "user", f"turn {i}") for i in range(10)
        ... ]
        >>> window = asyncio.run(SlidingWindow(6).compact(history))
        >>> [m.text for m in window]
        ['Be brief.', 'task', 'turn 6', 'turn 7', 'turn 8', 'turn 9']
    """

    def __init__(self, max_messages: int = 100) -> None:
        self.max_messages = check_count("SlidingWindow", "max_messages", max_messages, 1)

    def __repr__(self) -> str:
        return f"SlidingWindow(max_messages={self.max_messages})"

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The head, the task and the newest rounds within the count (`messages` if all fit)."""
        return self.fit(messages)

    def fit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        end = len(messages)
        if end <= self.max_messages:
            return messages
        start = head_end(messages)
        room = self.max_messages - start
        keep_from = end
        for round_start in rounds_newest_first(messages, start):
            if end - round_start > room:
                if keep_from == end:  # the newest round is kept whole, even over the count
                    keep_from = round_start
                break
            keep_from = round_start
        return _window(messages, start, keep_from)


class TrimRounds:
    """Keep the head, the task and the newest `max_rounds` rounds.

    A round starts with the first message after the task, with each user
    question, and with each assistant message that is not the direct answer
    to one; tool results belong to the round of their call. So a follow-up
    question stays with its answer, and each step of a tool loop is a round.

    Args:
        max_rounds: How many of the newest rounds to keep.

    Raises:
        TypeError: `max_rounds` is not an int.
        ValueError: `max_rounds` is below 1.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> history = [
        ...     Message("system", "Be brief."), Message("user", "task"),
        ...     Message("assistant", "a1"), Message("user", "u2"), Message("assistant", "a2"),
        ...     Message("user", "u3"), Message("assistant", "a3"),
        ... ]
        >>> [m.text for m in asyncio.run(TrimRounds(1).compact(history))]
        ['Be brief.', 'task', 'u3', 'a3']
    """

    def __init__(self, max_rounds: int) -> None:
        self.max_rounds = check_count("TrimRounds", "max_rounds", max_rounds, 1)

    def __repr__(self) -> str:
        return f"TrimRounds({self.max_rounds})"

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The head, the task and the newest rounds (`messages` if it has no more)."""
        return self.fit(messages)

    def fit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        start = head_end(messages)
        keep_from, kept = len(messages), 0
        for round_start in rounds_newest_first(messages, start):
            if kept == self.max_rounds:
                return _window(messages, start, keep_from)
            keep_from, kept = round_start, kept + 1
        return messages


class Truncate:
    """A hard backstop: at most `max_messages` messages and `max_chars` characters.

    Keeps the head, the task and the newest whole rounds within both limits
    (the head and the task count toward them). Characters are those of the
    text, of tool results' text, and of each tool call's name and the compact
    JSON of its input (what the token counters see); images and per-message
    framing count none. When even the head, the task and the newest round
    are over a limit, `on_overflow` decides: `"keep"` returns them anyway,
    `"raise"` raises `ContextOverflowError`. Put it last in a `Pipeline`;
    with `on_overflow="raise"` its limits are a guaranteed ceiling.

    Args:
        max_messages: The most messages in the window, or None for no count limit.
        max_chars: The most characters in the window, or None for no size limit.
        on_overflow: `"keep"` or `"raise"`, as above. The error's `tokens` and
            `budget` are in the unit of the limit that was exceeded (messages,
            or characters when the count fits).

    Raises:
        TypeError: A limit is not an int.
        ValueError: Neither limit is given, a limit is below 1, or
            `on_overflow` is not "keep" or "raise".

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> history = [Message("user", "task")] + [
        ...     Message("assistant" if i % 2 else "user", "x" * 100) for i in range(10)
        ... ]
        >>> window = asyncio.run(Truncate(max_chars=250).compact(history))
        >>> [len(m.text) for m in window]
        [4, 100, 100]
    """

    def __init__(
        self,
        *,
        max_messages: int | None = None,
        max_chars: int | None = None,
        on_overflow: OnOverflow = "keep",
    ) -> None:
        if max_messages is None and max_chars is None:
            raise ValueError(
                "Truncate needs a limit: give max_messages, max_chars, or both "
                "(e.g. Truncate(max_messages=200, max_chars=400_000))"
            )
        if max_messages is not None:
            check_count("Truncate", "max_messages", max_messages, 1)
        if max_chars is not None:
            check_count("Truncate", "max_chars", max_chars, 1)
        self.on_overflow = check_on_overflow("Truncate", on_overflow)
        self.max_messages = max_messages
        self.max_chars = max_chars

    def __repr__(self) -> str:
        return (
            f"Truncate(max_messages={self.max_messages}, max_chars={self.max_chars}, "
            f"on_overflow={self.on_overflow!r})"
        )

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The head, the task and the newest rounds within both limits (`messages` if all fit)."""
        return self.fit(messages)

    def fit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        end = len(messages)
        if self.max_chars is None and self.max_messages is not None and end <= self.max_messages:
            return messages  # only a count limit, and it holds: nothing to look at
        start = head_end(messages)
        count, chars = start, _chars(messages[:start])
        keep_from = end
        for round_start in rounds_newest_first(messages, start):
            size = _chars(messages[round_start:keep_from])
            if self._over(count + keep_from - round_start, chars + size):
                if keep_from == end:  # not even the newest round fits
                    self._overflow(count + end - round_start, chars + size)
                    keep_from = round_start
                break
            count, chars, keep_from = count + keep_from - round_start, chars + size, round_start
        else:
            if self._over(count, chars):  # the head alone is over a limit
                self._overflow(count, chars)
        return _window(messages, start, keep_from)

    def _over(self, count: int, chars: int) -> bool:
        return (self.max_messages is not None and count > self.max_messages) or (
            self.max_chars is not None and chars > self.max_chars
        )

    def _overflow(self, count: int, chars: int) -> None:
        if self.on_overflow == "keep":
            return
        if self.max_messages is not None and count > self.max_messages:
            size, limit, unit = count, self.max_messages, "messages"
        else:
            size, limit, unit = chars, self.max_chars or 0, "characters"
        raise ContextOverflowError(
            f"Truncate: the smallest window it can build (head, task and the newest round) "
            f"has {size} {unit}, over max_{'chars' if unit == 'characters' else unit}={limit}; "
            f"raise the limit, shorten the newest round, or use on_overflow='keep'",
            tokens=size,
            budget=limit,
        )


def _chars(messages: Sequence[Message]) -> int:
    """The characters of `messages`, as `Truncate` documents them."""
    total = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                total += len(block.text)
            elif isinstance(block, ToolResultBlock):
                total += _result_chars(block)
            elif isinstance(block, ToolUseBlock):
                total += len(block.name) + len(_input_json(block.input))
    return total


def _result_chars(block: ToolResultBlock) -> int:
    if isinstance(block.content, str):
        return len(block.content)
    return sum(len(part.text) for part in block.content if isinstance(part, TextBlock))


def _input_json(data: dict[str, Any]) -> str:
    try:
        return orjson.dumps(data).decode()
    except TypeError:  # a value orjson cannot encode: count its repr, as the token counters do
        return json.dumps(data, ensure_ascii=False, default=repr)


def _window(messages: list[Message], start: int, keep_from: int) -> list[Message]:
    """The head (`messages[:start]`) and the rounds from `keep_from` on (`messages` if all)."""
    if keep_from == start:
        return messages
    return [*messages[:start], *messages[keep_from:]]
