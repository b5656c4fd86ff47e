"""Memory and stores at scale, side by side with what a user would pick instead.

`python -m bench --scale` runs these rows in this interpreter (`--quick`: a
tenth of the sizes; `--markdown`: the latest run's table for guides/performance.md).
Each row runs pygents_ctx and the alternative on the same data, interleaved
(so the machine's noise hits both alike), and prints the medians with their
ratio and the goal the row checks:

- in-memory vector store: `add_many` of 100,000 x 384 float32 vectors
  against copying them into a numpy array with their norms, top-10 search
  against numpy brute force (`matrix @ query / norms`, `argpartition`), and
  the store's retained memory against the raw float32 bytes;
- SQLite vector store without sqlite-vec: loading 100,000 x 384 vectors
  and a top-10 search, against sqlite-vec's `vec0` table where this
  Python's sqlite3 can load extensions; else the load against raw `sqlite3`
  inserting the same blobs into a plain table, and the search against numpy
  brute force over the matrix in memory (the row says which).
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pygents_ctx import InMemoryVectorStore, SQLiteVectorStore, connect
from pygents_ctx.memory.vectors.sqlite import sqlite_vec_loads

OUT = Path(__file__).parent / "out" / "scale.json"
DIMENSION = 384
K = 10
REPEATS = 5


@dataclass(frozen=True)
class Versus:
    """One row: ours and the alternative's median, in `unit`, and the goal it checks."""

    name: str
    ours: float
    theirs: float
    peer: str
    unit: str
    goal: str
    met: bool | None

    @property
    def ratio(self) -> float:
        return self.ours / self.theirs


