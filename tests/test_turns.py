"""Turns: construction, running, timeouts, cancellation, guards, hooks and serialization."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import enum
import functools
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Hook,
    HookRegistry,
    PygentsError,
    SafeExecutionError,
    StopReason,
    Tool,
    ToolRegistry,
    Turn,
    TurnHook,
    TurnMetadata,
    TurnTimeoutError,
    UnregisteredHookError,
    UnregisteredToolError,
    UnserializableHookError,
    WrongRunMethodError,
    hook,
    tool,
)

# -- helpers ---------------------------------------------------------------------------------

Event = tuple[Any, ...]


@dataclass
class Gate:
    """Lets a test hold a tool mid-run: the tool sets `started`, then waits for `release`."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


async def run_to_end(turn: Turn) -> Any:
    """Run a turn with the method its tool needs: the result, or the list of yielded values."""
    if turn.tool.is_generator:
        return [value async for value in turn.yielding()]
    return await turn.returning()


async def run_with_the_other_method(turn: Turn) -> None:
    """Run a turn with the method that does not match its tool."""
    if turn.tool.is_generator:
        await turn.returning()
    else:
        async for _ in turn.yielding():
            pass


async def consume(turn: Turn, received: list[Any], pause: float = 0) -> None:
    """Iterate a generator turn into `received`, sleeping `pause` s after each value."""
    async for value in turn.yielding():
        received.append(value)
        if pause:
            await asyncio.sleep(pause)


async def run_and_cancel(turn: Turn, gate: Gate) -> None:
    """Start `turn` in a task, cancel it once the tool is held, and expect the cancellation."""
    task = asyncio.create_task(run_to_end(turn))
    await gate.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def record(turn: Turn, events: list[Event], *, globally: bool = False) -> None:
    """Record every turn hook event of `turn` (or of all turns, with `globally`) in `events`."""

    async def rec_before_run(t: Turn) -> None:
        events.append(("before_run", t))

    async def rec_after_run(t: Turn, output: Any) -> None:
        events.append(("after_run", t, output))

    async def rec_on_timeout(t: Turn) -> None:
        events.append(("on_timeout", t))

    async def rec_on_error(t: Turn, exception: Exception) -> None:
        events.append(("on_error", t, exception))

    async def rec_on_complete(t: Turn, stop_reason: StopReason) -> None:
        events.append(("on_complete", t, stop_reason))

    if globally:
        hook(TurnHook.BEFORE_RUN)(rec_before_run)
        hook(TurnHook.AFTER_RUN)(rec_after_run)
        hook(TurnHook.ON_TIMEOUT)(rec_on_timeout)
        hook(TurnHook.ON_ERROR)(rec_on_error)
        hook(TurnHook.ON_COMPLETE)(rec_on_complete)
    else:
        turn.before_run(rec_before_run)
        turn.after_run(rec_after_run)
        turn.on_timeout(rec_on_timeout)
        turn.on_error(rec_on_error)
        turn.on_complete(rec_on_complete)


def assert_utc(moment: datetime | None) -> datetime:
    assert moment is not None
    assert moment.utcoffset() == timedelta(0)
    return moment


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def add() -> Tool[..., Any]:
    @tool
    async def add(a: int, b: int = 0) -> int:
        return a + b

    return add


