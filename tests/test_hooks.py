"""Hooks: `@hook`, instance decorators, dispatch, context injection and naming."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
    HookKind,
    HookMetadata,
    HookRegistry,
    PygentsError,
    Tool,
    ToolHook,
    Turn,
    TurnHook,
    UnregisteredHookError,
    UnserializableHookError,
    hook,
    tool,
)

# -- helpers ------------------------------------------------------------------


async def _drain(agent: Agent) -> list[tuple[Turn, Any]]:
    return [pair async for pair in agent.run()]


_serial = itertools.count()


def _work_tool(tags: list[str] | None = None) -> Tool[..., Any]:
    """A fresh tool (unique name) returning 7."""

    async def work() -> int:
        return 7

    work.__name__ = f"work_{next(_serial)}"
    return tool(tags=tags)(work)


def _failing_tool() -> Tool[..., Any]:
    """A fresh tool (unique name) raising RuntimeError("boom")."""

    async def explode() -> int:
        raise RuntimeError("boom")

    explode.__name__ = f"explode_{next(_serial)}"
    return tool(explode)


@dataclass(frozen=True)
class Target:
    """An object with an instance decorator `event`, and how to make that event fire once."""

    id: str
    event: str
    kind: HookKind
    make: Callable[[list[str] | None], Any]
    # Fires the event once; returns the positional arguments the spec says hooks get.
    trigger: Callable[[Any], Awaitable[tuple[Any, ...]]]
    # Whether the tags given to `make` are the tags of the object dispatching the event.
    dispatches: bool = True


def _make_agent(tags: list[str] | None = None) -> Agent:
    return Agent(f"worker_{next(_serial)}", "runs work", [_work_tool()], tags=tags)


def _make_failing_agent(tags: list[str] | None = None) -> Agent:
    return Agent(f"failer_{next(_serial)}", "fails", [_failing_tool()], tags=tags)


async def _run_one_turn(agent: Agent) -> tuple[Any, ...]:
    await agent.put(Turn(agent.tools[0]))
    await _drain(agent)
    return (agent,)


async def _fail_one_turn(agent: Agent) -> tuple[Any, ...]:
    turn = Turn(agent.tools[0])
    await agent.put(turn)
    with pytest.raises(RuntimeError, match="boom") as info:
        await _drain(agent)
    return (turn, info.value)


async def _run_turn(turn: Turn) -> tuple[Any, ...]:
    await turn.returning()
    return (turn,)


async def _fail_turn(turn: Turn) -> tuple[Any, ...]:
    with pytest.raises(RuntimeError, match="boom") as info:
        await turn.returning()
    return (turn, info.value)


async def _call_tool(work: Tool[..., Any]) -> tuple[Any, ...]:
    await work()
    return (7,)


async def _evict_one(queue: ContextQueue[str]) -> tuple[Any, ...]:
    old = ContextItem(content="old")
    await queue.append(old, ContextItem(content="new"))
    return (queue, old)


async def _add_one(pool: ContextPool[str]) -> tuple[Any, ...]:
    item = ContextItem(content="body", description="a document", id="doc")
    await pool.add(item)
    return (pool, item)


TARGETS = [
    Target("agent.before_turn", "before_turn", AgentHook.BEFORE_TURN, _make_agent, _run_one_turn),
    Target(
        "agent.on_error",
        "on_error",
        TurnHook.ON_ERROR,
        _make_failing_agent,
        _fail_one_turn,
        dispatches=False,  # the agent's turn dispatches, with the turn's tags
    ),
    Target(
        "turn.before_run",
        "before_run",
        TurnHook.BEFORE_RUN,
        lambda tags: Turn(_work_tool(), tags=tags),
        _run_turn,
    ),
    Target(
        "turn.on_error",
        "on_error",
        TurnHook.ON_ERROR,
        lambda tags: Turn(_failing_tool(), tags=tags),
        _fail_turn,
    ),
    Target("tool.after_invoke", "after_invoke", ToolHook.AFTER_INVOKE, _work_tool, _call_tool),
    Target(
        "queue.on_evict",
        "on_evict",
        ContextQueueHook.ON_EVICT,
        lambda tags: ContextQueue(limit=1, tags=tags),
        _evict_one,
    ),
    Target(
        "pool.before_add",
        "before_add",
        ContextPoolHook.BEFORE_ADD,
        lambda tags: ContextPool(tags=tags),
        _add_one,
    ),
]
TAG_DISPATCHERS = [t for t in TARGETS if t.dispatches]
SAVABLE = [t for t in TARGETS if t.id != "tool.after_invoke"]  # a tool has no to_dict()


def _hooks_of(owner: Any) -> list[Hook]:
    return [*owner.hooks, *getattr(owner, "turn_hooks", [])]


def _attach_with(queue: ContextQueue[str], attach: str, **fixed: Any) -> Callable[..., Hook]:
    """`@hook(AFTER_CLEAR, ...)` (global) or `@queue.after_clear(...)` (instance)."""
    if attach == "global":
        return hook(ContextQueueHook.AFTER_CLEAR, **fixed)
    return queue.after_clear(**fixed)


class Recorder:
    """Collects calls of hooks under a label."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def hook_fn(self, label: str) -> Callable[..., Awaitable[None]]:
        async def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append(label)

        record.__name__ = f"record_{label}"
        return record


