"""What the selection tests share: items, scored selections, and random pool changes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from hypothesis import strategies as st

from pygents_ctx import ContextItem, ContextPool

VOCABULARY = ["moon", "tides", "sun", "revenue", "q3", "report", "hiring", "plan", "the", "of"]


def item(item_id: str, description: str) -> ContextItem[str]:
    return ContextItem(content=f"content of {item_id}", description=description, id=item_id)


def descriptions(pool: ContextPool[Any]) -> dict[str, str]:
    return {i.id: str(i.description) for i in pool.items if i.id is not None}


async def select_scored(pool: ContextPool[Any], query: str, k: int) -> list[tuple[str, float]]:
    """The pool's selection with the index's scores (the items come back in the same order)."""
    chosen = await pool.select(query, k)
    assert pool._index is not None
    hits = await pool._index.search(query, k)
    assert [i.id for i in chosen] == [item_id for item_id, _ in hits]
    return hits


texts = st.lists(st.sampled_from([*VOCABULARY, "?!"]), max_size=6).map(" ".join)
ids = st.sampled_from([f"d{i}" for i in range(8)])
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), ids, texts),
        st.tuples(st.just("add"), ids, texts),
        st.tuples(st.just("remove"), ids),
        st.tuples(st.just("clear")),
        st.tuples(st.just("select"), texts, st.integers(1, 6)),
        st.tuples(st.just("branch"), st.none() | st.integers(1, 6), st.booleans()),
    ),
    max_size=30,
)
QUERIES = ("moon tides", "the report of q3", "plan hiring sun")
Check = Callable[[ContextPool[Any], str, int], Awaitable[None]]


async def run_operations(
    pool: ContextPool[str], operations: list[tuple[Any, ...]], check: Check
) -> None:
    """Apply the operations, checking each selection; then check every pool seen."""
    others: list[ContextPool[str]] = []
    for op in operations:
        if op[0] == "add":
            await pool.add(item(op[1], op[2]))
        elif op[0] == "remove" and op[1] in pool:
            await pool.remove(op[1])
        elif op[0] == "clear":
            await pool.clear()
        elif op[0] == "select":
            await check(pool, op[1], op[2])
        elif op[0] == "branch":
            child = pool.branch(op[1] if op[1] is not None else pool.limit)
            # Keep working on one side; the other must not notice.
            others.append(pool)
            pool = child if op[2] else pool
    for seen in [pool, *others]:
        for query in QUERIES:
            await check(seen, query, 4)
