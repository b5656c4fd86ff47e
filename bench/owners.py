"""Listing one owner's sessions among a million: `list_sessions(owner=...)`.

`python -m bench --owners` runs it on SQLite and on a throwaway PostgreSQL
server (`tests/postgres_server.py`) and writes bench/out/owners.json (`--quick`:
100,000 sessions; `--markdown`: the latest run's table).

The session rows are made with SQL (a recursive CTE on SQLite,
`generate_series` on PostgreSQL): 1,000,000 sessions of 10,000 owners, 100
each, created over a year. Then `list_sessions(owner=...)` of 50 owners picked
at random, through the store, each the median of its runs: the goal is under
10 ms. Beside it: `erase(owner=...)` of one owner's 100 (empty) sessions.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.postgres_scale import Measured, run_and_save
from pygents_ctx import connect_postgres
from pygents_ctx.context.stores import (
    ContextStore,
    PostgresContextStore,
    SQLiteContextStore,
    connect,
)

OUT = Path(__file__).parent / "out" / "owners.json"
OWNERS = 10_000
PICKED = 50

_SQLITE_FILL = """
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
    INSERT INTO pygents_sessions (session_id, created_at, owner)
    SELECT printf('s%07d', i),
           strftime('%Y-%m-%dT%H:%M:%f000+00:00', '2026-01-01',
                    '+' || (i % 31536000) || ' seconds'),
           printf('owner-%05d', i % ?)
    FROM n
"""
_POSTGRES_FILL = """
    INSERT INTO pygents_sessions (session_id, created_at, owner)
    SELECT 's' || lpad(i::text, 7, '0'),
           timestamptz '2026-01-01' + (i %% 31536000) * interval '1 second',
           'owner-' || lpad((i %% %s)::text, 5, '0')
    FROM generate_series(0, %s - 1) AS i
"""


async def _measure(backend: str, store: ContextStore, count: int, filled: float) -> list[Measured]:
    picked = random.Random(7).sample(range(OWNERS), PICKED)
    times = []
    for owner in picked:
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            found = await store.list_sessions(owner=f"owner-{owner:05d}")
            runs.append(time.perf_counter() - start)
        assert len(found) == count // OWNERS, len(found)
        times.append(statistics.median(runs))
    start = time.perf_counter()
    erased = await store.erase(owner=f"owner-{picked[0]:05d}")
    took = time.perf_counter() - start
    assert erased == count // OWNERS
    listed = statistics.median(times)
    return [
        Measured(
            f"{backend} list_sessions(owner=) among {count:,}",
            f"{listed * 1e3:.2f} ms",
            f"p max {max(times) * 1e3:.2f} ms",
            None,
            "< 10 ms",
            max(times) < 0.010,
        ),
        Measured(
            f"{backend} erase(owner=) of {count // OWNERS} sessions",
            f"{took * 1e3:.1f} ms",
            f"fill {filled:.1f} s",
            None,
            "",
            None,
        ),
    ]


async def sqlite(count: int) -> list[Measured]:
    with tempfile.TemporaryDirectory() as tmp:
        async with connect(Path(tmp) / "owners.db") as conn:

            def fill(db: Any) -> None:
                db.execute("BEGIN")
                db.execute(_SQLITE_FILL, (count, OWNERS))
                db.execute("COMMIT")
                db.execute("ANALYZE")

            start = time.perf_counter()
            await conn.run(fill)
            filled = time.perf_counter() - start
            return await _measure("SQLite", SQLiteContextStore(conn), count, filled)


async def postgres(count: int) -> list[Measured]:
    from tests import postgres_server

    server = postgres_server.start()
    try:
        async with connect_postgres(server.dsn) as conn:

            async def fill(db: Any) -> None:
                await db.execute(_POSTGRES_FILL, (OWNERS, count))
                await db.execute("ANALYZE pygents_sessions")

            start = time.perf_counter()
            await conn.run(fill)
            filled = time.perf_counter() - start
            return await _measure("PostgreSQL", PostgresContextStore(conn), count, filled)
    finally:
        server.stop()


async def collect(quick: bool) -> list[Measured]:
    count = 100_000 if quick else 1_000_000
    return [*await sqlite(count), *await postgres(count)]


def run(about: dict[str, str]) -> None:
    run_and_save(about, collect, OUT)
