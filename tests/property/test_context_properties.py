"""Invariants of ContextQueue and ContextPool, checked against simple models."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import ContextItem, ContextPool, ContextQueue

T = TypeVar("T")

SETTINGS = settings(max_examples=100, deadline=None)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def noop_before_append(queue: Any, incoming: Any, current: Any) -> None:
    pass


async def noop_before_add(pool: Any, item: Any) -> None:
    pass


# -- strategies -------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=10,
)
optional_text = st.none() | st.text(max_size=10)
tags = st.frozensets(st.text(min_size=1, max_size=5), max_size=3)

# A queue program: batches to append (sizes) and clears.
queue_ops = st.lists(
    st.one_of(
        st.integers(min_value=0, max_value=6).map(lambda n: ("append", n)), st.just(("clear",))
    ),
    max_size=20,
)

pool_ids = st.sampled_from(["a", "b", "c", "d", "e", "f"])
pool_ops = st.lists(
    st.one_of(
        pool_ids.map(lambda i: ("add", i)),
        pool_ids.map(lambda i: ("remove", i)),
        st.just(("clear",)),
    ),
    max_size=30,
)
pool_limits = st.none() | st.integers(min_value=1, max_value=5)


# -- ContextQueue -----------------------------------------------------------


@SETTINGS
@given(limit=st.integers(min_value=1, max_value=6), ops=queue_ops, with_hook=st.booleans())
def test_queue_holds_the_newest_items_in_order_within_its_limit(
    limit: int, ops: list[tuple[Any, ...]], with_hook: bool
) -> None:
    async def scenario() -> None:
        queue: ContextQueue[int] = ContextQueue(limit=limit)
        if with_hook:
            queue.before_append(noop_before_append)
        model: list[int] = []
        counter = 0
        for op in ops:
            if op[0] == "append":
                batch = list(range(counter, counter + op[1]))
                counter += op[1]
                await queue.append(*(ContextItem(content=n) for n in batch))
                model.extend(batch)
            else:
                await queue.clear()
                model = []
            assert len(queue) <= limit
            assert [item.content for item in queue.items] == model[-limit:]

    run(scenario())


@SETTINGS
@given(limit=st.integers(min_value=1, max_value=6), ops=queue_ops)
def test_queue_evictions_clears_and_final_items_account_for_every_append(
    limit: int, ops: list[tuple[Any, ...]]
) -> None:
    async def scenario() -> None:
        queue: ContextQueue[int] = ContextQueue(limit=limit)
        gone: list[int] = []

        @queue.on_evict
        async def keep_evicted(q: Any, item: ContextItem[int]) -> None:
            gone.append(item.content)

        @queue.before_clear
        async def keep_cleared(q: Any, items: list[ContextItem[int]]) -> None:
            gone.extend(item.content for item in items)

        appended: list[int] = []
        for op in ops:
            if op[0] == "append":
                batch = list(range(len(appended), len(appended) + op[1]))
                await queue.append(*(ContextItem(content=n) for n in batch))
                appended.extend(batch)
            else:
                await queue.clear()
        assert gone + [item.content for item in queue.items] == appended

    run(scenario())


@SETTINGS
@given(limit=st.integers(min_value=1, max_value=6), ops=queue_ops)
def test_queue_hook_snapshots_show_the_queue_then_and_never_change_after(
    limit: int, ops: list[tuple[Any, ...]]
) -> None:
    async def scenario() -> None:
        queue: ContextQueue[int] = ContextQueue(limit=limit)
        received: list[tuple[list[ContextItem[int]], list[int]]] = []  # each snapshot, as given

        @queue.before_append
        async def keep_before(q: Any, incoming: Any, current: list[ContextItem[int]]) -> None:
            received.append((current, [item.content for item in current]))

        @queue.after_append
        async def keep_after(appended: Any, current: list[ContextItem[int]]) -> None:
            received.append((current, [item.content for item in current]))

        counter = 0
        for op in ops:
            if op[0] == "append":
                before = [item.content for item in queue.items]
                await queue.append(*(ContextItem(content=counter + n) for n in range(op[1])))
                counter += op[1]
                assert [contents for _, contents in received[-2:]] == [
                    before,
                    [item.content for item in queue.items],
                ]
            else:
                await queue.clear()
        assert all([item.content for item in kept] == given for kept, given in received)

    run(scenario())


@SETTINGS
@given(limit=st.integers(min_value=1, max_value=6), batches=st.lists(st.integers(0, 4), max_size=8))
def test_concurrent_appends_with_awaiting_hooks_report_every_eviction_once(
    limit: int, batches: list[int]
) -> None:
    async def scenario() -> None:
        queue: ContextQueue[int] = ContextQueue(limit=limit)
        gone: list[int] = []

        @queue.before_append
        async def yield_before(q: Any, incoming: Any, current: Any) -> None:
            await asyncio.sleep(0)

        @queue.on_evict
        async def yield_and_keep(q: Any, item: ContextItem[int]) -> None:
            await asyncio.sleep(0)
            gone.append(item.content)

        starts = [sum(batches[:index]) for index in range(len(batches))]
        await asyncio.gather(
            *(
                queue.append(*(ContextItem(content=start + n) for n in range(size)))
                for start, size in zip(starts, batches, strict=True)
            )
        )
        assert len(queue) <= limit
        assert sorted(gone + [item.content for item in queue.items]) == list(range(sum(batches)))

    run(scenario())


@SETTINGS
@given(
    limit=st.integers(min_value=1, max_value=6),
    contents=st.lists(json_values, max_size=6),
    descriptions=st.lists(optional_text, min_size=6, max_size=6),
    queue_tags=tags,
    with_hook=st.booleans(),
)
def test_queue_survives_to_dict_and_json_round_trips(
    limit: int,
    contents: list[Any],
    descriptions: list[str | None],
    queue_tags: frozenset[str],
    with_hook: bool,
) -> None:
    async def scenario() -> None:
        queue: ContextQueue[Any] = ContextQueue(limit=limit, tags=queue_tags)
        if with_hook:
            queue.before_append(noop_before_append)
        items = [
            ContextItem(content=c, description=d)
            for c, d in zip(contents, descriptions, strict=False)
        ]
        await queue.append(*items)
        saved = queue.to_dict()

        for restored in (ContextQueue.from_dict(saved), ContextQueue.from_json(queue.to_json())):
            assert restored.to_dict() == saved
            assert restored.items == queue.items
            assert restored.tags == queue_tags
            assert len(restored.hooks) == len(queue.hooks)

    run(scenario())


# -- ContextPool ------------------------------------------------------------


@SETTINGS
@given(limit=pool_limits, ops=pool_ops, with_hook=st.booleans())
def test_pool_matches_an_insertion_ordered_model(
    limit: int | None, ops: list[tuple[Any, ...]], with_hook: bool
) -> None:
    async def scenario() -> None:
        pool: ContextPool[int] = ContextPool(limit=limit)
        evicted: list[ContextItem[int]] = []

        @pool.on_evict
        async def keep_pool_evicted(p: Any, item: ContextItem[int]) -> None:
            evicted.append(item)

        if with_hook:
            pool.before_add(noop_before_add)
        model: OrderedDict[str, ContextItem[int]] = OrderedDict()
        model_evicted: list[ContextItem[int]] = []
        for step, op in enumerate(ops):
            if op[0] == "add":
                item = ContextItem(id=op[1], description=f"{op[1]} v{step}", content=step)
                if op[1] not in model and limit is not None and len(model) >= limit:
                    model_evicted.append(model.popitem(last=False)[1])
                model[op[1]] = item
                await pool.add(item)
            elif op[0] == "remove":
                if op[1] in model:
                    del model[op[1]]
                    await pool.remove(op[1])
                else:
                    with pytest.raises(KeyError):
                        await pool.remove(op[1])
            else:
                model.clear()
                await pool.clear()
            assert limit is None or len(pool) <= limit
            assert pool.items == list(model.values())
            for item_id, item in model.items():
                assert pool.get(item_id) is item
            assert pool.catalogue() == "\n".join(
                f"- [{i.id}] {i.description}" for i in model.values()
            )
        assert evicted == model_evicted

    run(scenario())


pool_entries = st.dictionaries(
    st.text(min_size=1, max_size=6), st.tuples(st.text(max_size=10), json_values), max_size=6
)


@SETTINGS
@given(limit=pool_limits, entries=pool_entries, pool_tags=tags, with_hook=st.booleans())
def test_pool_survives_to_dict_and_json_round_trips(
    limit: int | None,
    entries: dict[str, tuple[str, Any]],
    pool_tags: frozenset[str],
    with_hook: bool,
) -> None:
    async def scenario() -> None:
        pool: ContextPool[Any] = ContextPool(limit=limit, tags=pool_tags)
        if with_hook:
            pool.before_add(noop_before_add)
        for item_id, (description, content) in entries.items():
            await pool.add(ContextItem(id=item_id, description=description, content=content))
        saved = pool.to_dict()

        for restored in (ContextPool.from_dict(saved), ContextPool.from_json(pool.to_json())):
            assert restored.to_dict() == saved
            assert restored.items == pool.items
            assert restored.limit == limit
            assert restored.tags == pool_tags
            assert len(restored.hooks) == len(pool.hooks)

    run(scenario())
