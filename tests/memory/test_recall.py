"""`SemanticRecall`: a session's search by meaning, fused with its full-text search,
on the memory, SQLite and PostgreSQL stores alike (the context store and the vector
store on one connection)."""

from __future__ import annotations

import logging
import re
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Assistant,
    ContextConfig,
    HashingEmbedder,
    InMemoryVectorStore,
    Message,
    PostgresVectorStore,
    SemanticRecall,
    SQLiteVectorStore,
    search_history,
)
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SQLiteConnection,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores.postgres import PostgresConnection, PostgresContextStore
from pygents_ctx.context.stores.search import STOP_WORDS, HistoryHit
from pygents_ctx.errors import CollectionNotFoundError
from pygents_ctx.memory.vectors.base import VectorStore
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

# Words that mean the same thing, for `ConceptEmbedder`: the first of each group stands
# for the others.
SYNONYMS = (
    ("gate", "door", "entrance"),
    ("code", "passcode", "pin"),
    ("budget", "spending", "allowance"),
    ("report", "summary", "writeup"),
    ("car", "vehicle", "automobile"),
    ("parked", "left", "stationed"),
)
_CONCEPT = {word: group[0] for group in SYNONYMS for word in group}


class ConceptEmbedder:
    """A deterministic embedder that knows synonyms: each word becomes its group's first
    word, stop words are left out, then the words are hashed (`HashingEmbedder`)."""

    def __init__(self) -> None:
        self.embedded: list[str] = []
        self._hashing = HashingEmbedder(256, ngram=0)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded += texts
        return [self._hashing.vector(self.concepts(text)) for text in texts]

    @staticmethod
    def concepts(text: str) -> str:
        found = re.findall(r"\w+", text.lower())
        return " ".join(_CONCEPT.get(word, word) for word in found if word not in STOP_WORDS)