@pytest.fixture
def count_up() -> Tool[..., Any]:
    @tool
    async def count_up(n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            yield i

    return count_up


@pytest.fixture
def echo() -> Tool[..., Any]:
    @tool
    async def echo(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return args, kwargs

    return echo


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def held(gate: Gate) -> Tool[..., Any]:
    """A coroutine tool that waits on the gate, then returns "done"."""

    @tool
    async def held() -> str:
        gate.started.set()
        await gate.release.wait()
        return "done"

    return held


@pytest.fixture
def held_stream(gate: Gate) -> Tool[..., Any]:
    """A generator tool that yields 1, waits on the gate, then yields 2."""

    @tool
    async def held_stream():  # type: ignore[no-untyped-def]
        yield 1
        gate.started.set()
        await gate.release.wait()
        yield 2

    return held_stream


@pytest.fixture
def outcome_tools(gate: Gate) -> dict[bool, Tool[..., Any]]:
    """A coroutine and a generator tool whose `mode` picks how the run ends.

    "ok" completes (output 1 / [1]), "error" raises RuntimeError, "slow" outlives a
    0.05 s timeout, "block" waits on the gate (to be cancelled).
    """

    async def behave(mode: str) -> None:
        if mode == "error":
            raise RuntimeError("tool failed")
        if mode == "slow":
            await asyncio.sleep(0.2)
        if mode == "block":
            gate.started.set()
            await gate.release.wait()

    @tool
    async def act(mode: str) -> int:
        await behave(mode)
        return 1

    @tool
    async def stream(mode: str):  # type: ignore[no-untyped-def]
        yield 1
        await behave(mode)

    return {False: act, True: stream}


OUTCOMES = ["ok", "error", "slow", "block"]


async def drive(turn: Turn, mode: str, gate: Gate) -> BaseException | None:
    """Run `turn` to the end `mode` leads to; return the exception it raised, if any."""
    if mode == "block":
        await run_and_cancel(turn, gate)
        return None
    expected = {"ok": None, "error": RuntimeError, "slow": TurnTimeoutError}[mode]
    if expected is None:
        await run_to_end(turn)
        return None
    with pytest.raises(expected) as info:
        await run_to_end(turn)
    return info.value


# -- construction ----------------------------------------------------------------------------


@pytest.mark.parametrize("by_name", [True, False])
async def test_turn_names_its_tool_by_name_or_by_object(add: Tool[..., Any], by_name: bool) -> None:
    turn = Turn("add" if by_name else add, args=[2], kwargs={"b": 3})

    assert turn.tool is add
    assert turn.tool_name == "add"
    assert await turn.returning() == 5


def test_unknown_tool_name_raises_at_construction() -> None:
    with pytest.raises(UnregisteredToolError, match="nowhere") as info:
        Turn("nowhere")

    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, PygentsError)


@pytest.mark.parametrize("timeout", [0, -1, -0.5, True, False, "5", math.nan, None])
def test_timeout_must_be_a_positive_number(add: Tool[..., Any], timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        Turn(add, args=[1], timeout=timeout)

    turn = Turn(add, args=[1], timeout=2)
    with pytest.raises(ValueError, match="timeout"):
        turn.timeout = timeout
    assert turn.timeout == 2


@pytest.mark.parametrize("timeout", [1, 0.25, 60])
def test_positive_timeout_is_kept(add: Tool[..., Any], timeout: float) -> None:
    assert Turn(add, args=[1], timeout=timeout).timeout == timeout


def test_default_timeout_is_sixty_seconds(add: Tool[..., Any]) -> None:
    assert Turn(add, args=[1]).timeout == 60


@pytest.mark.parametrize("args", ["ab", {"a": 1}, {1, 2}, 5, iter([1])])
def test_args_must_be_a_list_or_tuple(add: Tool[..., Any], args: Any) -> None:
    with pytest.raises(TypeError, match="args"):
        Turn(add, args=args)


@pytest.mark.parametrize("kwargs", [{1: "a"}, {("a",): 1}, [("a", 1)], "a=1"])
def test_kwargs_must_be_a_dict_with_str_keys(add: Tool[..., Any], kwargs: Any) -> None:
    with pytest.raises(TypeError, match="kwargs"):
        Turn(add, kwargs=kwargs)


async def test_changing_args_and_kwargs_in_place_changes_the_call(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=(1,))
    turn.args.append(2)
    assert await turn.returning() == 3

    turn = Turn(add, kwargs={"a": 1, "b": 2})
    turn.kwargs["b"] = 40
    turn.kwargs.update(a=2)
    assert turn.kwargs == {"a": 2, "b": 40}
    assert turn.to_dict()["kwargs"] == {"a": 2, "b": 40}
    assert await turn.returning() == 42


def test_a_change_in_place_reaches_this_turn_and_no_copy(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[1], kwargs={"b": 2})
    twin = turn.copy()

    turn.args.append(5)
    twin.kwargs["b"] = 7

    assert (turn.args, turn.kwargs) == ([1, 5], {"b": 2})
    assert (twin.args, twin.kwargs) == ([1], {"b": 7})


def test_a_copy_of_args_or_kwargs_is_a_plain_list_or_dict_of_its_own(
    add: Tool[..., Any],
) -> None:
    turn = Turn(add, args=[1], kwargs={"b": 2})
    copies = [copy.copy(turn.kwargs), copy.deepcopy(turn.kwargs), dict(turn.kwargs)]
    lists = [copy.copy(turn.args), copy.deepcopy(turn.args), list(turn.args)]

    for kwargs in copies:
        kwargs["b"] = 9
    for args in lists:
        args.append(9)

    assert [type(kwargs) for kwargs in copies] == [dict] * 3
    assert [type(args) for args in lists] == [list] * 3
    assert (turn.args, turn.kwargs) == ([1], {"b": 2})


def test_a_bad_key_is_refused_and_changes_nothing(add: Tool[..., Any]) -> None:
    turn = Turn(add, kwargs={"b": 2})
    kwargs = turn.kwargs

    with pytest.raises(TypeError, match="str keys"):
        kwargs[1] = 3  # type: ignore[index]

    assert kwargs == {"b": 2}
    assert turn.kwargs == {"b": 2}


async def test_a_change_in_place_while_running_is_refused_and_changes_nothing() -> None:
    started, seen = asyncio.Event(), []

    @tool
    async def wait(value: int = 0) -> int:
        started.set()
        await asyncio.sleep(0.05)
        return value

    turn = Turn(wait, kwargs={"value": 1})
    running = asyncio.create_task(turn.returning())
    await started.wait()
    for change in (
        lambda: turn.kwargs.__setitem__("value", 2),
        lambda: turn.kwargs.pop("value"),
        lambda: turn.args.append(3),
    ):
        with pytest.raises(SafeExecutionError, match="while the turn is running"):
            change()
        seen.append((turn.args, turn.kwargs))

    assert await running == 1
    assert seen == [([], {"value": 1})] * 3


def test_a_list_or_dict_read_before_an_assignment_no_longer_writes(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[1], kwargs={"a": 1})
    old_args, old_kwargs = turn.args, turn.kwargs

    turn.args, turn.kwargs = [2], {"a": 2}
    old_args.append(9)
    old_kwargs["a"] = 9

    assert (turn.args, turn.kwargs) == ([2], {"a": 2})
    assert (old_args, old_kwargs) == ([1, 9], {"a": 9})


LIST_CHANGES = st.sampled_from(
    [
        ("append", (7,)),
        ("extend", ([8, 9],)),
        ("insert", (0, 6)),
        ("pop", ()),
        ("remove", (1,)),
        ("reverse", ()),
        ("sort", ()),
        ("clear", ()),
        ("__setitem__", (0, 5)),
        ("__delitem__", (slice(0, 1),)),
        ("__iadd__", ([4],)),
        ("__imul__", (2,)),
    ]
)
DICT_CHANGES = st.sampled_from(
    [
        ("__setitem__", ("a", 5)),
        ("__setitem__", ("c", 6)),
        ("__delitem__", ("a",)),
        ("pop", ("b",)),
        ("pop", ("z", None)),
        ("popitem", ()),
        ("setdefault", ("d", 1)),
        ("update", ({"e": 2},)),
        ("__ior__", ({"a": 0},)),
        ("clear", ()),
    ]
)


def _apply(target: Any, name: str, arguments: tuple[Any, ...]) -> Any:
    try:
        return ("ok", getattr(target, name)(*arguments))
    except (IndexError, KeyError, ValueError) as error:
        return ("error", type(error))


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    list_changes=st.lists(LIST_CHANGES, max_size=8),
    dict_changes=st.lists(DICT_CHANGES, max_size=8),
)
def test_changes_in_place_act_as_on_a_list_and_a_dict(
    add: Tool[..., Any],
    list_changes: list[tuple[str, tuple[Any, ...]]],
    dict_changes: list[tuple[str, tuple[Any, ...]]],
) -> None:
    """Any run of list and dict methods on `turn.args` / `turn.kwargs`, each read anew,
    returns and leaves what it would on a plain list and dict."""
    turn = Turn(add, args=[1, 2, 3], kwargs={"a": 1, "b": 2})
    plain_list, plain_dict = [1, 2, 3], {"a": 1, "b": 2}
    for name, arguments in list_changes:
        result = _apply(turn.args, name, arguments)
        expected = _apply(plain_list, name, arguments)
        if name in ("__iadd__", "__imul__"):  # they return the list itself
            assert result[0] == expected[0]
        else:
            assert result == expected
        assert turn.args == plain_list
    for name, arguments in dict_changes:
        result = _apply(turn.kwargs, name, arguments)
        expected = _apply(plain_dict, name, arguments)
        if name == "__ior__":
            assert result[0] == expected[0]
        else:
            assert result == expected
        assert turn.kwargs == plain_dict
    assert turn.to_dict()["args"] == plain_list
    assert turn.to_dict()["kwargs"] == plain_dict


# -- running ---------------------------------------------------------------------------------


async def test_returning_gives_the_result_and_keeps_it_as_output(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[2, 3])

    assert await turn.returning() == 5
    assert turn.output == 5


async def test_yielding_streams_values_and_output_lists_them(count_up: Tool[..., Any]) -> None:
    turn = Turn(count_up, kwargs={"n": 3})
    received = []

    async for value in turn.yielding():
        received.append(value)
        assert turn.output == received

    assert received == [0, 1, 2]
    assert turn.output == [0, 1, 2]


@pytest.mark.parametrize("generator", [True, False])
async def test_wrong_run_method_raises(
    add: Tool[..., Any], count_up: Tool[..., Any], generator: bool
) -> None:
    turn = Turn(count_up, args=[2]) if generator else Turn(add, args=[1])

    with pytest.raises(WrongRunMethodError, match="yielding" if generator else "returning") as info:
        await run_with_the_other_method(turn)

    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, PygentsError)
    assert not turn.is_running
    assert turn.metadata == TurnMetadata()
    # The right method still works afterwards.
    assert await run_to_end(turn) == ([0, 1] if generator else 1)


