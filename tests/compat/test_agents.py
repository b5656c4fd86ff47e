"""Agents: construction, running and routing, pausing, guarded attributes, saving, branching."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.compat.conftest import Impl
from tests.compat.marks import covers


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def drain(agent: Any) -> list[Any]:
    return [value async for _, value in agent.run()]


def _tools(impl: Impl) -> dict[str, Any]:
    m = impl.m

    @m.tool
    async def echo(value: Any = None) -> Any:
        return value

    @m.tool
    async def note(text: str) -> Any:
        return m.ContextItem(content=text)

    @m.tool
    async def document(key: str) -> Any:
        return m.ContextItem(content=f"doc {key}", description=f"about {key}", id=key)

    @m.tool
    async def plan(first: str) -> AsyncIterator[Any]:
        yield f"planning {first}"
        yield m.Turn("echo", kwargs={"value": first})

    @m.tool
    async def slow(seconds: float = 0.02) -> str:
        await asyncio.sleep(seconds)
        return "slow"

    return {"echo": echo, "note": note, "document": document, "plan": plan, "slow": slow}


@covers(
    "Agent",
    "Agent.name",
    "Agent.description",
    "Agent.tools",
    "Agent.context_queue",
    "Agent.context_pool",
    "Agent.tags",
    "Agent.hooks",
    "Agent.turn_hooks",
    "AgentRegistry.get",
)
def test_a_new_agent_registers_itself_with_default_context(impl: Impl) -> None:
    m = impl.m
    tools = _tools(impl)

    agent = m.Agent("scribe", "Takes notes", [tools["echo"], tools["note"]], tags=["x"])

    assert m.AgentRegistry.get("scribe") is agent
    assert agent.name == "scribe"
    assert agent.description == "Takes notes"
    assert agent.tools == [tools["echo"], tools["note"]]
    assert agent.context_queue.limit == 10
    assert agent.context_pool.limit is None
    assert agent.tags == frozenset({"x"})
    assert agent.hooks == []
    assert agent.turn_hooks == []
    assert repr(agent) == "Agent(name='scribe', tools=['echo', 'note'])"


@covers("Agent")
def test_queue_and_pool_can_be_given_positionally_in_pygents_order(impl: Impl) -> None:
    m = impl.m
    tools = _tools(impl)
    pool, queue = m.ContextPool(limit=5), m.ContextQueue(limit=3)

    agent = m.Agent("a", "d", [tools["echo"]], pool, queue, ["t"])

    assert agent.context_pool is pool
    assert agent.context_queue is queue
    assert agent.tags == frozenset({"t"})


@covers("Agent", "AgentRegistry.register")
def test_a_taken_name_is_refused(impl: Impl) -> None:
    m = impl.m
    tools = _tools(impl)
    first = m.Agent("twin", "d", [tools["echo"]])

    with pytest.raises(ValueError, match="'twin' already registered"):
        m.Agent("twin", "d", [tools["echo"]])

    assert m.AgentRegistry.get("twin") is first


@covers("Agent")
def test_tools_that_are_not_registered_tools_are_refused(impl: Impl) -> None:
    m = impl.m

    async def plain(x: int) -> int:
        return x

    with pytest.raises(m.UnregisteredToolError, match="'plain' not found"):
        m.Agent("a", "d", [plain])
    with pytest.raises(m.UnregisteredAgentError):
        m.AgentRegistry.get("a")


@covers("Agent.put", "Agent.run", "Agent.turns")
async def test_run_yields_plain_values_and_routes_items_and_turns(impl: Impl) -> None:
    m = impl.m
    tools = _tools(impl)
    agent = m.Agent("r", "d", list(tools.values()))
    for turn in (
        m.Turn("plan", kwargs={"first": "x"}),
        m.Turn("note", kwargs={"text": "remember"}),
        m.Turn("document", kwargs={"key": "k1"}),
    ):
        await agent.put(turn)

    pairs = [(turn.tool.metadata.name, value) async for turn, value in agent.run()]

    assert pairs == [("plan", "planning x"), ("echo", "x")]
    assert [item.content for item in agent.context_queue.items] == ["remember"]
    assert agent.context_pool.get("k1").description == "about k1"
    assert agent.turns == []


@covers("Agent.turns", "Agent.put")
async def test_turns_and_iter_are_snapshots_of_the_queue(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("q", "d", [m.ToolRegistry.get("echo")])
    first, second = m.Turn("echo", kwargs={"value": 1}), m.Turn("echo", kwargs={"value": 2})
    await agent.put(first)
    await agent.put(second)

    snapshot = agent.turns
    snapshot.clear()

    assert agent.turns == [first, second]
    assert list(agent) == [first, second]
    assert list(agent) == [first, second]  # iterating takes nothing off the queue
    assert await drain(agent) == [1, 2]


@covers("Agent.put")
async def test_put_of_a_turn_the_agent_cannot_run_is_refused(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("narrow", "d", [m.ToolRegistry.get("echo")])

    with pytest.raises(ValueError, match="does not accept tool 'slow'"):
        await agent.put(m.Turn("slow"))
    with pytest.raises(m.UnregisteredToolError, match="'unknown' not found"):
        await agent.put(m.Turn("unknown"))
    assert agent.turns == []


@covers("Agent.send", "UnregisteredAgentError")
async def test_send_queues_a_turn_on_another_agent(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    echo = m.ToolRegistry.get("echo")
    sender, receiver = m.Agent("sender", "d", [echo]), m.Agent("receiver", "d", [echo])

    await sender.send("receiver", m.Turn("echo", kwargs={"value": "hi"}))

    assert [t.kwargs for t in receiver.turns] == [{"value": "hi"}]
    with pytest.raises(m.UnregisteredAgentError, match="'nobody' not found"):
        await sender.send("nobody", m.Turn("echo"))


@covers("Agent.run", "SafeExecutionError")
async def test_run_while_running_is_refused(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("busy", "d", [m.ToolRegistry.get("echo")])
    refused: list[str] = []

    @agent.after_turn
    async def again(a: Any, turn: Any) -> None:
        try:
            await a.run().__anext__()
        except m.SafeExecutionError as exc:
            refused.append(str(exc))

    await agent.put(m.Turn("echo", kwargs={"value": 1}))

    assert await drain(agent) == [1]
    assert len(refused) == 1
    assert "is running" in refused[0]


# -- pausing -------------------------------------------------------------------------


@covers("Agent.pause", "Agent.resume", "Agent.is_paused")
def test_pause_and_resume_are_plain_idempotent_calls(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("p", "d", [m.ToolRegistry.get("echo")])

    assert agent.pause() is None
    agent.pause()
    assert agent.is_paused
    assert agent.resume() is None
    agent.resume()
    assert not agent.is_paused


@covers("Agent.pause", "Agent.resume", "Agent.on_pause", "Agent.on_resume", "Agent.run")
async def test_a_paused_agent_runs_only_after_resume_firing_its_hooks_once(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("p", "d", [m.ToolRegistry.get("echo")])
    events: list[str] = []

    @agent.on_pause
    async def paused(a: Any) -> None:
        events.append("on_pause")

    @agent.on_resume
    async def resumed(a: Any) -> None:
        events.append("on_resume")

    @agent.before_turn
    async def starting(a: Any) -> None:
        events.append("before_turn")

    await agent.put(m.Turn("echo", kwargs={"value": 1}))
    agent.pause()
    agent.pause()
    assert events == []  # nothing fires until a run stops at the pause

    runner = asyncio.ensure_future(drain(agent))
    await settle()
    assert not runner.done()
    assert events == ["on_pause"]

    agent.resume()
    agent.resume()
    assert await runner == [1]
    assert events == ["on_pause", "on_resume", "before_turn"]
    assert not agent.is_paused


@covers("Agent.pause", "Agent.after_turn", "Agent.before_turn")
async def test_a_pause_during_a_run_takes_effect_between_turns(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("p", "d", [m.ToolRegistry.get("slow")])
    events: list[str] = []

    @agent.before_turn
    async def starting(a: Any) -> None:
        events.append("before_turn")

    @agent.after_turn
    async def ended(a: Any, turn: Any) -> None:
        events.append("after_turn")

    @agent.on_pause
    async def paused(a: Any) -> None:
        events.append("on_pause")

    await agent.put(m.Turn("slow"))
    await agent.put(m.Turn("slow"))
    runner = asyncio.ensure_future(drain(agent))
    await asyncio.sleep(0.005)  # the first turn is in flight
    agent.pause()
    await asyncio.sleep(0.05)

    assert events == ["before_turn", "after_turn", "on_pause"]
    assert len(agent.turns) == 1
    agent.resume()
    assert await runner == ["slow", "slow"]


@covers("Agent.pause", "Agent.run")
async def test_a_paused_agent_with_nothing_to_run_returns(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("p", "d", [m.ToolRegistry.get("echo")])
    agent.pause()

    assert await drain(agent) == []
    assert agent.is_paused


@covers("Agent.to_dict", "Agent.from_dict", "Agent.is_paused")
async def test_a_restored_paused_agent_stays_paused_then_resumes_and_runs(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("p", "d", [m.ToolRegistry.get("echo")])
    await agent.put(m.Turn("echo", kwargs={"value": "later"}))
    agent.pause()
    saved = agent.to_dict()
    m.AgentRegistry.unregister("p")

    restored = m.Agent.from_dict(saved)

    assert saved["is_paused"] is True
    assert restored.is_paused
    runner = asyncio.ensure_future(drain(restored))
    await settle()
    assert not runner.done()
    restored.resume()
    assert await runner == ["later"]


# -- attributes ----------------------------------------------------------------------


@covers("Agent.name", "Agent.description", "Agent.tools", "Agent.context_queue")
def test_attributes_can_be_set_while_idle(impl: Impl) -> None:
    m = impl.m
    tools = _tools(impl)
    agent = m.Agent("idle", "d", [tools["echo"]])
    queue = m.ContextQueue(limit=3)

    agent.description = "new"
    agent.tools = [tools["echo"], tools["slow"]]
    agent.context_queue = queue
    agent.name = "renamed"

    assert agent.description == "new"
    assert agent.tools == [tools["echo"], tools["slow"]]
    assert agent.context_queue is queue
    assert agent.name == "renamed"


@covers("Agent.description", "SafeExecutionError")
async def test_setting_an_attribute_while_running_raises(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("busy", "d", [m.ToolRegistry.get("echo")])
    errors: list[Exception] = []

    @agent.before_turn
    async def meddle(a: Any) -> None:
        try:
            a.description = "changed"
        except m.SafeExecutionError as exc:
            errors.append(exc)

    await agent.put(m.Turn("echo", kwargs={"value": 1}))
    await drain(agent)

    assert len(errors) == 1
    assert "Cannot change property 'description' while the agent is running" in str(errors[0])
    assert agent.description == "d"


# -- saving and branching ------------------------------------------------------------


@covers("Agent.to_dict", "Agent.from_dict")
async def test_to_dict_and_from_dict_round_trip(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("saver", "Saves", [m.ToolRegistry.get("echo")], tags=["t"])

    @agent.after_turn
    async def audited(a: Any, turn: Any) -> None:
        pass

    @agent.on_error
    async def failed(turn: Any, exc: BaseException) -> None:
        pass

    await agent.put(m.Turn("echo", kwargs={"value": 1}))
    await agent.context_queue.append(m.ContextItem(content="note"))
    saved = agent.to_dict()

    assert list(saved) == [
        "name",
        "description",
        "tool_names",
        "queue",
        "current_turn",
        "hooks",
        "turn_hooks",
        "context_pool",
        "is_paused",
        "context_queue",
        "tags",
    ]
    assert saved["tool_names"] == ["echo"]
    assert saved["hooks"] == {"after_turn": ["audited"]}
    assert saved["turn_hooks"] == {"on_error": ["failed"]}
    assert saved["current_turn"] is None
    assert saved["tags"] == ["t"]

    m.AgentRegistry.unregister("saver")
    restored = m.Agent.from_dict(saved)
    assert restored.hooks == [audited]
    assert restored.turn_hooks == [failed]
    assert [item.content for item in restored.context_queue.items] == ["note"]
    assert await drain(restored) == [1]


@covers("Agent.from_dict")
def test_from_dict_under_a_taken_name_is_refused(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("same", "d", [m.ToolRegistry.get("echo")])

    with pytest.raises(ValueError, match="'same' already registered"):
        m.Agent.from_dict(agent.to_dict())


@covers("Agent.to_dict", "Agent.from_dict")
async def test_the_turn_in_flight_is_saved_and_runs_first_when_restored(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("flight", "d", [m.ToolRegistry.get("slow"), m.ToolRegistry.get("echo")])
    await agent.put(m.Turn("slow", kwargs={"seconds": 0.05}))
    await agent.put(m.Turn("echo", kwargs={"value": "after"}))
    runner = asyncio.ensure_future(drain(agent))
    await asyncio.sleep(0.01)

    saved = agent.to_dict()
    await runner

    assert saved["current_turn"]["tool_name"] == "slow"
    assert [t["tool_name"] for t in saved["queue"]] == ["echo"]
    m.AgentRegistry.unregister("flight")
    restored = m.Agent.from_dict(saved)
    assert await drain(restored) == ["slow", "after"]


@covers("Agent.branch")
async def test_branch_copies_queue_context_and_hooks_independently(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("parent", "Parent", [m.ToolRegistry.get("echo")])

    @agent.before_turn
    async def watched(a: Any) -> None:
        pass

    await agent.put(m.Turn("echo", kwargs={"value": 1}))
    await agent.context_queue.append(m.ContextItem(content="shared"))

    child = agent.branch("child")
    await child.context_queue.append(m.ContextItem(content="child only"))

    assert m.AgentRegistry.get("child") is child
    assert child.description == "Parent"
    assert child.hooks == [watched]
    assert [t.kwargs for t in child.turns] == [{"value": 1}]
    assert len(agent.context_queue) == 1
    assert len(child.context_queue) == 2
    assert await drain(child) == [1]
    assert len(agent.turns) == 1


@covers("Agent.branch")
def test_branch_with_hooks_none_has_no_hooks_and_takes_a_description(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("parent", "Parent", [m.ToolRegistry.get("echo")])

    @agent.before_turn
    async def watched(a: Any) -> None:
        pass

    bare = agent.branch("bare", hooks=None)
    described = agent.branch("described", "Another job")

    assert bare.hooks == []
    assert described.description == "Another job"
    assert described.hooks == [watched]


@covers(
    "Agent.before_turn",
    "Agent.after_turn",
    "Agent.on_turn_value",
    "Agent.before_put",
    "Agent.after_put",
)
async def test_agent_hooks_fire_with_their_arguments(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    agent = m.Agent("hooked", "d", [m.ToolRegistry.get("echo")])
    events: list[Any] = []

    @agent.before_put
    async def putting(a: Any, turn: Any) -> None:
        events.append(("before_put", a is agent, turn in a.turns))

    @agent.after_put
    async def put_done(a: Any, turn: Any) -> None:
        events.append(("after_put", a is agent, turn in a.turns))

    @agent.before_turn
    async def starting(a: Any) -> None:
        events.append(("before_turn", a is agent))

    @agent.on_turn_value
    async def valued(a: Any, turn: Any, value: Any) -> None:
        events.append(("on_turn_value", value))

    @agent.after_turn
    async def ended(a: Any, turn: Any) -> None:
        events.append(("after_turn", turn.output))

    await agent.put(m.Turn("echo", kwargs={"value": "v"}))
    await drain(agent)

    assert events == [
        ("before_put", True, False),
        ("after_put", True, True),
        ("before_turn", True),
        ("on_turn_value", "v"),
        ("after_turn", "v"),
    ]


@covers("Agent.on_error", "Agent.on_timeout", "Agent.on_complete")
async def test_turn_hooks_on_the_agent_apply_to_every_turn(impl: Impl) -> None:
    m = impl.m
    _tools(impl)

    @m.tool
    async def broken() -> None:
        raise RuntimeError("boom")

    agent = m.Agent("guarded", "d", [broken, m.ToolRegistry.get("slow")])
    events: list[Any] = []

    @agent.on_error
    async def failed(turn: Any, exc: BaseException) -> None:
        events.append(("on_error", str(exc)))

    @agent.on_timeout
    async def late(turn: Any) -> None:
        events.append(("on_timeout", turn.tool.metadata.name))

    @agent.on_complete
    async def finished(turn: Any, reason: Any) -> None:
        events.append(("on_complete", reason))

    await agent.put(m.Turn("broken"))
    with pytest.raises(RuntimeError):
        await drain(agent)
    await agent.put(m.Turn("slow", kwargs={"seconds": 1}, timeout=0.02))
    with pytest.raises(m.TurnTimeoutError):
        await drain(agent)

    assert events == [
        ("on_error", "boom"),
        ("on_complete", m.StopReason.ERROR),
        ("on_timeout", "slow"),
        ("on_complete", m.StopReason.TIMEOUT),
    ]


@covers("AgentRegistry.unregister", "AgentRegistry.clear", "AgentRegistry")
def test_the_agent_registry_forgets_agents(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    m.Agent("one", "d", [m.ToolRegistry.get("echo")])
    m.Agent("two", "d", [m.ToolRegistry.get("echo")])

    m.AgentRegistry.unregister("one")
    with pytest.raises(m.UnregisteredAgentError, match="'one' not found"):
        m.AgentRegistry.get("one")
    with pytest.raises(m.UnregisteredAgentError):
        m.AgentRegistry.unregister("one")
    m.AgentRegistry.clear()
    with pytest.raises(m.UnregisteredAgentError):
        m.AgentRegistry.get("two")


@covers("Agent.from_dict")
async def test_from_dict_accepts_a_minimal_agent(impl: Impl) -> None:
    m = impl.m
    _tools(impl)

    restored = m.Agent.from_dict({"name": "m", "description": "d", "tool_names": ["echo"]})

    assert repr(restored) == "Agent(name='m', tools=['echo'])"
    assert restored.turns == []
    assert not restored.is_paused
    assert restored.context_queue.limit == 10


@covers("Agent.run")
async def test_an_error_stops_the_run_and_keeps_the_rest_of_the_queue(impl: Impl) -> None:
    m = impl.m
    _tools(impl)

    @m.tool
    async def broken() -> None:
        raise RuntimeError("boom")

    agent = m.Agent("fragile", "d", [broken, m.ToolRegistry.get("echo")])
    await agent.put(m.Turn("echo", kwargs={"value": 1}))
    await agent.put(m.Turn("broken"))
    await agent.put(m.Turn("echo", kwargs={"value": 3}))
    received: list[Any] = []

    async def consume() -> None:
        async for _, value in agent.run():
            received.append(value)

    with pytest.raises(RuntimeError, match="boom"):
        await consume()

    assert received == [1]
    assert [t.kwargs for t in agent.turns] == [{"value": 3}]
    assert await drain(agent) == [3]


@covers("Agent.run", "Agent.context_queue", "Agent.context_pool")
async def test_a_generator_tools_items_and_turns_are_routed_as_it_runs(impl: Impl) -> None:
    m = impl.m
    _tools(impl)

    @m.tool
    async def research(topic: str) -> AsyncIterator[Any]:
        yield f"searching {topic}"
        yield m.ContextItem(content=f"note on {topic}")
        yield m.ContextItem(content="text", description=f"doc on {topic}", id=topic)
        yield m.Turn("echo", kwargs={"value": "follow-up"})
        yield "done"

    agent = m.Agent("researcher", "d", [research, m.ToolRegistry.get("echo")])
    await agent.put(m.Turn("research", kwargs={"topic": "tides"}))

    assert await drain(agent) == ["searching tides", "done", "follow-up"]
    assert [i.content for i in agent.context_queue.items] == ["note on tides"]
    assert agent.context_pool.catalogue() == "- [tides] doc on tides"
