"""Owners' `hooks` lists make a `Hook` of what pygents code puts in them, and a
function registered as it is works as in pygents."""

from __future__ import annotations

from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentHook,
    ContextItem,
    ContextPool,
    ContextPoolHook,
    ContextQueue,
    ContextQueueHook,
    Hook,
    HookRegistry,
    ToolHook,
    Turn,
    TurnHook,
    hook,
    tool,
)


def _typed(kind: Any, seen: list[Any], label: str) -> Any:
    """An `async def` taking any arguments, given `kind` as pygents code gives it."""

    async def fn(*args: Any, **kwargs: Any) -> None:
        seen.append(label)

    fn.__name__ = fn.__qualname__ = f"typed_{label}"
    fn.type = kind  # type: ignore[attr-defined]
    return fn


async def _evicting_queue(queue: ContextQueue[Any]) -> None:
    for content in ("a", "b", "c"):
        await queue.append(ContextItem(content=content))


async def test_every_way_of_putting_a_function_in_fires_it() -> None:
    seen: list[str] = []
    queue: ContextQueue[Any] = ContextQueue(limit=1)
    queue.hooks.append(_typed(ContextQueueHook.ON_EVICT, seen, "append"))
    queue.hooks.insert(0, _typed(ContextQueueHook.ON_EVICT, seen, "insert"))
    queue.hooks.extend([_typed(ContextQueueHook.ON_EVICT, seen, "extend")])
    queue.hooks += [_typed(ContextQueueHook.ON_EVICT, seen, "iadd")]
    queue.hooks[3] = _typed(ContextQueueHook.ON_EVICT, seen, "setitem")
    queue.hooks[1:2] = [_typed(ContextQueueHook.ON_EVICT, seen, "slice")]

    assert all(isinstance(h, Hook) for h in queue.hooks)
    await _evicting_queue(queue)
    assert seen == ["insert", "slice", "extend", "setitem"] * 2


async def test_a_function_of_several_kinds_fires_for_each() -> None:
    seen: list[str] = []
    queue: ContextQueue[Any] = ContextQueue(limit=1)
    kinds = (ContextQueueHook.BEFORE_APPEND, ContextQueueHook.ON_EVICT)
    queue.hooks.append(_typed(kinds, seen, "both"))
    await _evicting_queue(queue)
    assert seen == ["both"] * 5  # three appends, two evictions


def test_a_refused_element_leaves_the_list_as_it_was() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=1)
    kept = _typed(ContextQueueHook.ON_EVICT, [], "kept")
    queue.hooks.append(kept)
    before = list(queue.hooks)
    with pytest.raises(TypeError, match=r"queue hooks are Hook objects.*not 'note'"):
        queue.hooks.extend([_typed(ContextQueueHook.ON_EVICT, [], "fine"), "note"])
    with pytest.raises(TypeError, match="queue hooks are Hook objects"):
        queue.hooks += [lambda *a: None]  # no `type`: nothing says when it fires
    with pytest.raises(ValueError, match=r"TurnHook\.BEFORE_RUN.*which queues never fire"):
        queue.hooks[0] = _typed(TurnHook.BEFORE_RUN, [], "turn")
    with pytest.raises(TypeError, match="hook kinds are members of"):
        queue.hooks.append(_typed("on_evict", [], "string"))
    assert queue.hooks == before


def test_a_function_that_cannot_take_the_events_arguments_is_refused_on_append() -> None:
    async def too_few(appended: Any) -> None:
        pass

    too_few.type = ContextQueueHook.AFTER_APPEND  # type: ignore[attr-defined]
    queue: ContextQueue[Any] = ContextQueue(limit=1)
    with pytest.raises(TypeError, match=r"cannot take the arguments of .*AFTER_APPEND"):
        queue.hooks.append(too_few)
    assert queue.hooks == []


