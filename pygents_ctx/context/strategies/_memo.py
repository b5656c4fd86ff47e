"""Editing the old messages of a history one by one, cheaply across calls.

A strategy that rewrites old messages (clears old tool results, say) must look
at every old message on every call. Rebuilding them each time would cost a new
message object per old message per call, and a new object has no cached token
count, so everything downstream would re-tokenize the history: O(n²) over a run.

`OldMessageEditor` avoids that in two ways:

- It remembers its previous call. When the new input extends the previous one
  (the usual case: a history that only grows), the outputs of the messages that
  were already old are reused as they are, and only the newly old messages are
  edited. What is left per call is a few list copies and comparisons, which run
  at C speed.
- Otherwise it looks each old message up by identity in a memo of the previous
  call's edits, so an unchanged message maps to the same output object.

Either way the output is exactly what a fresh instance would return for the
same input: reuse is only taken where it cannot change the result.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.strategies._rounds import head_end

__all__ = [
    "ALL",
    "Last",
    "OldMessageEditor",
    "count_blocks",
    "extends",
    "find_by_blocks",
    "has_tool_blocks",
]

ALL: Final = sys.maxsize
"""`old` for a message whose target blocks are all old."""

# One memo entry: the input message (kept alive, so its id stays unique), what
# its edit depended on besides the message, and the output (None: removed).
Entry = tuple[Message, object, Message | None]


@dataclass(slots=True, eq=False)
class Last:
    """What an editor remembers from its previous call."""

    inputs: list[Message]
    """A copy of the previous input."""
    settled: int
    """`inputs[:settled]` are all old: their outputs stay final as the history grows."""
    outputs: list[Message]
    """The outputs of `inputs[:settled]` (removed messages left out)."""
    changed: bool
    """Whether `outputs` differs from `inputs[:settled]`."""
    memo: dict[int, Entry]
    """Edits by input identity: the settled part's, and the boundary message's."""
    scan: object
    """What the strategy's `_find` wants back next call."""
    names: dict[str, str] | None
    """Tool names by call id, for the calls in `inputs[:settled]`, when tracked."""


def extends(messages: Sequence[Message], previous: list[Message]) -> bool:
    """True if `messages` starts with the messages of `previous` (equal ones count)."""
    known = len(previous)
    if len(messages) == known:
        return messages == previous  # C speed; identical elements compare in O(1)
    return len(messages) > known and messages[:known] == previous


def count_blocks(message: Message, kind: type) -> int:
    """The number of blocks of exactly type `kind` in `message`."""
    return sum(1 for block in message.content if type(block) is kind)


