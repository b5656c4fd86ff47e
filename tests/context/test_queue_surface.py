"""`ContextQueue.history`, the `items` setter, `replace`, reprs and subclass branching
(and the pool's), as pygents users have them."""

from __future__ import annotations

from typing import Any

import pytest

from pygents_ctx import (
    ContextItem,
    ContextPool,
    ContextQueue,
    ContextQueueHook,
    Message,
    hook,
)


def _items(*contents: Any) -> list[ContextItem[Any]]:
    return [ContextItem(content=c) for c in contents]


# -- history -----------------------------------------------------------------------------


async def test_history_is_one_line_per_item_and_messages_read_as_role_and_text() -> None:
    queue = ContextQueue[Any](limit=5)
    await queue.append(
        ContextItem(content=Message("user", "hi")),
        ContextItem(content=Message("assistant", "hello")),
        ContextItem(content={"n": 1}),
    )

    assert queue.history() == "user: hi\nassistant: hello\n{'n': 1}"
    assert queue.history(last=1) == "{'n': 1}"
    assert queue.history(last=0) == ""
    assert queue.history(last=99) == queue.history()


async def test_history_after_evictions_reads_only_the_items_held() -> None:
    queue = ContextQueue[int](limit=2)
    for n in range(5):
        await queue.append(ContextItem(content=n))

    assert queue.history() == "3\n4"
    assert queue.history(last=1) == "4"


@pytest.mark.parametrize(
    ("last", "error"), [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("2", TypeError)]
)
def test_history_refuses_a_last_that_is_not_a_count(last: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"^history last must be (an int|at least 0)"):
        ContextQueue[Any](limit=1).history(last)


# -- the items setter and replace -----------------------------------------------------------


async def test_assigning_items_keeps_the_newest_that_fit_the_limit_and_the_budget() -> None:
    queue = ContextQueue[str](limit=5, max_tokens=6, counter=len)
    await queue.append(*_items("old"))

    queue.items = _items("aa", "bb", "cc", "dd")

    assert [i.content for i in queue] == ["bb", "cc", "dd"]
    assert queue.tokens == 6
    queue.items = []
    assert (queue.items, queue.tokens) == ([], 0)


async def test_assigning_something_that_is_not_an_item_changes_nothing() -> None:
    queue = ContextQueue[Any](limit=3)
    await queue.append(*_items("kept"))

    with pytest.raises(TypeError, match="only accepts ContextItem instances, got 'str'"):
        queue.items = [ContextItem(content="new"), "bare"]  # type: ignore[list-item]

    assert [i.content for i in queue] == ["kept"]


@pytest.mark.parametrize(
    "kind",
    [
        ContextQueueHook.BEFORE_CLEAR,
        ContextQueueHook.AFTER_CLEAR,
        ContextQueueHook.BEFORE_APPEND,
        ContextQueueHook.AFTER_APPEND,
        ContextQueueHook.ON_EVICT,
    ],
)
async def test_assigning_items_while_a_hook_watches_raises_and_changes_nothing(
    kind: ContextQueueHook,
) -> None:
    async def watch(*args: Any) -> None:
        pass

    queue = ContextQueue[Any](limit=3)
    await queue.append(*_items("kept"))
    getattr(queue, kind.value)(watch)

    with pytest.raises(RuntimeError, match=rf"\({kind.value}\).*await queue.replace"):
        queue.items = _items("new")

    assert [i.content for i in queue] == ["kept"]


async def test_a_global_hook_blocks_assignment_only_for_queues_it_would_fire_for() -> None:
    @hook(ContextQueueHook.AFTER_APPEND, tags=["audited"])
    async def audit(*args: Any) -> None:
        pass

    audited = ContextQueue[Any](limit=2, tags=["audited"])
    other = ContextQueue[Any](limit=2, tags=["other"])

    other.items = _items(1)
    with pytest.raises(RuntimeError, match="after_append"):
        audited.items = _items(1)
    assert [i.content for i in other] == [1]


