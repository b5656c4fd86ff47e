"""`pool.select` with `BM25Selector`: against a brute-force BM25 under random pool changes."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import BM25Selector, ContextPool
from tests.memory.oracles import assert_top_k, bm25_scores, expected_top_k
from tests.memory.selection.helpers import (
    VOCABULARY,
    descriptions,
    item,
    operations,
    run_operations,
    select_scored,
)


@settings(max_examples=150, deadline=None)
@given(
    operations=operations,
    limit=st.none() | st.integers(1, 6),
    hooked=st.booleans(),
    early=st.booleans(),
    k1=st.sampled_from([0.0, 1.2, 2.0]),
    b=st.sampled_from([0.0, 0.75, 1.0]),
)
def test_select_matches_brute_force_bm25_through_adds_removals_evictions_and_branches(
    operations: list[tuple[Any, ...]],
    limit: int | None,
    hooked: bool,
    early: bool,
    k1: float,
    b: float,
) -> None:
    async def run() -> None:
        pool: ContextPool[str] = ContextPool(limit, selector=BM25Selector(k1=k1, b=b))
        if early:  # the index exists from the start: every change is incremental
            assert await pool.select("moon") == []
        if hooked:  # the pool's slower path, taken when a hook listens

            @pool.after_add
            async def noted(p: Any, added: Any) -> None:
                return None

        async def check(seen: ContextPool[str], query: str, k: int) -> None:
            got = await select_scored(seen, query, k)
            assert_top_k(got, bm25_scores(descriptions(seen), query, k1, b), k, cut_ties=True)

        await run_operations(pool, operations, check)

    asyncio.run(run())


async def test_the_best_matches_come_first_and_items_sharing_no_word_are_left_out() -> None:
    pool: ContextPool[str] = ContextPool()
    await pool.add(item("tides", "How the Moon raises the tides"))
    await pool.add(item("sun", "Sunspots and the solar cycle"))
    await pool.add(item("moon", "Moon phases, moon landings and the Moon's orbit"))
    await pool.add(item("hr", "Hiring plan"))

    chosen = await pool.select("moon", k=5)

    assert [i.id for i in chosen] == ["moon", "tides"]
    assert chosen[0] is pool.get("moon")


async def test_equal_scores_are_ordered_by_id() -> None:
    pool: ContextPool[str] = ContextPool()
    for item_id in ("c", "a", "b"):
        await pool.add(item(item_id, "the same words"))

    assert [i.id for i in await pool.select("words", k=2)] == ["a", "b"]


async def test_evicted_removed_and_cleared_items_are_never_selected() -> None:
    pool: ContextPool[str] = ContextPool(limit=2)
    await pool.add(item("a", "tides"))
    await pool.select("tides")  # builds the index
    await pool.add(item("b", "tides and the moon"))
    await pool.add(item("c", "tides tides"))  # evicts "a"

    assert [i for i, _ in await select_scored(pool, "tides", 5)] == ["c", "b"]
    await pool.remove("c")
    assert [i for i, _ in await select_scored(pool, "tides", 5)] == ["b"]
    await pool.clear()
    assert await select_scored(pool, "tides", 5) == []


async def test_a_replaced_item_is_selected_by_its_new_description() -> None:
    pool: ContextPool[str] = ContextPool()
    await pool.add(item("a", "tides"))
    assert [i.id for i in await pool.select("tides")] == ["a"]

    await pool.add(item("a", "hiring"))

    assert await pool.select("tides") == []
    assert [i.content for i in await pool.select("hiring")] == ["content of a"]


async def test_a_query_without_known_words_and_an_empty_pool_select_nothing() -> None:
    pool: ContextPool[str] = ContextPool()
    assert await pool.select("anything") == []
    await pool.add(item("a", "tides"))
    assert await pool.select("") == []
    assert await pool.select("?!") == []
    assert await pool.select("sunspots") == []


async def test_a_branch_shares_the_index_until_one_side_changes() -> None:
    parent: ContextPool[str] = ContextPool()
    for n in range(5):
        await parent.add(item(f"d{n}", f"report {n}"))
    await parent.select("report")

    child = parent.branch()
    assert parent._index is not None
    assert child._index is not None
    assert child._index._core is parent._index._core  # type: ignore[attr-defined]

    await child.add(item("d9", "report nine"))
    assert [i.id for i in await child.select("nine")] == ["d9"]
    assert await parent.select("nine") == []
    assert child._index._core is not parent._index._core  # type: ignore[attr-defined]
    assert len(await parent.select("report", k=10)) == 5


async def test_a_smaller_branch_forgets_the_items_it_drops() -> None:
    parent: ContextPool[str] = ContextPool()
    for n in range(4):
        await parent.add(item(f"d{n}", "report"))
    await parent.select("report")

    child = parent.branch(limit=2)

    assert [i for i, _ in await select_scored(child, "report", 4)] == ["d2", "d3"]
    assert len(await select_scored(parent, "report", 4)) == 4


async def test_the_index_stays_as_small_as_the_pool_under_churn() -> None:
    pool: ContextPool[str] = ContextPool(limit=10)
    await pool.select("word")
    for n in range(2_000):
        await pool.add(item(f"d{n}", f"word{n} shared"))
        if n % 500 == 0:
            await pool.select("shared")
    index = pool._index
    assert index is not None

    assert len(index._pending) <= 20  # type: ignore[attr-defined]
    await pool.select("shared")
    assert len(index._core.postings) == 11  # type: ignore[attr-defined]


async def test_a_saved_pool_keeps_its_shape_and_selects_after_loading() -> None:
    pool: ContextPool[str] = ContextPool(limit=3, selector=BM25Selector(k1=2.0))
    await pool.add(item("a", "tides and the moon"))
    await pool.select("moon")

    saved = pool.to_dict()
    restored = ContextPool.from_json(pool.to_json())

    assert set(saved) == {"limit", "items", "hooks", "tags"}
    assert isinstance(restored.selector, BM25Selector)
    assert restored.selector.k1 == 1.2  # the default: selectors are not saved
    assert [i.id for i in await restored.select("moon")] == ["a"]


async def test_setting_a_selector_rebuilds_the_index() -> None:
    pool: ContextPool[str] = ContextPool()
    await pool.add(item("a", "tides tides " + "filler " * 18))
    await pool.add(item("b", "tides"))
    assert [i.id for i in await pool.select("tides")] == ["b", "a"]  # short wins with b=0.75

    pool.selector = BM25Selector(b=0.0)  # no length normalization: more occurrences win

    assert [i.id for i in await pool.select("tides")] == ["a", "b"]


def test_the_default_selector_is_bm25() -> None:
    assert isinstance(ContextPool().selector, BM25Selector)


@pytest.mark.parametrize("value", [object(), "bm25", BM25Selector])
def test_a_selector_that_is_not_one_is_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="must be a Selector"):
        ContextPool(selector=value)
    pool: ContextPool[Any] = ContextPool()
    with pytest.raises(TypeError, match="must be a Selector"):
        pool.selector = value


@pytest.mark.parametrize(
    ("query", "k", "error", "match"),
    [
        (3, 1, TypeError, "query must be a str"),
        ("q", 0, ValueError, "k must be at least 1"),
        ("q", "2", TypeError, "k must be an int"),
        ("q", True, TypeError, "k must be an int"),
    ],
)
async def test_bad_select_arguments_are_refused(
    query: Any, k: Any, error: type[Exception], match: str
) -> None:
    pool: ContextPool[str] = ContextPool()
    await pool.add(item("a", "q"))
    with pytest.raises(error, match=match):
        await pool.select(query, k)
    assert pool._index is None  # nothing was built


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"k1": -1}, ValueError, "k1 must be"),
        ({"k1": float("inf")}, ValueError, "k1 must be"),
        ({"b": 1.5}, ValueError, "b must be between 0 and 1"),
        ({"b": "x"}, TypeError, "b must be a number"),
        ({"k1": True}, TypeError, "k1 must be a number"),
    ],
)
def test_bad_bm25_parameters_are_refused(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        BM25Selector(**kwargs)


def test_bm25_selector_shows_its_parameters() -> None:
    selector = BM25Selector(k1=1.5, b=0.5)
    assert (selector.k1, selector.b) == (1.5, 0.5)
    assert repr(selector) == "BM25Selector(k1=1.5, b=0.5)"


@pytest.mark.parametrize("b", [0.0, 0.75])
async def test_an_item_holding_only_common_words_can_still_win(b: float) -> None:
    # The rare words are read first; "c" is in two items, and "c"'s item must
    # still be found although no rare word led to it.
    pool: ContextPool[str] = ContextPool(selector=BM25Selector(b=b))
    texts = {"A": "r1" + " filler" * 30 * (b > 0), "B": "r2", "C": "c " * 8, "D": "c x"}
    texts.update({"E": "y", "F": "z"})
    for item_id, text in texts.items():
        await pool.add(item(item_id, text))
    scores = bm25_scores(texts, "r1 r2 c", b=b)

    hits = await select_scored(pool, "r1 r2 c", 2)

    assert [i for i, _ in hits] == expected_top_k(scores, 2)
    assert "C" in [i for i, _ in hits]


async def test_large_pool_selects_the_same_as_brute_force() -> None:
    pool: ContextPool[str] = ContextPool(limit=300)
    for n in range(400):  # the first 100 are evicted
        words = [VOCABULARY[(n * 7 + j) % len(VOCABULARY)] for j in range(n % 5 + 1)]
        await pool.add(item(f"d{n:03}", " ".join(words)))
    scores = bm25_scores(descriptions(pool), "moon report hiring")

    chosen = await pool.select("moon report hiring", k=10)

    assert [i.id for i in chosen] == expected_top_k(scores, 10)


async def test_queries_over_a_zipf_vocabulary_match_brute_force() -> None:
    # Common words everywhere, rare words in few items: the pruned search path.
    rng = random.Random(11)
    words = [f"w{n}" for n in range(300)]
    weights = [1 / (rank + 1) for rank in range(len(words))]
    pool: ContextPool[str] = ContextPool(limit=1500)
    for n in range(2000):
        await pool.add(
            item(f"d{n:04}", " ".join(rng.choices(words, weights, k=rng.randint(3, 12))))
        )
    texts = descriptions(pool)

    for _ in range(60):
        query = " ".join(rng.choices(words, weights, k=rng.randint(1, 4)))
        k = rng.choice([1, 3, 10])
        got = await select_scored(pool, query, k)
        assert_top_k(got, bm25_scores(texts, query), k, cut_ties=True)