class OldMessageEditor:
    """Base of the strategies that rewrite a history's old messages one at a time.

    A subclass says where the old part ends (`_find`), whether a message has
    anything to edit (`_touches`), what else an edit depends on (`_variant`) and
    how one message is rewritten (`_rewrite`). The head (system messages and the
    task) is never edited. Messages before the index `_find` returns are wholly
    old; the message at that index may be partly old (`old` of its target
    blocks, counted from its first).
    """

    tracks_names: bool = False
    """True if edits need the tool name of each call (then `names` is kept)."""

    _last: Last | None = None

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The edited history (`messages` itself if nothing changed)."""
        return self.edit(messages)

    def edit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        # Taken out first: a call that fails part way leaves no half-updated memory.
        previous, self._last = self._last, None
        base = previous if previous is not None and extends(messages, previous.inputs) else None
        start = head_end(messages)
        settled, old, scan = self._find(messages, start, base)
        if base is not None and settled >= base.settled:
            lo, seen, memo = base.settled, base.memo, base.memo
            inputs, outputs, changed, names = base.inputs, base.outputs, base.changed, base.names
            inputs.extend(messages[len(inputs) :])
        else:
            lo, seen, memo = 0, previous.memo if previous is not None else {}, {}
            inputs, outputs, changed = list(messages), [], False
            names = {} if self.tracks_names else None
        outputs.extend(messages[lo:start])
        for index in range(max(lo, start), settled):
            message = messages[index]
            output = self._cached(message, ALL, names, seen, memo)
            if output is not message:
                changed = True
            if output is not None:
                outputs.append(output)
            if names is not None:
                _record_names(message, names)
        tail, boundary, boundary_changed = settled, [], False
        if old:
            message = messages[settled]
            output = self._cached(message, old, names, seen, memo)
            tail, boundary_changed = settled + 1, output is not message
            boundary = [] if output is None else [output]
        self._last = Last(inputs, settled, outputs, changed, memo, scan, names)
        if not changed and not boundary_changed:
            return messages
        return [*outputs, *boundary, *messages[tail:]]

    def _cached(
        self,
        message: Message,
        old: int,
        names: dict[str, str] | None,
        seen: dict[int, Entry],
        memo: dict[int, Entry],
    ) -> Message | None:
        if not self._touches(message):
            return message
        variant = self._variant(message, old, names)
        key = id(message)
        hit = seen.get(key)
        if hit is None or hit[0] is not message:
            output = self._rewrite(message, old, names)
        elif hit[1] == variant:
            output = hit[2]
        else:
            output = self._rewrite(message, old, names)
            if output is not message and output == hit[2]:
                # E.g. a message of parallel results once partly old, now wholly old,
                # whose newer results needed no edit: keep the object (and its count).
                output = hit[2]
        memo[key] = (message, variant, output)
        return output

    # ----------------------------------------------------------------- hooks

    def _find(
        self, messages: list[Message], start: int, base: Last | None
    ) -> tuple[int, int, object]:
        """Where the old part ends: `(settled, old, scan)`.

        `messages[start:settled]` are wholly old; `old` target blocks of
        `messages[settled]` are old too (0: none). `scan` is handed back next
        call in `base.scan`. `base` is the previous call's memory when
        `messages` extends its input (else None); the result must not depend
        on it, only the cost may.
        """
        raise NotImplementedError

    def _touches(self, message: Message) -> bool:
        """True if `_rewrite` could change `message`."""
        raise NotImplementedError

    def _variant(self, message: Message, old: int, names: dict[str, str] | None) -> object:
        """Everything besides the message that its rewrite depends on."""
        return old

    def _rewrite(self, message: Message, old: int, names: dict[str, str] | None) -> Message | None:
        """The message edited (itself if unchanged; None to remove it)."""
        raise NotImplementedError


def find_by_blocks(
    messages: list[Message], start: int, base: Last | None, kind: type, keep: int
) -> tuple[int, int, object]:
    """The old part when the newest `keep` blocks of type `kind` are recent.

    Scans from the newest end only until `keep` such blocks are found. When the
    input extends the previous one, only the new messages are scanned: the
    newest blocks are among them and the previous call's newest, which `scan`
    remembers as `(index, blocks)` pairs, newest first.
    """
    size = len(messages)
    if keep == 0:
        return size, 0, None
    lo, carried = start, ()
    if base is not None and isinstance(base.scan, tuple):
        lo, carried = max(start, len(base.inputs)), base.scan
    recent: list[tuple[int, int]] = []
    count = 0
    for index in range(size - 1, lo - 1, -1):
        found = count_blocks(messages[index], kind)
        if found:
            recent.append((index, found))
            count += found
            if count >= keep:
                break
    else:
        for index, found in carried:
            if count >= keep:
                break
            recent.append((index, found))
            count += found
    if not recent:
        return size, 0, ()
    return recent[-1][0], max(0, count - keep), tuple(recent)


def _record_names(message: Message, names: dict[str, str]) -> None:
    for block in message.content:
        if type(block) is ToolUseBlock:
            names[block.id] = block.name


def has_tool_blocks(message: Message) -> bool:
    """True if the message holds a tool call or a tool result."""
    return any(
        type(block) is ToolUseBlock or type(block) is ToolResultBlock for block in message.content
    )
