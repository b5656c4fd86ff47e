"""ContextStoreMemory: LangGraph's `InMemoryStore` and ours side by side, a graph, bad input.

LangGraph ships no conformance suite for stores, so the same scenarios run
against its `InMemoryStore` and against ours (in memory, on SQLite and on
the session's PostgreSQL server, each in a new database) and their results
must be equal: items, values, rankings and scores (ours are computed from
32-bit vectors: equal to 1e-6), namespaces. Where `InMemoryStore` returns
items in no promised order (a search without a query) the results are
compared as sets, and our order is tested on its own. `InMemoryStore` also
lists a namespace once an item was looked up or deleted there, even with no
item in it; ours (as LangGraph's SQLite and PostgreSQL stores) lists the
namespaces that hold items, so the reference forgets empty ones first.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from pygents_ctx import HashingEmbedder
from pygents_ctx.context.stores import connect, connect_postgres
from pygents_ctx.integrations.langgraph import ContextStoreMemory

DIMS = 64
_HASHING = HashingEmbedder(DIMS)


async def embed(texts: list[str]) -> list[list[float]]:
    """An embedding function as LangGraph takes one: async, a list of texts in."""
    return [list(vector) for vector in await _HASHING.embed(texts)]


INDEX: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where our store keeps its items: "memory", a SQLite path or a PostgreSQL DSN."""
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return str(tmp_path / "memory.db")
    return str(request.getfixturevalue("pg_dsn"))


@contextlib.asynccontextmanager
async def ours(where: str, index: Any = INDEX) -> AsyncIterator[ContextStoreMemory]:
    if where == "memory":
        yield ContextStoreMemory(index=index)
        return
    opened = connect(where) if where.endswith(".db") else connect_postgres(where)
    async with opened as conn:
        yield ContextStoreMemory(conn, index=index)


class Reference(InMemoryStore):
    """LangGraph's `InMemoryStore`, listing only the namespaces that hold items, and
    dropping an item's old vectors when it is put again (it keeps those of texts the
    new put does not embed, so `index=False` left the item found by its old text)."""

    async def abatch(self, ops: Any) -> Any:
        ops = list(ops)
        for namespace in [ns for ns, items in self._data.items() if not items]:
            del self._data[namespace]
        for op in ops:
            if isinstance(op, PutOp):
                self._vectors.get(op.namespace, {}).pop(op.key, None)
        return await super().abatch(ops)


def _items(found: list[Any]) -> list[tuple[Any, ...]]:
    return [(item.namespace, item.key, item.value) for item in found]


def _ranked(found: list[Any]) -> list[tuple[Any, ...]]:
    """A query's results: the scored items as ranked, then the others (in no promised order).

    Scores are rounded to 5 places; items of equal score are put in order of name.
    """
    scored = [item for item in found if item.score is not None]
    assert scored == found[: len(scored)]  # no scored item after one without a score
    assert all(a.score >= b.score - 1e-6 for a, b in itertools.pairwise(scored))
    ranked = sorted(
        ((*row, round(item.score, 5)) for row, item in zip(_items(scored), scored, strict=True)),
        key=lambda row: (-row[-1], row[0], row[1]),
    )
    rest = sorted(_items(found[len(scored) :]))
    return ranked + [(*row, None) for row in rest]


# -- side by side ------------------------------------------------------------------


