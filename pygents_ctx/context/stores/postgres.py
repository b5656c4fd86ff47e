"""`PostgresContextStore`: many sessions in one PostgreSQL database, shared by many workers.

Needs the `postgres` extra (`pip install -e '.[postgres]'` from a checkout: psycopg 3).
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
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeAlias, TypeVar

from pygents_ctx._checks import number
from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores import _postgres_ops as ops
from pygents_ctx.context.stores import _search_sql as search_sql
from pygents_ctx.context.stores._common import ClosesOnExit, Connecting
from pygents_ctx.context.stores._postgres_schema import migrate
from pygents_ctx.context.stores._sql_store import Dialect, Ops, SQLStore
from pygents_ctx.errors import StoreClosedError

if TYPE_CHECKING:
    from types import ModuleType

    from psycopg import AsyncConnection

    from pygents_ctx.context.messages import Message
    from pygents_ctx.context.stores._common import Erasure
    from pygents_ctx.context.stores._postgres_ops import Batch
    from pygents_ctx.context.stores.base import StoredCheckpoint
    from pygents_ctx.context.stores.search import HistoryHit
    from pygents_ctx.context.usage import UsageRecord

__all__ = ["PostgresConnection", "PostgresContextStore", "connect_postgres"]

T = TypeVar("T")
Work: TypeAlias = "Callable[[AsyncConnection[Any]], Awaitable[T]]"
_STALE: Final = (-2, -2)  # the cache's version when it must be read again in full


def _import_psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError:
        raise ImportError(
            "PostgresContextStore needs psycopg 3: the 'postgres' extra "
            "(pip install -e '.[postgres]' from a checkout)"
        ) from None
    return psycopg


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


STALLED_WRITE_TIMEOUT: Final = 10.0
"""`connect_postgres`'s default: seconds a write's transaction may stall before the server
ends it."""


def connect_postgres(
    dsn: str = "", *, stalled_write_timeout: float | None = STALLED_WRITE_TIMEOUT
) -> Connecting[PostgresConnection]:
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
        stalled_write_timeout: Seconds the server lets a transaction of this
            connection wait on its client in the middle of a write (the
            process frozen, or stuck) before it ends the transaction, rolled
            back, and the connection with it. A write holds row locks that a
            lease's takeover waits for, so without a bound a holder frozen
            inside a write would keep every other worker from the session
            until it wakes. Sets the connection's
            `idle_in_transaction_session_timeout`; None keeps the server's.

    Raises:
        TypeError: `dsn` is not a str, or `stalled_write_timeout` is not a number.
        ValueError: `stalled_write_timeout` is not positive and finite.
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
    stalled = stalled_write_timeout
    if stalled is not None:
        number(
            stalled,
            "connect_postgres stalled_write_timeout",
            above=True,
            fix="a number of seconds; None keeps the server's idle_in_transaction_session_timeout",
        )
    psycopg = _import_psycopg()
    return Connecting(PostgresConnection._open(psycopg, dsn, stalled))


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
    async def _open(
        cls, psycopg: ModuleType, dsn: str, stalled_write_timeout: float | None
    ) -> PostgresConnection:
        conn: AsyncConnection[Any] = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        try:
            await migrate(conn)
            await _widen_read_buffer(conn)
            if stalled_write_timeout is not None:
                milliseconds = max(1, round(stalled_write_timeout * 1000))
                await conn.execute(
                    "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
                    (f"{milliseconds}ms",),
                )
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


class PostgresDialect(Dialect[PostgresConnection]):
    """PostgreSQL's way (see `Dialect`): every call awaited on the psycopg connection,
    one at a time; a write under a lease one transaction that ends by checking the
    lease; the session's `created_at` from the server's clock; text without NUL.
    """

    ops: ClassVar[Ops] = ops
    name = "postgres"
    stale = _STALE
    connection = PostgresConnection
    opened_by = "await connect_postgres(dsn)"

    @property
    def place(self) -> str:
        return self.conn.target

    def write(self, session_id: str, fence: int | None, work: Work[T]) -> Awaitable[T]:
        """`work`, which locks the session's row, then the lease's check, in one transaction."""
        return self.conn.run(
            work if fence is None else partial(ops.fenced, session_id, fence, work)
        )

    def encode(self, messages: list[Message]) -> Batch:
        return ops.encode(messages)

    async def append(
        self,
        session_id: str,
        known: bool,
        run_id: str | None,
        messages: Iterable[Message],
        fence: int | None,
    ) -> bool:
        """Sent as they are encoded, up to 1,000 messages or 1 MB a statement; a
        single batch is a single statement."""
        batches = ops.batches(messages)
        first = next(batches, None)
        if first is None:
            return False
        await self.write(
            session_id, fence, partial(ops.append_rows, session_id, run_id, first, batches)
        )
        return True

    def search(self, session_id: str, query: str, limit: int) -> Awaitable[list[HistoryHit]]:
        """From the tsvector index, kept by each write; a hit's `id` is its `message_id`."""
        return self.run(search_sql.search_postgres, session_id, query, limit)

    def messages(
        self, session_id: str, after: int, ids: list[int] | None, limit: int
    ) -> Awaitable[list[HistoryHit]]:
        return self.run(search_sql.messages_postgres, session_id, after, ids, limit)

    def count(self, session_id: str) -> Awaitable[int]:
        return self.run(ops.scalar, ops.MESSAGE_COUNT, session_id)

    def token_count(self, session_id: str) -> Awaitable[int]:
        return self.run(ops.scalar, ops.LIVE_TOKENS, session_id)

    def replace_prefix(
        self,
        session_id: str,
        known: bool,
        count: int,
        run_id: str | None,
        encoded: Batch,
        expected: list[Message] | None,
        seen_at: Any,
        fence: int | None,
    ) -> Awaitable[None]:
        """`expected` compared in SQL after locking the session's row, whatever `seen_at`."""
        work = partial(ops.replace_prefix, session_id, count, run_id, encoded, expected)
        return self.write(session_id, fence, work)

    def fork(
        self, session_id: str, new_id: str, at: int | None, owner: str | None
    ) -> Awaitable[None]:
        return self.run(_fork, session_id, new_id, at, owner)

    def restore(
        self,
        session_id: str,
        live: tuple[list[str | None], Batch],
        archived: tuple[list[str | None], Batch],
        tokens: tuple[int, int],
        usage: tuple[UsageRecord, ...],
        checkpoints: tuple[StoredCheckpoint, ...],
        fence: int | None,
    ) -> Awaitable[None]:
        work = partial(ops.restore, session_id, live, archived, tokens, usage, checkpoints)
        return self.write(session_id, fence, work)

    def set_tokens(
        self, session_id: str, tokens: tuple[int, int], add: bool, fence: int | None
    ) -> Awaitable[None]:
        sql = ops.ADD_TOKENS if add else ops.SET_TOKENS
        return self.write(session_id, fence, partial(ops.set_tokens, sql, session_id, *tokens))

    def erase(self, target: Erasure) -> Awaitable[int]:
        """In one transaction. The deleted row versions stay in the table files until
        `VACUUM` reclaims them."""
        return self.run(ops.erase, target)


class PostgresContextStore(SQLStore[PostgresConnection]):
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
        ValueError: `session_id` or `owner` is empty or holds a NUL or a lone surrogate.

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

    _dialect = PostgresDialect


async def _fork(
    session_id: str, new_id: str, at: int | None, owner: str | None, conn: AsyncConnection[Any]
) -> None:
    async with conn.transaction():
        await ops.fork(session_id, new_id, at, conn)
        await ops.own_fork(session_id, new_id, owner, conn)
        await checkpoint_sql.copy_postgres(session_id, new_id, conn)
