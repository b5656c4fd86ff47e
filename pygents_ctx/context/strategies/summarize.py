"""Summaries: `Summarize` replaces the old part of a conversation with one summary message.

A summary message is an ordinary message whose (one) text block starts with
`SUMMARY_PREFIX`, so the mark survives `to_dict`, JSON, stores and the wire
formats; `is_summary` recognises it and `summary_text` reads it back. A later
`Summarize` finds it and *updates* it: the summarizer gets the previous summary
and only the messages that became old since, and the window keeps one summary.

A summary a store's compaction writes also names the store ids of the
messages it replaced, in its metadata (`{"summary_of": [[first, last], ...]}`,
see `summary_message`): `summary_covers` tells whether it stands for a given
message, so a message found by `ContextStore.search` can be shown in its place.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

import orjson

from pygents_ctx.context.messages import (
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    to_dict,
)
from pygents_ctx.context.strategies._rounds import head_end, rounds_newest_first
from pygents_ctx.context.strategies.base import Measure, check_count
from pygents_ctx.context.tokens import DEFAULT_COUNTER, TokenCounter
from pygents_ctx.errors import SummarizationError

__all__ = [
    "SUMMARY_PREFIX",
    "Summarize",
    "Summarizer",
    "bridge_message",
    "is_bridge",
    "is_summary",
    "render_transcript",
    "summary_covers",
    "summary_message",
    "summary_ranges",
    "summary_text",
]

logger = logging.getLogger("pygents_ctx")

OnError: TypeAlias = Literal["raise", "log"]
SummaryRole: TypeAlias = Literal["user", "assistant"]

SUMMARY_PREFIX: Final = "[Summary of the earlier conversation]\n"
"""The text a summary message starts with: the mark `is_summary` looks for."""

# A bridge keeps roles alternating around a summary (see `Summarize`). It says
# nothing, so a later pass drops and rebuilds it instead of summarizing it.
_BRIDGE_TEXT: Final[dict[str, str]] = {
    "assistant": "Understood. I will continue from this summary.",
    "user": "Continue from the summary above.",
}
# Summaries remembered per instance. Each holds references to the messages it
# covers; a few are enough for one conversation and a branch or two.
_CACHE_SIZE: Final = 8
# The most id ranges a summary's `summary_of` holds: a summary stays small.
MAX_SUMMARY_RANGES: Final = 32


@runtime_checkable
class Summarizer(Protocol):
    """Writes a summary: `async (messages, previous_summary) -> str`.

    `messages` are the conversation messages to fold in, oldest first, as typed
    `Message` objects (use `render_transcript` for a readable text form).
    `previous_summary` is the text of the summary they continue, or `None` for
    the first one. Return the new summary's text, covering both. The package
    ships no summarizer that calls a network; `pygents_ctx.testing` has a
    scripted one.
    """

    async def __call__(self, messages: list[Message], previous_summary: str | None, /) -> str: ...


def summary_message(
    text: str,
    *,
    role: SummaryRole = "user",
    summary_of: Iterable[int | tuple[int, int]] = (),
) -> Message:
    """A summary message: one text block, `SUMMARY_PREFIX` followed by `text`.

    With `summary_of`, the store ids of the messages it replaces (ids, or
    inclusive `(first, last)` ranges of them), its metadata records them as
    `{"summary_of": [[first, last], ...]}`: sorted, inclusive ranges,
    consecutive ids folded into one. At most `MAX_SUMMARY_RANGES` (32)
    ranges are kept: beyond that the closest ranges are joined, so a range may
    then span ids of messages the summary did not replace (in a database store,
    those of other sessions too). Read it with `summary_covers`.

    Raises:
        ValueError: `text` is not a non-empty string, `role` is not "user" or
            "assistant", or `summary_of` holds something other than ints and
            pairs of ints.

    Examples:
        >>> is_summary(summary_message("The user asked for a haiku."))
        True
        >>> summary_message("Ten messages.", summary_of=[3, 4, 5, 9]).metadata
        {'summary_of': [[3, 5], [9, 9]]}
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"summary_message text must be a non-empty string, not {text!r}")
    if role != "user" and role != "assistant":
        raise ValueError(f"summary_message role must be 'user' or 'assistant', not {role!r}")
    ranges = _ranges(summary_of)
    metadata = {"summary_of": ranges} if ranges else None
    return Message(role, [TextBlock(SUMMARY_PREFIX + text)], metadata=metadata)