async def _scenario(store: BaseStore) -> list[Any]:
    """Puts, updates, deletes, gets, searches and listings; what a user would see of each."""
    seen: list[Any] = []
    await store.aput(("users", "u1", "memories"), "m1", {"text": "likes green tea", "n": 1})
    await store.aput(("users", "u1", "memories"), "m2", {"text": "lives in Lyon", "n": 2})
    await store.aput(("users", "u1", "prefs"), "p1", {"text": "dark theme", "n": 3})
    await store.aput(("users", "u2", "memories"), "m1", {"text": "drinks green tea daily", "n": 4})
    await store.aput(("users", "u2", "memories"), "m3", {"text": "tea", "n": 5}, index=False)
    await store.aput(("docs",), "d1", {"text": "a guide to tea", "tags": ["a", "b"], "n": 6})
    await store.aput(("docs",), "d2", {"title": "no text field", "n": 7})
    await store.aput(
        ("docs", "nested"), "d3", {"text": "Lyon is a city", "meta": {"lang": "en"}, "n": 8}
    )
    await store.aput(("users", "u1", "memories"), "m2", {"text": "moved to Paris", "n": 9})
    await store.adelete(("users", "u1", "prefs"), "p1")
    await store.adelete(("users", "nobody"), "none")
    got = [
        await store.aget(("users", "u1", "memories"), "m2"),
        await store.aget(("users", "u1", "prefs"), "p1"),
        await store.aget(("users",), "m1"),
    ]
    seen.append([None if item is None else (item.namespace, item.key, item.value) for item in got])
    for prefix, options in [
        ((), {}),
        (("users",), {}),
        (("users", "u1"), {}),
        (("users", "u"), {}),  # a label is whole: ("users", "u1") is not under it
        (("docs",), {"filter": {"meta": {"lang": "en"}}}),
        ((), {"filter": {"n": {"$gte": 4, "$lt": 8}}}),
        ((), {"filter": {"n": {"$ne": 6}, "text": "tea"}}),
        ((), {"filter": {"tags": ["a", "b"]}}),
        ((), {"filter": {"missing": None}}),
        ((), {"query": "green tea", "limit": 20}),
        (("users",), {"query": "green tea", "limit": 20}),
        (("users",), {"query": "where does u1 live: Paris or Lyon", "limit": 20}),
        ((), {"query": "tea", "filter": {"n": {"$gt": 1}}, "limit": 20}),
        ((), {"query": "tea", "limit": 2}),
        ((), {"query": "tea", "limit": 2, "offset": 2}),
        ((), {"query": "Lyon", "limit": 0}),
    ]:
        found = await store.asearch(prefix, **options)
        seen.append(_ranked(found) if "query" in options else sorted(_items(found)))
    for options in [
        {},
        {"prefix": ("users",)},
        {"suffix": ("memories",)},
        {"prefix": ("users", "*", "memories")},
        {"prefix": ("users",), "max_depth": 2},
        {"max_depth": 1},
        {"limit": 2, "offset": 1},
    ]:
        seen.append(await store.alist_namespaces(**options))
    return seen


async def test_a_scenario_gives_what_langgraphs_in_memory_store_gives(where: str) -> None:
    expected = await _scenario(Reference(index=INDEX))
    async with ours(where) as store:
        assert await _scenario(store) == expected
    assert expected[1] == [
        (("docs",), "d1", {"n": 6, "tags": ["a", "b"], "text": "a guide to tea"}),
        (("docs",), "d2", {"n": 7, "title": "no text field"}),
        (("docs", "nested"), "d3", {"meta": {"lang": "en"}, "n": 8, "text": "Lyon is a city"}),
        (("users", "u1", "memories"), "m1", {"n": 1, "text": "likes green tea"}),
        (("users", "u1", "memories"), "m2", {"n": 9, "text": "moved to Paris"}),
        (("users", "u2", "memories"), "m1", {"n": 4, "text": "drinks green tea daily"}),
        (("users", "u2", "memories"), "m3", {"n": 5, "text": "tea"}),
    ]
    # d2 (no text) and m3 (index=False) have no vector: after the scored items.
    assert [row[1] for row in expected[10]][-2:] == ["d2", "m3"]
    assert [row[-1] for row in expected[10]][-2:] == [None, None]


async def test_the_data_outlives_the_connection(tmp_path: Path) -> None:
    path = str(tmp_path / "memory.db")
    async with ours(path) as store:
        await _scenario(store)
    expected = await _scenario(Reference(index=INDEX))
    async with ours(path) as store:  # a new process: what the scenario left, searched again
        found = await store.asearch((), query="green tea", limit=20)
        assert _ranked(found) == expected[10]
        assert await store.alist_namespaces() == expected[-7]


