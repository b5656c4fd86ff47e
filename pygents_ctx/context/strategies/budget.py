"""Token-budgeted selection: `FitTokens` keeps the newest rounds that fit, `MiddleOut` the ends."""

from __future__ import annotations

from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.strategies._rounds import (
    head_end,
    opens_round,
    round_starts,
    rounds_newest_first,
)
from pygents_ctx.context.strategies.base import (
    Measure,
    OnOverflow,
    check_budget,
    check_on_overflow,
    overflow,
)
from pygents_ctx.context.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["FitTokens", "MiddleOut"]


class _Budgeted:
    """What token-budgeted selections share: their settings, checks and repr."""

    def __init__(
        self,
        max_tokens: int,
        *,
        reserve_tokens: int = 0,
        counter: TokenCounter = DEFAULT_COUNTER,
        per_message_overhead: int = 4,
        tokens_per_media: int = 600,
        on_overflow: OnOverflow = "keep",
    ) -> None:
        owner = type(self).__name__
        self.budget = check_budget(owner, max_tokens, reserve_tokens)
        self.max_tokens = max_tokens
        self.reserve_tokens = reserve_tokens
        self.measure = Measure(counter, per_message_overhead, tokens_per_media)
        self.on_overflow = check_on_overflow(owner, on_overflow)

    def __repr__(self) -> str:
        """`Name(max_tokens, ...)` with the settings that differ from the defaults."""
        measure = self.measure
        settings = {
            "reserve_tokens": (self.reserve_tokens, 0),
            "counter": (measure.counter, DEFAULT_COUNTER),
            "per_message_overhead": (measure.per_message_overhead, 4),
            "tokens_per_media": (measure.tokens_per_media, 600),
            "on_overflow": (self.on_overflow, "keep"),
        }
        shown = [f"{k}={v!r}" for k, (v, default) in settings.items() if v != default]
        return f"{type(self).__name__}({', '.join([str(self.max_tokens), *shown])})"