def _ranges(ids: Iterable[int | tuple[int, int]]) -> list[list[int]]:
    """Sorted inclusive ranges of `ids`, at most `MAX_SUMMARY_RANGES` (the closest joined)."""
    spans: list[tuple[int, int]] = []
    for value in ids:
        span = (value, value) if isinstance(value, int) else value
        if (
            not isinstance(span, tuple)
            or len(span) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in span)
            or span[0] > span[1]
        ):
            raise ValueError(
                f"summary_of must hold message ids (ints) or (first, last) ranges, not {value!r}"
            )
        spans.append(span)
    ranges: list[list[int]] = []
    for first, last in sorted(spans):
        if ranges and first <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], last)
        else:
            ranges.append([first, last])
    if len(ranges) > MAX_SUMMARY_RANGES:
        gaps = sorted(range(1, len(ranges)), key=lambda i: ranges[i][0] - ranges[i - 1][1])
        joined = set(gaps[: len(ranges) - MAX_SUMMARY_RANGES])
        merged: list[list[int]] = []
        for index, (first, last) in enumerate(ranges):
            if index in joined:
                merged[-1][1] = last
            else:
                merged.append([first, last])
        ranges = merged
    return ranges


def summary_ranges(message: Message) -> list[tuple[int, int]]:
    """The `(first, last)` id ranges a summary's `summary_of` names; [] for other messages."""
    metadata = message.metadata
    found = metadata.get("summary_of") if metadata else None
    if not isinstance(found, list):
        return []
    return [
        (span[0], span[1])
        for span in found
        if isinstance(span, list)
        and len(span) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in span)
    ]


def summary_covers(summary: Message, message_id: int) -> bool:
    """True if `summary` replaced the message with id `message_id` (its `summary_of` says so).

    Use it to show a `ContextStore.search` hit from the archive in its place:
    the live summary that covers the hit's `id` is where it was.

    Examples:
        >>> summary_covers(summary_message("Old talk.", summary_of=[7, 8]), 8)
        True
        >>> summary_covers(summary_message("Old talk."), 8)
        False
    """
    return any(first <= message_id <= last for first, last in summary_ranges(summary))


def is_summary(message: Message) -> bool:
    """True if `message` is a summary: its first block is text starting with `SUMMARY_PREFIX`.

    Examples:
        >>> is_summary(Message("user", "hello"))
        False
    """
    content = message.content
    if not content:
        return False
    first = content[0]
    return type(first) is TextBlock and first.text.startswith(SUMMARY_PREFIX)


SUMMARY_HEAD: Final = 8
"""How many messages at the head of a live history a compaction's summary may sit among."""


def summary_mark(history: Sequence[Message]) -> str | None:
    """A short digest of the live summary at the head of `history`; None when it has none.

    Each compaction writes a new summary, so two histories with the same mark
    have had the same compactions: positions counted in one hold in the other.

    Examples:
        >>> summary_mark([Message("user", "hi")]) is None
        True
        >>> len(summary_mark([summary_message("Two files were renamed.")]))
        16
    """
    for message in history[:SUMMARY_HEAD]:
        if is_summary(message):
            data = orjson.dumps(to_dict(message))
            return hashlib.blake2b(data, digest_size=8).hexdigest()
    return None


def summary_text(message: Message) -> str | None:
    """The summary a summary message carries (without the prefix), or `None` for other messages.

    Examples:
        >>> summary_text(summary_message("Two files were renamed."))
        'Two files were renamed.'
    """
    if not is_summary(message):
        return None
    return message.text[len(SUMMARY_PREFIX) :]


