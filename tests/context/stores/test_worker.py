"""SQLiteConnection: one worker thread, calls in order, a clear error once closed."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import PygentsError
from pygents_ctx.context.stores import SQLiteConnection, StoreClosedError, connect


async def test_calls_run_in_order_on_one_thread_that_is_not_the_loops(
    conn: SQLiteConnection,
) -> None:
    seen: list[tuple[int, int]] = []

    def record(index: int) -> Any:
        return lambda db: seen.append((index, threading.get_ident()))

    await asyncio.gather(*(conn.run(record(i)) for i in range(20)))

    assert [index for index, _ in seen] == list(range(20))
    assert len({thread for _, thread in seen}) == 1
    assert seen[0][1] != threading.get_ident()


async def test_run_returns_results_and_raises_errors(conn: SQLiteConnection) -> None:
    assert await conn.run(lambda db: db.execute("SELECT 40 + 2").fetchone()[0]) == 42
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        await conn.run(lambda db: db.execute("SELECT * FROM missing"))
    assert await conn.run(lambda db: 1) == 1  # the worker survives an error


async def test_the_connection_uses_wal_foreign_keys_and_a_busy_timeout(db_path: Path) -> None:
    async with connect(db_path, timeout=2.5, synchronous="FULL") as conn:
        pragmas = await conn.run(
            lambda db: [
                db.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")
            ]
        )

    assert pragmas == ["wal", 1, 2500, 2]  # synchronous FULL is 2


async def test_a_closed_connection_gives_a_clear_error(db_path: Path) -> None:
    conn = await connect(db_path)
    await conn.close()
    await conn.close()  # idempotent

    assert conn.closed
    assert "closed" in repr(conn)
    with pytest.raises(StoreClosedError, match=r"is closed; open a new one with `await connect"):
        await conn.run(lambda db: None)
    assert issubclass(StoreClosedError, PygentsError)
    assert issubclass(StoreClosedError, RuntimeError)


async def test_calls_made_before_close_finish_first(db_path: Path) -> None:
    conn = await connect(db_path)
    pending = [conn.run(lambda db, i=i: i) for i in range(5)]
    tasks = [asyncio.ensure_future(call) for call in pending]
    await asyncio.sleep(0)

    await conn.close()

    assert [await task for task in tasks] == [0, 1, 2, 3, 4]


async def test_async_with_connect_closes_the_connection(db_path: Path) -> None:
    async with connect(db_path) as conn:
        assert not conn.closed
        assert conn.path == str(db_path)

    assert conn.closed


async def test_the_connection_itself_works_with_async_with(db_path: Path) -> None:
    async with await connect(db_path) as conn:
        assert await conn.run(lambda db: 7) == 7

    assert conn.closed


async def test_connect_is_a_coroutine_that_can_be_cancelled_or_dropped(db_path: Path) -> None:
    task = asyncio.ensure_future(connect(db_path))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    connect(db_path).close()  # never awaited, closed: no "never awaited" warning


async def test_a_cancelled_call_still_completes_its_work(conn: SQLiteConnection) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_write(db: sqlite3.Connection) -> None:
        started.set()
        release.wait(5)
        db.execute("CREATE TABLE written (x)")

    task = asyncio.ensure_future(conn.run(slow_write))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    release.set()

    with pytest.raises(asyncio.CancelledError):
        await task
    tables = await conn.run(
        lambda db: db.execute("SELECT name FROM sqlite_master WHERE name = 'written'").fetchall()
    )
    assert tables == [("written",)]


def test_one_connection_serves_several_event_loops(db_path: Path) -> None:
    conn = asyncio.run(connect(db_path))
    try:
        assert asyncio.run(conn.run(lambda db: 1)) == 1
        assert asyncio.run(conn.run(lambda db: 2)) == 2
    finally:
        asyncio.run(conn.close())


class BytesPath:
    def __fspath__(self) -> bytes:
        return b"ctx.db"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"path": 42}, TypeError, "path"),
        ({"path": b"ctx.db"}, TypeError, "path"),
        ({"path": BytesPath()}, TypeError, "text path"),
        ({"path": "x.db", "timeout": 0}, ValueError, "timeout"),
        ({"path": "x.db", "timeout": True}, TypeError, "timeout"),
        ({"path": "x.db", "synchronous": "OFF"}, ValueError, "synchronous"),
    ],
)
def test_connect_checks_its_arguments(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        connect(**kwargs)


async def test_a_database_that_cannot_open_raises_on_await(tmp_path: Path) -> None:
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        await connect(tmp_path / "no such dir" / "ctx.db")
