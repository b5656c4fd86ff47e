"""`SQLiteContextStore`: many sessions in one SQLite file, safe across processes.

Every call runs on the connection's worker thread (see `SQLiteConnection`), so
the event loop never waits on the disk. Writes are single statements or
`BEGIN IMMEDIATE` transactions; SQLite serializes writers across processes, and
positions are taken from a per-session counter inside the writing statement,
so concurrent appenders never collide and never lose a message. A write made
under a lease checks it first in the same transaction (see `SessionLease`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

from pygents_ctx._checks import number
from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores import _search_sql as search_sql
from pygents_ctx.context.stores import _sqlite_ops as ops
from pygents_ctx.context.stores._common import Connecting, now_iso
from pygents_ctx.context.stores._sql_store import Dialect, Ops, SQLStore
from pygents_ctx.context.stores._sqlite_schema import (
    check_synchronous,
    configure,
    migrate,
    open_database,
)
from pygents_ctx.context.stores._worker import SQLiteConnection

if TYPE_CHECKING:
    from pygents_ctx.context.messages import Message
    from pygents_ctx.context.stores._common import Erasure
    from pygents_ctx.context.stores._sqlite_ops import Encoded
    from pygents_ctx.context.stores.base import StoredCheckpoint
    from pygents_ctx.context.stores.search import HistoryHit
    from pygents_ctx.context.usage import UsageRecord

__all__ = ["SQLiteConnection", "SQLiteContextStore", "connect"]

T = TypeVar("T")
Db = sqlite3.Connection
_STALE: Final = -2  # the cache's generation when it must be read again in full


def connect(
    path: str | os.PathLike[str],
    *,
    timeout: float = 5.0,
    synchronous: str = "NORMAL",
    secure_delete: bool = False,
) -> Connecting[SQLiteConnection]:
    """Open the SQLite database at `path` (created if missing), ready for context stores.

    Await the result for the connection, or use it with `async with`, which
    closes the connection at the end. Opening sets WAL mode, foreign keys and
    a busy timeout, and brings the schema up to date.

    Args:
        path: The database file, or `":memory:"` for a private in-memory one.
        timeout: Seconds to wait for another process's write lock before failing.
        synchronous: `"NORMAL"` (default: nothing committed is lost if the
            process dies; a power cut may lose the last commits) or `"FULL"`
            (every commit is synced to disk: slower, survives power loss).
        secure_delete: Overwrite deleted content with zeros (SQLite's
            `secure_delete` pragma), so what `erase` removed cannot be read back
            from the file's free pages; a little more writing per delete.

    Raises:
        TypeError: `path` is not a str or path, `timeout` not a number, or
            `secure_delete` not a bool.
        ValueError: `timeout` is not positive and finite, or `synchronous` is unknown.
        sqlite3.OperationalError: (when awaited) The file cannot be opened: its
            directory is missing, it is a directory, or permissions; the message
            names the path and the cause.
        StoreSchemaError: (when awaited) The file was written by a newer
            pygents_ctx, is not a SQLite database, or is another program's
            database (tables, none of them `pygents_*`): nothing is written to it.

    Examples:
        >>> import asyncio, tempfile, pathlib
        >>> from pygents_ctx import Message
        >>> async def main(path):
        ...     async with connect(path) as conn:
        ...         await SQLiteContextStore(conn, session_id="s").append(Message("user", "Hi"))
        ...     async with connect(path) as conn:  # after a restart
        ...         history = await SQLiteContextStore(conn, session_id="s").get_history()
        ...     return [m.text for m in history]
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     asyncio.run(main(pathlib.Path(tmp) / "ctx.db"))
        ['Hi']
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"connect path must be a str or os.PathLike, not {type(path).__name__}")
    name = os.fspath(path)
    if not isinstance(name, str):
        raise TypeError("connect path must be a text path, not bytes")
    number(timeout, "connect timeout", above=True, fix="a number of seconds")
    level = check_synchronous(synchronous)
    if not isinstance(secure_delete, bool):
        raise TypeError(f"secure_delete must be a bool, not {type(secure_delete).__name__}")

    def opener() -> Db:
        db = open_database(name, timeout)
        try:
            configure(db, level, secure_delete=secure_delete)
            migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    return Connecting(SQLiteConnection._open(name, opener))