# -- dynamic arguments -----------------------------------------------------------------------


@pytest.mark.parametrize("generator", [False, True])
async def test_zero_arg_callables_are_called_at_each_invocation(generator: bool) -> None:
    @tool
    async def pair(a: Any, b: Any) -> tuple[Any, Any]:
        return a, b

    @tool
    async def pair_stream(a: Any, b: Any):  # type: ignore[no-untyped-def]
        yield a, b

    calls: list[str] = []

    def next_a() -> int:
        calls.append("a")
        return len(calls)

    turn = Turn(pair_stream if generator else pair, args=[next_a], kwargs={"b": lambda: "b"})
    assert calls == []

    first = await run_to_end(turn)
    second = await run_to_end(turn)

    assert calls == ["a", "a"]
    if generator:
        assert (first, second) == ([(1, "b")], [(2, "b")])
    else:
        assert (first, second) == ((1, "b"), (2, "b"))


async def test_state_changed_after_construction_is_seen_by_the_run(add: Tool[..., Any]) -> None:
    state = {"a": 1}
    turn = Turn(add, args=[lambda: state["a"]], kwargs={"b": lambda: state["a"] * 10})

    state["a"] = 2

    assert await turn.returning() == 22


class _Source:
    def value(self) -> str:
        return "from method"


class _CallableThing:
    def __call__(self) -> str:
        return "called"


@pytest.mark.parametrize(
    ("make", "evaluated"),
    [
        (lambda: lambda: "from lambda", "from lambda"),
        (lambda: functools.partial(str.upper, "abc"), "ABC"),
        (lambda: _Source().value, "from method"),
    ],
    ids=["lambda", "partial", "bound-method"],
)
async def test_dynamic_argument_kinds_are_evaluated(
    echo: Tool[..., Any], make: Callable[[], Any], evaluated: str
) -> None:
    result = await Turn(echo, args=[make()], kwargs={"k": make()}).returning()

    assert result == ((evaluated,), {"k": evaluated})


@pytest.mark.parametrize(
    "value",
    [lambda x: x * 2, int, _CallableThing()],
    ids=["lambda-needing-an-argument", "class", "callable-instance"],
)
async def test_callables_that_are_not_dynamic_are_passed_as_is(
    echo: Tool[..., Any], value: Any
) -> None:
    args, kwargs = await Turn(echo, args=[value], kwargs={"k": value}).returning()

    assert args[0] is value
    assert kwargs["k"] is value


# -- timeouts --------------------------------------------------------------------------------


async def test_coroutine_tool_past_its_timeout_raises_turn_timeout_error() -> None:
    @tool
    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    turn = Turn(slow, timeout=0.05)
    events: list[Event] = []
    record(turn, events)
    started = time.monotonic()

    with pytest.raises(TurnTimeoutError, match="slow") as info:
        await turn.returning()

    assert time.monotonic() - started < 10  # cut short, with room for a loaded machine
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, PygentsError)
    assert turn.metadata.stop_reason is StopReason.TIMEOUT
    assert turn.output is None
    assert [e[0] for e in events] == ["before_run", "on_timeout", "on_complete"]
    assert events[-1] == ("on_complete", turn, StopReason.TIMEOUT)


async def test_generator_timing_out_mid_iteration_keeps_the_values_so_far() -> None:
    @tool
    async def trickle():  # type: ignore[no-untyped-def]
        yield 1
        yield 2
        await asyncio.sleep(0.2)
        yield 3

    turn = Turn(trickle, timeout=0.05)
    received: list[Any] = []

    with pytest.raises(TurnTimeoutError):
        await consume(turn, received)

    assert received == [1, 2]
    assert turn.output == [1, 2]
    assert turn.metadata.stop_reason is StopReason.TIMEOUT


async def test_consumer_time_counts_toward_a_generator_timeout(
    count_up: Tool[..., Any],
) -> None:
    turn = Turn(count_up, args=[5], timeout=0.05)
    received: list[Any] = []

    with pytest.raises(TurnTimeoutError):
        await consume(turn, received, pause=0.03)

    assert 1 <= len(received) < 5
    assert turn.output == received
    assert turn.metadata.stop_reason is StopReason.TIMEOUT


async def test_tool_that_finishes_without_suspending_is_never_timed_out() -> None:
    @tool
    async def crunch() -> int:
        spins, end = 0, time.monotonic() + 0.08
        while time.monotonic() < end:
            spins += 1
        return spins

    turn = Turn(crunch, timeout=0.02)

    assert await turn.returning() > 0
    assert turn.metadata.stop_reason is StopReason.COMPLETED


async def test_nested_turn_timeout_is_an_error_for_the_outer_turn() -> None:
    @tool
    async def inner() -> None:
        await asyncio.sleep(0.2)

    inner_turns: list[Turn] = []

    @tool
    async def outer() -> None:
        nested = Turn(inner, timeout=0.02)
        inner_turns.append(nested)
        await nested.returning()

    turn = Turn(outer, timeout=5)
    events: list[Event] = []
    record(turn, events)

    with pytest.raises(TurnTimeoutError) as info:
        await turn.returning()

    assert inner_turns[0].metadata.stop_reason is StopReason.TIMEOUT
    assert turn.metadata.stop_reason is StopReason.ERROR
    assert events == [
        ("before_run", turn),
        ("on_error", turn, info.value),
        ("on_complete", turn, StopReason.ERROR),
    ]


