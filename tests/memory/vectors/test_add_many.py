"""`add_many`: columns in, the same documents out as `add` stores, on every backend."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import InMemoryVectorStore, VectorDocument
from pygents_ctx.memory import _table
from pygents_ctx.memory.vectors.base import VectorStoreBase
from tests.memory.oracles import float32

MakeStore = Callable[..., Awaitable[VectorStoreBase]]


def rows(count: int, dimension: int = 4, seed: int = 3) -> Any:
    return np.random.default_rng(seed).standard_normal((count, dimension))


async def snapshot(store: VectorStoreBase, ids: list[str]) -> list[Any]:
    got = [await store.get("c", i) for i in ids]
    return [(d.id, d.text, d.metadata, d.embedding) if d else None for d in got]


async def test_it_stores_what_add_stores(make_store: MakeStore) -> None:
    bulk, one_by_one = await make_store(), await make_store()
    await bulk.create_collection("c", 4)
    await one_by_one.create_collection("d", 4)
    matrix = rows(30)
    ids = [f"id{i:02}" for i in range(30)]
    texts = [f"text {i}" if i % 3 else "" for i in range(30)]
    metadata = [{"n": i % 4, "tag": "x"} if i % 2 else {} for i in range(30)]

    assert await bulk.add_many("c", ids, matrix, texts=texts, metadata=metadata) == ids

    await one_by_one.add(
        "d",
        [
            VectorDocument(i, t, m, list(v))
            for i, t, m, v in zip(ids, texts, metadata, matrix, strict=True)
        ],
    )
    assert await bulk.count("c") == 30
    for document_id in ids:
        got, want = await bulk.get("c", document_id), await one_by_one.get("d", document_id)
        assert got == want
    query = list(rows(1, seed=9)[0])
    for condition in (None, {"n": 1}, {"tag": "x", "n": 3}):
        found = await bulk.search("c", query, k=7, filter=condition)
        expected = await one_by_one.search("d", query, k=7, filter=condition)
        assert [r.id for r in found] == [r.id for r in expected]
        assert [r.score for r in found] == pytest.approx([r.score for r in expected], abs=1e-6)


async def test_present_ids_stay_unless_replace(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("c", 2)
    await store.add_many("c", ["a", "b"], [[1, 0], [0, 1]], texts=["first a", "first b"])

    written = await store.add_many("c", ["b", "c"], [[1, 1], [1, 2]], texts=["new b", "c"])
    assert written == ["c"]
    assert (await store.get("c", "b")).text == "first b"  # type: ignore[union-attr]

    written = await store.add_many("c", ["b", "d"], [[1, 1], [2, 1]], replace=True)
    assert written == ["b", "d"]
    replaced = await store.get("c", "b")
    assert replaced is not None
    assert (replaced.text, replaced.embedding) == ("", (1.0, 1.0))
    assert await store.count("c") == 4
    assert [r.id for r in await store.search("c", [1, 1], k=1)] == ["b"]


async def test_it_takes_lists_and_every_real_dtype(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("c", 3)
    await store.add_many("c", ["list"], [[1, 2, 3]])
    await store.add_many("c", ["f32"], np.array([[1, 2, 3]], dtype=np.float32))
    await store.add_many("c", ["i64"], np.array([[1, 2, 3]], dtype=np.int64))
    await store.add_many("c", ["f16"], np.array([[1, 2, 3]], dtype=np.float16))
    for document_id in ("list", "f32", "i64", "f16"):
        got = await store.get("c", document_id)
        assert got is not None
        assert got.embedding == (1.0, 2.0, 3.0)
    assert await store.add_many("c", [], np.empty((0, 3))) == []


BAD_CALLS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"vectors": [[1, 0], [math.nan, 1]]}, ValueError, "'b' holds nan"),
    ({"vectors": np.array([[1, 0], [0, np.inf]])}, ValueError, "'b' holds inf"),
    ({"vectors": np.array([[1, 0], [0, 0]], dtype=np.float32)}, ValueError, "'b' is all zeros"),
    ({"vectors": [[1, 0], [1e39, 1]]}, ValueError, "'b' holds a value too large"),
    ({"vectors": [[1, 0], [1, 0, 0]]}, ValueError, "'b' has 3 numbers, but the dimension is 2"),
    ({"vectors": np.ones((2, 3))}, ValueError, "3 numbers each, but the dimension is 2"),
    ({"vectors": [[1, 0]]}, ValueError, "2 ids but 1 vectors"),
    ({"vectors": np.ones(2)}, ValueError, "must be 2-D"),
    ({"vectors": [[1, 0], ["x", 1]]}, TypeError, "must hold only numbers"),
    ({"vectors": "ab"}, TypeError, "vectors must be a list"),
    ({"ids": ["a", "a"]}, ValueError, "'a' twice"),
    ({"ids": ["a", ""]}, ValueError, r"ids\[1\] must not be empty"),
    ({"ids": ["a", 2]}, TypeError, r"ids\[1\] must be a str"),
    ({"ids": ["a", "b\x00"]}, ValueError, "NUL"),
    ({"ids": ["a", "b\ud800"]}, ValueError, r"ids\[1\] .* holds a lone surrogate"),
    ({"ids": "ab"}, TypeError, "ids must be a list"),
    ({"texts": ["x"]}, ValueError, "2 ids but 1 texts"),
    ({"texts": ["x", 3]}, TypeError, "text of document 'b' must be a str"),
    ({"texts": ["x", "\udfff"]}, ValueError, "text of document 'b' .* holds a lone surrogate"),
    ({"metadata": [{}, {"k": math.inf}]}, ValueError, "metadata of document 'b'"),
    ({"metadata": [{}, "k"]}, TypeError, "metadata of document 'b' must be a dict"),
    ({"replace": 1}, TypeError, "replace must be True or False"),
]


@pytest.mark.parametrize(("change", "error", "match"), BAD_CALLS)
async def test_bad_columns_are_refused_whole(
    make_store: MakeStore, change: dict[str, Any], error: type[Exception], match: str
) -> None:
    store = await make_store()
    await store.create_collection("c", 2)
    call: dict[str, Any] = {"ids": ["a", "b"], "vectors": [[1, 0], [0, 1]], **change}
    ids, vectors = call.pop("ids"), call.pop("vectors")
    with pytest.raises(error, match=match):
        await store.add_many("c", ids, vectors, **call)
    assert await store.count("c") == 0


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [c for c in BAD_CALLS if "vectors" in c[0] and "2-D" not in c[2] and "each" not in c[2]],
)
async def test_without_numpy_the_same_columns_are_refused_alike(
    monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], error: type[Exception], match: str
) -> None:
    monkeypatch.setattr(_table, "_numpy", None)
    store = InMemoryVectorStore()
    await store.create_collection("c", 2)
    vectors = change["vectors"]
    with pytest.raises(error, match=match):
        await store.add_many(
            "c", ["a", "b"], vectors.tolist() if hasattr(vectors, "tolist") else vectors
        )
    assert await store.count("c") == 0


async def test_an_unknown_collection_is_refused(make_store: MakeStore) -> None:
    store = await make_store()
    with pytest.raises(Exception, match="no vector collection named 'nope'"):
        await store.add_many("nope", ["a"], [[1.0]])


components = st.one_of(
    st.integers(-3, 3).map(float),
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-41, 1e-20, 1e25, 1e35]),
)
vector = st.lists(components, min_size=3, max_size=3).filter(lambda v: any(float32(v)))


@settings(max_examples=60, deadline=None)
@given(
    first=st.lists(vector, max_size=12),
    second=st.lists(vector, min_size=1, max_size=12),
    deleted=st.sets(st.integers(0, 11)),
    query=vector,
    k=st.integers(1, 6),
    numpy=st.booleans(),
    replace=st.booleans(),
)
async def test_bulk_and_single_adds_answer_every_search_alike(
    first: list[list[float]],
    second: list[list[float]],
    deleted: set[int],
    query: list[float],
    k: int,
    numpy: bool,
    replace: bool,
) -> None:
    """Two loads with deletes between (free slots, ids present again), then a search."""
    saved = _table._numpy, _table._NUMPY_FROM
    _table._numpy, _table._NUMPY_FROM = (np if numpy else None), 0
    try:
        bulk, single = InMemoryVectorStore(), InMemoryVectorStore()
        for store in (bulk, single):
            await store.create_collection("c", 3)
        first_ids = [f"v{i:02}" for i in range(len(first))]
        second_ids = [f"v{i + 5:02}" for i in range(len(second))]  # overlaps the first
        await bulk.add_many("c", first_ids, first)
        await single.add(
            "c", [VectorDocument(i, "", {}, v) for i, v in zip(first_ids, first, strict=True)]
        )
        gone = [first_ids[i] for i in deleted if i < len(first_ids)]
        assert await bulk.delete("c", gone) == await single.delete("c", gone)
        documents = [VectorDocument(i, "", {}, v) for i, v in zip(second_ids, second, strict=True)]
        await bulk.add_many("c", second_ids, second, replace=replace)
        await (single.upsert if replace else single.add)("c", documents)
        assert await bulk.count("c") == await single.count("c")
        found = await bulk.search("c", query, k=k)
        expected = await single.search("c", query, k=k)
        assert [(r.id, r.score) for r in found] == [(r.id, r.score) for r in expected]
    finally:
        _table._numpy, _table._NUMPY_FROM = saved


async def test_a_vector_scores_the_same_however_it_was_added(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("c", 5)
    vector = [0.1, -2.7, 3.3, 1e-3, 7.0]
    await store.add_many("c", ["b", "d"], [vector, vector])
    await store.add("c", [VectorDocument("c", "", {}, vector)])
    await store.upsert("c", [VectorDocument("a", "", {}, vector)])
    found = await store.search("c", [1, 1, 1, 1, 1], k=4)
    assert [r.id for r in found] == ["a", "b", "c", "d"]
    assert len({r.score for r in found}) == 1


async def test_single_precision_backends_refuse_lengths_they_cannot_compute(
    make_store: MakeStore, backend: str
) -> None:
    store = await make_store()
    await store.create_collection("c", 2)
    if backend in ("postgres", "sqlite-vec"):
        with pytest.raises(ValueError, match="'far' is too short or too long"):
            await store.add_many("c", ["near", "far"], [[1, 0], [1e20, 1]])
        assert await store.count("c") == 0
    else:  # double precision: any finite 32-bit length
        assert await store.add_many("c", ["near", "far"], [[1, 0], [1e20, 1]]) == ["near", "far"]
