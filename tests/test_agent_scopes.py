"""AgentScope: per-request agent names, concurrent handlers, and nothing left after requests."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentRegistry,
    AgentScope,
    ContextItem,
    HookRegistry,
    Turn,
    UnregisteredAgentError,
    UnregisteredHookError,
    tool,
)
from pygents_ctx.registry import AgentScope as AgentScopeFromRegistry


@pytest.fixture
def tools() -> dict[str, Any]:
    @tool
    async def remember(text: str, key: str) -> ContextItem[str]:
        return ContextItem(content=text, description=f"note {key}", id=key)

    @tool
    async def delegate(text: str, key: str, to: str) -> str:
        return text

    return {"remember": remember, "delegate": delegate}


async def handle(user: int, tools: dict[str, Any]) -> tuple[Agent, Agent]:
    """A request handler: two agents of fixed names, one sends work to the other."""
    async with AgentScope():
        front = Agent("support", f"front desk for user {user}", [tools["delegate"]])
        back = Agent("archivist", f"archive of user {user}", [tools["remember"]])
        await asyncio.sleep(0)  # the other handlers make theirs meanwhile
        await front.send(
            "archivist", Turn(tools["remember"], kwargs={"text": f"u{user}", "key": "k"})
        )
        async for _ in back.run():
            pass
        assert AgentRegistry.get("support") is front
        return front, back


def test_agent_scope_is_public_at_both_paths() -> None:
    assert AgentScope is AgentScopeFromRegistry


async def test_fifty_concurrent_handlers_each_have_their_own_agents(tools: dict[str, Any]) -> None:
    pairs = await asyncio.gather(*(handle(user, tools) for user in range(50)))

    for user, (front, back) in enumerate(pairs):
        assert front.description == f"front desk for user {user}"
        # send() reached this request's archivist, not another's
        assert [item.content for item in back.context_pool] == [f"u{user}"]
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("support")  # the scopes are over: nothing global was registered


async def test_tasks_started_in_a_scope_share_it() -> None:
    async with AgentScope():
        made = Agent("worker", "d", [])

        async def lookup() -> Agent:
            found: Agent = AgentRegistry.get("worker")
            return found

        assert await asyncio.create_task(lookup()) is made


def test_a_scope_sees_global_agents_and_shadows_their_names() -> None:
    module_level = Agent("support", "global", [])
    helper = Agent("helper", "global helper", [])

    with AgentScope():
        per_request = Agent("support", "mine", [])
        assert AgentRegistry.get("support") is per_request
        assert AgentRegistry.get("helper") is helper

    assert AgentRegistry.get("support") is module_level


def test_a_taken_name_in_a_scope_is_refused_and_the_error_names_the_fix() -> None:
    with AgentScope():
        first = Agent("twin", "d", [])
        with pytest.raises(ValueError, match="'twin' already registered") as info:
            Agent("twin", "another line", [])
        assert AgentRegistry.get("twin") is first
    assert "AgentScope" in str(info.value)


def test_a_taken_global_name_still_raises_as_in_pygents_and_names_the_scope() -> None:
    Agent("twin", "d", [])
    with pytest.raises(ValueError, match="'twin' already registered") as info:
        Agent("twin", "made by another line", [])
    assert "with AgentScope()" in str(info.value)


def test_scopes_nest_and_lookups_go_outward() -> None:
    with AgentScope():
        outer = Agent("lead", "outer", [])
        with AgentScope() as inner:
            mine = Agent("lead", "inner", [])
            other = Agent("other", "inner only", [])
            assert AgentRegistry.get("lead") is mine
            assert len(inner) == 2
            del other
        assert len(inner) == 0
        assert AgentRegistry.get("lead") is outer
        with pytest.raises(UnregisteredAgentError, match="'other' not found"):
            AgentRegistry.get("other")


def test_unregister_and_clear_act_on_the_scope_first() -> None:
    kept = Agent("a", "global", [])
    with AgentScope():
        Agent("a", "scoped", [])
        AgentRegistry.unregister("a")  # the scope's
        assert AgentRegistry.get("a") is kept
        AgentRegistry.clear()
        with pytest.raises(UnregisteredAgentError):
            AgentRegistry.get("a")


def test_a_scope_is_entered_once() -> None:
    scope = AgentScope()
    with scope, pytest.raises(RuntimeError, match="entered once"), scope:
        pass
    assert repr(scope) == "AgentScope(ended)"


async def test_an_agent_made_by_a_task_that_outlived_its_scope_is_refused() -> None:
    gate = asyncio.Event()

    async def late() -> None:
        await gate.wait()
        Agent("late", "d", [])

    async with AgentScope():
        task = asyncio.create_task(late())
    gate.set()
    with pytest.raises(RuntimeError, match="after its AgentScope ended"):
        await task


async def test_send_looks_names_up_where_the_sender_is_registered(tools: dict[str, Any]) -> None:
    """Wherever the call runs, an agent reaches the agents of its own scope."""
    turn = Turn(tools["remember"], kwargs={"text": "mine", "key": "k"})
    async with AgentScope():
        front = Agent("support", "d", [tools["delegate"]])
        back = Agent("archivist", "d", [tools["remember"]])

        async def elsewhere() -> None:
            async with AgentScope():  # another scope is current here, with its own archivist
                other = Agent("archivist", "another one", [tools["remember"]])
                await front.send("archivist", turn)
                assert other.turns == []

        await asyncio.create_task(elsewhere())

    assert back.turns == [turn]


def test_a_scope_forgets_its_names_when_it_ends() -> None:
    with AgentScope():
        agent = Agent("support", "d", [])
    with pytest.raises(UnregisteredAgentError, match="'support' not found"):
        AgentRegistry.get("support")
    assert agent.name == "support"  # the agent itself stays usable


def test_hooks_defined_per_request_save_with_their_agents() -> None:
    """A closure hook per request: each scope names its own, so each agent saves."""

    def make_handler_hook(user: int) -> Any:
        async def checkpoint(agent: Agent, turn: Turn) -> None:
            pass

        checkpoint.__doc__ = f"user {user}"
        return checkpoint

    saved = []
    for user in range(3):
        with AgentScope():
            agent = Agent("support", "d", [])
            agent.after_turn(make_handler_hook(user))
            saved.append(agent.to_dict())
            assert HookRegistry.get("checkpoint").fn is agent.hooks[0].fn
    assert all(s["hooks"] == {"after_turn": ["checkpoint"]} for s in saved)
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get("checkpoint")  # nothing stays after the scopes


async def _scoped_request(tools: dict[str, Any]) -> None:
    """A request: agents of fixed names, a closure hook, a branch merged back."""
    async with AgentScope():
        agent = Agent("support", "d", [tools["remember"]])
        Agent("archivist", "d", [])

        @agent.after_turn
        async def checkpoint(a: Agent, turn: Turn) -> None:
            pass

        async with agent.branch() as sub:
            await sub.put(Turn(tools["remember"], kwargs={"text": "y", "key": "j"}))
            async for _ in sub.run():
                pass
            await agent.merge(sub)


def _live_agents() -> int:
    return sum(1 for obj in gc.get_objects() if isinstance(obj, Agent))


async def test_nothing_accumulates_over_ten_thousand_scoped_requests(
    tools: dict[str, Any],
) -> None:
    """Registry and memory stay flat: every agent of every request is freed."""
    probes: list[weakref.ref[Agent]] = []
    for _ in range(200):  # warm up caches
        await _scoped_request(tools)
    gc.collect()
    agents_before = _live_agents()  # other tests' agents may still be alive
    blocks_before = sys.getallocatedblocks()
    for i in range(10_000):
        await _scoped_request(tools)
        # A server's loop turns between requests: a turn's timeout timer, cancelled when
        # its tool returns, is dropped from the loop's schedule (with the context it
        # holds) when the loop next runs, as asyncio drops cancelled timers.
        await asyncio.sleep(0)
        if i % 1000 == 0:
            async with AgentScope():
                probes.append(weakref.ref(Agent("probe", "d", [])))
    gc.collect()
    blocks_after = sys.getallocatedblocks()

    assert all(ref() is None for ref in probes)
    assert _live_agents() == agents_before
    assert len(AgentRegistry.current()._root) == 0  # the registry holds nothing either
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get("checkpoint")
    # Each request made 3 agents (with pools, queues, hooks) and a merge: a leak of one
    # object per request would be 10,000 blocks or more.
    assert blocks_after - blocks_before < 1_000, f"{blocks_after - blocks_before} blocks more"


async def test_a_scope_ended_in_another_context_still_forgets_its_names() -> None:
    """A streaming response's generator may be closed by another task than the one it ran in."""

    async def stream() -> Any:
        async with AgentScope():
            Agent("streamer", "d", [])
            yield AgentRegistry.get("streamer").name
            yield "never"

    events = stream()
    assert await anext(events) == "streamer"
    await asyncio.create_task(events.aclose())  # another task: another context

    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("streamer")