async def test_pairs_in_a_tools_hooks_become_hooks_of_that_kind() -> None:
    seen: list[Any] = []

    @tool
    async def double(n: int) -> int:
        return 2 * n

    async def before(n: int) -> None:
        seen.append(("before", n))

    async def after(result: int) -> None:
        seen.append(("after", result))

    existing = HookRegistry.wrap(after, ToolHook.AFTER_INVOKE)
    double.hooks.append((ToolHook.BEFORE_INVOKE, before))
    double.hooks.append((ToolHook.ON_YIELD, existing))  # a tool's hook: stacked for this kind
    double.hooks.append((ToolHook.AFTER_INVOKE, existing))

    assert await double(n=4) == 8
    assert seen == [("before", 4), ("after", 8)]
    assert [h.type for h in double.hooks] == [
        ToolHook.BEFORE_INVOKE,
        ToolHook.ON_YIELD,
        ToolHook.AFTER_INVOKE,
    ]
    assert double.hooks[2] is existing
    with pytest.raises(TypeError, match="tool hooks are Hook objects"):
        double.hooks.append((AgentHook.BEFORE_TURN, before))


async def test_a_pair_asked_about_stands_for_the_hook_appending_it_put_in() -> None:
    seen: list[str] = []
    queue: ContextQueue[Any] = ContextQueue(limit=1)

    async def evicted(*args: Any) -> None:
        seen.append("evicted")

    kept = queue.on_evict(evicted)
    cleared = HookRegistry.wrap(evicted, ContextQueueHook.AFTER_CLEAR)

    assert (ContextQueueHook.ON_EVICT, kept) in queue.hooks
    assert (ContextQueueHook.ON_EVICT, evicted) in queue.hooks  # the function it was made of
    assert (ContextQueueHook.ON_EVICT, cleared) in queue.hooks  # another hook of that function
    assert (ContextQueueHook.AFTER_CLEAR, kept) not in queue.hooks  # not for that kind
    assert (TurnHook.BEFORE_RUN, kept) not in queue.hooks  # not a queue's kind: a plain tuple
    assert ("on_evict", kept) not in queue.hooks
    assert queue.hooks.count((ContextQueueHook.ON_EVICT, kept)) == 1

    queue.hooks.remove((ContextQueueHook.ON_EVICT, kept))
    assert queue.hooks == []
    with pytest.raises(ValueError, match="is not in list"):
        queue.hooks.remove((ContextQueueHook.ON_EVICT, kept))
    await _evicting_queue(queue)
    assert seen == []


async def test_branches_and_agents_convert_what_they_are_given() -> None:
    seen: list[str] = []

    @tool
    async def noop() -> None:
        return None

    queue: ContextQueue[Any] = ContextQueue(limit=1)
    child = queue.branch(hooks=[_typed(ContextQueueHook.ON_EVICT, seen, "queue")])
    await _evicting_queue(child)
    pool: ContextPool[Any] = ContextPool(limit=1)
    pool_child = pool.branch(hooks=[_typed(ContextPoolHook.ON_EVICT, seen, "pool")])
    for key in ("a", "b"):
        await pool_child.add(ContextItem(content=1, description="d", id=key))

    agent = Agent("converting", "d", [noop])
    agent.hooks = [_typed(AgentHook.BEFORE_TURN, seen, "agent")]
    agent.turn_hooks = [_typed(TurnHook.BEFORE_RUN, seen, "turn")]
    branch = agent.branch()
    branch.hooks.append(_typed(AgentHook.AFTER_TURN, seen, "branch"))
    await branch.put(Turn(noop))
    async for _ in branch.run():
        pass

    assert seen == ["queue", "queue", "pool", "agent", "turn", "branch"]
    assert len(agent.hooks) == 1  # the branch's list is its own
    with pytest.raises(ValueError, match="which agents never fire"):
        agent.hooks = [_typed(TurnHook.BEFORE_RUN, [], "wrong")]


async def test_a_loaded_turn_keeps_converting() -> None:
    seen: list[str] = []

    @tool
    async def noop() -> None:
        return None

    turn = Turn.from_dict(Turn(noop).to_dict())
    turn.hooks.append(_typed(TurnHook.BEFORE_RUN, seen, "loaded"))
    copy = turn.copy()
    copy.hooks.append(_typed(TurnHook.AFTER_RUN, seen, "copied"))
    await copy.returning()
    assert seen == ["loaded", "copied"]