# -- @hook ------------------------------------------------------------------------


async def test_global_hook_fires_for_every_object_dispatching_its_kind() -> None:
    seen: list[ContextQueue[str]] = []

    @hook(ContextQueueHook.AFTER_CLEAR)
    async def cleared(queue: ContextQueue[str]) -> None:
        seen.append(queue)

    first, second = ContextQueue[str](limit=1), ContextQueue[str](limit=1)
    await first.clear()
    await second.clear()

    assert seen == [first, second]


async def test_global_hook_with_a_list_of_kinds_fires_for_each_kind() -> None:
    seen: list[Any] = []

    @hook([ContextQueueHook.AFTER_CLEAR, ContextPoolHook.AFTER_CLEAR])
    async def cleared(*args: Any, **kwargs: Any) -> None:
        seen.append(args[0])

    queue, pool = ContextQueue[str](limit=1), ContextPool[str]()
    await queue.clear()
    await pool.clear()

    assert seen == [queue, pool]
    assert cleared.kinds == (ContextQueueHook.AFTER_CLEAR, ContextPoolHook.AFTER_CLEAR)


def test_hook_with_an_empty_list_of_kinds_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least one"):
        hook([])


@pytest.mark.parametrize(
    "kind",
    ["before_run", 3, None, [TurnHook.BEFORE_RUN, "after_run"]],
    ids=["string", "int", "none", "list-with-a-string"],
)
def test_hook_with_something_that_is_not_a_hook_kind_is_rejected(kind: Any) -> None:
    with pytest.raises(TypeError):
        hook(kind)


def test_a_kind_given_as_a_string_is_named_whole_in_the_error() -> None:
    with pytest.raises(TypeError, match="'before_run'"):
        hook("before_run")  # type: ignore[arg-type]


def _sync(*args: Any) -> None:
    pass


async def _agen(*args: Any) -> Any:
    yield None


@pytest.mark.parametrize("fn", [_sync, _agen, lambda *a: None], ids=["def", "async-gen", "lambda"])
@pytest.mark.parametrize("attach", ["global", "instance"])
def test_hook_needs_an_async_def_function(fn: Callable[..., Any], attach: str) -> None:
    queue = ContextQueue[str](limit=1)
    decorate = _attach_with(queue, attach)
    with pytest.raises(TypeError, match="async def"):
        decorate(fn)
    assert queue.hooks == []
    assert HookRegistry.globals_for(ContextQueueHook.AFTER_CLEAR) == []
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get(fn.__name__)


# -- fixed kwargs and lock -------------------------------------------------------------