async def test_replace_fires_the_hooks_of_clear_and_append() -> None:
    queue = ContextQueue[Any](limit=2)
    await queue.append(*_items("old"))
    events: list[Any] = []

    @queue.before_clear
    async def before_clear(q: Any, items: list[Any]) -> None:
        events.append(("before_clear", [i.content for i in items]))

    @queue.after_clear
    async def after_clear(q: Any) -> None:
        events.append(("after_clear",))

    @queue.on_evict
    async def evicted(q: Any, item: Any) -> None:
        events.append(("evict", item.content))

    @queue.after_append
    async def appended(new: list[Any], current: list[Any]) -> None:
        events.append(("after_append", [i.content for i in current]))

    await queue.replace(_items(1, 2, 3))

    assert events == [
        ("before_clear", ["old"]),
        ("after_clear",),
        ("evict", 1),
        ("after_append", [2, 3]),
    ]
    await queue.replace([])
    assert queue.items == []


async def test_replace_checks_and_counts_every_item_before_changing_anything() -> None:
    def picky(text: str) -> int:
        if text == "bad":
            raise ValueError("cannot count this")
        return 1

    counted = ContextQueue[str](limit=3, max_tokens=10, counter=picky)
    plain = ContextQueue[Any](limit=3)
    for queue in (counted, plain):
        await queue.append(*_items("kept"))

    with pytest.raises(ValueError, match="cannot count"):
        await counted.replace(_items("fine", "bad"))
    with pytest.raises(TypeError, match="replace"):
        await plain.replace([ContextItem(content=1), 2])  # type: ignore[list-item]

    assert [i.content for i in counted] == ["kept"]
    assert [i.content for i in plain] == ["kept"]


# -- reprs and branching ----------------------------------------------------------------------


async def test_reprs_show_limit_length_and_budget() -> None:
    queue = ContextQueue[str](limit=4, max_tokens=50, counter=len)
    await queue.append(*_items("abc"))

    assert repr(queue) == "ContextQueue(limit=4, len=1, tokens=3, max_tokens=50)"
    assert repr(ContextPool[Any](limit=None)) == "ContextPool(limit=None, len=0)"


class Notes(ContextQueue[Any]):
    """A subclass with pygents' constructor: (limit, tags)."""

    def __init__(self, limit: int, tags: list[str] | None = None) -> None:
        super().__init__(limit, tags)
        self.kind = "notes"


class Budgeted(ContextQueue[str]):
    pass


class Library(ContextPool[Any]):
    pass


async def test_subclasses_branch_as_themselves() -> None:
    notes = Notes(3, ["n"])
    await notes.append(*_items(1, 2, 3))
    budgeted = Budgeted(limit=3, max_tokens=5, counter=len)
    await budgeted.append(*_items("ab", "cd"))
    library = Library(2, ["l"])
    await library.add(ContextItem(content=1, description="d", id="a"))

    notes_child, budget_child, library_child = notes.branch(2), budgeted.branch(), library.branch()

    assert type(notes_child) is Notes
    assert notes_child.kind == "notes"
    assert [i.content for i in notes_child] == [2, 3]
    assert notes_child.tags == frozenset({"n"})
    assert type(budget_child) is Budgeted
    assert (budget_child.max_tokens, budget_child.counter, budget_child.tokens) == (5, len, 4)
    assert type(library_child) is Library
    assert library_child.tags == frozenset({"l"})


async def test_branch_takes_hooks_positionally_and_none_for_none() -> None:
    queue, pool = ContextQueue[Any](limit=2), ContextPool[Any]()

    @queue.after_append
    async def watch_queue(*args: Any) -> None:
        pass

    @pool.after_add
    async def watch_pool(*args: Any) -> None:
        pass

    assert queue.branch(None, None).hooks == []
    assert queue.branch(None, [watch_queue]).hooks == [watch_queue]
    assert pool.branch(None, None).hooks == []
    assert pool.branch(hooks=None).hooks == []
    assert pool.branch().hooks == [watch_pool]