# -- cancellation ----------------------------------------------------------------------------


@pytest.mark.parametrize("generator", [False, True])
async def test_cancelled_run_records_cancelled_reraises_and_can_run_again(
    held: Tool[..., Any], held_stream: Tool[..., Any], gate: Gate, generator: bool
) -> None:
    turn = Turn(held_stream if generator else held)
    events: list[Event] = []
    record(turn, events)

    await run_and_cancel(turn, gate)

    assert turn.metadata.stop_reason is StopReason.CANCELLED
    assert not turn.is_running
    assert events == [("before_run", turn), ("on_complete", turn, StopReason.CANCELLED)]

    gate.release.set()
    assert await run_to_end(turn) == ([1, 2] if generator else "done")
    assert turn.metadata.stop_reason is StopReason.COMPLETED


async def test_consumer_stopping_a_generator_turn_early_ends_it_as_cancelled(
    count_up: Tool[..., Any],
) -> None:
    turn = Turn(count_up, args=[5])
    events: list[Event] = []
    record(turn, events)

    stream = turn.yielding()
    assert await anext(stream) == 0
    await stream.aclose()

    assert turn.output == [0]
    assert turn.metadata.stop_reason is StopReason.CANCELLED
    assert not turn.is_running
    assert events[-1] == ("on_complete", turn, StopReason.CANCELLED)


# -- safe execution --------------------------------------------------------------------------


async def test_starting_a_running_coroutine_turn_again_raises(
    held: Tool[..., Any], gate: Gate
) -> None:
    turn = Turn(held)
    first = asyncio.create_task(turn.returning())
    await gate.started.wait()

    with pytest.raises(SafeExecutionError, match="held"):
        await turn.returning()

    assert turn.is_running
    gate.release.set()
    assert await first == "done"
    assert turn.metadata.stop_reason is StopReason.COMPLETED


async def test_starting_a_running_generator_turn_again_raises(
    held_stream: Tool[..., Any], gate: Gate
) -> None:
    turn = Turn(held_stream)
    first = turn.yielding()
    assert await anext(first) == 1

    with pytest.raises(SafeExecutionError, match="held_stream"):
        async for _ in turn.yielding():
            pass

    gate.release.set()
    assert [value async for value in first] == [2]
    assert turn.output == [1, 2]
    assert turn.metadata.stop_reason is StopReason.COMPLETED


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("tool", "other", "other"),
        ("args", [7], [7]),
        ("kwargs", {"x": 1}, {"x": 1}),
        ("timeout", 5, 5),
        ("tags", ["t"], frozenset({"t"})),
    ],
)
async def test_guarded_fields_cannot_be_reassigned_while_running(
    held: Tool[..., Any], gate: Gate, name: str, value: Any, shown: Any
) -> None:
    @tool
    async def other() -> None:
        pass

    def read(turn: Turn) -> Any:
        return turn.tool_name if name == "tool" else getattr(turn, name)

    turn = Turn(held)
    before = read(turn)
    task = asyncio.create_task(turn.returning())
    await gate.started.wait()

    with pytest.raises(SafeExecutionError, match=name):
        setattr(turn, name, value)
    assert read(turn) == before

    gate.release.set()
    await task
    setattr(turn, name, value)
    assert read(turn) == shown


async def test_metadata_while_running_has_start_but_no_end(
    held: Tool[..., Any], add: Tool[..., Any], gate: Gate
) -> None:
    turn = Turn(held)
    assert not turn.is_running
    task = asyncio.create_task(turn.returning())
    await gate.started.wait()

    assert turn.is_running
    assert_utc(turn.metadata.start_time)
    assert turn.metadata.end_time is None
    assert turn.metadata.stop_reason is None

    gate.release.set()
    await task
    assert not turn.is_running


# -- metadata --------------------------------------------------------------------------------


def test_metadata_is_all_none_before_a_run(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[1])

    assert turn.metadata == TurnMetadata(None, None, None)
    assert turn.output is None


@pytest.mark.parametrize(
    ("reason", "value"),
    [
        (StopReason.COMPLETED, "completed"),
        (StopReason.TIMEOUT, "timeout"),
        (StopReason.ERROR, "error"),
        (StopReason.CANCELLED, "cancelled"),
    ],
)
def test_stop_reason_values(reason: StopReason, value: str) -> None:
    assert reason.value == value
    assert StopReason(value) is reason


@pytest.mark.parametrize("generator", [False, True])
@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("ok", StopReason.COMPLETED),
        ("error", StopReason.ERROR),
        ("slow", StopReason.TIMEOUT),
        ("block", StopReason.CANCELLED),
    ],
)
async def test_metadata_after_a_run_records_times_and_stop_reason(
    outcome_tools: dict[bool, Tool[..., Any]],
    gate: Gate,
    generator: bool,
    mode: str,
    reason: StopReason,
) -> None:
    turn = Turn(outcome_tools[generator], kwargs={"mode": mode}, timeout=0.05)
    wall_before = datetime.now(UTC)

    await drive(turn, mode, gate)

    wall_after = datetime.now(UTC)
    metadata = turn.metadata
    start, end = assert_utc(metadata.start_time), assert_utc(metadata.end_time)
    # A millisecond of slack: the turn reads the clock separately.
    slack = timedelta(milliseconds=1)
    assert wall_before - slack <= start <= end <= wall_after + slack
    assert metadata.stop_reason is reason
    if generator:
        assert turn.output == [1]
    else:
        assert turn.output == (1 if mode == "ok" else None)
    # Assignable, as in pygents: the turn keeps what was assigned until its next run.
    metadata.stop_reason = None
    assert turn.metadata is metadata
    assert turn.to_dict()["metadata"]["stop_reason"] is None


async def test_a_new_run_replaces_the_previous_output_and_metadata(
    outcome_tools: dict[bool, Tool[..., Any]], gate: Gate
) -> None:
    turn = Turn(outcome_tools[False], kwargs={"mode": "ok"})
    await turn.returning()
    first_start = turn.metadata.start_time

    turn.kwargs = {"mode": "error"}
    await drive(turn, "error", gate)

    assert turn.output is None
    assert turn.metadata.stop_reason is StopReason.ERROR
    assert assert_utc(turn.metadata.start_time) >= assert_utc(first_start)