async def module_level_audit(agent: Agent, turn: Turn) -> None:
    """A hook function defined once, at module level."""


def test_a_module_level_hook_attached_in_a_scope_is_named_globally() -> None:
    with AgentScope():
        agent = Agent("support", "d", [])
        attached = agent.after_turn(module_level_audit)
        saved = agent.to_dict()

    # Another request (or a later load) finds it by name, as outside any scope.
    assert HookRegistry.get("module_level_audit") is attached
    with AgentScope():
        restored = Agent.from_dict(saved)
        assert restored.hooks == [attached]


# -- concurrent tasks without a scope --------------------------------------------------


async def test_concurrent_tasks_that_forget_the_scope_never_share_an_agent() -> None:
    """Three requests build the same agent on one line before any runs, as in a handler."""
    made = asyncio.Event()

    def build(user: str) -> Agent:
        return Agent("support", f"helps {user}", [])

    async def handle(user: str) -> str:
        build(user)
        await made.wait()  # every request has built its agent before any looks it up
        return AgentRegistry.get("support").description

    requests = [asyncio.create_task(handle(user)) for user in ("ann", "bob", "cy")]
    await asyncio.sleep(0.01)
    made.set()
    results = await asyncio.gather(*requests, return_exceptions=True)
    # The first request keeps its agent; the others are refused at once, naming the fix.
    assert results[0] == "helps ann"
    for refused in results[1:]:
        assert isinstance(refused, ValueError)
        assert "another task that is still running" in str(refused)
        assert "AgentScope" in str(refused)
    AgentRegistry.unregister("support")


