"""Relevance selection and vector search at 1,000 and 100,000 items.

Descriptions are 8 to 16 words drawn from a 20,000-word vocabulary with
Zipf-like frequencies (a few words are everywhere, most are rare, as in
text); a query is three words of one description. The floors do the same
work by brute force in plain Python, without numpy:

- lexical: score every description with BM25 from its precomputed word
  counts (what an index saves is touching the descriptions that share no
  word with the query);
- semantic and in-memory search: the cosine of the query with every
  precomputed 32-bit vector (`math.sumprod` where Python has it), then
  `heapq.nlargest`;
- SQLite search: read every embedding of the collection with raw `sqlite3`
  and score it the same way.

Embedding the descriptions is set-up, not timed; embedding each query is
timed in ours and in the floor alike. `python -m bench.memory` runs only
these rows (`--quick`: a tenth of the sizes).

The upsert rows store documents one `upsert` call each against one
`add_many` of the same columns, in memory, in SQLite and in PostgreSQL (a
throwaway server, when one can be started): awaited one after another, and
all at once (`asyncio.gather`, which the store commits in a few batches);
target 3x. Memory and SQLite count this process's CPU time (the SQLite
worker thread's included), PostgreSQL wall time (its server does the work).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import operator
import random
import sqlite3
import sys
import tempfile
import time
from array import array
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from bench.harness import Result, compare
from bench.report import table
from pygents_ctx import (
    BM25Selector,
    ContextItem,
    ContextPool,
    HashingEmbedder,
    InMemoryVectorStore,
    PostgresVectorStore,
    SemanticSelector,
    SQLiteVectorStore,
    VectorDocument,
    connect,
    connect_postgres,
)
from pygents_ctx.memory import _table
from pygents_ctx.memory.vectors.sqlite import sqlite_vec_loads

K = 5
_WORD = __import__("re").compile(r"\w+")
_dot = getattr(math, "sumprod", lambda a, b: sum(map(operator.mul, a, b)))


def _vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ren", "to", "sa", "vek", "du", "ne", "por", "il", "zu"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _corpus(size: int, seed: int = 7) -> tuple[list[str], list[str]]:
    """`size` descriptions and 500 queries, the same for every run."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng)
    weights = [1 / (rank + 1) ** 1.07 for rank in range(len(vocabulary))]
    descriptions = [
        " ".join(rng.choices(vocabulary, weights, k=rng.randint(8, 16))) for _ in range(size)
    ]
    queries = [" ".join(rng.sample(rng.choice(descriptions).split(), 3)) for _ in range(500)]
    return descriptions, queries


class _BruteBM25:
    """The lexical floor: every description's BM25 score, from precomputed word counts."""

    def __init__(self, descriptions: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(_WORD.findall(d.casefold())) for d in descriptions]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.average = sum(self.lengths) / len(self.docs)
        self.found: Counter[str] = Counter()
        for counts in self.docs:
            self.found.update(counts.keys())
        self.k1, self.b = k1, b

    def top(self, query: str) -> list[tuple[float, int]]:
        count, k1, b = len(self.docs), self.k1, self.b
        terms = set(_WORD.findall(query.casefold()))
        idf = {
            t: math.log(1 + (count - self.found[t] + 0.5) / (self.found[t] + 0.5)) for t in terms
        }
        scores = []
        for index, counts in enumerate(self.docs):
            norm = k1 * (1 - b + b * self.lengths[index] / self.average)
            score = 0.0
            for term in terms:
                tf = counts.get(term)
                if tf:
                    score += idf[term] * tf * (k1 + 1) / (tf + norm)
            if score:
                scores.append((score, index))
        return heapq.nlargest(K, scores)


def _brute_cosine(rows: Sequence[array[float]], norms: Sequence[float], query: list[float]) -> Any:
    q = array("f", query)
    q_norm = math.sqrt(_dot(q, q))
    return heapq.nlargest(
        K,
        (
            (_dot(row, q) / (n * q_norm), i)
            for i, (row, n) in enumerate(zip(rows, norms, strict=True))
        ),
    )


async def _pool(size: int, descriptions: list[str], selector: Any) -> ContextPool[int]:
    pool: ContextPool[int] = ContextPool(selector=selector)
    for index, text in enumerate(descriptions[:size]):
        await pool.add(ContextItem(index, description=text, id=f"d{index}"))
    await pool.select("warm up")  # builds (and for embeddings, fills) the index
    return pool


