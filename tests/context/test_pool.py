"""ContextPool: a keyed, bounded store of described ContextItems."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import pytest

from pygents_ctx import (
    ContextItem,
    ContextPool,
    ContextPoolHook,
    Hook,
    UnregisteredHookError,
    hook,
)
from pygents_ctx.context import ContextPool as ContextPoolFromContext

Event = tuple[Any, ...]


def doc(item_id: str, content: Any = None, description: str | None = None) -> ContextItem[Any]:
    """A poolable item; the description defaults to one derived from the id."""
    return ContextItem(
        id=item_id,
        description=f"about {item_id}" if description is None else description,
        content=item_id if content is None else content,
    )


def ids(pool: ContextPool[Any]) -> list[str | None]:
    return [item.id for item in pool.items]


async def filled(limit: int | None, *item_ids: str) -> ContextPool[Any]:
    pool: ContextPool[Any] = ContextPool(limit=limit)
    for item_id in item_ids:
        await pool.add(doc(item_id))
    return pool


def record_pool_hooks(pool: ContextPool[Any]) -> list[Event]:
    """Attach one instance hook per kind; each call records (kind, *args, ids at that time)."""
    events: list[Event] = []

    @pool.before_add
    async def rec_before_add(p: Any, item: Any) -> None:
        events.append(("before_add", p, item, ids(p)))

    @pool.after_add
    async def rec_after_add(p: Any, item: Any) -> None:
        events.append(("after_add", p, item, ids(p)))

    @pool.before_remove
    async def rec_before_remove(p: Any, item: Any) -> None:
        events.append(("before_remove", p, item, ids(p)))

    @pool.after_remove
    async def rec_after_remove(p: Any, item: Any) -> None:
        events.append(("after_remove", p, item, ids(p)))

    @pool.before_clear
    async def rec_before_clear(p: Any, snapshot: Any) -> None:
        events.append(("before_clear", p, snapshot, ids(p)))

    @pool.after_clear
    async def rec_after_clear(p: Any) -> None:
        events.append(("after_clear", p, ids(p)))

    @pool.on_evict
    async def rec_on_evict(p: Any, item: Any) -> None:
        events.append(("on_evict", p, item, ids(p)))

    return events


def record_global_pool_hooks() -> list[Event]:
    events: list[Event] = []

    @hook(list(ContextPoolHook))
    async def global_pool_recorder(*args: Any, **kwargs: Any) -> None:
        events.append(args)

    return events


async def call(pool: ContextPool[Any], method: str, item_id: str) -> Any:
    """Call a sync or async pool method by name."""
    result = getattr(pool, method)(item_id)
    return await result if asyncio.iscoroutine(result) else result


def kinds(events: list[Event]) -> list[str]:
    return [event[0] for event in events]


# -- construction -----------------------------------------------------------


def test_context_pool_is_importable_from_the_context_package() -> None:
    assert ContextPoolFromContext is ContextPool


def test_new_pool_is_empty_and_unbounded_by_default() -> None:
    pool: ContextPool[Any] = ContextPool()

    assert pool.limit is None
    assert pool.items == []
    assert len(pool) == 0
    assert list(pool) == []
    assert not pool
    assert pool.tags == frozenset()


@pytest.mark.parametrize("limit", [0, -1])
def test_limit_below_one_is_a_value_error(limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        ContextPool(limit=limit)


@pytest.mark.parametrize("limit", ["3", 1.5, True])
def test_limit_that_is_not_an_int_is_a_type_error(limit: Any) -> None:
    with pytest.raises(TypeError, match="limit"):
        ContextPool(limit=limit)


async def test_unbounded_pool_keeps_everything() -> None:
    pool = await filled(None, *(f"d{n}" for n in range(300)))

    assert len(pool) == 300
    assert ids(pool)[0] == "d0"


@dataclass
class Report:
    text: str


async def test_parametrized_pool_constructs_and_works_at_runtime() -> None:
    pool = ContextPool[Report](limit=50)

    await pool.add(ContextItem(id="r1", description="Q3 report", content=Report(text="up")))

    assert isinstance(pool, ContextPool)
    assert pool.get("r1").content == Report(text="up")


# -- adding and reading -----------------------------------------------------


async def test_add_stores_by_id_and_get_returns_the_item() -> None:
    pool: ContextPool[Any] = ContextPool()
    first, second = doc("a", 1), doc("b", 2)

    await pool.add(first)
    await pool.add(second)

    assert pool.get("a") is first
    assert pool.get("b") is second
    assert "a" in pool
    assert "zzz" not in pool
    assert pool.items == [first, second]
    assert list(pool) == [first, second]
    assert len(pool) == 2
    assert pool


@pytest.mark.parametrize(
    ("item", "missing"),
    [
        (ContextItem(content=1, description="no id"), "id"),
        (ContextItem(content=1, id="no-description"), "description"),
        (ContextItem(content=1), "id"),
    ],
)
async def test_add_without_id_or_description_is_a_value_error_and_changes_nothing(
    item: ContextItem[Any], missing: str
) -> None:
    pool = await filled(2, "a", "b")
    events = record_pool_hooks(pool)

    with pytest.raises(ValueError, match=missing):
        await pool.add(item)

    assert ids(pool) == ["a", "b"]
    assert events == []


@pytest.mark.parametrize("bad", ["text", {"id": "a", "description": "d", "content": 1}, None])
async def test_add_of_a_non_item_is_a_type_error(bad: Any) -> None:
    pool: ContextPool[Any] = ContextPool()

    with pytest.raises(TypeError, match="ContextItem"):
        await pool.add(bad)

    assert pool.items == []


async def test_same_id_replaces_in_place_keeping_its_position() -> None:
    pool = await filled(None, "a", "b", "c")
    replacement = doc("b", "new", "newer b")

    await pool.add(replacement)

    assert ids(pool) == ["a", "b", "c"]
    assert pool.get("b") is replacement
    assert pool.catalogue() == "- [a] about a\n- [b] newer b\n- [c] about c"


async def test_replacing_in_a_full_pool_evicts_nothing_but_fires_add_hooks() -> None:
    pool = await filled(2, "a", "b")
    events = record_pool_hooks(pool)
    replacement = doc("a", "new")

    await pool.add(replacement)

    assert ids(pool) == ["a", "b"]
    assert kinds(events) == ["before_add", "after_add"]
    assert events[0][1:3] == (pool, replacement)
    assert events[1][1:3] == (pool, replacement)


async def test_a_full_pool_evicts_the_oldest_insertion() -> None:
    pool = await filled(2, "a", "b")
    await pool.add(doc("a", "replaced"))  # replacement does not make "a" newer

    await pool.add(doc("c"))

    assert ids(pool) == ["b", "c"]
    with pytest.raises(KeyError):
        pool.get("a")


async def test_add_to_a_full_pool_fires_evict_then_before_add_then_after_add() -> None:
    pool = await filled(2, "a", "b")
    events = record_pool_hooks(pool)
    new = doc("c")

    await pool.add(new)

    assert kinds(events) == ["on_evict", "before_add", "after_add"]
    _, evict_pool, evicted, _ = events[0]
    assert evict_pool is pool
    assert evicted.id == "a"
    # before_add runs after the eviction and before the insertion; after_add once inserted
    assert events[1][1:] == (pool, new, ["b"])
    assert events[2][1:] == (pool, new, ["b", "c"])


async def test_add_with_room_fires_no_eviction() -> None:
    pool = await filled(3, "a")
    events = record_pool_hooks(pool)

    await pool.add(doc("b"))

    assert kinds(events) == ["before_add", "after_add"]


@pytest.mark.parametrize("method", ["get", "remove"])
async def test_get_and_remove_of_an_unknown_id_are_key_errors(method: str) -> None:
    pool = await filled(None, "a")
    events = record_pool_hooks(pool)

    with pytest.raises(KeyError, match="missing"):
        await call(pool, method, "missing")

    assert ids(pool) == ["a"]
    assert events == []


async def test_remove_deletes_the_item_and_fires_before_and_after() -> None:
    pool = await filled(None, "a", "b")
    events = record_pool_hooks(pool)
    removed = pool.get("a")

    await pool.remove("a")

    assert ids(pool) == ["b"]
    assert "a" not in pool
    assert events == [
        ("before_remove", pool, removed, ["a", "b"]),
        ("after_remove", pool, removed, ["b"]),
    ]


async def test_clear_fires_before_with_a_snapshot_dict_and_after_with_the_empty_pool() -> None:
    pool = await filled(None, "a", "b")
    items = pool.items
    events = record_pool_hooks(pool)

    await pool.clear()

    assert pool.items == []
    assert not pool
    assert kinds(events) == ["before_clear", "after_clear"]
    _, before_pool, snapshot, ids_then = events[0]
    assert before_pool is pool
    assert ids_then == ["a", "b"]
    # A copy taken before the clear: it still holds the items afterwards.
    assert snapshot == {"a": items[0], "b": items[1]}
    assert list(snapshot) == ["a", "b"]
    assert events[1] == ("after_clear", pool, [])


async def test_pool_is_usable_after_clear() -> None:
    pool = await filled(1, "a")
    await pool.clear()

    await pool.add(doc("b"))

    assert ids(pool) == ["b"]


async def test_catalogue_lists_id_and_description_one_line_per_item() -> None:
    pool: ContextPool[Any] = ContextPool()
    await pool.add(doc("doc-1", description="Q3 earnings report — revenue, margins, guidance"))
    await pool.add(doc("doc-2", description="Board minutes"))

    assert pool.catalogue() == (
        "- [doc-1] Q3 earnings report — revenue, margins, guidance\n- [doc-2] Board minutes"
    )


def test_catalogue_of_an_empty_pool_is_an_empty_string() -> None:
    assert ContextPool().catalogue() == ""


async def test_items_returns_a_copy() -> None:
    pool = await filled(None, "a")

    snapshot = pool.items
    snapshot.clear()

    assert ids(pool) == ["a"]


async def test_concurrent_adds_with_a_slow_hook_stay_within_the_limit_and_report_evictions() -> (
    None
):
    limit = 3
    pool = await filled(limit, "p0", "p1", "p2")
    sizes: list[int] = []
    evicted: list[str] = []

    @pool.before_add
    async def slow_before_add(p: Any, item: Any) -> None:
        sizes.append(len(p))
        await asyncio.sleep(0.01)
        sizes.append(len(p))

    @pool.on_evict
    async def collect_evicted(p: Any, item: Any) -> None:
        sizes.append(len(p))
        evicted.append(item.id)

    @pool.after_add
    async def check_size(p: Any, item: Any) -> None:
        sizes.append(len(p))

    new_ids = [f"n{i}" for i in range(5)]
    await asyncio.gather(*(pool.add(doc(i)) for i in new_ids))

    added = limit + len(new_ids)
    assert len(pool) == limit
    assert max(sizes) <= limit
    assert len(evicted) == added - limit
    assert sorted(evicted + ids(pool)) == sorted(["p0", "p1", "p2", *new_ids])  # type: ignore[arg-type]


# -- branching --------------------------------------------------------------


async def test_branch_inherits_limit_items_and_tags() -> None:
    parent: ContextPool[Any] = ContextPool(limit=20, tags=["documents"])
    await parent.add(doc("x", 0, "Base"))

    child = parent.branch()

    assert child is not parent
    assert child.limit == 20
    assert child.items == parent.items
    assert child.tags == frozenset({"documents"})


async def test_branch_is_independent_both_ways() -> None:
    parent = await filled(5, "a")
    child = parent.branch()

    await child.add(doc("child"))
    await parent.add(doc("parent"))
    await child.remove("a")

    assert ids(parent) == ["a", "parent"]
    assert ids(child) == ["child"]


async def test_branch_with_a_smaller_limit_keeps_the_newest_items() -> None:
    parent = await filled(5, "a", "b", "c", "d")

    child = parent.branch(limit=2)

    assert child.limit == 2
    assert ids(child) == ["c", "d"]
    assert ids(parent) == ["a", "b", "c", "d"]


async def test_branch_with_limit_none_is_unbounded() -> None:
    parent = await filled(2, "a", "b")

    child = parent.branch(limit=None)
    await child.add(doc("c"))

    assert child.limit is None
    assert ids(child) == ["a", "b", "c"]


def test_branch_with_a_limit_below_one_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="limit"):
        ContextPool(limit=3).branch(limit=0)


async def test_branch_inherits_hooks_by_default_as_a_separate_list() -> None:
    parent: ContextPool[Any] = ContextPool()
    added: list[Any] = []

    @parent.after_add
    async def note_add(p: Any, item: Any) -> None:
        added.append((p, item.id))

    child = parent.branch()
    await child.add(doc("a"))

    assert added == [(child, "a")]
    child.hooks.clear()
    assert len(parent.hooks) == 1


async def test_branch_with_empty_hooks_fires_none() -> None:
    parent = await filled(1, "a")
    events = record_pool_hooks(parent)

    child = parent.branch(hooks=[])
    await child.add(doc("b"))
    await child.remove("b")
    await child.clear()

    assert events == []


async def test_branch_with_given_hooks_fires_only_those() -> None:
    parent: ContextPool[Any] = ContextPool()
    parent_events = record_pool_hooks(parent)
    other: list[Any] = []

    async def other_before_add(p: Any, item: Any) -> None:
        other.append(item.id)

    child = parent.branch(hooks=[Hook(other_before_add, (ContextPoolHook.BEFORE_ADD,))])
    await child.add(doc("x"))

    assert other == ["x"]
    assert parent_events == []


async def test_branching_fires_no_hooks_even_when_items_are_dropped() -> None:
    parent = await filled(4, "a", "b", "c", "d")
    instance_events = record_pool_hooks(parent)
    global_events = record_global_pool_hooks()

    parent.branch()
    parent.branch(limit=1)
    parent.branch(limit=None, hooks=[])

    assert instance_events == []
    assert global_events == []


# -- tags and global hooks --------------------------------------------------


async def test_global_hook_with_tags_fires_only_for_pools_sharing_a_tag() -> None:
    seen: list[Any] = []

    @hook(ContextPoolHook.AFTER_ADD, tags=["documents"])
    async def watch_documents(pool: Any, item: Any) -> None:
        seen.append(pool)

    documents: ContextPool[Any] = ContextPool(tags=["documents", "x"])
    other: ContextPool[Any] = ContextPool(tags=["x"])
    untagged: ContextPool[Any] = ContextPool()
    for pool in (documents, other, untagged):
        await pool.add(doc("a"))

    assert seen == [documents]


async def test_global_on_evict_without_tags_fires_for_every_pool() -> None:
    seen: list[Any] = []

    @hook(ContextPoolHook.ON_EVICT)
    async def watch_pool_evictions(pool: Any, item: Any) -> None:
        seen.append((pool, item.id))

    first = await filled(1, "a")
    second = await filled(1, "a")
    await first.add(doc("b"))
    await second.add(doc("b"))

    assert seen == [(first, "a"), (second, "a")]


# -- serialization ----------------------------------------------------------


async def test_to_dict_has_limit_items_hooks_tags_in_that_order() -> None:
    pool: ContextPool[Any] = ContextPool(limit=5, tags=["b", "a"])
    await pool.add(doc("x", {"n": 1}, "first"))

    @pool.after_add
    async def saved_after_add(p: Any, item: Any) -> None:
        pass

    saved = pool.to_dict()

    assert list(saved) == ["limit", "items", "hooks", "tags"]
    assert saved == {
        "limit": 5,
        "items": [{"id": "x", "description": "first", "content": {"n": 1}}],
        "hooks": {"after_add": ["saved_after_add"]},
        "tags": ["a", "b"],
    }


@pytest.mark.parametrize("limit", [None, 3])
async def test_from_dict_round_trip_restores_everything(limit: int | None) -> None:
    pool: ContextPool[Any] = ContextPool(limit=limit, tags=["t"])
    for item_id in ("a", "b", "c"):
        await pool.add(doc(item_id, [item_id, 1]))
    added: list[Any] = []

    @pool.after_add
    async def restored_after_add(p: Any, item: Any) -> None:
        added.append((p, item.id))

    saved = pool.to_dict()
    restored = ContextPool.from_dict(saved)

    assert restored.to_dict() == saved
    assert restored.items == pool.items
    assert restored.limit == limit
    assert restored.tags == frozenset({"t"})
    await restored.add(doc("d"))
    assert added == [(restored, "d")]
    assert ids(pool) == ["a", "b", "c"]


@pytest.mark.parametrize("limit", [None, 3])
async def test_json_round_trip_from_bytes_and_str(limit: int | None) -> None:
    pool: ContextPool[Any] = ContextPool(limit=limit, tags=["t"])
    await pool.add(doc("a", {"k": [1, 2.5, None, False, "s"]}))
    await pool.add(doc("b", "text"))

    data = pool.to_json()

    assert isinstance(data, bytes)
    for source in (data, data.decode()):
        restored = ContextPool.from_json(source)
        assert restored.to_dict() == pool.to_dict()
        assert restored.items == pool.items


async def test_from_dict_fires_no_hooks() -> None:
    global_events = record_global_pool_hooks()
    pool: ContextPool[Any] = ContextPool()
    instance_events = record_pool_hooks(pool)
    data = {
        "limit": 2,
        "items": [doc("a").to_dict(), doc("b").to_dict()],
        "hooks": {"before_add": ["rec_before_add"], "on_evict": ["rec_on_evict"]},
        "tags": [],
    }

    restored = ContextPool.from_dict(data)

    assert ids(restored) == ["a", "b"]
    assert global_events == []
    assert instance_events == []


def test_from_dict_needs_no_keys() -> None:
    restored = ContextPool.from_dict({})

    assert restored.limit is None
    assert restored.items == []


@pytest.mark.parametrize(
    ("items", "limit", "message"),
    [
        ([{"description": "d", "content": 1}], None, "id"),
        ([{"id": "a", "content": 1}], None, "description"),
        ([doc("a").to_dict(), doc("a", 2).to_dict()], None, "'a'"),
        ([doc("a").to_dict(), doc("b").to_dict()], 1, "limit"),
    ],
)
def test_from_dict_rejects_bad_items(items: list[Any], limit: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ContextPool.from_dict({"limit": limit, "items": items, "hooks": {}, "tags": []})


def test_from_dict_with_an_unknown_hook_name_is_an_unregistered_hook_error() -> None:
    data = {"limit": None, "items": [], "hooks": {"before_add": ["ghost_hook"]}, "tags": []}

    with pytest.raises(UnregisteredHookError, match="ghost_hook"):
        ContextPool.from_dict(data)


@pytest.mark.parametrize(
    "data",
    [
        {"limit": 0},
        {"limit": "3"},
        {"items": {"a": 1}},
        {"items": [{"id": "a", "description": "d"}]},
        {"tags": "documents"},
        {"hooks": {"no_such_kind": []}},
        "pool",
    ],
)
def test_from_dict_of_malformed_data_is_a_value_error(data: Any) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies with the field
        ContextPool.from_dict(data)


async def test_to_json_of_content_json_cannot_hold_is_a_type_error_naming_the_field() -> None:
    pool: ContextPool[Any] = ContextPool()
    await pool.add(doc("ok", "fine"))
    await pool.add(doc("bad", {"inner": {1, 2}}))

    with pytest.raises(TypeError, match=re.escape("ContextPool.items[1].content.inner")):
        pool.to_json()
