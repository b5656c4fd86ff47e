"""Searching the archive: `ContextStore.search` over 100,000 archived messages.

`python -m bench --search` runs it on SQLite (a temporary file) and on
PostgreSQL (a throwaway server, `tests/postgres_server.py`), and writes
bench/out/search.json (`--quick`: a tenth of the size; `--markdown`: the
latest run's table).

The session: `COUNT` chat messages of about 25 words, drawn from a
vocabulary of common English words and a long tail of rarer ones (Zipf-like,
as chat is), with `FACTS` distinctive facts planted at random depths ("the
door code for the Oslo lab is cobalt-41027"). Everything but the last few
messages is archived by compactions (`replace_prefix`, as `AutoCompactStore`
does). Then each fact is asked for with a question in plain words ("What is
the door code for the Oslo lab?"), stop words and all: the latency of each
search (p50, p99) and recall@5 (the fact among the first five hits).

Semantic recall, on each database with its own vector store: each fact is
asked for again in other words, the place name alone in common ("Which entry
pin belongs to the Oslo laboratory?"), by the store's full-text search and by
`SemanticRecall` (full-text and semantic hits fused) over a
`SQLiteVectorStore` or `PostgresVectorStore` on the same connection. Its
embedder is a stand-in for a real model: it knows the paraphrases' synonyms
(`ParaphraseEmbedder`), so the rows measure the index and the fusion, not a
model's quality. Also timed: embedding the whole session (the first
search's catch-up, in batches), a fused search, and a fused search right
after a turn's 4 new messages (their catch-up included).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.postgres_scale import Measured, run_and_save
from pygents_ctx import (
    HashingEmbedder,
    Message,
    PostgresVectorStore,
    SemanticRecall,
    SQLiteVectorStore,
)
from pygents_ctx.context.stores import (
    ContextStore,
    PostgresContextStore,
    SQLiteContextStore,
    connect,
    connect_postgres,
)

OUT = Path(__file__).parent / "out" / "search.json"
COUNT = 100_000
FACTS = 200
GOAL_MS = 20.0

_COMMON = [
    "the",
    "a",
    "an",
    "is",
    "are",
    "was",
    "were",
    "be",
    "to",
    "of",
    "and",
    "in",
    "that",
    "it",
    "for",
    "on",
    "with",
    "as",
    "at",
    "by",
    "this",
    "from",
    "we",
    "you",
    "i",
    "they",
    "he",
    "she",
    "not",
    "but",
    "or",
    "so",
    "if",
    "can",
    "will",
    "would",
    "should",
    "could",
    "do",
    "did",
    "have",
    "has",
    "had",
    "what",
    "which",
    "who",
    "when",
    "where",
    "how",
    "there",
    "here",
    "then",
    "than",
    "just",
    "also",
    "about",
    "some",
    "any",
    "all",
    "more",
    "most",
    "other",
    "new",
    "good",
    "great",
    "fine",
    "sure",
    "thanks",
    "please",
    "yes",
    "no",
    "ok",
    "let",
    "me",
    "check",
    "think",
    "need",
    "want",
    "know",
    "see",
    "look",
    "get",
    "make",
    "take",
    "send",
    "update",
    "meeting",
    "report",
    "team",
    "plan",
]
_THINGS = ["password", "door code", "budget", "deadline", "account number", "room number"]
_PLACES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Denver", "Quito", "Tallinn", "Porto", "Lima"]
_OBJECTS = ["office", "warehouse", "lab", "server room", "archive", "studio", "garage"]
# The same things in other words, for the paraphrased questions: no word in common.
_OTHER_WORDS = {
    "password": "passphrase",
    "door code": "entry pin",
    "budget": "spending allowance",
    "deadline": "due date",
    "account number": "ledger identifier",
    "room number": "suite identifier",
    "office": "workplace",
    "warehouse": "depot",
    "lab": "laboratory",
    "server room": "machine hall",
    "archive": "records vault",
    "studio": "atelier",
    "garage": "carport",
}


class ParaphraseEmbedder:
    """Word hashing over text whose paraphrased words are put back as the facts say them:
    a deterministic stand-in for an embedding model that knows these synonyms."""

    def __init__(self) -> None:
        self._hashing = HashingEmbedder(256, ngram=0)
        self._back = sorted(
            ((other, said) for said, other in _OTHER_WORDS.items()), key=lambda pair: -len(pair[0])
        )

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._hashing.vector(self._said(text)) for text in texts]

    def _said(self, text: str) -> str:
        text = text.lower()
        for other, said in self._back:
            text = text.replace(other, said)
        return text


def _vocabulary(rng: random.Random, rare: int = 20_000) -> tuple[list[str], list[float]]:
    letters = "bcdfghjklmnprstvwz"
    vowels = "aeiou"
    words = list(_COMMON)
    while len(words) < len(_COMMON) + rare:
        words.append(
            "".join(rng.choice(letters) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))
        )
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf
    return words, weights


def conversation(count: int, facts: int, seed: int = 39) -> tuple[list[Message], list[tuple]]:
    """`count` messages with `facts` planted ones, and (fact text, question) for each."""
    rng = random.Random(seed)
    words, weights = _vocabulary(rng)
    combos = rng.sample([(t, p, o) for t in _THINGS for p in _PLACES for o in _OBJECTS], facts)
    depths = set(rng.sample(range(count - 50), facts))
    planted = []
    messages = []
    for index in range(count):
        role = "user" if index % 2 == 0 else "assistant"
        if index in depths:
            thing, place, obj = combos[len(planted)]
            value = f"{rng.choice(['amber', 'cobalt', 'saffron', 'teal'])}-{rng.randrange(10**5)}"
            text = f"For the record: the {thing} for the {place} {obj} is {value}."
            planted.append(
                (
                    text,
                    f"What is the {thing} for the {place} {obj}?",
                    f"Which {_OTHER_WORDS[thing]} belongs to the {place} {_OTHER_WORDS[obj]}?",
                )
            )
        else:
            picked = rng.choices(words, weights, k=rng.randint(12, 40))
            if rng.random() < 0.3:  # chatter about the same places and things
                picked += [rng.choice(_THINGS), rng.choice(_PLACES), rng.choice(_OBJECTS)]
            rng.shuffle(picked)
            text = " ".join(picked).capitalize() + "."
        messages.append(Message(role, text))
    return messages, planted


async def _fill(store: ContextStore, messages: list[Message]) -> float:
    """Append `messages` in batches, archiving all but the newest as compactions do."""
    start = time.perf_counter()
    for first in range(0, len(messages), 1_000):
        await store.append_many(messages[first : first + 1_000])
        live = await store.count()
        if live > 50:
            await store.replace_prefix(live - 20, [Message("user", "Summary of earlier talk.")])
    return time.perf_counter() - start


async def _measure(
    store: ContextStore, planted: list[tuple[str, str, str]], label: str, filled: float
) -> list[Measured]:
    times, recalled = [], 0
    for _ in range(2):  # the first round warms the caches; the second is timed
        times, recalled = [], 0
        for fact, question, _paraphrase in planted:
            start = time.perf_counter()
            hits = await store.search(question)
            times.append(time.perf_counter() - start)
            recalled += any(hit.message.text == fact for hit in hits)
    archived = len(await store.get_history(include_archived=True)) - await store.count()
    size = f"{archived:,} archived"
    p50, p99 = statistics.median(times) * 1e3, sorted(times)[int(0.99 * len(times))] * 1e3
    recall = recalled / len(planted)
    return [
        Measured(f"{label}: write and archive, {size}", f"{filled:.1f} s", "", None, "", None),
        Measured(
            f"{label}: search p50, {size}",
            f"{p50:.1f} ms",
            f"p99 {p99:.1f} ms",
            None,
            f"< {GOAL_MS:.0f} ms",
            p50 < GOAL_MS,
        ),
        Measured(
            f"{label}: recall@5, {len(planted)} planted facts",
            f"{recall:.3f}",
            "",
            None,
            ">= 0.95",
            recall >= 0.95,
        ),
    ]


async def _semantic(
    store: ContextStore, recall: SemanticRecall, planted: list[tuple[str, str, str]], label: str
) -> list[Measured]:
    """Paraphrased questions: the full-text search alone, then fused with `recall`."""
    archived = len(await store.get_history(include_archived=True)) - await store.count()
    start = time.perf_counter()
    embedded = await recall.catch_up(store)
    indexing = time.perf_counter() - start
    lexical = fused = 0
    times = []
    for fact, _question, paraphrase in planted:
        lexical += any(hit.message.text == fact for hit in await store.search(paraphrase))
        start = time.perf_counter()
        hits = await recall.search(store, paraphrase)
        times.append(time.perf_counter() - start)
        fused += any(hit.message.text == fact for hit in hits)
    after_turn = []
    for index in range(20):
        await store.append_many(
            Message("user" if i % 2 == 0 else "assistant", f"Turn {index} message {i}: noted.")
            for i in range(4)
        )
        start = time.perf_counter()
        await recall.search(store, planted[index % len(planted)][2])
        after_turn.append(time.perf_counter() - start)
    facts = len(planted)
    return [
        Measured(
            f"{label} semantic: embed and index {embedded:,} messages ({archived:,} archived)",
            f"{indexing:.1f} s",
            f"{indexing / embedded * 1e6:.0f} µs a message",
            None,
            "",
            None,
        ),
        Measured(
            f"{label}: recall@5, {facts} paraphrased questions, full-text search",
            f"{lexical / facts:.3f}",
            "",
            None,
            "",
            None,
        ),
        Measured(
            f"{label}: recall@5, {facts} paraphrased questions, fused (SemanticRecall)",
            f"{fused / facts:.3f}",
            "",
            None,
            ">= 0.95",
            fused / facts >= 0.95,
        ),
        Measured(
            f"{label}: fused search p50",
            f"{statistics.median(times) * 1e3:.1f} ms",
            f"p99 {sorted(times)[int(0.99 * len(times))] * 1e3:.1f} ms",
            None,
            "",
            None,
        ),
        Measured(
            f"{label}: fused search after a turn's 4 new messages, p50",
            f"{statistics.median(after_turn) * 1e3:.1f} ms",
            "",
            None,
            "",
            None,
        ),
    ]


async def collect(quick: bool) -> list[Measured]:
    from tests import postgres_server

    count, facts = (COUNT // 10, FACTS // 4) if quick else (COUNT, FACTS)
    messages, planted = conversation(count, facts)
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        async with connect(Path(directory) / "search.db") as conn:
            store = SQLiteContextStore(conn, session_id="bench")
            filled = await _fill(store, messages)
            rows += await _measure(store, planted, "SQLite", filled)
            recall = SemanticRecall(SQLiteVectorStore(conn), ParaphraseEmbedder())
            rows += await _semantic(store, recall, planted, "SQLite")
    server = postgres_server.start()
    try:
        async with connect_postgres(server.dsn) as pg:
            pg_store = PostgresContextStore(pg, session_id="bench")
            filled = await _fill(pg_store, messages)
            await pg.run(lambda db: db.execute("ANALYZE"))
            rows += await _measure(pg_store, planted, "PostgreSQL", filled)
            recall = SemanticRecall(PostgresVectorStore(pg), ParaphraseEmbedder())
            rows += await _semantic(pg_store, recall, planted, "PostgreSQL")
    finally:
        server.stop()
    return rows


def run(about: dict[str, str]) -> None:
    run_and_save(about, collect, OUT)