# -- hooks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("globally", [False, True], ids=["instance", "global"])
@pytest.mark.parametrize("generator", [False, True], ids=["coroutine", "generator"])
@pytest.mark.parametrize("mode", OUTCOMES)
async def test_hook_order_for_each_outcome(
    outcome_tools: dict[bool, Tool[..., Any]],
    gate: Gate,
    mode: str,
    generator: bool,
    globally: bool,
) -> None:
    turn = Turn(outcome_tools[generator], kwargs={"mode": mode}, timeout=0.05)
    events: list[Event] = []
    record(turn, events, globally=globally)

    raised = await drive(turn, mode, gate)

    output = [1] if generator else 1
    expected: dict[str, list[Event]] = {
        "ok": [("after_run", turn, output), ("on_complete", turn, StopReason.COMPLETED)],
        "error": [("on_error", turn, raised), ("on_complete", turn, StopReason.ERROR)],
        "slow": [("on_timeout", turn), ("on_complete", turn, StopReason.TIMEOUT)],
        "block": [("on_complete", turn, StopReason.CANCELLED)],
    }
    assert events == [("before_run", turn), *expected[mode]]


async def test_instance_hook_decorator_forms(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[1])
    calls: list[tuple[str, Turn]] = []

    @turn.before_run
    async def bare(t: Turn) -> None:
        calls.append(("bare", t))

    @turn.before_run(lock=True, label="with options")
    async def with_options(t: Turn, label: str) -> None:
        calls.append((label, t))

    async def plain(t: Turn) -> None:
        calls.append(("plain", t))

    attached = turn.before_run(plain)

    assert all(isinstance(h, Hook) for h in (bare, with_options, attached))
    assert turn.hooks == [bare, with_options, attached]
    await turn.returning()
    assert calls == [("bare", turn), ("with options", turn), ("plain", turn)]


async def test_global_turn_hook_fires_for_every_turn_after_instance_hooks(
    add: Tool[..., Any], count_up: Tool[..., Any]
) -> None:
    calls: list[tuple[str, Any, StopReason]] = []

    @hook(TurnHook.ON_COMPLETE)
    async def audit(turn: Turn, stop_reason: StopReason) -> None:
        calls.append(("global", turn.tool_name, stop_reason))

    first = Turn(add, args=[1])

    @first.on_complete
    async def own(turn: Turn, stop_reason: StopReason) -> None:
        calls.append(("own", turn.tool_name, stop_reason))

    # The global hook attached to the turn as well still fires once per event.
    first.hooks.append(audit)
    await first.returning()
    await run_to_end(Turn(count_up, args=[1]))

    assert calls == [
        ("own", "add", StopReason.COMPLETED),
        ("global", "add", StopReason.COMPLETED),
        ("global", "count_up", StopReason.COMPLETED),
    ]


async def test_global_hook_with_tags_fires_only_for_turns_sharing_a_tag(
    add: Tool[..., Any],
) -> None:
    seen: list[frozenset[str]] = []

    @hook(TurnHook.BEFORE_RUN, tags=["billing"])
    async def bill(turn: Turn) -> None:
        seen.append(turn.tags)

    await Turn(add, args=[1], tags=["billing", "eu"]).returning()
    await Turn(add, args=[1], tags=["search"]).returning()
    await Turn(add, args=[1]).returning()

    assert seen == [frozenset({"billing", "eu"})]


@pytest.mark.parametrize("generator", [False, True])
async def test_before_run_hook_raising_stops_the_run(generator: bool) -> None:
    invoked: list[str] = []

    @tool
    async def probe() -> str:
        invoked.append("probe")
        return "ran"

    @tool
    async def probe_stream():  # type: ignore[no-untyped-def]
        invoked.append("probe_stream")
        yield "ran"

    turn = Turn(probe_stream if generator else probe)
    refusal = RuntimeError("not now")
    completed: list[StopReason] = []

    @turn.before_run
    async def refuse(t: Turn) -> None:
        raise refusal

    @turn.on_complete
    async def done(t: Turn, stop_reason: StopReason) -> None:
        completed.append(stop_reason)

    with pytest.raises(RuntimeError) as info:
        await run_to_end(turn)

    assert info.value is refusal
    assert invoked == []
    assert not turn.is_running
    assert turn.metadata.stop_reason is StopReason.ERROR
    assert completed == [StopReason.ERROR]

    turn.hooks.remove(refuse)
    assert await run_to_end(turn) == (["ran"] if generator else "ran")


# -- copy ------------------------------------------------------------------------------------


async def test_copy_is_a_fresh_unrun_turn_with_the_same_settings(add: Tool[..., Any]) -> None:
    evaluations: list[int] = []

    def dynamic_b() -> int:
        evaluations.append(1)
        return 10

    turn = Turn(add, args=(1,), kwargs={"b": dynamic_b}, timeout=3, tags=["x"])

    @turn.after_run
    async def noted(t: Turn, output: Any) -> None:
        pass

    await turn.returning()
    twin = turn.copy()

    assert twin is not turn
    assert twin.tool is add
    assert twin.args == [1]
    assert twin.kwargs == {"b": dynamic_b}
    assert (twin.timeout, twin.tags) == (3, frozenset({"x"}))
    assert twin.hooks == [noted]
    assert twin.metadata == TurnMetadata()
    assert twin.output is None
    assert not twin.is_running
    assert len(evaluations) == 1

    twin.hooks.clear()
    assert turn.hooks == [noted]
    assert await twin.returning() == 11
    assert len(evaluations) == 2


# -- TurnMetadata serialization --------------------------------------------------------------


def test_turn_metadata_to_dict_shape_and_round_trip() -> None:
    start = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    end = start + timedelta(seconds=2)
    metadata = TurnMetadata(start, end, StopReason.TIMEOUT)

    saved = metadata.to_dict()

    assert saved == {
        "start_time": start.isoformat(),
        "end_time": end.isoformat(),
        "stop_reason": "timeout",
    }
    assert list(saved) == ["start_time", "end_time", "stop_reason"]
    assert TurnMetadata.from_dict(saved) == metadata
    assert TurnMetadata().to_dict() == {"start_time": None, "end_time": None, "stop_reason": None}
    assert TurnMetadata.from_dict({}) == TurnMetadata()


# -- Turn serialization ----------------------------------------------------------------------

TURN_KEYS = ["tool_name", "args", "kwargs", "timeout", "metadata", "output", "hooks", "tags"]


def test_to_dict_shape_and_key_order_before_a_run(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=(1,), kwargs={"b": 2}, timeout=2.5, tags=["b", "a"])

    saved = turn.to_dict()

    assert list(saved) == TURN_KEYS
    assert saved == {
        "tool_name": "add",
        "args": [1],
        "kwargs": {"b": 2},
        "timeout": 2.5,
        "metadata": {"start_time": None, "end_time": None, "stop_reason": None},
        "output": None,
        "hooks": {},
        "tags": ["a", "b"],
    }


