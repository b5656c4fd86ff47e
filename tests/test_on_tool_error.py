"""`on_tool_error`: a failing turn ends the run ("raise", the default) or is its value."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    ModelLoop,
    StopReason,
    Tool,
    ToolArgumentsError,
    Turn,
    TurnTimeoutError,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call


@pytest.fixture
def tools() -> dict[str, Tool[..., Any]]:
    @tool
    async def divide(a: float, b: float) -> float:
        return a / b

    @tool
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            if i == 2:
                raise RuntimeError("count broke at 2")
            yield i

    @tool(on_tool_error="raise")
    async def critical() -> None:
        raise RuntimeError("stop everything")

    @tool(on_tool_error="return")
    async def optional() -> None:
        raise LookupError("nothing there")

    @tool
    async def slow() -> None:
        await asyncio.sleep(1)

    return {t.key: t for t in (divide, count, critical, optional, slow)}


async def _drain(agent: Agent) -> list[tuple[str, Any]]:
    return [(turn.tool_name, value) async for turn, value in agent.run()]


async def test_raise_is_the_default_and_leaves_the_rest_queued(
    tools: dict[str, Tool[..., Any]],
) -> None:
    agent = Agent("calc", "d", [tools["divide"]])
    for b in (0, 2):
        await agent.put(Turn("divide", kwargs={"a": 1, "b": b}))

    with pytest.raises(ZeroDivisionError):
        await _drain(agent)

    assert agent.on_tool_error == "raise"
    assert [t.kwargs["b"] for t in agent.turns] == [2]


async def test_return_yields_each_failure_and_goes_on(tools: dict[str, Tool[..., Any]]) -> None:
    agent = Agent("calc", "d", list(tools.values()), on_tool_error="return")
    turns = [
        Turn("divide", kwargs={"a": 1, "b": 0}),
        Turn("divide", kwargs={"a": "one", "b": 2}),
        Turn("count", kwargs={"n": 5}),
        Turn("slow", timeout=0.01),
        Turn("divide", kwargs={"a": 6, "b": 3}),
    ]
    for turn in turns:
        await agent.put(turn)

    produced = await _drain(agent)

    names = [(name, type(value).__name__) for name, value in produced]
    assert names == [
        ("divide", "ZeroDivisionError"),
        ("divide", "ToolArgumentsError"),
        ("count", "int"),
        ("count", "int"),
        ("count", "RuntimeError"),  # a generator's failure comes after what it yielded
        ("slow", "TurnTimeoutError"),
        ("divide", "float"),
    ]
    assert produced[-1] == ("divide", 2.0)
    reasons = [turn.metadata.stop_reason for turn in turns]
    assert reasons == [
        StopReason.ERROR,
        StopReason.ERROR,
        StopReason.ERROR,
        StopReason.TIMEOUT,
        StopReason.COMPLETED,
    ]
    assert isinstance(produced[1][1], ToolArgumentsError)
    assert isinstance(produced[5][1], TurnTimeoutError)


async def test_a_tools_own_setting_wins_over_the_agents(tools: dict[str, Tool[..., Any]]) -> None:
    lenient = Agent("lenient", "d", [tools["critical"], tools["divide"]], on_tool_error="return")
    await lenient.put(Turn("critical"))
    await lenient.put(Turn("divide", kwargs={"a": 1, "b": 1}))
    with pytest.raises(RuntimeError, match="stop everything"):
        await _drain(lenient)

    strict = Agent("strict", "d", [tools["optional"], tools["divide"]])
    await strict.put(Turn("optional"))
    await strict.put(Turn("divide", kwargs={"a": 1, "b": 1}))
    produced = await _drain(strict)
    assert [type(value).__name__ for _, value in produced] == ["LookupError", "float"]


async def test_hooks_see_a_returned_failure_as_a_failure(tools: dict[str, Tool[..., Any]]) -> None:
    agent = Agent("watched", "d", [tools["divide"], tools["count"]], on_tool_error="return")
    seen: list[Any] = []

    @agent.on_error
    async def failed(turn: Turn, exc: Exception) -> None:
        seen.append(("on_error", type(exc).__name__))

    @agent.on_complete
    async def complete(turn: Turn, reason: StopReason) -> None:
        seen.append(("on_complete", reason.value))

    @agent.on_turn_value
    async def value(agent: Agent, turn: Turn, produced: Any) -> None:
        seen.append(("on_turn_value", type(produced).__name__))

    @agent.after_turn
    async def after(agent: Agent, turn: Turn) -> None:
        seen.append(("after_turn", turn.tool_name))

    await agent.put(Turn("divide", kwargs={"a": 1, "b": 0}))
    await agent.put(Turn("count", kwargs={"n": 3}))
    await _drain(agent)

    assert seen == [
        ("on_error", "ZeroDivisionError"),
        ("on_complete", "error"),
        ("on_turn_value", "ZeroDivisionError"),
        ("after_turn", "divide"),
        ("on_turn_value", "int"),
        ("on_turn_value", "int"),
        ("on_error", "RuntimeError"),
        ("on_complete", "error"),
        ("on_turn_value", "RuntimeError"),
        ("after_turn", "count"),
    ]


async def test_a_generator_refused_before_its_first_value_is_returned_too(
    tools: dict[str, Tool[..., Any]],
) -> None:
    agent = Agent("gen", "d", [tools["count"]], on_tool_error="return")
    turn = Turn("count", kwargs={"n": "three"})
    await agent.put(turn)

    [(_, value)] = await _drain(agent)

    assert isinstance(value, ToolArgumentsError)
    assert turn.metadata.stop_reason is StopReason.ERROR


async def test_cancellation_is_never_returned(tools: dict[str, Tool[..., Any]]) -> None:
    agent = Agent("cancelled", "d", [tools["slow"]], on_tool_error="return")
    await agent.put(Turn("slow"))
    task = asyncio.create_task(_drain(agent))
    await asyncio.sleep(0.01)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert agent.current_turn is not None  # it runs first next time, as always


def test_it_is_saved_only_when_not_the_default_and_loads_back(
    tools: dict[str, Tool[..., Any]],
) -> None:
    plain = Agent("plain", "d", [tools["divide"]])
    lenient = Agent("lenient", "d", [tools["divide"]], on_tool_error="return")

    assert "on_tool_error" not in plain.to_dict()
    saved = lenient.to_dict()
    assert saved["on_tool_error"] == "return"
    assert list(saved)[-1] == "on_tool_error"

    AgentRegistry.unregister("lenient")
    assert Agent.from_dict(saved).on_tool_error == "return"
    AgentRegistry.unregister("lenient")
    assert Agent.from_json(lenient.to_json()).on_tool_error == "return"
    AgentRegistry.unregister("plain")
    assert Agent.from_dict(plain.to_dict()).on_tool_error == "raise"


def test_a_branch_keeps_it_and_an_idle_agent_takes_a_new_one(
    tools: dict[str, Tool[..., Any]],
) -> None:
    agent = Agent("parent", "d", [tools["divide"]], on_tool_error="return")

    assert agent.branch("child").on_tool_error == "return"
    agent.on_tool_error = "raise"
    assert agent.on_tool_error == "raise"


@pytest.mark.parametrize("bad", ["ignore", None, 1])
def test_anything_else_is_refused(tools: dict[str, Tool[..., Any]], bad: Any) -> None:
    with pytest.raises(ValueError, match="on_tool_error must be 'raise'"):
        Agent("bad", "d", [tools["divide"]], on_tool_error=bad)
    with pytest.raises(KeyError):
        AgentRegistry.get("bad")  # nothing registered

    agent = Agent("good", "d", [tools["divide"]])
    with pytest.raises(ValueError, match="agent 'good' on_tool_error"):
        agent.on_tool_error = bad
    assert agent.on_tool_error == "raise"

    if bad is not None:  # None is a tool's default: follow the agent
        with pytest.raises(ValueError, match="tool 'bad_tool' on_tool_error"):

            @tool(on_tool_error=bad)
            async def bad_tool() -> None:
                pass

    with pytest.raises(ValueError, match="on_tool_error"):
        Agent.from_dict(
            {"name": "loaded", "description": "", "tool_names": [], "on_tool_error": "x"}
        )


async def test_in_a_model_loop_tool_failures_are_error_results_whatever_the_setting(
    tools: dict[str, Tool[..., Any]],
) -> None:
    # The model is the caller: it reads the failure and decides.
    model = ScriptedModel(
        [
            assistant(tool_call("critical"), tool_call("optional"), tool_call("divide", a=1, b=0)),
            "ok",
        ]
    )
    agent = Agent(
        "looped",
        "d",
        [tools["critical"], tools["optional"], tools["divide"]],
        context=ContextConfig.default(),
    )

    finished = await ModelLoop(agent, model).run("go")

    assert finished.text == "ok"
    results = model.calls[1].messages[-1].tool_results
    assert [r.text for r in results] == [
        "RuntimeError: stop everything",
        "LookupError: nothing there",
        "ZeroDivisionError: division by zero",
    ]
    assert all(r.is_error for r in results)


async def test_a_model_loop_step_that_fails_ends_the_run_even_when_the_agent_returns_errors(
    tools: dict[str, Tool[..., Any]],
) -> None:
    class Broken(ScriptedModel):
        async def complete(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the model is down")

    agent = Agent(
        "steps", "d", [tools["divide"]], context=ContextConfig.default(), on_tool_error="return"
    )

    with pytest.raises(RuntimeError, match="the model is down"):
        await ModelLoop(agent, Broken([])).run("go")
