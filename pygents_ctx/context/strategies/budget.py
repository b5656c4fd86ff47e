"""Token-budgeted selection: `FitTokens` keeps the newest rounds that fit, `MiddleOut` the ends."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

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
    WindowStep,
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
        TypeError: A budget or a per-message setting is not an int, or
            `counter` is not callable.
        ValueError: `max_tokens` is below 1, the reserve or a setting is
            negative, the reserve leaves nothing, or `on_overflow` is not
            "keep" or "raise".

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

    _rounds: _Rounds | None = None
    _step: _Fitted | None = None

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The head, the task and the newest rounds within budget (`messages` if all fit)."""
        return self.fit(messages)

    async def compact_since(
        self, messages: list[Message], previous: WindowStep | None, unchanged: int
    ) -> WindowStep:
        """`compact`, over what the previous call read (see `WindowStep`).

        The rounds of the previous window that lie within the unchanged part
        are not read again: a step costs the messages after the newest such
        round, whatever the window's size.
        """
        trusted = previous is not None and previous is self._step
        return self._fit(messages, unchanged if trusted else 0)

    def fit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        return self._fit(messages, 0).messages

    def _fit(self, messages: list[Message], unchanged: int) -> WindowStep:
        # Taken out first: a call that fails part way leaves nothing half remembered.
        known, self._rounds = self._rounds, None
        last, self._step = self._step, None
        start = head_end(messages)
        used = self.measure.total(messages, 0, start)
        unchanged = min(unchanged, len(messages))
        tokens: int | None = used
        if start == len(messages):  # no rounds: the head and task are all there is
            if used > self.budget:
                overflow("FitTokens", self.on_overflow, tokens=used, budget=self.budget)
            keep_from = start
        else:
            resume = -1  # the newest remembered round start within the unchanged part
            if known is not None and known.start == start and unchanged >= start:
                resume = bisect_right(known.starts, unchanged) - 1
            found, tokens, self._rounds = _fit_newest_rounds(
                messages, start, used, self.budget, self.measure, known, resume
            )
            if found is None:  # unpaired results in view: the careful, general walk
                keep_from, tokens = self._fit_by_rounds(messages, start, used), None
            else:
                keep_from = found
            if keep_from == len(messages):  # not even the newest round fits
                newest = next(rounds_newest_first(messages, start))
                tokens = used + self.measure.total(messages, newest)
                overflow("FitTokens", self.on_overflow, tokens=tokens, budget=self.budget)
                keep_from = newest
        window = _window(messages, start, keep_from)
        # The window is the head, then the history from `keep_from`: when that did not
        # move, its messages up to the unchanged part's end are those of the last window.
        same = min(unchanged, start)
        if last is not None and (last.start, last.keep_from) == (start, keep_from):
            same += max(0, unchanged - keep_from)
        self._step = step = _Fitted(window, same, tokens, start=start, keep_from=keep_from)
        return step

    def _fit_by_rounds(self, messages: list[Message], start: int, used: int) -> int:
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
            return start
        return keep_from


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class _Fitted(WindowStep):
    """A `FitTokens` step: the window, where its head ends and where its rounds begin."""

    start: int
    keep_from: int


class _Rounds:
    """The rounds a `FitTokens` call kept, oldest first, for the next call to skip.

    `marks[i] - marks[j]` is the size in tokens of the rounds from `starts[j]`
    up to `starts[i]`.
    """

    __slots__ = ("marks", "start", "starts")

    def __init__(self, start: int, starts: list[int], marks: list[int]) -> None:
        self.start = start
        self.starts = starts
        self.marks = marks


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

    It takes the same arguments as `FitTokens` and refuses the same values.

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
    messages: list[Message],
    start: int,
    used: int,
    budget: int,
    measure: Measure,
    known: _Rounds | None = None,
    resume: int = -1,
) -> tuple[int | None, int, _Rounds | None]:
    """Where the newest whole rounds that fit begin: one backward pass, stopping early.

    The same rounds as `rounds_newest_first`, fused with measuring, because this
    runs before every model call. Returns `len(messages)` when not even the
    newest round fits, and None when results without their call are in view
    (the general walk handles those). With such results further back than the
    budget reaches, it may keep a round less than the general walk would:
    never a split pair.

    Also returns the tokens of the head and the rounds kept, and those rounds,
    for the next call. When the pass reaches
    `known.starts[resume]` and a round starts there, the rounds below it are
    those `known` holds (the caller knows they have not changed): as many as
    fit are taken at once, by their sizes, and the pass goes on below them
    only if they all fit.
    """
    waiting: set[str] = set()
    keep_from = len(messages)
    size = 0  # of the round being read
    newer: list[tuple[int, int]] = []  # (start, size) of the rounds read above `resume`
    older: list[tuple[int, int]] = []  # and below the known rounds, newest first
    read = newer
    skipped = 0, 0  # the known rounds taken: starts[first:resume]
    index = len(messages) - 1
    while index >= start:
        message = messages[index]
        size += measure(message)
        if used + size > budget:
            break  # this round cannot fit; rounds are kept whole
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
                return None, used, None
            index -= 1
            continue
        if index == start or opens_round(message, answers, messages[index - 1]):
            used += size
            read.append((index, size))
            size = 0
            keep_from = index
            if known is not None and resume > 0 and index == known.starts[resume]:
                marks = known.marks
                first = bisect_left(marks, marks[resume] - (budget - used), 0, resume)
                used += marks[resume] - marks[first]
                keep_from, skipped, read = known.starts[first], (first, resume), older
                if first:
                    break  # the round before them does not fit
                index = keep_from
        index -= 1
    if keep_from == len(messages):
        return keep_from, used, None
    return keep_from, used, _kept_rounds(start, known, skipped, newer, older)


def _kept_rounds(
    start: int,
    known: _Rounds | None,
    skipped: tuple[int, int],
    newer: list[tuple[int, int]],
    older: list[tuple[int, int]],
) -> _Rounds:
    """The rounds a pass kept, oldest first: those read below the known ones, the known
    ones it took (`known.starts[first:resume]`, copied at C speed), and those read above."""
    first, resume = skipped
    if known is None or first == resume:
        starts, marks, base = [], [], 0
    else:
        starts, marks = known.starts[first:resume], known.marks[first:resume]
        base = known.marks[resume]
    low = marks[0] if marks else base
    below_starts, below_marks = [], []
    for at, size in older:
        low -= size
        below_starts.append(at)
        below_marks.append(low)
    below_starts.reverse()
    below_marks.reverse()
    above_starts, above_marks = [], []
    for at, size in reversed(newer):
        above_starts.append(at)
        above_marks.append(base)
        base += size
    return _Rounds(
        start, [*below_starts, *starts, *above_starts], [*below_marks, *marks, *above_marks]
    )