def bridge_message(role: SummaryRole) -> Message:
    """The one-line message of `role` that follows a summary of the same role as the next message.

    It keeps user and assistant turns alternating around a summary, and says
    nothing else, so `is_bridge` recognises it and a later summary replaces it.

    Raises:
        ValueError: `role` is not "user" or "assistant".

    Examples:
        >>> bridge_message("assistant").text
        'Understood. I will continue from this summary.'
    """
    if role != "user" and role != "assistant":
        raise ValueError(f"bridge_message role must be 'user' or 'assistant', not {role!r}")
    return Message(role, _BRIDGE_TEXT[role])


def is_bridge(message: Message) -> bool:
    """True if `message` is a bridge, as `bridge_message` builds it.

    Examples:
        >>> is_bridge(bridge_message("user")), is_bridge(Message("user", "Continue."))
        (True, False)
    """
    match message.content:
        case (TextBlock(text=text),):
            return text == _BRIDGE_TEXT.get(message.role)
    return False


# ----------------------------------------------------------------------------- transcripts


def render_transcript(messages: Iterable[Message]) -> str:
    """A readable text form of `messages`, for summarizers that prompt with text.

    Each message is `role: ` and its blocks, one per line; messages are separated
    by a blank line. A tool call reads `[tool call name({"arg": ...})]`, its result
    `[tool result for name: ...]` (`[tool error for name: ...]` when it failed), an
    image `[image]`. A result whose call is not among `messages` names the call id.

    Examples:
        >>> from pygents_ctx.context.messages import ToolResultBlock, ToolUseBlock
        >>> print(render_transcript([
        ...     Message("assistant", [ToolUseBlock("c1", "search", {"q": "tides"})]),
        ...     Message("user", [ToolResultBlock("c1", "2 results")]),
        ... ]))
        assistant: [tool call search({"q":"tides"})]
        <BLANKLINE>
        user: [tool result for search: 2 results]
    """
    names: dict[str, str] = {}
    rendered = []
    for message in messages:
        lines = [_render_block(block, names) for block in message.content]
        rendered.append(f"{message.role}: " + "\n".join(lines))
    return "\n\n".join(rendered)


def _render_block(block: object, names: dict[str, str]) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ToolUseBlock):
        names[block.id] = block.name
        return f"[tool call {block.name}({_json(block.input)})]"
    if isinstance(block, ToolResultBlock):
        name = names.get(block.tool_use_id, f"call {block.tool_use_id}")
        kind = "tool error" if block.is_error else "tool result"
        return f"[{kind} for {name}: {_result_text(block)}]"
    if isinstance(block, ImageBlock):
        return "[image]"
    if isinstance(block, ThinkingBlock):
        return f"[thinking: {block.thinking}]"
    if isinstance(block, ReasoningBlock) and block.summary:
        return f"[thinking: {' '.join(block.summary)}]"
    return "[thinking (redacted)]"


def _result_text(block: ToolResultBlock) -> str:
    if isinstance(block.content, str):
        return block.content
    return "\n".join(
        part.text if isinstance(part, TextBlock) else "[image]" for part in block.content
    )


def _json(data: dict[str, Any]) -> str:
    try:
        return orjson.dumps(data).decode()
    except TypeError:  # inputs are meant to be JSON, but show whatever is there
        return json.dumps(data, ensure_ascii=False, default=repr)


# ----------------------------------------------------------------------------- the strategy


@dataclass(eq=False, slots=True)
class _Summary:
    """A summary, and what it covers: the input's own summary text, then `covered`."""

    base: str | None
    covered: list[Message]
    text: str
    messages: dict[SummaryRole, Message] = field(default_factory=dict)

    def message(self, role: SummaryRole) -> Message:
        # One object per role, reused: its token count is cached on it and the
        # window's prefix stays identical from call to call.
        found = self.messages.get(role)
        if found is None:
            found = self.messages[role] = summary_message(self.text, role=role)
        return found


