"""The pygents-compatible surface of tools, turns and agents (issue 13).

The same behaviour is checked against pygents itself in tests/compat; these
tests pin what `pygents_ctx` does on every Python it supports, edge cases included.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextPool,
    ContextQueue,
    SafeExecutionError,
    StopReason,
    Tool,
    ToolMetadata,
    ToolRegistry,
    Turn,
    UnregisteredToolError,
    tool,
)

# -- tools ---------------------------------------------------------------------------------


def test_a_tool_answers_to_its_key_as_its_name_and_wraps_its_function() -> None:
    @tool
    async def files() -> None:
        pass

    @files.subtool
    async def read(path: str) -> str:
        return path

    assert files.__name__ == "files"
    assert read.__name__ == "files.read"
    assert read.__wrapped__ is read.fn
    assert Tool.__name__ == "Tool"


async def test_tool_lock_is_the_lock_its_calls_take() -> None:
    @tool(lock=True)
    async def guarded() -> str:
        return "ran"

    assert guarded.lock is not None
    async with guarded.lock:
        call = asyncio.ensure_future(guarded())
        await asyncio.sleep(0.01)
        assert not call.done()  # waits for the lock the test holds
    assert await call == "ran"


def test_add_subtool_attaches_a_tool_and_refuses_duplicates_and_cycles() -> None:
    @tool
    async def shell() -> None:
        pass

    @tool
    async def run(command: str) -> str:
        return command

    @run.subtool
    async def sudo(command: str) -> str:
        return command

    shell.add_subtool(run)

    assert shell.subtools == [run]
    assert [t.key for t in shell.walk()] == ["shell", "run", "run.sudo"]
    with pytest.raises(ValueError, match="already a subtool"):
        shell.add_subtool(run)
    with pytest.raises(ValueError, match="cycle"):
        run.add_subtool(shell)
    with pytest.raises(ValueError, match="cycle"):
        sudo.add_subtool(sudo)
    with pytest.raises(TypeError, match="Tool made by @tool"):
        shell.add_subtool(print)  # type: ignore[arg-type]
    assert [d["name"] for d in ToolRegistry.definitions()] == ["run", "shell"]


async def test_an_agent_runs_the_turns_of_an_added_subtool() -> None:
    @tool
    async def shell() -> None:
        pass

    @tool
    async def run(command: str) -> str:
        return f"ran {command}"

    shell.add_subtool(run)
    agent = Agent("ops", "d", [shell])
    await agent.put(Turn(run, kwargs={"command": "ls"}))

    assert [v async for _, v in agent.run()] == ["ran ls"]


def test_tool_metadata_made_by_hand_keeps_its_times_and_compares_by_value() -> None:
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    end = datetime(2024, 5, 1, 12, 0, 3, tzinfo=UTC)

    made = ToolMetadata("fetch", "Fetch.", start, end, {"type": "object"}, None)

    assert (made.start_time, made.end_time) == (start, end)
    assert made == ToolMetadata("fetch", "Fetch.", start, end, {"type": "object"})
    assert made != ToolMetadata("fetch", "Fetch.", start, None, {"type": "object"})
    assert made != "fetch"
    assert made.dict()["end_time"] == end.isoformat()
    assert repr(made).startswith("ToolMetadata(name='fetch', description='Fetch.', start_time=")
    with pytest.raises(TypeError, match="unhashable"):
        hash(made)


async def test_overriding_a_fixed_kwarg_logs_pygents_warning_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool(region="eu")
    async def fetch(region: str) -> str:
        return region

    with caplog.at_level(logging.WARNING, logger="pygents_ctx"):
        assert await fetch(region="us") == "us"

    assert caplog.messages == [
        "Fixed kwarg 'region' is overridden by call-time argument for tool 'fetch'."
    ]


def test_a_plain_function_is_refused_with_pygents_phrase() -> None:
    with pytest.raises(TypeError, match="Tool must be async: 'plain'"):

        @tool
        def plain() -> None:
            pass


# -- turns ---------------------------------------------------------------------------------


def test_a_turn_takes_the_function_its_tool_decorates_and_nothing_else() -> None:
    @tool
    async def echo(value: Any = None) -> Any:
        return value

    async def impostor(value: Any = None) -> Any:
        return value

    impostor.__name__ = "echo"

    assert Turn(echo.fn).tool is echo
    with pytest.raises(TypeError, match="Tool or a tool name"):
        Turn(impostor)
    with pytest.raises(UnregisteredToolError, match="'<lambda>' not found"):
        Turn(lambda: None)
    with pytest.raises(TypeError, match="Tool or a tool name"):
        Turn(5)  # type: ignore[arg-type]


def test_a_number_where_args_go_hints_at_the_timeout_keyword() -> None:
    @tool
    async def echo() -> None:
        pass

    with pytest.raises(TypeError, match=r"pass timeout=\.\.\. by keyword"):
        Turn(echo, 30)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not str$"):
        Turn(echo, "ab")  # type: ignore[arg-type]


async def test_turn_is_generic_and_its_repr_follows_its_runs() -> None:
    @tool
    async def echo(value: int = 0) -> int:
        return value

    turn = Turn[int](echo, kwargs={"value": 3}, timeout=5)

    assert repr(turn).startswith("Turn(tool='echo', timeout=5, metadata=TurnMetadata(")
    assert await turn.returning() == 3
    assert "stop_reason=<StopReason.COMPLETED: 'completed'>" in repr(turn)


def test_stop_reason_is_a_str_enum_printing_its_member() -> None:
    assert StopReason.ERROR == "error"
    assert str(StopReason.ERROR) == "StopReason.ERROR"
    assert StopReason("timeout") is StopReason.TIMEOUT


async def test_assigning_a_field_of_a_running_turn_names_it() -> None:
    @tool
    async def slow() -> None:
        await asyncio.sleep(0.02)

    turn = Turn(slow)
    running = asyncio.ensure_future(turn.returning())
    await asyncio.sleep(0)

    with pytest.raises(
        SafeExecutionError, match="Cannot change property 'kwargs' while the turn is running"
    ):
        turn.kwargs = {}
    await running


# -- agents --------------------------------------------------------------------------------


def _echo() -> Tool[..., Any]:
    @tool
    async def echo(value: Any = None) -> Any:
        return value

    return echo


def test_an_agent_takes_pool_queue_and_tags_positionally() -> None:
    pool, queue = ContextPool[Any](limit=2), ContextQueue[Any](limit=2)

    agent = Agent("a", "d", [_echo()], pool, queue, ["x"])

    assert (agent.context_pool, agent.context_queue, agent.tags) == (pool, queue, {"x"})


@pytest.mark.parametrize("given", [print, "echo", object()], ids=["builtin", "string", "object"])
def test_things_that_are_not_tools_are_refused_as_unregistered_tools(given: Any) -> None:
    _echo()

    with pytest.raises(UnregisteredToolError, match="not found: Agent tools must be tools"):
        Agent("a", "d", [given])

    assert isinstance(UnregisteredToolError("x"), KeyError)
    with pytest.raises(KeyError):
        AgentRegistry.get("a")


async def test_turns_iter_and_repr() -> None:
    echo = _echo()
    agent = Agent("lister", "d", [echo])
    turns = [Turn(echo, kwargs={"value": n}) for n in range(2)]
    for turn in turns:
        await agent.put(turn)

    assert agent.turns == turns
    assert agent.queue == turns
    assert list(agent) == turns
    assert repr(agent) == "Agent(name='lister', tools=['echo'])"


async def test_branch_takes_description_tools_and_hooks_the_pygents_way() -> None:
    echo = _echo()

    @tool
    async def other() -> None:
        pass

    agent = Agent("parent", "Parent", [echo])

    @agent.after_turn
    async def watched(agent: Agent, turn: Turn) -> None:
        pass

    inherited = agent.branch("inherited", None, None)
    described = agent.branch("described", "Child", [echo, other], hooks=[])
    hookless = agent.branch("hookless", hooks=None)

    assert (inherited.description, inherited.tools, inherited.hooks) == (
        "Parent",
        [echo],
        [watched],
    )
    assert (described.description, described.tools, described.hooks) == (
        "Child",
        [echo, other],
        [],
    )
    assert hookless.hooks == []


async def test_a_restored_paused_agent_holding_a_turn_in_flight_waits_before_it() -> None:
    @tool
    async def step(n: int) -> int:
        await asyncio.sleep(0.01)
        return n

    agent = Agent("flight", "d", [step])
    await agent.put(Turn(step, kwargs={"n": 1}))
    await agent.put(Turn(step, kwargs={"n": 2}))
    runner = asyncio.ensure_future(agent.run().__anext__())
    await asyncio.sleep(0.005)
    agent.pause()
    saved = agent.to_dict()
    runner.cancel()
    AgentRegistry.unregister("flight")

    restored = Agent.from_dict(saved)
    consumer = asyncio.ensure_future(_values(restored))
    for _ in range(20):
        await asyncio.sleep(0)

    assert saved["current_turn"] is not None
    assert not consumer.done()
    restored.resume()
    assert await consumer == [1, 2]


async def _values(agent: Agent) -> list[Any]:
    return [value async for _, value in agent.run()]