async def test_a_finished_tasks_agent_still_holds_its_name_and_the_error_names_the_scope() -> None:
    def build(user: str) -> Agent:
        return Agent("support", f"helps {user}", [])

    async def handle(user: str) -> str:
        build(user)
        return AgentRegistry.get("support").description

    assert await asyncio.create_task(handle("ann")) == "helps ann"
    with pytest.raises(ValueError, match=r"'support' already registered.*AgentScope"):
        await asyncio.create_task(handle("bob"))  # one after the other, no scope
    assert AgentRegistry.get("support").description == "helps ann"


async def test_the_same_task_may_define_an_agent_again_with_replace() -> None:
    agents = [Agent("again", f"v{i}", [], replace=True) for i in range(3)]
    assert AgentRegistry.get("again") is agents[-1]
    with pytest.raises(ValueError, match="'again' already registered"):
        Agent("again", "without replace", [])  # the same task, as in pygents
    AgentRegistry.unregister("again")


async def test_replace_does_not_take_a_name_from_another_running_task() -> None:
    made = asyncio.Event()

    async def first() -> None:
        Agent("support", "first", [])
        await made.wait()

    holder = asyncio.create_task(first())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="another task that is still running"):
        Agent("support", "second", [], replace=True)
    made.set()
    await holder
    assert AgentRegistry.get("support").description == "first"
