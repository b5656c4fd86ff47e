"""PostgreSQL at scale: HNSW beside exact search, and many sessions beside an empty database.

`python -m bench --postgres` runs it on a throwaway server
(`tests/postgres_server.py`) and writes bench/out/postgres.json
(`--quick`: a tenth of the sizes; `--markdown`: the latest run's table).

- Vectors: 200,000 x 384 (clustered around 2,000 centres, as embeddings
  cluster) loaded with `add_many`, then 200 queries (near stored vectors,
  not equal to them) searched exactly and through `index="hnsw"` with the
  defaults (m=16, ef_construction=64) at ef_search 40 (the default) and 100:
  recall@10 of the HNSW results against the exact ones, and each side's p50
  and p99 latency.
- Sessions: 100,000 sessions of 20 messages (put in by SQL, as a long-lived
  deployment would have them), then an append to one session and a cold
  load of one session's history, each timed against the same on a database
  with one session.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pygents_ctx import Message, PostgresVectorStore, connect_postgres
from pygents_ctx.context.stores import PostgresContextStore

OUT = Path(__file__).parent / "out" / "postgres.json"
DIMENSION = 384


@dataclass(frozen=True)
class Measured:
    """One row: what was measured, its value, and what it is compared with."""

    name: str
    value: str
    beside: str
    ratio: float | None
    goal: str
    met: bool | None


def _percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def vectors(dsn: str, count: int, queries: int = 200) -> list[Measured]:
    import numpy as np

    rng = np.random.default_rng(26)
    centres = rng.standard_normal((max(2, count // 100), DIMENSION))
    matrix = centres[rng.integers(0, len(centres), count)] + 0.35 * rng.standard_normal(
        (count, DIMENSION)
    )
    probes = matrix[rng.integers(0, count, queries)] + 0.2 * rng.standard_normal(
        (queries, DIMENSION)
    )
    async with connect_postgres(dsn) as conn:
        exact = PostgresVectorStore(conn)
        await exact.create_collection("bench", DIMENSION)
        start = time.perf_counter()
        for first in range(0, count, 50_000):
            await exact.add_many(
                "bench",
                [f"d{i}" for i in range(first, first + 50_000)][: count - first],
                matrix[first : first + 50_000],
            )
        loaded = time.perf_counter() - start
        await exact._run(lambda db: db.execute("SET maintenance_work_mem = '1GB'"))
        hnsw = PostgresVectorStore(conn, index="hnsw")
        start = time.perf_counter()
        await hnsw.search("bench", probes[0].tolist(), k=10)  # builds the index
        built = time.perf_counter() - start
        size = f"{count:,} x {DIMENSION}"
        rows = [
            Measured(
                f"PostgresVectorStore.add_many, {size}", f"{loaded:.1f} s", "", None, "", None
            ),
            Measured(f"HNSW index build, {size}", f"{built:.1f} s", "", None, "", None),
        ]
        for ef_search in (40, 100):
            searcher = PostgresVectorStore(conn, index="hnsw", ef_search=ef_search)
            rows += await _recall_and_latency(
                exact, searcher, probes, f"{size}, ef_search={ef_search}"
            )
    return rows


async def _recall_and_latency(
    exact: PostgresVectorStore, hnsw: PostgresVectorStore, probes: Any, label: str
) -> list[Measured]:
    exact_times, hnsw_times, found = [], [], 0
    for probe in probes.tolist():
        start = time.perf_counter()
        truth = {hit.id for hit in await exact.search("bench", probe, k=10)}
        exact_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        near = {hit.id for hit in await hnsw.search("bench", probe, k=10)}
        hnsw_times.append(time.perf_counter() - start)
        found += len(truth & near)
    recall = found / (10 * len(probes))
    return [
        Measured(f"HNSW recall@10, {label}", f"{recall:.3f}", "exact: 1.000", recall, "", None),
        Measured(
            f"top-10 p50, {label}",
            f"HNSW {statistics.median(hnsw_times) * 1e3:.1f} ms",
            f"exact {statistics.median(exact_times) * 1e3:.1f} ms",
            statistics.median(hnsw_times) / statistics.median(exact_times),
            "",
            None,
        ),
        Measured(
            f"top-10 p99, {label}",
            f"HNSW {_percentile(hnsw_times, 0.99) * 1e3:.1f} ms",
            f"exact {_percentile(exact_times, 0.99) * 1e3:.1f} ms",
            _percentile(hnsw_times, 0.99) / _percentile(exact_times, 0.99),
            "",
            None,
        ),
    ]


_FILL = """
    INSERT INTO pygents_sessions (session_id, next_position, message_count, live_tokens, preview)
    SELECT 'session-' || s, %(per)s, %(per)s, 10 * %(per)s, ''
    FROM generate_series(1, %(sessions)s) AS s;
    INSERT INTO pygents_messages (session_id, position, run_id, tokens, preview, data)
    SELECT 'session-' || s, p, NULL, 10, NULL,
           convert_to('{"role":"user","content":[{"type":"text","text":"message ' || p
                      || ' of session ' || s || ' ' || repeat('x', 150) || '"}]}', 'UTF8')
    FROM generate_series(1, %(sessions)s) AS s, generate_series(0, %(per)s - 1) AS p;
    ANALYZE pygents_sessions;
    ANALYZE pygents_messages