# -- a function registered as it is ---------------------------------------------


async def plain_watch(appended: Any, current: Any) -> None:
    PLAIN_SEEN.append(len(current))


PLAIN_SEEN: list[int] = []


async def test_a_registered_function_is_returned_and_loads_as_a_hook_of_the_saved_kind() -> None:
    PLAIN_SEEN.clear()
    HookRegistry.register(plain_watch)
    HookRegistry.register(plain_watch)  # again: no change
    assert HookRegistry.get("plain_watch") is plain_watch
    saved = {"limit": 3, "items": [], "hooks": {"after_append": ["plain_watch"]}, "tags": []}

    queue: ContextQueue[Any] = ContextQueue.from_dict(saved)
    await queue.append(ContextItem(content="x"))
    assert PLAIN_SEEN == [1]
    assert queue.to_dict()["hooks"] == {"after_append": ["plain_watch"]}
    assert HookRegistry.get("plain_watch") is plain_watch  # loading registered nothing new


def test_a_hook_made_of_a_registered_function_takes_its_name() -> None:
    HookRegistry.register(plain_watch)
    made = hook(ContextQueueHook.AFTER_APPEND)(plain_watch)
    assert HookRegistry.get("plain_watch") is made
    assert HookRegistry.globals_for(ContextQueueHook.AFTER_APPEND) == [made]
    HookRegistry.register(plain_watch)  # the hook's own function: nothing changes
    assert HookRegistry.get("plain_watch") is made


def test_a_hook_with_options_of_a_registered_function_saves() -> None:
    HookRegistry.register(plain_watch)
    queue: ContextQueue[Any] = ContextQueue(limit=1)
    queue.after_append(lock=True)(plain_watch)
    assert queue.to_dict()["hooks"] == {"after_append": ["plain_watch"]}
    assert isinstance(HookRegistry.get("plain_watch"), Hook)


def test_registering_what_is_not_a_coroutine_function_or_a_taken_name_is_refused() -> None:
    def not_async(turn: Any) -> None:
        pass

    with pytest.raises(TypeError, match="a Hook or an 'async def' function"):
        HookRegistry.register(not_async)  # type: ignore[arg-type]
    HookRegistry.wrap(plain_watch, ContextQueueHook.AFTER_APPEND)

    async def other(appended: Any, current: Any) -> None:
        pass

    other.__name__ = "plain_watch"
    with pytest.raises(ValueError, match="'plain_watch' already registered"):
        HookRegistry.register(other)


async def test_a_list_assigned_to_any_owners_hooks_is_converted() -> None:
    seen: list[str] = []

    @tool
    async def noop() -> None:
        return None

    queue: ContextQueue[Any] = ContextQueue(limit=1)
    queue.hooks = [_typed(ContextQueueHook.ON_EVICT, seen, "queue")]
    pool: ContextPool[Any] = ContextPool(limit=1)
    pool.hooks = (_typed(ContextPoolHook.ON_EVICT, seen, "pool"),)  # any iterable
    noop.hooks = [(ToolHook.AFTER_INVOKE, _typed(None, seen, "tool"))]
    turn = Turn(noop)
    turn.hooks = [_typed(TurnHook.BEFORE_RUN, seen, "turn")]

    await _evicting_queue(queue)
    for key in ("a", "b"):
        await pool.add(ContextItem(content=1, description="d", id=key))
    await turn.returning()
    assert seen == ["queue", "queue", "pool", "turn", "tool"]
    assert all(isinstance(h, Hook) for h in (*queue.hooks, *pool.hooks, *noop.hooks, *turn.hooks))
    assert queue.to_dict()["hooks"] == {"on_evict": ["typed_queue"]}


def test_a_refused_assignment_keeps_the_hooks_there_were() -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=1)
    kept = queue.on_evict(_typed(ContextQueueHook.ON_EVICT, [], "kept"))
    with pytest.raises(ValueError, match="which queues never fire"):
        queue.hooks = [
            _typed(ContextQueueHook.ON_EVICT, [], "new"),
            _typed(TurnHook.BEFORE_RUN, [], "x"),
        ]
    assert queue.hooks == [kept]
