"""Prompt-cache-stable windows: `PinnedWindow` edits only up to a pin.

Providers cache a prompt's prefix. A strategy that re-edits old messages on
every call changes that prefix and throws the cache away each time. A pinned
window runs its strategy once over the history, pins that result, and then only
appends what comes after it, so each window starts with the previous one byte
for byte. It re-pins (runs the strategy over everything again) only when the
window would grow past its budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.strategies.base import (
    ContextStrategy,
    Measure,
    check_count,
    check_strategy,
)
from pygents_ctx.context.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["PinnedWindow", "Window"]


@dataclass(frozen=True, slots=True)
class Window:
    """A window built for a model call, by a `PinnedWindow` or a `StableWindow`.

    Attributes:
        messages: The messages to send (a new list each time; changing it
            changes nothing in the builder).
        tokens: Their token count.
        pin: Where the history's messages start to follow unedited: for a
            `PinnedWindow`, how many history messages its strategy edited; for
            a `StableWindow`, the history index its kept rounds start at.
        repinned: True if the window does not start with the previous one: a
            `PinnedWindow`'s strategy ran (the first window, one over budget,
            or a rewritten history), or a `StableWindow` compacted or read the
            history from its start.
        stable_prefix: How many leading messages stay as they were, where a
            prompt-cache breakpoint stays valid: a `PinnedWindow`'s pinned part
            (the same until the next re-pin), a `StableWindow`'s previous
            window (its head after a compaction).
    """

    messages: list[Message]
    tokens: int
    pin: int
    repinned: bool
    stable_prefix: int = 0


class _Pinned:
    """What one pin built: the window so far, its size, and the history it came from."""

    __slots__ = (
        "calls",
        "first",
        "last",
        "out",
        "pin",
        "pinned",
        "seen",
        "stable",
        "tokens",
        "untouched",
    )

    def __init__(self, history: list[Message], edited: list[Message], measure: Measure) -> None:
        self.pin = self.seen = len(history)
        self.first = history[0] if history else None
        self.pinned = self.last = history[-1] if history else None
        self.out = list(edited)
        self.stable = len(self.out)
        self.tokens = measure.total(self.out)
        # Calls present in the window: a later result for any other call is an orphan.
        self.calls = {
            block.id
            for message in self.out
            for block in message.content
            if type(block) is ToolUseBlock
        }
        self.untouched = edited is history  # the window is the history itself

    def extends(self, history: Sequence[Message]) -> bool:
        """True if `history` is the one seen so far plus new messages (checked at three points)."""
        size = len(history)
        if size < self.seen:
            return False
        return all(
            _same(history[index], message)
            for index, message in (
                (0, self.first),
                (self.pin - 1, self.pinned),
                (self.seen - 1, self.last),
            )
            if message is not None
        )

    def advance(self, history: Sequence[Message], measure: Measure) -> None:
        """Append the history's new messages, unedited except for orphan results."""
        for message in history[self.seen :]:
            kept = self._pair(message)
            if kept is None:
                continue
            self.out.append(kept)
            self.tokens += measure(kept)
        self.seen = len(history)
        if history:
            self.last = history[-1]

    def _pair(self, message: Message) -> Message | None:
        calls = self.calls
        for block in message.content:
            if type(block) is ToolUseBlock:
                calls.add(block.id)
        if all(
            type(block) is not ToolResultBlock or block.tool_use_id in calls
            for block in message.content
        ):
            return message
        # The strategy dropped the call this result answers: drop the result too.
        self.untouched = False
        kept = [
            block
            for block in message.content
            if type(block) is not ToolResultBlock or block.tool_use_id in calls
        ]
        return Message(message.role, kept) if kept else None


def _same(a: Message, b: Message) -> bool:
    # Identity first; a store that reloads messages gives equal copies.
    return a is b or a == b


