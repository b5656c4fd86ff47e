"""Strategies that edit tool traffic: clip, clear or drop old tool calls and results.

Tool output is what makes agent histories grow fastest. These strategies shrink
it in place and keep every pairing: a call and its result are both kept (maybe
shortened) or both dropped.

- `TruncateToolResults` clips long tool-result text and says how much was cut.
- `ClearToolResults` replaces old tool results with a placeholder.
- `ClearToolInputs` empties old tool calls' inputs.
- `DropToolRounds` removes old tool rounds, keeping the assistant's text.

Each keeps the head (system messages) and the task as they are, never mutates
its input, and returns the very same list when it changed nothing. Each also
remembers its previous call, so that on a history that grows by a few messages
per step, a call costs about the same at step 3,000 as at step 30, and old
messages map to the same output objects every call (their token counts stay
cached). Use one instance per conversation for that; sharing one is correct,
only slower.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable
from typing import Final, TypeVar

from pygents_ctx._checks import strings
from pygents_ctx.context.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.context.strategies._memo import (
    Last,
    OldMessageEditor,
    count_blocks,
    find_by_blocks,
    has_tool_blocks,
)
from pygents_ctx.context.strategies._rounds import rounds_newest_first
from pygents_ctx.context.strategies.base import check_count
from pygents_ctx.context.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["ClearToolInputs", "ClearToolResults", "DropToolRounds", "TruncateToolResults"]

DEFAULT_MARKER: Final = "… [truncated {cut:,} characters]"
# Any number the marker shows for `cut` has at most this many digits.
_LARGEST_CUT: Final = 10**18


# --------------------------------------------------------------------- TruncateToolResults


class TruncateToolResults(OldMessageEditor):
    """Clip long tool-result text to `max_chars` and say how much was cut.

    A result's text longer than `max_chars` keeps its first `max_chars`
    characters, followed by the marker, e.g. `… [truncated 1,234 characters]`.
    When a result holds several text blocks, `max_chars` is a budget for all
    of them together: blocks are kept in order while they fit, the one that
    crosses the budget is clipped and carries the marker (counting everything
    cut), and later text blocks are removed. Images inside results stay, and
    so do the call id and `is_error`.

    Results with `is_error=True` are never clipped: errors are usually short
    and the model needs them whole. Nor are offloaded results (`offloaded`
    set): their stub is within its own budget, and its note, which says how
    to read the rest, must stay. A text only slightly over `max_chars`,
    where the marker would cost more than it saves, is left whole.

    Clipping is idempotent: a clipped result is recognised by its marker and
    not clipped again, so running this twice gives what running it once does.
    A result clipped earlier with a larger `max_chars` is clipped further, and
    its marker then counts everything cut since the original.

    Args:
        max_chars: The characters of text a result keeps.
        keep_recent: The number of newest tool results (counted per result
            block) left untouched.
        marker: What replaces the cut text: a format string with a `{cut}`
            field, the number of characters cut (e.g. `"[{cut} chars cut]"`,
            or `"{cut:,}"` for thousands separators). `cut` must show as plain
            digits, so the marker can be recognised later.

    Raises:
        ValueError: `max_chars` is below 1, `keep_recent` is negative, or
            `marker` has no `{cut}`, another field, or shows `cut` as
            anything but digits.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message, ToolResultBlock, ToolUseBlock
        >>> history = [
        ...     Message("user", "Read the log."),
        ...     Message("assistant", [ToolUseBlock("c1", "read", {"path": "app.log"})]),
        ...     Message("user", [ToolResultBlock("c1", "x" * 1000)]),
        ... ]
        >>> window = asyncio.run(TruncateToolResults(20).compact(history))
        >>> window[2].content[0].content
        'xxxxxxxxxxxxxxxxxxxx… [truncated 980 characters]'
    """

    def __init__(
        self, max_chars: int = 500, *, keep_recent: int = 0, marker: str = DEFAULT_MARKER
    ) -> None:
        self.max_chars = check_count("TruncateToolResults", "max_chars", max_chars, 1)
        self.keep_recent = check_count("TruncateToolResults", "keep_recent", keep_recent, 0)
        self._pattern = _marker_pattern(marker)
        self.marker = marker
        self._tail = len(marker.format(cut=_LARGEST_CUT))
        self._check_marker()

    def __repr__(self) -> str:
        return (
            f"TruncateToolResults({self.max_chars}, keep_recent={self.keep_recent}, "
            f"marker={self.marker!r})"
        )

    def _check_marker(self) -> None:
        for cut in (0, 7, 1234, 9_876_543):
            found = self._find_marker("abc" + self.marker.format(cut=cut))
            if found != (3, cut):
                raise ValueError(
                    f"TruncateToolResults marker {self.marker!r} must show {{cut}} as plain "
                    f"digits (e.g. '{{cut}}' or '{{cut:,}}'), so clipped text can be recognised"
                )

    def _find_marker(self, text: str) -> tuple[int, int] | None:
        """`(where the marker starts, the cut it reports)` if `text` ends with one."""
        match = self._pattern.search(text, max(0, len(text) - self._tail))
        if match is None:
            return None
        return match.start(), int(match.group(1).replace(",", "").replace("_", ""))

    def _find(
        self, messages: list[Message], start: int, base: Last | None
    ) -> tuple[int, int, object]:
        return find_by_blocks(messages, start, base, ToolResultBlock, self.keep_recent)

    def _touches(self, message: Message) -> bool:
        return any(type(block) is ToolResultBlock for block in message.content)

    def _rewrite(self, message: Message, old: int, names: dict[str, str] | None) -> Message | None:
        # An offloaded result is a stub already (within its offload's budget), and its
        # text says where the rest is: clipping it would cut that off.
        return _edit_oldest(
            message,
            old,
            ToolResultBlock,
            lambda b: b if b.is_error or b.offloaded is not None else self._clip_result(b),
        )

    def _clip_result(self, block: ToolResultBlock) -> ToolResultBlock:
        content = block.content
        if isinstance(content, str):
            clipped = self._clip([content])
            if clipped is None:
                return block
            return ToolResultBlock(block.tool_use_id, clipped[0] or "", block.is_error)
        texts = [part.text for part in content if isinstance(part, TextBlock)]
        clipped = self._clip(texts)
        if clipped is None:
            return block
        parts: list[TextBlock | ImageBlock] = []
        new_texts = iter(clipped)
        for part in content:
            if isinstance(part, ImageBlock):
                parts.append(part)
                continue
            text = next(new_texts)
            if text is not None:
                parts.append(part if text == part.text else TextBlock(text))
        return ToolResultBlock(block.tool_use_id, parts, block.is_error)

    def _clip(self, texts: list[str]) -> list[str | None] | None:
        """The texts within budget (None: block removed), or None if they stay as they are."""
        budget, total = self.max_chars, sum(map(len, texts))
        if total <= budget:
            return None
        bodies, already_cut = texts, 0
        found = self._find_marker(texts[-1])
        if found is not None:
            end, already_cut = found
            bodies = [*texts[:-1], texts[-1][:end]]
            if total - len(texts[-1]) + end <= budget:
                return None  # clipped before, within this budget
        marker = self.marker.format(cut=sum(map(len, bodies)) - budget + already_cut)
        if budget + len(marker) >= total:
            return None  # the marker would cost more than the cut saves
        clipped: list[str | None] = []
        left = budget  # -1 once the budget is spent
        for body in bodies:
            if left < 0:
                clipped.append(None)
            elif len(body) <= left:
                clipped.append(body)
                left -= len(body)
            else:
                clipped.append(body[:left] + marker)
                left = -1
        return clipped


def _marker_pattern(marker: object) -> re.Pattern[str]:
    """A regex matching `marker` at the end of a text, with `cut` as group 1."""
    if not isinstance(marker, str):
        raise TypeError(f"TruncateToolResults marker must be a str, not {type(marker).__name__}")
    example = "'… [truncated {cut:,} characters]'"
    try:
        fields = list(string.Formatter().parse(marker))
    except ValueError as exc:
        raise ValueError(
            f"TruncateToolResults marker {marker!r} is not a format string ({exc}); "
            f"write it like {example}"
        ) from None
    pattern, has_cut = [], False
    for literal, field, _spec, _conversion in fields:
        pattern.append(re.escape(literal))
        if field is None:
            continue
        if field != "cut":
            raise ValueError(
                f"TruncateToolResults marker {marker!r} may only use the {{cut}} field, "
                f"not {{{field}}}; write it like {example}"
            )
        has_cut = True
        pattern.append("([0-9][0-9,_]*)")
    if not has_cut:
        raise ValueError(
            f"TruncateToolResults marker {marker!r} must contain {{cut}}, the number of "
            f"characters cut; write it like {example}"
        )
    try:
        marker.format(cut=1)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"TruncateToolResults marker {marker!r} cannot show a number ({exc}); "
            f"write it like {example}"
        ) from None
    return re.compile("".join(pattern) + r"\Z")


# ------------------------------------------------------------------------ ClearToolResults


class ClearToolResults(OldMessageEditor):
    """Replace the content of older tool results with a placeholder.

    The newest `keep_recent` results (counted per result block, so parallel
    results count one each) keep their content; older ones get `placeholder`
    as their whole content, images included. The call id and `is_error` stay,
    so the model still sees which call failed, and so does an offloaded
    result's `offloaded` (its whole text stays readable by its handle). Error
    results are cleared like any other: by the time they are old, the model
    has reacted to them.

    Older results are kept whole when they answer a call to a tool named in
    `keep_tools` (the name is looked up from the call with the result's
    `tool_use_id`), when they are smaller than `min_tokens`, or when their
    text is no longer than the placeholder (clearing would save nothing).
    Clearing is idempotent.

    Args:
        keep_recent: The number of newest tool results left untouched.
        placeholder: The text that replaces a cleared result.
        keep_tools: Names of tools whose results are never cleared.
        min_tokens: Results under this many tokens are kept (None: no
            minimum). A result holding an image is never under it.
        counter: How `min_tokens` counts text (default: `EstimatedTokenCounter()`).

    Raises:
        ValueError: `keep_recent` is negative, or `min_tokens` is below 1.
        TypeError: `placeholder` is not a str, `keep_tools` is not a
            collection of str, or `counter` is not callable.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message, ToolResultBlock, ToolUseBlock
        >>> history = [Message("user", "Check three cities.")]
        >>> for n, city in enumerate(["Oslo", "Lima", "Pune"]):
        ...     history += [
        ...         Message("assistant", [ToolUseBlock(f"c{n}", "weather", {"city": city})]),
        ...         Message("user", [ToolResultBlock(f"c{n}", f"{city}: 21°C, light wind")]),
        ...     ]
        >>> window = asyncio.run(ClearToolResults(keep_recent=1).compact(history))
        >>> [message.tool_results[0].content for message in window[2::2]]
        ['Done', 'Done', 'Pune: 21°C, light wind']
    """

    def __init__(
        self,
        keep_recent: int = 3,
        *,
        placeholder: str = "Done",
        keep_tools: Iterable[str] = (),
        min_tokens: int | None = None,
        counter: TokenCounter = DEFAULT_COUNTER,
    ) -> None:
        self.keep_recent = check_count("ClearToolResults", "keep_recent", keep_recent, 0)
        if not isinstance(placeholder, str):
            raise TypeError(
                f"ClearToolResults placeholder must be a str, not {type(placeholder).__name__}"
            )
        self.placeholder = placeholder
        self.keep_tools = frozenset(
            strings(
                keep_tools, "ClearToolResults keep_tools", fix="write e.g. keep_tools=('search',)"
            )
        )
        if min_tokens is not None:
            check_count("ClearToolResults", "min_tokens", min_tokens, 1)
        self.min_tokens = min_tokens
        if not callable(counter):
            raise TypeError(
                f"ClearToolResults counter must be a callable str -> int, not {counter!r}"
            )
        self.counter = counter
        self.tracks_names = bool(self.keep_tools)

    def __repr__(self) -> str:
        counter = "" if self.counter is DEFAULT_COUNTER else f", counter={self.counter!r}"
        return (
            f"ClearToolResults({self.keep_recent}, placeholder={self.placeholder!r}, "
            f"keep_tools={tuple(sorted(self.keep_tools))!r}, min_tokens={self.min_tokens!r}"
            f"{counter})"
        )

    def _find(
        self, messages: list[Message], start: int, base: Last | None
    ) -> tuple[int, int, object]:
        return find_by_blocks(messages, start, base, ToolResultBlock, self.keep_recent)

    def _touches(self, message: Message) -> bool:
        return any(type(block) is ToolResultBlock for block in message.content)

    def _variant(self, message: Message, old: int, names: dict[str, str] | None) -> object:
        if names is None:
            return old
        return old, tuple(names.get(block.tool_use_id) for block in message.tool_results)

    def _rewrite(self, message: Message, old: int, names: dict[str, str] | None) -> Message | None:
        def clear(block: ToolResultBlock) -> ToolResultBlock:
            if not self._clears(block, names):
                return block
            # `offloaded` stays: the viewer shows the whole result, and its handle stays
            # one `read_tool_result` accepts for this conversation.
            return ToolResultBlock(
                block.tool_use_id, self.placeholder, block.is_error, offloaded=block.offloaded
            )

        return _edit_oldest(message, old, ToolResultBlock, clear)

    def _clears(self, block: ToolResultBlock, names: dict[str, str] | None) -> bool:
        content = block.content
        if isinstance(content, str):
            if len(content) <= len(self.placeholder):
                return False
        elif not any(isinstance(part, ImageBlock) for part in content) and sum(
            len(part.text) for part in content if isinstance(part, TextBlock)
        ) <= len(self.placeholder):
            return False
        if names is not None and names.get(block.tool_use_id) in self.keep_tools:
            return False
        return self.min_tokens is None or not self._smaller(block, self.min_tokens)

    def _smaller(self, block: ToolResultBlock, limit: int) -> bool:
        content = block.content
        if isinstance(content, str):
            return self.counter(content) < limit
        if any(isinstance(part, ImageBlock) for part in content):
            return False
        return (
            sum(self.counter(part.text) for part in content if isinstance(part, TextBlock)) < limit
        )


# ------------------------------------------------------------------------- ClearToolInputs


class ClearToolInputs(OldMessageEditor):
    """Replace the `input` of older tool calls with `{}`, keeping their ids and names.

    The newest `keep_recent` calls (counted per call block, so parallel calls
    count one each) keep their input. Results still match their calls by id.
    Clearing is idempotent.

    Args:
        keep_recent: The number of newest tool calls left untouched.

    Raises:
        ValueError: `keep_recent` is negative.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message, ToolResultBlock, ToolUseBlock
        >>> history = [Message("user", "Query the sales.")]
        >>> for n in range(3):
        ...     history += [
        ...         Message("assistant", [ToolUseBlock(f"c{n}", "sql", {"query": "SELECT ..."})]),
        ...         Message("user", [ToolResultBlock(f"c{n}", "42 rows")]),
        ...     ]
        >>> window = asyncio.run(ClearToolInputs(keep_recent=1).compact(history))
        >>> [message.tool_uses[0].input for message in window[1::2]]
        [{}, {}, {'query': 'SELECT ...'}]
    """

    def __init__(self, keep_recent: int = 3) -> None:
        self.keep_recent = check_count("ClearToolInputs", "keep_recent", keep_recent, 0)

    def __repr__(self) -> str:
        return f"ClearToolInputs({self.keep_recent})"

    def _find(
        self, messages: list[Message], start: int, base: Last | None
    ) -> tuple[int, int, object]:
        return find_by_blocks(messages, start, base, ToolUseBlock, self.keep_recent)

    def _touches(self, message: Message) -> bool:
        return any(type(block) is ToolUseBlock and block.input for block in message.content)

    def _rewrite(self, message: Message, old: int, names: dict[str, str] | None) -> Message | None:
        return _edit_oldest(
            message, old, ToolUseBlock, lambda b: ToolUseBlock(b.id, b.name, {}) if b.input else b
        )


# -------------------------------------------------------------------------- DropToolRounds


class DropToolRounds(OldMessageEditor):
    """Remove older tool calls together with their results.

    `keep_recent` counts tool rounds: rounds that contain at least one tool
    call. (After the head and the task, a round starts at each user message
    that is not tool results, and at each assistant message that does not
    answer such a user message; results belong to the round of their call.
    In an agent loop, each model step with its tool results is one round.)
    The newest `keep_recent` tool rounds are kept whole. In everything older,
    tool calls and tool results are removed; the rest of each message stays
    (an assistant's text next to its calls, a user's text next to results),
    and a message left with nothing is removed. A round never splits a call
    from its result, so no result outlives its call.

    Messages are not merged: removing a result message can leave two
    assistant messages next to each other (e.g. the text that came with two
    consecutive calls). Most providers accept that; Anthropic's API joins them.

    With `keep_recent=0` every tool round goes, including a newest one whose
    results the model has not answered yet; use that for views that are not
    sent to the model (e.g. a summarizer's input).

    Args:
        keep_recent: The number of newest tool rounds kept whole.

    Raises:
        ValueError: `keep_recent` is negative.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message, TextBlock, ToolResultBlock, ToolUseBlock
        >>> history = [Message("user", "Fix the bug.")]
        >>> for n in range(3):
        ...     call = ToolUseBlock(f"c{n}", "run", {})
        ...     history += [
        ...         Message("assistant", [TextBlock(f"Step {n}."), call]),
        ...         Message("user", [ToolResultBlock(f"c{n}", "ok")]),
        ...     ]
        >>> window = asyncio.run(DropToolRounds(keep_recent=1).compact(history))
        >>> [message.text or message.tool_results[0].content for message in window]
        ['Fix the bug.', 'Step 0.', 'Step 1.', 'Step 2.', 'ok']
    """

    def __init__(self, keep_recent: int = 5) -> None:
        self.keep_recent = check_count("DropToolRounds", "keep_recent", keep_recent, 0)

    def __repr__(self) -> str:
        return f"DropToolRounds({self.keep_recent})"

    def _find(
        self, messages: list[Message], start: int, base: Last | None
    ) -> tuple[int, int, object]:
        keep, size = self.keep_recent, len(messages)
        if keep == 0:
            return size, 0, None
        lo = start
        below: tuple[int, ...] = ()
        if base is not None and isinstance(base.scan, _Scan):
            # The previous call's newest round still starts a round, and the rounds
            # under it are unchanged, unless a new result answers a call under it.
            top = base.scan.top
            if top >= start and _self_contained(messages, top):
                lo, below = top, tuple(s for s in base.scan.tool_rounds if s < top)
        found: list[int] = []
        newest, end = None, size
        for round_start in rounds_newest_first(messages, lo):
            if newest is None:
                newest = round_start
            if any(count_blocks(messages[i], ToolUseBlock) for i in range(round_start, end)):
                found.append(round_start)
                if len(found) == keep:
                    break
            end = round_start
        if len(found) < keep:
            found.extend(below[: keep - len(found)])
        scan = None if newest is None else _Scan(newest, tuple(found))
        return (found[-1] if len(found) == keep else start), 0, scan

    def _touches(self, message: Message) -> bool:
        return has_tool_blocks(message)

    def _rewrite(self, message: Message, old: int, names: dict[str, str] | None) -> Message | None:
        kept = [
            block
            for block in message.content
            if type(block) is not ToolUseBlock and type(block) is not ToolResultBlock
        ]
        return Message(message.role, kept) if kept else None


class _Scan:
    """What `DropToolRounds._find` remembers: the newest round, and the newest tool rounds."""

    __slots__ = ("tool_rounds", "top")

    def __init__(self, top: int, tool_rounds: tuple[int, ...]) -> None:
        self.top = top
        self.tool_rounds = tool_rounds


def _self_contained(messages: list[Message], start: int) -> bool:
    """True if every result in `messages[start:]` answers a call made before it there."""
    calls: set[str] = set()
    for message in messages[start:]:
        for block in message.content:
            if type(block) is ToolUseBlock:
                calls.add(block.id)
            elif type(block) is ToolResultBlock and block.tool_use_id not in calls:
                return False
    return True


_Block = TypeVar("_Block", ToolUseBlock, ToolResultBlock)


def _edit_oldest(
    message: Message, old: int, kind: type[_Block], edit: Callable[[_Block], _Block]
) -> Message:
    """`message` with `edit` applied to its first `old` blocks of `kind`; itself if none changed."""
    blocks: list[ContentBlock] = list(message.content)
    seen, changed = 0, False
    for index, block in enumerate(blocks):
        if type(block) is not kind:
            continue
        seen += 1
        if seen > old:
            break
        edited = edit(block)
        if edited is not block:
            blocks[index], changed = edited, True
    return Message(message.role, blocks) if changed else message
