"""Compaction on the store: summarize the old part of a stored history, losing nothing.

`compact_context` computes a compacted history without touching the store.
`AutoCompactStore` wraps any store and compacts it when a model call reports
an input over its threshold. It replaces the old messages through
`replace_prefix`, so they stay readable in the archive, messages appended while
the summarizer runs land after the compacted ones, and a failing summarizer
changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable, Sequence
from datetime import timedelta
from typing import Any, Final

from pygents_ctx._checks import fraction, whole_number
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores._common import (
    changed_prefix,
    check_count,
    check_expected,
    takes_keyword,
)
from pygents_ctx.context.stores._lease_sql import LeaseState
from pygents_ctx.context.stores.base import (
    CheckpointInfo,
    ContextStore,
    SessionInfo,
    SessionSnapshot,
    can_replace_prefix,
)
from pygents_ctx.context.stores.search import HistoryHit
from pygents_ctx.context.strategies.summarize import (
    Summarizer,
    bridge_message,
    is_bridge,
    is_summary,
    summary_message,
    summary_ranges,
    summary_text,
)
from pygents_ctx.context.tokens import count_tokens
from pygents_ctx.context.usage import UsageRecord
from pygents_ctx.errors import ConcurrentModificationError, SummarizationError

__all__ = ["AutoCompactStore", "compact_context"]

DEFAULT_CONTEXT_WINDOW: Final = 128_000


class _Plan:
    """What a compaction keeps, folds in and writes, computed from one snapshot."""

    def __init__(self, history: Sequence[Message], keep_recent: int) -> None:
        head = 0
        while head < len(history) and history[head].role == "system":
            head += 1
        self.head = list(history[:head])
        start = head
        self.previous: str | None = None
        # What the summary stands for: the ids the previous one named, then the old ones'.
        self.covered: list[int | tuple[int, int]] = []
        if start < len(history) and is_summary(history[start]):
            self.previous = summary_text(history[start])
            self.covered.extend(summary_ranges(history[start]))
            start += 1
            if start < len(history) and is_bridge(history[start]):
                start += 1
        split = _safe_split(history, start, len(history) - keep_recent)
        self.start = start
        self.old = list(history[start:split])
        self.recent = list(history[split:])
        self.replaced = list(history[:split])  # the oldest live messages, rewritten

    async def read_ids(self, store: ContextStore) -> None:
        """Note the store ids of the old messages, for the summary to name (when it has ids)."""
        ids = await store._live_ids(len(self.replaced))
        if ids is not None and len(ids) == len(self.replaced):
            self.covered.extend(ids[self.start :])

    def compacted_prefix(self, summary: str) -> list[Message] | None:
        """Head, the summary and, when the recent part opens with a user message, a bridge.

        The summary names the ids of the messages it replaces (`summary_of`),
        with those its predecessor named. None when that is no smaller than
        what it replaces: compaction never grows the history (a long summary
        of a few short messages would).
        """
        prefix = [*self.head, summary_message(summary, summary_of=self.covered)]
        if self.recent and self.recent[0].role == "user":
            prefix.append(bridge_message("assistant"))  # keep user/assistant alternating
        if count_tokens(prefix) >= count_tokens(self.replaced):
            return None
        return prefix


def _safe_split(history: Sequence[Message], start: int, want: int) -> int:
    """The largest index `<= want` (and `>= start`) that separates no call from its result."""
    want = max(start, want)
    # A result whose call is not in range (cut off by a truncated copy, say) has
    # nothing to be split from: it must not block every split before it.
    calls = {
        block.id
        for message in history[start:]
        for block in message.content
        if type(block) is ToolUseBlock
    }
    if want >= len(history):
        return len(history)  # keep_recent=0: nothing recent, nothing to split
    waiting: set[str] = set()
    for index in range(len(history) - 1, start - 1, -1):
        for block in history[index].content:
            if type(block) is ToolResultBlock and block.tool_use_id in calls:
                waiting.add(block.tool_use_id)
            elif type(block) is ToolUseBlock:
                waiting.discard(block.id)
        if index <= want and not waiting:
            return index
    return start


async def _summarize(plan: _Plan, summarizer: Summarizer) -> str:
    try:
        text = await summarizer(plan.old, plan.previous)
    except Exception as exc:
        raise SummarizationError(
            f"the summarizer failed on {len(plan.old)} messages; nothing was changed ({exc!r})"
        ) from exc
    if not isinstance(text, str) or not text.strip():
        raise SummarizationError(
            f"the summarizer returned {text!r}, not a non-empty summary; nothing was changed"
        )
    return text


async def compact_context(
    store: ContextStore, summarizer: Summarizer, *, keep_recent: int = 6
) -> list[Message] | None:
    """The store's history with its old part replaced by one summary; the store is unchanged.

    Leading system messages are kept. The newest `keep_recent` messages are
    kept whole (more, if the split would separate a tool call from its result).
    The rest becomes one summary message; a summary left by an earlier
    compaction is updated: the summarizer gets its text as `previous_summary`
    and only the messages that became old since. Roles keep alternating: when
    the recent part starts with a user message, a short assistant
    acknowledgement follows the summary.

    Returns:
        The compacted history, or None when there is nothing old to summarize
        or the result would not be smaller (in tokens) than the history.

    Raises:
        TypeError: `keep_recent` is not an int.
        ValueError: `keep_recent` is negative.
        SummarizationError: The summarizer failed or returned no text.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx.context.stores import MemoryContextStore
        >>> from pygents_ctx.testing import ScriptedSummarizer
        >>> store = MemoryContextStore(
        ...     [Message("user" if i % 2 == 0 else "assistant", f"Message {i}") for i in range(22)]
        ... )
        >>> compacted = asyncio.run(
        ...     compact_context(store, ScriptedSummarizer(["18 messages."]), keep_recent=4)
        ... )
        >>> summary_text(compacted[0]), compacted[1].text
        ('18 messages.', 'Understood. I will continue from this summary.')
        >>> len(compacted), compacted[2].text, compacted[-1].text
        (6, 'Message 18', 'Message 21')
    """
    whole_number(keep_recent, "keep_recent")
    plan = _Plan(await store.get_history(), keep_recent)
    if not plan.old:
        return None
    await plan.read_ids(store)
    prefix = plan.compacted_prefix(await _summarize(plan, summarizer))
    return None if prefix is None else [*prefix, *plan.recent]


class AutoCompactStore(ContextStore):
    """A store that compacts itself when a model call's input grows too large.

    Every method delegates to `inner`. `add_context_tokens(input, output)` and
    `record_usage(record)`, which report a model call's usage (a `ModelLoop`
    calls `record_usage` after each step), compact when the call's input is
    over `max_tokens`, or over `threshold * context_window` (128,000 when
    neither is given).

    Unlike a clear-and-rewrite, compaction here loses nothing:

    - it summarizes a snapshot and then replaces only those old messages
      (`replace_prefix`), so a message appended while the summarizer runs is
      kept, after the compacted ones;
    - the replaced messages stay in the archive
      (`get_history(include_archived=True)`, `search`), and the summary is a
      checkpoint that the next compaction updates; it names the store ids of
      the messages it replaced in its metadata (`summary_of`, read with
      `summary_covers`), where the store keeps ids;
    - it creates no extra session;
    - if the summarizer fails, the store is left exactly as it was and
      `SummarizationError` is raised;
    - it never grows the history: a summary no smaller than what it would
      replace is not written;
    - if the compacted messages changed while the summarizer ran (`clear()`,
      `clear_run()`, another compaction, in this process or another), the
      summary is not written: it would bring back what was removed or
      summarize a summary twice. The check is a compare-and-swap
      (`replace_prefix(..., expected=...)`), in the same transaction as the
      rewrite with the SQLite and PostgreSQL stores.

    `inner` may be a store written for the seed API (`append(message)`,
    `get_history()`): arguments left at their defaults are not passed on.

    Args:
        inner: The store to wrap.
        summarizer: `async (messages, previous_summary) -> str`.
        keep_recent: Messages kept verbatim at the end.
        threshold: The fraction of `context_window` that triggers compaction.
        max_tokens: An absolute trigger; overrides `threshold`.
        context_window: The model's context window.

    Raises:
        TypeError: `inner` is not a `ContextStore` (or one with neither
            `replace_prefix` nor `clear`), `summarizer` is not callable, or a
            setting is not a number (`keep_recent`, `max_tokens` and
            `context_window` must be ints).
        ValueError: A number is out of range.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx.context.stores import MemoryContextStore
        >>> from pygents_ctx.testing import ScriptedSummarizer
        >>> async def main():
        ...     store = AutoCompactStore(
        ...         MemoryContextStore(), ScriptedSummarizer(["We said hi."]),
        ...         keep_recent=2, max_tokens=1_000,
        ...     )
        ...     for i in range(6):
        ...         text = f"Message {i}: " + "hi " * 20
        ...         await store.append(Message("user" if i % 2 == 0 else "assistant", text))
        ...     await store.add_context_tokens(1_500, 20)  # that call's input was over 1,000
        ...     live = await store.get_history()
        ...     everything = await store.get_history(include_archived=True)
        ...     return summary_text(live[0]), len(live), len(everything)
        >>> asyncio.run(main())
        ('We said hi.', 4, 8)
    """

    def __init__(
        self,
        inner: ContextStore,
        summarizer: Summarizer,
        *,
        keep_recent: int = 6,
        threshold: float = 0.75,
        max_tokens: int | None = None,
        context_window: int | None = None,
    ) -> None:
        if not isinstance(inner, ContextStore):
            raise TypeError(f"AutoCompactStore wraps a ContextStore, not {type(inner).__name__}")
        if not can_replace_prefix(inner):
            raise TypeError(
                f"AutoCompactStore cannot compact a {type(inner).__name__}: it has neither "
                "replace_prefix() nor clear(); implement one of them"
            )
        if not callable(summarizer):
            raise TypeError(f"summarizer must be an async callable, not {summarizer!r}")
        whole_number(keep_recent, "keep_recent")
        fraction(threshold, "threshold")
        for name, value in (("max_tokens", max_tokens), ("context_window", context_window)):
            if value is not None:
                whole_number(value, name, least=1)
        self.inner = inner
        self.summarizer = summarizer
        self.keep_recent = keep_recent
        self.threshold = threshold
        self.max_tokens = max_tokens
        self.context_window = context_window
        self._compacting = asyncio.Lock()

    @property
    def limit(self) -> int:
        """The input size above which a reported model call triggers compaction."""
        if self.max_tokens is not None:
            return self.max_tokens
        return int(self.threshold * (self.context_window or DEFAULT_CONTEXT_WINDOW))

    @property
    def session_id(self) -> str:
        """The inner store's session id."""
        return self.inner.session_id

    def __repr__(self) -> str:
        return f"AutoCompactStore({self.inner!r}, limit={self.limit})"

    async def compact(self) -> bool:
        """Compact now, whatever the token counts say.

        Returns:
            True if the store was compacted; False if there was nothing old
            enough, the summary was no smaller than what it would replace, or
            the old messages changed while the summarizer ran.

        Raises:
            SummarizationError: The summarizer failed; the store is unchanged.
        """
        async with self._compacting:
            plan = _Plan(await self.inner.get_history(), self.keep_recent)
            if not plan.old:
                return False
            await plan.read_ids(self.inner)
            prefix = plan.compacted_prefix(await _summarize(plan, self.summarizer))
            if prefix is None:
                return False
            # A compare-and-swap: written only if the messages summarized are still
            # the oldest ones. Appends meanwhile are fine (they land after the
            # prefix); a prefix another writer rewrote makes this summary stale.
            try:
                await self.replace_prefix(len(plan.replaced), prefix, expected=plan.replaced)
            except ConcurrentModificationError:
                return False
            return True

    async def add_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Record a model call's usage; compact when its input was over `limit`."""
        await self.inner.add_context_tokens(input_tokens, output_tokens)
        if input_tokens > self.limit:
            await self.compact()

    async def record_usage(self, record: UsageRecord) -> None:
        """Keep a model call's usage in the inner store; compact when its input was over `limit`.

        A sub-agent's call (`record.call_id` set) is kept and never compacts:
        its input was the sub-agent's conversation, not this one.
        """
        await self.inner.record_usage(record)
        if record.call_id is None and record.usage.input_tokens > self.limit:
            await self.compact()

    async def get_usage(self, *, run_id: str | None = None) -> list[UsageRecord]:
        """The inner store's usage records."""
        return await self.inner.get_usage(**_given(run_id=run_id))

    # -- delegation ---------------------------------------------------------

    # Arguments left at their defaults are not passed: a store written for the
    # seed API has `append(message)` and `get_history()` only.

    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        """Append to the inner store."""
        await self.inner.append(message, **_given(run_id=run_id))

    async def append_many(self, messages: Iterable[Message], *, run_id: str | None = None) -> None:
        """Append several messages to the inner store."""
        await self.inner.append_many(messages, **_given(run_id=run_id))

    async def get_history(
        self, *, limit: int | None = None, offset: int = 0, include_archived: bool = False
    ) -> list[Message]:
        """The inner store's history."""
        return await self.inner.get_history(
            **_given(limit=limit, offset=offset or None, include_archived=include_archived or None)
        )

    async def count(self) -> int:
        """The inner store's live message count."""
        return await self.inner.count()

    async def search(self, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """Search the inner store (see `ContextStore.search`)."""
        return await self.inner.search(query, limit=limit)

    async def _live_ids(self, count: int) -> list[int] | None:
        return await self.inner._live_ids(count)

    async def shared_from(self) -> list[tuple[str, int]]:
        """The inner store's `shared_from`."""
        return await self.inner.shared_from()

    async def messages_after(self, after: int, *, limit: int = 1000) -> list[HistoryHit]:
        """The inner store's `messages_after`."""
        return await self.inner.messages_after(after, limit=limit)

    async def messages_with_ids(self, ids: Iterable[int]) -> list[HistoryHit]:
        """The inner store's `messages_with_ids`."""
        return await self.inner.messages_with_ids(ids)

    async def token_count(self) -> int:
        """The inner store's live token count."""
        return await self.inner.token_count()

    async def clear(self) -> None:
        """Clear the inner store."""
        await self.inner.clear()

    async def clear_run(self, run_id: str) -> None:
        """Clear one run in the inner store."""
        await self.inner.clear_run(run_id)

    async def rewind(self, to: int) -> int:
        """Rewind the inner store (see `ContextStore.rewind`)."""
        return await self.inner.rewind(to)

    async def replace_prefix(
        self,
        count: int,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expected: Sequence[Message] | None = None,
    ) -> None:
        """Replace the inner store's oldest messages (see `ContextStore.replace_prefix`).

        An inner store whose `replace_prefix` takes no `expected` gets the
        check done here first: correct against other tasks of this process
        only between its reads, not atomic against other writers.
        """
        if expected is None or takes_keyword(self.inner.replace_prefix, "expected"):
            await self.inner.replace_prefix(
                count, messages, **_given(run_id=run_id, expected=expected)
            )
            return
        wanted = check_expected(check_count(count), expected)
        if (await self.inner.get_history())[:count] != wanted:
            raise changed_prefix(self.session_id, count)
        await self.inner.replace_prefix(count, messages, **_given(run_id=run_id))

    async def fork(
        self, *, session_id: str | None = None, at: int | None = None
    ) -> AutoCompactStore:
        """A fork of the inner store (see `ContextStore.fork`), wrapped with the same settings."""
        return AutoCompactStore(
            await self.inner.fork(**_given(session_id=session_id, at=at)),
            self.summarizer,
            keep_recent=self.keep_recent,
            threshold=self.threshold,
            max_tokens=self.max_tokens,
            context_window=self.context_window,
        )

    def _keeps_checkpoints(self) -> bool:
        return self.inner._keeps_checkpoints()

    async def save_checkpoint(self, agent: str, state: bytes) -> int:
        """Keep an agent's checkpoint in the inner store (see `ContextStore.save_checkpoint`)."""
        return await self.inner.save_checkpoint(agent, state)

    async def get_checkpoint(self, agent: str, at: int) -> bytes | None:
        """An agent's checkpoint in the inner store (see `ContextStore.get_checkpoint`)."""
        return await self.inner.get_checkpoint(agent, at)

    async def list_checkpoints(self, agent: str | None = None) -> list[CheckpointInfo]:
        """The checkpoints in the inner store (see `ContextStore.list_checkpoints`)."""
        return await self.inner.list_checkpoints(agent)

    async def snapshot(self) -> SessionSnapshot:
        """The inner store's snapshot."""
        return await self.inner.snapshot()

    async def restore(self, snapshot: SessionSnapshot) -> None:
        """Restore `snapshot` into the inner store."""
        await self.inner.restore(snapshot)

    async def close(self) -> None:
        """Close the inner store."""
        await self.inner.close()

    async def set_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Set the inner store's token usage."""
        await self.inner.set_context_tokens(input_tokens, output_tokens)

    async def get_context_tokens(self) -> tuple[int, int]:
        """The inner store's token usage."""
        return await self.inner.get_context_tokens()

    @property
    def _lease_scope(self) -> Hashable:
        return self.inner._lease_scope

    async def _acquire_lease(self, owner: str, ttl: float, create: bool) -> tuple[bool, LeaseState]:
        return await self.inner._acquire_lease(owner, ttl, create)

    async def _renew_lease(self, owner: str, token: int, ttl: float) -> LeaseState | None:
        return await self.inner._renew_lease(owner, token, ttl)

    async def _release_lease(self, owner: str, token: int) -> None:
        await self.inner._release_lease(owner, token)

    @property
    def owner(self) -> str | None:
        """The inner store's owner."""
        return self.inner.owner

    async def list_sessions(self, *, owner: str | None = None) -> list[SessionInfo]:
        """The inner store's sessions (only `owner`'s when given)."""
        return await self.inner.list_sessions(owner=owner)

    async def erase(
        self,
        *,
        owner: str | None = None,
        session: str | None = None,
        older_than: timedelta | None = None,
    ) -> int:
        """Erase sessions in the inner store (see `ContextStore.erase`)."""
        return await self.inner.erase(owner=owner, session=session, older_than=older_than)

    @classmethod
    async def from_history(cls, messages: Iterable[Message], /, **kwargs: Any) -> AutoCompactStore:
        """Not available: build the inner store with `from_history`, then wrap it.

        Raises:
            TypeError: Always.
        """
        raise _built_by_wrapping("from_history")

    @classmethod
    async def from_context(cls, store: ContextStore, /, **kwargs: Any) -> AutoCompactStore:
        """Not available: build the inner store with `from_context`, then wrap it.

        Raises:
            TypeError: Always.
        """
        raise _built_by_wrapping("from_context")


def _built_by_wrapping(factory: str) -> TypeError:
    return TypeError(
        f"AutoCompactStore wraps a store: build the inner one with {factory}, "
        f"then wrap it: AutoCompactStore(await MemoryContextStore.{factory}(...), summarizer)"
    )


def _given(**arguments: Any) -> dict[str, Any]:
    """The keyword arguments that are not None."""
    return {name: value for name, value in arguments.items() if value is not None}