class FitTokens(_Budgeted):
    """Keep the head, the task, and the newest whole rounds that fit the budget.

    The budget is `max_tokens - reserve_tokens` (leave room for the reply).
    Rounds are taken newest first until the next one would not fit, so the
    window is always a suffix of whole rounds: no call loses its result. Only
    the messages kept are measured, and counts are cached on the messages, so
    the cost per call follows the window's size, not the history's.

    Args:
        max_tokens: The model's budget for the prompt.
        reserve_tokens: Tokens to leave free, e.g. for the reply.
        counter: How to count text (default: `EstimatedTokenCounter()`).
        per_message_overhead: Tokens added per message.
        tokens_per_media: Tokens counted per image.
        on_overflow: When even the head, task and newest round exceed the
            budget: `"keep"` returns them anyway, `"raise"` raises
            `ContextOverflowError`.

    Raises:
        ValueError: A budget or a per-message setting is not an int,
            `max_tokens` is below 1, the reserve or a setting is negative, the
            reserve leaves nothing, or `on_overflow` is not "keep" or "raise".
        TypeError: `counter` is not callable.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> text = "the quick brown fox jumps over the lazy dog"  # 10 tokens
        >>> history = [Message("user", "task")] + [
        ...     Message("user" if i % 2 else "assistant", text) for i in range(10)
        ... ]
        >>> window = asyncio.run(FitTokens(60).compact(history))
        >>> len(window)
        4
    """

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The head, the task and the newest rounds within budget (`messages` if all fit)."""
        return self.fit(messages)

    def fit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        start = head_end(messages)
        used = self.measure.total(messages, 0, start)
        if start == len(messages):  # no rounds: the head and task are all there is
            if used > self.budget:
                overflow("FitTokens", self.on_overflow, tokens=used, budget=self.budget)
            return messages
        keep_from = _fit_newest_rounds(messages, start, used, self.budget, self.measure)
        if keep_from is None:  # unpaired results in view: the careful, general walk
            return self._fit_by_rounds(messages, start, used)
        if keep_from == len(messages):  # not even the newest round fits
            newest = next(rounds_newest_first(messages, start))
            size = used + self.measure.total(messages, newest)
            overflow("FitTokens", self.on_overflow, tokens=size, budget=self.budget)
            keep_from = newest
        if keep_from == start:
            return messages
        return [*messages[:start], *messages[keep_from:]]

    def _fit_by_rounds(self, messages: list[Message], start: int, used: int) -> list[Message]:
        measure, budget, end = self.measure, self.budget, len(messages)
        keep_from = end
        for round_start in rounds_newest_first(messages, start):
            size = measure.total(messages, round_start, keep_from)
            if used + size > budget:
                if keep_from == end:  # not even the newest round fits
                    overflow("FitTokens", self.on_overflow, tokens=used + size, budget=budget)
                    keep_from = round_start
                break
            used += size
            keep_from = round_start
        else:
            if used > budget:  # head and task alone are over budget
                overflow("FitTokens", self.on_overflow, tokens=used, budget=budget)
            return messages
        if keep_from == start:
            return messages
        return [*messages[:start], *messages[keep_from:]]


class MiddleOut(_Budgeted):
    """Remove whole rounds from the middle until the rest fits, keeping the start and the end.

    The head, the task and the newest round always stay. Then rounds are
    taken alternately from the start and from the end (oldest, second newest,
    second oldest, third newest, ...) while they fit `max_tokens -
    reserve_tokens`; once a side's next round would not fit, that side stops
    and the other goes on while its rounds fit. What is removed is therefore
    one unbroken stretch of whole rounds between the kept start and the kept
    end; when rounds are of a size, the middle round is the first to go, then
    its neighbours, outward. Use it where the opening of a run (the plan, the
    first findings) matters as much as its latest steps.

    Like `FitTokens`, it looks only at what it could keep: the newest rounds,
    and the oldest ones up to the budget, with counts cached on the messages.
    (A history with a tool call left unanswered, or a result without its call,
    before the budget is reached is read whole, to find its rounds exactly.)

    Args:
        max_tokens: The model's budget for the prompt.
        reserve_tokens: Tokens to leave free, e.g. for the reply.
        counter: How to count text (default: `EstimatedTokenCounter()`).
        per_message_overhead: Tokens added per message.
        tokens_per_media: Tokens counted per image.
        on_overflow: When even the head, task and newest round exceed the
            budget: `"keep"` returns them anyway, `"raise"` raises
            `ContextOverflowError`.

    Raises:
        ValueError: A budget or a per-message setting is not an int,
            `max_tokens` is below 1, the reserve or a setting is negative, the
            reserve leaves nothing, or `on_overflow` is not "keep" or "raise".
        TypeError: `counter` is not callable.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> history = [Message("user", "task")]
        >>> answer = "the quick brown fox jumps over the lazy dog and then runs far away"
        >>> for i in range(1, 7):
        ...     history += [Message("user", f"question {i}"), Message("assistant", answer)]
        >>> window = asyncio.run(MiddleOut(120).compact(history))
        >>> [m.text for m in window if m.role == "user"]
        ['task', 'question 1', 'question 2', 'question 5', 'question 6']
    """

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The head, the task, the earliest and the newest rounds within budget."""
        return self.fit(messages)

    def fit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        head = head_end(messages)
        measure, budget = self.measure, self.budget
        used = measure.total(messages, 0, head)
        ends = rounds_newest_first(messages, head)
        end = next(ends, None)  # the newest round, which always stays
        if end is None:
            if used > budget:
                overflow("MiddleOut", self.on_overflow, tokens=used, budget=budget)
            return messages
        used += measure.total(messages, end)
        if used > budget:
            overflow("MiddleOut", self.on_overflow, tokens=used, budget=budget)
            return _window(messages, head, end)
        starts = self._start_rounds(messages, head)
        if starts is None:
            return messages
        # Kept: the rounds before starts[first] from the start, and from `end` on.
        # The whole history is over budget, so the two sides never meet: a round
        # that would reach the other side's cut cannot fit.
        first, from_start, start_open, end_open = 0, True, True, True
        while start_open or end_open:
            if (from_start and start_open) or not end_open:
                if first + 1 < len(starts) and starts[first + 1] <= end:
                    size = measure.total(messages, starts[first], starts[first + 1])
                    if used + size <= budget:
                        used, first, from_start = used + size, first + 1, False
                        continue
                start_open, from_start = False, False
            else:
                earlier = next(ends)
                size = measure.total(messages, earlier, end)
                if used + size <= budget:
                    used, end, from_start = used + size, earlier, True
                    continue
                end_open, from_start = False, True
        return [*messages[: starts[first]], *messages[end:]]

    def _start_rounds(self, messages: list[Message], head: int) -> list[int] | None:
        """Round starts from the oldest, as far as the start side could reach; None if all fits.

        The start side never holds more than the budget, so only the prefix up to
        where the history exceeds it matters. When every call in that prefix is
        answered in it (and every result in it answers a call in it), the prefix's
        own rounds are the history's, and finding them costs the prefix's length.
        Otherwise every round of the history is found.
        """
        measure, budget, size = self.measure, self.budget, len(messages)
        used, stop = 0, 0
        while stop < size and used <= budget:
            used, stop = used + measure(messages[stop]), stop + 1
        if used <= budget:
            return None
        paired = _paired_prefix_end(messages, stop)
        if paired is None:
            return [*round_starts(messages), size]
        starts = list(rounds_newest_first(messages[:paired], head))
        starts.reverse()  # the last round may go on past the prefix: it is over budget anyway
        return starts


