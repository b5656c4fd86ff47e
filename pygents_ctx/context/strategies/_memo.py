"""Editing the old messages of a history one by one, cheaply across calls.

A strategy that rewrites old messages (clears old tool results, say) must look
at every old message on every call. Rebuilding them each time would cost a new
message object per old message per call, and a new object has no cached token
count, so everything downstream would re-tokenize the history: O(n²) over a run.

`OldMessageEditor` avoids that:

- It remembers its previous call. When the old part of the new input is the
  old part of the previous one (the history grew, or only its newest messages
  changed, as in the output of an editor before it), the outputs of the
  messages that were already old are reused as they are, and only the newly
  old messages are edited.
- It keeps its window and grows it in place: the old part's outputs stay in
  the list, and only what follows them is rebuilt. Through `compact_since`,
  a caller that knows how much of the input is unchanged (a `Pipeline`)
  spares it even the comparison, so a step costs the new messages and the
  newest ones, whatever the history's length; `compact` pays one comparison
  and one copy of the window, at C speed.
- Otherwise it looks each old message up by identity in a memo of the previous
  call's edits, so an unchanged message maps to the same output object.

Either way the output is exactly what a fresh instance would return for the
same input: reuse is only taken where it cannot change the result.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.strategies._rounds import head_end
from pygents_ctx.context.strategies.base import WindowStep

__all__ = [
    "ALL",
    "Last",
    "OldMessageEditor",
    "count_blocks",
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
    """A copy of the previous input's first `settled` messages."""
    recent: list[Message]
    """A copy of the rest of the previous input."""
    settled: int
    """`inputs[:settled]` are all old: their outputs stay final as the history grows."""
    window: list[Message]
    """The outputs of `inputs` (removed messages left out), then the rest of the window."""
    kept: int
    """How many messages of `window` are the outputs of `inputs`."""
    changed: bool
    """Whether `window[:kept]` differs from `inputs`."""
    memo: dict[int, Entry]
    """Edits by input identity: the settled part's, and the boundary message's."""
    scan: object
    """What the strategy's `_find` wants back next call."""
    names: dict[str, str] | None
    """Tool names by call id, for the calls in `inputs`, when tracked."""
    step: WindowStep
    """The step the previous call returned."""

    @property
    def size(self) -> int:
        """The length of the previous input."""
        return self.settled + len(self.recent)


def _same(messages: list[Message], inputs: list[Message], known: int) -> bool:
    """True if `messages` starts with `inputs`, whose first `known` are vouched for."""
    settled = len(inputs)
    if known:  # compare only the rest
        return messages[known:settled] == inputs[known:]
    return messages[:settled] == inputs  # one copy, not two


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

    The window is kept between calls and grown in place: the outputs of the
    old part stay, and only what follows them is rebuilt. `compact_since`
    returns that list itself (see `WindowStep`); `compact` returns a copy.
    """

    tracks_names: bool = False
    """True if edits need the tool name of each call (then `names` is kept)."""

    _last: Last | None = None

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The edited history (`messages` itself if nothing changed)."""
        return self.edit(messages)

    async def compact_since(
        self, messages: list[Message], previous: WindowStep | None, unchanged: int
    ) -> WindowStep:
        """`compact`, over what the previous call built (see `WindowStep`)."""
        return self._edit(messages, previous, unchanged)

    def edit(self, messages: list[Message]) -> list[Message]:
        """`compact`, synchronously."""
        window = self._edit(messages, None, 0).messages
        return window if window is messages else list(window)

    def _edit(
        self, messages: list[Message], previous_step: WindowStep | None, unchanged: int
    ) -> WindowStep:
        # Taken out first: a call that fails part way leaves no half-updated memory.
        previous, self._last = self._last, None
        base, grown = None, False
        # Another caller may have called since: then nothing it says is known, and what
        # this says it left unchanged is not relative to that caller's last window.
        trusted = previous is not None and previous_step is previous.step
        if previous is not None:
            known = min(unchanged, len(messages)) if trusted else 0
            settled = previous.settled
            # The old part's outputs are reused when the old part is as it was; only
            # what a caller did not vouch for is compared (at C speed).
            if known >= settled or _same(messages, previous.inputs, known):
                base = previous
                grown = messages[settled : previous.size] == previous.recent
        start = head_end(messages)
        settled, old, scan = self._find(messages, start, base if grown else None)
        if base is not None and settled >= base.settled:
            lo, seen, memo, same = base.settled, base.memo, base.memo, base.kept
            inputs, window, changed, names = base.inputs, base.window, base.changed, base.names
            del window[same:]
            inputs.extend(messages[lo:settled])
        else:
            lo, seen, memo, same = 0, previous.memo if previous is not None else {}, {}, 0
            inputs, window, changed = messages[:settled], [], False
            names = {} if self.tracks_names else None
        window.extend(messages[lo:start])
        for index in range(max(lo, start), settled):
            message = messages[index]
            output = self._cached(message, ALL, names, seen, memo)
            if output is not message:
                changed = True
            if output is not None:
                window.append(output)
            if names is not None:
                _record_names(message, names)
        kept, tail, boundary_changed = len(window), settled, False
        if old:
            message = messages[settled]
            output = self._cached(message, old, names, seen, memo)
            tail, boundary_changed = settled + 1, output is not message
            if output is not None:
                window.append(output)
        window.extend(messages[tail:])
        if not trusted:
            same = 0
        if not changed and not boundary_changed:
            # Unchanged, it was the input's old part before too: as many of it stay.
            step = WindowStep(messages, same)
        else:
            step = WindowStep(window, same)
        recent = messages[settled:]
        self._last = Last(inputs, recent, settled, window, kept, changed, memo, scan, names, step)
        return step

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
        lo, carried = max(start, base.size), base.scan
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