@pytest.mark.parametrize("generator", [False, True])
async def test_to_dict_after_a_run_holds_output_and_metadata(
    add: Tool[..., Any], count_up: Tool[..., Any], generator: bool
) -> None:
    turn = Turn(count_up, args=[2]) if generator else Turn(add, args=[2, 3])
    await run_to_end(turn)

    saved = turn.to_dict()

    assert saved["output"] == ([0, 1] if generator else 5)
    assert saved["metadata"] == {
        "start_time": assert_utc(turn.metadata.start_time).isoformat(),
        "end_time": assert_utc(turn.metadata.end_time).isoformat(),
        "stop_reason": "completed",
    }


def test_to_dict_evaluates_dynamic_arguments_when_saved(add: Tool[..., Any]) -> None:
    counter = iter(range(100))
    turn = Turn(add, args=[lambda: next(counter)], kwargs={"b": lambda: "fixed"})

    first, second = turn.to_dict(), turn.to_dict()

    assert (first["args"], first["kwargs"]) == ([0], {"b": "fixed"})
    assert second["args"] == [1]
    assert orjson.loads(turn.to_json())["args"] == [2]


def test_saved_dict_does_not_share_state_with_the_turn(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[1], kwargs={"b": 2}, tags=["t"])

    saved = turn.to_dict()
    saved["args"].append(5)
    saved["kwargs"]["b"] = 99
    saved["tags"].append("u")

    assert turn.args == [1]
    assert turn.kwargs == {"b": 2}
    assert turn.tags == frozenset({"t"})


def test_to_dict_saves_hooks_by_name_grouped_by_kind(add: Tool[..., Any]) -> None:
    @hook([TurnHook.BEFORE_RUN, TurnHook.ON_COMPLETE])
    async def trace(*args: Any, **kwargs: Any) -> None:
        pass

    @hook(TurnHook.ON_ERROR)
    async def global_only(turn: Turn, exception: Exception) -> None:
        pass

    turn = Turn(add, args=[1])

    @turn.before_run
    async def first(t: Turn) -> None:
        pass

    @turn.on_error
    async def oops(t: Turn, exception: Exception) -> None:
        pass

    turn.hooks.append(trace)

    assert turn.to_dict()["hooks"] == {
        "before_run": ["first", "trace"],
        "on_error": ["oops"],
        "on_complete": ["trace"],
    }


async def test_from_dict_of_to_dict_reproduces_the_turn(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[1], kwargs={"b": 2}, timeout=4, tags=["x", "y"])

    @turn.before_run
    async def announce(t: Turn) -> None:
        pass

    @turn.on_complete
    async def finished(t: Turn, stop_reason: StopReason) -> None:
        pass

    await turn.returning()

    restored = Turn.from_dict(turn.to_dict())

    assert restored.tool is add
    assert restored.args == [1]
    assert restored.kwargs == {"b": 2}
    assert restored.timeout == 4
    assert restored.tags == frozenset({"x", "y"})
    assert restored.hooks == [announce, finished]
    assert restored.metadata == turn.metadata
    assert restored.output == 3
    assert not restored.is_running
    assert restored.to_dict() == turn.to_dict()


def test_from_dict_needs_only_the_tool_name(add: Tool[..., Any]) -> None:
    turn = Turn.from_dict({"tool_name": "add"})

    assert turn.tool is add
    assert (turn.args, turn.kwargs, turn.timeout) == ([], {}, 60)
    assert turn.tags == frozenset()
    assert turn.hooks == []
    assert turn.metadata == TurnMetadata()
    assert turn.output is None


@pytest.mark.parametrize(
    ("data", "field_name"),
    [
        ({}, "tool_name"),
        ({"tool_name": 5}, "tool_name"),
        (["add"], "tool_name"),
        ({"tool_name": "add", "args": "abc"}, "args"),
        ({"tool_name": "add", "args": {"a": 1}}, "args"),
        ({"tool_name": "add", "kwargs": [1]}, "kwargs"),
        ({"tool_name": "add", "timeout": "5"}, "timeout"),
        ({"tool_name": "add", "timeout": 0}, "timeout"),
        ({"tool_name": "add", "tags": "abc"}, "tags"),
        ({"tool_name": "add", "tags": [1]}, "tags"),
        ({"tool_name": "add", "metadata": "x"}, "metadata"),
        ({"tool_name": "add", "metadata": {"start_time": "yesterday"}}, "start_time"),
        ({"tool_name": "add", "metadata": {"end_time": 12}}, "end_time"),
        ({"tool_name": "add", "metadata": {"stop_reason": "exploded"}}, "stop_reason"),
        ({"tool_name": "add", "hooks": ["x"]}, "hooks"),
        ({"tool_name": "add", "hooks": {"before_invoke": []}}, "hooks"),
        ({"tool_name": "add", "hooks": {"before_run": "x"}}, "hooks"),
    ],
)
def test_from_dict_rejects_malformed_data_naming_the_field(
    add: Tool[..., Any], data: Any, field_name: str
) -> None:
    with pytest.raises(ValueError, match=field_name):
        Turn.from_dict(data)


def test_from_dict_with_an_unknown_tool_raises(add: Tool[..., Any]) -> None:
    saved = Turn(add, args=[1]).to_dict()
    ToolRegistry.unregister("add")

    with pytest.raises(UnregisteredToolError, match="add"):
        Turn.from_dict(saved)


def test_from_dict_with_an_unknown_hook_raises(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[1])

    @turn.before_run
    async def vanished(t: Turn) -> None:
        pass

    saved = turn.to_dict()
    HookRegistry.unregister("vanished")

    with pytest.raises(UnregisteredHookError, match="vanished"):
        Turn.from_dict(saved)


@pytest.mark.parametrize("load", ["from_dict", "from_json"])
def test_a_saved_turn_loads_against_the_registry_given(load: str) -> None:
    from pygents_ctx import AgentRegistry

    plugin = AgentRegistry()
    with plugin.use():

        @tool
        async def fetch(url: str) -> str:
            return url

        turn = Turn(fetch, kwargs={"url": "a"})

        @turn.before_run
        async def note_start(t: Turn) -> None:
            pass

        saved: Any = turn.to_dict() if load == "from_dict" else turn.to_json()
    loader = getattr(Turn, load)

    with pytest.raises(UnregisteredToolError, match="'fetch' not found"):
        loader(saved)  # the current registry (the test's) has no tool 'fetch'
    restored = loader(saved, registry=plugin)
    assert restored.tool is fetch
    assert restored.kwargs == {"url": "a"}
    assert restored.hooks == [note_start]  # found in plugin.hooks
    assert HookRegistry.current() is not plugin.hooks  # only while it loaded
    with pytest.raises(UnregisteredHookError, match="note_start"):
        loader(saved, registry=plugin.tools)  # the tool there, the hooks in the current one
    bare: Any = {"tool_name": "fetch"} if load == "from_dict" else b'{"tool_name": "fetch"}'
    assert loader(bare, registry=plugin.tools).tool is fetch
    assert Turn("fetch", registry=plugin).tool is fetch  # Turn(...) takes either too