# Random runs: a few namespaces, keys and words, so items collide, get replaced and match.
_NAMESPACES = st.sampled_from([("a",), ("a", "b"), ("a", "c"), ("b",), ("a", "b", "c")])
_KEYS = st.sampled_from(["k0", "k1", "k2", "k3"])
# Each text has a word: an empty one embeds as zeros, which we do not index (no direction)
# and InMemoryStore scores 0.
_WORDS = st.sampled_from(["moon", "tide", "sun", "star", "sea"])
_TEXTS = st.lists(_WORDS, min_size=1, max_size=3).map(" ".join)
_VALUES = st.fixed_dictionaries({"text": _TEXTS, "n": st.integers(0, 4)})
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _NAMESPACES, _KEYS, _VALUES, st.sampled_from([None, False])),
        st.tuples(st.just("delete"), _NAMESPACES, _KEYS),
        st.tuples(
            st.just("search"),
            st.sampled_from([(), ("a",), ("a", "b"), ("b",)]),
            st.sampled_from([None, {"n": 2}, {"n": {"$gte": 2}}, {"text": "sea"}]),
            st.sampled_from([None, "moon tide", "sea"]),
        ),
        st.tuples(st.just("list"), st.sampled_from([None, ("a",), ("*", "b")])),
    ),
    max_size=25,
)


async def _run(store: BaseStore, steps: list[tuple[Any, ...]]) -> list[Any]:
    seen: list[Any] = []
    for step in steps:
        if step[0] == "put":
            await store.aput(step[1], step[2], step[3], index=step[4])
        elif step[0] == "delete":
            await store.adelete(step[1], step[2])
        elif step[0] == "search":
            found = await store.asearch(step[1], filter=step[2], query=step[3], limit=50)
            seen.append(_ranked(found) if step[3] else sorted(_items(found)))
        else:
            seen.append(await store.alist_namespaces(prefix=step[1]))
    for namespace in [("a",), ("a", "b"), ("a", "c"), ("b",), ("a", "b", "c")]:
        for key in ["k0", "k1", "k2", "k3"]:
            item = await store.aget(namespace, key)
            seen.append(None if item is None else item.value)
    return seen


# Put again without vectors: searched by meaning, it is not scored by its old text.
_PUT_AGAIN_UNINDEXED: Final = [
    ("put", ("a",), "k0", {"text": "tide", "n": 4}, None),
    ("put", ("a",), "k0", {"text": "sea moon", "n": 1}, False),
    ("search", (), None, "moon tide"),
]


