"""`MemoryContextStore`: a session held in lists, for tests and short-lived agents."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import NamedTuple

from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores._checkpoint_sql import check_agent, check_state
from pygents_ctx.context.stores._common import (
    changed_prefix,
    check_count,
    check_erase,
    check_expected,
    check_messages,
    check_owner,
    check_run_id,
    check_session_id,
    check_window,
    encode_message,
    now_iso,
    preview_of,
    require_run_id,
    session_not_empty,
    window,
)
from pygents_ctx.context.stores._lineage import HIGHEST, LOWEST, check_at
from pygents_ctx.context.stores._records import check_snapshot
from pygents_ctx.context.stores.base import (
    CheckpointInfo,
    ContextStore,
    SessionInfo,
    SessionSnapshot,
    StoredCheckpoint,
    StoredMessage,
    fork_into,
)
from pygents_ctx.context.stores.lease import InProcessLeases
from pygents_ctx.context.stores.search import (
    HistoryHit,
    candidate,
    check_message_ids,
    check_messages_after,
    check_search,
    indexed_text,
    rank,
    words,
)
from pygents_ctx.context.tokens import count_message_tokens

__all__ = ["MemoryContextStore"]


class _Archived(NamedTuple):
    message: Message
    run_id: str | None
    tokens: int
    id: int


class _Checkpoint(NamedTuple):
    state: bytes
    created_at: str


class MemoryContextStore(ContextStore):
    """A session kept in memory: nothing survives the process.

    Every method returns new lists, and messages are immutable, so nothing a
    caller does to a result changes the store. Each method runs without an
    `await` inside, so concurrent tasks see each operation whole. Its lease
    (see `lease()`) is kept on the object; a write made under it is refused
    with `LeaseLostError` once another holder took it over or it ran out.

    Args:
        messages: The initial history (copied), oldest first.
        session_id: The session's id; a random one when None.
        owner: The user or tenant id the session belongs to, or None.

    Raises:
        TypeError: `messages` holds something that is not a `Message`, or
            `owner` is not a str.
        ValueError: `owner` is empty or holds a NUL or a lone surrogate.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> async def main():
        ...     store = MemoryContextStore([Message("user", "Hello")])
        ...     await store.append(Message("assistant", "Hi!"))
        ...     branch = await store.fork()
        ...     await branch.append(Message("user", "(branch)"))
        ...     return await store.count(), await branch.count()
        >>> asyncio.run(main())
        (2, 3)
    """

    def __init__(
        self,
        messages: Iterable[Message] | None = None,
        *,
        session_id: str | None = None,
        owner: str | None = None,
    ) -> None:
        batch = check_messages(() if messages is None else messages)
        self._session_id = None if session_id is None else check_session_id(session_id)
        self._owner = check_owner(owner)
        self._created_at = now_iso()
        # Parallel lists: reading the history is one list copy.
        self._messages: list[Message] = []
        self._runs: list[str | None] = []
        self._counts: list[int] = []
        # Each message's id: numbered in the order the store took them, kept when
        # archived, copied by `fork` (so a fork's summaries name the same ids).
        self._ids: list[int] = []
        self._new_ids = itertools.count(1)
        # The sessions this one was forked from, with the newest id it took of each.
        self._shared: list[tuple[str, int]] = []
        # The words of each message, by id, counted on its first search.
        self._words: dict[int, Counter[str]] = {}
        self._total = 0
        self._archive: list[_Archived] = []
        self._preview = ""
        # Each live message's position, as the database stores number them (appends
        # count up, compaction puts its messages just before the first one kept),
        # and the agents' checkpoints by name, then by position (see `_checkpoint_sql`).
        self._positions: list[int] = []
        self._next_position = 0
        self._checkpoints: dict[str, dict[int, _Checkpoint]] = {}
        self._extend(batch, None)

    def __repr__(self) -> str:
        return f"MemoryContextStore(session_id={self.session_id!r}, messages={len(self._messages)})"

    def _extend(self, batch: list[Message], run_id: str | None) -> None:
        _storable(batch)
        counts = [count_message_tokens(message) for message in batch]
        self._messages.extend(batch)
        self._runs.extend([run_id] * len(batch))
        self._ids.extend(itertools.islice(self._new_ids, len(batch)))
        self._positions.extend(range(self._next_position, self._next_position + len(batch)))
        self._next_position += len(batch)
        self._counts.extend(counts)
        self._total += sum(counts)
        self._note_preview(batch)

    def _note_preview(self, batch: Iterable[Message]) -> None:
        if not self._preview:
            self._preview = next((p for p in map(preview_of, batch) if p is not None), "")

    # -- messages -----------------------------------------------------------

    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        """Add `message` at the end of the history, tagged with `run_id` when given.

        Raises:
            TypeError: `message` is not a `Message`, `run_id` is not a str, or a
                tool input holds a value JSON cannot hold.
            ValueError: The message breaks a store limit (see `encode_message`:
                over `MAX_MESSAGE_BYTES`, a lone surrogate), or `run_id` holds
                a NUL or a lone surrogate. The same as the database stores.
        """
        if not isinstance(message, Message):
            raise TypeError(f"append needs a Message, not {type(message).__name__}")
        run_id = check_run_id(run_id)
        self._check_fence()
        self._extend([message], run_id)

    async def append_many(self, messages: Iterable[Message], *, run_id: str | None = None) -> None:
        """Add `messages` at the end, in order, all at once.

        Raises:
            TypeError: Something in `messages` is not a `Message`, or holds a
                value JSON cannot hold (nothing is added).
            ValueError: A message breaks a store limit, as for `append`
                (nothing is added).
        """
        batch = check_messages(messages)
        run_id = check_run_id(run_id)
        self._check_fence()
        self._extend(batch, run_id)

    async def get_history(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        include_archived: bool = False,
    ) -> list[Message]:
        """The history, oldest first, as a new list (see `ContextStore.get_history`)."""
        check_window(limit, offset)
        if include_archived:
            everything = [entry.message for entry in self._archive] + self._messages
            return window(everything, limit, offset)
        return window(self._messages, limit, offset)

    async def count(self) -> int:
        """The number of messages in the live history."""
        return len(self._messages)

    async def search(self, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """The best matches for `query` in the archive and the live history (see
        `ContextStore.search`): a scan ranked by BM25 over the session, with ids.

        Each message's words are counted on its first search and kept.
        """
        query, limit = check_search(query, limit)
        parts = (
            [(entry.message, entry.run_id, entry.id) for entry in self._archive],
            list(zip(self._messages, self._runs, self._ids, strict=True)),
        )
        candidates = [
            candidate(
                message,
                archived=part is parts[0],
                position=index,
                id=message_id,
                run_id=run_id,
                counts=self._counted(message_id, message),
            )
            for part in parts
            for index, (message, run_id, message_id) in enumerate(part)
        ]
        return rank(candidates, query, limit)

    async def messages_after(self, after: int, *, limit: int = 1000) -> list[HistoryHit]:
        """The session's messages whose id is above `after`, by id (see
        `ContextStore.messages_after`): a scan of the session."""
        after, limit = check_messages_after(after, limit)
        return heapq.nsmallest(
            limit, self._located(lambda message_id: message_id > after), key=_by_id
        )

    async def messages_with_ids(self, ids: Iterable[int]) -> list[HistoryHit]:
        """Where the messages with these ids are now, by id (see
        `ContextStore.messages_with_ids`)."""
        wanted = set(check_message_ids(ids))
        return sorted(self._located(wanted.__contains__), key=_by_id)

    def _located(self, keep: Callable[[int], bool]) -> Iterator[HistoryHit]:
        """The session's messages whose id `keep` keeps, where `search` says they are."""
        for index, entry in enumerate(self._archive):
            if keep(entry.id):
                yield HistoryHit(
                    message=entry.message,
                    archived=True,
                    position=index,
                    id=entry.id,
                    score=0.0,
                    run_id=entry.run_id,
                )
        for index, (message, run_id, message_id) in enumerate(
            zip(self._messages, self._runs, self._ids, strict=True)
        ):
            if keep(message_id):
                yield HistoryHit(
                    message=message,
                    archived=False,
                    position=index,
                    id=message_id,
                    score=0.0,
                    run_id=run_id,
                )

    def _counted(self, message_id: int, message: Message) -> Counter[str]:
        found = self._words.get(message_id)
        if found is None:
            found = self._words[message_id] = Counter(words(indexed_text(message)))
        return found

    async def _live_ids(self, count: int) -> list[int] | None:
        return self._ids[:count]

    async def shared_from(self) -> list[tuple[str, int]]:
        """The sessions this one was forked from, oldest first, each with the newest id
        it took of them (see `ContextStore.shared_from`)."""
        return list(self._shared)

    async def token_count(self) -> int:
        """The total token count of the live history (a running sum)."""
        return self._total

    async def clear(self) -> None:
        """Remove every message, live and archived; token usage stays."""
        self._check_fence()
        self._empty()

    def _empty(self) -> None:
        """No message, live or archived: positions start again at 0, no checkpoint is left."""
        self._messages, self._runs, self._counts, self._ids = [], [], [], []
        self._total = 0
        self._archive = []
        self._preview = ""
        self._words = {}
        self._positions, self._next_position, self._checkpoints = [], 0, {}

    def _drop_checkpoints(self, low: int, high: int) -> None:
        """Drop every agent's checkpoints with `low <= position < high`."""
        for kept in self._checkpoints.values():
            for position in [p for p in kept if low <= p < high]:
                del kept[position]

    async def clear_run(self, run_id: str) -> None:
        """Remove the messages appended with `run_id`, live and archived.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = require_run_id(run_id)
        self._check_fence()
        if target not in self._runs and all(entry.run_id != target for entry in self._archive):
            return  # nothing of that run: the preview stays, as in SQLite
        gone = [p for p, run in zip(self._positions, self._runs, strict=True) if run == target]
        if gone:  # checkpoints after it saw a message that is gone
            self._drop_checkpoints(gone[0] + 1, HIGHEST)
        kept = [
            entry
            for entry in zip(
                self._messages, self._runs, self._counts, self._ids, self._positions, strict=True
            )
            if entry[1] != target
        ]
        self._messages = [entry[0] for entry in kept]
        self._runs = [entry[1] for entry in kept]
        self._counts = [entry[2] for entry in kept]
        self._ids = [entry[3] for entry in kept]
        self._positions = [entry[4] for entry in kept]
        self._total = sum(self._counts)
        self._archive = [entry for entry in self._archive if entry.run_id != target]
        held = {*self._ids, *(entry.id for entry in self._archive)}
        self._words = {key: value for key, value in self._words.items() if key in held}
        self._preview = ""
        self._note_preview(entry.message for entry in self._archive)
        self._note_preview(self._messages)

    async def replace_prefix(
        self,
        count: int,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expected: Sequence[Message] | None = None,
    ) -> None:
        """Replace the oldest `count` live messages with `messages`; they go to the archive.

        See `ContextStore.replace_prefix`; with `expected`, the check and the
        rewrite happen with no `await` between them.

        Raises:
            TypeError: `count` is not an int, or `messages` or `expected` holds a
                non-`Message`.
            ValueError: `count` is negative or exceeds the live message count,
                or `expected` does not hold `count` messages.
            ConcurrentModificationError: The oldest `count` messages are no
                longer `expected`; nothing was changed.
        """
        count = check_count(count)
        batch = _storable(check_messages(messages))
        run_id = check_run_id(run_id)
        wanted = check_expected(count, expected)
        self._check_fence()
        if wanted is not None and self._messages[:count] != wanted:
            raise changed_prefix(self.session_id, count)
        if count > len(self._messages):
            raise ValueError(
                f"count {count} exceeds the {len(self._messages)} messages in the live history"
            )
        self._archive.extend(
            _Archived(*entry)
            for entry in zip(
                self._messages[:count],
                self._runs[:count],
                self._counts[:count],
                self._ids[:count],
                strict=True,
            )
        )
        counts = [count_message_tokens(message) for message in batch]
        boundary = self._positions[count] if count < len(self._positions) else self._next_position
        # As the database stores do: checkpoints before the boundary saw messages that
        # leave; with nothing archived, the one at it saw none of those put before it.
        self._drop_checkpoints(LOWEST, boundary + (count == 0))
        self._positions = [*range(boundary - len(batch), boundary), *self._positions[count:]]
        self._messages = batch + self._messages[count:]
        self._runs = [run_id] * len(batch) + self._runs[count:]
        self._ids = list(itertools.islice(self._new_ids, len(batch))) + self._ids[count:]
        self._counts = counts + self._counts[count:]
        self._total = sum(self._counts)
        self._note_preview(batch)

    async def fork(
        self, *, session_id: str | None = None, at: int | None = None
    ) -> MemoryContextStore:
        """A new session with this one's history (or its oldest `at` messages) and archive
        (see `ContextStore.fork`); its token usage and usage records start empty.

        The fork's lists are its own; the message objects (immutable) are shared.

        Raises:
            TypeError: `at` is not an int.
            ValueError: `at` is negative or more than `count()`.
        """
        held = len(self._messages)
        keep = held if at is None else check_at(at, held, self.session_id, "fork(at=...)")
        clone = MemoryContextStore(session_id=session_id)
        clone._messages, clone._runs = self._messages[:keep], self._runs[:keep]
        clone._counts = self._counts[:keep]
        clone._ids, clone._words = self._ids[:keep], dict(self._words)
        clone._positions = self._positions[:keep]
        clone._next_position = self._positions[keep] if keep < held else self._next_position
        clone._checkpoints = {
            agent: {p: state for p, state in kept.items() if p <= clone._next_position}
            for agent, kept in self._checkpoints.items()
        }
        newest = max([0, *clone._ids, *(entry.id for entry in self._archive)])
        clone._shared = [*self._shared, (self.session_id, newest)] if newest else list(self._shared)
        clone._new_ids = itertools.count(max([0, *self._ids, *(e.id for e in self._archive)]) + 1)
        clone._total = self._total if keep == held else sum(clone._counts)
        clone._archive = list(self._archive)
        if keep == held:
            clone._preview = self._preview
        else:
            clone._note_preview(entry.message for entry in clone._archive)
            clone._note_preview(clone._messages)
        return clone

    async def rewind(self, to: int) -> int:
        """Keep the oldest `to` live messages, drop the others; return how many went.

        See `ContextStore.rewind`.

        Raises:
            TypeError: `to` is not an int.
            ValueError: `to` is negative or more than `count()`; nothing changed.
        """
        held = len(self._messages)
        keep = check_at(to, held, self.session_id, "rewind(to=...)")
        self._check_fence()
        for gone in self._ids[keep:]:
            self._words.pop(gone, None)
        if keep < held:
            self._next_position = self._positions[keep]
            self._drop_checkpoints(self._next_position + 1, HIGHEST)
        del self._messages[keep:], self._runs[keep:], self._counts[keep:], self._ids[keep:]
        del self._positions[keep:]
        self._total = sum(self._counts)
        self._preview = ""
        self._note_preview(entry.message for entry in self._archive)
        self._note_preview(self._messages)
        return held - keep

    async def save_checkpoint(self, agent: str, state: bytes) -> int:
        """Keep `state` as `agent`'s checkpoint after the live messages there are now;
        their number (see `ContextStore.save_checkpoint`).

        Raises:
            TypeError, ValueError, LeaseLostError: As `ContextStore.save_checkpoint` says.
        """
        name, data = check_agent(agent), check_state(state)
        self._check_fence()
        self._checkpoints.setdefault(name, {})[self._next_position] = _Checkpoint(data, now_iso())
        return len(self._messages)

    async def get_checkpoint(self, agent: str, at: int) -> bytes | None:
        """The state `agent` saved at live message `at`, or None (see
        `ContextStore.get_checkpoint`).

        Raises:
            TypeError, ValueError: As `ContextStore.get_checkpoint` says.
        """
        name = check_agent(agent)
        held = len(self._messages)
        keep = check_at(at, held, self.session_id, "get_checkpoint(at=...)")
        high = self._positions[keep] if keep < held else self._next_position
        low = self._positions[keep - 1] if keep else LOWEST
        found = [p for p in self._checkpoints.get(name, {}) if low < p <= high]
        return self._checkpoints[name][max(found)].state if found else None

    async def list_checkpoints(self, agent: str | None = None) -> list[CheckpointInfo]:
        """The agents' checkpoints (`agent`'s alone, if given), in order of message, then
        agent (see `ContextStore.list_checkpoints`).

        Raises:
            TypeError, ValueError: As `ContextStore.list_checkpoints` says.
        """
        if agent is not None:
            check_agent(agent)
        return [
            CheckpointInfo(row.agent, at, row.created_at, row.size)
            for at, row in self._live_checkpoints(agent)
        ]

    def _live_checkpoints(self, agent: str | None) -> list[tuple[int, checkpoint_sql.Row]]:
        """The checkpoints `get_checkpoint` finds, each with its live message (see
        `_checkpoint_sql.live`; no digest here)."""
        rows = sorted(
            (
                checkpoint_sql.Row(name, position, saved.created_at, b"", len(saved.state))
                for name, kept in self._checkpoints.items()
                if agent in (None, name)
                for position, saved in kept.items()
            ),
            key=lambda row: (row.position, row.agent),
        )
        return checkpoint_sql.live(rows, self._positions)

    async def snapshot(self) -> SessionSnapshot:
        """The history and the archive with their run ids, the token usage and usage records."""
        return SessionSnapshot(
            self.session_id,
            map(StoredMessage, self._messages, self._runs),
            (StoredMessage(entry.message, entry.run_id) for entry in self._archive),
            self._input_tokens,
            self._output_tokens,
            usage=self._usage_records or (),
            checkpoints=[
                StoredCheckpoint(
                    row.agent, at, row.created_at, self._checkpoints[row.agent][row.position].state
                )
                for at, row in self._live_checkpoints(None)
            ],
        )

    async def restore(self, snapshot: SessionSnapshot) -> None:
        """Write `snapshot` into this empty session, all at once (see `ContextStore.restore`).

        Raises:
            TypeError: `snapshot` is not a `SessionSnapshot`.
            ValueError: The session already holds messages (live or archived).
        """
        snapshot = check_snapshot(snapshot)
        self._check_fence()
        if self._messages or self._archive:
            raise session_not_empty(self.session_id)
        _storable(stored.message for stored in (*snapshot.archived, *snapshot.messages))
        self._archive = [
            _Archived(
                stored.message,
                stored.run_id,
                count_message_tokens(stored.message),
                next(self._new_ids),
            )
            for stored in snapshot.archived
        ]
        self._note_preview(entry.message for entry in self._archive)
        start = self._next_position
        for stored in snapshot.messages:
            self._extend([stored.message], stored.run_id)
        for checkpoint in snapshot.checkpoints:
            saved = _Checkpoint(checkpoint.state, checkpoint.created_at)
            self._checkpoints.setdefault(checkpoint.agent, {})[start + checkpoint.at] = saved
        if snapshot.usage:
            self._usage_records = [*(self._usage_records or ()), *snapshot.usage]
        self._input_tokens, self._output_tokens = snapshot.input_tokens, snapshot.output_tokens

    # -- sessions -----------------------------------------------------------

    async def list_sessions(self, *, owner: str | None = None) -> list[SessionInfo]:
        """This session only (a memory store knows no other); none if `owner` is another's."""
        if check_owner(owner) not in (None, self._owner):
            return []
        return [
            SessionInfo(
                self.session_id,
                len(self._messages),
                self._preview,
                self._created_at,
                self._input_tokens,
                self._output_tokens,
                self._owner,
            )
        ]

    async def erase(
        self,
        *,
        owner: str | None = None,
        session: str | None = None,
        older_than: timedelta | None = None,
    ) -> int:
        """Empty this session if it is the one named (a memory store knows no other):
        messages, archive, usage, tokens, decisions, journal and lease. Returns 1 if it did,
        else 0.

        Raises:
            ValueError: Neither `owner` nor `session` is given; nothing is erased.
        """
        target = check_erase(owner, session, older_than)
        if (
            target.owner not in (None, self._owner)
            or target.session not in (None, self.session_id)
            or (target.before is not None and self._created_at >= target.before)
        ):
            return 0
        self._empty()
        self._usage_records = None
        self._decisions = None
        self._journal = None
        self._input_tokens = self._output_tokens = 0
        if self._leases is not None:  # a holder's next write is refused: its lease is gone
            self._leases = InProcessLeases()
        return 1


def _by_id(hit: HistoryHit) -> int:
    return hit.id or 0


def _storable(messages: Iterable[Message]) -> list[Message]:
    """The messages, after checking that the database stores would take each one.

    The same rules as SQLite and PostgreSQL (`encode_message`), so that code
    tested against memory does not fail against a database.
    """
    batch = list(messages)
    for message in batch:
        encode_message(message)
    return batch


# What the default `ContextStore.fork()` copies into.
fork_into(MemoryContextStore)
