"""ContextQueue: a bounded window of ContextItems, its hooks, branching and saving."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import weakref
from datetime import UTC, datetime
from typing import Any

import pytest

from pygents_ctx import (
    ContextItem,
    ContextQueue,
    ContextQueueHook,
    Hook,
    UnregisteredHookError,
    hook,
)
from pygents_ctx.context import ContextQueue as ContextQueueFromContext

Event = tuple[Any, ...]


def make_items(*contents: Any) -> list[ContextItem[Any]]:
    return [ContextItem(content=c) for c in contents]


def contents(queue: ContextQueue[Any]) -> list[Any]:
    return [item.content for item in queue.items]


async def filled(limit: int, *values: Any) -> ContextQueue[Any]:
    queue: ContextQueue[Any] = ContextQueue(limit=limit)
    await queue.append(*make_items(*values))
    return queue


def record_queue_hooks(queue: ContextQueue[Any]) -> list[Event]:
    """Attach one instance hook per kind; each call records (kind, *args)."""
    events: list[Event] = []

    @queue.before_append
    async def rec_before_append(q: Any, incoming: Any, current: Any) -> None:
        events.append(("before_append", q, incoming, current))

    @queue.after_append
    async def rec_after_append(appended: Any, current: Any) -> None:
        events.append(("after_append", appended, current))

    @queue.on_evict
    async def rec_on_evict(q: Any, item: Any) -> None:
        events.append(("on_evict", q, item))

    @queue.before_clear
    async def rec_before_clear(q: Any, items: Any) -> None:
        events.append(("before_clear", q, items))

    @queue.after_clear
    async def rec_after_clear(q: Any) -> None:
        events.append(("after_clear", q, list(q.items)))

    return events


def record_global_queue_hooks() -> list[Event]:
    """A global hook on every queue kind; records its arguments."""
    events: list[Event] = []

    @hook(list(ContextQueueHook))
    async def global_queue_recorder(*args: Any, **kwargs: Any) -> None:
        events.append(args)

    return events


def kinds(events: list[Event]) -> list[str]:
    return [event[0] for event in events]


# -- construction -----------------------------------------------------------


def test_context_queue_is_importable_from_the_context_package() -> None:
    assert ContextQueueFromContext is ContextQueue


def test_new_queue_is_empty_and_keeps_its_limit() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=4)

    assert queue.limit == 4
    assert queue.items == []
    assert len(queue) == 0
    assert list(queue) == []
    assert not queue


@pytest.mark.parametrize("limit", [0, -1, -100])
def test_limit_below_one_is_a_value_error(limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        ContextQueue(limit=limit)


@pytest.mark.parametrize("limit", ["3", 2.5, True, None])
def test_limit_that_is_not_an_int_is_a_type_error(limit: Any) -> None:
    with pytest.raises(TypeError, match="limit"):
        ContextQueue(limit=limit)


def test_limit_is_required() -> None:
    with pytest.raises(TypeError):
        ContextQueue()  # type: ignore[call-arg]


async def test_parametrized_queue_constructs_and_works_at_runtime() -> None:
    queue = ContextQueue[str](limit=2)

    await queue.append(ContextItem(content="a"), ContextItem(content="b"))
    await queue.append(ContextItem(content="c"))

    assert isinstance(queue, ContextQueue)
    assert contents(queue) == ["b", "c"]


# -- appending and reading --------------------------------------------------


async def test_append_takes_several_items_and_keeps_their_order() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=10)

    await queue.append(*make_items("a", "b"))
    await queue.append(*make_items("c"))

    assert contents(queue) == ["a", "b", "c"]
    assert len(queue) == 3
    assert bool(queue)
    assert list(queue) == queue.items


async def test_appending_past_the_limit_evicts_the_oldest() -> None:
    queue = await filled(3, 1, 2, 3)

    await queue.append(*make_items(4, 5))

    assert contents(queue) == [3, 4, 5]


async def test_a_batch_larger_than_the_limit_keeps_its_newest_items() -> None:
    queue = await filled(2, "old")

    await queue.append(*make_items("a", "b", "c"))

    assert contents(queue) == ["b", "c"]


@pytest.mark.parametrize("bad", ["text", 1, None, {"content": "x"}])
@pytest.mark.parametrize("position", [0, 1, 2])
async def test_append_of_a_non_item_is_a_type_error_and_appends_nothing(
    bad: Any, position: int
) -> None:
    queue = await filled(5, "kept")
    events = record_queue_hooks(queue)
    arguments: list[Any] = make_items("x", "y")
    arguments.insert(position, bad)

    with pytest.raises(TypeError, match="ContextItem"):
        await queue.append(*arguments)

    assert contents(queue) == ["kept"]
    assert events == []


async def test_items_returns_a_copy() -> None:
    queue = await filled(5, "a", "b")

    snapshot = queue.items
    snapshot.append(ContextItem(content="intruder"))
    snapshot.clear()

    assert contents(queue) == ["a", "b"]


async def test_iterating_while_appending_sees_the_items_at_the_start() -> None:
    queue = await filled(5, "a", "b")

    seen = []
    for item in queue:
        seen.append(item.content)
        await queue.append(ContextItem(content="later"))

    assert seen == ["a", "b"]


# -- append hooks -----------------------------------------------------------


async def test_before_append_gets_the_queue_the_incoming_items_and_a_snapshot_before() -> None:
    old = make_items("a")
    queue: ContextQueue[Any] = ContextQueue(limit=5)
    await queue.append(*old)
    events = record_queue_hooks(queue)
    new = make_items("b", "c")

    await queue.append(*new)

    kind, received_queue, incoming, current = events[0]
    assert kind == "before_append"
    assert received_queue is queue
    assert incoming == new
    assert current == old  # still the state before the append: a snapshot, not a view


async def test_after_append_gets_the_appended_items_and_a_snapshot_after() -> None:
    queue = await filled(3, "a", "b")
    events = record_queue_hooks(queue)
    new = make_items("c", "d")

    await queue.append(*new)
    await queue.append(ContextItem(content="e"))

    first_after = next(e for e in events if e[0] == "after_append")
    _, appended, current = first_after  # no queue first: pygents passes (appended, current)
    assert appended == new
    assert [i.content for i in current] == ["b", "c", "d"]


async def test_snapshots_kept_by_hooks_never_change_and_changing_them_leaves_the_queue_alone() -> (
    None
):
    queue = await filled(2, "a", "b")
    kept: list[tuple[str, list[ContextItem[Any]]]] = []

    @queue.before_append
    async def keep_before(q: Any, incoming: list[Any], current: list[Any]) -> None:
        kept.append(("before", current))
        incoming.clear()
        current.append(ContextItem(content="intruder"))

    @queue.after_append
    async def keep_after(appended: list[Any], current: list[Any]) -> None:
        kept.append(("after", current))
        appended.clear()
        current.clear()

    await queue.append(ContextItem(content="c"))
    # Many more appends: the window turns over several times after the snapshots were taken.
    queue.hooks.clear()
    for n in range(20):
        await queue.append(ContextItem(content=n))

    assert [(when, [i.content for i in items]) for when, items in kept] == [
        ("before", ["a", "b", "intruder"]),  # as the hook left them, nothing later
        ("after", []),
    ]
    assert contents(queue) == [18, 19]


async def test_evicted_items_are_released_once_the_window_has_moved_on() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=3)
    first = ContextItem(content="first")
    await queue.append(first)
    released = weakref.ref(first)
    del first

    for n in range(10):
        await queue.append(ContextItem(content=n))

    assert released() is None


async def test_on_evict_fires_once_per_evicted_item_oldest_first() -> None:
    queue = await filled(2, "a", "b")
    events = record_queue_hooks(queue)

    await queue.append(*make_items("c", "d", "e"))

    evictions = [e for e in events if e[0] == "on_evict"]
    assert [e[1] for e in evictions] == [queue, queue, queue]
    assert [e[2].content for e in evictions] == ["a", "b", "c"]


async def test_append_events_run_before_then_evictions_then_after() -> None:
    queue = await filled(2, "a", "b")
    events = record_queue_hooks(queue)

    await queue.append(*make_items("c", "d"))

    assert kinds(events) == ["before_append", "on_evict", "on_evict", "after_append"]


async def test_append_into_room_fires_no_eviction() -> None:
    queue = await filled(3, "a")
    events = record_queue_hooks(queue)

    await queue.append(*make_items("b", "c"))

    assert kinds(events) == ["before_append", "after_append"]


async def test_hook_list_accepts_hooks_appended_directly() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=1)
    evicted: list[Any] = []

    async def collect_evicted(q: Any, item: Any) -> None:
        evicted.append(item.content)

    queue.hooks.append(Hook(collect_evicted, (ContextQueueHook.ON_EVICT,)))
    await queue.append(*make_items("a", "b"))

    assert evicted == ["a"]


async def test_a_before_append_hook_that_raises_propagates_and_appends_nothing() -> None:
    queue = await filled(3, "a")

    @queue.before_append
    async def refuse(q: Any, incoming: Any, current: Any) -> None:
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        await queue.append(ContextItem(content="b"))

    assert contents(queue) == ["a"]


async def test_concurrent_appends_with_a_slow_hook_never_exceed_the_limit() -> None:
    limit = 3
    queue = await filled(limit, 0, 1, 2)
    sizes: list[int] = []
    evicted: list[Any] = []

    @queue.before_append
    async def slow(q: Any, incoming: Any, current: Any) -> None:
        await asyncio.sleep(0.01)

    @queue.on_evict
    async def count_evicted(q: Any, item: Any) -> None:
        sizes.append(len(q))
        evicted.append(item.content)

    await asyncio.gather(*(queue.append(ContextItem(content=n)) for n in range(3, 8)))

    assert len(queue) == limit
    assert max(sizes) <= limit
    assert sorted(evicted + contents(queue)) == list(range(8))
    assert len(evicted) == 8 - limit


# -- clearing ---------------------------------------------------------------


async def test_clear_removes_every_item_and_the_queue_is_usable_after() -> None:
    queue = await filled(3, "a", "b")

    await queue.clear()

    assert queue.items == []
    assert not queue
    await queue.append(ContextItem(content="c"))
    assert contents(queue) == ["c"]


async def test_clear_hooks_get_a_snapshot_before_and_the_empty_queue_after() -> None:
    old = make_items("a", "b")
    queue: ContextQueue[Any] = ContextQueue(limit=3)
    await queue.append(*old)
    events = record_queue_hooks(queue)

    await queue.clear()

    assert events == [("before_clear", queue, old), ("after_clear", queue, [])]


# -- branching --------------------------------------------------------------


async def test_branch_copies_items_and_limit() -> None:
    parent = await filled(4, "a", "b")

    child = parent.branch()

    assert child is not parent
    assert child.limit == 4
    assert child.items == parent.items


async def test_branch_is_independent_both_ways() -> None:
    parent = await filled(4, "a", "b")
    child = parent.branch()

    await child.append(ContextItem(content="child"))
    await parent.append(ContextItem(content="parent"))

    assert contents(parent) == ["a", "b", "parent"]
    assert contents(child) == ["a", "b", "child"]
    await child.clear()
    assert contents(parent) == ["a", "b", "parent"]


async def test_branch_with_a_smaller_limit_keeps_the_newest_items() -> None:
    parent = await filled(5, 1, 2, 3, 4, 5)

    child = parent.branch(limit=2)

    assert child.limit == 2
    assert contents(child) == [4, 5]
    assert contents(parent) == [1, 2, 3, 4, 5]


async def test_branch_with_a_larger_limit_keeps_everything_and_has_room() -> None:
    parent = await filled(2, 1, 2)

    child = parent.branch(limit=4)
    await child.append(*make_items(3, 4))

    assert contents(child) == [1, 2, 3, 4]


def test_branch_with_a_limit_below_one_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="limit"):
        ContextQueue(limit=3).branch(limit=0)


async def test_branch_inherits_hooks_by_default_as_a_separate_list() -> None:
    parent: ContextQueue[Any] = ContextQueue(limit=1)
    evicted: list[Any] = []

    @parent.on_evict
    async def note_eviction(q: Any, item: Any) -> None:
        evicted.append((q, item.content))

    child = parent.branch()
    await child.append(*make_items("a", "b"))

    assert evicted == [(child, "a")]
    child.hooks.clear()
    assert len(parent.hooks) == 1


async def test_branch_with_empty_hooks_fires_none() -> None:
    parent: ContextQueue[Any] = ContextQueue(limit=1)
    events = record_queue_hooks(parent)

    child = parent.branch(hooks=[])
    await child.append(*make_items("a", "b"))
    await child.clear()

    assert events == []
    assert child.hooks == []


async def test_branch_with_given_hooks_fires_only_those() -> None:
    parent: ContextQueue[Any] = ContextQueue(limit=3)
    parent_events = record_queue_hooks(parent)
    other_events: list[Any] = []

    async def other_hook(q: Any, incoming: Any, current: Any) -> None:
        other_events.append([i.content for i in incoming])

    child = parent.branch(hooks=[Hook(other_hook, (ContextQueueHook.BEFORE_APPEND,))])
    await child.append(ContextItem(content="x"))

    assert other_events == [["x"]]
    assert parent_events == []


async def test_branch_copies_tags() -> None:
    parent: ContextQueue[Any] = ContextQueue(limit=3, tags=["session", "monitored"])

    assert parent.branch().tags == frozenset({"session", "monitored"})


async def test_branching_fires_no_hooks_even_when_items_are_dropped() -> None:
    parent = await filled(4, 1, 2, 3, 4)
    instance_events = record_queue_hooks(parent)
    global_events = record_global_queue_hooks()

    parent.branch()
    parent.branch(limit=1)
    parent.branch(hooks=[])

    assert instance_events == []
    assert global_events == []


# -- tags and global hooks --------------------------------------------------


@pytest.mark.parametrize("tags", [["a", "b", "a"], ("a", "b"), frozenset({"a", "b"}), {"a", "b"}])
def test_tags_are_stored_as_a_frozenset(tags: Any) -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=3, tags=tags)

    assert queue.tags == frozenset({"a", "b"})
    assert isinstance(queue.tags, frozenset)


def test_tags_default_to_empty() -> None:
    assert ContextQueue(limit=3).tags == frozenset()


async def test_global_hook_with_tags_fires_only_for_queues_sharing_a_tag() -> None:
    seen: list[Any] = []

    @hook(ContextQueueHook.BEFORE_APPEND, tags=["monitored"])
    async def watch_monitored(queue: Any, incoming: Any, current: Any) -> None:
        seen.append(queue)

    monitored: ContextQueue[Any] = ContextQueue(limit=3, tags=["session", "monitored"])
    other: ContextQueue[Any] = ContextQueue(limit=3, tags=["session"])
    untagged: ContextQueue[Any] = ContextQueue(limit=3)

    for queue in (monitored, other, untagged):
        await queue.append(ContextItem(content="x"))

    assert seen == [monitored]


async def test_global_hook_without_tags_fires_for_every_queue() -> None:
    seen: list[Any] = []

    @hook(ContextQueueHook.ON_EVICT)
    async def watch_evictions(queue: Any, item: Any) -> None:
        seen.append((queue, item.content))

    tagged: ContextQueue[Any] = ContextQueue(limit=1, tags=["x"])
    untagged: ContextQueue[Any] = ContextQueue(limit=1)
    for queue in (tagged, untagged):
        await queue.append(*make_items("old", "new"))

    assert seen == [(tagged, "old"), (untagged, "old")]


async def test_instance_hooks_fire_before_global_hooks() -> None:
    order: list[str] = []

    @hook(ContextQueueHook.BEFORE_CLEAR)
    async def global_clear(queue: Any, items: Any) -> None:
        order.append("global")

    queue: ContextQueue[Any] = ContextQueue(limit=3)

    @queue.before_clear
    async def own_clear(q: Any, items: Any) -> None:
        order.append("own")

    await queue.clear()

    assert order == ["own", "global"]


# -- serialization ----------------------------------------------------------


async def test_to_dict_has_limit_items_hooks_tags_in_that_order() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=3, tags=["session", "monitored"])
    await queue.append(ContextItem(content="a"), ContextItem(content={"n": 1}, description="d"))

    @queue.before_append
    async def saved_before(q: Any, incoming: Any, current: Any) -> None:
        pass

    @queue.on_evict
    async def saved_evict(q: Any, item: Any) -> None:
        pass

    saved = queue.to_dict()

    assert list(saved) == ["limit", "items", "hooks", "tags"]
    assert saved == {
        "limit": 3,
        "items": [
            {"id": None, "description": None, "content": "a"},
            {"id": None, "description": "d", "content": {"n": 1}},
        ],
        "hooks": {"before_append": ["saved_before"], "on_evict": ["saved_evict"]},
        "tags": ["monitored", "session"],
    }


def test_to_dict_of_an_empty_queue() -> None:
    assert ContextQueue(limit=2).to_dict() == {"limit": 2, "items": [], "hooks": {}, "tags": []}


async def test_from_dict_restores_items_limit_tags_and_working_hooks() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=2, tags=["t"])
    await queue.append(*make_items("a", "b"))
    evicted: list[Any] = []

    @queue.on_evict
    async def restored_evict(q: Any, item: Any) -> None:
        evicted.append((q, item.content))

    restored = ContextQueue.from_dict(queue.to_dict())
    await restored.append(ContextItem(content="c"))

    assert restored.limit == 2
    assert restored.tags == frozenset({"t"})
    assert contents(restored) == ["b", "c"]
    assert evicted == [(restored, "a")]
    assert contents(queue) == ["a", "b"]


async def test_from_dict_round_trip_gives_the_same_dict() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=4, tags=["x"])
    await queue.append(*make_items("a", [1, 2], {"k": None}))

    @queue.after_clear
    async def round_trip_after_clear(q: Any) -> None:
        pass

    saved = queue.to_dict()
    restored = ContextQueue.from_dict(saved)

    assert restored.to_dict() == saved
    assert restored.items == queue.items


async def test_from_dict_fires_no_hooks() -> None:
    global_events = record_global_queue_hooks()
    queue: ContextQueue[Any] = ContextQueue(limit=2)
    instance_events = record_queue_hooks(queue)
    data = {
        "limit": 2,
        "items": [{"id": None, "description": None, "content": n} for n in (1, 2)],
        "hooks": {"before_append": ["rec_before_append"], "on_evict": ["rec_on_evict"]},
        "tags": [],
    }

    restored = ContextQueue.from_dict(data)

    assert contents(restored) == [1, 2]
    assert global_events == []
    assert instance_events == []


def test_from_dict_needs_only_the_limit() -> None:
    restored = ContextQueue.from_dict({"limit": 3})

    assert restored.limit == 3
    assert restored.items == []
    assert restored.hooks == []
    assert restored.tags == frozenset()


def test_from_dict_with_more_items_than_the_limit_is_a_value_error() -> None:
    data = {"limit": 1, "items": [{"content": 1}, {"content": 2}]}

    with pytest.raises(ValueError, match="limit"):
        ContextQueue.from_dict(data)


def test_from_dict_with_an_unknown_hook_name_is_an_unregistered_hook_error() -> None:
    data = {"limit": 1, "items": [], "hooks": {"on_evict": ["nobody_defined_this"]}, "tags": []}

    with pytest.raises(UnregisteredHookError, match="nobody_defined_this"):
        ContextQueue.from_dict(data)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"items": []},
        {"limit": 0},
        {"limit": "3"},
        {"limit": 2, "items": "not a list"},
        {"limit": 2, "items": [{"id": "i"}]},
        {"limit": 2, "tags": "session"},
        {"limit": 2, "hooks": ["on_evict"]},
        {"limit": 2, "hooks": {"no_such_kind": []}},
        [2],
    ],
)
def test_from_dict_of_malformed_data_is_a_value_error(data: Any) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies with the field
        ContextQueue.from_dict(data)


async def test_to_json_is_bytes_and_from_json_takes_bytes_or_str() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=3, tags=["t"])
    await queue.append(*make_items("a", {"nested": [1, 2.5, None, True]}))

    data = queue.to_json()

    assert isinstance(data, bytes)
    for source in (data, data.decode()):
        restored = ContextQueue.from_json(source)
        assert restored.to_dict() == queue.to_dict()
        assert restored.items == queue.items


@pytest.mark.parametrize("text", [b"{not json", "", "[1, 2"])
def test_from_json_of_invalid_json_is_a_value_error(text: bytes | str) -> None:
    with pytest.raises(ValueError, match="JSON"):
        ContextQueue.from_json(text)


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (object(), "ContextQueue.items[1].content"),
        ({1, 2}, "ContextQueue.items[1].content"),
        (b"raw", "ContextQueue.items[1].content"),
        (datetime(2024, 1, 1, tzinfo=UTC), "ContextQueue.items[1].content"),
        (Point(1), "ContextQueue.items[1].content"),
        ({"ok": [1, object()]}, "ContextQueue.items[1].content.ok[1]"),
        ({1: "int key"}, "ContextQueue.items[1].content"),
        (float("nan"), "ContextQueue.items[1].content"),
        (float("inf"), "ContextQueue.items[1].content"),
        (2**64, "ContextQueue.items[1].content"),
    ],
)
async def test_to_json_of_content_json_cannot_hold_is_a_type_error_naming_the_field(
    content: Any, field: str
) -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=3)
    await queue.append(ContextItem(content="fine"), ContextItem(content=content))

    with pytest.raises(TypeError, match=re.escape(field)):
        queue.to_json()
