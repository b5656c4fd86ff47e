"""The context store contract: the durable, ordered transcript of one conversation.

A store holds one *session* (a conversation, `session_id`) of `Message`s, in the
order they were appended. Each message may carry the `run_id` of the agent run
that wrote it, so one run's messages can be dropped (`clear_run`) while the rest
of the session stays. Beside the messages, a store keeps the token usage its
provider reported (`set_context_tokens` / `add_context_tokens`), a record of
each model call's usage (`record_usage` / `get_usage`), and a token count of
every stored message, so `token_count()` never re-tokenizes.

Messages taken out of the live history by `replace_prefix` (what compaction
uses) are not deleted: they move to the session's *archive*, readable with
`get_history(include_archived=True)` and found by `search`.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Sequence
from datetime import timedelta
from typing import Any, Self

from pygents_ctx.context.messages import Message, ToolResultBlock
from pygents_ctx.context.stores._checkpoint_sql import check_agent, check_state
from pygents_ctx.context.stores._common import (
    ClosesOnExit,
    changed_prefix,
    check_count,
    check_erase,
    check_expected,
    check_messages,
    check_tokens,
    check_usage_record,
    new_session_id,
    preview_of,
    require_run_id,
    session_not_empty,
    takes_keyword,
)
from pygents_ctx.context.stores._lease_sql import LeaseState
from pygents_ctx.context.stores._lineage import check_at
from pygents_ctx.context.stores._paged import check_batch, iter_windows
from pygents_ctx.context.stores._records import (
    ApprovalDecision,
    CheckpointInfo,
    HistoryRetention,
    SessionInfo,
    SessionSnapshot,
    StoredCheckpoint,
    StoredMessage,
    check_call_ids,
)
from pygents_ctx.context.stores._records import check_call_id as check_call_id
from pygents_ctx.context.stores._records import check_decision as check_decision
from pygents_ctx.context.stores._records import check_snapshot as check_snapshot
from pygents_ctx.context.stores.lease import Fence, InProcessLeases, SessionLease, current_fence
from pygents_ctx.context.stores.protocols import (
    JournalStore,
    LeaseStore,
    SessionCatalog,
    TranscriptStore,
    UsageStore,
)
from pygents_ctx.context.stores.search import (
    HistoryHit,
    candidate,
    check_message_ids,
    check_messages_after,
    check_search,
    rank,
)
from pygents_ctx.context.tokens import count_tokens
from pygents_ctx.context.usage import UsageRecord

__all__ = [
    "ApprovalDecision",
    "CheckpointInfo",
    "ContextStore",
    "HistoryRetention",
    "SessionInfo",
    "SessionSnapshot",
    "StoredCheckpoint",
    "StoredMessage",
]


def keeps_archive(store: ContextStore) -> bool:
    """Whether `store` has its own `replace_prefix` (the default keeps no archive)."""
    return type(store).replace_prefix is not ContextStore.replace_prefix


def keeps_checkpoints(store: ContextStore) -> bool:
    """Whether `store` keeps agents' checkpoints (`save_checkpoint` works)."""
    return store._keeps_checkpoints()


def can_replace_prefix(store: ContextStore) -> bool:
    """Whether `store.replace_prefix` can work: its own, or the default over its own `clear`."""
    return keeps_archive(store) or type(store).clear is not ContextStore.clear


