"""The SQL context store, written once over a `Dialect`: SQLite's and PostgreSQL's.

`SQLStore` holds what the two database stores do alike: the argument checks,
the history cache, the owner's claim on the session, the lease's fence around
every write, the bookkeeping of forks and erasures. What differs between the
databases is the `Dialect`: how a call reaches the database (SQLite's worker
thread, psycopg's connection), how a write checks the lease in its own
transaction, the SQL of each operation, and what text a column can hold.
`SQLiteContextStore` and `PostgresContextStore` are this class with their dialect.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

from pygents_ctx.context.messages import Message, ToolResultBlock
from pygents_ctx.context.stores import _journal_sql as journal_sql
from pygents_ctx.context.stores._checkpoint_sql import check_agent, check_state
from pygents_ctx.context.stores._common import (
    Erasure,
    HistoryCache,
    Read,
    check_count,
    check_erase,
    check_expected,
    check_messages,
    check_owner,
    check_run_id,
    check_session_id,
    check_tokens,
    check_usage_record,
    checked_messages,
    new_session_id,
    require_run_id,
)
from pygents_ctx.context.stores._lineage import LOWEST
from pygents_ctx.context.stores._paged import check_batch, iter_pages
from pygents_ctx.context.stores._records import (
    check_call_id,
    check_call_ids,
    check_decision,
    check_snapshot,
)
from pygents_ctx.context.stores.base import (
    ApprovalDecision,
    CheckpointInfo,
    ContextStore,
    SessionInfo,
    SessionSnapshot,
    StoredCheckpoint,
)
from pygents_ctx.context.stores.lease import fenced
from pygents_ctx.context.stores.search import (
    HistoryHit,
    check_message_ids,
    check_messages_after,
    check_search,
)

if TYPE_CHECKING:
    from pygents_ctx.context.stores._lease_sql import LeaseState
    from pygents_ctx.context.usage import UsageRecord

__all__ = ["Dialect", "SQLStore"]

T = TypeVar("T")


class Connection(Protocol):
    """What a store's connection does: run a function of the database handle, in turn."""

    def run(self, fn: Callable[[Any], Any], /) -> Awaitable[Any]:
        """Await `fn(handle)` after the calls made before it."""
        ...

    @property
    def _database(self) -> Hashable:
        """What the database is (its file, or its server, name and schema)."""
        ...


C = TypeVar("C", bound=Connection)


class Ops(Protocol):
    """The functions both databases' SQL modules (`_sqlite_ops`, `_postgres_ops`) define
    alike, each taking the database handle last; a dialect's `ops` is its module."""

    def read_since(
        self, session_id: str, generation: Any, after: int | None, with_archive: bool, db: Any, /
    ) -> Any: ...

    def read_newest(self, session_id: str, limit: int, offset: int, db: Any, /) -> Any: ...

    def clear(self, session_id: str, db: Any, /) -> Any: ...

    def clear_run(self, session_id: str, run_id: str, db: Any, /) -> Any: ...

    def rewind(self, session_id: str, to: int, db: Any, /) -> Any: ...

    def snapshot(self, session_id: str, db: Any, /) -> Any: ...

    def save_checkpoint(self, session_id: str, agent: str, state: bytes, db: Any, /) -> Any: ...

    def get_checkpoint(self, session_id: str, agent: str, at: int, db: Any, /) -> Any: ...

    def list_checkpoints(self, session_id: str, agent: str | None, db: Any, /) -> Any: ...

    def list_sessions(self, owner: str | None, db: Any, /) -> Any: ...

    def page(
        self, session_id: str, table: str, key: str, after: int | None, limit: int, db: Any, /
    ) -> Any: ...

    def live_ids(self, session_id: str, count: int, db: Any, /) -> Any: ...

    def shared_from(self, session_id: str, db: Any, /) -> Any: ...

    def get_tokens(self, session_id: str, db: Any, /) -> Any: ...

    def record_usage(self, session_id: str, record: UsageRecord, db: Any, /) -> Any: ...

    def get_usage(self, session_id: str, run_id: str | None, db: Any, /) -> Any: ...

    def record_decision(
        self, session_id: str, call_id: str, decision: ApprovalDecision, db: Any, /
    ) -> Any: ...

    def get_decisions(self, session_id: str, db: Any, /) -> Any: ...

    def journal_start(self, session_id: str, call_id: str, db: Any, /) -> Any: ...

    def journal_finish(self, session_id: str, call_id: str, result: bytes, db: Any, /) -> Any: ...

    def get_journal(self, session_id: str, call_ids: tuple[str, ...], db: Any, /) -> Any: ...

    def acquire_lease(
        self, session_id: str, owner: str, ttl: float, create: bool, db: Any, /
    ) -> Any: ...

    def renew_lease(
        self, session_id: str, owner: str, token: int, ttl: float, db: Any, /
    ) -> Any: ...

    def release_lease(self, session_id: str, owner: str, token: int, db: Any, /) -> Any: ...

    def claim(self, session_id: str, owner: str, db: Any, /) -> Any: ...