def _big(size: int, ops: int, divisor: int) -> int:
    """Fewer operations per sample at 100,000 items, where one takes up to a second."""
    return max(1, ops // divisor) if size > 10_000 else ops


async def _lexical(size: int, ops: int, descriptions: list[str], queries: list[str]) -> Result:
    pool = await _pool(size, descriptions, BM25Selector())
    brute = _BruteBM25(descriptions[:size])

    async def ours(n: int) -> None:
        for query in queries[:n]:
            await pool.select(query, K)

    async def floor(n: int) -> None:
        for query in queries[:n]:
            brute.top(query)

    return await compare(f"pool.select BM25, {size:,} items", ours, floor, _big(size, ops, 4), None)


async def _semantic(
    size: int, ops: int, descriptions: list[str], queries: list[str]
) -> list[Result]:
    embedder = HashingEmbedder()
    pool = await _pool(size, descriptions, SemanticSelector(embedder))
    rows = [array("f", embedder.vector(d)) for d in descriptions[:size]]
    norms = [math.sqrt(_dot(r, r)) for r in rows]

    async def ours(n: int) -> None:
        for query in queries[:n]:
            await pool.select(query, K)

    async def floor(n: int) -> None:
        for query in queries[:n]:
            _brute_cosine(rows, norms, embedder.vector(query))

    name = f"pool.select semantic, {size:,} items"
    results = [await compare(name, ours, floor, _big(size, ops, 20), None)]
    with _without_numpy():
        name = f"pool.select semantic, {size:,}, no numpy"
        results.append(await compare(name, ours, floor, _big(size, ops, 40), None))
    return results


class _without_numpy:
    """Force the plain-Python scoring path, as on a machine without numpy."""

    def __enter__(self) -> None:
        self.saved = _table._numpy
        _table._numpy = None

    def __exit__(self, *exc: object) -> None:
        _table._numpy = self.saved


async def _search(size: int, ops: int, descriptions: list[str], queries: list[str]) -> list[Result]:
    embedder = HashingEmbedder()
    vectors = await embedder.embed(descriptions[:size])
    documents = [
        VectorDocument(f"d{i}", text, {"n": i % 10}, vectors[i])
        for i, text in enumerate(descriptions[:size])
    ]
    rows = [array("f", v) for v in vectors]
    norms = [math.sqrt(_dot(r, r)) for r in rows]
    query_vectors = [embedder.vector(q) for q in queries]

    async def floor(n: int) -> None:
        for vector in query_vectors[:n]:
            _brute_cosine(rows, norms, vector)

    results = [
        await _memory_search(size, ops, documents, query_vectors, floor),
        await _sqlite_search(size, ops, documents, query_vectors),
    ]
    if sqlite_vec_loads():  # only where this Python's sqlite3 can load extensions
        results.append(await _sqlite_search(size, ops, documents, query_vectors, vec=True))
    return results


async def _memory_search(
    size: int,
    ops: int,
    documents: list[VectorDocument],
    query_vectors: list[list[float]],
    floor: Any,
) -> Result:
    store = InMemoryVectorStore()
    await store.create_collection("bench", len(query_vectors[0]))
    await store.add("bench", documents)

    async def ours(n: int) -> None:
        for vector in query_vectors[:n]:
            await store.search("bench", vector, k=K)

    name = f"VectorStore.search memory, {size:,}"
    return await compare(name, ours, floor, _big(size, ops, 20), None)


async def _sqlite_search(
    size: int,
    ops: int,
    documents: list[VectorDocument],
    query_vectors: list[list[float]],
    vec: bool = False,
) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vectors.db"
        async with connect(path) as conn:
            store = SQLiteVectorStore(conn, sqlite_vec=vec)
            await store.create_collection("bench", len(query_vectors[0]))
            for start in range(0, size, 5_000):
                await store.add("bench", documents[start : start + 5_000])
            raw = sqlite3.connect(path)

            async def ours(n: int) -> None:
                for vector in query_vectors[:n]:
                    await store.search("bench", vector, k=K)

            async def floor(n: int) -> None:
                for vector in query_vectors[:n]:
                    q = array("f", vector)
                    q_norm = math.sqrt(_dot(q, q))
                    scored = []
                    for doc_id, blob, norm in raw.execute(
                        "SELECT id, embedding, norm FROM pygents_vectors WHERE collection = ?",
                        ("bench",),
                    ):
                        row = array("f")
                        row.frombytes(blob)
                        scored.append((_dot(row, q) / (norm * q_norm), doc_id))
                    heapq.nlargest(K, scored)

            name = f"VectorStore.search SQLite{' + sqlite-vec' if vec else ''}, {size:,}"
            try:
                return await compare(name, ours, floor, _big(size, ops // 10 or 1, 10), None)
            finally:
                raw.close()


_UPSERT_DIMENSION = 384


async def _upserts(count: int) -> list[Result]:
    """Storing `count` documents one `upsert` call each, against one `add_many` of them all.

    Both store the same 384-float vectors, texts and metadata, replacing what
    the previous repeat stored; the documents and the columns are built
    beforehand (set-up, as the caller holds them). The ratio is the cost of
    a document stored alone over its share of the bulk load.
    """
    rng = random.Random(11)
    ids = [f"d{i}" for i in range(count)]
    vectors = [[rng.gauss(0, 1) for _ in range(_UPSERT_DIMENSION)] for _ in range(count)]
    texts = [f"note {i}" for i in range(count)]
    metadata = [{"n": i % 10} for i in range(count)]
    documents = [
        VectorDocument(i, t, m, v) for i, t, m, v in zip(ids, texts, metadata, vectors, strict=True)
    ]

    async def rows(store: Any, where: str, cpu: bool = True) -> list[Result]:
        for collection in ("one", "all", "bulk"):
            await store.create_collection(collection, _UPSERT_DIMENSION)

        async def one_by_one(n: int) -> None:
            for document in documents[:n]:
                await store.upsert("one", [document])

        async def all_at_once(n: int) -> None:
            await asyncio.gather(*(store.upsert("all", [document]) for document in documents[:n]))

        async def floor(n: int) -> None:
            await store.add_many(
                "bulk", ids[:n], vectors[:n], texts=texts[:n], metadata=metadata[:n], replace=True
            )

        clock = time.process_time_ns if cpu else time.perf_counter_ns
        name = f"VectorStore.upsert 1 doc/call vs add_many {where}, {count:,}"
        return [
            await compare(f"{name}, awaited in turn", one_by_one, floor, count, 3.0, clock=clock),
            await compare(f"{name}, concurrent", all_at_once, floor, count, 3.0, clock=clock),
        ]

    results = await rows(InMemoryVectorStore(), "memory")
    with tempfile.TemporaryDirectory() as tmp:
        async with connect(Path(tmp) / "upserts.db") as conn:
            results += await rows(SQLiteVectorStore(conn, sqlite_vec=False), "SQLite")
    async with _postgres() as dsn:
        if dsn is not None:
            async with connect_postgres(dsn) as pg:
                results += await rows(PostgresVectorStore(pg), "PostgreSQL", cpu=False)
    return results


@contextlib.asynccontextmanager
async def _postgres() -> AsyncIterator[str | None]:
    """A throwaway PostgreSQL server's DSN, or None (said on stderr) when none can start."""
    from tests import postgres_server

    try:
        server = postgres_server.start()
    except postgres_server.ServerUnavailableError as exc:
        print(f"no PostgreSQL upsert rows: {exc}", file=sys.stderr)
        yield None
        return
    try:
        yield server.dsn
    finally:
        server.stop()


async def selection_and_search(scale: int = 1) -> list[Result]:
    """The selection and vector search rows, at 1,000 and 100,000 items (divided by `scale`)."""
    large = 100_000 // scale
    descriptions, queries = _corpus(large)
    results: list[Result] = []
    for size in (1_000 // scale, large):
        results.append(await _lexical(size, 40, descriptions, queries))
        results += await _semantic(size, 40, descriptions, queries)
        results += await _search(size, 40, descriptions, queries)
    results += await _upserts(2_000 // scale)
    return results


def main() -> None:
    scale = 10 if "--quick" in sys.argv else 1
    print(table(asyncio.run(selection_and_search(scale))))


if __name__ == "__main__":
    main()