@pytest.mark.parametrize("attach", ["global", "instance"])
async def test_fixed_kwargs_are_merged_into_every_call(attach: str) -> None:
    queue = ContextQueue[str](limit=1)
    received: list[str] = []

    @_attach_with(queue, attach, env="prod")
    async def stamp(q: ContextQueue[str], env: str = "dev") -> None:
        received.append(env)

    await queue.clear()
    await queue.clear()

    assert received == ["prod", "prod"]


@pytest.mark.parametrize("attach", ["global", "instance"])
async def test_fixed_kwarg_zero_arg_function_is_evaluated_per_call(attach: str) -> None:
    queue = ContextQueue[str](limit=1)
    counter = itertools.count(1)
    received: list[int] = []

    @_attach_with(queue, attach, n=lambda: next(counter))
    async def stamp(q: ContextQueue[str], n: int) -> None:
        received.append(n)

    await queue.clear()
    await queue.clear()

    assert received == [1, 2]


@pytest.mark.parametrize("attach", ["global", "instance"])
def test_fixed_kwarg_not_in_the_signature_is_rejected(attach: str) -> None:
    queue = ContextQueue[str](limit=1)

    async def stamp(q: ContextQueue[str]) -> None:
        pass

    with pytest.raises(TypeError, match="env"):
        _attach_with(queue, attach, env="prod")(stamp)
    assert queue.hooks == []
    assert HookRegistry.globals_for(ContextQueueHook.AFTER_CLEAR) == []
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get("stamp")


async def test_fixed_kwarg_is_accepted_by_a_function_with_var_kwargs() -> None:
    queue = ContextQueue[str](limit=1)
    received: list[dict[str, Any]] = []

    @hook(ContextQueueHook.AFTER_CLEAR, env="prod")
    async def stamp(*args: Any, **kwargs: Any) -> None:
        received.append(kwargs)

    await queue.clear()

    assert received == [{"env": "prod"}]


async def test_call_kwarg_overrides_a_fixed_kwarg_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    received: list[str] = []

    @hook(ContextQueueHook.AFTER_CLEAR, env="prod")
    async def stamp(q: object, env: str) -> None:
        received.append(env)

    with caplog.at_level(logging.WARNING, logger="pygents_ctx"):
        await stamp(None, env="test")

    assert received == ["test"]
    assert "env" in caplog.text


@pytest.mark.parametrize(("lock", "expected_overlap"), [(True, 1), (False, 3)])
@pytest.mark.parametrize("attach", ["global", "instance"])
async def test_lock_serializes_concurrent_calls_of_a_hook(
    lock: bool, expected_overlap: int, attach: str
) -> None:
    work = _work_tool()
    active = 0
    most = 0

    async def slow(result: int) -> None:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0.01)
        active -= 1

    if attach == "global":
        hook(ToolHook.AFTER_INVOKE, lock=lock)(slow)
    else:
        work.after_invoke(lock=lock)(slow)

    await asyncio.gather(work(), work(), work())

    assert most == expected_overlap


# -- instance decorators ------------------------------------------------------------


@pytest.mark.parametrize("form", ["bare", "options", "plain-call"])
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.id)
async def test_instance_decorator_attaches_a_hook_to_that_object_only(
    target: Target, form: str
) -> None:
    owner, other = target.make(None), target.make(None)
    received: list[str] = []
    attach = getattr(owner, target.event)

    if form == "bare":

        @attach
        async def watch(*args: Any, env: str = "dev", **kwargs: Any) -> None:
            received.append(env)

    elif form == "options":

        @attach(lock=True, env="prod")
        async def watch(*args: Any, env: str = "dev", **kwargs: Any) -> None:
            received.append(env)

    else:

        async def plain(*args: Any, env: str = "dev", **kwargs: Any) -> None:
            received.append(env)

        watch = attach(plain)

    assert isinstance(watch, Hook)
    assert _hooks_of(owner) == [watch]
    assert watch.kinds == (target.kind,)
    assert (watch.lock is not None) is (form == "options")
    await target.trigger(owner)
    assert received == ["prod" if form == "options" else "dev"]
    await target.trigger(other)
    assert len(received) == 1


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.id)
async def test_instance_hook_receives_the_documented_arguments(target: Target) -> None:
    owner = target.make(None)
    received: list[tuple[Any, ...]] = []

    @getattr(owner, target.event)
    async def watch(*args: Any) -> None:
        received.append(args)

    expected = await target.trigger(owner)

    assert received == [expected]