class PinnedWindow:
    """Build windows whose prefix stays the same from call to call, for prompt caching.

    The first `build` runs `strategy` over the whole history and pins there. Later
    calls append the history's new messages after that result, untouched, so
    each window begins with the previous window, byte for byte. When the window
    would exceed `max_tokens`, the builder re-pins: it runs the strategy over the
    whole history again and pins at its end. It also re-pins when the history no
    longer extends the one it pinned (cleared, shortened, or its first, pinned or
    last-seen message replaced); it checks those three messages, not every one,
    so call `reset()` after rewriting messages in the middle.

    Give the strategy a smaller budget than `max_tokens` (say 60%): the gap is
    what the window can grow by before the next re-pin, the one call that misses
    the provider's cache. A strategy whose window is already over `max_tokens`
    re-pins on every new message.

    Pairing holds across the pin: a result whose call the strategy dropped is
    left out of the window (the rest of its message stays). The window's `tokens`
    are kept as a running total, so a call costs only the new messages.

    One builder serves one conversation. It is also a `ContextStrategy`:
    `compact(messages)` returns `build(messages).messages` (the input list itself
    when the window is the history unchanged).

    Args:
        strategy: The edits to apply up to the pin, e.g. `FitTokens` or `Summarize`.
        max_tokens: The budget that triggers a re-pin.
        counter: How to count text (default: `EstimatedTokenCounter()`).
        per_message_overhead: Tokens added per message.
        tokens_per_media: Tokens counted per image.

    Raises:
        TypeError: `strategy` has no `compact` method, or `max_tokens` is not an int.
        ValueError: `max_tokens` is below 1.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> from pygents_ctx.context.strategies.budget import FitTokens
        >>> builder = PinnedWindow(FitTokens(50), max_tokens=80)
        >>> text = "the quick brown fox jumps over the lazy dog"  # 10 tokens
        >>> history = [Message("user", "task")]
        >>> for step in range(6):
        ...     history.append(Message("assistant" if step % 2 == 0 else "user", text))
        ...     window = asyncio.run(builder.build(history))
        ...     print(len(window.messages), window.tokens, window.repinned)
        2 19 True
        3 33 False
        4 47 False
        5 61 False
        6 75 False
        4 47 True
    """

    def __init__(
        self,
        strategy: ContextStrategy,
        max_tokens: int,
        *,
        counter: TokenCounter = DEFAULT_COUNTER,
        per_message_overhead: int = 4,
        tokens_per_media: int = 600,
    ) -> None:
        check_strategy(strategy, "PinnedWindow strategy")
        self.max_tokens = check_count("PinnedWindow", "max_tokens", max_tokens, 1)
        self.measure = Measure(counter, per_message_overhead, tokens_per_media)
        self.strategy = strategy
        self._pinned: _Pinned | None = None

    def __repr__(self) -> str:
        return f"PinnedWindow({self.strategy!r}, max_tokens={self.max_tokens})"

    @property
    def pin(self) -> int | None:
        """The pin in use: how many history messages the strategy edited (None before a build)."""
        return None if self._pinned is None else self._pinned.pin

    def reset(self) -> None:
        """Forget the pin: the next `build` runs the strategy over the whole history."""
        self._pinned = None

    async def build(self, messages: list[Message]) -> Window:
        """The window for `messages`: the pinned edits, then the messages since the pin.

        Raises:
            ContextOverflowError: The strategy raises it when it runs (a budgeted
                strategy with `on_overflow="raise"`); so does anything else it raises.
        """
        pinned = self._pinned
        if pinned is not None and pinned.extends(messages):
            pinned.advance(messages, self.measure)
            # Re-pinning with nothing new since the pin would give the same window.
            if pinned.tokens <= self.max_tokens or pinned.pin == pinned.seen:
                return Window(list(pinned.out), pinned.tokens, pinned.pin, False, pinned.stable)
        edited = await self.strategy.compact(messages)
        pinned = self._pinned = _Pinned(messages, edited, self.measure)
        return Window(list(pinned.out), pinned.tokens, pinned.pin, True, pinned.stable)

    async def compact(self, messages: list[Message]) -> list[Message]:
        """`build(messages).messages`, or `messages` itself when the window is the history."""
        window = await self.build(messages)
        pinned = self._pinned
        if pinned is not None and pinned.untouched:
            return messages
        return window.messages
