"""How an agent runs a turn: unwatched and watched, coroutine and generator.

A turn may be watched by nothing, by its own or a global turn hook, or through
its tool (a tool hook, a lock). Every combination must end the same way for the
user: the same values, stop reasons, times, hooks and errors.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    ContextItem,
    ContextQueue,
    StopReason,
    Tool,
    Turn,
    TurnHook,
    TurnTimeoutError,
    hook,
    tool,
)
from pygents_ctx.hooks._calls import CONTEXT_READERS, CURRENT_CONTEXT

# The ways a turn can be watched: not at all, by a hook on the turn, by a global
# turn hook, or through its tool (a tool hook, or a lock, needs the tool's wrapper).
WATCHERS = ["none", "turn hook", "global turn hook", "tool hook", "tool lock", "turn and tool"]


def _watch(how: str, made: Tool[..., Any], turn: Turn, seen: list[str]) -> None:
    async def note(*args: Any) -> None:
        seen.append(how)

    if how in ("turn hook", "turn and tool"):
        turn.on_complete(note)
    if how == "global turn hook":
        hook(TurnHook.ON_COMPLETE)(note)
    if how in ("tool hook", "turn and tool"):
        made.after_invoke(note)


def _make(how: str, fn: Callable[..., Any]) -> Tool[..., Any]:
    return tool(lock=True)(fn) if how == "tool lock" else tool(fn)


async def _drain(agent: Agent) -> list[Any]:
    return [value async for _, value in agent.run()]


@pytest.mark.parametrize("how", WATCHERS)
@pytest.mark.parametrize("suspends", [False, True])
async def test_a_coroutine_turn_completes_with_its_output_and_times(
    how: str, suspends: bool
) -> None:
    async def double(x: int) -> int:
        if suspends:
            await asyncio.sleep(0)
        return 2 * x

    made = _make(how, double)
    turn = Turn(made, args=[21])
    seen: list[str] = []
    _watch(how, made, turn, seen)
    agent = Agent("runner", "runs", [made])
    await agent.put(turn)

    assert await _drain(agent) == [42]
    assert turn.output == 42
    assert turn.metadata.stop_reason is StopReason.COMPLETED
    assert not turn.is_running
    assert turn.metadata.start_time <= turn.metadata.end_time  # type: ignore[operator]
    # The tool's own times lie within the turn's.
    assert made.metadata.start_time is not None
    assert made.metadata.end_time is not None
    assert turn.metadata.start_time <= made.metadata.start_time <= made.metadata.end_time
    assert made.metadata.end_time <= turn.metadata.end_time  # type: ignore[operator]
    assert seen == _expected_notes(how)


def _expected_notes(how: str) -> list[str]:
    return {"none": [], "tool lock": [], "turn and tool": [how, how]}.get(how, [how])


@pytest.mark.parametrize("how", WATCHERS)
@pytest.mark.parametrize("suspends", [False, True])
async def test_a_failing_coroutine_turn_records_an_error_and_can_run_again(
    how: str, suspends: bool
) -> None:
    calls: list[int] = []

    async def flaky() -> int:
        calls.append(1)
        if suspends:
            await asyncio.sleep(0)
        if len(calls) == 1:
            raise RuntimeError("first call fails")
        return len(calls)

    made = _make(how, flaky)
    turn = Turn(made)
    _watch(how, made, turn, [])
    agent = Agent("runner", "runs", [made])
    await agent.put(turn)

    with pytest.raises(RuntimeError, match="first call fails"):
        await _drain(agent)
    assert turn.metadata.stop_reason is StopReason.ERROR
    assert not turn.is_running
    assert agent.current_turn is None
    assert made.metadata.end_time is not None

    await agent.put(turn)
    assert await _drain(agent) == [2]
    assert turn.metadata.stop_reason is StopReason.COMPLETED


@pytest.mark.parametrize("how", WATCHERS)
async def test_a_coroutine_turn_past_its_timeout_stops_with_timeout(how: str) -> None:
    async def slow() -> None:
        await asyncio.sleep(5)

    made = _make(how, slow)
    turn = Turn(made, timeout=0.02)
    _watch(how, made, turn, [])
    agent = Agent("runner", "runs", [made])
    await agent.put(turn)

    with pytest.raises(TurnTimeoutError, match="slow"):
        await _drain(agent)
    assert turn.metadata.stop_reason is StopReason.TIMEOUT
    assert not turn.is_running
    assert made.metadata.end_time is not None


async def test_a_tool_cancelling_itself_without_suspending_leaves_the_turn_current() -> None:
    @tool
    async def gives_up() -> None:
        raise asyncio.CancelledError

    turn = Turn(gives_up)
    agent = Agent("runner", "runs", [gives_up])
    await agent.put(turn)

    with pytest.raises(asyncio.CancelledError):
        await _drain(agent)
    assert agent.current_turn is turn  # interrupted, not finished: it runs first next time
    assert turn.metadata.stop_reason is StopReason.CANCELLED
    assert not turn.is_running


@pytest.mark.parametrize("how", WATCHERS)
@pytest.mark.parametrize("suspends", [False, True])
async def test_a_generator_turn_yields_routes_and_completes(how: str, suspends: bool) -> None:
    async def count(n: int) -> AsyncIterator[Any]:
        for i in range(n):
            if suspends:
                await asyncio.sleep(0)
            yield i
            yield ContextItem(content=f"note {i}")

    made = _make(how, count)
    turn = Turn(made, args=[3])
    seen: list[str] = []
    _watch(how, made, turn, seen)
    agent = Agent("runner", "runs", [made])
    await agent.put(turn)

    assert await _drain(agent) == [0, 1, 2]
    assert [item.content for item in agent.context_queue] == ["note 0", "note 1", "note 2"]
    assert turn.output[::2] == [0, 1, 2]
    assert turn.metadata.stop_reason is StopReason.COMPLETED
    assert not turn.is_running
    assert made.metadata.start_time <= made.metadata.end_time  # type: ignore[operator]
    assert seen == _expected_notes(how)


@pytest.mark.parametrize("how", WATCHERS)
async def test_a_consumer_stopping_a_generator_turn_early_cancels_it(how: str) -> None:
    closed: list[bool] = []

    async def endless() -> AsyncIterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.append(True)

    made = _make(how, endless)
    turn = Turn(made)
    _watch(how, made, turn, [])
    agent = Agent("runner", "runs", [made])
    await agent.put(turn)

    values = agent.run()
    assert [await anext(values) for _ in range(3)] == [(turn, 0), (turn, 1), (turn, 2)]
    await values.aclose()

    assert closed == [True]
    assert turn.output == [0, 1, 2]
    assert turn.metadata.stop_reason is StopReason.CANCELLED
    assert not turn.is_running
    assert made.metadata.end_time is not None


@pytest.mark.parametrize("how", WATCHERS)
@pytest.mark.parametrize("suspends", [False, True])
async def test_a_generator_turn_failing_midway_keeps_what_it_produced(
    how: str, suspends: bool
) -> None:
    async def breaks() -> AsyncIterator[int]:
        yield 1
        if suspends:
            await asyncio.sleep(0)
        raise ValueError("broken")

    made = _make(how, breaks)
    turn = Turn(made)
    _watch(how, made, turn, [])
    agent = Agent("runner", "runs", [made])
    await agent.put(turn)

    got: list[int] = []

    async def consume() -> None:
        async for _, value in agent.run():
            got.append(value)

    with pytest.raises(ValueError, match="broken"):
        await consume()
    assert got == [1]
    assert turn.output == [1]
    assert turn.metadata.stop_reason is StopReason.ERROR
    assert not turn.is_running


@pytest.mark.parametrize("how", WATCHERS)
async def test_a_generator_turn_times_out_counting_the_consumers_time(how: str) -> None:
    async def ticks() -> AsyncIterator[int]:
        for i in range(10):
            yield i

    made = _make(how, ticks)
    turn = Turn(made, timeout=0.05)
    _watch(how, made, turn, [])
    agent = Agent("runner", "runs", [made])
    await agent.put(turn)

    got: list[int] = []

    async def consume() -> None:
        async for _, value in agent.run():
            got.append(value)
            await asyncio.sleep(0.03)  # the consumer's own work counts against the turn

    with pytest.raises(TurnTimeoutError):
        await consume()
    assert 1 <= len(got) < 10
    assert turn.metadata.stop_reason is StopReason.TIMEOUT


@pytest.mark.parametrize("how", WATCHERS)
async def test_a_generator_failing_to_close_after_an_early_stop_reports_the_error(
    how: str,
) -> None:
    async def untidy() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            raise OSError("cleanup failed")

    made = _make(how, untidy)
    turn = Turn(made)
    _watch(how, made, turn, [])
    agent = Agent("runner", "runs", [made])
    await agent.put(turn)

    values = agent.run()
    assert await anext(values) == (turn, 1)
    with pytest.raises(OSError, match="cleanup failed"):
        await values.aclose()
    assert turn.metadata.stop_reason is StopReason.ERROR
    assert not turn.is_running


async def test_a_generator_turn_whose_call_fails_records_an_error() -> None:
    @tool
    async def needs(x: int) -> AsyncIterator[int]:
        yield x

    turn = Turn(needs)  # the required argument is missing
    agent = Agent("runner", "runs", [needs])
    await agent.put(turn)

    with pytest.raises(TypeError):
        await _drain(agent)
    assert turn.metadata.stop_reason is StopReason.ERROR
    assert not turn.is_running
    assert agent.current_turn is None


@pytest.mark.parametrize("readers", [False, True])
@pytest.mark.parametrize("generator", [False, True])
async def test_the_callers_code_between_values_runs_outside_the_agents_context(
    monkeypatch: pytest.MonkeyPatch, readers: bool, generator: bool
) -> None:
    # Whether or not any tool reads the context, the caller never sees it.
    monkeypatch.setattr(CONTEXT_READERS, "exist", readers)

    @tool
    async def one() -> int:
        return 1

    @tool
    async def two() -> AsyncIterator[int]:
        yield 1
        yield 2

    agent = Agent("runner", "runs", [one, two])
    await agent.put(Turn(two if generator else one))
    await agent.put(Turn(two if generator else one))
    outside = [CURRENT_CONTEXT.get() async for _ in agent.run()]
    assert len(outside) == (4 if generator else 2)
    assert all(context is None for context in outside)


async def test_a_tool_reading_the_context_made_after_agents_ran_still_gets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if no tool or hook had read the context so far in this process.
    monkeypatch.setattr(CONTEXT_READERS, "exist", False)

    @tool
    async def plain() -> int:
        return 0

    agent = Agent("runner", "runs", [plain], context_queue=ContextQueue(5))
    await agent.put(Turn(plain))
    assert await _drain(agent) == [0]

    @tool
    async def reads(queue: ContextQueue[Any]) -> int:
        return queue.limit

    @hook(TurnHook.AFTER_RUN)
    async def checks(turn: Turn, output: Any, queue: ContextQueue[Any] | None = None) -> None:
        limits.append(None if queue is None else queue.limit)

    limits: list[int | None] = []
    agent.tools = [plain, reads]
    await agent.put(Turn(reads))
    assert await _drain(agent) == [5]
    assert limits == [5]


async def test_a_long_run_of_turns_that_never_suspend_does_not_pile_up_memory() -> None:
    # Each turn's timeout is a timer on the event loop; cancelled, it stays there until
    # the loop runs, which such turns never let it do.
    @tool
    async def noop() -> None:
        return None

    agent = Agent("batch", "Runs many small turns", [noop])
    for _ in range(20_000):
        await agent.put(Turn(noop))
    tracemalloc.start()
    try:
        async for _ in agent.run():
            pass
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert kept < 1_000_000, f"{kept:,} bytes still held after the run"  # 6.4 MB before
