"""Forks that share the stored messages: what a fork costs, and what reading one costs.

`python -m bench --forks` runs it on SQLite and on a throwaway PostgreSQL
server (`tests/postgres_server.py`) and writes bench/out/forks.json (`--quick`:
a tenth of the sizes; `--markdown`: the latest run's table).

- A session of 100,000 messages of 200 characters; `fork(at=50_000)` into a
  new session, 50 times: the median time of one fork, and the storage it adds
  (SQLite: pages of the database file; PostgreSQL: `pg_total_relation_size`
  of the context tables), beside copying the same 50,000 messages into a new
  session (`restore` of a snapshot: what a fork did before); and a fork at
  the end of the history.
- A cold `get_history()` of the fork, beside the same of the copy.
- `rewind(to=25_000)` of a fork, beside the fork itself.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.postgres_scale import Measured, run_and_save
from pygents_ctx import Message, connect_postgres
from pygents_ctx.context.stores import (
    ContextStore,
    PostgresContextStore,
    SessionSnapshot,
    SQLiteContextStore,
    connect,
)

OUT = Path(__file__).parent / "out" / "forks.json"
FORKS = 50
_TABLES = ("pygents_sessions", "pygents_forks", "pygents_messages", "pygents_archive")


def _message(index: int) -> Message:
    role = "user" if index % 2 == 0 else "assistant"
    return Message(role, (f"message {index} " + "lorem ipsum " * 17)[:200])


async def _fill(store: ContextStore, count: int) -> None:
    for start in range(0, count, 10_000):
        await store.append_many(_message(i) for i in range(start, min(count, start + 10_000)))


async def _timed(step: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await step()
    return time.perf_counter() - start


async def _measure(
    backend: str,
    make: Callable[[str], ContextStore],
    size: Callable[[], Awaitable[int]],
    count: int,
) -> list[Measured]:
    at = count // 2
    source = make("source")
    await _fill(source, count)
    before = await size()
    times = []
    for _ in range(FORKS):
        times.append(await _timed(lambda: source.fork(at=at)))
    grown = (await size() - before) / FORKS
    ends = [await _timed(source.fork) for _ in range(5)]
    snapshot = await source.snapshot()
    copy = make("copy")
    kept = SessionSnapshot("copy", snapshot.messages[:at])
    copied = await _timed(lambda: copy.restore(kept))
    rewinds = []
    for _ in range(5):
        other = await source.fork(at=at)
        rewinds.append(await _timed(lambda other=other: other.rewind(at // 2)))
    await source.fork(at=at, session_id="fork")
    reads: dict[str, list[float]] = {"fork": [], "copy": []}
    for _ in range(5):  # turn about, so the machine's noise hits both alike
        for name in reads:
            reads[name].append(await _timed(make(name).get_history))
    took, read, alone = (
        statistics.median(times),
        statistics.median(reads["fork"]),
        statistics.median(reads["copy"]),
    )
    where = f"{backend}, at {at:,} of {count:,}"
    return [
        Measured(
            f"{backend} fork, at {at:,} of {count:,}",
            f"{took * 1e3:.2f} ms",
            f"copy {copied * 1e3:.0f} ms",
            took / copied,
            "< 5 ms",
            took < 0.005,
        ),
        Measured(
            f"{backend} fork at the end ({count:,})",
            f"{statistics.median(ends) * 1e3:.2f} ms",
            "",
            None,
            "",
            None,
        ),
        Measured(
            f"{backend} fork, storage added",
            f"{grown / 1024:.2f} KB",
            "",
            None,
            "< 4 KB",
            grown < 4096,
        ),
        Measured(
            f"get_history of the fork ({where})",
            f"{read * 1e3:.1f} ms",
            f"copy {alone * 1e3:.1f} ms",
            read / alone,
            "<= 1.2x",
            read / alone <= 1.2,
        ),
        Measured(
            f"{backend} rewind of the fork to {at // 2:,}",
            f"{statistics.median(rewinds) * 1e3:.2f} ms",
            "",
            None,
            "",
            None,
        ),
    ]


async def sqlite(count: int) -> list[Measured]:
    with tempfile.TemporaryDirectory() as tmp:
        async with connect(Path(tmp) / "forks.db") as conn:

            async def size() -> int:
                def pages(db: Any) -> int:
                    pages = db.execute("PRAGMA page_count").fetchone()[0]
                    return int(pages * db.execute("PRAGMA page_size").fetchone()[0])

                return await conn.run(pages)

            return await _measure(
                "SQLite", lambda name: SQLiteContextStore(conn, session_id=name), size, count
            )


async def postgres(count: int) -> list[Measured]:
    from tests import postgres_server

    server = postgres_server.start()
    try:
        async with connect_postgres(server.dsn) as conn:

            async def size() -> int:
                async def total(db: Any) -> int:
                    cursor = await db.execute(
                        "SELECT sum(pg_total_relation_size(name::regclass)) "
                        "FROM unnest(%s::text[]) AS name",
                        (list(_TABLES),),
                    )
                    row = await cursor.fetchone()
                    return int(row[0])

                return await conn.run(total)

            return await _measure(
                "PostgreSQL",
                lambda name: PostgresContextStore(conn, session_id=name),
                size,
                count,
            )
    finally:
        server.stop()


async def collect(quick: bool) -> list[Measured]:
    count = 10_000 if quick else 100_000
    return [*await sqlite(count), *await postgres(count)]


def run(about: dict[str, str]) -> None:
    run_and_save(about, collect, OUT)