# -- dispatch ---------------------------------------------------------------------------


async def test_own_hooks_fire_in_list_order_then_global_hooks() -> None:
    rec = Recorder()
    queue = ContextQueue[str](limit=1)
    hook(ContextQueueHook.AFTER_CLEAR)(rec.hook_fn("global"))
    queue.after_clear(rec.hook_fn("second"))
    queue.hooks.insert(0, Hook(rec.hook_fn("first"), (ContextQueueHook.AFTER_CLEAR,)))

    await queue.clear()

    assert rec.calls == ["first", "second", "global"]


async def test_own_hooks_of_other_kinds_do_not_fire() -> None:
    rec = Recorder()
    queue = ContextQueue[str](limit=1)
    queue.before_clear(rec.hook_fn("before"))
    queue.on_evict(rec.hook_fn("evict"))

    await queue.append(ContextItem(content="x"))

    assert rec.calls == []


async def test_hook_attached_to_an_object_and_global_fires_once() -> None:
    rec = Recorder()
    queue = ContextQueue[str](limit=1)
    shared = hook(ContextQueueHook.AFTER_CLEAR)(rec.hook_fn("shared"))
    queue.hooks.append(shared)

    await queue.clear()

    assert rec.calls == ["shared"]


async def test_hook_appended_twice_to_an_object_fires_once() -> None:
    rec = Recorder()
    queue = ContextQueue[str](limit=1)
    twice = queue.after_clear(rec.hook_fn("twice"))
    queue.hooks.append(twice)

    await queue.clear()

    assert rec.calls == ["twice"]


async def test_same_function_decorated_twice_as_global_fires_once() -> None:
    rec = Recorder()
    fn = rec.hook_fn("again")
    first = hook(ContextQueueHook.AFTER_CLEAR)(fn)
    hook(ContextQueueHook.AFTER_CLEAR)(fn)

    await ContextQueue[str](limit=1).clear()

    assert HookRegistry.get("record_again") is first
    assert rec.calls == ["again"]


@pytest.mark.parametrize(
    ("hook_tags", "owner_tags", "fires"),
    [
        (None, None, True),
        (None, ["x"], True),
        (["a", "b"], ["b", "c"], True),
        (["a"], ["a"], True),
        (["a"], ["c"], False),
        (["a"], None, False),
    ],
    ids=["untagged-untagged", "untagged-tagged", "overlap", "same", "disjoint", "owner-untagged"],
)
@pytest.mark.parametrize("target", TAG_DISPATCHERS, ids=lambda t: t.id)
async def test_global_hook_with_tags_fires_only_for_objects_sharing_a_tag(
    target: Target, hook_tags: list[str] | None, owner_tags: list[str] | None, fires: bool
) -> None:
    rec = Recorder()
    hook(target.kind, tags=hook_tags)(rec.hook_fn("global"))
    owner = target.make(owner_tags)

    await target.trigger(owner)

    assert rec.calls == (["global"] if fires else [])


async def test_instance_hooks_ignore_tags() -> None:
    rec = Recorder()
    tagged = hook(ContextQueueHook.AFTER_CLEAR, tags=["elsewhere"])(rec.hook_fn("tagged"))
    queue = ContextQueue[str](limit=1, tags=["here"])
    queue.hooks.append(tagged)

    await queue.clear()

    assert rec.calls == ["tagged"]


