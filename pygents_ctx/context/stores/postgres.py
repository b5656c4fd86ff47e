"""`PostgresContextStore`: many sessions in one PostgreSQL database, shared by many workers.

Needs the `postgres` extra (`pip install 'pygents-ctx[postgres]'`, psycopg 3).
`connect_postgres(dsn)` opens one psycopg `AsyncConnection` in autocommit mode
and brings the schema up to date; the stores sharing it run their calls one
at a time. Appends are single statements that reserve their positions by
locking the session's row, so workers on any number of connections or
machines appending to one session never collide and never lose a message.
A write made under a lease is one transaction that ends by checking the
lease, its row locked FOR SHARE (see `SessionLease`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pygents_ctx.context.messages import Message, ToolResultBlock
from pygents_ctx.context.stores import _decisions_sql as decisions_sql
from pygents_ctx.context.stores import _journal_sql as journal_sql
from pygents_ctx.context.stores import _lease_sql as lease_sql
from pygents_ctx.context.stores import _paged as paged
from pygents_ctx.context.stores import _postgres_ops as ops
from pygents_ctx.context.stores import _search_sql as search_sql
from pygents_ctx.context.stores import _usage_sql as usage_sql
from pygents_ctx.context.stores._common import (
    ClosesOnExit,
    Connecting,
    HistoryCache,
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
from pygents_ctx.context.stores._paged import check_batch, iter_pages
from pygents_ctx.context.stores._postgres_schema import migrate
from pygents_ctx.context.stores.base import (
    ApprovalDecision,
    ContextStore,
    SessionInfo,
    SessionSnapshot,
    check_call_id,
    check_decision,
    check_snapshot,
)
from pygents_ctx.context.stores.lease import fenced
from pygents_ctx.context.stores.search import HistoryHit, check_search
from pygents_ctx.context.usage import UsageRecord
from pygents_ctx.errors import StoreClosedError

if TYPE_CHECKING:
    from collections.abc import Hashable
    from types import ModuleType

    from psycopg import AsyncConnection

__all__ = ["PostgresConnection", "PostgresContextStore", "connect_postgres"]

T = TypeVar("T")
_STALE: Final = (-2, -2)  # the cache's version when it must be read again in full


def _import_psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError:
        raise ImportError(
            "PostgresContextStore needs psycopg 3: pip install 'pygents-ctx[postgres]'"
        ) from None
    return psycopg


def _no_nul(name: str, value: str) -> str:
    # PostgreSQL text cannot hold NUL; refuse it here rather than half-way through a call.
    if "\x00" in value:
        raise ValueError(f"{name} must not contain NUL characters (PostgreSQL text cannot)")
    return value


def _check_id(value: object) -> str:
    return _no_nul("session_id", check_session_id(value))


def _check_run(value: object) -> str | None:
    run_id = check_run_id(value)
    return None if run_id is None else _no_nul("run_id", run_id)


def _storable_record(record: UsageRecord) -> UsageRecord:
    """`record`, if text columns can hold its run id and model name (no NUL)."""
    for name in ("run_id", "model"):
        value = getattr(record, name)
        if value is not None:
            _no_nul(f"UsageRecord.{name}", value)
    return record


def _retrieve(task: asyncio.Task[Any]) -> None:
    # A call whose caller was cancelled still finishes; nobody awaits its outcome.
    if not task.cancelled():
        task.exception()


async def _close(conn: AsyncConnection[Any]) -> None:
    await conn.close()


# libpq receives a result into an input buffer that starts at 16 KiB and grows only
# when one protocol message needs more room, never shrinking. Each fill of it is one
# wait on the event loop, so a history of 2,000 x 4 KB rows came in some 500 reads of
# 16 KiB (10 ms of a 30 ms load, measured); with 256 KiB it takes 30 to 90. One value
# of this size, read once at connect, grows the buffer for the connection's life.
_WIDE_VALUE: Final = 140_000  # bytes: over 128 KiB, so libpq doubles its buffer to 256 KiB


async def _widen_read_buffer(conn: AsyncConnection[Any]) -> None:
    await conn.execute("SELECT repeat(' ', %s)", (_WIDE_VALUE,))


def connect_postgres(dsn: str = "") -> Connecting[PostgresConnection]:
    """Connect to the PostgreSQL database at `dsn`, ready for context stores.

    Await the result for the connection, or use it with `async with`, which
    closes the connection at the end. Opening creates the tables if they are
    missing and brings their schema up to date, in one transaction.

    Args:
        dsn: A libpq connection string, `"postgresql://user@host:5432/app"` or
            `"host=... dbname=..."`; the `PG*` environment variables fill in
            what it leaves out (`""` uses them alone). The tables go in the
            first schema of the `search_path`: add
            `options='-c search_path=agents'` to use the schema `agents`.

    Raises:
        TypeError: `dsn` is not a str.
        ImportError: psycopg is not installed (the `postgres` extra).
        psycopg.OperationalError: (when awaited) The server cannot be reached.
        StoreSchemaError: (when awaited) The database was written by a newer pygents_ctx.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> async def main(dsn):
        ...     async with connect_postgres(dsn) as conn:
        ...         store = PostgresContextStore(conn, session_id="chat-1")
        ...         await store.append(Message("user", "Hi"))
        ...         return [m.text for m in await store.get_history()]
        >>> asyncio.run(main(dsn))  # doctest: +SKIP
        ['Hi']
    """
    if not isinstance(dsn, str):
        raise TypeError(f"connect_postgres dsn must be a str, not {type(dsn).__name__}")
    psycopg = _import_psycopg()
    return Connecting(PostgresConnection._open(psycopg, dsn))


class PostgresConnection(ClosesOnExit):
    """An open connection to PostgreSQL, for context stores. Open one with `connect_postgres()`.

    Several stores can share a connection; their calls run one at a time, in
    the order they were made. For parallel work, open one connection per
    worker: sessions are safe to share across connections. Close it with
    `await conn.close()` (or `async with connect_postgres(dsn) as conn:`); a
    call on a closed or lost connection raises `StoreClosedError`.

    A call whose caller is cancelled still runs to its end: a write is
    committed or rolled back whole, and the connection stays usable.
    """

    __slots__ = ("_closed", "_conn", "_database", "_lock", "_target")

    def __init__(self, conn: AsyncConnection[Any], schema: str) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._closed = False
        info = conn.info
        self._target = f"{info.user}@{info.host}:{info.port}/{info.dbname}"
        # What the database is, for leases: the server, the database and the tables' schema.
        self._database = (info.host, info.port, info.dbname, schema)

    @classmethod
    async def _open(cls, psycopg: ModuleType, dsn: str) -> PostgresConnection:
        conn: AsyncConnection[Any] = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        try:
            await migrate(conn)
            await _widen_read_buffer(conn)
            cursor = await conn.execute("SELECT current_schema()")
            schema = await cursor.fetchone()
        except BaseException:
            await conn.close()
            raise
        return cls(conn, "" if schema is None else str(schema[0]))

    @property
    def target(self) -> str:
        """Where the connection goes: `user@host:port/dbname` (never the password)."""
        return self._target

    @property
    def closed(self) -> bool:
        """Whether `close()` was called or the server connection was lost."""
        return self._closed or self._conn.closed

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<PostgresConnection {self._target!r} {state}>"

    async def run(self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Await `fn(conn)` with the psycopg `AsyncConnection`, after the calls before it.

        `conn` is in autocommit mode: group statements with
        `async with conn.transaction():`, and leave no transaction open.

        Raises:
            StoreClosedError: The connection is closed or was lost.
        """
        if self._closed or self._conn.closed:
            lost = "" if self._closed else " (the server connection was lost)"
            raise StoreClosedError(
                f"the PostgreSQL connection to {self._target!r} is closed{lost}; "
                "open a new one with `await connect_postgres(dsn)`"
            )
        return await self._submit(fn)

    def _submit(self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> Awaitable[T]:
        # A task per call: tasks start in the order they were made, so the lock is
        # taken in call order, and a caller's cancellation does not stop the work.
        task = asyncio.ensure_future(self._serialized(fn))
        task.add_done_callback(_retrieve)
        return asyncio.shield(task)

    async def _serialized(self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        async with self._lock:
            return await fn(self._conn)

    async def close(self) -> None:
        """Close the connection once the calls already made have finished. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._submit(_close)


class PostgresContextStore(ContextStore):
    """One session in a PostgreSQL database: shared safely by workers on many machines.

    Behaves as `SQLiteContextStore` does, method for method: many sessions in
    one database, a session's row created by its first write (`created_at` is
    the server's clock at that moment), messages stored as orjson beside their
    token count so `count()` and `token_count()` are one indexed lookup, and
    `clear`, `clear_run`, `replace_prefix`, `fork` and `restore` each one
    transaction.

    `get_history()` keeps the messages it has read: a later call reads only
    the rows appended since, in one query. `clear`, `clear_run`,
    `replace_prefix` and `restore` (from any connection) bump the session's
    generation, which makes every store read the history afresh; a session row
    deleted and created again has a new row id, which does the same.

    An `owner` (a user or tenant id) works as in `SQLiteContextStore`: the
    store's first write makes the session that owner's, and a session another
    owner holds is refused with `ValueError`, nothing written.

    Args:
        conn: An open connection, from `await connect_postgres(dsn)`.
        session_id: The session's id; a random one when None.
        owner: The user or tenant id the session belongs to, or None.

    Raises:
        TypeError: `conn` is not a `PostgresConnection`, or `owner` is not a str.
        ValueError: `session_id` or `owner` is empty or holds a NUL character.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> async def main(dsn):
        ...     async with connect_postgres(dsn) as conn:
        ...         store = PostgresContextStore(conn, session_id="my-session")
        ...         await store.append_many([Message("user", "Hello"), Message("assistant", "Hi")])
        ...         forked = await store.fork()
        ...         return await forked.count(), forked.session_id != store.session_id
        >>> asyncio.run(main(dsn))  # doctest: +SKIP
        (2, True)
    """

    def __init__(
        self, conn: PostgresConnection, *, session_id: str | None = None, owner: str | None = None
    ) -> None:
        if not isinstance(conn, PostgresConnection):
            raise TypeError(
                "PostgresContextStore needs the connection from `await connect_postgres(dsn)`, "
                f"not {type(conn).__name__}"
            )
        self._conn = conn
        self._session_id = None if session_id is None else _check_id(session_id)
        self._owner = check_owner(owner)
        self._claimed = owner is None  # whether the session's row is known to be the owner's
        self._cache = HistoryCache(_STALE)

    def __repr__(self) -> str:
        return f"PostgresContextStore({self._conn.target!r}, session_id={self.session_id!r})"

    @property
    def connection(self) -> PostgresConnection:
        """The connection this store runs on."""
        return self._conn

    # -- messages -----------------------------------------------------------

    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        """Add `message` at the end of the history: one statement, its own transaction.

        Under a lease (see `lease()`), the statement and the lease's check in
        one transaction.

        Raises:
            TypeError: `message` is not a `Message`, `run_id` is not a str, or
                a tool input holds a value JSON cannot hold.
            LeaseLostError: Made under a lease that passed to another holder
                or ran out; nothing was added.
        """
        if not isinstance(message, Message):
            raise TypeError(f"append needs a Message, not {type(message).__name__}")
        await self._append([message], _check_run(run_id))

    async def append_many(self, messages: Iterable[Message], *, run_id: str | None = None) -> None:
        """Add `messages` at the end, in order, in one transaction.

        They are encoded and sent as they are read, up to 1,000 messages or
        1 MB a statement, so memory holds one such batch however many there
        are; a single batch is a single statement.

        Raises:
            TypeError: Something in `messages` is not a `Message`, or holds a
                value JSON cannot hold (nothing is added).
        """
        run = _check_run(run_id)
        await self._append(checked_messages(messages), run)

    async def _append(self, messages: Iterable[Message], run_id: str | None) -> None:
        batches = ops.batches(messages)
        first = next(batches, None)
        if first is not None:
            await self._write(partial(ops.append_rows, self.session_id, run_id, first, batches))

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
    ) -> Awaitable[ops.Read]:
        return self._conn.run(
            partial(ops.read_since, self.session_id, generation, position, with_archive)
        )

    def _read_newest(self, limit: int, offset: int) -> Awaitable[list[Message]]:
        return self._conn.run(partial(ops.read_newest, self.session_id, limit, offset))

    async def iter_history(
        self, *, batch: int = 1000, include_archived: bool = False
    ) -> AsyncIterator[Message]:
        """The history, oldest first, `batch` rows at a time by stored position.

        See `ContextStore.iter_history`; each page is one indexed read of the
        next `batch` rows, and bypasses the history cache.
        """
        check_batch(batch)
        async for message in iter_pages(self.session_id, self._page, batch, include_archived):
            yield message

    def _page(self, table: str, key: str, after: int | None, limit: int) -> Awaitable[list[Any]]:
        return self._conn.run(
            partial(paged.postgres_page, self.session_id, table, key, after, limit)
        )

    async def search(self, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """The best matches for `query` in the archive and the live history, from the
        full-text index (see `ContextStore.search`); a hit's `id` is its `message_id`.
        """
        query, limit = check_search(query, limit)
        return await self._conn.run(
            partial(search_sql.search_postgres, self.session_id, query, limit)
        )

    async def _live_ids(self, count: int) -> list[int] | None:
        return await self._conn.run(partial(search_sql.live_ids_postgres, self.session_id, count))

    async def count(self) -> int:
        """The number of messages in the live history (a stored counter)."""
        return await self._conn.run(partial(ops.scalar, ops.MESSAGE_COUNT, self.session_id))

    async def token_count(self) -> int:
        """The total token count of the live history (a stored running sum)."""
        return await self._conn.run(partial(ops.scalar, ops.LIVE_TOKENS, self.session_id))

    async def clear(self) -> None:
        """Remove every message, live and archived, in one transaction; token usage stays."""
        self._cache.forget()
        await self._write(partial(ops.clear, self.session_id))

    async def clear_run(self, run_id: str) -> None:
        """Remove the messages appended with `run_id`, live and archived, in one transaction.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = _no_nul("run_id", require_run_id(run_id))
        self._cache.forget()
        await self._write(partial(ops.clear_run, self.session_id, target))

    async def replace_prefix(
        self,
        count: int,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expected: Sequence[Message] | None = None,
    ) -> None:
        """Replace the oldest `count` live messages with `messages`, in one transaction.

        The replaced messages move to the archive. With `expected`, the
        oldest `count` messages are compared with it in the same transaction,
        after locking the session's row, so no other worker can change them
        between the check and the rewrite. See `ContextStore.replace_prefix`.

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
        run = _check_run(run_id)
        wanted = check_expected(count, expected)
        if count == 0 and not batch:
            return
        encoded = ops.encode(batch)
        self._cache.forget()
        await self._write(partial(ops.replace_prefix, self.session_id, count, run, encoded, wanted))

    async def fork(
        self, *, session_id: str | None = None, at: int | None = None
    ) -> PostgresContextStore:
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
        new_id = new_session_id() if session_id is None else _check_id(session_id)
        await self._conn.run(partial(_fork_with_usage, self.session_id, new_id, at, self._owner))
        fork = PostgresContextStore(self._conn, session_id=new_id, owner=self._owner)
        fork._claimed = True
        return fork

    async def rewind(self, to: int) -> int:
        """Keep the oldest `to` live messages and remove the rest, in one transaction.

        See `ContextStore.rewind`. Nothing is copied, unless a fork shares a
        removed message: that fork first gets its own rows (copy on write).

        Raises:
            TypeError: `to` is not an int.
            ValueError: `to` is not from 0 to the live message count; nothing changed.
        """
        self._cache.forget()
        return await self._write(partial(ops.rewind, self.session_id, to))

    async def snapshot(self) -> SessionSnapshot:
        """The history and the archive with their run ids, the token usage and usage records.

        One repeatable-read transaction: a consistent moment, whatever other workers write.
        """
        return await self._conn.run(partial(ops.snapshot, self.session_id))

    async def restore(self, snapshot: SessionSnapshot) -> None:
        """Write `snapshot` into this empty session in one transaction (see `ContextStore.restore`).

        Raises:
            TypeError: `snapshot` is not a `SessionSnapshot`, or a message holds
                a value JSON cannot hold (nothing is written).
            ValueError: The session already holds messages (live or archived),
                or a run id or model name holds a NUL character; nothing is written.
        """
        snapshot = check_snapshot(snapshot)
        parts = tuple(
            ([_check_run(stored.run_id) for stored in part], ops.encode([s.message for s in part]))
            for part in (snapshot.messages, snapshot.archived)
        )
        tokens = (snapshot.input_tokens, snapshot.output_tokens)
        usage = tuple(map(_storable_record, snapshot.usage))
        self._cache.forget()
        await self._write(partial(ops.restore, self.session_id, parts[0], parts[1], tokens, usage))

    async def close(self) -> None:
        """Drop this store's cached history. The shared connection stays open."""
        self._cache.forget()

    async def _claim(self) -> None:
        """Before the first write of a store with an owner: make the session that owner's."""
        if self._claimed or self._owner is None:
            return
        held = await self._conn.run(partial(ops.claim, self.session_id, self._owner))
        if held != self._owner:
            raise ValueError(
                f"session {self.session_id!r} belongs to owner {held!r}, not {self._owner!r}: "
                f"open it with owner={held!r}, or use another session_id"
            )
        self._claimed = True

    async def _write(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """`work` as one write to the session, fenced by a lease held here (`ops.fenced`)."""
        await self._claim()
        fence = self._fence()
        if fence is None:
            return await self._conn.run(work)
        return await fenced(
            fence, self._conn.run(partial(ops.fenced, self.session_id, fence.token, work))
        )

    # -- token usage --------------------------------------------------------

    async def set_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Overwrite the session's recorded token usage (one statement).

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
        """
        amounts = check_tokens(input_tokens, output_tokens)
        await self._write(partial(ops.set_tokens, ops.SET_TOKENS, self.session_id, *amounts))

    async def add_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Add to the session's recorded token usage, atomically in SQL.

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
        """
        amounts = check_tokens(input_tokens, output_tokens)
        await self._write(partial(ops.set_tokens, ops.ADD_TOKENS, self.session_id, *amounts))

    async def get_context_tokens(self) -> tuple[int, int]:
        """The session's recorded token usage: `(input_tokens, output_tokens)`."""
        return await self._conn.run(partial(ops.get_tokens, self.session_id))

    async def record_usage(self, record: UsageRecord) -> None:
        """Keep one model call's usage and add its tokens to the session, in one transaction.

        See `ContextStore.record_usage`.

        Raises:
            TypeError: `record` is not a `UsageRecord`.
            ValueError: Its run id or model name holds a NUL character.
        """
        record = _storable_record(check_usage_record(record))
        await self._write(partial(usage_sql.record_postgres, self.session_id, record))

    async def get_usage(self, *, run_id: str | None = None) -> list[UsageRecord]:
        """The session's usage records, oldest first; only run `run_id`'s when given.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = None if run_id is None else _no_nul("run_id", require_run_id(run_id))
        return await self._conn.run(partial(usage_sql.read_postgres, self.session_id, target))

    # -- approval decisions (see `ContextStore.record_decision`) -----------------

    async def record_decision(self, call_id: str, decision: ApprovalDecision) -> ApprovalDecision:
        """Keep the decision on `call_id` unless it has one (one transaction); the one kept.

        See `ContextStore.record_decision`.

        Raises:
            TypeError, ValueError, LeaseLostError: As `ContextStore.record_decision` says.
        """
        call_id, decision = check_decision(call_id, decision)
        work = partial(decisions_sql.record_postgres, self.session_id, call_id, decision)
        return await self._write(work)

    async def get_decisions(self) -> dict[str, ApprovalDecision]:
        """Every decision recorded on this session's tool calls, by call id."""
        return await self._conn.run(partial(decisions_sql.read_postgres, self.session_id))

    # -- the step journal (see `ContextStore.journal_start`) ----------------------

    async def journal_start(self, call_id: str) -> None:
        """Record that tool call `call_id` starts (one transaction, fenced by a lease held here).

        See `ContextStore.journal_start`.

        Raises:
            TypeError, ValueError, LeaseLostError: As `ContextStore.journal_start` says.
        """
        call_id = check_call_id(call_id)
        await self._write(partial(journal_sql.start_postgres, self.session_id, call_id))

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
        await self._write(partial(journal_sql.finish_postgres, self.session_id, call_id, data))

    async def get_journal(self, call_ids: Iterable[str]) -> dict[str, ToolResultBlock | None]:
        """The journal of `call_ids`: each recorded call's result, None if it did not finish."""
        ids = tuple(call_ids)
        return await self._conn.run(partial(journal_sql.read_postgres, self.session_id, ids))

    # -- the lease (see `ContextStore.lease`) ------------------------------------

    @property
    def _lease_scope(self) -> Hashable:
        return ("postgres", self._conn._database, self.session_id)

    async def _acquire_lease(
        self, owner: str, ttl: float, create: bool
    ) -> tuple[bool, lease_sql.LeaseState]:
        if create:
            await self._claim()
        work = partial(lease_sql.acquire_postgres, self.session_id, owner, ttl, create)
        while True:
            answer = await self._conn.run(work)
            if answer is not None:  # None: the holder let go while it was asked
                return answer

    async def _renew_lease(self, owner: str, token: int, ttl: float) -> lease_sql.LeaseState | None:
        work = partial(lease_sql.renew_postgres, self.session_id, owner, token, ttl)
        return await self._conn.run(work)

    async def _release_lease(self, owner: str, token: int) -> None:
        await self._conn.run(partial(lease_sql.release_postgres, self.session_id, owner, token))

    # -- sessions -----------------------------------------------------------

    async def list_sessions(self, *, owner: str | None = None) -> list[SessionInfo]:
        """Every session in the database, newest first (one query); only `owner`'s
        when given (an index range: milliseconds among a million sessions).

        Raises:
            TypeError: `owner` is not a str or None.
            ValueError: `owner` is empty or holds a NUL.
        """
        return await self._conn.run(partial(ops.list_sessions, check_owner(owner)))

    async def erase(
        self,
        *,
        owner: str | None = None,
        session: str | None = None,
        older_than: timedelta | None = None,
    ) -> int:
        """Remove sessions of this database for good, in one transaction (see
        `ContextStore.erase`). Any session of the database can be named, not only
        this store's. The deleted row versions stay in the table files until
        `VACUUM` reclaims them (see the stores guide).

        Raises:
            ValueError: Neither `owner` nor `session` is given; nothing is erased.
        """
        target = check_erase(owner, session, older_than)
        erased = await self._conn.run(partial(ops.erase, target))
        if erased:
            self._claimed = self._owner is None
        return erased


async def _fork_with_usage(
    session_id: str, new_id: str, at: int | None, owner: str | None, conn: AsyncConnection[Any]
) -> None:
    # The fork's own transaction nests as a savepoint: the copy of the records is in the same one.
    async with conn.transaction():
        await ops.fork(session_id, new_id, at, conn)
        await ops.own_fork(session_id, new_id, owner, conn)
        await usage_sql.copy_postgres(session_id, new_id, conn)