class Dialect(ABC, Generic[C]):
    """What a database does its own way, for one connection; `SQLStore` does the rest.

    Each method is one call on the connection: a read, or a write made in one
    transaction. A write takes `fence`, the token of the lease the caller holds
    on the session, or None: the dialect checks it in the write's own
    transaction and raises `Refused` (storing nothing) when the lease passed
    on. A write that may create the session's row takes `known`, whether the
    store knows the row is there (SQLite then skips making sure of it;
    PostgreSQL upserts the row in the same statement either way).
    Messages are encoded by `encode` before a write starts (so bad input
    changes nothing), and text a column cannot hold is refused by `text`.

    Args:
        conn: The open connection the calls run on.
    """

    ops: ClassVar[Ops]  # the database's SQL functions
    name: ClassVar[str]  # the database's kind, in the lease's scope
    stale: ClassVar[Hashable]  # the cache's generation that means "read it all again"
    connection: ClassVar[type]  # the type of connection a store takes
    opened_by: ClassVar[str]  # how to open one, for the error a wrong one gets

    def __init__(self, conn: C) -> None:
        self.conn = conn

    @property
    @abstractmethod
    def place(self) -> str:
        """Where the database is, for a store's `repr`."""

    @property
    def database(self) -> Hashable:
        """What the database is, for leases: stores of one session in it share theirs."""
        return self.conn._database

    def run(self, fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        """Await `fn(*args, handle)` on the connection: one call."""
        return self.conn.run(partial(fn, *args))

    @abstractmethod
    def write(
        self, session_id: str, fence: int | None, work: Callable[[Any], Any]
    ) -> Awaitable[Any]:
        """Await `work(handle)` as one transaction that checks lease token `fence` (if
        not None) and raises `Refused`, rolled back, if the lease passed on."""

    @abstractmethod
    def encode(self, messages: list[Message]) -> Any:
        """`messages` ready to store, as `replace_prefix` and `restore` take them.

        Raises:
            TypeError: A message holds a value JSON cannot hold.
        """

    # -- messages ---------------------------------------------------------------

    @abstractmethod
    def append(
        self,
        session_id: str,
        known: bool,
        run_id: str | None,
        messages: Iterable[Message],
        fence: int | None,
    ) -> Awaitable[bool]:
        """Append `messages` (encoded as they are read) in one transaction; whether any were."""

    def read_since(
        self, session_id: str, generation: Any, position: int | None, with_archive: bool
    ) -> Awaitable[Read]:
        """The live rows after `position` (all if the session left `generation`), and
        the archive if `with_archive`."""
        return self.run(self.ops.read_since, session_id, generation, position, with_archive)

    def read_newest(self, session_id: str, limit: int, offset: int) -> Awaitable[list[Message]]:
        """The newest `limit` live messages before the newest `offset`, oldest first."""
        return self.run(self.ops.read_newest, session_id, limit, offset)

    def page(
        self, session_id: str, table: str, key: str, after: int | None, limit: int
    ) -> Awaitable[list[Any]]:
        """One page of `iter_history`: `limit` rows of `table` after `key` `after`."""
        return self.run(self.ops.page, session_id, table, key, after, limit)

    @abstractmethod
    def search(self, session_id: str, query: str, limit: int) -> Awaitable[list[HistoryHit]]:
        """The best `limit` matches for `query` in the session's full-text index."""

    @abstractmethod
    def messages(
        self, session_id: str, after: int, ids: list[int] | None, limit: int
    ) -> Awaitable[list[HistoryHit]]:
        """The session's messages with an id above `after` (and in `ids`), by id."""

    def live_ids(self, session_id: str, count: int) -> Awaitable[list[int] | None]:
        """The ids `search` gives the oldest `count` live messages (None: not known)."""
        return self.run(self.ops.live_ids, session_id, count)

    def shared_from(self, session_id: str) -> Awaitable[list[tuple[str, int]]]:
        """The sessions whose rows the session reads, with the newest id it reads of each."""
        return self.run(self.ops.shared_from, session_id)

    @abstractmethod
    def count(self, session_id: str) -> Awaitable[int]:
        """The stored count of live messages."""

    @abstractmethod
    def token_count(self, session_id: str) -> Awaitable[int]:
        """The stored sum of the live messages' token counts."""

    def clear(self, session_id: str, fence: int | None) -> Awaitable[None]:
        """Remove every message, live and archived."""
        return self.write(session_id, fence, partial(self.ops.clear, session_id))

    def clear_run(self, session_id: str, run_id: str, fence: int | None) -> Awaitable[None]:
        """Remove the messages appended with `run_id`, live and archived."""
        return self.write(session_id, fence, partial(self.ops.clear_run, session_id, run_id))

    @abstractmethod
    def replace_prefix(
        self,
        session_id: str,
        known: bool,
        count: int,
        run_id: str | None,
        encoded: Any,
        expected: list[Message] | None,
        seen_at: Any,
        fence: int | None,
    ) -> Awaitable[None]:
        """Archive the oldest `count` live messages and put the `encoded` ones in their place.

        `seen_at` is the generation at which the store's cache held `expected`
        as the oldest messages (None if it did not): a dialect may then skip
        reading them back while the session is still at that generation.
        """

    @abstractmethod
    def fork(
        self, session_id: str, new_id: str, at: int | None, owner: str | None
    ) -> Awaitable[None]:
        """Make session `new_id` share the oldest `at` live messages, the archive and
        the usage records of `session_id`, owned by `owner` (the source's when None)."""

    def rewind(self, session_id: str, to: int, fence: int | None) -> Awaitable[int]:
        """Keep the oldest `to` live messages; returns how many were removed."""
        return self.write(session_id, fence, partial(self.ops.rewind, session_id, to))

    def snapshot(self, session_id: str) -> Awaitable[SessionSnapshot]:
        """The session at one consistent moment."""
        return self.run(self.ops.snapshot, session_id)

    def save_checkpoint(
        self, session_id: str, agent: str, state: bytes, fence: int | None
    ) -> Awaitable[int]:
        """Keep `state` as `agent`'s checkpoint at the end of the live history; the count."""
        return self.write(
            session_id, fence, partial(self.ops.save_checkpoint, session_id, agent, state)
        )

    def get_checkpoint(self, session_id: str, agent: str, at: int) -> Awaitable[bytes | None]:
        """The state of `agent`'s checkpoint at live message `at`, if there is one."""
        return self.run(self.ops.get_checkpoint, session_id, agent, at)

    def list_checkpoints(
        self, session_id: str, agent: str | None
    ) -> Awaitable[list[CheckpointInfo]]:
        """The session's checkpoints (`agent`'s alone, if given), read at one moment."""
        return self.run(self.ops.list_checkpoints, session_id, agent)

    @abstractmethod
    def restore(
        self,
        session_id: str,
        live: tuple[list[str | None], Any],
        archived: tuple[list[str | None], Any],
        tokens: tuple[int, int],
        usage: tuple[UsageRecord, ...],
        checkpoints: tuple[StoredCheckpoint, ...],
        fence: int | None,
    ) -> Awaitable[None]:
        """Write a snapshot's parts into the empty session (ValueError if it is not).

        `live` and `archived` are each the messages' run ids and the messages `encode`d.
        """

    # -- token usage, decisions, the journal ---------------------------------------

    @abstractmethod
    def set_tokens(
        self, session_id: str, tokens: tuple[int, int], add: bool, fence: int | None
    ) -> Awaitable[None]:
        """Overwrite the session's token usage with `tokens`, or add them when `add`."""

    def get_tokens(self, session_id: str) -> Awaitable[tuple[int, int]]:
        """The session's token usage: `(input_tokens, output_tokens)`."""
        return self.run(self.ops.get_tokens, session_id)

    def record_usage(
        self, session_id: str, record: UsageRecord, fence: int | None
    ) -> Awaitable[None]:
        """Keep `record` and add its tokens to the session's usage."""
        return self.write(session_id, fence, partial(self.ops.record_usage, session_id, record))

    def get_usage(self, session_id: str, run_id: str | None) -> Awaitable[list[UsageRecord]]:
        """The usage records, oldest first; only `run_id`'s when given."""
        return self.run(self.ops.get_usage, session_id, run_id)

    def record_decision(
        self, session_id: str, call_id: str, decision: ApprovalDecision, fence: int | None
    ) -> Awaitable[ApprovalDecision]:
        """Keep `decision` on `call_id` unless it has one; the one kept."""
        work = partial(self.ops.record_decision, session_id, call_id, decision)
        return self.write(session_id, fence, work)

    def get_decisions(self, session_id: str) -> Awaitable[dict[str, ApprovalDecision]]:
        """Every decision on the session's tool calls, by call id."""
        return self.run(self.ops.get_decisions, session_id)

    def journal_start(self, session_id: str, call_id: str, fence: int | None) -> Awaitable[None]:
        """Record that tool call `call_id` starts."""
        return self.write(session_id, fence, partial(self.ops.journal_start, session_id, call_id))

    def journal_finish(
        self, session_id: str, call_id: str, result: bytes, fence: int | None
    ) -> Awaitable[None]:
        """Record that tool call `call_id` finished with the encoded `result`."""
        work = partial(self.ops.journal_finish, session_id, call_id, result)
        return self.write(session_id, fence, work)

    def get_journal(
        self, session_id: str, call_ids: tuple[str, ...]
    ) -> Awaitable[dict[str, ToolResultBlock | None]]:
        """The journal of `call_ids`."""
        return self.run(self.ops.get_journal, session_id, call_ids)

    # -- the lease and the sessions ----------------------------------------------

    async def acquire_lease(
        self, session_id: str, owner: str, ttl: float, create: bool
    ) -> tuple[bool, LeaseState]:
        """Take the lease if it is free (see `ContextStore._acquire_lease`).

        The database may answer None when the holder let go while it was asked
        (PostgreSQL, between its two statements): then it is asked again.
        """
        while True:
            answer: tuple[bool, LeaseState] | None = await self.run(
                self.ops.acquire_lease, session_id, owner, ttl, create
            )
            if answer is not None:
                return answer

    def renew_lease(
        self, session_id: str, owner: str, token: int, ttl: float
    ) -> Awaitable[LeaseState | None]:
        """Extend the lease `owner` and `token` hold; None if they lost it."""
        return self.run(self.ops.renew_lease, session_id, owner, token, ttl)

    def release_lease(self, session_id: str, owner: str, token: int) -> Awaitable[None]:
        """End the lease now if `owner` and `token` still hold it."""
        return self.run(self.ops.release_lease, session_id, owner, token)

    def claim(self, session_id: str, owner: str) -> Awaitable[str]:
        """Make the session `owner`'s unless another owner holds it; its owner."""
        return self.run(self.ops.claim, session_id, owner)

    def list_sessions(self, owner: str | None) -> Awaitable[list[SessionInfo]]:
        """Every session (only `owner`'s when given), newest first."""
        return self.run(self.ops.list_sessions, owner)

    @abstractmethod
    def erase(self, target: Erasure) -> Awaitable[int]:
        """Delete the sessions `target` names, in one transaction; how many."""


class SQLStore(ContextStore, Generic[C]):
    """One session in a SQL database: the code of the database stores, over a `Dialect`.

    A subclass names its dialect in `_dialect`.

    Args:
        conn: An open connection of the dialect's `connection` type.
        session_id: The session's id; a random one when None.
        owner: The user or tenant id the session belongs to, or None.
    """

    _dialect: ClassVar[type[Dialect[Any]]]

    def __init__(self, conn: C, *, session_id: str | None = None, owner: str | None = None) -> None:
        kind = self._dialect
        if not isinstance(conn, kind.connection):
            raise TypeError(
                f"{type(self).__name__} needs the connection from `{kind.opened_by}`, "
                f"not {type(conn).__name__}"
            )
        dialect: Dialect[C] = kind(conn)
        self._sql = dialect
        self._session_id = None if session_id is None else check_session_id(session_id)
        self._owner = check_owner(owner)
        self._claimed = owner is None  # whether the session's row is known to be the owner's
        self._ready = False  # whether this store knows the session's row exists
        self._cache = HistoryCache(dialect.stale)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._sql.place!r}, session_id={self.session_id!r})"

    @property
    def connection(self) -> C:
        """The connection this store runs on."""
        return self._sql.conn

    async def _claim(self) -> None:
        """Before the first write of a store with an owner: make the session that owner's."""
        if self._claimed or self._owner is None:
            return
        held = await self._sql.claim(self.session_id, self._owner)
        if held != self._owner:
            raise ValueError(
                f"session {self.session_id!r} belongs to owner {held!r}, not {self._owner!r}: "
                f"open it with owner={held!r}, or use another session_id"
            )
        self._claimed = self._ready = True

    async def _write(
        self, write: Callable[[int | None], Awaitable[T]], *, ensures: bool = True
    ) -> T:
        """`write(fence token)`: one write to the session, fenced by a lease held here.

        `ensures`: the write makes sure the session's row exists.
        """
        await self._claim()
        fence = self._fence()
        if fence is None:
            result = await write(None)
        else:
            result = await fenced(fence, write(fence.token))
        if ensures:
            self._ready = True
        return result

    # -- messages -----------------------------------------------------------

    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        """Add `message` at the end of the history: one statement, its own transaction.

        Under a lease (see `lease()`), one transaction that checks the lease
        and inserts.

        Raises:
            TypeError: `message` is not a `Message`, `run_id` is not a str, or
                a tool input holds a value JSON cannot hold.
            LeaseLostError: Made under a lease that passed to another holder
                or ran out; nothing was added.
        """
        if not isinstance(message, Message):
            raise TypeError(f"append needs a Message, not {type(message).__name__}")
        await self._append([message], check_run_id(run_id))

    async def append_many(self, messages: Iterable[Message], *, run_id: str | None = None) -> None:
        """Add `messages` at the end, in order, in one transaction.

        The messages are encoded and sent as they are read (an iterator too),
        so memory holds a bounded batch however many there are.

        Raises:
            TypeError: Something in `messages` is not a `Message`, or holds a
                value JSON cannot hold (nothing is added).
        """
        run = check_run_id(run_id)
        await self._append(checked_messages(messages), run)

    async def _append(self, messages: Iterable[Message], run_id: str | None) -> None:
        append = partial(self._sql.append, self.session_id, self._ready, run_id, messages)
        if await self._write(append, ensures=False):
            self._ready = True

    async def get_history(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        include_archived: bool = False,
    ) -> list[Message]:
        """The history, oldest first, as a new list (see `ContextStore.get_history`).

        Reads only what changed since this store's last read; `limit` on a
        store that has not read yet fetches just those rows.
        """
        return await self._cache.history(
            limit, offset, include_archived, self._read_since, self._read_newest
        )

    def _read_since(
        self, generation: Any, position: int | None, with_archive: bool
    ) -> Awaitable[Read]:
        return self._sql.read_since(self.session_id, generation, position, with_archive)

    def _read_newest(self, limit: int, offset: int) -> Awaitable[list[Message]]:
        return self._sql.read_newest(self.session_id, limit, offset)

    async def iter_history(
        self, *, batch: int = 1000, include_archived: bool = False
    ) -> AsyncIterator[Message]:
        """The history, oldest first, `batch` rows at a time by stored position.

        See `ContextStore.iter_history`; each page is one indexed read of the
        next `batch` rows, and bypasses the history cache.
        """
        check_batch(batch)
        page = partial(self._sql.page, self.session_id)
        async for message in iter_pages(self.session_id, page, batch, include_archived):
            yield message

    async def search(self, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """The best matches for `query` in the archive and the live history, from
        the database's full-text index (see `ContextStore.search` and the stores guide).
        """
        query, limit = check_search(query, limit)
        return await self._sql.search(self.session_id, query, limit)

    async def messages_after(self, after: int, *, limit: int = 1000) -> list[HistoryHit]:
        """The session's messages whose id is above `after`, by id (see
        `ContextStore.messages_after`): one indexed read."""
        after, limit = check_messages_after(after, limit)
        return await self._sql.messages(self.session_id, after, None, limit)

    async def messages_with_ids(self, ids: Iterable[int]) -> list[HistoryHit]:
        """Where the messages with these ids are now, by id (see
        `ContextStore.messages_with_ids`)."""
        wanted = check_message_ids(ids)
        if not wanted:
            return []
        return await self._sql.messages(self.session_id, LOWEST, wanted, len(wanted))

    async def _live_ids(self, count: int) -> list[int] | None:
        return await self._sql.live_ids(self.session_id, count)

    async def shared_from(self) -> list[tuple[str, int]]:
        """The sessions whose stored rows this fork reads (see `ContextStore.shared_from`):
        while it shares them; copying them (copy on write, see `fork`) ends it."""
        return await self._sql.shared_from(self.session_id)

    async def count(self) -> int:
        """The number of messages in the live history (a stored counter)."""
        return await self._sql.count(self.session_id)

    async def token_count(self) -> int:
        """The total token count of the live history (a stored running sum)."""
        return await self._sql.token_count(self.session_id)

    async def clear(self) -> None:
        """Remove every message, live and archived, in one transaction; token usage stays."""
        self._cache.forget()
        await self._write(partial(self._sql.clear, self.session_id), ensures=False)

    async def clear_run(self, run_id: str) -> None:
        """Remove the messages appended with `run_id`, live and archived, in one transaction.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = require_run_id(run_id)
        self._cache.forget()
        await self._write(partial(self._sql.clear_run, self.session_id, target), ensures=False)

    async def replace_prefix(
        self,
        count: int,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expected: Sequence[Message] | None = None,
    ) -> None:
        """Replace the oldest `count` live messages with `messages`, in one transaction.

        The replaced messages move to the archive: their small rows move, their
        stored bytes stay where they were written. With `expected`, the oldest
        `count` messages are compared with it inside the same transaction,
        the session locked, so no other writer can change them between the
        check and the rewrite. See `ContextStore.replace_prefix`.

        Raises:
            TypeError: `count` is not an int, or `messages` or `expected` holds a
                non-`Message`.
            ValueError: `count` is negative or exceeds the live message count,
                or `expected` does not hold `count` messages (the store is left
                as it was).
            ConcurrentModificationError: The oldest `count` messages are no
                longer `expected`; nothing was changed.
        """
        count = check_count(count)
        batch = check_messages(messages)
        run = check_run_id(run_id)
        wanted = check_expected(count, expected)
        if count == 0 and not batch:
            return
        encoded = self._sql.encode(batch)
        seen_at = None if wanted is None else self._cached_prefix_generation(wanted)
        self._cache.forget()
        write = partial(
            self._sql.replace_prefix,
            self.session_id,
            self._ready,
            count,
            run,
            encoded,
            wanted,
            seen_at,
        )
        await self._write(write)

    def _cached_prefix_generation(self, expected: list[Message]) -> Any:
        """The generation of the cached history if it starts with `expected`, else None.

        Between two bumps of the generation a session only grows at the end, so
        a cache read at the generation the database still has holds its prefix.
        """
        cache = self._cache
        if cache.generation == cache.stale or len(expected) > len(cache.messages):
            return None
        for wanted, cached in zip(expected, cache.messages, strict=False):
            if wanted is not cached and wanted != cached:
                return None
        return cache.generation

    async def fork(self, *, session_id: str | None = None, at: int | None = None) -> Self:
        """A new session in the same database holding this one's history, archive and tokens.

        The fork shares the stored messages instead of copying them: one
        transaction writes its session row and a row per session it reads
        from, whatever the length of the history (see `ContextStore.fork`).
        Run ids and usage records are kept (the records are copied), so
        `clear_run` works on the fork too.

        Raises:
            TypeError: `at` is not an int.
            ValueError: `session_id` names a session that already exists, or
                `at` is not from 0 to the live message count; nothing is written.
        """
        new_id = new_session_id() if session_id is None else check_session_id(session_id)
        # Not fenced: it writes another session, and only reads this one.
        await self._sql.fork(self.session_id, new_id, at, self._owner)
        fork = type(self)(self._sql.conn, session_id=new_id, owner=self._owner)
        fork._ready = fork._claimed = True
        return fork

    async def rewind(self, to: int) -> int:
        """Keep the oldest `to` live messages and remove the rest, in one transaction.

        See `ContextStore.rewind`. Nothing is copied, unless a fork shares a
        removed message: that fork first gets its own rows (copy on write).

        Raises:
            TypeError: `to` is not an int.
            ValueError: `to` is not from 0 to the live message count; nothing changed.
            LeaseLostError: Made under a lease that passed to another holder
                or ran out; nothing changed.
        """
        self._cache.forget()
        return await self._write(partial(self._sql.rewind, self.session_id, to), ensures=False)

    async def save_checkpoint(self, agent: str, state: bytes) -> int:
        """Keep `state` as `agent`'s checkpoint at the end of the live history, in one
        transaction (see `ContextStore.save_checkpoint`); the bytes are stored once
        per distinct content, shared by every checkpoint and fork that has them.

        Raises:
            TypeError, ValueError: As `ContextStore.save_checkpoint` says.
            LeaseLostError: Made under a lease that passed to another holder
                or ran out; nothing was written.
        """
        name = check_agent(agent)
        data = check_state(state)
        return await self._write(partial(self._sql.save_checkpoint, self.session_id, name, data))

    async def get_checkpoint(self, agent: str, at: int) -> bytes | None:
        """The state `agent` saved at live message `at`, or None (see
        `ContextStore.get_checkpoint`); one read transaction.

        Raises:
            TypeError, ValueError: As `ContextStore.get_checkpoint` says.
        """
        name = check_agent(agent)
        return await self._sql.get_checkpoint(self.session_id, name, at)

    async def list_checkpoints(self, agent: str | None = None) -> list[CheckpointInfo]:
        """The agents' checkpoints (`agent`'s alone, if given), in order of message, then
        agent (see `ContextStore.list_checkpoints`); one read transaction, the states
        not read.

        Raises:
            TypeError, ValueError: As `ContextStore.list_checkpoints` says.
        """
        name = None if agent is None else check_agent(agent)
        return await self._sql.list_checkpoints(self.session_id, name)

    async def snapshot(self) -> SessionSnapshot:
        """The history and the archive with their run ids, the token usage and usage records.

        One read transaction: a consistent moment, whatever other connections write.
        """
        return await self._sql.snapshot(self.session_id)

    async def restore(self, snapshot: SessionSnapshot) -> None:
        """Write `snapshot` into this empty session in one transaction (see `ContextStore.restore`).

        Raises:
            TypeError: `snapshot` is not a `SessionSnapshot`, or a message holds
                a value JSON cannot hold (nothing is written).
            ValueError: The session already holds messages (live or archived), or
                a message holds a lone surrogate or is over `MAX_MESSAGE_BYTES`;
                nothing is written. (Its run ids, model names and agents were
                checked when the snapshot was made.)
        """
        snapshot = check_snapshot(snapshot)
        live, archived = (
            ([s.run_id for s in part], self._sql.encode([s.message for s in part]))
            for part in (snapshot.messages, snapshot.archived)
        )
        tokens = (snapshot.input_tokens, snapshot.output_tokens)
        self._cache.forget()
        write = partial(
            self._sql.restore,
            self.session_id,
            live,
            archived,
            tokens,
            snapshot.usage,
            snapshot.checkpoints,
        )
        await self._write(write)

    async def close(self) -> None:
        """Drop this store's cached history. The shared connection stays open."""
        self._cache.forget()

    # -- token usage --------------------------------------------------------

    async def set_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Overwrite the session's recorded token usage (one statement).

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
        """
        tokens = check_tokens(input_tokens, output_tokens)
        await self._write(partial(self._sql.set_tokens, self.session_id, tokens, False))

    async def add_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Add to the session's recorded token usage, atomically in SQL.

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
        """
        tokens = check_tokens(input_tokens, output_tokens)
        await self._write(partial(self._sql.set_tokens, self.session_id, tokens, True))

    async def get_context_tokens(self) -> tuple[int, int]:
        """The session's recorded token usage: `(input_tokens, output_tokens)`."""
        return await self._sql.get_tokens(self.session_id)

    async def record_usage(self, record: UsageRecord) -> None:
        """Keep one model call's usage and add its tokens to the session, in one transaction.

        See `ContextStore.record_usage`.

        Raises:
            TypeError: `record` is not a `UsageRecord`.
            ValueError: Its run id or model name holds text the database cannot store.
        """
        record = check_usage_record(record)
        await self._write(partial(self._sql.record_usage, self.session_id, record))

    async def get_usage(self, *, run_id: str | None = None) -> list[UsageRecord]:
        """The session's usage records, oldest first; only run `run_id`'s when given.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = None if run_id is None else require_run_id(run_id)
        return await self._sql.get_usage(self.session_id, target)

    # -- approval decisions (see `ContextStore.record_decision`) -----------------

    async def record_decision(self, call_id: str, decision: ApprovalDecision) -> ApprovalDecision:
        """Keep the decision on `call_id` unless it has one (one transaction); the one kept.

        See `ContextStore.record_decision`.

        Raises:
            TypeError, ValueError, LeaseLostError: As `ContextStore.record_decision` says.
        """
        call_id, decision = check_decision(call_id, decision)
        return await self._write(
            partial(self._sql.record_decision, self.session_id, call_id, decision)
        )

    async def get_decisions(self) -> dict[str, ApprovalDecision]:
        """Every decision recorded on this session's tool calls, by call id."""
        return await self._sql.get_decisions(self.session_id)

    # -- the step journal (see `ContextStore.journal_start`) ----------------------

    async def journal_start(self, call_id: str) -> None:
        """Record that tool call `call_id` starts (one transaction, fenced by a lease held here).

        See `ContextStore.journal_start`.

        Raises:
            TypeError, ValueError, LeaseLostError: As `ContextStore.journal_start` says.
        """
        call_id = check_call_id(call_id)
        await self._write(partial(self._sql.journal_start, self.session_id, call_id))

    async def journal_finish(self, call_id: str, result: ToolResultBlock) -> None:
        """Record that tool call `call_id` finished with `result` (one transaction, fenced).

        See `ContextStore.journal_finish`.

        Raises:
            TypeError, ValueError, LeaseLostError: As `ContextStore.journal_finish` says.
        """
        call_id = check_call_id(call_id)
        if not isinstance(result, ToolResultBlock):
            raise TypeError(f"journal_finish needs a ToolResultBlock result, not {result!r}")
        data = journal_sql.encode(result)
        await self._write(partial(self._sql.journal_finish, self.session_id, call_id, data))

    async def get_journal(self, call_ids: Iterable[str]) -> dict[str, ToolResultBlock | None]:
        """The journal of `call_ids`: each recorded call's result, None if it did not finish."""
        return await self._sql.get_journal(self.session_id, tuple(check_call_ids(call_ids)))

    # -- the lease (see `ContextStore.lease`) ------------------------------------

    @property
    def _lease_scope(self) -> Hashable:
        return (self._sql.name, self._sql.database, self.session_id)

    async def _acquire_lease(self, owner: str, ttl: float, create: bool) -> tuple[bool, LeaseState]:
        if create:
            await self._claim()
        answer = await self._sql.acquire_lease(self.session_id, owner, ttl, create)
        self._ready = self._ready or create
        return answer

    async def _renew_lease(self, owner: str, token: int, ttl: float) -> LeaseState | None:
        return await self._sql.renew_lease(self.session_id, owner, token, ttl)

    async def _release_lease(self, owner: str, token: int) -> None:
        await self._sql.release_lease(self.session_id, owner, token)

    # -- sessions -----------------------------------------------------------

    async def list_sessions(self, *, owner: str | None = None) -> list[SessionInfo]:
        """Every session in the database, newest first (one query); only `owner`'s
        when given (an index range: milliseconds among a million sessions).

        Raises:
            TypeError: `owner` is not a str or None.
            ValueError: `owner` is empty or holds a NUL or a lone surrogate.
        """
        return await self._sql.list_sessions(check_owner(owner))

    async def erase(
        self,
        *,
        owner: str | None = None,
        session: str | None = None,
        older_than: timedelta | None = None,
    ) -> int:
        """Remove sessions of this database for good, in one transaction (see
        `ContextStore.erase`). Any session of the database can be named, not only
        this store's; a store of an erased session reads an empty history after.
        What else makes the erased bytes unreadable on disk depends on the
        database (see the stores guide).

        Raises:
            ValueError: Neither `owner` nor `session` is given; nothing is erased.
        """
        target = check_erase(owner, session, older_than)
        erased = await self._sql.erase(target)
        if erased:
            self._ready = False
            self._claimed = self._owner is None
        return erased
