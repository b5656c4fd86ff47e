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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pygents_ctx.context.messages import Message, ToolResultBlock
from pygents_ctx.context.stores import _decisions_sql as decisions_sql
from pygents_ctx.context.stores import _journal_sql as journal_sql
from pygents_ctx.context.stores import _lease_sql as lease_sql
from pygents_ctx.context.stores import _paged as paged
from pygents_ctx.context.stores import _search_sql as search_sql
from pygents_ctx.context.stores import _sqlite_ops as ops
from pygents_ctx.context.stores import _usage_sql as usage_sql
from pygents_ctx.context.stores._common import (
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
    now_iso,
    require_run_id,
)
from pygents_ctx.context.stores._paged import check_batch, iter_pages
from pygents_ctx.context.stores._sqlite_schema import (
    check_synchronous,
    configure,
    migrate,
    open_database,
)
from pygents_ctx.context.stores._worker import SQLiteConnection
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

if TYPE_CHECKING:
    from collections.abc import Hashable

    from pygents_ctx.context.stores.lease import Fence

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
        TypeError: `path` is not a str or path, or `secure_delete` is not a bool.
        ValueError: `timeout` is not a positive number, or `synchronous` is unknown.
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
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
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


class SQLiteContextStore(ContextStore):
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
        ValueError: `owner` is empty or holds a NUL.

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

    def __init__(
        self, conn: SQLiteConnection, *, session_id: str | None = None, owner: str | None = None
    ) -> None:
        if not isinstance(conn, SQLiteConnection):
            raise TypeError(
                "SQLiteContextStore needs the connection from `await connect(path)`, "
                f"not {type(conn).__name__}"
            )
        self._conn = conn
        self._session_id = None if session_id is None else check_session_id(session_id)
        self._owner = check_owner(owner)
        self._claimed = owner is None  # whether the session's row is known to be the owner's
        self._ready = False  # whether this store knows the session's row exists
        self._cache = HistoryCache(_STALE)

    def __repr__(self) -> str:
        return f"SQLiteContextStore({self._conn.path!r}, session_id={self.session_id!r})"

    @property
    def connection(self) -> SQLiteConnection:
        """The connection this store runs on."""
        return self._conn

    def _ensure(self) -> str | None:
        return None if self._ready else now_iso()

    async def _write(
        self, work: Callable[[Db], T], *, ensures: bool = False, alone: bool = False
    ) -> T:
        """`work` as one write to the session (see `ops.write`), fenced by a lease held here."""
        fence = self._fence()
        result = await self._run_write(
            fence, partial(ops.write, self.session_id, _token(fence), work, alone)
        )
        if ensures:
            self._ready = True
        return result

    async def _claim(self) -> None:
        """Before the first write of a store with an owner: make the session that owner's."""
        if self._claimed or self._owner is None:
            return
        held = await self._conn.run(partial(ops.claim, self.session_id, self._owner, now_iso()))
        if held != self._owner:
            raise ValueError(
                f"session {self.session_id!r} belongs to owner {held!r}, not {self._owner!r}: "
                f"open it with owner={held!r}, or use another session_id"
            )
        self._claimed = self._ready = True

    async def _run_write(self, fence: Fence | None, call: Callable[[Db], T]) -> T:
        await self._claim()
        if fence is None:
            return await self._conn.run(call)
        return await fenced(fence, self._conn.run(call))

    # -- messages -----------------------------------------------------------

    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        """Add `message` at the end of the history: one INSERT, its own transaction.

        Under a lease (see `lease()`), one `BEGIN IMMEDIATE` transaction that
        checks the lease, then inserts.

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

        The messages are encoded and inserted as they are read, on the
        database's thread, so memory holds one at a time however many there
        are (an iterator is read there too).

        Raises:
            TypeError: Something in `messages` is not a `Message`, or holds a
                value JSON cannot hold (nothing is added).
        """
        run = check_run_id(run_id)
        await self._append(checked_messages(messages), run)

    async def _append(self, messages: Iterable[Message], run_id: str | None) -> None:
        fence = self._fence()
        work = partial(
            ops.append_rows, self.session_id, self._ensure(), run_id, messages, _token(fence)
        )
        if await self._run_write(fence, work):
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
        return self._conn.run(partial(paged.sqlite_page, self.session_id, table, key, after, limit))

    async def search(self, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """The best matches for `query` in the archive and the live history, from the
        FTS5 index (see `ContextStore.search`); a hit's `id` is its data row's id.

        Appends do not index: the index first catches up, in one short write
        transaction, with the messages written since the last search.
        """
        query, limit = check_search(query, limit)
        read = partial(search_sql.search_sqlite, self.session_id, query, limit)
        return await self._conn.run(partial(_caught_up, read))

    async def _live_ids(self, count: int) -> list[int] | None:
        return await self._conn.run(partial(search_sql.live_ids_sqlite, self.session_id, count))

    async def count(self) -> int:
        """The number of messages in the live history (a stored counter)."""
        sql = "SELECT message_count FROM pygents_sessions WHERE session_id = ?"
        return await self._conn.run(partial(ops.scalar, sql=sql, session_id=self.session_id))

    async def token_count(self) -> int:
        """The total token count of the live history (a stored running sum)."""
        sql = "SELECT live_tokens FROM pygents_sessions WHERE session_id = ?"
        return await self._conn.run(partial(ops.scalar, sql=sql, session_id=self.session_id))

    async def clear(self) -> None:
        """Remove every message, live and archived, in one transaction; token usage stays."""
        self._cache.forget()
        await self._write(partial(ops.clear, self.session_id))

    async def clear_run(self, run_id: str) -> None:
        """Remove the messages appended with `run_id`, live and archived, in one transaction.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = require_run_id(run_id)
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

        The replaced messages move to the archive: their small rows move, their
        stored bytes stay where they were written. With `expected`, the oldest
        `count` messages are compared with it inside the same `BEGIN IMMEDIATE`
        transaction, so no other process can change them between the check and
        the rewrite; when this store's cached history starts with `expected`
        and the session is still at the generation it was read at, they are
        compared with the cache instead of being read back. See
        `ContextStore.replace_prefix`.

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
        rows = [ops.encode(message) for message in batch]
        seen_at = None if wanted is None else self._cached_prefix_generation(wanted)
        self._cache.forget()
        work = partial(
            ops.replace_prefix, self.session_id, self._ensure(), count, run, rows, wanted, seen_at
        )
        await self._write(work, ensures=True)

    def _cached_prefix_generation(self, expected: list[Message]) -> int | None:
        """The generation of the cached history if it starts with `expected`, else None.

        Between two bumps of the generation a session only grows at the end, so
        a cache read at the generation the database still has holds its prefix.
        """
        cache = self._cache
        if cache.generation == _STALE or len(expected) > len(cache.messages):
            return None
        for wanted, cached in zip(expected, cache.messages, strict=False):
            if wanted is not cached and wanted != cached:
                return None
        return int(cache.generation)

    async def fork(
        self, *, session_id: str | None = None, at: int | None = None
    ) -> SQLiteContextStore:
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
        source, created_at = self.session_id, now_iso()

        def work(db: Db) -> None:
            ops.fork(source, new_id, created_at, at, self._owner, db)
            usage_sql.copy_sqlite(source, new_id, db)

        # Not fenced: it writes another session, and only reads this one.
        await self._conn.run(partial(ops.in_transaction, work=work))
        fork = SQLiteContextStore(self._conn, session_id=new_id, owner=self._owner)
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
        return await self._write(partial(ops.rewind, self.session_id, to))

    async def snapshot(self) -> SessionSnapshot:
        """The history and the archive with their run ids, the token usage and usage records.

        One read transaction: a consistent moment, whatever other processes write.
        """
        return await self._conn.run(partial(ops.snapshot, self.session_id))

    async def restore(self, snapshot: SessionSnapshot) -> None:
        """Write `snapshot` into this empty session in one transaction (see `ContextStore.restore`).

        Raises:
            TypeError: `snapshot` is not a `SessionSnapshot`, or a message holds
                a value JSON cannot hold (nothing is written).
            ValueError: The session already holds messages (live or archived);
                nothing is written.
        """
        snapshot = check_snapshot(snapshot)
        live = [(stored.run_id, ops.encode(stored.message)) for stored in snapshot.messages]
        archived = [(stored.run_id, ops.encode(stored.message)) for stored in snapshot.archived]
        tokens = (snapshot.input_tokens, snapshot.output_tokens)
        self._cache.forget()
        work = partial(
            ops.restore, self.session_id, now_iso(), live, archived, tokens, snapshot.usage
        )
        await self._write(work, ensures=True)

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
        await self._tokens(ops.SET_TOKENS, *check_tokens(input_tokens, output_tokens))

    async def add_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Add to the session's recorded token usage, atomically in SQL.

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
        """
        await self._tokens(ops.ADD_TOKENS, *check_tokens(input_tokens, output_tokens))

    async def _tokens(self, sql: str, input_tokens: int, output_tokens: int) -> None:
        params = (self.session_id, now_iso(), input_tokens, output_tokens)

        def write(db: Db) -> None:
            db.execute(sql, params)

        await self._write(write, ensures=True, alone=True)

    async def get_context_tokens(self) -> tuple[int, int]:
        """The session's recorded token usage: `(input_tokens, output_tokens)`."""

        def read(db: Db) -> tuple[int, int]:
            row = db.execute(
                "SELECT input_tokens, output_tokens FROM pygents_sessions WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
            return (0, 0) if row is None else (int(row[0]), int(row[1]))

        return await self._conn.run(read)

    async def record_usage(self, record: UsageRecord) -> None:
        """Keep one model call's usage and add its tokens to the session, in one transaction.

        See `ContextStore.record_usage`.

        Raises:
            TypeError: `record` is not a `UsageRecord`.
        """
        record = check_usage_record(record)
        await self._write(
            partial(usage_sql.record_sqlite, self.session_id, now_iso(), record), ensures=True
        )

    async def get_usage(self, *, run_id: str | None = None) -> list[UsageRecord]:
        """The session's usage records, oldest first; only run `run_id`'s when given.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = None if run_id is None else require_run_id(run_id)
        return await self._conn.run(partial(usage_sql.read_sqlite, self.session_id, target))

    # -- approval decisions (see `ContextStore.record_decision`) -----------------

    async def record_decision(self, call_id: str, decision: ApprovalDecision) -> ApprovalDecision:
        """Keep the decision on `call_id` unless it has one (one transaction); the one kept.

        See `ContextStore.record_decision`.

        Raises:
            TypeError, ValueError, LeaseLostError: As `ContextStore.record_decision` says.
        """
        call_id, decision = check_decision(call_id, decision)
        work = partial(decisions_sql.record_sqlite, self.session_id, now_iso(), call_id, decision)
        return await self._write(work, ensures=True)

    async def get_decisions(self) -> dict[str, ApprovalDecision]:
        """Every decision recorded on this session's tool calls, by call id."""
        return await self._conn.run(partial(decisions_sql.read_sqlite, self.session_id))

    # -- the step journal (see `ContextStore.journal_start`) ----------------------

    async def journal_start(self, call_id: str) -> None:
        """Record that tool call `call_id` starts (one transaction, fenced by a lease held here).

        See `ContextStore.journal_start`.

        Raises:
            TypeError, ValueError, LeaseLostError: As `ContextStore.journal_start` says.
        """
        call_id = check_call_id(call_id)
        await self._write(
            partial(journal_sql.start_sqlite, self.session_id, now_iso(), call_id), ensures=True
        )

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
        await self._write(
            partial(journal_sql.finish_sqlite, self.session_id, now_iso(), call_id, data),
            ensures=True,
        )

    async def get_journal(self, call_ids: Iterable[str]) -> dict[str, ToolResultBlock | None]:
        """The journal of `call_ids`: each recorded call's result, None if it did not finish."""
        ids = tuple(call_ids)
        return await self._conn.run(partial(journal_sql.read_sqlite, self.session_id, ids))

    # -- the lease (see `ContextStore.lease`) ------------------------------------

    @property
    def _lease_scope(self) -> Hashable:
        return ("sqlite", self._conn._database, self.session_id)

    async def _acquire_lease(
        self, owner: str, ttl: float, create: bool
    ) -> tuple[bool, lease_sql.LeaseState]:
        if create:
            await self._claim()
        created_at = now_iso() if create else None
        work = partial(lease_sql.acquire_sqlite, self.session_id, owner, ttl, created_at)
        taken, state = await self._conn.run(work)
        self._ready = self._ready or create
        return taken, state

    async def _renew_lease(self, owner: str, token: int, ttl: float) -> lease_sql.LeaseState | None:
        work = partial(lease_sql.renew_sqlite, self.session_id, owner, token, ttl)
        return await self._conn.run(work)

    async def _release_lease(self, owner: str, token: int) -> None:
        await self._conn.run(partial(lease_sql.release_sqlite, self.session_id, owner, token))

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
        this store's; a store of an erased session reads an empty history after.

        The full-text index is merged afterwards (FTS5 `optimize`), which
        rewrites it: its cost grows with the whole database's messages. Freed
        pages keep the erased bytes until overwritten unless `secure_delete` is
        on, and the WAL file holds them until a checkpoint (see the stores guide).

        Raises:
            ValueError: Neither `owner` nor `session` is given; nothing is erased.
        """
        target = check_erase(owner, session, older_than)
        erased = await self._conn.run(partial(ops.in_transaction, work=partial(ops.erase, target)))
        if erased:
            self._ready = False
            self._claimed = self._owner is None
        return erased


def _token(fence: Fence | None) -> int | None:
    return None if fence is None else fence.token


def _caught_up(read: Callable[[sqlite3.Connection], T], db: sqlite3.Connection) -> T:
    """`read(db)` in a read transaction, after the search index caught up with the
    rows written since (a write transaction of its own, taken only when behind)."""
    if search_sql.behind_sqlite(db):
        ops.in_transaction(db, work=search_sql.catch_up_sqlite)
    return ops.in_transaction(db, work=read, begin="BEGIN")