@pytest.mark.parametrize(
    ("raiser", "expected_calls"),
    [("own", ["own-ok"]), ("global", ["own-ok", "own-after"])],
)
async def test_a_raising_hook_stops_the_dispatch_and_propagates(
    raiser: str, expected_calls: list[str]
) -> None:
    rec = Recorder()
    queue = ContextQueue[str](limit=1)

    async def own_raise(*args: Any) -> None:
        raise LookupError("hook failed")

    async def global_raise(*args: Any) -> None:
        raise LookupError("hook failed")

    queue.after_clear(rec.hook_fn("own-ok"))
    if raiser == "own":
        queue.after_clear(own_raise)
    queue.after_clear(rec.hook_fn("own-after"))
    if raiser == "global":
        hook(ContextQueueHook.AFTER_CLEAR)(global_raise)
    hook(ContextQueueHook.AFTER_CLEAR)(rec.hook_fn("global-after"))

    with pytest.raises(LookupError, match="hook failed"):
        await queue.clear()

    assert rec.calls == expected_calls


async def test_tool_on_error_and_turn_on_error_are_different_events() -> None:
    assert TurnHook.ON_ERROR != ToolHook.ON_ERROR
    rec = Recorder()
    hook(TurnHook.ON_ERROR)(rec.hook_fn("turn"))
    hook(ToolHook.ON_ERROR)(rec.hook_fn("tool"))

    # A tool failing outside any turn: only the tool event.
    with pytest.raises(RuntimeError):
        await _failing_tool()()
    assert rec.calls == ["tool"]

    # A turn failing before its tool runs: only the turn event.
    rec.calls.clear()
    turn = Turn(_work_tool())

    @turn.before_run
    async def refuse(turn: Turn) -> None:
        raise RuntimeError("not now")

    with pytest.raises(RuntimeError, match="not now"):
        await turn.returning()
    assert rec.calls == ["turn"]


# -- context injection -----------------------------------------------------------------


@pytest.mark.parametrize(
    "kind",
    [
        TurnHook.BEFORE_RUN,
        TurnHook.AFTER_RUN,
        TurnHook.ON_COMPLETE,
        AgentHook.BEFORE_TURN,
        AgentHook.ON_TURN_VALUE,
        AgentHook.AFTER_TURN,
        ToolHook.BEFORE_INVOKE,
        ToolHook.AFTER_INVOKE,
    ],
    ids=lambda k: f"{type(k).__name__}.{k.name}",
)
async def test_hook_context_parameters_receive_the_running_agents_instances(
    kind: HookKind,
) -> None:
    seen: list[tuple[Any, Any]] = []

    @hook(kind)
    async def capture(*args: Any, queue: ContextQueue[Any], pool: ContextPool[Any]) -> None:
        seen.append((queue, pool))

    agent = _make_agent()
    await _run_one_turn(agent)

    assert len(seen) == 1
    assert seen[0][0] is agent.context_queue
    assert seen[0][1] is agent.context_pool


@pytest.mark.parametrize("after_an_agent_ran", [False, True])
async def test_optional_context_parameters_get_none_outside_an_agent(
    after_an_agent_ran: bool,
) -> None:
    if after_an_agent_ran:
        await _run_one_turn(_make_agent())
    seen: list[tuple[Any, Any]] = []

    @hook(TurnHook.BEFORE_RUN)
    async def capture(
        turn: Turn, queue: ContextQueue[Any] | None, pool: ContextPool[Any] | None
    ) -> None:
        seen.append((queue, pool))

    await Turn(_work_tool()).returning()

    assert seen == [(None, None)]


async def test_required_context_parameter_outside_an_agent_raises_type_error() -> None:
    @hook(TurnHook.BEFORE_RUN)
    async def needs_queue(turn: Turn, queue: ContextQueue[Any]) -> None:
        pass

    with pytest.raises(TypeError, match="queue"):
        await Turn(_work_tool()).returning()


