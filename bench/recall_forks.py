"""A fork's first semantic search: what `SemanticRecall` embeds and how long it takes.

`python -m bench --recall-forks` runs it on SQLite (a temporary file) and
writes bench/out/recall_forks.json (`--quick`: a tenth of the size;
`--markdown`: the latest run's table).

The session: `COUNT` messages of `bench/search.py`'s conversation, all but
the newest archived by compactions as `AutoCompactStore` does, indexed by a
`SemanticRecall` over a `SQLiteVectorStore` on the same connection. It is
forked at its end and the fork gets a turn's 4 new messages. Then the
fork's first fused search, with its catch-up: the embedder's calls and the
texts it embedded, and the time, beside the same search by a recall that
indexes the fork from scratch (another collection prefix, the same
vectors' database: what every fork's first search did before the fork read
its source's vectors). Then the median of 50 fused searches of the fork,
both ways: the shared index searches two collections, the fresh one one.
The embedder is `bench/search.py`'s `ParaphraseEmbedder` (word hashing, no
model): with a real model each call is a request, and the texts are what a
provider bills.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.postgres_scale import Measured, run_and_save
from bench.search import ParaphraseEmbedder, _fill, conversation
from pygents_ctx import Message, SemanticRecall, SQLiteVectorStore
from pygents_ctx.context.stores import ContextStore, SQLiteContextStore, connect

OUT = Path(__file__).parent / "out" / "recall_forks.json"
COUNT = 10_000
FACTS = 50


class CountingEmbedder(ParaphraseEmbedder):
    """`ParaphraseEmbedder`, counting its calls and the texts they embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts += len(texts)
        return await super().embed(texts)


async def _first_and_later(
    recall: SemanticRecall, embedder: CountingEmbedder, fork: ContextStore, questions: list[str]
) -> tuple[float, int, int, float]:
    """The first search's seconds, embed calls and texts; then the later searches' p50."""
    embedder.calls = embedder.texts = 0
    start = time.perf_counter()
    await recall.search(fork, questions[0])
    first = time.perf_counter() - start
    calls, texts = embedder.calls, embedder.texts
    times = []
    for question in questions[1:]:
        start = time.perf_counter()
        await recall.search(fork, question)
        times.append(time.perf_counter() - start)
    return first, calls - 1, texts - 1, statistics.median(times)  # less the query's own call


async def collect(quick: bool) -> list[Measured]:
    count = COUNT // 10 if quick else COUNT
    messages, planted = conversation(count, FACTS)
    questions = [paraphrase for _, _, paraphrase in planted]
    with tempfile.TemporaryDirectory() as directory:
        async with connect(Path(directory) / "recall.db") as conn:
            source = SQLiteContextStore(conn, session_id="source")
            await _fill(source, messages)
            vectors = SQLiteVectorStore(conn)
            embedder = CountingEmbedder()
            recall = SemanticRecall(vectors, embedder)
            indexed = await recall.catch_up(source)
            fork = await source.fork()
            await fork.append_many(
                Message("user" if i % 2 == 0 else "assistant", f"The fork's turn {i}: noted.")
                for i in range(4)
            )
            shared = await _first_and_later(recall, embedder, fork, questions)
            fresh_embedder = CountingEmbedder()
            fresh = SemanticRecall(vectors, fresh_embedder, collection="fresh")
            scratch = await _first_and_later(fresh, fresh_embedder, fork, questions)
    label = f"SQLite, a fork of an indexed session of {indexed:,} messages + 4 new"
    return [
        Measured(
            f"{label}: first search, texts embedded",
            f"{shared[2]:,} in {shared[1]} call(s)",
            f"from scratch {scratch[2]:,} in {scratch[1]} calls",
            None,
            "the 4 new only",
            shared[2] == 4,
        ),
        Measured(
            f"{label}: first search (catch-up included)",
            f"{shared[0] * 1e3:.1f} ms",
            f"from scratch {scratch[0] * 1e3:.1f} ms",
            scratch[0] / shared[0],
            "",
            None,
        ),
        Measured(
            f"{label}: later fused searches, p50",
            f"{shared[3] * 1e3:.2f} ms",
            f"from scratch {scratch[3] * 1e3:.2f} ms",
            scratch[3] / shared[3],
            "",
            None,
        ),
    ]


def run(about: dict[str, str]) -> None:
    run_and_save(about, collect, OUT)