@settings(max_examples=60, deadline=None)
@given(steps=_STEPS, backend=st.sampled_from(["memory", "sqlite"]))
@example(steps=_PUT_AGAIN_UNINDEXED, backend="memory")
@example(steps=_PUT_AGAIN_UNINDEXED, backend="sqlite")
def test_random_runs_give_what_langgraphs_in_memory_store_gives(
    steps: list[tuple[Any, ...]], backend: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    async def run() -> None:
        expected = await _run(Reference(index=INDEX), steps)
        where = "memory" if backend == "memory" else str(tmp_path_factory.mktemp("s") / "m.db")
        async with ours(where) as store:
            assert await _run(store, steps) == expected

    asyncio.run(run())


# -- what InMemoryStore leaves to chance -------------------------------------------


async def test_a_search_without_a_query_pages_newest_first(where: str) -> None:
    async with ours(where, index=None) as store:
        for number in range(7):
            await store.aput(("log",), f"e{number}", {"n": number})
        await store.aput(("log",), "e2", {"n": 20})  # updated: the newest now
        pages = [
            [item.key for item in await store.asearch(("log",), limit=3, offset=offset)]
            for offset in (0, 3, 6)
        ]
        assert pages == [["e2", "e6", "e5"], ["e4", "e3", "e1"], ["e0"]]
        filtered = await store.asearch(("log",), filter={"n": {"$gt": 3}}, limit=2, offset=1)
        assert [item.key for item in filtered] == ["e6", "e5"]


async def test_an_update_keeps_created_at_and_moves_updated_at(where: str) -> None:
    async with ours(where, index=None) as store:
        await store.aput(("u",), "k", {"v": 1})
        first = await store.aget(("u",), "k")
        await asyncio.sleep(0.002)
        await store.aput(("u",), "k", {"v": 2})
        second = await store.aget(("u",), "k")
        assert first is not None
        assert second is not None
        assert second.value == {"v": 2}
        assert second.created_at == first.created_at
        assert second.updated_at > first.updated_at
        assert second.created_at.tzinfo is not None


async def test_a_filter_compares_json_values(where: str) -> None:
    async with ours(where, index=None) as store:
        await store.aput(("x",), "true", {"v": True})
        await store.aput(("x",), "one", {"v": 1})
        await store.aput(("x",), "one-point-oh", {"v": 1.0})
        await store.aput(("x",), "word", {"v": "b"})
        await store.aput(("x",), "none", {"other": 1})

        async def keys(condition: Any) -> list[str]:
            return sorted(item.key for item in await store.asearch(("x",), filter={"v": condition}))

        assert await keys(1) == ["one", "one-point-oh"]  # True is not 1
        assert await keys(True) == ["true"]
        assert await keys({"$gte": 1}) == ["one", "one-point-oh"]  # no number beside a string
        assert await keys({"$gt": "a"}) == ["word"]
        assert await keys({"$ne": 1}) == ["none", "true", "word"]
        assert await keys(None) == ["none"]  # a missing key is None, as in InMemoryStore


async def test_an_item_scores_by_its_best_text_and_index_names_fields(where: str) -> None:
    index = {"dims": DIMS, "embed": embed, "fields": ["title", "notes[*]"]}
    async with ours(where, index=index) as store:
        await store.aput(("n",), "a", {"title": "sun", "notes": ["sea", "moon tide"]})
        await store.aput(("n",), "b", {"title": "moon tide", "body": "star"}, index=["body"])
        await store.aput(("n",), "c", {"title": "moon tide"})
        found = await store.asearch(("n",), query="moon tide")
        assert [item.key for item in found] == ["a", "c", "b"]  # b: only its body is indexed
        assert [item.score for item in found[:2]] == [pytest.approx(1.0), pytest.approx(1.0)]
        theirs = Reference(index=index)
        await theirs.aput(("n",), "a", {"title": "sun", "notes": ["sea", "moon tide"]})
        await theirs.aput(("n",), "b", {"title": "moon tide", "body": "star"}, index=["body"])
        await theirs.aput(("n",), "c", {"title": "moon tide"})
        assert _ranked(found) == _ranked(await theirs.asearch(("n",), query="moon tide"))


async def test_replaced_values_leave_no_vectors_behind(tmp_path: Path) -> None:
    async with connect(tmp_path / "memory.db") as conn:
        store = ContextStoreMemory(conn, index=INDEX)
        for round_ in range(5):
            await store.aput(("n",), "k", {"text": f"moon {round_}"})
        await store.aput(("n",), "gone", {"text": "sea"})
        await store.adelete(("n",), "gone")
        assert await store._vectors.count("langgraph_store") == 1
        found = await store.asearch(("n",), query="moon 4")
        assert [(item.key, item.value) for item in found] == [("k", {"text": "moon 4"})]
        await ContextStoreMemory(conn).aput(("n",), "k", {"text": "sea"})  # a store with no index
        assert await store._vectors.count("langgraph_store") == 0
        found = await store.asearch(("n",), query="moon 4")
        assert [(item.key, item.score) for item in found] == [("k", None)]


async def test_vectors_of_a_put_broken_off_are_never_returned(tmp_path: Path) -> None:
    """A put that wrote its vectors and failed before its item: the old value stays found."""
    async with connect(tmp_path / "memory.db") as conn:
        store = ContextStoreMemory(conn, index=INDEX)
        await store.aput(("n",), "k", {"text": "sea"})
        change = store._items.change

        async def broken(changes: Any) -> Any:
            raise OSError("the disk is full")

        store._items.change = broken  # type: ignore[method-assign]
        with pytest.raises(OSError, match="disk is full"):
            await store.aput(("n",), "k", {"text": "moon"})
        store._items.change = change  # type: ignore[method-assign]
        found = await store.asearch(("n",), query="moon")
        assert [(item.key, item.value) for item in found] == [("k", {"text": "sea"})]
        assert found[0].score < 0.5  # scored by "sea", not by "moon" (1.0)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite path or a PostgreSQL DSN (a new database)."""
    if request.param == "sqlite":
        return str(tmp_path / "memory.db")
    return str(request.getfixturevalue("pg_dsn"))


async def test_two_writers_on_the_same_items_leave_one_vector_each(database: str) -> None:
    async with ours(database) as first, ours(database) as second:
        await first.setup()
        await second.setup()
        writes = [
            store.aput(("race",), f"k{n % 3}", {"text": f"{word} {n}"})
            for n in range(24)
            for store, word in [(first, "moon"), (second, "sea")]
        ]
        await asyncio.gather(*writes)
        assert await first._vectors.count("langgraph_store") == 3
        for key in ["k0", "k1", "k2"]:
            item = await second.aget(("race",), key)
            assert item is not None
            found = await first.asearch(("race",), query=item.value["text"], limit=1)
            assert [(hit.key, hit.score) for hit in found] == [(key, pytest.approx(1.0))]


# -- in a graph --------------------------------------------------------------------


def _remembering_graph(checkpointer: Any, store: BaseStore) -> Any:
    async def remember(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        said = str(state["messages"][-1].content)
        await store.aput(("user", "u1"), said, {"text": said})
        found = await store.asearch(("user", "u1"), query=said, limit=1)
        return {"messages": [("ai", f"noted; closest memory: {found[0].value['text']}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    return builder.compile(checkpointer=checkpointer, store=store)


async def test_a_graph_reads_and_writes_the_store_across_threads(where: str) -> None:
    from pygents_ctx.integrations.langgraph import ContextStoreSaver

    async with ours(where) as store:
        saver = ContextStoreSaver(store.conn) if store.conn is not None else None
        graph = _remembering_graph(saver, store)
        for thread, said in [("t1", "I like green tea"), ("t2", "I live in Lyon")]:
            config: Any = {"configurable": {"thread_id": thread}}
            result = await graph.ainvoke({"messages": [("user", said)]}, config)
            assert result["messages"][-1].content == f"noted; closest memory: {said}"
        found = await store.asearch(("user", "u1"), query="tea")
        assert [item.value["text"] for item in found] == ["I like green tea", "I live in Lyon"]


async def test_the_sync_api_works_from_another_thread(tmp_path: Path) -> None:
    async with connect(tmp_path / "memory.db") as conn:
        store = ContextStoreMemory(conn, index=INDEX)

        def use() -> list[str]:
            store.put(("n",), "a", {"text": "moon"})
            store.put(("n",), "b", {"text": "sea"})
            store.delete(("n",), "b")
            assert store.get(("n",), "a") is not None
            assert store.list_namespaces() == [("n",)]
            return [item.key for item in store.search(("n",), query="moon")]

        assert await asyncio.to_thread(use) == ["a"]
        with pytest.raises(RuntimeError, match="to_thread"):
            store.get(("n",), "a")  # on the loop's own thread it would wait on itself


def test_a_store_in_memory_works_without_an_event_loop() -> None:
    store = ContextStoreMemory(index=INDEX)
    store.put(("n",), "a", {"text": "moon"})
    graph_store_results = [item.key for item in store.search(("n",), query="moon")]
    assert graph_store_results == ["a"]
    assert store.get(("n",), "a").value == {"text": "moon"}  # type: ignore[union-attr]


# -- bad input ---------------------------------------------------------------------


async def test_bad_input_is_refused_and_nothing_is_stored(where: str) -> None:
    bad: list[tuple[type[Exception], str, Callable[[ContextStoreMemory], Any]]] = [
        (InvalidNamespaceError, "cannot contain periods", lambda s: s.aput(("a.b",), "k", {})),
        (InvalidNamespaceError, "cannot be empty", lambda s: s.aput(("a", ""), "k", {})),
        (InvalidNamespaceError, "cannot be empty", lambda s: s.aput((), "k", {})),
        (InvalidNamespaceError, '"langgraph"', lambda s: s.aput(("langgraph",), "k", {})),
        (InvalidNamespaceError, "must be strings", lambda s: s.aput(("a", 1), "k", {})),
        (InvalidNamespaceError, "tuple of str labels", lambda s: s.aput("users", "k", {})),
        (InvalidNamespaceError, "cannot contain periods", lambda s: s.asearch(("a.b",))),
        (TypeError, "value must be a dict", lambda s: s.aput(("a",), "k", ["x"])),
        (TypeError, r"value of item 'k'.when holds", lambda s: s.aput(("a",), "k", {"when": s})),
        (TypeError, "key must be a str", lambda s: s.abatch([PutOp(("a",), 1, {})])),  # type: ignore[arg-type]
        (ValueError, "NUL", lambda s: s.aput(("a",), "k\x00", {})),
        (ValueError, "key .* lone surrogate", lambda s: s.aput(("a",), "k\ud800", {})),
        (InvalidNamespaceError, "surrogate", lambda s: s.aput(("a", "\ud800"), "k", {})),
        (InvalidNamespaceError, "surrogate", lambda s: s.alist_namespaces(prefix=("\ud800",))),
        (TypeError, "index must be False, None or a list", lambda s: s.aput(("a",), "k", {}, "x")),
        (ValueError, "operators are", lambda s: s.asearch(("a",), filter={"n": {"$in": [1]}})),
        (ValueError, "limit must be at least 0", lambda s: s.asearch(("a",), limit=-1)),
        (NotImplementedError, "TTL is not supported", lambda s: s.aput(("a",), "k", {}, ttl=5)),
        (
            NotImplementedError,
            "TTL is not supported",
            lambda s: s.abatch([PutOp(("a",), "k", {}, ttl=5.0)]),
        ),
        (
            TypeError,
            "must be a dict",
            lambda s: s.abatch([PutOp(("a",), "ok", {}), PutOp(("a",), "k", 3)]),  # type: ignore[arg-type]
        ),
    ]
    async with ours(where) as store:
        for error, message, call in bad:
            with pytest.raises(error, match=message):
                await call(store)
        assert await store.alist_namespaces() == []
    async with ours(where, index=None) as store:
        with pytest.raises(ValueError, match=r"no index.*index="):
            await store.asearch(("a",), query="tea")
        with pytest.raises(ValueError, match="no index"):
            await store.abatch([PutOp(("a",), "k", {}), SearchOp(("a",), query="tea")])
        assert await store.alist_namespaces() == []


async def test_an_embedder_that_misbehaves_stores_nothing(where: str) -> None:
    async def short(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    async def not_a_number(texts: list[str]) -> list[list[float]]:
        return [[float("nan")] * DIMS for _ in texts]

    for embedder, message in [
        (short, r"gave for 'moon' has 2 numbers, but index\['dims'\] is 64"),
        (not_a_number, r"gave for 'moon' holds nan"),
    ]:
        async with ours(where, index={"dims": DIMS, "embed": embedder}) as store:
            await store.aput(("a",), "k", {"text": "sea"}, index=False)
            with pytest.raises(ValueError, match=message):
                await store.aput(("a",), "k", {"text": "moon"}, index=["text"])
            item = await store.aget(("a",), "k")
            assert item is not None
            assert item.value == {"text": "sea"}


def test_a_bad_store_configuration_is_refused() -> None:
    with pytest.raises(TypeError, match="connect"):
        ContextStoreMemory("memory.db")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dims"):
        ContextStoreMemory(index={"embed": embed})  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="at least 1"):
        ContextStoreMemory(index={"dims": 0, "embed": embed})
    with pytest.raises(TypeError, match="embed"):
        ContextStoreMemory(index={"dims": 4})
    with pytest.raises(TypeError, match="fields"):
        ContextStoreMemory(index={"dims": 4, "embed": embed, "fields": "text"})  # type: ignore[typeddict-item]
