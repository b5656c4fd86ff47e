"""ContextItem, ContextQueue and ContextPool, as the seed page describes them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.compat.conftest import Impl
from tests.compat.marks import covers


def _items(impl: Impl, *contents: Any) -> list[Any]:
    return [impl.context.ContextItem(content=c) for c in contents]


# -- ContextItem ---------------------------------------------------------------------


@covers(
    "ContextItem", "ContextItem.content", "ContextItem.description", "ContextItem.id", "context"
)
def test_an_item_is_a_frozen_value(impl: Impl) -> None:
    item = impl.context.ContextItem(content={"text": "..."}, description="Q3", id="doc-1")

    assert (item.content, item.description, item.id) == ({"text": "..."}, "Q3", "doc-1")
    assert impl.context.ContextItem("x") == impl.context.ContextItem(content="x")
    assert hash(impl.context.ContextItem("x")) == hash(impl.context.ContextItem("x"))
    assert repr(item) == ("ContextItem(content={'text': '...'}, description='Q3', id='doc-1')")
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.id = "other"  # type: ignore[misc]


@covers("ContextItem.to_dict", "ContextItem.from_dict")
def test_an_item_round_trips_through_a_dict(impl: Impl) -> None:
    item = impl.context.ContextItem(content=[1, 2], description="d", id="i")

    assert item.to_dict() == {"id": "i", "description": "d", "content": [1, 2]}
    assert impl.context.ContextItem.from_dict(item.to_dict()) == item
    assert impl.context.ContextItem.from_dict({"content": 3}) == impl.context.ContextItem(3)


# -- ContextQueue --------------------------------------------------------------------


@covers("ContextQueue", "ContextQueue.append", "ContextQueue.items", "ContextQueue.limit")
async def test_a_queue_keeps_the_newest_items_within_its_limit(impl: Impl) -> None:
    queue = impl.m.ContextQueue(limit=2)

    await queue.append(*_items(impl, "a", "b"))
    await queue.append(*_items(impl, "c"))

    assert [i.content for i in queue.items] == ["b", "c"]
    assert queue.limit == 2
    assert len(queue) == 2
    assert bool(queue)
    assert [i.content for i in queue] == ["b", "c"]
    assert not impl.m.ContextQueue(limit=1)
    copy = queue.items
    copy.clear()
    assert len(queue) == 2


@covers("ContextQueue", "ContextQueue.append")
async def test_a_queue_refuses_a_bad_limit_and_values_that_are_not_items(impl: Impl) -> None:
    with pytest.raises(ValueError, match="limit must be >= 1"):
        impl.m.ContextQueue(limit=0)
    queue = impl.m.ContextQueue(limit=3)

    with pytest.raises(TypeError, match="only accepts ContextItem"):
        await queue.append(impl.context.ContextItem("ok"), "not an item")

    assert len(queue) == 0


@covers("ContextQueue.clear", "ContextQueue.before_clear", "ContextQueue.after_clear")
async def test_clear_empties_the_queue_and_fires_its_hooks(impl: Impl) -> None:
    queue = impl.m.ContextQueue(limit=3)
    seen: list[Any] = []

    @queue.before_clear
    async def before(q: Any, items: list[Any]) -> None:
        seen.append(("before", [i.content for i in items]))

    @queue.after_clear
    async def after(q: Any) -> None:
        seen.append(("after", len(q)))

    await queue.append(*_items(impl, 1, 2))
    await queue.clear()

    assert seen == [("before", [1, 2]), ("after", 0)]
    assert queue.items == []


@covers("ContextQueue.before_append", "ContextQueue.on_evict", "ContextQueue.hooks")
async def test_before_append_and_on_evict_get_the_queue_and_what_changes(impl: Impl) -> None:
    queue = impl.m.ContextQueue(limit=2)
    seen: list[Any] = []

    @queue.before_append
    async def before(q: Any, incoming: list[Any], current: list[Any]) -> None:
        seen.append(("before", q is queue, [i.content for i in incoming], len(current)))

    @queue.on_evict
    async def evicted(q: Any, item: Any) -> None:
        seen.append(("evict", q is queue, item.content))

    await queue.append(*_items(impl, "a", "b"))
    await queue.append(*_items(impl, "c"))

    assert seen == [
        ("before", True, ["a", "b"], 0),
        ("before", True, ["c"], 2),
        ("evict", True, "a"),
    ]
    assert [h.metadata.name for h in queue.hooks] == ["before", "evicted"]


@covers("ContextQueue.history")
async def test_history_joins_the_contents_newest_last(impl: Impl) -> None:
    queue = impl.m.ContextQueue(limit=5)
    await queue.append(*_items(impl, "user: hi", "assistant: hello", {"n": 1}))

    assert queue.history() == "user: hi\nassistant: hello\n{'n': 1}"
    assert queue.history(last=2) == "assistant: hello\n{'n': 1}"
    assert queue.history(1) == "{'n': 1}"
    assert queue.history(last=10) == queue.history()
    assert impl.m.ContextQueue(limit=1).history() == ""


@covers("ContextQueue.items")
async def test_assigning_items_replaces_the_contents_keeping_the_newest(impl: Impl) -> None:
    queue = impl.m.ContextQueue(limit=3)
    await queue.append(*_items(impl, "old"))

    queue.items = _items(impl, 1, 2, 3, 4)

    assert [i.content for i in queue.items] == [2, 3, 4]
    queue.items = []
    assert queue.items == []


@covers("ContextQueue", "ContextPool")
async def test_reprs_show_limit_and_length(impl: Impl) -> None:
    queue, pool = impl.m.ContextQueue(limit=4), impl.m.ContextPool(limit=3)
    await queue.append(*_items(impl, 1, 2))
    await pool.add(impl.context.ContextItem(content=1, description="d", id="i"))

    assert repr(queue) == "ContextQueue(limit=4, len=2)"
    assert repr(pool) == "ContextPool(limit=3, len=1)"
    assert repr(impl.m.ContextPool()) == "ContextPool(limit=None, len=0)"


@covers("ContextQueue.branch", "ContextQueue.tags")
async def test_a_branched_queue_diverges_independently(impl: Impl) -> None:
    parent = impl.m.ContextQueue(limit=4, tags=["session"])

    @parent.after_append
    async def watched(*args: Any) -> None:
        pass

    await parent.append(*_items(impl, 1, 2, 3))

    child = parent.branch()
    small = parent.branch(2)
    bare = parent.branch(limit=None, hooks=[])
    positional = parent.branch(None, [])
    await child.append(*_items(impl, 4))

    assert [i.content for i in parent.items] == [1, 2, 3]
    assert [i.content for i in child.items] == [1, 2, 3, 4]
    assert [i.content for i in small.items] == [2, 3]
    assert child.hooks == [watched]
    assert bare.hooks == []
    assert positional.hooks == []
    assert child.tags == frozenset({"session"})
    assert child.limit == 4


@covers("ContextQueue.to_dict", "ContextQueue.from_dict")
async def test_a_queue_round_trips_through_a_dict_with_its_hooks(impl: Impl) -> None:
    m = impl.m
    queue = m.ContextQueue(limit=3, tags=["a"])

    @queue.on_evict
    async def dropped(q: Any, item: Any) -> None:
        pass

    await queue.append(*_items(impl, "x"))
    saved = queue.to_dict()

    assert saved == {
        "limit": 3,
        "items": [{"id": None, "description": None, "content": "x"}],
        "hooks": {"on_evict": ["dropped"]},
        "tags": ["a"],
    }
    restored = m.ContextQueue.from_dict(saved)
    assert restored.to_dict() == saved
    assert restored.hooks == [dropped]
    with pytest.raises(m.UnregisteredHookError, match="'nope' not found"):
        m.ContextQueue.from_dict({"limit": 1, "items": [], "hooks": {"on_evict": ["nope"]}})


@covers("ContextQueue.from_dict", "ContextPool.from_dict", "ContextPool.branch")
async def test_subclasses_load_and_branch_as_themselves(impl: Impl) -> None:
    class Notes(impl.m.ContextQueue):  # type: ignore[misc,name-defined]
        pass

    class Library(impl.m.ContextPool):  # type: ignore[misc,name-defined]
        pass

    library = Library(limit=2)
    await library.add(impl.context.ContextItem(content=1, description="d", id="a"))

    assert type(Notes.from_dict({"limit": 2, "items": []})) is Notes
    assert type(Library.from_dict({"items": []})) is Library
    assert type(library.branch()) is Library


# -- ContextPool ---------------------------------------------------------------------


@covers(
    "ContextPool",
    "ContextPool.add",
    "ContextPool.get",
    "ContextPool.remove",
    "ContextPool.clear",
    "ContextPool.items",
    "ContextPool.limit",
    "ContextPool.catalogue",
)
async def test_a_pool_keys_items_by_id_and_evicts_the_oldest(impl: Impl) -> None:
    item = impl.context.ContextItem
    pool = impl.m.ContextPool(limit=2)

    await pool.add(item(content=1, description="First", id="a"))
    await pool.add(item(content=2, description="Second", id="b"))
    await pool.add(item(content=3, description="First again", id="a"))  # replaced in place
    assert [i.id for i in pool.items] == ["a", "b"]
    await pool.add(item(content=4, description="Third", id="c"))

    assert [i.id for i in pool.items] == ["b", "c"]
    assert pool.get("c").content == 4
    assert pool.catalogue() == "- [b] Second\n- [c] Third"
    assert pool.limit == 2
    assert len(pool) == 2
    assert bool(pool)
    assert [i.id for i in pool] == ["b", "c"]
    await pool.remove("b")
    assert [i.id for i in pool.items] == ["c"]
    await pool.clear()
    assert pool.items == []
    assert not pool
    assert impl.m.ContextPool().limit is None


@covers("ContextPool.add", "ContextPool.get", "ContextPool.remove", "ContextPool")
async def test_a_pool_refuses_items_without_id_or_description_and_unknown_ids(
    impl: Impl,
) -> None:
    item = impl.context.ContextItem
    pool = impl.m.ContextPool()

    with pytest.raises(ValueError, match="'id' and 'description'"):
        await pool.add(item(content=1, description="no id"))
    with pytest.raises(ValueError, match="'id' and 'description'"):
        await pool.add(item(content=1, id="no-description"))
    with pytest.raises(KeyError, match="missing"):
        pool.get("missing")
    with pytest.raises(KeyError, match="missing"):
        await pool.remove("missing")
    with pytest.raises(ValueError, match="limit must be >= 1"):
        impl.m.ContextPool(limit=0)
    assert len(pool) == 0


@covers(
    "ContextPool.before_add",
    "ContextPool.after_add",
    "ContextPool.before_remove",
    "ContextPool.after_remove",
    "ContextPool.before_clear",
    "ContextPool.after_clear",
    "ContextPool.on_evict",
    "ContextPool.hooks",
)
async def test_pool_hooks_get_the_pool_and_the_item(impl: Impl) -> None:
    item = impl.context.ContextItem
    pool = impl.m.ContextPool(limit=1)
    seen: list[Any] = []

    @pool.before_add
    async def before_add(p: Any, i: Any) -> None:
        seen.append(("before_add", p is pool, i.id, len(p)))

    @pool.after_add
    async def after_add(p: Any, i: Any) -> None:
        seen.append(("after_add", i.id, len(p)))

    @pool.on_evict
    async def evicted(p: Any, i: Any) -> None:
        seen.append(("evict", i.id))

    @pool.before_remove
    async def before_remove(p: Any, i: Any) -> None:
        seen.append(("before_remove", i.id))

    @pool.after_remove
    async def after_remove(p: Any, i: Any) -> None:
        seen.append(("after_remove", i.id, len(p)))

    @pool.before_clear
    async def before_clear(p: Any, snapshot: dict[str, Any]) -> None:
        seen.append(("before_clear", sorted(snapshot)))

    @pool.after_clear
    async def after_clear(p: Any) -> None:
        seen.append(("after_clear", len(p)))

    await pool.add(item(content=1, description="d", id="a"))
    await pool.add(item(content=2, description="d", id="b"))
    await pool.remove("b")
    await pool.add(item(content=3, description="d", id="c"))
    await pool.clear()

    assert seen == [
        ("before_add", True, "a", 0),
        ("after_add", "a", 1),
        ("evict", "a"),
        ("before_add", True, "b", 0),
        ("after_add", "b", 1),
        ("before_remove", "b"),
        ("after_remove", "b", 0),
        ("before_add", True, "c", 0),
        ("after_add", "c", 1),
        ("before_clear", ["c"]),
        ("after_clear", 0),
    ]
    assert len(pool.hooks) == 7


@covers("ContextPool.branch", "ContextPool.tags")
async def test_a_branched_pool_diverges_independently(impl: Impl) -> None:
    item = impl.context.ContextItem
    parent = impl.m.ContextPool(limit=3, tags=["docs"])
    await parent.add(item(content=1, description="d", id="a"))
    await parent.add(item(content=2, description="d", id="b"))

    child = parent.branch()
    small = parent.branch(1)
    unbounded = parent.branch(None)
    await child.add(item(content=3, description="d", id="c"))

    assert [i.id for i in parent.items] == ["a", "b"]
    assert [i.id for i in child.items] == ["a", "b", "c"]
    assert [i.id for i in small.items] == ["b"]
    assert unbounded.limit is None
    assert child.tags == frozenset({"docs"})


@covers("ContextPool.to_dict", "ContextPool.from_dict")
async def test_a_pool_round_trips_through_a_dict(impl: Impl) -> None:
    item = impl.context.ContextItem
    pool = impl.m.ContextPool(limit=5)
    await pool.add(item(content={"x": 1}, description="d", id="a"))
    saved = pool.to_dict()

    assert saved == {
        "limit": 5,
        "items": [{"id": "a", "description": "d", "content": {"x": 1}}],
        "hooks": {},
        "tags": [],
    }
    assert impl.m.ContextPool.from_dict(saved).to_dict() == saved
    with pytest.raises(ValueError, match="'id'"):
        impl.m.ContextPool.from_dict({"items": [{"content": 1}]})


@covers("Agent.context_queue", "Agent.context_pool", "context")
async def test_tools_read_the_running_agents_queue_and_pool_by_annotation(impl: Impl) -> None:
    m = impl.m
    item = impl.context.ContextItem

    async def recall(question, memory, pool):  # type: ignore[no-untyped-def]
        return f"{question}: {len(memory)} notes, {pool.catalogue()}"

    async def optional(memory=None):  # type: ignore[no-untyped-def]
        return memory is None

    # Real classes as annotations (a test's local module cannot be named in a string one).
    recall.__annotations__ = {"memory": m.ContextQueue, "pool": m.ContextPool}
    optional.__annotations__ = {"memory": m.ContextQueue | None}
    recall, optional = m.tool(recall), m.tool(optional)
    agent = m.Agent("reader", "d", [recall])
    await agent.context_queue.append(item(content="n1"))
    await agent.context_pool.add(item(content=1, description="Doc", id="d1"))
    await agent.put(m.Turn("recall", kwargs={"question": "q"}))

    assert [value async for _, value in agent.run()] == ["q: 1 notes, - [d1] Doc"]
    assert await optional() is True


@covers("ContextQueue.after_append")
async def test_after_append_gets_the_appended_items_and_the_window(impl: Impl) -> None:
    # Written as pygents' context page shows it.
    queue = impl.m.ContextQueue(limit=2)
    seen: list[tuple[Any, ...]] = []
    every: list[tuple[Any, ...]] = []

    @queue.after_append
    async def appended(appended: Any, current: Any) -> None:
        seen.append((appended, current))

    @queue.after_append
    async def everything(*args: Any) -> None:
        every.append(args)

    first, second, third = _items(impl, 1, 2, 3)
    await queue.append(first, second)
    await queue.append(third)

    assert seen == every == [([first, second], [first, second]), ([third], [second, third])]