def test_a_tool_missing_from_the_registry_given_says_where_it_was_looked_up(
    add: Tool[..., Any],
) -> None:
    from pygents_ctx import AgentRegistry

    empty = AgentRegistry()
    with pytest.raises(UnregisteredToolError) as missing:
        Turn.from_dict({"tool_name": "add"}, registry=empty)
    assert str(missing.value).startswith("tool 'add' not found")
    assert "in the ToolRegistry given (<ToolRegistry of 0 tools>)" in str(missing.value)
    assert "not the current one" in str(missing.value)
    assert "the current ToolRegistry has a tool 'add': register it in this one too" in str(
        missing.value
    )
    with pytest.raises(UnregisteredToolError, match="register the tool in it"):
        Turn("nowhere", registry=empty.tools)
    with pytest.raises(UnregisteredToolError) as here:
        Turn.from_dict({"tool_name": "nowhere"})  # the current registry: as before
    assert str(here.value).endswith("decorate it with @tool first")


@pytest.mark.parametrize("given", [HookRegistry(), "tools", 1])
def test_a_registry_keyword_of_the_wrong_type_is_refused(add: Tool[..., Any], given: Any) -> None:
    with pytest.raises(TypeError, match=r"Turn\.from_dict registry must be a ToolRegistry or an"):
        Turn.from_dict({"tool_name": "add"}, registry=given)
    with pytest.raises(TypeError, match=r"Turn\.from_json registry must be a ToolRegistry or an"):
        Turn.from_json(b'{"tool_name": "add"}', registry=given)
    with pytest.raises(TypeError, match="Turn registry must be a ToolRegistry or an AgentRegistry"):
        Turn("add", registry=given)


def _instance_audit(calls: list[str]) -> Callable[[Turn], Awaitable[None]]:
    async def audit(t: Turn) -> None:
        calls.append("instance")

    return audit


async def test_hook_with_a_clashing_name_fires_but_cannot_be_saved(add: Tool[..., Any]) -> None:
    calls: list[str] = []

    @hook(TurnHook.ON_COMPLETE)
    async def audit(turn: Turn, stop_reason: StopReason) -> None:
        calls.append("global")

    turn = Turn(add, args=[1])
    turn.before_run(_instance_audit(calls))  # another function named audit
    await turn.returning()
    assert calls == ["instance", "global"]

    for save in (turn.to_dict, turn.to_json):
        with pytest.raises(UnserializableHookError, match="audit") as info:
            save()
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, PygentsError)


@pytest.mark.parametrize("as_text", [False, True])
async def test_to_json_gives_bytes_and_from_json_takes_bytes_or_str(
    add: Tool[..., Any], as_text: bool
) -> None:
    turn = Turn(add, args=[1], kwargs={"b": 2}, tags=["t"])
    await turn.returning()

    data = turn.to_json()
    assert isinstance(data, bytes)
    assert orjson.loads(data) == turn.to_dict()

    restored = Turn.from_json(data.decode() if as_text else data)
    assert restored.to_dict() == turn.to_dict()


def test_from_json_rejects_invalid_json(add: Tool[..., Any]) -> None:
    with pytest.raises(ValueError, match="JSON"):
        Turn.from_json(b'{"tool_name": "add"')


@pytest.mark.parametrize(
    ("args", "kwargs", "where"),
    [
        ([], {"when": datetime(2024, 1, 1, tzinfo=UTC)}, "kwargs"),
        ([], {"ids": {1, 2}}, "kwargs"),
        ([], {"nested": {"deep": object()}}, "kwargs"),
        ([{1, 2}], {}, "args"),
    ],
)
def test_to_json_refuses_values_json_cannot_hold_naming_the_field(
    echo: Tool[..., Any], args: list[Any], kwargs: dict[str, Any], where: str
) -> None:
    turn = Turn(echo, args=args, kwargs=kwargs)

    with pytest.raises(TypeError, match=where) as info:
        turn.to_json()

    assert "Turn" in str(info.value)


def test_to_json_refuses_an_output_json_cannot_hold(add: Tool[..., Any]) -> None:
    turn = Turn(add, args=[1])
    turn.output = {1, 2}

    with pytest.raises(TypeError, match="output"):
        turn.to_json()


class Mode(enum.Enum):
    FAST = "fast"


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (Mode.FAST, r"Turn\.kwargs\.mode"),
        (uuid.UUID(int=7), r"Turn\.kwargs\.mode"),
        (math.nan, r"Turn\.kwargs\.mode"),
        ([1.5, -math.inf], r"Turn\.kwargs\.mode\[1\]"),
    ],
    ids=["enum", "uuid", "nan", "infinity-in-a-list"],
)
async def test_to_json_of_a_finished_turn_refuses_what_json_would_change(
    echo: Tool[..., Any], value: Any, where: str
) -> None:
    # Finished, with an output: its JSON holds no null at all.
    turn = Turn(echo, kwargs={"mode": value})
    await turn.returning()
    turn.output = "done"

    with pytest.raises(TypeError, match=where):
        turn.to_json()


async def test_to_dict_gives_copies_that_do_not_reach_the_turn(add: Tool[..., Any]) -> None:
    turn, other = Turn(add, args=[1], kwargs={"b": 2}), Turn(add, args=[3])
    expected = turn.to_dict()

    saved = turn.to_dict()
    saved["args"].append(9)
    saved["kwargs"]["b"] = 9
    saved["metadata"]["stop_reason"] = "completed"

    assert turn.to_dict() == expected
    assert other.to_dict()["metadata"] == {
        "start_time": None,
        "end_time": None,
        "stop_reason": None,
    }
    assert await turn.returning() == 3


async def test_from_dict_keeps_nothing_of_the_data_it_was_given(add: Tool[..., Any]) -> None:
    saved = Turn(add, args=[1], kwargs={"b": 2}).to_dict()
    turn = Turn.from_dict(saved)

    saved["args"].append(9)
    saved["kwargs"]["b"] = 9

    assert (turn.args, turn.kwargs) == ([1], {"b": 2})
    assert await turn.returning() == 3


