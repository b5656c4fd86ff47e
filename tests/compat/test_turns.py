"""Turns: construction, running, timeouts, errors, hooks, metadata and saving."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.compat.conftest import Impl
from tests.compat.marks import covers


def _tools(impl: Impl) -> dict[str, Any]:
    m = impl.m

    @m.tool
    async def echo(value: Any = None) -> Any:
        return value

    @m.tool
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @m.tool
    async def nothing() -> AsyncIterator[int]:
        if False:  # pragma: no cover
            yield 0

    @m.tool
    async def slow(seconds: float = 1.0) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @m.tool
    async def broken() -> None:
        raise RuntimeError("boom")

    return {"echo": echo, "count": count, "nothing": nothing, "slow": slow, "broken": broken}


@covers("Turn", "Turn.tool", "Turn.args", "Turn.kwargs", "Turn.timeout", "Turn.tags")
def test_a_turn_names_its_tool_by_name_object_or_function(impl: Impl) -> None:
    m = impl.m
    echo = _tools(impl)["echo"]

    by_name = m.Turn("echo", kwargs={"value": 1}, tags=["b", "a"])
    by_object = m.Turn(echo, args=[2], timeout=5)
    by_function = m.Turn(echo.fn)

    assert by_name.tool is echo
    assert by_object.tool is echo
    assert by_function.tool is echo
    assert by_name.kwargs == {"value": 1}
    assert by_object.args == [2]
    assert by_object.timeout == 5
    assert by_name.timeout == 60
    assert by_name.tags == frozenset({"a", "b"})
    assert m.Turn("echo").tags == frozenset()


@covers("Turn")
def test_an_unknown_tool_name_is_refused_naming_it(impl: Impl) -> None:
    with pytest.raises(impl.m.UnregisteredToolError, match="'missing' not found"):
        impl.m.Turn("missing")


@covers("Turn", "Turn.metadata")
def test_repr_shows_tool_timeout_and_metadata(impl: Impl) -> None:
    _tools(impl)

    assert repr(impl.m.Turn("echo", timeout=5)) == (
        "Turn(tool='echo', timeout=5, metadata=TurnMetadata(start_time=None, end_time=None, "
        "stop_reason=None))"
    )


@covers("Turn")
async def test_turn_is_generic_in_its_output(impl: Impl) -> None:
    _tools(impl)

    typed = impl.m.Turn[int]("echo", kwargs={"value": 4})

    assert isinstance(typed, impl.m.Turn)
    assert await typed.returning() == 4


@covers("Turn.returning", "Turn.output", "Turn.metadata", "StopReason")
async def test_returning_runs_a_coroutine_tool_and_records_the_run(impl: Impl) -> None:
    _tools(impl)
    turn = impl.m.Turn("echo", kwargs={"value": "hi"})

    assert turn.metadata.stop_reason is None
    assert await turn.returning() == "hi"

    assert turn.output == "hi"
    assert turn.metadata.stop_reason is impl.m.StopReason.COMPLETED
    assert turn.metadata.stop_reason == "completed"
    assert turn.metadata.start_time is not None
    assert turn.metadata.end_time is not None
    assert turn.metadata.end_time >= turn.metadata.start_time


@covers("Turn.yielding", "Turn.output")
async def test_yielding_runs_a_generator_tool_and_collects_the_values(impl: Impl) -> None:
    _tools(impl)
    turn = impl.m.Turn("count", kwargs={"n": 3})

    assert [v async for v in turn.yielding()] == [0, 1, 2]
    assert turn.output == [0, 1, 2]
    assert turn.metadata.stop_reason == impl.m.StopReason.COMPLETED


@covers("Turn.yielding")
async def test_a_generator_that_yields_nothing_completes_cleanly(impl: Impl) -> None:
    _tools(impl)
    turn = impl.m.Turn("nothing")

    assert [v async for v in turn.yielding()] == []
    assert turn.output == []
    assert turn.metadata.stop_reason == impl.m.StopReason.COMPLETED


@covers("Turn.returning", "Turn.yielding", "WrongRunMethodError")
async def test_the_wrong_run_method_is_refused(impl: Impl) -> None:
    m = impl.m
    _tools(impl)

    with pytest.raises(m.WrongRunMethodError, match=r"use yielding\(\) instead"):
        await m.Turn("count", kwargs={"n": 1}).returning()
    with pytest.raises(m.WrongRunMethodError, match=r"not an async generator; use returning\(\)"):
        async for _ in m.Turn("echo").yielding():
            pass


@covers("Turn.timeout", "TurnTimeoutError", "Turn.on_timeout", "Turn.on_complete", "StopReason")
async def test_a_turn_past_its_timeout_raises_and_fires_its_hooks(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    turn = m.Turn("slow", kwargs={"seconds": 1}, timeout=0.05)
    seen: list[Any] = []

    @turn.on_timeout
    async def late(t: Any) -> None:
        seen.append(("timeout", t is turn))

    @turn.on_complete
    async def finished(t: Any, reason: Any) -> None:
        seen.append(("complete", reason))

    with pytest.raises(m.TurnTimeoutError, match=r"timed out after 0\.05s") as info:
        await turn.returning()

    assert isinstance(info.value, TimeoutError)
    assert turn.metadata.stop_reason == m.StopReason.TIMEOUT
    assert seen == [("timeout", True), ("complete", m.StopReason.TIMEOUT)]


@covers("Turn.on_error", "Turn.on_complete", "StopReason")
async def test_a_failing_tool_raises_through_the_turn_and_fires_on_error(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    turn = m.Turn("broken")
    seen: list[Any] = []

    @turn.on_error
    async def failed(t: Any, exc: BaseException) -> None:
        seen.append(("error", str(exc)))

    @turn.on_complete
    async def finished(t: Any, reason: Any) -> None:
        seen.append(("complete", reason))

    with pytest.raises(RuntimeError, match="boom"):
        await turn.returning()

    assert turn.metadata.stop_reason == m.StopReason.ERROR
    assert seen == [("error", "boom"), ("complete", m.StopReason.ERROR)]


@covers("Turn.before_run", "Turn.after_run", "Turn.on_complete", "Turn.hooks")
async def test_turn_hooks_fire_around_the_run(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    turn = m.Turn("echo", kwargs={"value": 7})
    seen: list[Any] = []

    @turn.before_run
    async def starting(t: Any) -> None:
        seen.append(("before", t is turn))

    @turn.after_run
    async def ended(t: Any, output: Any) -> None:
        seen.append(("after", output))

    @turn.on_complete
    async def finished(t: Any, reason: Any) -> None:
        seen.append(("complete", reason))

    await turn.returning()

    assert seen == [("before", True), ("after", 7), ("complete", m.StopReason.COMPLETED)]
    assert [h.metadata.name for h in turn.hooks] == ["starting", "ended", "finished"]


@covers("Turn.returning", "SafeExecutionError", "Turn.timeout")
async def test_a_running_turn_cannot_start_again_or_change(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    turn = m.Turn("slow", kwargs={"seconds": 0.05})
    running = asyncio.ensure_future(turn.returning())
    await asyncio.sleep(0.01)

    with pytest.raises(m.SafeExecutionError, match="is running"):
        await turn.returning()
    with pytest.raises(
        m.SafeExecutionError,
        match="Cannot change property 'timeout' while the turn is running",
    ):
        turn.timeout = 5

    assert await running == "done"
    turn.timeout = 5
    assert turn.timeout == 5


@covers("Turn.kwargs", "Turn.args", "Turn.to_dict")
async def test_zero_argument_functions_in_the_arguments_are_called_at_run_time(
    impl: Impl,
) -> None:
    _tools(impl)
    counter = iter(range(10))
    turn = impl.m.Turn("echo", kwargs={"value": lambda: next(counter)})

    assert await turn.returning() == 0
    assert turn.to_dict()["kwargs"] == {"value": 1}


@covers("Turn.to_dict", "Turn.from_dict")
async def test_to_dict_and_from_dict_round_trip(impl: Impl) -> None:
    m = impl.m
    _tools(impl)
    turn = m.Turn("echo", kwargs={"value": 2}, timeout=30, tags=["a"])

    @m.hook(m.TurnHook.AFTER_RUN)
    async def noted(t: Any, output: Any) -> None:
        pass

    turn.hooks.append(noted)
    saved = turn.to_dict()

    assert saved == {
        "tool_name": "echo",
        "args": [],
        "kwargs": {"value": 2},
        "timeout": 30,
        "metadata": {"start_time": None, "end_time": None, "stop_reason": None},
        "output": None,
        "hooks": {"after_run": ["noted"]},
        "tags": ["a"],
    }
    restored = m.Turn.from_dict(saved)
    assert restored.to_dict() == saved
    assert restored.hooks == [noted]

    await restored.returning()
    ran = restored.to_dict()
    assert ran["output"] == 2
    assert ran["metadata"]["stop_reason"] == "completed"
    again = m.Turn.from_dict(ran)
    assert again.output == 2
    assert again.metadata.stop_reason == m.StopReason.COMPLETED


@covers("Turn.from_dict")
def test_from_dict_names_an_unknown_tool(impl: Impl) -> None:
    with pytest.raises(impl.m.UnregisteredToolError, match="'gone' not found"):
        impl.m.Turn.from_dict({"tool_name": "gone"})


@covers("StopReason")
def test_stop_reasons_are_string_enums(impl: Impl) -> None:
    reasons = impl.m.StopReason

    assert [r.value for r in reasons] == ["completed", "timeout", "error", "cancelled"]
    assert reasons("error") is reasons.ERROR
    assert reasons.CANCELLED == "cancelled"
    assert isinstance(reasons.TIMEOUT, str)
    assert str(reasons.COMPLETED) == "StopReason.COMPLETED"


@covers("Turn.kwargs", "Turn.args")
async def test_a_turns_arguments_change_in_place(impl: Impl) -> None:
    tools = _tools(impl)
    turn = impl.m.Turn("echo", args=[], kwargs={"value": 1})

    turn.kwargs["value"] = 2
    assert turn.kwargs == {"value": 2}
    assert await turn.returning() == 2
    turn.tool = tools["count"]
    turn.kwargs.pop("value")
    turn.args.append(2)
    assert (turn.args, turn.kwargs) == ([2], {})
    assert [v async for v in turn.yielding()] == [0, 1]


@covers("Turn.tool", "Turn.kwargs", "Turn.args", "Turn.timeout", "Turn.tags")
async def test_an_idle_turns_fields_can_be_reassigned(impl: Impl) -> None:
    tools = _tools(impl)
    turn = impl.m.Turn("echo", kwargs={"value": 1})

    turn.kwargs = {"value": 2}
    assert await turn.returning() == 2
    turn.tool = tools["count"]
    turn.kwargs = {"n": 2}
    turn.timeout = 10
    turn.tags = frozenset({"x"})

    assert turn.tool is tools["count"]
    assert turn.timeout == 10
    assert turn.tags == frozenset({"x"})
    assert [v async for v in turn.yielding()] == [0, 1]
