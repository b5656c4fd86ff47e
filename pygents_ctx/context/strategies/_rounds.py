"""The structure strategies cut along: the head, the task, and rounds.

The head is the leading system messages; the task is the first user message
after them (when it carries no tool result). Rounds follow: the first message
after the task starts one, then a round starts at every user message that
carries no tool result, and at every assistant message that does not directly
follow such a user message. A tool result belongs to the round of the call it
answers, so rounds are merged until no call is separated from its result: a
strategy that keeps or drops whole rounds can never split a pair.

Rounds are found from the newest end, lazily, so a strategy that keeps the last
few rounds of a long history looks only at what it keeps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock

__all__ = [
    "carries_results",
    "head_end",
    "opens_round",
    "round_starts",
    "rounds_newest_first",
    "unpaired_call_ids",
]


def carries_results(message: Message) -> bool:
    """True if the message holds a tool result."""
    return message.has_tool_results


def head_end(messages: Sequence[Message]) -> int:
    """The index after the head and the task: where the rounds begin."""
    index, size = 0, len(messages)
    while index < size and messages[index].role == "system":
        index += 1
    if index < size and messages[index].role == "user" and not carries_results(messages[index]):
        index += 1
    return index


def opens_round(message: Message, answers: bool, previous: Message) -> bool:
    """True if `message` (after the first round) starts a round; `answers`: it holds results."""
    if message.role == "user":
        return not answers
    if message.role != "assistant":
        return False
    return not (previous.role == "user" and not carries_results(previous))


def _opens_round(messages: Sequence[Message], index: int) -> bool:
    message = messages[index]
    return opens_round(message, carries_results(message), messages[index - 1])


def rounds_newest_first(messages: Sequence[Message], start: int) -> Iterator[int]:
    """Yield the start index of each round, newest first, down to `start`.

    Each yielded index `s` begins a whole round that ends where the previously
    yielded one begins (or at the end). A call and its result always fall in
    the same round. Looks only as far back as the caller keeps iterating.
    """
    waiting: set[str] = set()  # results seen whose call is further back
    last = len(messages)
    for index in range(len(messages) - 1, start - 1, -1):
        message = messages[index]
        if message.has_tool_results or message.has_tool_uses:
            for block in message.content:
                if type(block) is ToolResultBlock:
                    waiting.add(block.tool_use_id)
                elif type(block) is ToolUseBlock:
                    waiting.discard(block.id)
        if index == start or (not waiting and _opens_round(messages, index)):
            if waiting:
                # Results whose calls are not in the input at all: cut that stretch
                # again as if they were ordinary messages.
                yield from _rounds_ignoring(messages, start, last, waiting)
                return
            yield index
            last = index


def _rounds_ignoring(
    messages: Sequence[Message], start: int, stop: int, orphans: set[str]
) -> Iterator[int]:
    waiting: set[str] = set()
    for index in range(stop - 1, start - 1, -1):
        for block in messages[index].content:
            if type(block) is ToolResultBlock and block.tool_use_id not in orphans:
                waiting.add(block.tool_use_id)
            elif type(block) is ToolUseBlock:
                waiting.discard(block.id)
        if index == start or (not waiting and _opens_round(messages, index)):
            yield index


def round_starts(messages: Sequence[Message]) -> list[int]:
    """Every round's start index, oldest first (empty when there are no rounds)."""
    starts = list(rounds_newest_first(messages, head_end(messages)))
    starts.reverse()
    return starts


def unpaired_call_ids(messages: Sequence[Message]) -> set[str]:
    """Ids of calls with no result in `messages`, and of results with no call."""
    calls: set[str] = set()
    results: set[str] = set()
    for message in messages:
        for block in message.content:
            if type(block) is ToolUseBlock:
                calls.add(block.id)
            elif type(block) is ToolResultBlock:
                results.add(block.tool_use_id)
    return calls ^ results