class _Cuts:
    """Round starts of `messages[start:]`, newest first, read only as far as asked."""

    __slots__ = ("_starts", "found")

    def __init__(self, messages: Sequence[Message], start: int) -> None:
        self._starts = rounds_newest_first(messages, start)
        self.found: list[int] = []  # descending

    def next(self) -> int | None:
        value = next(self._starts, None)
        if value is not None:
            self.found.append(value)
        return value

    def at_or_before(self, index: int) -> int:
        """The last round start at or before `index`: a cut that splits no pair."""
        for cut in self.found:
            if cut <= index:
                return cut
        while (more := self.next()) is not None:
            if more <= index:
                return more
        return index


class Summarize:
    """Replace the old part of a conversation with one summary message.

    The recent part is the newest whole rounds that fit `keep_recent_tokens`
    (at least the newest round), so no tool call is split from its result. The
    old part, between the head and task and the recent part, goes to the
    summarizer and is replaced by one summary message; the head, the task and
    the recent part are kept as they are. Nothing changes (the input list is
    returned) while the old part is under `min_old_tokens`, and, with a
    `max_tokens`, while the whole conversation fits it: give a `Summarize` the
    budget of the window it serves (in a `Pipeline` before a `FitTokens`, say),
    and it never replaces a conversation the model could have seen whole.

    The summary sits right after the head and the task. Its role alternates with
    the message before it: `assistant` after the task (a user message), `user`
    when there is no task. When the next message has the same role, a one-line
    bridge of the other role follows it ("Continue from the summary above." or
    "Understood. I will continue from this summary."), because some providers and
    chat templates reject two messages of one role in a row.

    Successive calls over a growing history update the summary instead of
    stacking summaries: the summarizer gets the previous summary's text and only
    the messages that became old since. The same goes for an input that already
    holds a summary (from a store's compaction, or from this strategy's output):
    its text is the previous summary, never conversation to summarize. Results
    are cached by what they cover (the covered messages, compared by identity
    and then by value), so the summarizer never sees the same old part twice,
    even from concurrent calls; while the messages that became old since the
    last summary are under `min_old_tokens`, the cached summary is reused and
    they stay verbatim after it, so the window's prefix does not change. (A tool
    result that arrives rounds after its call pulls the call back into the
    window, verbatim after the summary that also covers it.)

    If the summarizer fails (raises, or returns something other than non-empty
    text), the input is returned unchanged and the failure is reported:
    `on_error="raise"` raises `SummarizationError` (the summarizer's exception
    is its `__cause__`), `on_error="log"` logs a warning on the `pygents_ctx`
    logger. Failures are not cached: the next call tries again.

    Args:
        summarizer: An async `(messages, previous_summary) -> str`; see `Summarizer`.
        keep_recent_tokens: Tokens of newest rounds to keep verbatim.
        min_old_tokens: Summarize only once the old part (after any existing
            summary) reaches this many tokens.
        max_tokens: The window's budget: while the whole conversation (head and
            task included) is within it, nothing is summarized. None: no
            budget, only `min_old_tokens` decides.
        counter: How to count text (default: `EstimatedTokenCounter()`).
        per_message_overhead: Tokens added per message.
        tokens_per_media: Tokens counted per image.
        on_error: What a summarizer failure does: `"raise"` or `"log"`.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx.testing import ScriptedSummarizer
        >>> text = "the quick brown fox jumps over the lazy dog"
        >>> history = [Message("user", "Plan a trip.")] + [
        ...     Message("assistant" if i % 2 == 0 else "user", f"step {i} {text}")
        ...     for i in range(9)
        ... ]
        >>> strategy = Summarize(
        ...     ScriptedSummarizer(["Seven steps done."]), keep_recent_tokens=40, min_old_tokens=10
        ... )
        >>> window = asyncio.run(strategy.compact(history))
        >>> [message.role for message in window]
        ['user', 'assistant', 'user', 'assistant']
        >>> summary_text(window[1])
        'Seven steps done.'
    """

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        keep_recent_tokens: int,
        min_old_tokens: int = 1000,
        max_tokens: int | None = None,
        counter: TokenCounter = DEFAULT_COUNTER,
        per_message_overhead: int = 4,
        tokens_per_media: int = 600,
        on_error: OnError = "raise",
    ) -> None:
        if not callable(summarizer):
            raise TypeError(
                "Summarize summarizer must be an async callable "
                f"(messages, previous_summary) -> str, not {summarizer!r}"
            )
        self.keep_recent_tokens = check_count(
            "Summarize", "keep_recent_tokens", keep_recent_tokens, 0
        )
        self.min_old_tokens = check_count("Summarize", "min_old_tokens", min_old_tokens, 0)
        if max_tokens is not None:
            check_count("Summarize", "max_tokens", max_tokens, 1)
            if self.keep_recent_tokens >= max_tokens:
                raise ValueError(
                    f"Summarize keep_recent_tokens ({self.keep_recent_tokens}) must be less "
                    f"than max_tokens ({max_tokens}): the summary goes beside the recent part; "
                    "lower keep_recent_tokens (e.g. to half the budget)"
                )
        self.max_tokens = max_tokens
        self.measure = Measure(counter, per_message_overhead, tokens_per_media)
        if on_error != "raise" and on_error != "log":
            raise ValueError(f"Summarize on_error must be 'raise' or 'log', not {on_error!r}")
        self.on_error: OnError = on_error
        self.summarizer = summarizer
        self._cache: list[_Summary] = []
        self._pending: list[tuple[tuple[str | None, list[Message]], asyncio.Future[_Summary]]] = []
        # One object per role, reused, like the summary messages.
        self._bridges = {"user": bridge_message("user"), "assistant": bridge_message("assistant")}

    def __repr__(self) -> str:
        budget = "" if self.max_tokens is None else f", max_tokens={self.max_tokens}"
        return (
            f"Summarize({self.summarizer!r}, keep_recent_tokens={self.keep_recent_tokens}, "
            f"min_old_tokens={self.min_old_tokens}{budget}, on_error={self.on_error!r})"
        )

    async def compact(self, messages: list[Message]) -> list[Message]:
        """Head, task, one summary of the old part, then the recent part (`messages` if unchanged).

        Raises:
            SummarizationError: The summarizer failed and `on_error` is "raise".
        """
        if self.max_tokens is not None and self._fits(messages, self.max_tokens):
            return messages
        start = _conversation_start(messages)
        first, base = _read_summary(messages, start)
        cuts = _Cuts(messages, first)
        recent = self._recent_start(messages, cuts)
        if recent <= first:
            return messages
        found = self._lookup(messages, base, first)
        tail = first + len(found.covered) if found is not None else first
        if tail < recent:
            earlier, fresh = _split_old(messages[tail:recent])
            if fresh and self.measure.total(fresh) >= self.min_old_tokens:
                texts = [found.text if found is not None else base, *earlier]
                previous = "\n\n".join(text for text in texts if text is not None) or None
                try:
                    summary = await self._summarize(base, messages[first:recent], fresh, previous)
                except Exception as exc:
                    self._report(exc, len(fresh))
                    return messages
                return self._window(messages, start, summary, recent)
        if found is None:
            return messages
        # Reuse the summary. Messages after it stay verbatim from a round start:
        # a late tool result can pull a summarized call back into a newer round.
        cut = cuts.at_or_before(min(tail, recent))
        if cut == first:
            return messages
        return self._window(messages, start, found, cut)

    def _fits(self, messages: list[Message], budget: int) -> bool:
        # Newest first, stopping once over: a long history costs only what fits.
        used = 0
        for message in reversed(messages):
            used += self.measure(message)
            if used > budget:
                return False
        return True

    def _recent_start(self, messages: list[Message], cuts: _Cuts) -> int:
        measure, budget, end = self.measure, self.keep_recent_tokens, len(messages)
        keep_from, used = end, 0
        while (start := cuts.next()) is not None:
            size = measure.total(messages, start, keep_from)
            if keep_from != end and used + size > budget:
                break
            used += size
            keep_from = start
        return keep_from

    def _lookup(self, messages: list[Message], base: str | None, first: int) -> _Summary | None:
        """The cached summary of the longest run of messages from `first` on."""
        room = len(messages) - first
        candidates = [s for s in self._cache if s.base == base and len(s.covered) <= room]
        candidates.sort(key=lambda summary: len(summary.covered), reverse=True)
        for summary in candidates:
            covered = summary.covered
            end = first + len(covered)
            last = messages[end - 1] if covered else None
            if covered and last is not covered[-1] and last != covered[-1]:
                continue  # it covers another stretch: passed over without reading it all
            # A list comparison checks identity first: one pointer test per message.
            if messages[first:end] == covered:
                self._cache.remove(summary)
                self._cache.insert(0, summary)
                return summary
        return None

    async def _summarize(
        self, base: str | None, covered: list[Message], fresh: list[Message], previous: str | None
    ) -> _Summary:
        key = (base, covered)
        task = next((task for pending, task in self._pending if pending == key), None)
        if task is None:
            task = asyncio.ensure_future(self._call(base, covered, fresh, previous))
            entry = (key, task)
            self._pending.append(entry)
            task.add_done_callback(lambda done: self._settle(entry, done))
        # Shielded: a caller that is cancelled leaves the call running for the others.
        return await asyncio.shield(task)

    async def _call(
        self, base: str | None, covered: list[Message], fresh: list[Message], previous: str | None
    ) -> _Summary:
        result = self.summarizer(list(fresh), previous)
        if not inspect.isawaitable(result):
            raise TypeError(
                f"the summarizer returned {type(result).__name__}, not an awaitable; "
                "it must be an async function"
            )
        text = await result
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"the summarizer returned {text!r}; it must return the summary text")
        summary = _Summary(base, covered, text)
        self._cache.insert(0, summary)
        del self._cache[_CACHE_SIZE:]
        return summary

    def _settle(
        self,
        entry: tuple[tuple[str | None, list[Message]], asyncio.Future[_Summary]],
        done: asyncio.Future[_Summary],
    ) -> None:
        self._pending.remove(entry)
        if not done.cancelled():
            done.exception()  # retrieved: every caller that still waits gets it too

    def _report(self, exc: Exception, count: int) -> None:
        message = (
            f"Summarize: the summarizer {self.summarizer!r} failed on {count} old messages "
            f"({type(exc).__name__}: {exc}); the messages were left unchanged"
        )
        if self.on_error == "raise":
            raise SummarizationError(
                f"{message}; fix the summarizer, or pass on_error='log' to go on without a summary"
            ) from exc
        logger.warning("%s", message, exc_info=exc)

    def _window(
        self, messages: list[Message], start: int, summary: _Summary, tail: int
    ) -> list[Message]:
        role: SummaryRole = "assistant" if start and messages[start - 1].role == "user" else "user"
        unit = [summary.message(role)]
        if tail < len(messages) and messages[tail].role == role:
            unit.append(self._bridges["user" if role == "assistant" else "assistant"])
        return [*messages[:start], *unit, *messages[tail:]]


def _conversation_start(messages: list[Message]) -> int:
    """Where the summary goes: after the head and the task."""
    start = head_end(messages)
    # With no task, a user summary right after the head looks like the task.
    if start and is_summary(messages[start - 1]):
        start -= 1
    return start


def _read_summary(messages: list[Message], start: int) -> tuple[int, str | None]:
    """The index after a summary (and its bridge) at `start`, and that summary's text."""
    if start >= len(messages) or not is_summary(messages[start]):
        return start, None
    text = summary_text(messages[start])
    after = start + 1
    if after < len(messages) and is_bridge(messages[after]):
        after += 1
    return after, text


def _split_old(old: list[Message]) -> tuple[list[str], list[Message]]:
    """Summaries found among old messages (their texts) and the conversation messages."""
    texts: list[str] = []
    conversation: list[Message] = []
    after_summary = False
    for message in old:
        text = summary_text(message)
        if text is not None:
            texts.append(text)
        elif not (after_summary and is_bridge(message)):
            conversation.append(message)
        after_summary = text is not None
    return texts, conversation
