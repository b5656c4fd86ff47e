"""The `VectorStore` contract, the same for every backend (see conftest.py for the list)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from pygents_ctx import (
    CollectionInfo,
    CollectionNotFoundError,
    HashingEmbedder,
    SearchResult,
    VectorDocument,
    VectorStore,
)
from pygents_ctx.memory.vectors.base import VectorStoreBase
from tests.memory.oracles import float32

MakeStore = Callable[..., Awaitable[VectorStoreBase]]


def doc(
    doc_id: str, vector: Sequence[float] | None, text: str = "", **metadata: Any
) -> VectorDocument:
    return VectorDocument(doc_id, text or f"text of {doc_id}", metadata, vector)


def ids(results: list[SearchResult]) -> list[str]:
    return [r.id for r in results]


class CountingEmbedder:
    """A HashingEmbedder that records what it embeds; it can pause inside a call."""

    def __init__(self, dimension: int = 8) -> None:
        self.inner = HashingEmbedder(dimension)
        self.texts: list[str] = []
        self.pause: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.extra = 0  # numbers added to every vector (a wrong dimension)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        self.entered.set()
        if self.pause is not None:
            await self.pause.wait()
        return [v + [0.5] * self.extra for v in await self.inner.embed(texts)]


# -- collections ---------------------------------------------------------------------


async def test_it_is_a_vector_store(make_store: MakeStore) -> None:
    assert isinstance(await make_store(), VectorStore)


async def test_collections_are_created_listed_and_deleted(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 3)
    await store.create_collection("facts", 2)
    await store.create_collection("notes", 3)  # the same again: nothing happens
    await store.add("notes", [doc("a", [1, 0, 0]), doc("b", [0, 1, 0])])

    assert await store.list_collections() == [
        CollectionInfo("facts", 2, 0),
        CollectionInfo("notes", 3, 2),
    ]
    await store.delete_collection("notes")
    assert await store.list_collections() == [CollectionInfo("facts", 2, 0)]
    await store.create_collection("notes", 5)  # its documents went with it
    assert await store.count("notes") == 0


async def test_a_collection_keeps_its_dimension(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 3)

    with pytest.raises(ValueError, match="exists with dimension 3, not 4"):
        await store.create_collection("notes", 4)
    assert await store.list_collections() == [CollectionInfo("notes", 3, 0)]


UNKNOWN_COLLECTION_CALLS: list[Callable[[VectorStoreBase], Awaitable[Any]]] = [
    lambda s: s.add("nope", [doc("a", [1.0, 0.0])]),
    lambda s: s.upsert("nope", [doc("a", [1.0, 0.0])]),
    lambda s: s.delete("nope", ["a"]),
    lambda s: s.get("nope", "a"),
    lambda s: s.count("nope"),
    lambda s: s.search("nope", [1.0, 0.0]),
    lambda s: s.delete_collection("nope"),
    lambda s: s.add("nope", []),
]


@pytest.mark.parametrize("call", UNKNOWN_COLLECTION_CALLS)
async def test_an_unknown_collection_is_a_clear_error(
    make_store: MakeStore, call: Callable[[VectorStoreBase], Awaitable[Any]]
) -> None:
    store = await make_store()

    with pytest.raises(CollectionNotFoundError, match="no vector collection named 'nope'") as info:
        await call(store)
    assert isinstance(info.value, KeyError)
    assert "create_collection('nope', dimension)" in str(info.value)


@pytest.mark.parametrize(
    ("name", "dimension", "error", "match"),
    [
        ("", 3, ValueError, "must not be empty"),
        (3, 3, TypeError, "name must be a str"),
        ("a\x00b", 3, ValueError, "NUL"),
        ("a\ud800b", 3, ValueError, "collection name 'a\\\\ud800b' holds a lone surrogate"),
        ("notes", 0, ValueError, "between 1 and 16000"),
        ("notes", 16_001, ValueError, "between 1 and 16000"),
        ("notes", 2.0, TypeError, "dimension must be an int"),
        ("notes", True, TypeError, "dimension must be an int"),
    ],
)
async def test_bad_collection_arguments_are_refused(
    make_store: MakeStore, name: Any, dimension: Any, error: type[Exception], match: str
) -> None:
    store = await make_store()
    with pytest.raises(error, match=match):
        await store.create_collection(name, dimension)
    assert await store.list_collections() == []


# -- documents -----------------------------------------------------------------------


async def test_add_inserts_only_what_is_absent(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)

    assert await store.add("notes", [doc("a", [1, 0], "first"), doc("b", [0, 1])]) == ["a", "b"]
    assert await store.add("notes", [doc("c", [1, 1]), doc("a", [0, 1], "second")]) == ["c"]
    assert await store.add("notes", []) == []

    kept = await store.get("notes", "a")
    assert kept is not None
    assert (kept.text, kept.embedding) == ("first", (1.0, 0.0))
    assert await store.count("notes") == 3


async def test_upsert_inserts_and_replaces(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)
    await store.add("notes", [doc("a", [1, 0], "first", tag="x")])

    await store.upsert("notes", [doc("a", [0, 1], "second", tag="y"), doc("b", [1, 1])])

    assert await store.get("notes", "a") == VectorDocument("a", "second", {"tag": "y"}, (0.0, 1.0))
    assert await store.count("notes") == 2
    assert ids(await store.search("notes", [0, 1], k=1)) == ["a"]
    assert await store.search("notes", [1, 0], k=5, filter={"tag": "x"}) == []


async def test_delete_removes_what_it_finds_and_counts_it(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)
    await store.add("notes", [doc("a", [1, 0]), doc("b", [0, 1]), doc("c", [1, 1])])

    assert await store.delete("notes", ["a", "zzz", "a", "c"]) == 2
    assert await store.get("notes", "a") is None
    assert ids(await store.search("notes", [1, 0], k=5)) == ["b"]
    assert await store.delete("notes", []) == 0


async def test_get_returns_the_document_as_stored(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 3)
    metadata = {"n": 1, "x": 2.5, "ok": True, "none": None, "tags": ["a", 1], "more": {"é": "ü"}}
    vector = [0.1, -2.0, 1e-3]
    await store.add("notes", [VectorDocument("d/1 é", "Über the Moon", metadata, vector)])

    got = await store.get("notes", "d/1 é")

    assert got == VectorDocument("d/1 é", "Über the Moon", metadata, tuple(float32(vector)))
    assert await store.get("notes", "missing") is None


async def test_documents_without_embeddings_get_the_embedders(make_store: MakeStore) -> None:
    embedder = CountingEmbedder(8)
    store = await make_store(embedder)
    await store.create_collection("notes", 8)
    await store.add("notes", [doc("a", None, "moon tides"), doc("b", [1] * 8, "given")])

    assert await store.add("notes", [doc("a", None, "not embedded: a exists")]) == []
    await store.upsert("notes", [doc("c", None, "sun")])

    assert embedder.texts == ["moon tides", "sun"]
    got = await store.get("notes", "a")
    assert got is not None
    assert got.embedding == tuple(float32(HashingEmbedder(8).vector("moon tides")))
    assert ids(await store.search("notes", "moon tides", k=1)) == ["a"]


async def test_searches_and_reads_see_what_another_connection_wrote(
    make_store: MakeStore, backend: str
) -> None:
    if backend == "memory":
        return  # an in-memory store belongs to its process
    writer, reader = await make_store(), await make_store()
    await writer.create_collection("notes", 2)
    await writer.add("notes", [doc("a", [1, 0])])

    assert ids(await reader.search("notes", [1, 0])) == ["a"]
    assert await reader.count("notes") == 1


# -- bad input changes nothing -------------------------------------------------------


async def _state(store: VectorStoreBase) -> tuple[Any, ...]:
    found = await store.search("notes", [1, 1], k=50)
    return (await store.list_collections(), [(r.id, r.text, r.metadata) for r in found])


BAD_BATCHES: list[tuple[Any, type[Exception], str]] = [
    (
        [doc("x", [1, 0]), doc("y", [1, 0, 0])],
        ValueError,
        "'y' has 3 numbers, but the dimension is 2",
    ),
    ([doc("x", [1, 0]), doc("x", [0, 1])], ValueError, "documents holds 'x' twice"),
    ([doc("x", [1, 0]), "y"], TypeError, r"documents\[1\] must be a VectorDocument"),
    (doc("x", [1, 0]), TypeError, "list of VectorDocument objects"),
    ([doc("x", [1, 0]), doc("y", None)], ValueError, "has no embedding and .* has no embedder"),
]


@pytest.mark.parametrize(("batch", "error", "match"), BAD_BATCHES)
@pytest.mark.parametrize("method", ["add", "upsert"])
async def test_a_bad_batch_is_refused_whole(
    make_store: MakeStore, method: str, batch: Any, error: type[Exception], match: str
) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)
    await store.add("notes", [doc("a", [1, 0])])
    before = await _state(store)

    with pytest.raises(error, match=match):
        await getattr(store, method)("notes", batch)

    assert await _state(store) == before


async def test_an_embedder_giving_something_else_than_vectors_is_refused(
    make_store: MakeStore,
) -> None:
    class Broken:
        async def embed(self, texts: Sequence[str]) -> Any:
            return "not vectors"

    store = await make_store(Broken())
    await store.create_collection("notes", 2)

    with pytest.raises(TypeError, match="must return a list of vectors, not str"):
        await store.add("notes", [doc("a", None)])
    assert await store.count("notes") == 0


async def test_an_embedder_giving_the_wrong_dimension_changes_nothing(
    make_store: MakeStore,
) -> None:
    embedder = CountingEmbedder(2)
    embedder.extra = 1
    store = await make_store(embedder)
    await store.create_collection("notes", 2)
    before = await _state(store)

    with pytest.raises(ValueError, match="has 3 numbers, but the dimension is 2"):
        await store.add("notes", [doc("a", [1, 0]), doc("b", None, "moon")])
    with pytest.raises(ValueError, match="has 3 numbers"):
        await store.search("notes", "moon")

    assert await _state(store) == before


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([1.0, float("nan")], "must be finite"),
        ([float("inf"), 1.0], "must be finite"),
        ([0.0, 0.0], "all zeros"),
        ([1e40, 1.0], "too large for a 32-bit float"),
    ],
)
def test_a_document_with_a_bad_embedding_cannot_be_made(values: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        doc("a", values)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"id": ""}, ValueError, "id must not be empty"),
        ({"id": 1}, TypeError, "id must be a str"),
        ({"text": None}, TypeError, "text of document .* must be a str"),
        ({"text": "a\x00"}, ValueError, "NUL"),
        ({"text": "a\ud800"}, ValueError, "text of document 'a' .* holds a lone surrogate"),
        ({"id": "\udc00"}, ValueError, "VectorDocument id .* holds a lone surrogate"),
        ({"metadata": {"k": "\ud800"}}, ValueError, r"\['k'\] .* holds a lone surrogate"),
        ({"metadata": {"\ud800": 1}}, ValueError, "a key of .* holds a lone surrogate"),
        ({"metadata": []}, TypeError, "metadata must be a dict"),
        ({"metadata": {"a": {1, 2}}}, TypeError, "only JSON values"),
        ({"metadata": {1: "a"}}, TypeError, "keys must be str"),
        ({"metadata": {"a": [float("nan")]}}, ValueError, r"\['a'\]\[0\] is nan"),
        ({"metadata": {"a": 2**64}}, ValueError, "64-bit integer range"),
        ({"embedding": "1,2"}, TypeError, "sequence of numbers"),
    ],
)
def test_bad_documents_cannot_be_made(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    fields: dict[str, Any] = {"id": "a", "text": "t", **kwargs}
    with pytest.raises(error, match=match):
        VectorDocument(**fields)


@pytest.mark.parametrize(
    ("query", "kwargs", "error", "match"),
    [
        ([1.0, 0.0, 0.0], {}, ValueError, "has 3 numbers, but the dimension is 2"),
        ([0.0, 0.0], {}, ValueError, "all zeros"),
        ([float("nan"), 1.0], {}, ValueError, "must be finite"),
        ([1.0, 0.0], {"k": 0}, ValueError, "k must be at least 1"),
        ([1.0, 0.0], {"k": 2.0}, TypeError, "k must be an int"),
        ([1.0, 0.0], {"filter": {"tags": ["a"]}}, TypeError, "filters match top-level values"),
        ([1.0, 0.0], {"filter": {"n": float("nan")}}, ValueError, "must be finite"),
        ([1.0, 0.0], {"filter": {1: "a"}}, TypeError, "filter keys must be str"),
        ([1.0, 0.0], {"filter": {"\ud800": 1}}, ValueError, "filter key .* lone surrogate"),
        ([1.0, 0.0], {"filter": {"k": "\ud800"}}, ValueError, "for 'k' .* lone surrogate"),
        ([1.0, 0.0], {"filter": ["a"]}, TypeError, "filter must be a dict"),
        ("moon", {}, ValueError, "a text query has no embedding and .* has no embedder"),
        (None, {}, TypeError, "sequence of numbers"),
    ],
)
async def test_bad_searches_are_refused(
    make_store: MakeStore, query: Any, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)
    await store.add("notes", [doc("a", [1, 0])])

    with pytest.raises(error, match=match):
        await store.search("notes", query, **kwargs)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda s: s.delete("notes", "a"), TypeError, "ids must be a collection of strings"),
        (lambda s: s.delete("notes", [1]), TypeError, "ids must hold only strings"),
        (lambda s: s.get("notes", 1), TypeError, "document_id must be a str"),
        (lambda s: s.get("notes", "a\ud800"), ValueError, "document_id .* lone surrogate"),
        (lambda s: s.delete("notes", ["a", "\ud800"]), ValueError, r"ids\[1\] .* lone surrogate"),
    ],
)
async def test_bad_ids_are_refused(
    make_store: MakeStore,
    call: Callable[[VectorStoreBase], Awaitable[Any]],
    error: type[Exception],
    match: str,
) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)
    await store.add("notes", [doc("a", [1, 0])])

    with pytest.raises(error, match=match):
        await call(store)
    assert await store.count("notes") == 1


@pytest.mark.parametrize("recreate", [True, False])
async def test_a_collection_deleted_while_embedding_is_not_written_to(
    make_store: MakeStore, recreate: bool
) -> None:
    embedder = CountingEmbedder(2)
    embedder.pause = asyncio.Event()
    store = await make_store(embedder)
    await store.create_collection("notes", 2)
    adding = asyncio.ensure_future(store.add("notes", [doc("a", None, "moon")]))
    await embedder.entered.wait()

    await store.delete_collection("notes")
    if recreate:
        await store.create_collection("notes", 3)
    embedder.pause.set()

    if recreate:
        with pytest.raises(ValueError, match="re-created with dimension 3"):
            await adding
        assert await store.count("notes") == 0
    else:
        with pytest.raises(CollectionNotFoundError):
            await adding
        assert await store.list_collections() == []


async def test_an_add_racing_another_keeps_the_first_document(make_store: MakeStore) -> None:
    embedder = CountingEmbedder(2)
    embedder.pause = asyncio.Event()
    store = await make_store(embedder)
    await store.create_collection("notes", 2)
    slow = asyncio.ensure_future(store.add("notes", [doc("a", None, "second")]))
    await embedder.entered.wait()

    assert await store.add("notes", [doc("a", [1, 0], "first")]) == ["a"]
    embedder.pause.set()

    assert await slow == []
    kept = await store.get("notes", "a")
    assert kept is not None
    assert kept.text == "first"


# -- search --------------------------------------------------------------------------


async def test_search_ranks_by_cosine_similarity(make_store: MakeStore, backend: str) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)
    await store.add(
        "notes",
        [doc("east", [1, 0]), doc("north", [0, 5]), doc("northeast", [3, 3]), doc("west", [-2, 0])],
    )

    found = await store.search("notes", [1, 2], k=3)

    assert ids(found) == ["northeast", "north", "east"]
    assert [r.score for r in found] == pytest.approx([0.9486833, 0.8944272, 0.4472136], abs=1e-6)
    assert found[0] == SearchResult("northeast", "text of northeast", {}, found[0].score)
    everything = await store.search("notes", [1, 2], k=10)
    assert ids(everything)[-1] == "west"
    assert everything[-1].score == pytest.approx(-0.4472136, abs=1e-6)


async def test_equal_scores_are_ordered_by_id(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 3)
    same = [0.3, -0.7, 0.2]
    await store.add("notes", [doc(i, same) for i in ("b", "é", "a", "B", "c")])
    await store.add("notes", [doc("z", [1, 1, 1])])

    found = await store.search("notes", same, k=4)

    assert ids(found) == ["B", "a", "b", "c"]  # code point order
    assert len({r.score for r in found}) == 1


async def test_a_filter_keeps_documents_with_equal_metadata_values(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)
    await store.add(
        "notes",
        [
            doc("int", [1, 0], n=1, kind="a"),
            doc("float", [1, 0.1], n=1.0, kind="b"),
            doc("true", [1, 0.2], n=True, kind="a"),
            doc("text", [1, 0.3], n="1", kind="a"),
            doc("null", [1, 0.4], n=None, kind="a"),
            doc("absent", [1, 0.5], kind="a"),
            doc("list", [1, 0.6], n=[1], kind="a"),
        ],
    )

    async def found(**conditions: Any) -> list[str]:
        return sorted(ids(await store.search("notes", [1, 0], k=10, filter=conditions)))

    assert await found(n=1) == ["float", "int"]
    assert await found(n=1.0) == ["float", "int"]
    assert await found(n=True) == ["true"]
    assert await found(n="1") == ["text"]
    assert await found(n=None) == ["null"]
    assert await found(n=1, kind="a") == ["int"]
    await store.delete("notes", ["int"])  # "float" still holds n=1
    assert await found(n=1) == ["float"]
    assert await found(n=2) == []
    assert await found(other="a") == []
    assert await found() == ["absent", "float", "list", "null", "text", "true"]


async def test_a_filtered_search_still_ranks_and_cuts_at_k(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("notes", 2)
    await store.add("notes", [doc(f"d{n}", [1, n / 10], even=n % 2 == 0) for n in range(10)])

    found = await store.search("notes", [1, 0], k=3, filter={"even": True})

    assert ids(found) == ["d0", "d2", "d4"]


async def test_a_text_query_is_embedded(make_store: MakeStore) -> None:
    store = await make_store(HashingEmbedder(32))
    await store.create_collection("notes", 32)
    await store.add(
        "notes",
        [doc("a", None, "the Moon raises the tides"), doc("b", None, "hiring plan for Q4")],
    )

    assert ids(await store.search("notes", "tides and the Moon", k=1)) == ["a"]