def _paired_prefix_end(messages: list[Message], stop: int) -> int | None:
    """The least end at or after `stop` of a prefix whose calls and results all pair up.

    None if there is none: a result before its call, twice, or without one, or
    a call never answered.
    """
    waiting: set[str] = set()
    index, size = 0, len(messages)
    while index < size and (index < stop or waiting):
        for block in messages[index].content:
            if isinstance(block, ToolUseBlock):
                waiting.add(block.id)
            elif isinstance(block, ToolResultBlock):
                if block.tool_use_id not in waiting:
                    return None
                waiting.remove(block.tool_use_id)
        index += 1
    return None if waiting else index


def _window(messages: list[Message], head: int, keep_from: int) -> list[Message]:
    if keep_from == head:
        return messages
    return [*messages[:head], *messages[keep_from:]]


def _fit_newest_rounds(
    messages: list[Message], start: int, used: int, budget: int, measure: Measure
) -> int | None:
    """Where the newest whole rounds that fit begin: one backward pass, stopping early.

    The same rounds as `rounds_newest_first`, fused with measuring, because this
    runs before every model call. Returns `len(messages)` when not even the
    newest round fits, and None when results without their call are in view
    (the general walk handles those). With such results further back than the
    budget reaches, it may keep a round less than the general walk would:
    never a split pair.
    """
    waiting: set[str] = set()
    keep_from = len(messages)
    size = 0  # of the round being read
    for index in range(len(messages) - 1, start - 1, -1):
        message = messages[index]
        size += measure(message)
        if used + size > budget:
            return keep_from  # this round cannot fit; rounds are kept whole
        answers = message.has_tool_results
        if answers or message.has_tool_uses:
            for block in message.content:
                kind = type(block)
                if kind is ToolResultBlock:
                    waiting.add(block.tool_use_id)  # type: ignore[union-attr]
                elif kind is ToolUseBlock:
                    waiting.discard(block.id)  # type: ignore[union-attr]
        if waiting:
            if index == start:
                return None
            continue
        if index == start or opens_round(message, answers, messages[index - 1]):
            used += size
            size = 0
            keep_from = index
    return keep_from
