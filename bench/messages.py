"""Appending messages to a token-bounded ContextQueue, small and large.

The queue runs at steady state: its token budget holds about `size` messages,
so every append adds one message's count, evicts by budget and checks the pair
rule at the head. The cost per append must not depend on `size` (a running
total, never a recount); the floor is what a hand-rolled window does at least.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from bench.harness import Result, compare
from pygents_ctx import (
    ContextItem,
    ContextQueue,
    HeuristicTokenCounter,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    count_message_tokens,
)

SIZES = (1_000, 100_000)


def _message(i: int) -> Message:
    """A conversation in threes: a question, a tool call, its result."""
    kind = i % 3
    if kind == 0:
        return Message("user", f"question {i:09d}: what changed since yesterday?")
    call_id = f"call-{i - kind:09d}"
    if kind == 1:
        return Message("assistant", [ToolUseBlock(call_id, "diff", {"since": "yesterday"})])
    return Message("user", [ToolResultBlock(call_id, f"{i:09d} files changed")])


def _items(start: int, count: int) -> list[ContextItem[Message]]:
    return [ContextItem(content=_message(i)) for i in range(start, start + count)]


async def _steady_queue(size: int, counter: HeuristicTokenCounter) -> ContextQueue[Message]:
    prefill = _items(0, size)
    budget = sum(count_message_tokens(item.content, counter) for item in prefill)
    queue: ContextQueue[Message] = ContextQueue(10 * size, max_tokens=budget, counter=counter)
    await queue.append(*prefill)
    return queue


async def token_queue(ops: int) -> list[Result]:
    """Per-append cost of a token-bounded `ContextQueue[Message]` holding ~1k and ~100k messages.

    The messages are new objects each run, counted before timing (as a store
    or a strategy would have): what is timed is the queue's own work, which
    the floor mirrors with a `deque.append` and an int add.
    """
    return [await _steady_appends(size, ops) for size in SIZES]


async def _steady_appends(size: int, ops: int) -> Result:
    queue = await _steady_queue(size, HeuristicTokenCounter())
    fresh: list[ContextItem[Message]] = []
    floor_items = _items(size, ops)
    window: deque[Any] = deque(_items(0, size), maxlen=size)
    total = 0

    async def prepare(n: int) -> None:
        fresh[:] = _items(size, n)
        for item in fresh:
            count_message_tokens(item.content, queue.counter)

    async def ours(n: int) -> None:
        for item in fresh[:n]:
            await queue.append(item)

    async def floor(n: int) -> None:
        nonlocal total
        for item in floor_items[:n]:
            window.append(item)
            total += 9

    result = await compare(
        f"token ContextQueue[Message], {size:,} held", ours, floor, ops, None, prepare
    )
    if abs(len(queue) - size) > 3:  # the budget must have kept the queue at `size`
        raise AssertionError(f"expected ~{size:,} messages held, got {len(queue):,}")
    return result
