"""The thread that owns a SQLite connection: every call runs there, one at a time.

`sqlite3` blocks on disk and on other processes' locks. Running every call on
one dedicated thread keeps the event loop free, serializes the calls (a
`sqlite3.Connection` must not be used by two threads at once) and keeps the
connection on the thread that opened it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from pygents_ctx.context.stores._common import ClosesOnExit
from pygents_ctx.errors import StoreClosedError

if TYPE_CHECKING:
    pass

__all__ = ["SQLiteConnection", "StoreClosedError"]

T = TypeVar("T")
_Job: TypeAlias = tuple[
    Callable[[sqlite3.Connection], Any], asyncio.Future[Any], asyncio.AbstractEventLoop, bool
]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():  # the caller stopped waiting; the work itself is done
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _deliver(job: _Job, ok: bool, value: Any) -> None:
    _, future, loop, _ = job
    with contextlib.suppress(RuntimeError):  # a closed event loop: nobody is waiting
        loop.call_soon_threadsafe(_settle, future, ok, value)


def _serve(opener: Callable[[], sqlite3.Connection], jobs: queue.SimpleQueue[_Job]) -> None:
    job = jobs.get()  # the first job is the probe that reports whether opening worked
    try:
        db = opener()
    except BaseException as exc:
        _deliver(job, False, exc)
        return
    while True:
        fn, _, _, last = job
        try:
            value, ok = fn(db), True
        except BaseException as exc:
            value, ok = exc, False
        _deliver(job, ok, value)
        if last:
            return
        job = jobs.get()


def _close_db(db: sqlite3.Connection) -> None:
    db.close()


def _nothing(db: sqlite3.Connection) -> None:
    return None


class SQLiteConnection(ClosesOnExit):
    """An open SQLite database, driven from one worker thread. Open one with `connect()`.

    Several stores can share a connection; their calls run one at a time, in
    the order they were made. Close it with `await conn.close()` (or use
    `async with connect(path) as conn:`); a call on a closed connection raises
    `StoreClosedError`.

    A call whose caller is cancelled still runs to its end on the worker
    thread: a write is committed or rolled back whole, never half done.
    """

    __slots__ = ("_closed", "_database", "_jobs", "_path")

    def __init__(self, path: str) -> None:
        self._path = path
        # What the database is, for leases: the file (however it was named), or this
        # connection alone for a private in-memory database.
        self._database: object = self if path == ":memory:" else os.path.realpath(path)
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._closed = False

    @classmethod
    async def _open(cls, path: str, opener: Callable[[], sqlite3.Connection]) -> SQLiteConnection:
        conn = cls(path)
        thread = threading.Thread(
            target=_serve, args=(opener, conn._jobs), name=f"pygents-sqlite {path}", daemon=True
        )
        thread.start()
        try:
            await conn.run(_nothing)
        except BaseException:
            conn._closed = True
            raise
        return conn

    @property
    def path(self) -> str:
        """The database path given to `connect()`."""
        return self._path

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<SQLiteConnection {self._path!r} {state}>"

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(db)` on the worker thread, after the calls before it, and return its result.

        `db` is the `sqlite3.Connection` in autocommit mode: start and end your
        own transactions (`BEGIN IMMEDIATE` ... `COMMIT`), and leave none open.

        Raises:
            StoreClosedError: The connection is closed.
        """
        if self._closed:
            raise StoreClosedError(
                f"the SQLite connection to {self._path!r} is closed; "
                f"open a new one with `await connect({self._path!r})`"
            )
        return await self._submit(fn, last=False)

    def _submit(self, fn: Callable[[sqlite3.Connection], T], *, last: bool) -> Awaitable[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, future, loop, last))
        return future

    async def close(self) -> None:
        """Close the database once the calls already made have finished. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._submit(_close_db, last=True)