class ContextStore(
    TranscriptStore, UsageStore, JournalStore, LeaseStore, SessionCatalog, ClosesOnExit, ABC
):
    """Where a conversation is kept. Subclass it to store sessions anywhere.

    It is every store protocol at once (`TranscriptStore`, `UsageStore`,
    `JournalStore`, `LeaseStore`, `SessionCatalog`): a subclass gets all of
    them, each method with a default.

    Only `append` and `get_history` are abstract. Every other method has a
    default built on those two (and on `clear` where it must remove messages),
    correct but not tuned: the built-in backends override them with atomic,
    O(1) versions. No `__init__` is required: `session_id` is generated on first
    use, and token usage is kept on the instance.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> class ListStore(ContextStore):
        ...     def __init__(self) -> None:
        ...         self.messages: list[Message] = []
        ...     async def append(self, message, *, run_id=None):
        ...         self.messages.append(message)
        ...     async def get_history(self, *, limit=None, offset=0, include_archived=False):
        ...         return list(self.messages)
        >>> async def main():
        ...     store = ListStore()
        ...     await store.append(Message("user", "hello"))
        ...     await store.add_context_tokens(12, 3)
        ...     return await store.count(), await store.get_context_tokens()
        >>> asyncio.run(main())
        (1, (12, 3))
    """

    _session_id: str | None = None
    _input_tokens: int = 0
    _output_tokens: int = 0
    _usage_records: list[UsageRecord] | None = None
    _decisions: dict[str, ApprovalDecision] | None = None
    _journal: dict[str, ToolResultBlock | None] | None = None
    _leases: InProcessLeases | None = None
    _owner: str | None = None

    @property
    def session_id(self) -> str:
        """The session's id; a random uuid hex, made on first use, when none was given."""
        if self._session_id is None:
            self._session_id = new_session_id()
        return self._session_id

    @property
    def owner(self) -> str | None:
        """The user or tenant id this store's session is made for (`owner=`), or None."""
        return self._owner

    # -- messages -----------------------------------------------------------

    @abstractmethod
    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        """Add `message` at the end of the history, tagged with `run_id` when given."""

    async def append_many(self, messages: Iterable[Message], *, run_id: str | None = None) -> None:
        """Add `messages` at the end, in order: one transaction where the backend has them.

        Raises:
            TypeError: Something in `messages` is not a `Message` (nothing is added).
        """
        for message in check_messages(messages):
            # Without a run, call append(message) alone: stores written for the seed API
            # take no run_id.
            if run_id is None:
                await self.append(message)
            else:
                await self.append(message, run_id=run_id)

    @abstractmethod
    async def get_history(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        include_archived: bool = False,
    ) -> list[Message]:
        """The history, oldest first, as a new list.

        Args:
            limit: Return only the newest `limit` messages (all when None).
            offset: Skip the newest `offset` messages first: `limit=10, offset=10`
                is the ten before the last ten.
            include_archived: Put the archive (messages `replace_prefix` took
                out, oldest first) before the live history; `limit` and
                `offset` then count in that whole list.

        Raises:
            TypeError: `limit` or `offset` is not an int.
            ValueError: `limit` or `offset` is negative.
        """

    async def iter_history(
        self, *, batch: int = 1000, include_archived: bool = False
    ) -> AsyncIterator[Message]:
        """The history, oldest first, read `batch` messages at a time.

        For callers that do not need it all at once (an export, a search, a
        migration): memory holds one page, however long the session. Each page
        is its own read: messages appended meanwhile are included, while a
        `replace_prefix` or `clear` by another writer during the iteration may
        skip or repeat messages (`snapshot()` reads one moment). SQLite and
        PostgreSQL page by stored position; this default, by `get_history`
        windows (with the archive: in one call).

        Args:
            batch: Messages per read.
            include_archived: Begin with the archive, oldest first.

        Raises:
            TypeError: `batch` is not an int.
            ValueError: `batch` is less than 1.

        Examples:
            >>> import asyncio
            >>> from pygents_ctx.context.stores import MemoryContextStore
            >>> async def main():
            ...     store = MemoryContextStore([Message("user", str(i)) for i in range(5)])
            ...     return [m.text async for m in store.iter_history(batch=2)]
            >>> asyncio.run(main())
            ['0', '1', '2', '3', '4']
        """
        async for message in iter_windows(self, check_batch(batch), include_archived):
            yield message

    async def search(self, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """The messages of the session that best match `query`, live or archived, best first.

        What compaction archived or a strategy left out of the window is
        found here as well as the live history. `query` is plain text: its
        words are looked up, any of them may match, and no character is
        syntax. Hits are ranked by relevance (BM25; `ts_rank` in PostgreSQL),
        ties newest first. See `pygents_ctx.context.stores.search` for what is
        searched and how words are split.

        SQLite searches its FTS5 index and PostgreSQL its full-text index;
        the memory store and this default (for stores of your own) scan the
        session, this default reading it with `get_history` and knowing no
        ids or run ids.

        Args:
            query: The words to look for, at most `MAX_SEARCH_QUERY` (1,000)
                characters.
            limit: The most hits to return, 1 to `MAX_SEARCH_LIMIT` (100).

        Returns:
            Up to `limit` hits; none when no word of the query is in the session.

        Raises:
            TypeError: `query` is not a str or `limit` is not an int.
            ValueError: `query` is empty, whitespace or too long, or `limit`
                is out of range; nothing is read.

        Examples:
            >>> import asyncio
            >>> from pygents_ctx.context.stores import MemoryContextStore
            >>> async def main():
            ...     store = MemoryContextStore([Message("user", "The gate code is 4417.")])
            ...     await store.replace_prefix(1, [Message("user", "(summary)")])
            ...     hits = await store.search("what is the gate code?")
            ...     return [(hit.archived, hit.message.text) for hit in hits]
            >>> asyncio.run(main())
            [(True, 'The gate code is 4417.')]
        """
        query, limit = check_search(query, limit)
        live = await self.get_history()
        archived: list[Message] = []
        if takes_keyword(self.get_history, "include_archived"):
            everything = await self.get_history(include_archived=True)
            archived = everything[: max(len(everything) - len(live), 0)]
        candidates = [
            candidate(message, archived=part is archived, position=index, id=None, run_id=None)
            for part in (archived, live)
            for index, message in enumerate(part)
        ]
        return rank(candidates, query, limit)

    async def messages_after(self, after: int, *, limit: int = 1000) -> list[HistoryHit]:
        """The session's messages, live and archived, whose id is above `after`, by id.

        What an index of one's own (`pygents_ctx.memory.SemanticRecall`)
        catches up with: page through the session with `after` set to the
        last id read. Each hit says where the message is now, as `search`
        does (`score` is 0). Ids only grow as messages are written, except
        that a SQLite database may give a deleted newest row's id again.

        The memory, SQLite and PostgreSQL stores have it; this default
        (for stores of your own, which keep no ids) raises.

        Args:
            after: A message id (`HistoryHit.id`); 0 reads from the first.
            limit: The most messages to return.

        Raises:
            TypeError: `after` or `limit` is not an int.
            ValueError: `limit` is less than 1.
            NotImplementedError: The store keeps no message ids (this default).
        """
        check_messages_after(after, limit)
        raise NotImplementedError(
            f"{type(self).__name__} keeps no message ids, so it cannot list messages by id; "
            "use MemoryContextStore, SQLiteContextStore or PostgresContextStore"
        )

    async def messages_with_ids(self, ids: Iterable[int]) -> list[HistoryHit]:
        """Where the messages with these ids are now in the session, by id.

        An id the session does not hold (any more) is left out. Each hit is
        as `search` returns it (`score` is 0).

        Raises:
            TypeError: `ids` is not an iterable of ints.
            NotImplementedError: The store keeps no message ids (this default).
        """
        check_message_ids(ids)
        raise NotImplementedError(
            f"{type(self).__name__} keeps no message ids, so it cannot find messages by id; "
            "use MemoryContextStore, SQLiteContextStore or PostgresContextStore"
        )

    async def shared_from(self) -> list[tuple[str, int]]:
        """The sessions this fork shares stored messages with, oldest first, each with the
        newest message id (`HistoryHit.id`) it shares of them.

        A fork keeps the ids of the messages it inherits: a message of this
        session whose id is at most that number is the source's message of
        that id, as the source held it when the fork was made. What an index
        of one's own (`pygents_ctx.memory.SemanticRecall`) uses to take a
        fork's inherited messages from its source's index instead of making
        them again. A fork of a fork names both sessions.

        The SQLite and PostgreSQL stores name the sessions whose rows the fork
        reads, while it reads them: once copy on write gave it rows of its own
        (see `fork`), none. A `MemoryContextStore` fork names its sources for
        good (it shares their message objects). This default, and a session
        that is not a fork: none.
        """
        return []

    async def _live_ids(self, count: int) -> list[int] | None:
        """The ids of the oldest `count` live messages (what a summary of them records);
        None for a store that keeps no ids (this default)."""
        return None

    async def count(self) -> int:
        """The number of messages in the live history."""
        return len(await self.get_history())

    async def token_count(self) -> int:
        """The total token count of the live history, with the default counter.

        The built-in backends keep a running sum of the counts stored beside
        each message. This default sums `count_message_tokens` over
        `get_history()`, which reuses counts cached on the message objects.
        """
        return count_tokens(await self.get_history())

    async def clear(self) -> None:
        """Remove every message of the session, live and archived, in one transaction.

        The session and its token usage stay; `set_context_tokens(0, 0)` resets those.

        Raises:
            NotImplementedError: The store does not implement it (this default).
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not support clear(); override clear() to remove messages"
        )

    async def clear_run(self, run_id: str) -> None:
        """Remove the messages appended with `run_id` (live and archived), in one transaction.

        Raises:
            NotImplementedError: The store does not implement it (this default).
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not support clear_run(); override clear_run() "
            "to remove one run's messages"
        )

    async def replace_prefix(
        self,
        count: int,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expected: Sequence[Message] | None = None,
    ) -> None:
        """Replace the oldest `count` live messages with `messages`, atomically.

        The storage step of compaction: the replaced messages move to the
        archive (see `get_history(include_archived=True)`), `messages` take
        their place at the front, and every message appended after them,
        including those appended while a summarizer was running, stays after,
        in order. `count=0` inserts `messages` at the front; empty `messages`
        just archives the oldest `count`.

        With `expected`, the write is a compare-and-swap: it happens only if
        the oldest `count` live messages still equal `expected` (what the
        caller read before it started), checked in the same transaction as the
        rewrite. Otherwise `ConcurrentModificationError` is raised and nothing
        changes. Messages appended meanwhile do not count as a change.

        This default reads the history, then calls `clear()` and `append_many()`:
        it is not atomic (a concurrent writer can slip in between the check and
        the write), keeps no archive and drops run ids. The built-in backends
        do it in one transaction.

        Args:
            count: How many of the oldest live messages to replace.
            messages: What goes in their place, oldest first.
            run_id: The run to tag the new messages with.
            expected: The oldest `count` messages as the caller read them, or
                None to replace whatever is there.

        Raises:
            TypeError: `count` is not an int, or `messages` or `expected` holds a
                non-`Message`.
            ValueError: `count` is negative or exceeds the live message count
                (without `expected`), or `expected` does not hold `count` messages.
            ConcurrentModificationError: The oldest `count` messages are no
                longer `expected`; nothing was changed.
            NotImplementedError: (this default) the store has no `clear()`.
        """
        count = check_count(count)
        batch = check_messages(messages)
        wanted = check_expected(count, expected)
        if not can_replace_prefix(self):
            raise NotImplementedError(
                f"{type(self).__name__} cannot replace_prefix(): override replace_prefix(), "
                "or clear() for this default to use"
            )
        history = await self.get_history()
        if wanted is not None and history[:count] != wanted:
            raise changed_prefix(self.session_id, count)
        if count > len(history):
            raise ValueError(
                f"count {count} exceeds the {len(history)} messages in the live history"
            )
        await self.clear()
        await self.append_many([*batch, *history[count:]], run_id=run_id)

    async def fork(self, *, session_id: str | None = None, at: int | None = None) -> ContextStore:
        """A new session holding this one's history (or its oldest `at` messages) and
        archive, independent of it from then on.

        The fork's token usage and usage records start empty: each model
        call's usage is counted once, in the session that made the call, so
        adding up every session's spend counts each call once.

        A message is named by its index in the live history: `at=n` keeps
        `history[:n]`, as `get_history()` returns it (stored messages carry no
        id of their own). The archive is kept whole, and so are the agents'
        checkpoints up to the point (see `save_checkpoint`; the database stores
        copy a small row per checkpoint and share the saved bytes).

        The SQLite and PostgreSQL stores share the stored messages instead of
        copying them: the fork is a session row and a row per session it reads
        from, the same cost at message 50 as at message 50,000. Shared rows are
        copied only when something would change them (copy on write): a
        `replace_prefix` (compaction), `clear`, `clear_run`, `restore` or a
        `rewind` below the fork's point, on either side. Appending to either
        side copies nothing. `MemoryContextStore` shares the message objects.
        This default copies into a `MemoryContextStore`.

        Args:
            session_id: The new session's id (a random one when None).
            at: How many of the oldest live messages the fork keeps (0 to
                `count()`); None keeps them all.

        Raises:
            TypeError: `at` is not an int.
            ValueError: `at` is negative or more than `count()`; nothing is made.

        Examples:
            >>> import asyncio
            >>> from pygents_ctx.context.stores import MemoryContextStore
            >>> async def main():
            ...     store = MemoryContextStore([Message("user", str(i)) for i in range(5)])
            ...     branch = await store.fork(at=2)
            ...     await branch.append(Message("user", "b"))
            ...     return [m.text for m in await branch.get_history()], await store.count()
            >>> asyncio.run(main())
            (['0', '1', 'b'], 5)
        """
        snapshot = await self.snapshot()
        keep = len(snapshot.messages) if at is None else at
        check_at(keep, len(snapshot.messages), self.session_id, "fork(at=...)")
        kept = SessionSnapshot(
            self.session_id,
            snapshot.messages[:keep],
            snapshot.archived,
            checkpoints=[c for c in snapshot.checkpoints if c.at <= keep],
        )
        clone = _FORK_INTO[0](session_id=session_id, owner=self.owner)
        await clone.restore(kept)
        return clone

    async def rewind(self, to: int) -> int:
        """Keep the oldest `to` live messages and remove the others; return how many went.

        The message is named as in `fork(at=...)`: its index in `get_history()`.
        The removed messages are deleted, not archived (fork first to keep
        them: a fork is cheap); the archive, token usage and usage records
        stay, and so do the agents' checkpoints up to the point (see
        `save_checkpoint`); those after it are dropped. It rewinds the stored
        history only: an agent using the store keeps its queue and pool as
        they are. `Agent.rewind(to)` rewinds both: the store, and the agent's
        queue and pool from its checkpoint at `to` where one exists.

        The SQLite and PostgreSQL stores delete the rows after the point in
        one transaction and copy nothing (a fork that shares them gets its own
        first); `MemoryContextStore` drops the list's tail. This default reads
        `snapshot()`, then calls `clear()` and `restore()`: not atomic.

        Raises:
            TypeError: `to` is not an int.
            ValueError: `to` is negative or more than `count()`; nothing changed.
            NotImplementedError: (this default) the store has no `clear()`.
        """
        snapshot = await self.snapshot()
        held = len(snapshot.messages)
        keep = check_at(to, held, self.session_id, "rewind(to=...)")
        if keep == held:
            return 0
        if type(self).clear is ContextStore.clear:
            raise NotImplementedError(
                f"{type(self).__name__} cannot rewind(): override rewind(), or clear() for "
                "this default to use"
            )
        await self.clear()
        await self.restore(
            SessionSnapshot(
                self.session_id,
                snapshot.messages[:keep],
                snapshot.archived,
                snapshot.input_tokens,
                snapshot.output_tokens,
                checkpoints=[c for c in snapshot.checkpoints if c.at <= keep],
            )
        )
        return held - keep

    # -- agents' checkpoints ---------------------------------------------------

    def _keeps_checkpoints(self) -> bool:
        """Whether `save_checkpoint` works here (a store that wraps another asks it)."""
        return type(self).save_checkpoint is not ContextStore.save_checkpoint

    async def save_checkpoint(self, agent: str, state: bytes) -> int:
        """Keep `state`, agent `agent`'s saved state, as its checkpoint at this point of
        the session: after the live messages there are now. Returns their number.

        What `Agent.checkpoint()` calls (use that); `state` is opaque bytes to
        the store. One checkpoint per agent and point: a second one at the
        same point replaces the first. A checkpoint stays while the messages
        before its point do, through appends, forks (a fork at or after the
        point has it too) and compactions that archive no message before it;
        a `rewind` before its point, `clear`, or a `clear_run` or compaction
        that removes a message before it drops it. `erase` removes it with
        the session. The built-in stores keep each distinct state once,
        however many checkpoints and forks name it.

        This default keeps none: it raises `NotImplementedError`.

        Args:
            agent: The name of the agent the state is of.
            state: The saved state.

        Raises:
            TypeError: `agent` is not a str or `state` not bytes.
            ValueError: `agent` or `state` is empty, or `agent` holds a NUL
                or a lone surrogate; nothing was written.
            NotImplementedError: The store keeps no checkpoints (this default).
            LeaseLostError: Made under a lease that passed to another holder
                or ran out (see `lease()`); nothing was written.

        Examples:
            >>> import asyncio
            >>> from pygents_ctx.context.stores import MemoryContextStore
            >>> async def main():
            ...     store = MemoryContextStore([Message("user", "hi")])
            ...     at = await store.save_checkpoint("helper", b"{}")
            ...     await store.append(Message("assistant", "hello"))
            ...     after = await store.get_checkpoint("helper", 2)
            ...     return at, await store.get_checkpoint("helper", 1), after
            >>> asyncio.run(main())
            (1, b'{}', None)
        """
        check_agent(agent)
        check_state(state)
        raise NotImplementedError(
            f"{type(self).__name__} keeps no checkpoints; MemoryContextStore, "
            "SQLiteContextStore and PostgresContextStore do (or override save_checkpoint() "
            "and get_checkpoint() in yours)"
        )

    async def get_checkpoint(self, agent: str, at: int) -> bytes | None:
        """The state `agent` saved at live message `at` (after `history[:at]`), or None.

        `at` is named as in `rewind(to=...)`. When the agent saved several
        states at that point (messages removed between them by `clear_run`
        left no trace), the newest one.

        This default keeps none: it checks its arguments and returns None.

        Raises:
            TypeError: `agent` is not a str or `at` not an int.
            ValueError: `agent` is empty, or `at` is negative or more than
                `count()`.
        """
        check_agent(agent)
        check_at(at, await self.count(), self.session_id, "get_checkpoint(at=...)")
        return None

    async def list_checkpoints(self, agent: str | None = None) -> list[CheckpointInfo]:
        """The agents' checkpoints in the session (`agent`'s alone, if given), in order of
        message, then agent.

        One per agent and message: the one `get_checkpoint(agent, at)` reads
        (`Agent.rewind(to)` restores). `Agent.checkpoints()` lists an agent's own.
        The built-in stores read the small rows, not the saved states, in one
        read transaction.

        This default keeps none: it checks `agent` and returns `[]` (a store
        of your own that keeps checkpoints overrides it beside
        `save_checkpoint()` and `get_checkpoint()`).

        Raises:
            TypeError: `agent` is not a str or None.
            ValueError: `agent` is empty, or holds a NUL or a lone surrogate.

        Examples:
            >>> import asyncio
            >>> from pygents_ctx.context.stores import MemoryContextStore
            >>> async def main():
            ...     store = MemoryContextStore([Message("user", "hi")])
            ...     await store.save_checkpoint("helper", b"{}")
            ...     return [(c.agent, c.at, c.size) for c in await store.list_checkpoints()]
            >>> asyncio.run(main())
            [('helper', 1, 2)]
        """
        if agent is not None:
            check_agent(agent)
        return []

    async def snapshot(self) -> SessionSnapshot:
        """Everything the session holds: the history and the archive with their run ids, the
        token usage, the usage records and the agents' checkpoints.

        The built-in backends read it in one transaction, so it is one consistent
        moment even while other processes write. This default reads
        `get_history()` (with and without the archive), `get_context_tokens()`,
        `get_usage()`, and `list_checkpoints()` with `get_checkpoint()` for
        each; it knows no run ids.
        """
        live = await self.get_history()
        if takes_keyword(self.get_history, "include_archived"):
            everything = await self.get_history(include_archived=True)
            archived = everything[: max(len(everything) - len(live), 0)]
        else:
            archived = []
        tokens = await self.get_context_tokens()
        checkpoints = []
        for info in await self.list_checkpoints():
            state = await self.get_checkpoint(info.agent, info.at)
            if state is not None:
                checkpoints.append(StoredCheckpoint(info.agent, info.at, info.created_at, state))
        return SessionSnapshot(
            self.session_id,
            live,
            archived,
            *tokens,
            usage=await self.get_usage(),
            checkpoints=checkpoints,
        )

    async def restore(self, snapshot: SessionSnapshot) -> None:
        """Write `snapshot` into this store's session, which must hold no messages yet.

        The history and the archive keep their order and run ids, the usage
        records are added, the token usage becomes the snapshot's, and the
        agents' checkpoints are kept at their messages (with their times).
        `snapshot.session_id` is not used: the messages go to this store's
        session, so `restore(other.snapshot())` copies a session, across
        backends too. The built-in backends write everything in one
        transaction: if it fails, nothing was written.

        This default checks `count()` and the archive, then calls `append_many()`
        (once per run), `save_checkpoint()` between them (the checkpoints get
        the time of the call), `replace_prefix()`, `record_usage()` (once per
        record) and `set_context_tokens()`: not atomic.
        A store without its own `replace_prefix` keeps no archive, and one
        without its own `save_checkpoint` no checkpoints: only what it keeps
        is written to it.

        Raises:
            TypeError: `snapshot` is not a `SessionSnapshot`.
            ValueError: The session already holds messages (live or archived);
                nothing was written.
        """
        snapshot = check_snapshot(snapshot)
        held = await self.count()
        if not held and takes_keyword(self.get_history, "include_archived"):
            held = len(await self.get_history(include_archived=True, limit=1))
        if held:
            raise session_not_empty(self.session_id)
        archived = snapshot.archived if keeps_archive(self) else ()
        everything = [*archived, *snapshot.messages]
        checkpoints = snapshot.checkpoints if self._keeps_checkpoints() else ()
        # Appended up to each checkpoint's message, then the checkpoint, then on.
        start = 0
        for end in sorted({len(everything), *(len(archived) + c.at for c in checkpoints)}):
            part = everything[start:end]
            for run_id, group in itertools.groupby(part, key=lambda stored: stored.run_id):
                await self.append_many([stored.message for stored in group], run_id=run_id)
            for checkpoint in checkpoints:
                if len(archived) + checkpoint.at == end:
                    await self.save_checkpoint(checkpoint.agent, checkpoint.state)
            start = end
        if archived:
            await self.replace_prefix(len(archived), ())
        for record in snapshot.usage:
            await self.record_usage(record)
        # After the records, which add their tokens: the totals are the snapshot's.
        await self.set_context_tokens(snapshot.input_tokens, snapshot.output_tokens)

    async def close(self) -> None:
        """Release what the store holds. This default does nothing."""

    # -- token usage --------------------------------------------------------

    async def set_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Overwrite the token usage recorded for the session.

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
            LeaseLostError: Made under a lease that passed to another holder
                or ran out (see `lease()`); nothing was changed.
        """
        amounts = check_tokens(input_tokens, output_tokens)
        self._check_fence()
        self._input_tokens, self._output_tokens = amounts

    async def get_context_tokens(self) -> tuple[int, int]:
        """The token usage recorded for the session: `(input_tokens, output_tokens)`."""
        return self._input_tokens, self._output_tokens

    async def add_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Add to the recorded token usage (atomically in the persistent backends).

        This default reads with `get_context_tokens()` and writes with `set_context_tokens()`.

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
        """
        add_in, add_out = check_tokens(input_tokens, output_tokens)
        current_in, current_out = await self.get_context_tokens()
        await self.set_context_tokens(current_in + add_in, current_out + add_out)

    async def record_usage(self, record: UsageRecord) -> None:
        """Keep one model call's usage, and add its tokens to the session's usage.

        The record is kept in order, and `record.usage.input_tokens` and
        `output_tokens` are added as `add_context_tokens` adds them (the built-in
        backends do both in one transaction). Records stay through `clear()` and
        `clear_run()`: they count what was spent, not what is kept.

        This default keeps the records on the instance and calls `add_context_tokens`.

        Raises:
            TypeError: `record` is not a `UsageRecord`.
            LeaseLostError: Made under a lease that passed to another holder
                or ran out (see `lease()`); nothing was changed.
        """
        record = check_usage_record(record)
        self._check_fence()
        if self._usage_records is None:
            self._usage_records = []
        self._usage_records.append(record)
        await self.add_context_tokens(record.usage.input_tokens, record.usage.output_tokens)

    async def get_usage(self, *, run_id: str | None = None) -> list[UsageRecord]:
        """The usage records of the session, oldest first; only run `run_id`'s when given.

        Add them up with `sum((r.usage for r in records), Usage())`.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = None if run_id is None else require_run_id(run_id)
        return [
            record
            for record in self._usage_records or ()
            if target is None or record.run_id == target
        ]

    # -- approval decisions -------------------------------------------------------

    async def record_decision(self, call_id: str, decision: ApprovalDecision) -> ApprovalDecision:
        """Keep a person's decision on tool call `call_id`, unless the call has one; the one kept.

        A decision is final: the first one recorded for a call stays, and a
        later one changes nothing (compare the returned decision with yours).
        `ModelLoop.approve()` / `reject()` record here, after checking that
        the call waits; a decision on a call that is no longer waiting is
        never read. Decisions stay through `clear()` and are not copied by
        `fork()`; they go with the session.

        This default keeps them on the instance.

        Raises:
            TypeError: `call_id` is not a str, or `decision` is not an
                `ApprovalDecision` of a bool and a str or None.
            ValueError: `call_id` is empty, or it or the reason holds a NUL
                character or a lone surrogate.
            LeaseLostError: Made under a lease that passed to another holder
                or ran out (see `lease()`); nothing was changed.
        """
        call_id, decision = check_decision(call_id, decision)
        self._check_fence()
        if self._decisions is None:
            self._decisions = {}
        return self._decisions.setdefault(call_id, decision)

    async def get_decisions(self) -> dict[str, ApprovalDecision]:
        """Every decision recorded on this session's tool calls, by call id."""
        return dict(self._decisions or {})

    # -- the step journal ---------------------------------------------------------

    async def journal_start(self, call_id: str) -> None:
        """Record that tool call `call_id` starts: written before its tool runs.

        The step journal is how a model loop resumed after a crash tells a
        call that never started (it runs) from one that started and did not
        finish (it may have run: the model reads `INTERRUPTED`) and from one
        that finished (its kept result is used; the tool does not run again).
        Recording a call that is recorded changes nothing. The journal goes
        with the session (`delete`).

        This default keeps it on the instance.

        Raises:
            TypeError: `call_id` is not a str.
            ValueError: `call_id` is empty, or holds a NUL character or a
                lone surrogate.
            LeaseLostError: Made under a lease that passed to another holder
                or ran out (see `lease()`); nothing was changed.
        """
        call_id = check_call_id(call_id)
        self._check_fence()
        if self._journal is None:
            self._journal = {}
        self._journal.setdefault(call_id, None)

    async def journal_finish(self, call_id: str, result: ToolResultBlock) -> None:
        """Record that tool call `call_id` finished with `result` (the one the model reads).

        A call that has a result keeps it.

        Raises:
            TypeError: `call_id` is not a str, or `result` not a `ToolResultBlock`.
            ValueError, LeaseLostError: As `journal_start` says.
        """
        call_id = check_call_id(call_id)
        if not isinstance(result, ToolResultBlock):
            raise TypeError(f"journal_finish needs a ToolResultBlock result, not {result!r}")
        self._check_fence()
        if self._journal is None:
            self._journal = {}
        if self._journal.get(call_id) is None:
            self._journal[call_id] = result

    async def get_journal(self, call_ids: Iterable[str]) -> dict[str, ToolResultBlock | None]:
        """The journal of `call_ids`: each recorded call's result, None if it did not finish.

        A call never started is not in it.

        Raises:
            TypeError: `call_ids` is one str, or holds a non-str.
            ValueError: An id is empty, or holds a NUL or a lone surrogate.
        """
        journal = self._journal or {}
        return {c: journal[c] for c in check_call_ids(call_ids) if c in journal}

    # -- one writer per session -------------------------------------------------

    def lease(
        self,
        *,
        ttl: float = 30.0,
        wait: float | bool = False,
        owner: str | None = None,
        create: bool = False,
        renew: bool = True,
    ) -> SessionLease:
        """A lease on this store's session: `async with store.lease() as lease:` holds it.

        While held, every other `lease()` on the session, from any task,
        process or machine sharing the store's database, gets
        `SessionBusyError` (or waits for it). It is renewed in the background
        while held, and released at the end of the block; the lease of a
        holder that crashed runs out `ttl` seconds after its last renewal.
        See `SessionLease`.

        The SQLite and PostgreSQL stores keep it in the database;
        `MemoryContextStore` and this default keep it on the store object, so
        it excludes only the tasks of this process that share the object.

        While it is held, the writes to the session made by the code that took
        it (and the tasks that code starts), through this store or any other
        on the same database and session, are fenced: the store checks the
        lease in each write's own transaction and refuses the write with
        `LeaseLostError`, storing nothing, once another holder took the lease
        over or it ran out.

        Args:
            ttl: Seconds the lease lasts past each renewal (renewed every
                third of it). A holder that stops for longer loses it.
            wait: Seconds to wait for another holder to let go before raising
                `SessionBusyError`; False (or 0) raises at once, `math.inf`
                waits as long as it takes.
            owner: Names this holder in the errors other takers get; default
                host, process id and a random suffix.
            create: Create the session if the store has never written it
                (a database store's session exists from its first write;
                without `create`, a session id it does not know is refused
                as the typo it most likely is).
            renew: Renew in the background while held (False: it lasts `ttl`,
                unless you `await lease.renew()`).

        Raises:
            TypeError: An argument has the wrong type.
            ValueError: `ttl` is not a positive finite number, or `wait` is
                negative, NaN or True.

        Examples:
            >>> import asyncio
            >>> from pygents_ctx import Message
            >>> from pygents_ctx.context.stores import MemoryContextStore
            >>> async def main():
            ...     store = MemoryContextStore(session_id="chat")
            ...     async with store.lease(ttl=10) as lease:
            ...         await store.append(Message("user", "only I write here now"))
            ...         return lease.held, lease.token
            >>> asyncio.run(main())
            (True, 1)
        """
        return SessionLease(self, ttl=ttl, wait=wait, owner=owner, create=create, renew=renew)

    # The three atomic steps a lease is made of, and where it lives. A store that can
    # share its session with other processes overrides all four; these keep it on
    # the object.

    @property
    def _lease_scope(self) -> Hashable:
        """Where the lease lives: stores with equal scopes share it (and its fences)."""
        return self

    def _fence(self) -> Fence | None:
        """The lease the running code holds on this store's session: its writes check it."""
        return current_fence(self)

    def _check_fence(self) -> None:
        """Refuse a write under a lease kept on this object that passed on or ran out.

        Raises:
            LeaseLostError: Refused; the lease is lost from now on.
        """
        fence = current_fence(self)
        if fence is not None and self._leases is not None:
            why = self._leases.refusal(fence.token)
            if why is not None:
                raise fence.refuse(why)

    async def _acquire_lease(self, owner: str, ttl: float, create: bool) -> tuple[bool, LeaseState]:
        """Take the lease if it is free: `(True, ours)`, else `(False, the holder's)`."""
        if self._leases is None:
            self._leases = InProcessLeases()
        return self._leases.acquire(owner, ttl)

    async def _renew_lease(self, owner: str, token: int, ttl: float) -> LeaseState | None:
        """Extend the lease if `owner` and `token` still hold it; None if they lost it."""
        return None if self._leases is None else self._leases.renew(owner, token, ttl)

    async def _release_lease(self, owner: str, token: int) -> None:
        """End the lease now if `owner` and `token` still hold it."""
        if self._leases is not None:
            self._leases.release(owner, token)

    # -- sessions -----------------------------------------------------------

    async def list_sessions(self, *, owner: str | None = None) -> list[SessionInfo]:
        """The sessions this store can see, newest first; only `owner`'s when given.

        This default: this session only (none when `owner` is not this store's).
        """
        if owner is not None and owner != self.owner:
            return []
        history = await self.get_history()
        preview = next((p for p in map(preview_of, history) if p is not None), "")
        input_tokens, output_tokens = await self.get_context_tokens()
        return [
            SessionInfo(
                self.session_id,
                await self.count(),
                preview,
                "",
                input_tokens,
                output_tokens,
                self.owner,
            )
        ]

    async def erase(
        self,
        *,
        owner: str | None = None,
        session: str | None = None,
        older_than: timedelta | None = None,
    ) -> int:
        """Remove whole sessions for good: `owner`'s, the one named `session`, or both.

        The conditions given all hold for an erased session: `owner` (its owner),
        `session` (its id), `older_than` (created more than this long ago: the
        retention rule). Everything stored with a session goes: messages, archive,
        usage, lease, approval decisions, search index rows, and the blobs of its
        offloaded tool results that no other session names. A fork of an erased
        session keeps its history: it gets its own copy first. SQLite and
        PostgreSQL do it in one transaction; see the stores guide for what else
        makes erased bytes unreadable on disk (`secure_delete`, `VACUUM`).
        A store object of an erased session that writes again makes a new,
        empty session of that id, as after `clear`; a store on another
        connection does not check its owner again: make new stores after an erase.

        Returns:
            How many sessions were erased.

        Raises:
            ValueError: Neither `owner` nor `session` is given (nothing is erased),
                either is empty or holds a NUL or a lone surrogate, or
                `older_than` is negative.
            TypeError: An argument has the wrong type.
            NotImplementedError: This store cannot erase (this default).
        """
        check_erase(owner, session, older_than)
        raise NotImplementedError(
            f"{type(self).__name__} cannot erase sessions; MemoryContextStore, "
            "SQLiteContextStore and PostgresContextStore can"
        )

    @classmethod
    async def from_history(cls, messages: Iterable[Message], /, **kwargs: Any) -> Self:
        """A new store of this class holding `messages`.

        `kwargs` go to the constructor: `SQLiteContextStore.from_history(messages,
        conn=conn)`, optionally with `session_id=...`.

        Raises:
            TypeError: Something in `messages` is not a `Message`.
            ValueError: The session named by `session_id` already holds messages.
        """
        batch = check_messages(messages)
        store = cls(**kwargs)
        if await store.count():
            raise session_not_empty(store.session_id)
        await store.append_many(batch)
        return store

    @classmethod
    async def from_context(cls, store: ContextStore, /, **kwargs: Any) -> Self:
        """A new store of this class holding a copy of `store`: history, archive, run ids,
        token usage, usage records and the agents' checkpoints.

        `kwargs` go to the constructor, as for `from_history`. It is
        `restore(await store.snapshot())` on a new store.

        Raises:
            TypeError: `store` is not a `ContextStore`.
            ValueError: The session named by `session_id` already holds messages.
        """
        if not isinstance(store, ContextStore):
            raise TypeError(f"from_context needs a ContextStore, not {type(store).__name__}")
        snapshot = await store.snapshot()
        clone = cls(**kwargs)
        await clone.restore(snapshot)
        return clone


# The class the default `fork()` copies into: `MemoryContextStore`, which builds on this
# module and registers itself when it is defined (the package imports it, so it is
# there before any store can fork).
_FORK_INTO: list[Callable[..., ContextStore]] = []


def fork_into(cls: type[ContextStore]) -> None:
    """Make `cls` the class `ContextStore.fork()` copies into by default."""
    _FORK_INTO[:] = [cls]