class BrokenEmbedder(ConceptEmbedder):
    """Fails while `broken` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = True

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.broken:
            raise ConnectionError("the embedding service is down")
        return await super().embed(texts)


@dataclass
class Backend:
    name: str
    conn: SQLiteConnection | PostgresConnection | None
    vectors: VectorStore

    def store(self, session_id: str | None = None, owner: str | None = None) -> ContextStore:
        if isinstance(self.conn, SQLiteConnection):
            return SQLiteContextStore(self.conn, session_id=session_id, owner=owner)
        if isinstance(self.conn, PostgresConnection):
            return PostgresContextStore(self.conn, session_id=session_id, owner=owner)
        return MemoryContextStore(session_id=session_id, owner=owner)


@pytest.fixture
def db(backend: str, request: pytest.FixtureRequest) -> Backend:
    if backend == "sqlite":
        conn = request.getfixturevalue("sqlite_conn")
        return Backend(backend, conn, SQLiteVectorStore(conn))
    if backend == "postgres":
        conn = request.getfixturevalue("pg_conn")
        return Backend(backend, conn, PostgresVectorStore(conn))
    return Backend(backend, None, InMemoryVectorStore())


def recall_for(db: Backend, embedder: Any = None, **options: Any) -> SemanticRecall:
    # A prefix of its own: the PostgreSQL database is shared by the tests.
    options.setdefault("collection", f"recall-{uuid.uuid4().hex[:8]}")
    return SemanticRecall(db.vectors, embedder or ConceptEmbedder(), **options)


def chatter(count: int) -> list[Message]:
    return [
        Message("user" if i % 2 == 0 else "assistant", f"Chatter {i}: the weather and lunch.")
        for i in range(count)
    ]


async def archived_fact(db: Backend, fact: str) -> ContextStore:
    """A session with `fact` among chatter, all but the last 5 messages archived."""
    store = db.store()
    await store.append_many([*chatter(10), Message("user", fact), *chatter(10)])
    await store.replace_prefix(16, [Message("assistant", "Summary: small talk.")])
    return store


async def test_a_question_in_other_words_finds_the_fact_the_full_text_search_misses(
    db: Backend,
) -> None:
    store = await archived_fact(db, "The gate code is 4417.")
    recall = recall_for(db)
    assert await store.search("what is the door passcode?") == []
    hits = await recall.search(store, "what is the door passcode?")
    assert hits[0].message.text == "The gate code is 4417."
    assert hits[0].archived
    # Where the store's own search says the message is.
    (lexical,) = await store.search("gate code 4417")
    assert (hits[0].id, hits[0].position, hits[0].archived) == (
        lexical.id,
        lexical.position,
        lexical.archived,
    )


async def test_a_message_both_searches_find_ranks_first(db: Backend) -> None:
    store = db.store()
    await store.append_many(
        [
            *chatter(4),
            Message("user", "Our spending summary for March is attached."),  # meaning only
            Message("user", "The budget report for March is final."),  # both
            Message("user", "Report cards come home in March."),  # words only: report, march
            *chatter(4),
        ]
    )
    hits = await recall_for(db).search(store, "budget report March", limit=3)
    texts = [hit.message.text for hit in hits]
    assert texts[0] == "The budget report for March is final."
    assert set(texts[1:]) == {
        "Our spending summary for March is attached.",
        "Report cards come home in March.",
    }
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


async def test_indexing_is_lazy_incremental_and_once_per_message(db: Backend) -> None:
    store = await archived_fact(db, "The gate code is 4417.")
    embedder = ConceptEmbedder()
    recall = recall_for(db, embedder, batch_size=4)
    assert embedder.embedded == []  # appending embeds nothing
    assert await recall.catch_up(store) == 22  # 21 messages and the summary
    assert await recall.catch_up(store) == 0
    await store.append(Message("user", "My car is parked on level 3."))
    assert await recall.catch_up(store) == 1
    # Another recall object on the same vectors (another process, a restart) resumes.
    again = SemanticRecall(db.vectors, embedder, collection=recall.collection_of("x")[:-2])
    assert await again.catch_up(store) == 0
    await store.append(Message("user", "Lunch is at noon."))
    hits = await again.search(store, "where did I leave the vehicle?")
    assert hits[0].message.text == "My car is parked on level 3."
    assert len(embedder.embedded) - embedder.embedded.count("where did I leave the vehicle?") == 24
    assert await db.vectors.count(recall.collection_of(store.session_id)) == 24


async def test_indexing_survives_reopening_the_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "recall.db"
    embedder = ConceptEmbedder()
    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="s")
        await store.append_many(chatter(6))
        assert await SemanticRecall(SQLiteVectorStore(conn), embedder).catch_up(store) == 6
    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="s")
        await store.append(Message("user", "The gate code is 4417."))
        recall = SemanticRecall(SQLiteVectorStore(conn), embedder)
        assert await recall.catch_up(store) == 1
        assert (await recall.search(store, "door pin"))[0].message.text.startswith("The gate")
    assert len(embedder.embedded) == 7 + 1  # each message once, and the query


async def test_a_failing_embedder_leaves_the_full_text_hits_and_loses_nothing(
    db: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = await archived_fact(db, "The gate code is 4417.")
    embedder = BrokenEmbedder()
    recall = recall_for(db, embedder)
    with caplog.at_level(logging.WARNING, logger="pygents_ctx"):
        hits = await recall.search(store, "gate code")
    assert [hit.message.text for hit in hits] == ["The gate code is 4417."]
    assert hits == await store.search("gate code")
    assert isinstance(recall.last_error, ConnectionError)
    assert "semantic recall failed" in caplog.text
    assert "the embedding service is down" in caplog.text
    with pytest.raises(ConnectionError):
        await recall.catch_up(store)
    assert await store.count() == 6
    assert len(await store.get_history(include_archived=True)) == 22

    embedder.broken = False
    hits = await recall.search(store, "door passcode")
    assert hits[0].message.text == "The gate code is 4417."
    assert recall.last_error is None


async def test_a_catch_up_broken_off_resumes_without_embedding_anything_twice(
    db: Backend,
) -> None:
    store = db.store()
    await store.append_many(chatter(10))
    embedder = BrokenEmbedder()
    embedder.broken = False
    recall = recall_for(db, embedder, batch_size=3)
    calls = 0
    real = embedder.embed

    async def fails_third(texts: Sequence[str]) -> list[list[float]]:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise TimeoutError("embedding timed out")
        return await real(texts)

    embedder.embed = fails_third  # type: ignore[method-assign]
    with pytest.raises(TimeoutError):
        await recall.catch_up(store)
    assert await db.vectors.count(recall.collection_of(store.session_id)) == 6
    assert await recall.catch_up(store) == 4
    assert sorted(embedder.embedded) == sorted(m.text for m in chatter(10))


async def test_erase_removes_the_sessions_vectors_and_only_them(db: Backend) -> None:
    recall = recall_for(db)
    kept = db.store()
    await kept.append(Message("user", "The budget report is final."))
    gone = db.store(session_id=f"gone-{uuid.uuid4().hex[:6]}")
    await gone.append_many([Message("user", f"canaryzq{i} gate code") for i in range(5)])
    await recall.catch_up(kept)
    await recall.catch_up(gone)

    assert await recall.erase(gone, session=gone.session_id) == 1
    names = {info.name for info in await db.vectors.list_collections()}
    assert recall.collection_of(gone.session_id) not in names
    assert recall.collection_of(kept.session_id) in names
    with pytest.raises(CollectionNotFoundError):
        await db.vectors.count(recall.collection_of(gone.session_id))
    if isinstance(db.conn, SQLiteConnection):
        raw = sqlite3.connect(db.conn.path)
        try:
            rows = raw.execute(
                "SELECT count(*) FROM pygents_vectors WHERE text LIKE '%canaryzq%' "
                "OR id = ? OR collection LIKE ?",
                (gone.session_id, f"%{gone.session_id}%"),
            ).fetchone()
        finally:
            raw.close()
        assert rows == (0,)
    if isinstance(db.conn, PostgresConnection):

        async def leftovers(conn: Any) -> Any:
            cursor = await conn.execute(
                "SELECT count(*) FROM pygents_vectors WHERE text LIKE '%%canaryzq%%' "
                "OR id = %s OR collection LIKE %s",
                (gone.session_id, f"%{gone.session_id}%"),
            )
            return await cursor.fetchone()

        assert await db.conn.run(leftovers) == (0,)
    # Its mark is gone too: a new session of that id is indexed from its start.
    again = db.store(session_id=gone.session_id)
    await again.append(Message("user", "The door pin changed to 9902."))
    assert await recall.catch_up(again) == 1
    assert (await recall.search(kept, "spending summary"))[0].message.text.startswith("The budget")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_erasing_an_owner_drops_the_vectors_of_their_sessions_only(db: Backend) -> None:
    recall = recall_for(db)
    ann = f"ann-{uuid.uuid4().hex[:6]}"
    stores = [db.store(owner=ann), db.store(owner=ann), db.store(owner="bob")]
    for store in stores:
        await store.append(Message("user", "The gate code is 4417."))
        await recall.catch_up(store)
    assert await recall.erase(stores[2], owner=ann) == 2
    names = {info.name for info in await db.vectors.list_collections()}
    assert [recall.collection_of(s.session_id) in names for s in stores] == [False, False, True]


async def test_a_fork_finds_what_it_shares_with_its_source_where_its_own_search_does(
    db: Backend,
) -> None:
    source = await archived_fact(db, "The gate code is 4417.")
    await source.append(Message("user", "My car is parked on level 3."))
    recall = recall_for(db)
    await recall.catch_up(source)
    await source.append(Message("user", "Lunch at noon."))
    fork = await source.fork(at=await source.count() - 1)  # without the lunch
    await fork.append(Message("user", "The fork's budget report."))
    await source.append(Message("user", "The source's spending summary."))

    for query, text in [
        ("door passcode", "The gate code is 4417."),
        ("vehicle", "My car is parked on level 3."),
    ]:
        (hit, *_) = await recall.search(fork, query)
        assert hit.message.text == text
        (own, *_) = await fork.search(text)
        assert (hit.id, hit.position, hit.archived) == (own.id, own.position, own.archived)
    texts = [hit.message.text for hit in await recall.search(fork, "spending summary")]
    assert "The fork's budget report." in texts
    assert "The source's spending summary." not in texts
    texts = [hit.message.text for hit in await recall.search(source, "spending summary")]
    assert "The fork's budget report." not in texts


async def test_a_message_removed_from_the_session_is_not_found_any_more(db: Backend) -> None:
    store = db.store()
    await store.append_many([*chatter(3), Message("user", "The gate code is 4417.")])
    recall = recall_for(db)
    await recall.catch_up(store)
    await store.rewind(3)
    await store.append(Message("user", "My car is parked on level 3."))
    texts = [hit.message.text for hit in await recall.search(store, "door passcode vehicle")]
    assert "The gate code is 4417." not in texts
    assert texts[0] == "My car is parked on level 3."
    # The removed message's vector went with that search: one vector per message held.
    assert await db.vectors.count(recall.collection_of(store.session_id)) == 4


async def test_search_history_uses_the_contexts_recall(db: Backend) -> None:
    store = await archived_fact(db, "The gate code is 4417.")
    plain = ContextConfig(store)
    assert (await search_history("door passcode", context=plain))["search_history"] == []
    context = ContextConfig(store, recall=recall_for(db))
    (first, *_) = (await search_history("door passcode", context=context))["search_history"]
    assert first["text"] == "The gate code is 4417."
    assert first["archived"] is True
    assert set(first) == {"id", "position", "archived", "role", "text"}
    assert context.branch().recall is context.recall


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"vectors": object()}, TypeError, "VectorStore"),
        ({"embedder": object()}, TypeError, "embed(texts)"),
        ({"collection": ""}, ValueError, "collection must not be empty"),
        ({"batch_size": 0}, ValueError, "batch_size must be at least 1"),
        ({"pool": 1.5}, TypeError, "pool must be an int"),
    ],
)
def test_bad_arguments_name_the_fix(options: dict[str, Any], error: type, words: str) -> None:
    arguments: dict[str, Any] = {"vectors": InMemoryVectorStore(), "embedder": ConceptEmbedder()}
    arguments.update(options)
    with pytest.raises(error, match=re.escape(words)):
        SemanticRecall(**arguments)


async def test_a_bad_query_or_recall_is_refused_before_anything_is_read() -> None:
    embedder = ConceptEmbedder()
    recall = SemanticRecall(InMemoryVectorStore(), embedder)
    store = MemoryContextStore([Message("user", "hello")])
    with pytest.raises(ValueError, match="empty"):
        await recall.search(store, "  ")
    with pytest.raises(ValueError, match="between 1 and 100"):
        await recall.search(store, "hello", limit=0)
    assert embedder.embedded == []
    with pytest.raises(TypeError, match="SemanticRecall"):
        ContextConfig(store, recall=object())  # type: ignore[arg-type]


_WORD = st.text("abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8).filter(
    lambda word: word not in STOP_WORDS
)
# Texts of distinct sets of words: the hashing embedder gives "a a" and "a" one direction.
_TEXTS = st.lists(
    st.frozensets(_WORD, min_size=1, max_size=6), min_size=1, max_size=25, unique=True
).map(lambda sets: [" ".join(sorted(words)) for words in sets])


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# SQLite gives the rewound rows' ids to "goat hen" and "ibis jay".
@example(
    texts=["apple bee", "cat dog", "eel fox", "goat hen", "ibis jay"], split=3, rewind=1, archive=0
)
@given(
    texts=_TEXTS,
    split=st.integers(0, 25),
    rewind=st.integers(0, 25),
    archive=st.integers(0, 25),
)
async def test_every_stored_message_is_found_by_its_own_text_after_catch_up(
    backend: str, tmp_path: Path, texts: list[str], split: int, rewind: int, archive: int
) -> None:
    """Indexed in two goes, with a rewind between (SQLite then gives the removed rows'
    ids to the new ones) and a compaction after: each message held is found by its own
    text, and none removed is found."""
    async with connect(tmp_path / f"{uuid.uuid4().hex}.db") as conn:
        db = (
            Backend("sqlite", conn, SQLiteVectorStore(conn))
            if backend == "sqlite"
            else Backend("memory", None, InMemoryVectorStore())
        )
        store = db.store()
        embedder = HashingEmbedder(512, ngram=0)
        recall = SemanticRecall(db.vectors, embedder, batch_size=7)
        first, rest = texts[:split], texts[split:]
        await store.append_many(Message("user", text) for text in first)
        await recall.catch_up(store)
        kept = min(rewind, len(first))
        await store.rewind(kept)
        await store.append_many(Message("user", text) for text in rest)
        await store.replace_prefix(min(archive, await store.count()), [])
        held = [*first[:kept], *rest]
        # The held first: searching a removed one would repair a reused id's vector.
        for text in [*held, *first[kept:]]:
            if not any(embedder.vector(text)):
                continue  # its features cancel out: no direction to find it by
            found = [hit.message.text for hit in await recall.semantic_search(store, text, limit=3)]
            assert (text in found) == (text in held)


async def test_an_assistant_searches_its_sessions_with_its_recall(
    sqlite_conn: SQLiteConnection,
) -> None:
    recall = SemanticRecall(
        SQLiteVectorStore(sqlite_conn), ConceptEmbedder(), collection=f"r-{uuid.uuid4().hex[:8]}"
    )
    earlier = SQLiteContextStore(sqlite_conn, session_id="ann")
    await earlier.append_many(
        [*chatter(10), Message("user", "The gate code is 4417."), *chatter(4)]
    )
    model = ScriptedModel(
        [assistant(tool_call("search_history", query="door passcode")), "It is 4417."]
    )
    helper = Assistant("helper", model=model, tools=[search_history], recall=recall)

    done = await helper.run("What opens the door?", session="ann", store=sqlite_conn)

    assert done.text == "It is 4417."
    found = model.calls[1].messages[-1].tool_results[0].text
    assert "The gate code is 4417." in found  # by meaning: no word of the question is in it
    assert helper.recall is recall


async def test_an_assistant_erases_a_users_sessions_with_their_vectors(
    sqlite_conn: SQLiteConnection,
) -> None:
    collection = f"r-{uuid.uuid4().hex[:8]}"
    vectors = SQLiteVectorStore(sqlite_conn)
    recall = SemanticRecall(vectors, ConceptEmbedder(), collection=collection)
    helper = Assistant("helper", model=ScriptedModel(["Noted.", "Noted."]), recall=recall)
    for user in ("ann", "bob"):
        await helper.run(
            "The gate code is 4417.", session=f"{user}-1", owner=user, store=sqlite_conn
        )
        await recall.catch_up(SQLiteContextStore(sqlite_conn, session_id=f"{user}-1"))

    async def indexed() -> set[str]:
        return {info.name for info in await vectors.list_collections()}

    assert {f"{collection}:ann-1", f"{collection}:bob-1"} <= await indexed()
    with pytest.raises(ValueError, match="owner"):
        await helper.erase(store=sqlite_conn)  # neither owner nor session: nothing goes
    assert f"{collection}:ann-1" in await indexed()

    assert await helper.erase(owner="ann", store=sqlite_conn) == 1

    left = [info.session_id for info in await SQLiteContextStore(sqlite_conn).list_sessions()]
    assert "ann-1" not in left
    assert "bob-1" in left
    assert f"{collection}:ann-1" not in await indexed()  # what store.erase cannot reach
    assert f"{collection}:bob-1" in await indexed()
    bob = SQLiteContextStore(sqlite_conn, session_id="bob-1")
    assert [h.message.text for h in await recall.search(bob, "gate code")][:1] == [
        "The gate code is 4417."
    ]


class CountingEmbedder:
    """A hashing embedder that counts its calls and the texts it embedded."""

    def __init__(self) -> None:
        self.calls = 0
        self.texts: list[str] = []
        self._hashing = HashingEmbedder(256, ngram=0)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts += texts
        return await self._hashing.embed(texts)


def numbered(count: int, start: int = 0, tag: str = "") -> list[Message]:
    """Messages of distinct words: each its number spelt out, and a topic."""
    topics = ("gate code", "budget report", "parked car", "lunch plans", "weather")
    return [
        Message(
            "user" if i % 2 == 0 else "assistant",
            f"{tag} item{i} note{i % 97} {topics[i % len(topics)]} n{i * 7919 % 1000}",
        )
        for i in range(start, start + count)
    ]


QUERIES = ("door passcode item12", "budget report", "where is the parked car", "item998 weather")


async def results(recall: SemanticRecall, store: ContextStore) -> list[list[HistoryHit]]:
    found = []
    for query in QUERIES:
        found.append(await recall.search(store, query, limit=10))
        found.append(await recall.semantic_search(store, query, limit=10))
    return found


async def test_a_fork_embeds_only_its_own_messages_and_finds_what_a_fresh_index_finds(
    db: Backend,
) -> None:
    """A fork of an indexed 1,000-message session, and a fork of that fork: the first
    search embeds the fork's new messages alone, and gives the hits an index of the
    fork made from scratch gives, in the same order, where the fork has them."""
    source = db.store()
    await source.append_many(numbered(1000))
    await source.replace_prefix(100, [Message("assistant", "Summary: the first hundred.")])
    embedder = CountingEmbedder()
    recall = recall_for(db, embedder, batch_size=128)
    assert await recall.catch_up(source) == 1001
    fork = await source.fork(at=800)
    await fork.append_many(numbered(5, 5000, tag="fork"))
    await source.append_many(numbered(20, 6000, tag="source"))  # another branch now
    await recall.catch_up(source)

    embedder.calls, embedder.texts = 0, []
    shared = await results(recall, fork)
    assert sorted(embedder.texts) == sorted(
        [*(m.text for m in numbered(5, 5000, tag="fork")), *QUERIES, *QUERIES]
    )
    assert embedder.calls == 1 + 2 * len(QUERIES)  # one batch of five, and the queries
    fresh = recall_for(db, CountingEmbedder())
    assert shared == await results(fresh, fork)
    held = {hit.id for hit in await fork.messages_with_ids(h.id or 0 for r in shared for h in r)}
    assert {hit.id for ranking in shared for hit in ranking} <= held

    deeper = await fork.fork(at=600)
    await deeper.append_many(numbered(3, 7000, tag="deeper"))
    embedder.texts = []
    shared = await results(recall, deeper)
    assert len(embedder.texts) == 3 + 2 * len(QUERIES)
    assert shared == await results(recall_for(db, CountingEmbedder()), deeper)


async def test_a_fork_keeps_finding_what_its_source_removed_or_erased(db: Backend) -> None:
    """The source rewound below the fork's point and searched (its own removed messages'
    vectors go, unless a fork reads them), then erased: the fork still finds each of
    its messages, only its own."""
    source = db.store(session_id=f"src-{uuid.uuid4().hex[:6]}")
    await source.append_many(numbered(60))
    recall = recall_for(db, CountingEmbedder(), batch_size=16)
    await recall.catch_up(source)
    fork = await source.fork(at=50)
    await fork.append_many(numbered(4, 100, tag="fork"))
    await recall.catch_up(fork)
    await source.rewind(10)
    await source.append_many(numbered(5, 200, tag="source"))
    for store in (source, fork):
        for message in await store.get_history():
            (hit,) = await recall.semantic_search(store, message.text, limit=1)
            assert hit.message == message
    for message in numbered(60)[10:]:  # the source meets the vectors of what it removed
        hits = await recall.semantic_search(source, message.text, limit=1)
        assert [hit.message for hit in hits] != [message]

    async def fork_finds_its_own() -> None:
        history = await fork.get_history()
        for message in history:
            hits = await recall.semantic_search(fork, message.text, limit=3)
            assert hits[0].message == message
            assert {hit.message.text for hit in hits} <= {m.text for m in history}

    await fork_finds_its_own()
    assert await recall.erase(source, session=source.session_id) == 1
    await fork_finds_its_own()


async def test_a_fork_first_searched_after_its_source_dropped_vectors_it_shares(
    db: Backend,
) -> None:
    """The source removes messages the fork shares and its search drops some of their
    vectors before the fork's index reads the source's: the fork embeds what is gone,
    and finds each of its messages."""
    source = db.store()
    await source.append_many(numbered(40))
    embedder = CountingEmbedder()
    recall = recall_for(db, embedder, batch_size=16)
    await recall.catch_up(source)
    fork = await source.fork(at=30)
    await source.rewind(5)
    for message in numbered(40)[5:20]:  # meets (and drops) vectors of removed messages
        await recall.semantic_search(source, message.text, limit=1)
    kept = await db.vectors.count(recall.collection_of(source.session_id))
    assert kept < 40  # dropped some
    dropped = [
        hit.message.text
        for hit in await fork.messages_after(0)
        if await db.vectors.get(recall.collection_of(source.session_id), str(hit.id)) is None
    ]
    embedder.texts = []
    history = await fork.get_history()
    for message in history:
        (hit, *_) = await recall.semantic_search(fork, message.text, limit=2)
        assert hit.message == message
    # What the source dropped was embedded again, and nothing else but the queries. The
    # database stores gave the fork its own copies at the rewind, so it shares nothing
    # any more (`shared_from`), and its index is made whole.
    if db.name != "memory":
        dropped = [message.text for message in history]
    assert sorted(embedder.texts) == sorted([*dropped, *(m.text for m in history)])
    assert 0 < len(dropped) < 30 if db.name == "memory" else len(dropped) == 30


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 6)),
        st.tuples(st.just("fork"), st.integers(0, 3), st.integers(0, 30)),
        st.tuples(st.just("rewind"), st.integers(0, 3), st.integers(0, 30)),
        st.tuples(st.just("compact"), st.integers(0, 3), st.integers(0, 4)),
        st.tuples(st.just("search"), st.integers(0, 3), st.integers(0, 200)),
    ),
    min_size=1,
    max_size=14,
)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
async def test_forks_searched_between_appends_rewinds_and_compactions_find_their_own(
    backend: str, tmp_path: Path, ops: list[tuple[str, int, int]]
) -> None:
    """Whatever order sessions are appended to, forked, rewound, compacted and searched
    in: every hit is a message the searched session holds, where it holds it (never
    one of another branch), and each message it holds is found by its own text."""
    async with connect(tmp_path / f"{uuid.uuid4().hex}.db") as conn:
        db = (
            Backend("sqlite", conn, SQLiteVectorStore(conn))
            if backend == "sqlite"
            else Backend("memory", None, InMemoryVectorStore())
        )
        embedder = HashingEmbedder(512, ngram=0)
        recall = SemanticRecall(db.vectors, embedder, batch_size=4)
        first = db.store()
        await first.append_many(numbered(8))
        sessions = [first]
        written = 8

        async def check(store: ContextStore, query: str) -> None:
            hits = await recall.search(store, query, limit=8)
            if any(embedder.vector(query)):  # else its features cancel out: no direction
                hits += await recall.semantic_search(store, query, limit=8)
            where = {hit.id: hit for hit in await store.messages_with_ids(h.id or 0 for h in hits)}
            for hit in hits:
                held = where[hit.id]
                assert (hit.message, hit.position, hit.archived) == (
                    held.message,
                    held.position,
                    held.archived,
                )

        for op, which, number in ops:
            store = sessions[which % len(sessions)]
            count = await store.count()
            if op == "append":
                await store.append_many(numbered(number, written, tag=f"s{which}"))
                written += number
            elif op == "fork":
                sessions.append(await store.fork(at=min(number, count)))
            elif op == "rewind":
                await store.rewind(min(number, count))
            elif op == "compact":
                await store.replace_prefix(min(number, count), [])
            else:
                await check(store, f"item{number % written} note{number % 97}")
        for store in sessions:
            for message in await store.get_history(include_archived=True):
                if not any(embedder.vector(message.text)):
                    continue
                (hit, *_) = await recall.semantic_search(store, message.text, limit=2)
                assert hit.message == message
            await check(store, "gate code budget report")
