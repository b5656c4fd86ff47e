"""The SQLite context store against raw `sqlite3` in one thread.

The floors do the same work with no store around it: encode the message
(`orjson` of `to_dict`), run the INSERT or SELECT on a same-shaped table in
the benchmark's own thread, decode the rows (`from_dict`). What the store adds
is the worker-thread hop per call, the session counters kept by triggers, and
the argument checks. The appends run with WAL and `synchronous=NORMAL`, as
`connect()` sets them, so no commit waits for an fsync.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import orjson

from bench.harness import Result, compare
from pygents_ctx import Message, from_dict, to_dict
from pygents_ctx.context.stores import SQLiteConnection, SQLiteContextStore, connect

_RAW_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS raw_messages (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL,"
    " position INTEGER NOT NULL, data BLOB NOT NULL, UNIQUE (session_id, position))",
    "CREATE TABLE IF NOT EXISTS raw_sessions (session_id TEXT PRIMARY KEY, created_at TEXT,"
    " message_count INTEGER, preview TEXT, input_tokens INTEGER, output_tokens INTEGER)",
)


def _raw(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    for statement in _RAW_SCHEMA:
        db.execute(statement)
    return db


def _message(index: int, size: int = 200) -> Message:
    role = "user" if index % 2 == 0 else "assistant"
    return Message(role, (f"message {index} " + "lorem ipsum " * (size // 12))[:size])


def _nothing(db: sqlite3.Connection) -> None:
    return None


class _RawSession:
    """The floor: one session's rows in a plain table, positions from a Python counter."""

    def __init__(self, db: sqlite3.Connection, session_id: str) -> None:
        self.db, self.session_id, self.position = db, session_id, 0

    def append(self, message: Message) -> None:
        self.db.execute(
            "INSERT INTO raw_messages (session_id, position, data) VALUES (?, ?, ?)",
            (self.session_id, self.position, orjson.dumps(to_dict(message))),
        )
        self.position += 1

    def append_many(self, messages: list[Message]) -> None:
        rows = [
            (self.session_id, self.position + i, orjson.dumps(to_dict(m)))
            for i, m in enumerate(messages)
        ]
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany(
            "INSERT INTO raw_messages (session_id, position, data) VALUES (?, ?, ?)", rows
        )
        self.db.execute("COMMIT")
        self.position += len(rows)

    def history(self, after: int = -1) -> list[Any]:
        rows = self.db.execute(
            "SELECT data FROM raw_messages WHERE session_id = ? AND position > ? ORDER BY position",
            (self.session_id, after),
        ).fetchall()
        return [from_dict(orjson.loads(data)) for (data,) in rows]


