"""The `Agent`: construction, running, routing, branching, pausing and its hooks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentHook,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextPoolHook,
    ContextQueue,
    ContextQueueHook,
    SafeExecutionError,
    StopReason,
    Tool,
    ToolRegistry,
    Turn,
    TurnTimeoutError,
    UnregisteredAgentError,
    UnregisteredToolError,
    hook,
    tool,
)

# -- helpers -------------------------------------------------------------------


async def drain(agent: Agent) -> list[tuple[Turn, Any]]:
    """Run `agent` to the end and collect what it yields."""
    return [pair async for pair in agent.run()]


async def settle(rounds: int = 50) -> None:
    """Let other tasks run until they are blocked on something other than the loop."""
    for _ in range(rounds):
        await asyncio.sleep(0)


@pytest.fixture
def echo() -> Tool[..., Any]:
    @tool
    async def echo(value: Any) -> Any:
        return value

    return echo


@pytest.fixture
def boom() -> Tool[..., Any]:
    @tool
    async def boom(message: str = "boom") -> None:
        raise RuntimeError(message)

    return boom


def values(pairs: list[tuple[Turn, Any]]) -> list[Any]:
    return [value for _, value in pairs]


# -- construction ----------------------------------------------------------------


def test_agent_registers_itself_under_its_name(echo: Tool[..., Any]) -> None:
    agent = Agent("alpha", "does things", [echo])

    assert AgentRegistry.get("alpha") is agent
    assert agent.name == "alpha"
    assert agent.description == "does things"
    assert agent.tools == [echo]


def test_taken_name_raises_and_first_agent_stays(echo: Tool[..., Any]) -> None:
    first = Agent("alpha", "first", [echo])

    with pytest.raises(ValueError, match="alpha"):
        Agent("alpha", "second", [echo])

    assert AgentRegistry.get("alpha") is first
    assert AgentRegistry.get("alpha").description == "first"


def _unregistered_tool() -> Tool[..., Any]:
    async def loose(value: int) -> int:
        return value

    return Tool(loose)


def _remade_tool() -> Tool[..., Any]:
    @tool
    async def fetch(value: int) -> int:
        return value

    stale = fetch
    ToolRegistry.unregister("fetch")

    @tool
    async def fetch(value: int) -> int:
        return value * 2

    assert ToolRegistry.get("fetch") is not stale
    return stale


def _unregistered_after_use() -> Tool[..., Any]:
    @tool
    async def gone(value: int) -> int:
        return value

    ToolRegistry.unregister("gone")
    return gone


@pytest.mark.parametrize(
    ("make_tool", "error"),
    [
        (_unregistered_tool, UnregisteredToolError),
        (_remade_tool, ValueError),
        (_unregistered_after_use, UnregisteredToolError),
    ],
    ids=["constructed-directly", "unregistered-and-remade", "unregistered"],
)
def test_tool_not_held_by_registry_is_refused(
    make_tool: Callable[[], Tool[..., Any]], error: type[Exception]
) -> None:
    stale = make_tool()

    with pytest.raises(error, match=stale.key):
        Agent("alpha", "d", [stale])

    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("alpha")


async def test_default_context_stores_are_a_ten_item_queue_and_an_unbounded_pool(
    echo: Tool[..., Any],
) -> None:
    agent = Agent("alpha", "d", [echo])

    assert isinstance(agent.context_queue, ContextQueue)
    assert agent.context_queue.limit == 10
    assert isinstance(agent.context_pool, ContextPool)
    assert agent.context_pool.limit is None
    for i in range(12):
        await agent.context_queue.append(ContextItem(content=i))
    for i in range(50):
        await agent.context_pool.add(ContextItem(content=i, description="n", id=str(i)))
    assert [item.content for item in agent.context_queue] == list(range(2, 12))
    assert len(agent.context_pool) == 50


def test_given_context_stores_are_used_as_they_are(echo: Tool[..., Any]) -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=3)
    pool: ContextPool[Any] = ContextPool(limit=4)

    agent = Agent("alpha", "d", [echo], context_queue=queue, context_pool=pool)

    assert agent.context_queue is queue
    assert agent.context_pool is pool


def test_each_agent_gets_its_own_default_stores(echo: Tool[..., Any]) -> None:
    first = Agent("a", "d", [echo])
    second = Agent("b", "d", [echo])

    assert first.context_queue is not second.context_queue
    assert first.context_pool is not second.context_pool


async def test_root_tool_brings_its_subtools() -> None:
    @tool
    async def files(path: str) -> str:
        return f"files:{path}"

    @files.subtool
    async def read(path: str) -> str:
        return f"read:{path}"

    @read.subtool
    async def head(path: str) -> str:
        return f"head:{path}"

    agent = Agent("alpha", "d", [files])
    for key in ("files", "files.read", "files.read.head"):
        await agent.put(Turn(key, kwargs={"path": "x"}))

    assert values(await drain(agent)) == ["files:x", "read:x", "head:x"]


# -- put / run -------------------------------------------------------------------


async def test_put_of_turn_for_a_tool_the_agent_lacks_raises(echo: Tool[..., Any]) -> None:
    @tool
    async def other() -> None:
        return None

    agent = Agent("alpha", "d", [echo])

    with pytest.raises(ValueError, match="other"):
        await agent.put(Turn(other))

    assert agent.queue == []


async def test_run_drains_the_queue_in_order_yielding_turn_and_value(
    echo: Tool[..., Any],
) -> None:
    agent = Agent("alpha", "d", [echo])
    turns = [Turn(echo, kwargs={"value": v}) for v in ("a", "b", "c")]
    for turn in turns:
        await agent.put(turn)

    pairs = await drain(agent)

    assert [turn for turn, _ in pairs] == turns
    assert values(pairs) == ["a", "b", "c"]
    assert agent.queue == []
    assert not agent.is_running


async def test_agent_queue_lists_waiting_turns_next_first(echo: Tool[..., Any]) -> None:
    agent = Agent("alpha", "d", [echo])
    turns = [Turn(echo, kwargs={"value": v}) for v in (1, 2)]
    for turn in turns:
        await agent.put(turn)

    listed = agent.queue
    listed.clear()

    assert agent.queue == turns


async def test_run_of_an_empty_queue_returns_at_once(echo: Tool[..., Any]) -> None:
    agent = Agent("alpha", "d", [echo])

    assert await drain(agent) == []
    assert not agent.is_running


async def _slow(delay: float) -> str:
    await asyncio.sleep(delay)
    return "late"


@pytest.mark.parametrize(
    ("kwargs", "turn_timeout", "error"),
    [({"fail": True}, 60, RuntimeError), ({"delay": 1.0}, 0.05, TurnTimeoutError)],
    ids=["tool-error", "timeout"],
)
async def test_turn_error_propagates_out_of_run_and_agent_can_run_again(
    echo: Tool[..., Any], kwargs: dict[str, Any], turn_timeout: float, error: type[Exception]
) -> None:
    @tool
    async def risky(fail: bool = False, delay: float = 0) -> str:
        if fail:
            raise RuntimeError("tool failed")
        return await _slow(delay)

    agent = Agent("alpha", "d", [risky, echo])
    await agent.put(Turn(echo, kwargs={"value": "before"}))
    await agent.put(Turn(risky, kwargs=kwargs, timeout=turn_timeout))
    await agent.put(Turn(echo, kwargs={"value": "after"}))
    seen: list[Any] = []

    async def consume() -> None:
        async for _, value in agent.run():
            seen.append(value)

    with pytest.raises(error):
        await consume()

    assert seen == ["before"]
    assert not agent.is_running
    assert agent.current_turn is None
    assert values(await drain(agent)) == ["after"]


# -- routing -----------------------------------------------------------------------


async def test_returned_turn_is_queued_and_runs_in_the_same_run(echo: Tool[..., Any]) -> None:
    @tool
    async def plan(value: str) -> Turn:
        return Turn(echo, kwargs={"value": f"planned {value}"})

    agent = Agent("alpha", "d", [plan, echo])
    await agent.put(Turn(plan, kwargs={"value": "x"}))
    await agent.put(Turn(echo, kwargs={"value": "queued"}))

    pairs = await drain(agent)

    # The produced turn is not yielded; it joins the end of the queue and runs.
    assert values(pairs) == ["queued", "planned x"]
    assert all(turn.tool is echo for turn, _ in pairs)


async def test_context_item_without_id_goes_to_the_context_queue(echo: Tool[..., Any]) -> None:
    agent = Agent("alpha", "d", [echo])
    item = ContextItem(content="note")
    await agent.put(Turn(echo, kwargs={"value": item}))

    assert await drain(agent) == []
    assert agent.context_queue.items == [item]
    assert len(agent.context_pool) == 0


async def test_context_item_with_id_goes_to_the_context_pool(echo: Tool[..., Any]) -> None:
    agent = Agent("alpha", "d", [echo])
    item = ContextItem(content="body", description="a doc", id="doc-1")
    await agent.put(Turn(echo, kwargs={"value": item}))

    assert await drain(agent) == []
    assert agent.context_pool.get("doc-1") is item
    assert len(agent.context_queue) == 0


@pytest.mark.parametrize(
    "value",
    ["text", 0, None, {"content": "x"}, [ContextItem(content="inside a list")], (1, 2)],
    ids=["str", "zero", "none", "dict", "list-of-items", "tuple"],
)
async def test_other_values_are_yielded_untouched(echo: Tool[..., Any], value: Any) -> None:
    agent = Agent("alpha", "d", [echo])
    turn = Turn(echo, kwargs={"value": value})
    await agent.put(turn)

    pairs = await drain(agent)

    assert len(pairs) == 1
    assert pairs[0][0] is turn
    assert pairs[0][1] is value
    assert len(agent.context_queue) == 0
    assert len(agent.context_pool) == 0


async def test_generator_values_are_routed_one_by_one_as_produced(
    echo: Tool[..., Any],
) -> None:
    checks: dict[str, bool] = {}
    agent: Agent

    @tool
    async def stream() -> AsyncIterator[Any]:
        note = ContextItem(content="note")
        yield note
        checks["item queued before next value"] = agent.context_queue.items == [note]
        doc = ContextItem(content="doc", description="d", id="doc")
        yield doc
        checks["doc pooled before next value"] = "doc" in agent.context_pool
        follow_up = Turn(echo, kwargs={"value": "follow-up"})
        yield follow_up
        checks["turn queued before next value"] = agent.queue == [follow_up]
        yield "plain"

    agent = Agent("alpha", "d", [stream, echo])
    await agent.put(Turn(stream))

    pairs = await drain(agent)

    assert values(pairs) == ["plain", "follow-up"]
    assert checks == {
        "item queued before next value": True,
        "doc pooled before next value": True,
        "turn queued before next value": True,
    }


async def test_generator_values_are_yielded_to_the_caller_as_produced() -> None:
    produced: list[int] = []

    @tool
    async def count() -> AsyncIterator[int]:
        for i in range(3):
            produced.append(i)
            yield i

    agent = Agent("alpha", "d", [count])
    await agent.put(Turn(count))

    seen: list[tuple[int, list[int]]] = []
    async for _, value in agent.run():
        seen.append((value, list(produced)))

    assert seen == [(0, [0]), (1, [0, 1]), (2, [0, 1, 2])]


# -- ON_TURN_VALUE -----------------------------------------------------------------------


async def test_on_turn_value_fires_after_routing_and_before_yielding() -> None:
    events: list[tuple[str, Any]] = []
    note = ContextItem(content="note")

    @tool
    async def stream() -> AsyncIterator[Any]:
        yield note
        yield "plain"

    agent = Agent("alpha", "d", [stream])

    @agent.on_turn_value
    async def watch(agent: Agent, turn: Turn, value: Any) -> None:
        events.append(("hook", value, note in agent.context_queue.items))

    await agent.put(Turn(stream))
    async for _, value in agent.run():
        events.append(("caller", value, None))

    assert events == [
        ("hook", note, True),  # routed values fire too, already routed
        ("hook", "plain", True),
        ("caller", "plain", None),  # the caller gets the value after the hook ran
    ]


async def test_on_turn_value_receives_agent_turn_and_value(echo: Tool[..., Any]) -> None:
    seen: list[tuple[Agent, Turn, Any]] = []
    agent = Agent("alpha", "d", [echo])

    @agent.on_turn_value
    async def watch(agent: Agent, turn: Turn, value: Any) -> None:
        seen.append((agent, turn, value))

    turn = Turn(echo, kwargs={"value": 7})
    await agent.put(turn)
    await drain(agent)

    assert seen == [(agent, turn, 7)]


# -- send -----------------------------------------------------------------------------


async def test_send_puts_the_turn_on_the_named_agent(echo: Tool[..., Any]) -> None:
    sender = Agent("sender", "d", [echo])
    receiver = Agent("receiver", "d", [echo])
    turn = Turn(echo, kwargs={"value": "hi"})

    await sender.send("receiver", turn)

    assert sender.queue == []
    assert receiver.queue == [turn]
    assert values(await drain(receiver)) == ["hi"]


async def test_send_to_an_unknown_agent_raises(echo: Tool[..., Any]) -> None:
    sender = Agent("sender", "d", [echo])

    with pytest.raises(UnregisteredAgentError, match="nobody"):
        await sender.send("nobody", Turn(echo, kwargs={"value": 1}))


async def test_send_of_a_turn_the_receiver_cannot_run_raises(echo: Tool[..., Any]) -> None:
    @tool
    async def other() -> None:
        return None

    sender = Agent("sender", "d", [echo, other])
    receiver = Agent("receiver", "d", [echo])

    with pytest.raises(ValueError, match="other"):
        await sender.send("receiver", Turn(other))
    assert receiver.queue == []


# -- branch ---------------------------------------------------------------------------


@pytest.fixture
async def parent(echo: Tool[..., Any]) -> Agent:
    """An agent with queued turns, context, hooks, turn hooks and tags."""
    agent = Agent("parent", "the parent", [echo], tags=["team"])
    for value in ("one", "two"):
        await agent.put(Turn(echo, kwargs={"value": value}, tags=["t"]))
    await agent.context_queue.append(ContextItem(content="a"), ContextItem(content="b"))
    await agent.context_pool.add(ContextItem(content="body", description="doc", id="doc"))

    @agent.before_turn
    async def parent_before_turn(agent: Agent) -> None:
        return None

    @agent.on_complete
    async def parent_on_complete(turn: Turn, reason: StopReason) -> None:
        return None

    return agent


async def test_branch_copies_queue_context_hooks_turn_hooks_and_tags(parent: Agent) -> None:
    child = parent.branch("child")

    assert AgentRegistry.get("child") is child
    assert child.description == "the parent"
    assert child.tools == parent.tools
    assert child.tags == frozenset({"team"})
    assert [(t.tool_name, t.kwargs, t.tags) for t in child.queue] == [
        (t.tool_name, t.kwargs, t.tags) for t in parent.queue
    ]
    assert all(c is not p for c, p in zip(child.queue, parent.queue, strict=True))
    assert child.context_queue is not parent.context_queue
    assert child.context_queue.items == parent.context_queue.items
    assert child.context_queue.limit == parent.context_queue.limit
    assert child.context_pool is not parent.context_pool
    assert child.context_pool.items == parent.context_pool.items
    assert child.hooks == parent.hooks
    assert child.turn_hooks == parent.turn_hooks
    assert values(await drain(child)) == ["one", "two"]


async def test_branch_overrides_description_tools_and_hooks(parent: Agent) -> None:
    @tool
    async def extra() -> str:
        return "extra"

    echo = ToolRegistry.get("echo")

    child = parent.branch("child", description="the child", tools=[echo, extra], hooks=[])

    assert child.description == "the child"
    assert child.tools == [echo, extra]
    assert child.hooks == []
    assert parent.tools == [echo]
    assert len(parent.hooks) == 1
    await child.put(Turn(extra))
    assert values(await drain(child)) == ["one", "two", "extra"]


async def test_branch_and_parent_are_independent_afterwards(parent: Agent) -> None:
    echo = ToolRegistry.get("echo")
    child = parent.branch("child")

    @hook(AgentHook.AFTER_TURN)
    async def global_after_turn(agent: Agent, turn: Turn) -> None:
        return None

    await parent.put(Turn(echo, kwargs={"value": "parent only"}))
    await child.put(Turn(echo, kwargs={"value": "child only"}))
    child.queue[0].kwargs = {"value": "changed"}  # the child's copy, not the parent's turn
    await parent.context_queue.append(ContextItem(content="parent note"))
    await child.context_queue.append(ContextItem(content="child note"))
    await parent.context_pool.add(ContextItem(content=1, description="p", id="parent-doc"))
    await child.context_pool.add(ContextItem(content=2, description="c", id="child-doc"))
    await child.context_pool.remove("doc")
    parent.hooks.append(global_after_turn)
    child.turn_hooks.clear()

    assert [t.kwargs["value"] for t in parent.queue] == ["one", "two", "parent only"]
    assert [t.kwargs["value"] for t in child.queue] == ["changed", "two", "child only"]
    assert [i.content for i in parent.context_queue] == ["a", "b", "parent note"]
    assert [i.content for i in child.context_queue] == ["a", "b", "child note"]
    assert [i.id for i in parent.context_pool] == ["doc", "parent-doc"]
    assert [i.id for i in child.context_pool] == ["child-doc"]
    assert len(parent.hooks) == 2
    assert len(child.hooks) == 1
    assert len(parent.turn_hooks) == 1
    assert child.turn_hooks == []


async def test_branch_context_queue_with_smaller_limit_keeps_the_newest(
    echo: Tool[..., Any],
) -> None:
    agent = Agent("parent", "d", [echo])
    await agent.context_queue.append(*(ContextItem(content=i) for i in range(5)))

    child = agent.branch("child")
    window = child.context_queue.branch(limit=2)

    assert [item.content for item in child.context_queue] == [0, 1, 2, 3, 4]
    assert [item.content for item in window] == [3, 4]
    assert window.limit == 2


async def test_no_hooks_fire_while_branching(echo: Tool[..., Any]) -> None:
    fired: list[str] = []

    async def record(*args: Any, **kwargs: Any) -> None:
        fired.append("fired")

    agent = Agent("parent", "d", [echo])
    await agent.put(Turn(echo, kwargs={"value": 1}))
    await agent.context_queue.append(ContextItem(content="a"))
    await agent.context_pool.add(ContextItem(content="b", description="b", id="b"))
    queue_kinds = list(ContextQueueHook)
    pool_kinds = list(ContextPoolHook)
    for kind in queue_kinds:
        agent.context_queue.hooks.append(hook(kind)(_named(record, f"q_{kind.value}")))
    for kind in pool_kinds:
        agent.context_pool.hooks.append(hook(kind)(_named(record, f"p_{kind.value}")))
    for kind in AgentHook:
        agent.hooks.append(hook(kind)(_named(record, f"a_{kind.value}")))

    child = agent.branch("child")

    assert fired == []
    # The hooks are live: the child's first append does fire them.
    await child.context_queue.append(ContextItem(content="c"))
    assert fired


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await fn(*args, **kwargs)

    wrapper.__name__ = name
    return wrapper


async def test_branch_with_tools_lacking_a_queued_turns_tool_raises(
    parent: Agent,
) -> None:
    @tool
    async def unrelated() -> None:
        return None

    with pytest.raises(ValueError, match="echo"):
        parent.branch("child", tools=[unrelated])

    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("child")


def test_branch_under_a_taken_name_raises(echo: Tool[..., Any]) -> None:
    agent = Agent("parent", "d", [echo])

    with pytest.raises(ValueError, match="parent"):
        agent.branch("parent")

    assert AgentRegistry.get("parent") is agent


# -- pause / resume -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["before_turn", "after_turn"])
async def test_pause_from_a_hook_finishes_the_turn_and_waits_for_resume(kind: str) -> None:
    log: list[str] = []

    @tool
    async def work(name: str) -> str:
        log.append(f"start {name}")
        await asyncio.sleep(0)
        log.append(f"end {name}")
        return name

    agent = Agent("alpha", "d", [work])

    pauses: list[str] = []

    async def pause_once(*args: Any) -> None:
        if not pauses:
            pauses.append(kind)
            agent.pause()

    getattr(agent, kind)(_named(pause_once, "pause_once"))
    await agent.put(Turn(work, kwargs={"name": "first"}))
    await agent.put(Turn(work, kwargs={"name": "second"}))
    consumer = asyncio.create_task(drain(agent))

    await settle()
    assert log == ["start first", "end first"]
    assert agent.is_paused
    assert agent.is_running
    assert not consumer.done()

    agent.resume()
    pairs = await consumer

    assert values(pairs) == ["first", "second"]
    assert log == ["start first", "end first", "start second", "end second"]
    assert not agent.is_paused


async def test_pause_and_resume_are_idempotent_plain_calls(echo: Tool[..., Any]) -> None:
    events: list[str] = []
    agent = Agent("alpha", "d", [echo])

    @agent.on_pause
    async def paused(agent: Agent) -> None:
        events.append(f"pause {agent.name}")

    @agent.on_resume
    async def resumed(agent: Agent) -> None:
        events.append(f"resume {agent.name}")

    assert agent.resume() is None
    assert agent.pause() is None
    agent.pause()
    assert agent.is_paused
    agent.resume()
    agent.resume()
    assert not agent.is_paused
    # No run stopped at the pause: the hooks fire where a run stops, not on the call.
    assert events == []


async def test_on_pause_and_on_resume_fire_once_where_the_run_stops(
    echo: Tool[..., Any],
) -> None:
    events: list[str] = []
    agent = Agent("alpha", "d", [echo])

    @agent.on_pause
    async def paused(agent: Agent) -> None:
        events.append("pause")

    @agent.on_resume
    async def resumed(agent: Agent) -> None:
        events.append("resume")

    @agent.before_turn
    async def starting(agent: Agent) -> None:
        events.append("before_turn")

    await agent.put(Turn(echo, kwargs={"value": 1}))
    agent.pause()
    agent.pause()
    consumer = asyncio.create_task(drain(agent))
    await settle()

    assert events == ["pause"]
    assert agent.is_running
    assert agent.is_paused
    agent.resume()
    agent.resume()
    assert values(await consumer) == [1]
    assert events == ["pause", "resume", "before_turn"]


async def test_run_of_a_paused_agent_waits_at_the_pause_until_resumed(
    echo: Tool[..., Any],
) -> None:
    agent = Agent("alpha", "d", [echo])
    await agent.put(Turn(echo, kwargs={"value": 1}))
    agent.pause()

    consumer = asyncio.create_task(drain(agent))
    await settle()
    assert not consumer.done()
    assert agent.queue != []

    agent.resume()
    assert values(await consumer) == [1]


async def test_run_of_a_paused_agent_with_nothing_to_run_returns(echo: Tool[..., Any]) -> None:
    agent = Agent("alpha", "d", [echo])
    agent.pause()

    assert await drain(agent) == []
    assert agent.is_paused


_ASSIGNMENTS: list[tuple[str, Callable[[], Any]]] = [
    ("description", lambda: "new"),
    ("tags", lambda: ["x"]),
    ("hooks", list),
    ("turn_hooks", list),
    ("context_queue", lambda: ContextQueue(limit=2)),
    ("context_pool", ContextPool),
    ("tools", lambda: [ToolRegistry.get("echo")]),
]


@pytest.mark.parametrize(
    ("attribute", "make_value"), _ASSIGNMENTS, ids=[a for a, _ in _ASSIGNMENTS]
)
async def test_assigning_attributes_while_paused_raises_as_in_pygents_and_changes_nothing(
    echo: Tool[..., Any], attribute: str, make_value: Callable[[], Any]
) -> None:
    agent = Agent("alpha", "d", [echo])
    before = getattr(agent, attribute)
    agent.pause()

    with pytest.raises(
        SafeExecutionError, match=f"Cannot change property '{attribute}' while the agent is paused"
    ):
        setattr(agent, attribute, make_value())

    assert getattr(agent, attribute) is before
    agent.resume()
    value = make_value()
    setattr(agent, attribute, value)  # idle and not paused: taken
    assert getattr(agent, attribute) == (frozenset(value) if attribute == "tags" else value)


@pytest.mark.parametrize(
    ("attribute", "make_value"), _ASSIGNMENTS, ids=[a for a, _ in _ASSIGNMENTS]
)
async def test_assigning_attributes_while_running_raises(
    attribute: str, make_value: Callable[[], Any]
) -> None:
    caught: list[BaseException] = []
    agent: Agent

    @tool
    async def echo(value: Any) -> Any:
        try:
            setattr(agent, attribute, make_value())
        except SafeExecutionError as exc:
            caught.append(exc)
        return value

    agent = Agent("alpha", "d", [echo])
    await agent.put(Turn(echo, kwargs={"value": 1}))

    assert values(await drain(agent)) == [1]
    assert len(caught) == 1


async def test_run_while_running_raises(echo: Tool[..., Any]) -> None:
    caught: list[BaseException] = []
    agent = Agent("alpha", "d", [echo])

    @agent.after_turn
    async def rerun(agent: Agent, turn: Turn) -> None:
        try:
            await agent.run().__anext__()
        except SafeExecutionError as exc:
            caught.append(exc)

    await agent.put(Turn(echo, kwargs={"value": 1}))
    await agent.put(Turn(echo, kwargs={"value": 2}))

    assert values(await drain(agent)) == [1, 2]
    assert len(caught) == 2
    assert "running" in str(caught[0])


def test_renaming_an_idle_agent_moves_it_in_the_registry(echo: Tool[..., Any]) -> None:
    agent = Agent("alpha", "d", [echo])

    agent.name = "beta"

    assert agent.name == "beta"
    assert AgentRegistry.get("beta") is agent
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("alpha")


@pytest.mark.parametrize(
    ("name", "error"), [("gamma", ValueError), ("", ValueError), (5, ValueError)]
)
def test_renaming_to_a_taken_or_invalid_name_changes_nothing(
    echo: Tool[..., Any], name: Any, error: type[Exception]
) -> None:
    agent = Agent("alpha", "d", [echo])
    other = Agent("gamma", "d", [echo])

    with pytest.raises(error, match="already registered" if name == "gamma" else "non-empty"):
        agent.name = name

    assert agent.name == "alpha"
    assert AgentRegistry.get("alpha") is agent
    assert AgentRegistry.get("gamma") is other


def test_renaming_an_unregistered_agent_leaves_the_registry_alone(echo: Tool[..., Any]) -> None:
    agent = Agent("alpha", "d", [echo])
    AgentRegistry.unregister("alpha")

    agent.name = "beta"

    assert agent.name == "beta"
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("beta")


# -- agent hooks -----------------------------------------------------------------------------


async def test_agent_hooks_fire_with_their_arguments_in_order(echo: Tool[..., Any]) -> None:
    # Spec 01, Agents: `before_turn(agent)` takes the agent alone (current_turn has the turn).
    events: list[tuple[Any, ...]] = []
    agent = Agent("alpha", "d", [echo])

    @agent.before_put
    async def on_before_put(agent: Agent, turn: Turn) -> None:
        events.append(("before_put", agent, turn, turn in agent.queue))

    @agent.after_put
    async def on_after_put(agent: Agent, turn: Turn) -> None:
        events.append(("after_put", agent, turn, turn in agent.queue))

    @agent.before_turn
    async def on_before_turn(agent: Agent) -> None:
        events.append(("before_turn", agent, agent.current_turn))

    @agent.on_turn_value
    async def on_value(agent: Agent, turn: Turn, value: Any) -> None:
        events.append(("on_turn_value", agent, turn, value))

    @agent.after_turn
    async def on_after_turn(agent: Agent, turn: Turn) -> None:
        events.append(("after_turn", agent, turn))

    @agent.on_pause
    async def on_pause(agent: Agent) -> None:
        events.append(("on_pause", agent))

    @agent.on_resume
    async def on_resume(agent: Agent) -> None:
        events.append(("on_resume", agent))

    turn = Turn(echo, kwargs={"value": "v"})
    second = Turn(echo, kwargs={"value": "w"})
    await agent.put(turn)
    await agent.put(second)
    events.clear()
    async for pair in agent.run():
        events.append(("caller", pair))
        if pair[1] == "v":
            agent.pause()
            asyncio.get_running_loop().call_soon(agent.resume)

    assert events == [
        ("before_turn", agent, turn),
        ("on_turn_value", agent, turn, "v"),
        ("caller", (turn, "v")),
        ("after_turn", agent, turn),
        ("on_pause", agent),
        ("on_resume", agent),
        ("before_turn", agent, second),
        ("on_turn_value", agent, second, "w"),
        ("caller", (second, "w")),
        ("after_turn", agent, second),
    ]


async def test_put_hooks_fire_with_the_agent_and_the_turn(echo: Tool[..., Any]) -> None:
    events: list[tuple[Any, ...]] = []
    agent = Agent("alpha", "d", [echo])

    @agent.before_put
    async def on_before_put(agent: Agent, turn: Turn) -> None:
        events.append(("before_put", agent, turn, turn in agent.queue))

    @agent.after_put
    async def on_after_put(agent: Agent, turn: Turn) -> None:
        events.append(("after_put", agent, turn, turn in agent.queue))

    turn = Turn(echo, kwargs={"value": "v"})
    await agent.put(turn)

    assert events == [("before_put", agent, turn, False), ("after_put", agent, turn, True)]


async def test_global_agent_hooks_fire_for_every_agent(echo: Tool[..., Any]) -> None:
    seen: list[str] = []

    @hook(AgentHook.AFTER_TURN)
    async def count_turns(agent: Agent, turn: Turn) -> None:
        seen.append(agent.name)

    for name in ("a", "b"):
        agent = Agent(name, "d", [echo])
        await agent.put(Turn(echo, kwargs={"value": 1}))
        await drain(agent)

    assert seen == ["a", "b"]


async def test_agent_turn_hooks_apply_to_every_turn_it_runs(echo: Tool[..., Any]) -> None:
    completed: list[tuple[str, StopReason]] = []

    @tool
    async def plan() -> Turn:
        return Turn(echo, kwargs={"value": "routed"})

    agent = Agent("alpha", "d", [echo, plan])

    @agent.on_complete
    async def done(turn: Turn, reason: StopReason) -> None:
        completed.append((turn.tool_name, reason))

    await agent.put(Turn(echo, kwargs={"value": 1}))
    await agent.put(Turn(plan))
    await drain(agent)

    assert completed == [
        ("echo", StopReason.COMPLETED),
        ("plan", StopReason.COMPLETED),
        ("echo", StopReason.COMPLETED),
    ]


async def test_agent_turn_hooks_run_after_the_turns_own(echo: Tool[..., Any]) -> None:
    order: list[str] = []
    agent = Agent("alpha", "d", [echo])
    turn = Turn(echo, kwargs={"value": 1})

    @agent.before_run
    async def agent_level(turn: Turn) -> None:
        order.append("agent")

    @turn.before_run
    async def turn_level(turn: Turn) -> None:
        order.append("turn")

    await agent.put(turn)
    await drain(agent)

    assert order == ["turn", "agent"]
    assert turn.hooks == [turn_level]  # the agent's hooks are not written into the turn


@pytest.mark.parametrize(
    ("kwargs", "turn_timeout", "error", "expected"),
    [
        ({"fail": True}, 60, RuntimeError, ["on_error tool failed", "on_complete error"]),
        ({"delay": 1.0}, 0.05, TurnTimeoutError, ["on_timeout", "on_complete timeout"]),
    ],
    ids=["error", "timeout"],
)
async def test_agent_on_error_and_on_timeout_hooks_fire_for_its_turns(
    kwargs: dict[str, Any], turn_timeout: float, error: type[Exception], expected: list[str]
) -> None:
    events: list[str] = []

    @tool
    async def risky(fail: bool = False, delay: float = 0) -> str:
        if fail:
            raise RuntimeError("tool failed")
        return await _slow(delay)

    agent = Agent("alpha", "d", [risky])

    @agent.on_error
    async def failed(turn: Turn, exc: BaseException) -> None:
        events.append(f"on_error {exc}")

    @agent.on_timeout
    async def timed_out(turn: Turn) -> None:
        events.append("on_timeout")

    @agent.on_complete
    async def completed(turn: Turn, reason: StopReason) -> None:
        events.append(f"on_complete {reason.value}")

    await agent.put(Turn(risky, kwargs=kwargs, timeout=turn_timeout))
    with pytest.raises(error):
        await drain(agent)

    assert events == expected


async def test_hooks_do_not_fire_while_restoring_from_dict(echo: Tool[..., Any]) -> None:
    fired: list[str] = []

    async def record(*args: Any, **kwargs: Any) -> None:
        fired.append("fired")

    for kind in AgentHook:
        hook(kind)(_named(record, f"a_{kind.value}"))
    for kind in ContextQueueHook:
        hook(kind)(_named(record, f"q_{kind.value}"))
    for kind in ContextPoolHook:
        hook(kind)(_named(record, f"p_{kind.value}"))
    agent = Agent("alpha", "d", [echo])
    await agent.put(Turn(echo, kwargs={"value": 1}))
    await agent.context_queue.append(ContextItem(content="a"))
    await agent.context_pool.add(ContextItem(content="b", description="b", id="b"))
    saved = agent.to_dict()
    AgentRegistry.unregister("alpha")
    fired.clear()

    restored = Agent.from_dict(saved)

    assert fired == []
    assert len(restored.queue) == 1
    assert len(restored.context_queue) == 1
    assert len(restored.context_pool) == 1


# -- cancellation -----------------------------------------------------------------------------


async def test_cancelled_run_keeps_the_turn_current_and_the_next_run_runs_it_first(
    echo: Tool[..., Any],
) -> None:
    started = asyncio.Event()
    calls: list[int] = []

    @tool
    async def slow() -> str:
        calls.append(len(calls))
        if len(calls) == 1:
            started.set()
            await asyncio.Event().wait()  # blocks until cancelled
        return "slow done"

    agent = Agent("alpha", "d", [slow, echo])
    interrupted = Turn(slow)
    await agent.put(interrupted)
    await agent.put(Turn(echo, kwargs={"value": "next"}))
    consumer = asyncio.create_task(drain(agent))
    await started.wait()

    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer

    assert agent.current_turn is interrupted
    assert interrupted.metadata.stop_reason is StopReason.CANCELLED
    assert not agent.is_running
    assert [t.tool_name for t in agent.queue] == ["echo"]

    pairs = await drain(agent)

    assert pairs[0][0] is interrupted
    assert values(pairs) == ["slow done", "next"]
    assert agent.current_turn is None
    assert interrupted.metadata.stop_reason is StopReason.COMPLETED


async def test_reassigning_tools_without_a_queued_turns_tool_is_refused() -> None:
    @tool
    async def kept() -> int:
        return 1

    @tool
    async def dropped() -> int:
        return 2

    agent = Agent("reassign", "d", [kept, dropped])
    await agent.put(Turn(dropped))

    with pytest.raises(ValueError, match="dropped"):
        agent.tools = [kept]

    assert agent.tools == [kept, dropped]
    assert [value async for _, value in agent.run()] == [2]
    agent.tools = [kept]
    assert agent.tools == [kept]


async def test_a_pause_after_the_last_turn_does_not_hold_the_run_open() -> None:
    @tool
    async def only() -> int:
        return 1

    agent = Agent("last", "d", [only])

    @agent.after_turn
    async def pause_after(agent: Agent, turn: Turn) -> None:
        agent.pause()

    await agent.put(Turn(only))
    values = await asyncio.wait_for(_drain_values(agent), timeout=1)

    assert values == [1]
    assert agent.is_paused
    assert not agent.is_running


async def _drain_values(agent: Agent) -> list[Any]:
    return [value async for _, value in agent.run()]


async def test_reassigning_tools_keeps_the_tool_of_a_turn_left_current_by_cancellation() -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> int:
        started.set()
        await asyncio.sleep(10)
        return 1

    @tool
    async def other() -> int:
        return 2

    agent = Agent("interrupted", "d", [slow, other])
    await agent.put(Turn(slow))
    task = asyncio.create_task(_drain_values(agent))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert agent.current_turn is not None
    with pytest.raises(ValueError, match="slow"):
        agent.tools = [other]
    assert agent.tools == [slow, other]


def test_a_tool_given_by_name_is_refused_with_the_tool_it_may_mean() -> None:
    @tool
    async def boom() -> None:
        """Go off."""

    with pytest.raises(UnregisteredToolError) as refused:
        Agent("x", "d", ["bom"])  # type: ignore[list-item]
    assert str(refused.value) == (
        "tool 'bom' not found: Agent tools must be tools made by @tool (and registered), "
        "not names; pass the tool itself (boom, made by @tool)"
    )

    async def boomer() -> None:
        """Not decorated."""

    with pytest.raises(
        UnregisteredToolError, match=r"'boomer' not found: .* not a function; did you mean boom\?"
    ):
        Agent("x", "d", [boomer])  # type: ignore[list-item]
