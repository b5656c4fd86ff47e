"""`pool.select` with `SemanticSelector`: exact cosine ranking, lazy batched embedding."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import ContextPool, HashingEmbedder, SemanticSelector
from tests.memory.oracles import assert_top_k, cosine_scores
from tests.memory.selection.helpers import (
    descriptions,
    item,
    operations,
    run_operations,
    select_scored,
)


class CountingEmbedder:
    """HashingEmbedder that records every call, and can be made slow or to fail."""

    def __init__(self, dimension: int = 32) -> None:
        self.inner = HashingEmbedder(dimension)
        self.calls: list[list[str]] = []
        self.delay = 0.0
        self.fail_next: str | None = None  # "nan", "count", "dimension" or "raise"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.delay:
            await asyncio.sleep(self.delay)
        vectors = await self.inner.embed(texts)
        failure, self.fail_next = self.fail_next, None
        if failure == "nan":
            vectors[0][0] = float("nan")
        elif failure == "count":
            vectors.pop()
        elif failure == "dimension":
            vectors[-1].append(0.5)
        elif failure == "raise":
            raise ConnectionError("embedding service unreachable")
        return vectors


def semantic_scores(
    pool: ContextPool[Any], query: str, embedder: HashingEmbedder
) -> dict[str, float]:
    vectors = {i: embedder.vector(text) for i, text in descriptions(pool).items()}
    query_vector = embedder.vector(query)
    if not any(query_vector):
        return {}
    return cosine_scores(vectors, query_vector)


@settings(max_examples=100, deadline=None)
@given(operations=operations, limit=st.none() | st.integers(1, 6), early=st.booleans())
def test_select_matches_brute_force_cosine_through_pool_changes(
    operations: list[tuple[Any, ...]], limit: int | None, early: bool
) -> None:
    embedder = HashingEmbedder(dimension=16)  # small: collisions and ties happen

    async def run() -> None:
        pool: ContextPool[str] = ContextPool(limit, selector=SemanticSelector(embedder))
        if early:
            assert await pool.select("moon") == []

        async def check(seen: ContextPool[str], query: str, k: int) -> None:
            got = await select_scored(seen, query, k)
            assert_top_k(got, semantic_scores(seen, query, embedder), k, tolerance=1e-12)

        await run_operations(pool, operations, check)

    asyncio.run(run())


async def test_similar_descriptions_come_first_even_without_a_shared_word() -> None:
    pool: ContextPool[str] = ContextPool(selector=SemanticSelector())
    await pool.add(item("reports", "quarterly reports"))
    await pool.add(item("offsite", "team offsite"))

    chosen = await pool.select("report", k=2)

    assert [i.id for i in chosen] == ["reports", "offsite"]  # k best, whatever the score


async def test_identical_descriptions_tie_and_are_ordered_by_id() -> None:
    pool: ContextPool[str] = ContextPool(selector=SemanticSelector())
    for item_id in ("c", "a", "b"):
        await pool.add(item(item_id, "the same words"))

    hits = await select_scored(pool, "words", 3)

    assert [i for i, _ in hits] == ["a", "b", "c"]
    assert len({score for _, score in hits}) == 1


async def test_descriptions_and_queries_without_words_select_nothing() -> None:
    pool: ContextPool[str] = ContextPool(selector=SemanticSelector())
    await pool.add(item("blank", "?!"))
    await pool.add(item("moon", "moon"))

    assert [i.id for i in await pool.select("moon", k=5)] == ["moon"]
    assert await pool.select("...", k=5) == []


async def test_descriptions_are_embedded_at_select_in_one_batch_with_the_query() -> None:
    embedder = CountingEmbedder()
    pool: ContextPool[str] = ContextPool(selector=SemanticSelector(embedder, batch_size=3))
    for n in range(4):
        await pool.add(item(f"d{n}", f"report {n}"))
    assert embedder.calls == []  # adding embeds nothing

    await pool.select("report")
    await pool.add(item("d0", "report 0"))  # the same description: nothing to embed again
    await pool.add(item("d9", "moon"))
    await pool.select("moon")

    assert embedder.calls == [
        ["report 0", "report 1", "report 2"],
        ["report 3", "report"],
        ["moon", "moon"],
    ]


async def test_concurrent_selects_embed_the_new_descriptions_once() -> None:
    embedder = CountingEmbedder()
    embedder.delay = 0.01
    pool: ContextPool[str] = ContextPool(selector=SemanticSelector(embedder))
    await pool.add(item("a", "moon"))
    await pool.add(item("b", "tides"))

    first, second = await asyncio.gather(pool.select("moon"), pool.select("tides"))

    assert [i.id for i in first][:1] == ["a"]
    assert [i.id for i in second][:1] == ["b"]
    assert embedder.calls == [["moon", "tides", "moon"], ["tides"]]


async def test_an_item_removed_while_its_description_is_embedded_is_never_selected() -> None:
    embedder = CountingEmbedder()
    embedder.delay = 0.01
    pool: ContextPool[str] = ContextPool(selector=SemanticSelector(embedder))
    await pool.add(item("a", "moon"))
    await pool.add(item("b", "moon landing"))

    selecting = asyncio.ensure_future(pool.select("moon", k=5))
    await asyncio.sleep(0)  # the select is now waiting for the embedder
    await pool.remove("a")
    await pool.add(item("b", "tides"))  # replaced meanwhile: the new text wins
    await selecting

    assert [i for i, _ in await select_scored(pool, "moon", 5)] == ["b"]
    hits = await select_scored(pool, "tides", 5)
    assert hits[0][0] == "b"
    assert hits[0][1] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("failure", "error", "match"),
    [
        ("nan", ValueError, "must be finite"),
        ("count", ValueError, "returned 2 vectors for 3 texts"),
        ("dimension", ValueError, "has 33 numbers, but the dimension is 32"),
        ("raise", ConnectionError, "unreachable"),
    ],
)
async def test_a_failing_embedder_loses_nothing(
    failure: str, error: type[Exception], match: str
) -> None:
    embedder = CountingEmbedder()
    pool: ContextPool[str] = ContextPool(selector=SemanticSelector(embedder))
    await pool.add(item("a", "moon"))
    await pool.select("moon")  # the first vector fixes the dimension
    await pool.add(item("b", "moon tides"))
    await pool.add(item("c", "tides"))

    embedder.fail_next = failure
    with pytest.raises(error, match=match):
        await pool.select("tides", k=5)

    assert [i for i, _ in await select_scored(pool, "tides", 5)][:2] == ["c", "b"]
    assert len(await pool.select("tides", k=5)) == 3


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((object(),), {}, TypeError, "must have an async embed"),
        ((), {"batch_size": 0}, ValueError, "batch_size must be at least 1"),
        ((), {"batch_size": 2.5}, TypeError, "batch_size must be an int"),
    ],
)
def test_bad_semantic_selector_arguments_are_refused(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        SemanticSelector(*args, **kwargs)


def test_semantic_selector_defaults_to_the_hashing_embedder() -> None:
    selector = SemanticSelector()

    assert selector.embedder == HashingEmbedder()
    assert selector.batch_size == 256
    assert repr(selector) == (
        "SemanticSelector(HashingEmbedder(dimension=256, ngram=3), batch_size=256)"
    )
