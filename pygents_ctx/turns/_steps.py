"""Running a turn's tool step by step: without a timer for a step that does not suspend.

asyncio can interrupt a coroutine only where it suspends, so a step that runs
to its end without suspending needs no timeout armed. A turn therefore drives
its tool's first step itself (`send(None)`) and arms its deadline only if the
step suspends (`resume_within`). Generator turns are driven the same way, one
value at a time (`ToolSteps`), which also checks the deadline between values.
"""

from __future__ import annotations

import asyncio
import types
from time import monotonic
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Generator

    from pygents_ctx.tools import Tool, ToolMetadata

__all__ = [
    "DONE",
    "Expired",
    "FailedSteps",
    "HookedSteps",
    "Later",
    "Steps",
    "ToolSteps",
    "resume_within",
]


class Expired(Exception):
    """This turn's own deadline passed (a nested turn's timeout is just an error)."""


@types.coroutine
def _resume(step: Any, pending: Any) -> Generator[Any, Any, Any]:
    """Drive an awaitable from its first suspension on, exactly as `await` would."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            step.close()
            raise
        except BaseException as exc:  # cancellation included: pass it in
            try:
                pending = step.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                pending = step.send(sent)
            except StopIteration as stop:
                return stop.value


async def resume_within(step: Any, pending: Any, deadline: float) -> Any:
    """Finish `step` (suspended on `pending`), raising `Expired` at `deadline`.

    Callers run a step's first part themselves and come here only when it
    suspends: a step that finishes without suspending cannot be interrupted by
    asyncio anyway, and arming no timer for it keeps a fast turn cheap.
    `deadline` is a `time.monotonic()` reading.
    """
    scope = asyncio.timeout(deadline - monotonic())
    try:
        async with scope:
            return await _resume(step, pending)
    except TimeoutError:
        if scope.expired():
            raise Expired from None
        raise


# What a generator turn's steps give after its last value (a raise and catch per
# turn would cost more than the turn's own bookkeeping).
DONE = object()


class Later:
    """What a turn's step returns when it needs an await: the rest of the step, to await.

    A tool that does not suspend (the usual case) never needs one, and a turn
    then runs for its agent with no coroutine or event-loop trip of its own.
    """

    __slots__ = ("rest",)

    def __init__(self, rest: Awaitable[Any]) -> None:
        self.rest = rest


class Steps(Protocol):
    """A generator turn as its agent drives it: one value per `next()`."""

    def next(self) -> Any:
        """The next value, `Later` to await for it, or `DONE` after the last one."""

    async def close(self) -> None:
        """End the iteration (also after stopping early)."""


class SteppedTurn(Protocol):
    """What `ToolSteps` uses of a turn: `turns._running.TurnRunning` (which builds on this)."""

    _timeout: float
    _tool: Tool[..., Any]
    output: Any

    def _evaluated(self) -> tuple[tuple[Any, ...], dict[str, Any]]: ...

    def _record_completion(self) -> None: ...

    def _record_failure(self, exc: Exception) -> Exception: ...

    def _end_run(self, tool_times: ToolMetadata | None) -> None: ...


class ToolSteps:
    """Steps a generator turn's tool one value at a time, without a timer for a value
    that comes without suspending (as `Turn._returning` does for a coroutine tool).

    With `whole_run`, the steps are the whole run (no hook watches the turn): they
    record how it ended and end it on `close()`. Otherwise the caller does.
    """

    __slots__ = (
        "_deadline",
        "_exhausted",
        "_generator",
        "_produced",
        "_tool_times",
        "_turn",
        "_whole_run",
    )

    def __init__(self, turn: SteppedTurn, started: float, *, whole_run: bool) -> None:
        self._turn = turn
        self._deadline = started + turn._timeout
        self._whole_run = whole_run
        self._produced: list[Any] = []
        turn.output = self._produced
        self._generator: Any = None
        self._tool_times: ToolMetadata | None = None
        self._exhausted = False

    def open(self, tool_start: float) -> None:
        """Start the tool call, at `tool_start` (a `monotonic()` reading)."""
        turn = self._turn
        args, kwargs = turn._evaluated()
        self._generator, self._tool_times = turn._tool._open(args, kwargs, tool_start)

    def next(self) -> Any:
        """The next value, `Later` to await for it, or `DONE` after the last one.

        The timeout covers the time the consumer takes between values, so it is
        checked before each step, not only while the tool runs.
        """
        if monotonic() >= self._deadline:
            raise self._failed(Expired())
        step = self._generator.__anext__()
        try:
            pending = step.send(None)
        except StopIteration as stop:
            value = stop.value
        except StopAsyncIteration:
            return self._done()
        except Exception as exc:
            raise self._failed(exc)  # noqa: B904 (the cause is the tool's own error)
        else:
            return Later(self._rest(step, pending))
        self._produced.append(value)
        return value

    async def _rest(self, step: Any, pending: Any) -> Any:
        """Finish a step that suspended on `pending`, under the turn's deadline."""
        try:
            value = await resume_within(step, pending, self._deadline)
        except StopAsyncIteration:
            return self._done()
        except Exception as exc:
            raise self._failed(exc)  # noqa: B904 (the cause is the tool's own error)
        self._produced.append(value)
        return value

    def _done(self) -> object:
        """The tool's generator is done: nothing is left to close. Returns `DONE`."""
        self._exhausted = True
        if self._whole_run:
            self._turn._record_completion()
        return DONE

    def _failed(self, exc: Exception) -> Exception:
        return self._turn._record_failure(exc) if self._whole_run else exc

    async def close(self) -> None:
        """Close the tool's generator (a consumer may stop early) and the clock."""
        turn = self._turn
        try:
            if not self._exhausted and self._generator is not None:
                await self._generator.aclose()
        except Exception as exc:
            raise self._failed(exc)  # noqa: B904 (the cause is the tool's own error)
        finally:
            if self._whole_run:
                turn._end_run(self._tool_times)
            elif self._tool_times is not None:
                self._tool_times._end = monotonic()


class HookedSteps:
    """A generator turn that hooks watch, run by `Turn._yielding`, as `Steps`."""

    __slots__ = ("_values",)

    def __init__(self, values: AsyncGenerator[Any, None]) -> None:
        self._values = values

    def next(self) -> Any:
        return Later(anext(self._values, DONE))

    async def close(self) -> None:
        await self._values.aclose()


class FailedSteps:
    """The steps of a generator turn that failed before its first value: `next()` raises."""

    __slots__ = ("_error",)

    def __init__(self, error: Exception) -> None:
        self._error = error

    def next(self) -> Any:
        raise self._error

    async def close(self) -> None:
        pass