async def test_from_dict_still_calls_a_function_among_the_saved_arguments(
    add: Tool[..., Any],
) -> None:
    # Only data fresh from JSON is known to hold no functions.
    turn = Turn.from_dict({"tool_name": "add", "args": [1], "kwargs": {"b": lambda: 2}})

    assert await turn.returning() == 3


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"args": {"a": 1}}, "args"),
        ({"args": "12"}, "args"),
        ({"kwargs": ["b"]}, "kwargs"),
        ({"kwargs": None, "args": None, "timeout": 0}, "timeout"),
        ({"timeout": -1}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"timeout": "60"}, "timeout"),
        ({"tags": "abc"}, "tags"),
        ({"tags": [1]}, "tags"),
        ({"metadata": {"stop_reason": "finished"}}, "stop_reason"),
        ({"hooks": []}, "hooks"),
    ],
)
def test_from_json_checks_the_saved_fields_as_from_dict_does(
    add: Tool[..., Any], change: dict[str, Any], field: str
) -> None:
    saved = {**Turn(add, args=[1], kwargs={"b": 2}).to_dict(), **change}

    with pytest.raises(ValueError, match=field) as from_dict:
        Turn.from_dict(saved)
    with pytest.raises(ValueError, match=field) as from_json:
        Turn.from_json(orjson.dumps(saved))
    assert str(from_json.value) == str(from_dict.value)


@pytest.mark.parametrize("load", ["from_dict", "from_json"])
async def test_a_loaded_turn_has_the_fields_of_a_new_one(add: Tool[..., Any], load: str) -> None:
    # Loading sets the fields itself rather than through __init__: they must agree.
    ran = Turn(add, args=[1], kwargs={"b": 2}, tags=["t"])
    await ran.returning()

    for original in (Turn(add), ran):
        loaded = (
            Turn.from_dict(original.to_dict())
            if load == "from_dict"
            else Turn.from_json(original.to_json())
        )

        fields = [name for cls in Turn.__mro__ for name in getattr(cls, "__slots__", ())]
        assert all(hasattr(loaded, name) for name in fields)  # none left unset
        assert loaded.to_dict() == original.to_dict()
        assert loaded.metadata == original.metadata
    assert await loaded.returning() == 3


# -- property --------------------------------------------------------------------------------

_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
_json_values = st.recursive(
    _json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


async def noted(turn: Turn, output: Any) -> None:
    return None


# What may be done to a turn after it is copied (`_change_turn` does each).
_TURN_CHANGES = st.lists(
    st.sampled_from(
        [
            *("args", "kwargs", "timeout", "tags", "tool", "add hook", "clear hooks"),
            *("run", "stop", "output", "read metadata"),
        ]
    ),
    max_size=6,
)


async def _change_turn(turn: Turn, change: str, other_tool: Tool[..., Any], noted: Hook) -> None:
    if change == "args":
        turn.args = [*turn.args, 1]
    elif change == "kwargs":
        turn.kwargs = {**turn.kwargs, "extra": [1]}
    elif change == "timeout":
        turn.timeout = turn.timeout + 1
    elif change == "tags":
        turn.tags = {*turn.tags, "new"}
    elif change == "tool":
        turn.tool = other_tool
    elif change == "add hook":
        turn.hooks.append(noted)
    elif change == "clear hooks":
        turn.hooks.clear()
    elif change == "run":  # it may fail (`add` given other arguments): a failed run is a run
        with contextlib.suppress(Exception):
            await turn.returning()
    elif change == "stop":
        turn.metadata.stop_reason = StopReason.ERROR
    elif change == "output":
        turn.output = {"set": True}
    else:
        assert turn.metadata is turn.metadata  # kept on the turn once read


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    args=st.lists(_json_values, max_size=3),
    kwargs=st.dictionaries(st.text(max_size=6), _json_values, max_size=3),
    before=_TURN_CHANGES,
    after=_TURN_CHANGES,
    change_copy=st.booleans(),
)
def test_a_copy_and_its_turn_are_independent_whatever_either_does(
    echo: Tool[..., Any],
    add: Tool[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    before: list[str],
    after: list[str],
    change_copy: bool,
) -> None:
    """A copy saves as its turn does before any run (unrun, no output), with its own
    hooks list; then whatever is done to one of them leaves the other as it was."""

    async def scenario() -> None:
        # Its hook is named where saving looks it up (the per-test HookRegistry).
        noted_hook = Turn(add, args=[0]).after_run(noted)
        other = echo if change_copy else add  # `tool` makes a turn run the other one
        turn = Turn(echo, args=args, kwargs=kwargs, timeout=5, tags=["t"])
        for change in before:  # the turn copied may have run, have hooks, metadata...
            await _change_turn(turn, change, other, noted_hook)
        copy = turn.copy()
        saved = turn.to_dict()
        unrun = {**saved, "metadata": TurnMetadata().to_dict(), "output": None}
        assert copy.to_dict() == unrun
        assert copy.hooks == turn.hooks
        assert copy.hooks is not turn.hooks
        assert not copy.is_running
        changed, kept = (copy, turn) if change_copy else (turn, copy)
        kept_saved, kept_hooks = kept.to_dict(), list(kept.hooks)
        for change in after:
            await _change_turn(changed, change, other, noted_hook)
        assert kept.to_dict() == kept_saved
        assert kept.hooks == kept_hooks

    asyncio.run(scenario())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    args=st.lists(_json_values, max_size=4),
    kwargs=st.dictionaries(st.text(max_size=8), _json_values, max_size=4),
    timeout=st.integers(min_value=1, max_value=10**6)
    | st.floats(min_value=1e-3, max_value=1e6, allow_nan=False),
    tags=st.frozensets(st.text(max_size=8), max_size=4),
)
def test_json_round_trip_preserves_the_saved_turn(
    echo: Tool[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    timeout: float,
    tags: frozenset[str],
) -> None:
    turn = Turn(echo, args=args, kwargs=kwargs, timeout=timeout, tags=tags)

    restored = Turn.from_json(turn.to_json())

    assert restored.to_dict() == turn.to_dict()
    assert restored.tags == tags


def test_metadata_round_trips_through_json() -> None:
    metadata = TurnMetadata(
        datetime(2026, 11, 22, 1, 2, 3, 456789, tzinfo=UTC),
        datetime(2026, 11, 22, 1, 2, 4, tzinfo=UTC),
        StopReason.TIMEOUT,
    )

    assert TurnMetadata.from_json(metadata.to_json()) == metadata
    assert b'"stop_reason":"timeout"' in metadata.to_json()