@pytest.mark.parametrize("inside_agent", [False, True])
async def test_queue_hook_gets_its_own_queue_as_first_argument(inside_agent: bool) -> None:
    other: ContextQueue[str] = ContextQueue(limit=5)
    seen: list[tuple[Any, Any]] = []

    @other.before_append
    async def appending(
        q: ContextQueue[str], items: list[Any], current: list[Any], pool: ContextPool[Any] | None
    ) -> None:
        seen.append((q, pool))

    @tool
    async def jot() -> int:
        await other.append(ContextItem(content="note"))
        return 1

    if inside_agent:
        agent = Agent("writer", "writes notes", [jot])
        await agent.put(Turn(jot))
        await _drain(agent)
        assert seen == [(other, agent.context_pool)]
        assert other is not agent.context_queue
    else:
        await jot()
        assert seen == [(other, None)]


# -- metadata and naming -----------------------------------------------------------------


async def test_hook_metadata_has_name_and_description() -> None:
    @hook(TurnHook.AFTER_RUN, tags=["a"])
    async def audit(turn: Turn, output: Any) -> None:
        """Write the output to the audit log."""

    @hook(TurnHook.AFTER_RUN)
    async def silent(turn: Turn, output: Any) -> None:
        pass

    assert audit.metadata == HookMetadata("audit", "Write the output to the audit log.")
    assert audit.metadata.dict() == {
        "name": "audit",
        "description": "Write the output to the audit log.",
    }
    assert silent.metadata.dict() == {"name": "silent", "description": None}
    assert audit.kinds == (TurnHook.AFTER_RUN,)
    assert audit.tags == frozenset({"a"})
    assert audit.fn.__name__ == "audit"


@pytest.mark.parametrize("attach", ["global", "instance"])
def test_every_hook_is_registered_under_its_function_name(attach: str) -> None:
    queue = ContextQueue[str](limit=1)

    async def on_cleared(q: ContextQueue[str]) -> None:
        pass

    made = _attach_with(queue, attach)(on_cleared)

    assert HookRegistry.get("on_cleared") is made


def _closure() -> Callable[..., Awaitable[None]]:
    async def clashing(*args: Any) -> None:
        pass

    return clashing


@pytest.mark.parametrize("first_attach", ["global", "instance"])
def test_global_hook_with_a_taken_name_is_rejected(first_attach: str) -> None:
    queue = ContextQueue[str](limit=1)
    first = _attach_with(queue, first_attach)(_closure())

    with pytest.raises(ValueError, match="clashing"):
        hook(ContextQueueHook.AFTER_CLEAR)(_closure())

    assert HookRegistry.get("clashing") is first
    expected_globals = [first] if first_attach == "global" else []
    assert HookRegistry.globals_for(ContextQueueHook.AFTER_CLEAR) == expected_globals


def test_registering_the_same_hook_again_is_fine() -> None:
    made = hook(ContextQueueHook.AFTER_CLEAR)(_closure())

    HookRegistry.register(made)

    assert HookRegistry.get("clashing") is made


@pytest.mark.parametrize("target", SAVABLE, ids=lambda t: t.id)
async def test_instance_hook_with_a_clashing_name_fires_but_its_owner_cannot_be_saved(
    target: Target,
) -> None:
    keeper, clasher = target.make(None), target.make(None)
    calls: list[str] = []

    def make_hook(label: str) -> Callable[..., Awaitable[None]]:
        async def clashing(*args: Any) -> None:
            calls.append(label)

        return clashing

    getattr(keeper, target.event)(make_hook("keeper"))
    getattr(clasher, target.event)(make_hook("clasher"))

    saved = keeper.to_dict()
    hooks_key = "turn_hooks" if target.id == "agent.on_error" else "hooks"
    assert saved[hooks_key] == {target.kind.value: ["clashing"]}
    with pytest.raises(UnserializableHookError, match="clashing") as info:
        clasher.to_dict()
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, PygentsError)
    await target.trigger(clasher)
    assert calls == ["clasher"]
