"""Token-budgeted selection: `FitTokens` keeps the newest rounds that fit."""

from __future__ import annotations

from pygents_ctx.context.messages import Message
from pygents_ctx.context.strategies._rounds import head_end, rounds_newest_first
from pygents_ctx.context.strategies.base import (
    Measure,
    OnOverflow,
    check_budget,
    check_on_overflow,
    overflow,
)
from pygents_ctx.context.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["FitTokens"]


class FitTokens:
    """Keep the head, the task, and the newest whole rounds that fit the budget.

    The budget is `max_tokens - reserve_tokens` (leave room for the reply).
    Rounds are taken newest first until the next one would not fit, so the
    window is always a suffix of whole rounds: no call loses its result. Only
    the messages kept are measured, and counts are cached on the messages, so
    the cost per call follows the window's size, not the history's.

    Args:
        max_tokens: The model's budget for the prompt.
        reserve_tokens: Tokens to leave free, e.g. for the reply.
        counter: How to count text (default: `HeuristicTokenCounter()`).
        per_message_overhead: Tokens added per message.
        tokens_per_media: Tokens counted per image.
        on_overflow: When even the head, task and newest round exceed the
            budget: `"keep"` returns them anyway, `"raise"` raises
            `ContextOverflowError`.

    Example:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> history = [Message("user", "task")] + [
        ...     Message("user" if i % 2 else "assistant", "x" * 40) for i in range(10)
        ... ]
        >>> window = asyncio.run(FitTokens(60).compact(history))
        >>> len(window)
        4
    """

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
        self.budget = check_budget("FitTokens", max_tokens, reserve_tokens)
        self.max_tokens = max_tokens
        self.reserve_tokens = reserve_tokens
        self.measure = Measure(counter, per_message_overhead, tokens_per_media)
        self.on_overflow = check_on_overflow("FitTokens", on_overflow)

    def __repr__(self) -> str:
        return f"FitTokens({self.max_tokens}, reserve_tokens={self.reserve_tokens})"

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The head, the task and the newest rounds within budget (`messages` if all fit)."""
        return self.fit(messages)

    def fit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        start = head_end(messages)
        measure, budget, end = self.measure, self.budget, len(messages)
        used = measure.total(messages, 0, start)
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
