"""Hooks: global and instance hooks, hook objects, HookRegistry, dispatch and tags."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.compat.conftest import Impl
from tests.compat.marks import covers


def _echo(impl: Impl) -> Any:
    @impl.m.tool
    async def echo(value: Any = None) -> Any:
        return value

    return echo


@covers(
    "hook",
    "Hook",
    "Hook.type",
    "Hook.lock",
    "Hook.metadata",
    "Hook.fn",
    "HookMetadata",
    "HookMetadata.dict",
    "HookMetadata.name",
    "HookMetadata.description",
)
def test_a_decorated_hook_exposes_type_lock_and_metadata(impl: Impl) -> None:
    m = impl.m

    async def watch_fn(turn: Any) -> None:
        """Watch turns."""

    watch = m.hook(m.TurnHook.BEFORE_RUN)(watch_fn)

    @m.hook([m.TurnHook.AFTER_RUN, m.AgentHook.AFTER_TURN], lock=True)
    async def both(*args: Any, **kwargs: Any) -> None:
        pass

    assert isinstance(watch, m.Hook)
    assert watch.type is m.TurnHook.BEFORE_RUN
    assert both.type == (m.TurnHook.AFTER_RUN, m.AgentHook.AFTER_TURN)
    assert watch.lock is None
    assert both.lock is not None
    assert watch.fn is watch_fn
    assert watch.metadata == m.HookMetadata("watch_fn", "Watch turns.")
    assert watch.metadata.name == "watch_fn"
    assert watch.metadata.dict() == {"name": "watch_fn", "description": "Watch turns."}
    assert repr(watch) == (
        "Hook(type=<TurnHook.BEFORE_RUN: 'before_run'>, "
        "metadata=HookMetadata(name='watch_fn', description='Watch turns.'))"
    )
    assert m.HookRegistry.get("watch_fn") is watch


@covers("hook")
def test_a_hook_needs_at_least_one_kind(impl: Impl) -> None:
    with pytest.raises(ValueError, match="at least one type"):
        impl.m.hook([])


@covers("hook", "HookRegistry.register")
def test_a_different_hook_under_a_taken_name_is_refused(impl: Impl) -> None:
    m = impl.m

    def make() -> Any:
        async def twin(turn: Any) -> None:
            pass

        return twin

    first = m.hook(m.TurnHook.BEFORE_RUN)(make())

    with pytest.raises(ValueError, match="'twin' already registered"):
        m.hook(m.TurnHook.BEFORE_RUN)(make())
    with pytest.raises(ValueError, match="'twin' already registered"):
        m.HookRegistry.register(m.HookRegistry.wrap(make(), m.TurnHook.BEFORE_RUN))
    m.HookRegistry.register(first)  # the same hook again is fine
    assert m.HookRegistry.get("twin") is first


@covers("HookRegistry.wrap", "HookRegistry.get")
async def test_wrap_makes_a_registered_hook_that_fires_only_where_attached(impl: Impl) -> None:
    m = impl.m
    _echo(impl)
    seen: list[Any] = []

    async def log_start(turn: Any) -> None:
        seen.append(turn.tool.metadata.name)

    wrapped = m.HookRegistry.wrap(log_start, m.TurnHook.BEFORE_RUN)

    assert isinstance(wrapped, m.Hook)
    assert wrapped.type is m.TurnHook.BEFORE_RUN
    assert m.HookRegistry.get("log_start") is wrapped
    assert m.HookRegistry.wrap(log_start, m.TurnHook.BEFORE_RUN) is wrapped
    await m.Turn("echo").returning()
    assert seen == []  # not global

    turn = m.Turn("echo")
    turn.hooks.append(wrapped)
    await turn.returning()
    assert seen == ["echo"]


@covers(
    "ContextQueue.before_append",
    "ContextPool.before_add",
    "Turn.before_run",
    "Agent.before_turn",
    "Tool.after_invoke",
    "HookRegistry.wrap",
)
async def test_method_decorators_given_a_hook_attach_that_very_object(impl: Impl) -> None:
    m = impl.m
    echo = _echo(impl)
    seen: list[str] = []

    async def on_append(queue: Any, incoming: Any, current: Any) -> None:
        seen.append("queue")

    async def on_add(pool: Any, item: Any) -> None:
        seen.append("pool")

    async def on_run(turn: Any) -> None:
        seen.append("turn")

    async def on_turn(agent: Any) -> None:
        seen.append("agent")

    async def on_result(result: Any) -> None:
        seen.append("tool")

    queue, pool = m.ContextQueue(limit=2), m.ContextPool()
    turn, agent = m.Turn("echo"), m.Agent("a", "d", [echo])
    wrap = m.HookRegistry.wrap
    pairs = [
        (queue.before_append, wrap(on_append, m.ContextQueueHook.BEFORE_APPEND), queue.hooks),
        (pool.before_add, wrap(on_add, m.ContextPoolHook.BEFORE_ADD), pool.hooks),
        (turn.before_run, wrap(on_run, m.TurnHook.BEFORE_RUN), turn.hooks),
        (agent.before_turn, wrap(on_turn, m.AgentHook.BEFORE_TURN), agent.hooks),
    ]
    for decorator, made, hooks in pairs:
        assert decorator(made) is made
        assert hooks == [made]
    on_tool = wrap(on_result, m.ToolHook.AFTER_INVOKE)
    assert echo.after_invoke(on_tool) is on_tool

    await queue.append(m.ContextItem(content=1))
    await pool.add(m.ContextItem(content=1, description="d", id="i"))
    await turn.returning()
    await agent.put(m.Turn("echo"))
    async for _ in agent.run():
        pass

    assert seen == ["queue", "pool", "turn", "tool", "agent", "tool"]


@covers("HookRegistry.get_by_type")
def test_get_by_type_filters_hooks_of_a_kind(impl: Impl) -> None:
    m = impl.m

    async def a(turn: Any) -> None:
        pass

    async def b(*args: Any, **kwargs: Any) -> None:
        pass

    async def c(agent: Any) -> None:
        pass

    first = m.HookRegistry.wrap(a, m.TurnHook.BEFORE_RUN)
    several = m.HookRegistry.wrap(b, [m.TurnHook.BEFORE_RUN, m.AgentHook.AFTER_TURN])
    other = m.HookRegistry.wrap(c, m.AgentHook.BEFORE_TURN)

    hooks = [first, several, other]
    assert m.HookRegistry.get_by_type(m.TurnHook.BEFORE_RUN, hooks) == [first, several]
    assert m.HookRegistry.get_by_type(m.AgentHook.BEFORE_TURN, hooks) == [other]
    assert m.HookRegistry.get_by_type(m.ToolHook.ON_ERROR, hooks) == []


@covers("HookRegistry.unregister", "HookRegistry.clear", "HookRegistry", "UnregisteredHookError")
async def test_unregister_and_clear_forget_hooks_and_stop_global_ones(impl: Impl) -> None:
    m = impl.m
    _echo(impl)
    seen: list[str] = []

    @m.hook(m.TurnHook.BEFORE_RUN)
    async def first(turn: Any) -> None:
        seen.append("first")

    @m.hook(m.TurnHook.BEFORE_RUN)
    async def second(turn: Any) -> None:
        seen.append("second")

    m.HookRegistry.unregister("first")
    await m.Turn("echo").returning()
    assert seen == ["second"]
    with pytest.raises(m.UnregisteredHookError, match="'first' not found") as info:
        m.HookRegistry.get("first")
    assert isinstance(info.value, KeyError)

    m.HookRegistry.clear()
    await m.Turn("echo").returning()
    assert seen == ["second"]
    with pytest.raises(m.UnregisteredHookError):
        m.HookRegistry.get("second")


@covers("hook", "Hook.tags")
async def test_a_global_hook_with_tags_fires_only_for_owners_sharing_one(impl: Impl) -> None:
    m = impl.m
    seen: list[str] = []

    @m.hook(m.ContextQueueHook.AFTER_APPEND, tags={"audited"})
    async def audit(*args: Any) -> None:
        seen.append("audited")

    @m.hook(m.ContextQueueHook.AFTER_APPEND)
    async def everyone(*args: Any) -> None:
        seen.append("all")

    assert audit.tags == frozenset({"audited"})
    await m.ContextQueue(limit=2, tags=["audited", "x"]).append(m.ContextItem(content=1))
    await m.ContextQueue(limit=2, tags=["other"]).append(m.ContextItem(content=1))

    assert seen == ["audited", "all", "all"]


@covers("hook")
async def test_own_hooks_fire_before_global_ones_and_each_function_once(impl: Impl) -> None:
    m = impl.m
    _echo(impl)
    seen: list[str] = []

    @m.hook(m.TurnHook.BEFORE_RUN)
    async def shared(turn: Any) -> None:
        seen.append("shared")

    @m.hook(m.TurnHook.BEFORE_RUN)
    async def global_only(turn: Any) -> None:
        seen.append("global")

    turn = m.Turn("echo")

    @turn.before_run
    async def own(t: Any) -> None:
        seen.append("own")

    turn.hooks.append(shared)
    await turn.returning()

    assert seen == ["own", "shared", "global"]


@covers("hook", "Turn.before_run")
async def test_fixed_kwargs_are_merged_into_hook_calls(impl: Impl) -> None:
    m = impl.m
    _echo(impl)
    seen: list[Any] = []

    @m.hook(m.TurnHook.BEFORE_RUN, env="prod")
    async def tagged(turn: Any, env: str = "dev") -> None:
        seen.append(("global", env))

    turn = m.Turn("echo")

    @turn.before_run(region="eu")
    async def located(t: Any, region: str = "us") -> None:
        seen.append(("own", region))

    await turn.returning()

    assert seen == [("own", "eu"), ("global", "prod")]


@covers("hook", "Hook.lock")
async def test_a_locked_hook_runs_one_call_at_a_time(impl: Impl) -> None:
    m = impl.m
    _echo(impl)
    active = most = 0

    @m.hook(m.TurnHook.BEFORE_RUN, lock=True)
    async def one_at_a_time(turn: Any) -> None:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0.01)
        active -= 1

    await asyncio.gather(*(m.Turn("echo").returning() for _ in range(3)))

    assert most == 1


@covers("AgentHook", "TurnHook", "ToolHook", "ContextQueueHook", "ContextPoolHook")
def test_hook_kinds_have_the_same_members_and_values(impl: Impl) -> None:
    m = impl.m
    expected = {
        "TurnHook": ["before_run", "after_run", "on_timeout", "on_error", "on_complete"],
        "AgentHook": [
            "before_turn",
            "after_turn",
            "on_turn_value",
            "before_put",
            "after_put",
            "on_pause",
            "on_resume",
        ],
        "ToolHook": ["before_invoke", "on_yield", "after_invoke", "on_error"],
        "ContextQueueHook": [
            "before_append",
            "after_append",
            "before_clear",
            "after_clear",
            "on_evict",
        ],
        "ContextPoolHook": [
            "before_add",
            "after_add",
            "before_remove",
            "after_remove",
            "before_clear",
            "after_clear",
            "on_evict",
        ],
    }
    for name, values in expected.items():
        kind = getattr(m, name)
        assert sorted(member.value for member in kind) == sorted(values), name
        assert [member.name for member in kind] == [member.value.upper() for member in kind]
        assert repr(kind(values[0])) == f"<{name}.{values[0].upper()}: '{values[0]}'>"


@covers("HookRegistry.register", "HookRegistry.get", "ContextQueue.from_dict")
async def test_a_plain_function_registers_as_it_is_and_loads_as_a_hook(impl: Impl) -> None:
    m = impl.m
    seen: list[tuple[int, int]] = []

    async def counted(appended: Any, current: Any) -> None:
        seen.append((len(appended), len(current)))

    counted.type = m.ContextQueueHook.AFTER_APPEND  # type: ignore[attr-defined]
    m.HookRegistry.register(counted)
    assert m.HookRegistry.get("counted") is counted
    queue = m.ContextQueue(limit=5)
    queue.hooks.append(counted)
    await queue.append(m.ContextItem(content="x"))
    saved = queue.to_dict()
    assert saved["hooks"] == {"after_append": ["counted"]}

    loaded = m.ContextQueue.from_dict(saved)
    await loaded.append(m.ContextItem(content="y"))
    assert seen == [(1, 1), (1, 2)]


@covers("ContextQueue.hooks", "ContextPool.hooks", "Agent.hooks", "Turn.hooks")
async def test_functions_given_a_type_fire_from_every_owners_hooks_list(impl: Impl) -> None:
    m = impl.m
    echo = _echo(impl)
    seen: list[str] = []

    async def on_add(pool: Any, item: Any) -> None:
        seen.append(f"pool {item.id}")

    async def on_evict(queue: Any, item: Any) -> None:
        seen.append(f"evicted {item.content}")

    async def on_turn(agent: Any) -> None:
        seen.append(f"agent {agent.name}")

    async def on_run(turn: Any) -> None:
        seen.append("turn")

    on_add.type = m.ContextPoolHook.AFTER_ADD  # type: ignore[attr-defined]
    on_evict.type = m.ContextQueueHook.ON_EVICT  # type: ignore[attr-defined]
    on_turn.type = m.AgentHook.BEFORE_TURN  # type: ignore[attr-defined]
    on_run.type = m.TurnHook.BEFORE_RUN  # type: ignore[attr-defined]

    pool, queue = m.ContextPool(), m.ContextQueue(limit=1)
    pool.hooks.append(on_add)
    queue.hooks.extend([on_evict])
    agent = m.Agent("typed", "d", [echo])
    agent.hooks.append(on_turn)
    turn = m.Turn("echo")
    turn.hooks.insert(0, on_run)

    await pool.add(m.ContextItem(content=1, description="d", id="doc"))
    await queue.append(m.ContextItem(content="a"))
    await queue.append(m.ContextItem(content="b"))
    await agent.put(turn)
    async for _ in agent.run():
        pass
    assert seen == ["pool doc", "evicted a", "agent typed", "turn"]
    assert m.HookRegistry.get_by_type(m.ContextQueueHook.ON_EVICT, queue.hooks) != []


@covers("Tool.hooks")
async def test_a_kind_and_hook_pair_in_a_tools_hooks_fires(impl: Impl) -> None:
    m = impl.m
    echo = _echo(impl)
    seen: list[Any] = []

    async def before(*args: Any, **kwargs: Any) -> None:
        seen.append(kwargs)

    echo.hooks.append((m.ToolHook.BEFORE_INVOKE, before))
    assert await echo(value=3) == 3
    assert seen == [{"value": 3}]