class SQLiteDialect(Dialect[SQLiteConnection]):
    """SQLite's way (see `Dialect`): every call a function on the connection's worker
    thread; a write a `BEGIN IMMEDIATE` transaction that checks the lease first (one
    statement alone, unfenced, is its own); the session's `created_at` from this
    process's clock; the search index brought up to date by the search that needs it.
    """

    ops: ClassVar[Ops] = ops
    name = "sqlite"
    stale = _STALE
    connection = SQLiteConnection
    opened_by = "await connect(path)"

    @property
    def place(self) -> str:
        return self.conn.path

    def write(
        self, session_id: str, fence: int | None, work: Callable[[Db], T], alone: bool = False
    ) -> Awaitable[T]:
        """`BEGIN IMMEDIATE`, the lease's check, `work`; `alone`: `work` is one
        statement, run as its own transaction when there is no lease to check."""
        return self.run(ops.write, session_id, fence, work, alone)

    def encode(self, messages: list[Message]) -> list[Encoded]:
        return [ops.encode(message) for message in messages]

    def append(
        self,
        session_id: str,
        known: bool,
        run_id: str | None,
        messages: Iterable[Message],
        fence: int | None,
    ) -> Awaitable[bool]:
        ensure = None if known else now_iso()
        return self.run(ops.append_rows, session_id, ensure, run_id, messages, fence)

    def search(self, session_id: str, query: str, limit: int) -> Awaitable[list[HistoryHit]]:
        """From the FTS5 index, which first catches up, in one short write transaction,
        with the messages written since the last search (appends do not index)."""
        return self.run(_caught_up, partial(search_sql.search_sqlite, session_id, query, limit))

    def messages(
        self, session_id: str, after: int, ids: list[int] | None, limit: int
    ) -> Awaitable[list[HistoryHit]]:
        """In one read transaction (the search index plays no part)."""
        read = partial(search_sql.messages_sqlite, session_id, after, ids, limit)
        return self.run(_read, read)

    def count(self, session_id: str) -> Awaitable[int]:
        sql = "SELECT message_count FROM pygents_sessions WHERE session_id = ?"
        return self.conn.run(partial(ops.scalar, sql=sql, session_id=session_id))

    def token_count(self, session_id: str) -> Awaitable[int]:
        sql = "SELECT live_tokens FROM pygents_sessions WHERE session_id = ?"
        return self.conn.run(partial(ops.scalar, sql=sql, session_id=session_id))

    def replace_prefix(
        self,
        session_id: str,
        known: bool,
        count: int,
        run_id: str | None,
        encoded: list[Encoded],
        expected: list[Message] | None,
        seen_at: Any,
        fence: int | None,
    ) -> Awaitable[None]:
        ensure = None if known else now_iso()
        work = partial(
            ops.replace_prefix, session_id, ensure, count, run_id, encoded, expected, seen_at
        )
        return self.write(session_id, fence, work)

    def fork(
        self, session_id: str, new_id: str, at: int | None, owner: str | None
    ) -> Awaitable[None]:
        work = partial(_fork, session_id, new_id, now_iso(), at, owner)
        return self.conn.run(partial(ops.in_transaction, work=work))

    def restore(
        self,
        session_id: str,
        live: tuple[list[str | None], list[Encoded]],
        archived: tuple[list[str | None], list[Encoded]],
        tokens: tuple[int, int],
        usage: tuple[UsageRecord, ...],
        checkpoints: tuple[StoredCheckpoint, ...],
        fence: int | None,
    ) -> Awaitable[None]:
        rows = [list(zip(*part, strict=True)) for part in (live, archived)]
        work = partial(
            ops.restore, session_id, now_iso(), rows[0], rows[1], tokens, usage, checkpoints
        )
        return self.write(session_id, fence, work)

    def set_tokens(
        self, session_id: str, tokens: tuple[int, int], add: bool, fence: int | None
    ) -> Awaitable[None]:
        sql = ops.ADD_TOKENS if add else ops.SET_TOKENS
        params = (session_id, now_iso(), *tokens)

        def upsert(db: Db) -> None:
            db.execute(sql, params)

        return self.write(session_id, fence, upsert, alone=True)

    def erase(self, target: Erasure) -> Awaitable[int]:
        """In one transaction; the full-text index is merged afterwards (FTS5
        `optimize`), which rewrites it: its cost grows with the whole database's
        messages. Freed pages keep the erased bytes until overwritten unless
        `secure_delete` is on, and the WAL file holds them until a checkpoint."""
        return self.conn.run(partial(ops.in_transaction, work=partial(ops.erase, target)))


class SQLiteContextStore(SQLStore[SQLiteConnection]):
    """One session in a SQLite database: survives restarts, shared safely by processes.

    Many sessions live in one file; several stores can share one connection.
    The session's row is created by its first write, and `created_at` is that
    moment. Messages are stored as JSON, written once and never moved (the
    archive is rows pointing at them), their token counts summed in the
    session's row, so `token_count()` and `count()` are one indexed lookup.

    `get_history()` keeps the messages it has read: a later call reads only
    the rows appended since. `clear`, `clear_run`, `replace_prefix` and
    `restore` (from any process) bump the session's generation, which makes
    every store read the history afresh; so does a session row deleted and
    created again, which starts at a new random generation.

    A store given an `owner` (a user or tenant id) makes its session that
    owner's: its first write creates the row with the owner, or takes a row
    that has none. A session another owner holds is never changed over: that
    first write raises `ValueError` and writes nothing. `fork` gives the fork
    the same owner; `list_sessions(owner=...)` and `erase(owner=...)` find them.

    Args:
        conn: An open connection, from `await connect(path)`.
        session_id: The session's id; a random one when None.
        owner: The user or tenant id the session belongs to, or None.

    Raises:
        TypeError: `conn` is not a `SQLiteConnection`, or `owner` is not a str.
        ValueError: `owner` is empty or holds a NUL or a lone surrogate.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> async def main():
        ...     async with connect(":memory:") as conn:
        ...         store = SQLiteContextStore(conn, session_id="my-session")
        ...         await store.append(Message("user", "Hello"))
        ...         forked = await store.fork()
        ...         return len(await forked.get_history()), forked.session_id != store.session_id
        >>> asyncio.run(main())
        (1, True)
    """

    _dialect = SQLiteDialect


def _read(read: Callable[[Db], T], db: Db) -> T:
    """`read(db)` in a read transaction."""
    return ops.in_transaction(db, work=read, begin="BEGIN")


def _caught_up(read: Callable[[Db], T], db: Db) -> T:
    """`read(db)` in a read transaction, after the search index caught up with the
    rows written since (a write transaction of its own, taken only when behind)."""
    if search_sql.behind_sqlite(db):
        ops.in_transaction(db, work=search_sql.catch_up_sqlite)
    return ops.in_transaction(db, work=read, begin="BEGIN")


def _fork(
    session_id: str, new_id: str, created_at: str, at: int | None, owner: str | None, db: Db
) -> None:
    ops.fork(session_id, new_id, created_at, at, owner, db)
    checkpoint_sql.copy_sqlite(session_id, new_id, db)