"""


async def sessions(server: Any, count: int, per: int = 20, ops: int = 300) -> list[Measured]:
    """Append and cold-load one session with `count` sessions stored, and with one."""
    import psycopg

    sizes = {"empty": 1, "many": count}
    for database, sessions_held in sizes.items():
        async with await psycopg.AsyncConnection.connect(server.dsn, autocommit=True) as admin:
            await admin.execute(f"CREATE DATABASE {database}")
        async with connect_postgres(server.dsn_for(database)) as conn:

            async def fill(db: Any, held: int = sessions_held) -> None:
                for statement in _FILL.split(";"):
                    await db.execute(statement, {"sessions": held, "per": per})
                await db.commit()

            await conn.run(fill)
    target = {"empty": "session-1", "many": f"session-{count // 2}"}
    loads: dict[str, list[float]] = {"empty": [], "many": []}
    appends: dict[str, list[float]] = {"empty": [], "many": []}
    async with (
        connect_postgres(server.dsn_for("empty")) as empty,
        connect_postgres(server.dsn_for("many")) as many,
    ):
        connections = {"empty": empty, "many": many}
        for _ in range(ops):  # turn about, so the machine's noise hits both alike
            for database, conn in connections.items():
                fresh = PostgresContextStore(conn, session_id=target[database])
                start = time.perf_counter()
                await fresh.get_history()
                loads[database].append(time.perf_counter() - start)
        for index in range(ops):
            for database, conn in connections.items():
                store = PostgresContextStore(conn, session_id=target[database])
                start = time.perf_counter()
                await store.append(Message("user", f"one more message {index}"))
                appends[database].append(time.perf_counter() - start)
    results = []
    for what, samples in (("append one message", appends), ("cold load of one session", loads)):
        mine, alone = statistics.median(samples["many"]), statistics.median(samples["empty"])
        results.append(
            Measured(
                f"{what}, {count:,} sessions x {per}",
                f"{mine * 1e3:.2f} ms",
                f"one session {alone * 1e3:.2f} ms",
                mine / alone,
                "<= 1.2x",
                mine / alone <= 1.2,
            )
        )
    return results


async def collect(quick: bool) -> list[Measured]:
    from tests import postgres_server

    server = postgres_server.start()
    try:
        rows = await sessions(server, 10_000 if quick else 100_000)
        rows += await vectors(server.dsn, 20_000 if quick else 200_000)
    finally:
        server.stop()
    return rows


def table(rows: list[Measured], markdown: bool = False) -> str:
    if markdown:
        lines = [
            "| measurement | pygents_ctx | beside | ratio | goal |",
            "|---|---:|---:|---:|---|",
        ]
        for r in rows:
            ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
            mark = "" if r.met is None else (" ✓" if r.met else " missed")
            lines.append(f"| {r.name} | {r.value} | {r.beside} | {ratio} | {r.goal}{mark} |")
        return "\n".join(lines)
    lines = []
    for r in rows:
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}x"
        mark = "" if r.met is None else ("  ok" if r.met else "  MISSED")
        lines.append(f"{r.name:<48} {r.value:>16} {r.beside:>24} {ratio:>7}  {r.goal}{mark}")
    return "\n".join(lines)


def run_and_save(
    about: dict[str, str],
    collect: Callable[[bool], Awaitable[list[Measured]]],
    out: Path,
) -> None:
    """`collect` (`--quick` sizes when asked) printed and saved to `out`, or with
    `--markdown` the last saved run printed as a table: what each of these benches does."""
    if "--markdown" in sys.argv:
        saved = json.loads(out.read_text())
        print(f"{saved['date']}, Python {saved['python']}, {saved['machine']}\n")
        print(table([Measured(**r) for r in saved["results"]], markdown=True))
        return
    rows = asyncio.run(collect("--quick" in sys.argv))
    print(table(rows))
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({**about, "results": [asdict(r) for r in rows]}, indent=2))


def run(about: dict[str, str]) -> None:
    run_and_save(about, collect, OUT)