async def _timed(run: Callable[[], Awaitable[Any]]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        await run()
        return time.perf_counter() - start
    finally:
        gc.enable()


async def interleaved(
    ours: Callable[[], Awaitable[Any]],
    theirs: Callable[[], Awaitable[Any]],
    repeats: int = REPEATS,
    prepare: Callable[[], Awaitable[Any]] | None = None,
) -> tuple[float, float]:
    """The medians (seconds) of `ours()` and `theirs()`, run turn about `repeats` times."""
    mine, other = [], []
    for _ in range(repeats):
        if prepare is not None:
            await prepare()
        other.append(await _timed(theirs))
        if prepare is not None:
            await prepare()
        mine.append(await _timed(ours))
    return statistics.median(mine), statistics.median(other)


async def per_query(
    ours: Callable[[Any], Awaitable[Any]],
    theirs: Callable[[Any], Awaitable[Any]],
    queries: list[Any],
    repeats: int = REPEATS,
) -> tuple[float, float]:
    """The median seconds of one query, ours and theirs timed turn about query by query.

    Alternating at each query (not each batch) keeps a burst of load on the
    machine from landing on one side only.
    """
    mine, other = [], []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for query in queries:
                start = time.perf_counter()
                await theirs(query)
                middle = time.perf_counter()
                await ours(query)
                mine.append(time.perf_counter() - middle)
                other.append(middle - start)
    finally:
        gc.enable()
    return statistics.median(mine), statistics.median(other)


def _data(count: int, queries: int = 20, seed: int = 26) -> tuple[Any, Any, list[str]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((count, DIMENSION), dtype=np.float32)
    probes = rng.standard_normal((queries, DIMENSION), dtype=np.float32)
    return matrix, probes, [f"doc-{i}" for i in range(count)]


def _brute(matrix: Any, norms: Any, query: Any) -> Any:
    import numpy as np

    scores = (matrix @ query) / (norms * np.linalg.norm(query))
    top = np.argpartition(-scores, K)[:K]
    return top[np.argsort(-scores[top])]


async def in_memory_rows(count: int) -> list[Versus]:
    """Loading, searching and holding `count` x 384 vectors in memory, against numpy."""
    import numpy as np

    matrix, probes, ids = _data(count)
    queries = [q.tolist() for q in probes]
    rows = []

    async def load() -> None:
        store = InMemoryVectorStore()
        await store.create_collection("bench", DIMENSION)
        await store.add_many("bench", ids, matrix)

    async def numpy_load() -> None:
        copy = np.array(matrix, dtype=np.float32)
        np.linalg.norm(copy, axis=1)

    ours, theirs = await interleaved(load, numpy_load, repeats=3)
    rows.append(
        Versus(
            f"in-memory store: add_many {count:,} x {DIMENSION}",
            ours,
            theirs,
            "numpy array + norms",
            "s",
            "< 2 s",
            ours < 2.0,
        )
    )

    rows.append(await _search_row(matrix, queries, ids))
    rows.append(await _memory_row(matrix, ids))
    return rows


async def _search_row(matrix: Any, queries: list[list[float]], ids: list[str]) -> Versus:
    import numpy as np

    store = InMemoryVectorStore()
    await store.create_collection("bench", DIMENSION)
    await store.add_many("bench", ids, matrix)
    norms = np.linalg.norm(matrix, axis=1)

    async def search(query: list[float]) -> None:
        await store.search("bench", query, k=K)

    async def numpy_search(query: list[float]) -> None:
        _brute(matrix, norms, np.asarray(query, dtype=np.float32))

    ours, theirs = await per_query(search, numpy_search, queries)
    return Versus(
        f"in-memory store: top-{K} search, {len(ids):,}",
        ours,
        theirs,
        "numpy brute force",
        "s",
        "<= 1.2x",
        ours / theirs <= 1.2,
    )


async def _memory_row(matrix: Any, ids: list[str]) -> Versus:
    """What the store retains for the vectors and their ids, against their float32 bytes."""
    gc.collect()
    tracemalloc.start()
    try:
        store = InMemoryVectorStore()
        await store.create_collection("bench", DIMENSION)
        before = tracemalloc.get_traced_memory()[0]
        # The ids are made inside the measurement: the store keeps them.
        await store.add_many("bench", [f"doc-{i}" for i in range(len(ids))], matrix)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    raw = matrix.nbytes
    return Versus(
        f"in-memory store: memory held, {len(ids):,} x {DIMENSION} (ids included)",
        held / 2**20,
        raw / 2**20,
        "raw float32 data",
        "MiB",
        "<= 1.2x",
        held / raw <= 1.2,
    )


async def sqlite_rows(count: int) -> list[Versus]:
    """Storing and searching `count` x 384 vectors in SQLite, against `vec0` or numpy."""
    import numpy as np

    matrix, probes, ids = _data(count)
    queries = [q.tolist() for q in probes]
    vec = sqlite_vec_loads()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        made = 0

        async def fresh_path() -> None:
            nonlocal made
            made += 1

        async def load() -> None:
            async with connect(Path(tmp) / f"ours-{made}.db") as conn:
                store = SQLiteVectorStore(conn, sqlite_vec=False)
                await store.create_collection("bench", DIMENSION)
                await store.add_many("bench", ids, matrix)

        async def peer_load() -> None:
            if vec:
                _vec0_load(Path(tmp) / f"vec0-{made}.db", matrix)
            else:
                _raw_load(Path(tmp) / f"raw-{made}.db", matrix)

        peer = "sqlite-vec vec0" if vec else "raw sqlite3 executemany (no sqlite-vec here)"
        ours, theirs = await interleaved(load, peer_load, repeats=3, prepare=fresh_path)
        rows.append(
            Versus(
                f"SQLite store: add_many {count:,} x {DIMENSION}",
                ours,
                theirs,
                peer,
                "s",
                "< 5 s",
                ours < 5.0,
            )
        )
        async with connect(Path(tmp) / f"ours-{made}.db") as conn:
            store = SQLiteVectorStore(conn, sqlite_vec=False)
            await store.search("bench", queries[0], k=K)  # builds the matrix once
            norms = np.linalg.norm(matrix, axis=1)
            vec0 = _vec0_open(Path(tmp) / f"vec0-{made}.db") if vec else None

            async def search(query: list[float]) -> None:
                await store.search("bench", query, k=K)

            async def peer_search(query: list[float]) -> None:
                if vec0 is not None:
                    _vec0_search(vec0, query)
                else:
                    _brute(matrix, norms, np.asarray(query, dtype=np.float32))

            ours, theirs = await per_query(search, peer_search, queries)
            peer = "sqlite-vec vec0 KNN" if vec else "numpy brute force (sqlite-vec cannot load)"
            rows.append(
                Versus(
                    f"SQLite store: top-{K} search, {count:,} (no sqlite-vec)",
                    ours,
                    theirs,
                    peer,
                    "s",
                    "< 50 ms" + (", <= vec0" if vec else ""),
                    ours < 0.05 and (not vec or ours <= theirs),
                )
            )
    return rows


def _vec0_open(path: Path) -> Any:
    import sqlite3

    import sqlite_vec  # type: ignore[import-not-found]

    db = sqlite3.connect(path)
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    db.enable_load_extension(False)
    return db


def _vec0_load(path: Path, matrix: Any) -> None:
    db = _vec0_open(path)
    with db:
        db.execute(
            "CREATE VIRTUAL TABLE v USING vec0("
            f"embedding float[{DIMENSION}] distance_metric=cosine)"
        )
        db.executemany(
            "INSERT INTO v (rowid, embedding) VALUES (?, ?)",
            ((i + 1, row.tobytes()) for i, row in enumerate(matrix)),
        )
    db.close()


def _raw_load(path: Path, matrix: Any) -> None:
    """The floor where sqlite-vec cannot load: the blobs into a plain table, one executemany."""
    import sqlite3

    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE v (id TEXT PRIMARY KEY, embedding BLOB NOT NULL)")
        db.executemany(
            "INSERT INTO v (id, embedding) VALUES (?, ?)",
            ((f"doc-{i}", row.tobytes()) for i, row in enumerate(matrix)),
        )
    db.close()


def _vec0_search(db: Any, query: list[float]) -> list[Any]:
    from array import array

    return db.execute(
        "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance",
        (array("f", query).tobytes(), K),
    ).fetchall()


async def collect(quick: bool) -> list[Versus]:
    count = 10_000 if quick else 100_000
    return [*await in_memory_rows(count), *await sqlite_rows(count)]


def _value(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1e3:,.2f} ms" if value < 1 else f"{value:,.2f} s"
    return f"{value:,.1f} {unit}"


def table(rows: list[Versus], markdown: bool = False) -> str:
    """The rows as text (or a markdown table), with the ratio and the goal."""
    if markdown:
        lines = [
            "| workload | pygents_ctx | instead | what | ratio | goal |",
            "|---|---:|---:|---|---:|---|",
        ]
        for r in rows:
            mark = "" if r.met is None else (" ✓" if r.met else " missed")
            lines.append(
                f"| {r.name} | {_value(r.ours, r.unit)} | {_value(r.theirs, r.unit)} | "
                f"{r.peer} | {r.ratio:.2f}x | {r.goal}{mark} |"
            )
        return "\n".join(lines)
    lines = [f"{'workload':<58} {'ours':>11} {'instead':>11} {'ratio':>7}  goal"]
    for r in rows:
        mark = "" if r.met is None else ("  ok" if r.met else "  MISSED")
        lines.append(
            f"{r.name:<58} {_value(r.ours, r.unit):>11} {_value(r.theirs, r.unit):>11} "
            f"{r.ratio:>6.2f}x  {r.goal}{mark}   ({r.peer})"
        )
    return "\n".join(lines)


def run(
    about: dict[str, str],
    collect: Callable[[bool], Awaitable[list[Versus]]],
    out: Path,
) -> None:
    """Run `collect`'s rows and save them to `out` (or print the saved table with `--markdown`)."""
    if "--markdown" in sys.argv:
        saved = json.loads(out.read_text())
        print(f"{saved['date']}, Python {saved['python']}, {saved['machine']}\n")
        print(table([Versus(**r) for r in saved["results"]], markdown=True))
        return
    rows = asyncio.run(collect("--quick" in sys.argv))
    print(table(rows))
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({**about, "results": [asdict(r) for r in rows]}, indent=2))