async def _appends(conn: SQLiteConnection, db: sqlite3.Connection, ops: int) -> list[Result]:
    store = SQLiteContextStore(conn, session_id="appends")
    raw = _RawSession(db, "appends")
    messages = [_message(i) for i in range(ops)]

    async def ours(n: int) -> None:
        for message in messages[:n]:
            await store.append(message)

    async def floor(n: int) -> None:
        for message in messages[:n]:
            raw.append(message)

    batch = 100
    batches = [messages[i : i + batch] for i in range(0, ops, batch)]

    async def ours_many(n: int) -> None:
        for chunk in batches[: n // batch]:
            await store.append_many(chunk)

    async def floor_many(n: int) -> None:
        for chunk in batches[: n // batch]:
            raw.append_many(chunk)

    async def leased(n: int) -> None:
        # In a task of its own: the lease fences the writes of the code that holds it.
        async def hold() -> None:
            async with store.lease(ttl=300):
                for message in messages[:n]:
                    await store.append(message)

        await asyncio.create_task(hold())

    async def unleased(n: int) -> None:
        async def write() -> None:
            for message in messages[:n]:
                await store.append(message)

        await asyncio.create_task(write())

    async def ours_hop(n: int) -> None:
        for _ in range(n):
            await conn.run(_nothing)

    async def floor_hop(n: int) -> None:
        for _ in range(n):
            _nothing(db)

    return [
        # What every store call pays to keep the loop free: one round trip to the worker.
        await compare("worker round trip, no-op call", ours_hop, floor_hop, ops, None),
        await compare("SQLite append, one message", ours, floor, ops, 5),
        await compare("SQLite append_many, per message", ours_many, floor_many, ops, 3),
        # The floor is the same append with no lease held: the ratio is what fencing costs.
        await compare("SQLite append under a lease, vs without", leased, unleased, ops, 1.5),
    ]


async def _reads(conn: SQLiteConnection, db: sqlite3.Connection, ops: int) -> list[Result]:
    session = "history"
    big = [_message(i, size=4096) for i in range(2000)]
    await SQLiteContextStore(conn, session_id=session).append_many(big)
    raw = _RawSession(db, session)
    raw.append_many(big)

    async def ours_cold(n: int) -> None:
        for _ in range(n):
            await SQLiteContextStore(conn, session_id=session).get_history()

    async def floor_cold(n: int) -> None:
        for _ in range(n):
            raw.history()

    warm = SQLiteContextStore(conn, session_id=session)
    await warm.get_history()
    news = [_message(i) for i in range(2000, 2000 + 7 * ops)]
    cursor = {"ours": 0, "floor": 0}

    async def ours_warm(n: int) -> None:
        for _ in range(n):
            await warm.append(news[cursor["ours"]])
            cursor["ours"] += 1
            await warm.get_history()

    async def floor_warm(n: int) -> None:
        for _ in range(n):
            raw.append(news[cursor["floor"]])
            cursor["floor"] += 1
            raw.history(after=raw.position - 2)

    return [
        await compare("get_history, cold, 2,000 x 4 KB", ours_cold, floor_cold, 3, 2),
        await compare("append + get_history, cached", ours_warm, floor_warm, ops, None),
    ]


async def _sessions(conn: SQLiteConnection, db: sqlite3.Connection) -> Result:
    for index in range(1000):
        store = SQLiteContextStore(conn, session_id=f"session {index}")
        await store.append(_message(index))
        await store.add_context_tokens(index, index)
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO raw_sessions VALUES (?, ?, 1, ?, ?, ?)",
        [(f"session {i}", f"2025-01-01T00:00:{i:06}", "preview", i, i) for i in range(1000)],
    )
    db.execute("COMMIT")
    store = SQLiteContextStore(conn)

    async def ours(n: int) -> None:
        for _ in range(n):
            await store.list_sessions()

    async def floor(n: int) -> None:
        for _ in range(n):
            db.execute("SELECT * FROM raw_sessions ORDER BY created_at DESC").fetchall()

    return await compare("list_sessions, 1,000 sessions", ours, floor, 10, 3)


async def _append_at_size(conn: SQLiteConnection, size: int, ops: int) -> Result:
    small = SQLiteContextStore(conn, session_id="small")
    await small.append_many(_message(i) for i in range(100))
    large = SQLiteContextStore(conn, session_id="large")
    for start in range(0, size, 1000):
        await large.append_many(_message(i) for i in range(start, start + 1000))
    messages = [_message(i) for i in range(ops)]

    async def at_large(n: int) -> None:
        for message in messages[:n]:
            await large.append(message)

    async def at_small(n: int) -> None:
        for message in messages[:n]:
            await small.append(message)

    # The "floor" here is the same append on a 100-message session: O(1) means ~1x.
    return await compare(f"append at {size:,} stored vs at 100", at_large, at_small, ops, 1.5)


async def stores(scale: int = 1) -> list[Result]:
    """Time the SQLite store; `scale` divides the operation counts (10 for --quick)."""
    ops = max(100, 2_000 // scale)
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        db = _raw(folder / "raw.db")
        try:
            async with connect(folder / "ctx.db") as conn:
                results = await _appends(conn, db, ops)
                results += await _reads(conn, db, max(10, ops // 10))
                results.append(await _sessions(conn, db))
            async with connect(folder / "sizes.db") as conn:
                results.append(await _append_at_size(conn, 100_000 // scale, ops))
        finally:
            db.close()
    return results
