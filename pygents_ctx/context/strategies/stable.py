"""`StableWindow`: an append-only window that compacts rarely, in one bounded step.

Providers serve a prompt's prefix from their cache when it is byte for byte the
prefix of an earlier prompt (OpenAI automatically, from 1,024 tokens; Anthropic
up to the breakpoints a request marks). A window that slides by a round on
every call changes its start every time and is never served from the cache. A
stable window is the previous window plus the new messages, so every call
reuses the whole previous prompt, until the window passes `max_tokens`: then
whole rounds go from its front, down to `low_water * max_tokens` at once, and
the window grows by appending again. The one call after a compaction misses
the cache; the calls in between hit it.

The window is a function of the history alone: the history is read message by
message, and a compaction happens right after the message that takes the
window over its budget, whenever the window is asked for. So a builder that
sees every step, one that starts on a resumed session, and one that replays a
stored run all build the same window, byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence

from pygents_ctx._checks import fraction
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.strategies._rounds import head_end, opens_round
from pygents_ctx.context.strategies.base import (
    Measure,
    OnOverflow,
    check_count,
    check_on_overflow,
    overflow,
)
from pygents_ctx.context.strategies.pinned import Window
from pygents_ctx.context.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["StableWindow"]


class _Built:
    """What a builder has read of one history: its head, the kept messages, and their pairs."""

    __slots__ = (
        "answers",
        "body",
        "calls",
        "compactions",
        "cut",
        "first",
        "head",
        "head_tokens",
        "index",
        "kept",
        "last",
        "seen",
        "tokens",
    )

    def __init__(self, history: Sequence[Message], head: int, measure: Measure) -> None:
        self.head = head
        self.head_tokens = measure.total(history, 0, head)
        self.tokens = self.head_tokens
        self.seen = head
        self.cut = head  # the history index the kept messages start at
        self.body: list[Message] = []  # the window after the head, as sent
        self.index: list[int] = []  # the history index of each message of `body`
        self.calls: dict[str, int] = {}  # call id -> history index, for the kept calls
        self.answers: dict[str, int] = {}  # call id -> history index of its kept result
        self.kept = 0  # messages of history[head:seen] in `body` unchanged
        self.compactions = 0
        self.first = history[0] if history else None
        self.last = history[head - 1] if head else None

    def extends(self, history: Sequence[Message]) -> bool:
        """True if `history` is the one read so far plus new messages (checked at three points)."""
        if len(history) < self.seen or head_end(history) != self.head:
            return False
        points = [(0, self.first), (self.seen - 1, self.last)]
        if self.body:
            points.append((self.index[0], self.body[0]))
        return all(
            message is None or history[at] is message or history[at] == message
            for at, message in points
        )

    @property
    def untouched(self) -> bool:
        """True if the window is the history read so far, message for message."""
        return self.kept == self.seen - self.head

    def read(self, history: Sequence[Message], max_tokens: int, low: int, measure: Measure) -> bool:
        """Append the history's new messages, compacting after any that passes `max_tokens`.

        Returns True if a compaction happened.
        """
        compacted = False
        for at in range(self.seen, len(history)):
            self._append(history[at], at, measure)
            if self.tokens > max_tokens:
                compacted = self._compact(history, low, measure) or compacted
        self.seen = len(history)
        if history:
            self.last = history[-1]
        return compacted

    def _append(self, message: Message, at: int, measure: Measure) -> None:
        calls = self.calls
        kept: Message | None = message
        if message.has_tool_uses:
            for block in message.content:
                if type(block) is ToolUseBlock:
                    calls[block.id] = at
        if message.has_tool_results:
            blocks = [
                block
                for block in message.content
                if type(block) is not ToolResultBlock or calls.get(block.tool_use_id, at) < at
            ]
            for block in blocks:
                if type(block) is ToolResultBlock:
                    self.answers[block.tool_use_id] = at
            if len(blocks) != len(message.content):
                # Results whose call is not in the window: the call was dropped by a
                # compaction, or never made. Sent alone, the API would refuse them.
                kept = Message(message.role, blocks) if blocks else None
        if kept is None:
            return
        if kept is message:
            self.kept += 1
        self.body.append(kept)
        self.index.append(at)
        self.tokens += measure(kept)

    def _compact(self, history: Sequence[Message], low: int, measure: Measure) -> bool:
        """Drop whole rounds from the front until the window is within `low` tokens.

        A cut goes where a round starts and no kept result answers a call before
        it. When no cut gets the window within `low`, the newest such cut is taken
        (the newest round stays whole, even over the budget).
        """
        body, index, answers = self.body, self.index, self.answers
        remaining, reached = self.tokens, 0  # `reached`: the result index calls so far wait for
        chosen, chosen_tokens = 0, self.tokens
        for position in range(1, len(body)):
            previous = body[position - 1]
            remaining -= measure(previous)
            if previous.has_tool_uses:
                for block in previous.content:
                    if type(block) is ToolUseBlock:
                        reached = max(reached, answers.get(block.id, 0))
            at = index[position]
            message = history[at]
            if reached < at and opens_round(message, message.has_tool_results, history[at - 1]):
                chosen, chosen_tokens = position, remaining
                if remaining <= low:
                    break
        if chosen == 0:
            return False
        for message in body[:chosen]:
            if message.has_tool_uses:
                for block in message.content:
                    if type(block) is ToolUseBlock:
                        self.calls.pop(block.id, None)
                        answers.pop(block.id, None)
        self.kept -= sum(
            1 for position in range(chosen) if body[position] is history[index[position]]
        )
        self.cut = index[chosen]
        del body[:chosen]
        del index[:chosen]
        self.tokens = chosen_tokens
        self.compactions += 1
        return True


class StableWindow:
    """A window that only grows by appending, and sheds whole rounds in one step when full.

    Each window is the previous one plus the history's new messages, byte for
    byte, so a provider serves all of the previous prompt from its cache. When
    the window passes `max_tokens`, whole rounds are dropped from its front
    (after the system messages and the task, which always stay) until it is
    within `low_water * max_tokens`; then it grows by appending again. With the
    default `low_water=0.5` a compaction comes once per half a budget of new
    messages, and the windows between two compactions share their prefix.

    No tool call is separated from its result: a cut goes only where a round
    starts and no kept result answers a call before it, and a result whose call
    is not in the window (a compaction dropped it, or the history never had it)
    is left out of its message. The newest round always stays whole, even over
    the budget (`on_overflow` decides, as for `FitTokens`).

    The window depends on the history alone, not on when it was asked for: the
    history is read message by message, and a compaction happens right after
    the message that takes the window over `max_tokens`. So a builder that
    starts on a resumed session, or replays a stored one, builds the window the
    first builder sent, byte for byte.

    Reading is incremental: when the history extends the one read before (its
    first message, the first one kept and the last one read are the same), only
    the new messages are read, and a step costs the new messages and a copy of
    the window, whatever the history's length. A history that does not extend
    it is read again from its start. Call `reset()` after rewriting messages in
    the middle of a history. One builder serves one conversation (a branch gets
    its own copy); sharing one is correct, only slower.

    Args:
        max_tokens: The window's budget: passing it triggers a compaction.
        low_water: What a compaction leaves, as a share of `max_tokens`
            (a number above 0 and below 1).
        counter: How to count text (default: `HeuristicTokenCounter()`).
        per_message_overhead: Tokens added per message.
        tokens_per_media: Tokens counted per image.
        on_overflow: When even the head, the task and the newest round are over
            `max_tokens`: `"keep"` returns them anyway, `"raise"` raises
            `ContextOverflowError`.

    Raises:
        TypeError: `max_tokens` or a per-message setting is not an int,
            `low_water` is not a number, or `counter` is not callable.
        ValueError: `max_tokens` is below 1, `low_water` is not above 0 and
            below 1, a per-message setting is negative, or `on_overflow`
            is not "keep" or "raise".

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> builder = StableWindow(max_tokens=100, low_water=0.5)
        >>> text = "the quick brown fox jumps over the lazy dog"  # 10 tokens
        >>> history = [Message("system", "Be brief."), Message("user", "task")]
        >>> for step in range(8):
        ...     history.append(Message("assistant" if step % 2 else "user", text))
        ...     window = asyncio.run(builder.build(history))
        ...     print(len(window.messages), window.tokens, window.repinned)
        3 26 True
        4 40 False
        5 54 False
        6 68 False
        7 82 False
        8 96 False
        3 26 True
        4 40 False
    """

    def __init__(
        self,
        max_tokens: int = 24_000,
        low_water: float = 0.5,
        *,
        counter: TokenCounter = DEFAULT_COUNTER,
        per_message_overhead: int = 4,
        tokens_per_media: int = 600,
        on_overflow: OnOverflow = "keep",
    ) -> None:
        self.max_tokens = check_count("StableWindow", "max_tokens", max_tokens, 1)
        fraction(
            low_water,
            "StableWindow low_water",
            one=False,
            fix="the share of max_tokens a compaction leaves, e.g. 0.5",
        )
        self.low_water = low_water
        self.measure = Measure(counter, per_message_overhead, tokens_per_media)
        self.on_overflow = check_on_overflow("StableWindow", on_overflow)
        self._built: _Built | None = None

    def __repr__(self) -> str:
        measure = self.measure
        settings = {
            "counter": (measure.counter, DEFAULT_COUNTER),
            "per_message_overhead": (measure.per_message_overhead, 4),
            "tokens_per_media": (measure.tokens_per_media, 600),
            "on_overflow": (self.on_overflow, "keep"),
        }
        shown = [f"{k}={v!r}" for k, (v, default) in settings.items() if v != default]
        given = [f"max_tokens={self.max_tokens}", f"low_water={self.low_water}", *shown]
        return f"StableWindow({', '.join(given)})"

    def __copy__(self) -> StableWindow:
        """The same settings, nothing read yet: a branch builds its own windows."""
        return StableWindow(
            self.max_tokens,
            self.low_water,
            counter=self.measure.counter,
            per_message_overhead=self.measure.per_message_overhead,
            tokens_per_media=self.measure.tokens_per_media,
            on_overflow=self.on_overflow,
        )

    @property
    def compactions(self) -> int:
        """How many compactions the window of the history read so far has been through."""
        return 0 if self._built is None else self._built.compactions

    def reset(self) -> None:
        """Forget what was read: the next `build` reads the history from its start."""
        self._built = None

    async def build(self, messages: list[Message]) -> Window:
        """The window for `messages`, with its size and what stays stable.

        The returned `Window` has `pin`, the history index the kept messages
        start at (after the head); `repinned`, False when the window is the
        previous one plus new messages, True when this call compacted or read
        the history from its start (the first call, or a history that does not
        extend the previous one); and `stable_prefix`, how many leading
        messages it shares with the window this builder returned last (all of
        it when it was only appended to, else the head), where a model adapter
        places a prompt-cache breakpoint.

        Raises:
            ContextOverflowError: `on_overflow` is "raise" and even the head,
                the task and the newest round are over `max_tokens`.
        """
        return self._build(messages)[0]

    def _build(self, messages: list[Message]) -> tuple[Window, bool]:
        """The window, and whether it is the whole history unchanged."""
        # Taken out first: a call that fails part way leaves nothing half read, and a
        # call made meanwhile (another thread, say) reads the history afresh.
        built, self._built = self._built, None
        low = int(self.max_tokens * self.low_water)
        appended = built is not None and built.extends(messages)
        if built is None or not appended:
            built = _Built(messages, head_end(messages), self.measure)
        shared = built.head + len(built.body)
        compacted = built.read(messages, self.max_tokens, low, self.measure)
        self._built = built
        if compacted or not appended:
            shared = built.head
        if built.tokens > self.max_tokens:
            overflow("StableWindow", self.on_overflow, tokens=built.tokens, budget=self.max_tokens)
        window = [*messages[: built.head], *built.body]
        built_window = Window(window, built.tokens, built.cut, compacted or not appended, shared)
        return built_window, built.untouched

    async def compact(self, messages: list[Message]) -> list[Message]:
        """`build(messages).messages`, or `messages` itself when the window is the whole history.

        Raises:
            ContextOverflowError: As for `build`.
        """
        window, untouched = self._build(messages)
        return messages if untouched else window.messages
