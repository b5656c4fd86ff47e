"""Hook objects: `type`, `lock`, `repr`, `HookRegistry.wrap`, attaching a `Hook`, and
the check, when a hook is made, that it takes its events' arguments."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentHook,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextPoolHook,
    ContextQueue,
    ContextQueueHook,
    Hook,
    HookRegistry,
    ToolHook,
    ToolRegistry,
    Turn,
    TurnHook,
    UnregisteredHookError,
    UnserializableHookError,
    hook,
    tool,
)


async def _noop(*args: Any, **kwargs: Any) -> None:
    pass


def test_type_is_the_kind_or_the_tuple_of_kinds() -> None:
    single = Hook(_noop, TurnHook.BEFORE_RUN)
    several = Hook(_noop, [TurnHook.BEFORE_RUN, AgentHook.AFTER_TURN])

    assert single.type is TurnHook.BEFORE_RUN
    assert single.kinds == (TurnHook.BEFORE_RUN,)
    assert several.type == (TurnHook.BEFORE_RUN, AgentHook.AFTER_TURN)


async def test_lock_is_none_unless_asked_and_then_a_usable_lock() -> None:
    free = Hook(_noop, TurnHook.BEFORE_RUN)
    locked = Hook(_noop, TurnHook.BEFORE_RUN, lock=True)

    assert free.lock is None
    assert locked.lock is not None
    assert not locked.lock.locked()
    async with locked.lock:
        assert locked.lock.locked()
        assert repr(locked.lock) == "<LoopLock locked>"
    assert repr(locked.lock) == "<LoopLock unlocked>"


def test_repr_shows_the_type_and_the_metadata() -> None:
    async def watch(turn: Any) -> None:
        """Watch."""

    assert repr(Hook(watch, TurnHook.BEFORE_RUN)) == (
        "Hook(type=<TurnHook.BEFORE_RUN: 'before_run'>, "
        "metadata=HookMetadata(name='watch', description='Watch.'))"
    )


@pytest.mark.parametrize(
    ("kind", "error", "match"),
    [
        ([], ValueError, "at least one type"),
        ("before_run", TypeError, "TurnHook.BEFORE_RUN"),
        (5, TypeError, "not 5"),
        ([TurnHook.BEFORE_RUN, "after_run"], TypeError, "not 'after_run'"),
    ],
    ids=["empty", "string", "number", "string-in-list"],
)
def test_kinds_are_checked_wherever_a_hook_is_made(kind: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        hook(kind)
    with pytest.raises(error, match=match):
        HookRegistry.wrap(_noop, kind)
    with pytest.raises(error, match=match):
        Hook(_noop, kind)


# -- HookRegistry.wrap -------------------------------------------------------------------


async def test_wrap_registers_a_hook_that_is_not_global() -> None:
    seen: list[str] = []

    @tool
    async def echo() -> None:
        pass

    async def log_start(turn: Turn) -> None:
        seen.append(turn.tool_name)

    wrapped = HookRegistry.wrap(log_start, TurnHook.BEFORE_RUN, lock=True)

    assert HookRegistry.get("log_start") is wrapped
    assert HookRegistry.globals_for(TurnHook.BEFORE_RUN) == []
    assert wrapped.lock is not None
    assert HookRegistry.wrap(log_start, TurnHook.BEFORE_RUN, lock=True) is wrapped
    await Turn(echo).returning()
    assert seen == []
    HookRegistry.add_global(wrapped)
    await Turn(echo).returning()
    assert seen == ["echo"]


def test_wrap_under_a_name_another_hook_holds_gives_an_unsaveable_hook() -> None:
    def make() -> Any:
        async def twin(turn: Turn) -> None:
            pass

        return twin

    first = HookRegistry.wrap(make(), TurnHook.BEFORE_RUN)
    second = HookRegistry.wrap(make(), TurnHook.BEFORE_RUN)
    again = HookRegistry.wrap(first.fn, TurnHook.ON_TIMEOUT)  # same function, other kind

    assert HookRegistry.get("twin") is first

    @tool
    async def noop() -> None:
        return None

    for other in (second, again):
        assert other is not first
        turn = Turn(noop)
        turn.hooks.append(other)
        with pytest.raises(UnserializableHookError, match="twin"):
            turn.to_dict()


def test_wrap_refuses_a_sync_function_and_unknown_fixed_kwargs() -> None:
    def sync(turn: Turn) -> None:
        pass

    async def narrow(turn: Turn) -> None:
        pass

    with pytest.raises(TypeError, match="async def"):
        HookRegistry.wrap(sync, TurnHook.BEFORE_RUN)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'env'"):
        HookRegistry.wrap(narrow, TurnHook.BEFORE_RUN, env="prod")


# -- attaching a Hook --------------------------------------------------------------------


async def test_an_instance_decorator_given_a_hook_attaches_that_object_to_each_owner() -> None:
    evicted: list[Any] = []

    async def count(queue: ContextQueue[Any], item: ContextItem[Any]) -> None:
        evicted.append((queue.limit, item.content))

    counter = HookRegistry.wrap(count, ContextQueueHook.ON_EVICT)
    first, second = ContextQueue[Any](limit=1), ContextQueue[Any](limit=2)

    assert first.on_evict(counter) is counter
    assert second.on_evict(counter) is counter
    await first.append(ContextItem(content="a"), ContextItem(content="b"))
    await second.append(*(ContextItem(content=n) for n in range(3)))

    assert first.hooks == [counter]
    assert second.hooks == [counter]
    assert evicted == [(1, "a"), (2, 0)]
    assert first.to_dict()["hooks"] == {"on_evict": ["count"]}


def test_a_hook_of_other_kinds_is_refused_and_nothing_is_attached() -> None:
    pool = ContextPool[Any]()
    turn_hook = Hook(_noop, TurnHook.BEFORE_RUN)

    with pytest.raises(ValueError, match=r"'_noop' handles <TurnHook\.BEFORE_RUN"):
        pool.before_add(turn_hook)

    assert pool.hooks == []


async def test_a_hook_given_with_options_becomes_a_new_hook_of_its_function() -> None:
    seen: list[str] = []

    async def stamp(pool: ContextPool[Any], item: ContextItem[Any], label: str = "-") -> None:
        seen.append(label)

    original = HookRegistry.wrap(stamp, ContextPoolHook.AFTER_ADD)
    pool = ContextPool[Any]()

    made = pool.after_add(label="copy")(original)
    await pool.add(ContextItem(content=1, description="d", id="x"))

    assert made is not original
    assert made.fn is original.fn
    assert seen == ["copy"]


# -- a hook takes its events' arguments -------------------------------------------------

# Kinds whose events give a fixed number of positional arguments (pygents' numbers).
_FIXED_ARITY = {
    TurnHook.BEFORE_RUN: 1,
    TurnHook.AFTER_RUN: 2,
    TurnHook.ON_COMPLETE: 2,
    AgentHook.BEFORE_TURN: 1,
    AgentHook.AFTER_TURN: 2,
    AgentHook.ON_TURN_VALUE: 3,
    AgentHook.BEFORE_PUT: 2,
    AgentHook.AFTER_PUT: 2,
    ToolHook.AFTER_INVOKE: 1,
    ContextQueueHook.BEFORE_APPEND: 3,
    ContextQueueHook.AFTER_APPEND: 2,
    ContextPoolHook.BEFORE_ADD: 2,
    ContextPoolHook.AFTER_ADD: 2,
}


def _taking(count: int, seen: list[tuple[Any, ...]], extra: str = "") -> Any:
    """An async function with `count` positional parameters, recording what it gets."""
    names = ", ".join(f"p{i}" for i in range(count))
    params = ", ".join(p for p in (names, extra) if p)
    namespace: dict[str, Any] = {"seen": seen}
    exec(
        f"async def taking({params}):\n    seen.append(({names}{',' if count else ''}))", namespace
    )
    return namespace["taking"]


async def _fire_once(kind: Any, hooks: list[Hook]) -> None:
    """Attach `hooks` to a fresh owner dispatching `kind`, and make the event fire once."""

    @tool
    async def echo(value: Any = None) -> Any:
        return value

    if isinstance(kind, TurnHook):
        turn = Turn(echo, kwargs={"value": 5})
        turn.hooks.extend(hooks)
        await turn.returning()
    elif isinstance(kind, AgentHook):
        agent = Agent("arity", "d", [echo])
        agent.hooks.extend(hooks)
        await agent.put(Turn(echo, kwargs={"value": 5}))
        async for _ in agent.run():
            pass
        AgentRegistry.unregister("arity")
    elif isinstance(kind, ToolHook):
        echo.hooks.extend(hooks)
        await echo(value=5)
    elif isinstance(kind, ContextQueueHook):
        queue = ContextQueue[Any](limit=3)
        queue.hooks.extend(hooks)
        await queue.append(ContextItem(content=1))
    else:
        pool = ContextPool[Any]()
        pool.hooks.extend(hooks)
        await pool.add(ContextItem(content=1, description="d", id="i"))
    ToolRegistry.unregister("echo")


@given(data=st.data())
async def test_a_hook_taking_every_argument_gets_exactly_the_events_arguments(
    data: st.DataObject,
) -> None:
    kind = data.draw(st.sampled_from(list(_FIXED_ARITY)))
    every: list[tuple[Any, ...]] = []
    exact: list[tuple[Any, ...]] = []

    async def everything(*args: Any) -> None:
        every.append(args)

    await _fire_once(kind, [Hook(everything, kind), Hook(_taking(_FIXED_ARITY[kind], exact), kind)])

    assert len(every[0]) == _FIXED_ARITY[kind]
    assert exact == every


@given(data=st.data())
def test_a_hook_that_cannot_take_its_events_arguments_is_refused_when_made(
    data: st.DataObject,
) -> None:
    kind = data.draw(st.sampled_from(list(_FIXED_ARITY)))
    arity = _FIXED_ARITY[kind]
    too_few = data.draw(st.integers(min_value=0, max_value=arity - 1))
    fn = data.draw(st.sampled_from([_taking(too_few, []), _taking(arity, [], extra="needed")]))
    make = data.draw(
        st.sampled_from(
            [
                lambda: Hook(fn, kind),
                lambda: HookRegistry.wrap(fn, kind),
                lambda: hook(kind)(fn),
                lambda: HookRegistry.wrap(fn, [kind, ToolHook.BEFORE_INVOKE]),
            ]
        )
    )

    with pytest.raises(TypeError, match=rf"cannot take the arguments of .*{kind.name}"):
        make()
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get("taking")
    assert not list(HookRegistry.globals_for(kind))


def test_an_instance_decorator_refuses_a_hook_that_would_get_other_values() -> None:
    # pygents' after_append passes (appended, current): a hook taking the queue first
    # would get the appended items in it, so it is refused before anything is attached.
    queue = ContextQueue[Any](limit=2)

    with pytest.raises(TypeError, match=r"\(appended, current\).*\(queue, appended, current\)"):

        @queue.after_append
        async def logged(queue: Any, appended: Any, current: Any) -> None:
            pass

    assert queue.hooks == []


async def test_fixed_kwarg_parameters_do_not_take_event_arguments() -> None:
    seen: list[Any] = []

    async def labelled(turn: Turn, output: Any, label: str = "-") -> None:
        seen.append((turn.tool_name, label))

    @tool
    async def echo() -> None:
        pass

    turn = Turn(echo)
    turn.after_run(label="done")(labelled)  # after_run gives (turn, output)
    await turn.returning()

    assert seen == [("echo", "done")]


async def test_a_hook_taking_a_context_parameter_positionally_gets_the_event_argument() -> None:
    seen: list[Any] = []

    async def cleared(queue: ContextQueue[Any]) -> None:
        seen.append(queue)

    queue = ContextQueue[Any](limit=1)
    queue.after_clear(cleared)
    await queue.clear()

    assert seen == [queue]


async def test_a_before_invoke_hook_takes_as_many_call_arguments_as_it_declares() -> None:
    seen: list[Any] = []

    @tool
    async def add(a: int, b: int) -> int:
        return a + b

    @add.before_invoke
    async def first_only(a: int) -> None:
        seen.append(a)

    @add.before_invoke
    async def nothing() -> None:
        seen.append("nothing")

    assert await add(1, 2) == 3
    assert await add(a=3, b=4) == 7
    assert seen == [1, "nothing", 3, "nothing"]


def test_a_tool_on_error_hook_takes_exc_by_keyword() -> None:
    async def failed(exc: BaseException) -> None:
        pass

    async def misnamed(error: BaseException) -> None:
        pass

    Hook(failed, ToolHook.ON_ERROR)
    with pytest.raises(TypeError, match=r"exc=\.\.\."):
        Hook(misnamed, ToolHook.ON_ERROR)


async def test_a_locked_hook_is_serialized() -> None:
    active = most = 0

    async def one_at_a_time(turn: Turn, reason: Any) -> None:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0.01)
        active -= 1

    @tool
    async def echo() -> None:
        pass

    made = Hook(one_at_a_time, TurnHook.ON_COMPLETE, lock=True)
    turns = [Turn(echo) for _ in range(3)]
    for turn in turns:
        turn.hooks.append(made)
    await asyncio.gather(*(turn.returning() for turn in turns))

    assert most == 1


def test_a_required_parameter_no_event_argument_fills_is_refused_by_name() -> None:
    async def needs_more(turn: Turn, *, extra: str) -> None:
        pass

    async def has_a_default(turn: Turn, *, extra: str = "-") -> None:
        pass

    with pytest.raises(TypeError, match=r"required parameter\(s\) 'extra' would get nothing"):
        Hook(needs_more, TurnHook.BEFORE_RUN)
    Hook(has_a_default, TurnHook.BEFORE_RUN)
    Hook(needs_more, TurnHook.BEFORE_RUN, fixed_kwargs={"extra": "x"})
