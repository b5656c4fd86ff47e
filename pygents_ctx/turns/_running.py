"""How a turn runs: what `returning()` and `yielding()` do, and an agent's paths.

A run marks the turn running, fires its turn hooks (the turn's own, then the
global ones), calls the tool, and records how the run ended. An agent whose
turn no hook watches takes shorter paths (`_returning_now`, `_steps`) that do
the same work without the hooks' awaits: keep them in step with the others.
`TurnRunning` is a base of `pygents_ctx.turns.Turn`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from time import monotonic
from typing import TYPE_CHECKING, Any

from pygents_ctx.errors import SafeExecutionError, TurnTimeoutError, WrongRunMethodError
from pygents_ctx.hooks import HookRegistry, ToolHook, TurnHook
from pygents_ctx.hooks._dispatch import fire_on
from pygents_ctx.turns._state import CANCELLED, COMPLETED, StopReason, TurnState
from pygents_ctx.turns._steps import (
    DONE,
    Expired,
    HookedSteps,
    Later,
    Steps,
    ToolSteps,
    resume_within,
)

if TYPE_CHECKING:
    from pygents_ctx.hooks import Hook
    from pygents_ctx.tools import ToolMetadata

__all__ = ["ANY_TURN_HOOK", "TurnRunning"]

_BEFORE_RUN = HookRegistry.globals_for(TurnHook.BEFORE_RUN)
_AFTER_RUN = HookRegistry.globals_for(TurnHook.AFTER_RUN)
_ON_TIMEOUT = HookRegistry.globals_for(TurnHook.ON_TIMEOUT)
_ON_ERROR = HookRegistry.globals_for(TurnHook.ON_ERROR)
_ON_COMPLETE = HookRegistry.globals_for(TurnHook.ON_COMPLETE)
# Every global turn hook, of any kind: an agent asks "does a hook watch this turn?".
ANY_TURN_HOOK = HookRegistry.globals_for_any(TurnHook)
_ANY_TOOL_HOOK = HookRegistry.globals_for_any(ToolHook)


class TurnRunning(TurnState):
    """Running a turn: what `Turn.returning()` and `Turn.yielding()` do, and an agent's paths."""

    __slots__ = ()

    def _begin(self, wants_generator: bool) -> float:
        """Mark the turn running and return its start (a `monotonic()` reading)."""
        if self._tool.is_generator is not wants_generator:
            method, other = "returning", "yielding"
            if wants_generator:
                method, other = other, method
            raise WrongRunMethodError(
                f"tool {self._tool.key!r} is {'not ' if wants_generator else ''}an async "
                f"generator; use {other}() instead of {method}() to run this turn"
            )
        if self._running:
            raise SafeExecutionError(
                f"turn for tool {self._tool.key!r} is running; it cannot be started again "
                f"until its run ends"
            )
        self._running = True
        self.output = None
        # Until the run says otherwise, an interrupted run reads as cancelled.
        self._stop_reason = CANCELLED
        started = monotonic()
        self._mark_start(started)
        return started

    def _end_run(self, tool_times: ToolMetadata | None) -> None:
        """End the run, reading the clock once for it and for a bare tool call in it."""
        ended = self._end = monotonic()
        if tool_times is not None:
            tool_times._end = ended
        self._running = False

    def _stopped_by(self, exc: BaseException, tool_times: ToolMetadata | None) -> None:
        """End a run that `exc` stopped before any hook watched it (a cancellation
        keeps the run's `CANCELLED`; anything else is an error)."""
        self._end_run(tool_times)
        if isinstance(exc, Exception):
            self._stop_reason = StopReason.ERROR

    def _record_failure(self, exc: Exception) -> Exception:
        """Record a failed run; return what to raise (`TurnTimeoutError` on its own expiry)."""
        if isinstance(exc, Expired):
            self._stop_reason = StopReason.TIMEOUT
            expired = TurnTimeoutError(
                f"turn for tool {self._tool.key!r} timed out after {self._timeout}s; "
                f"raise its timeout or make the tool faster"
            )
            expired.__suppress_context__ = True
            return expired
        self._stop_reason = StopReason.ERROR
        return exc

    def _record_completion(self) -> None:
        """Record a run that ended normally (for the steps of a generator turn)."""
        self._stop_reason = COMPLETED

    async def _report_failure(self, hooks: list[Hook], exc: Exception) -> None:
        """Fire `on_timeout` or `on_error` for a failure `_record_failure` recorded."""
        if self._stop_reason is StopReason.TIMEOUT:
            if hooks or _ON_TIMEOUT:
                await fire_on(_ON_TIMEOUT, hooks, self._tags, self)
        elif hooks or _ON_ERROR:
            await fire_on(_ON_ERROR, hooks, self._tags, self, exc)

    async def _complete(self, hooks: list[Hook]) -> None:
        """Fire `on_complete` (always, last); the run is over even if a hook raises."""
        try:
            await fire_on(_ON_COMPLETE, hooks, self._tags, self, self._stop_reason)
        finally:
            self._running = False

    def _returning_now(self) -> Any:
        """Run a turn no turn hook watches, for an agent: the output, or `Later` to await.

        A tool that finishes without suspending (most do) runs to its end in this
        call: the run has no coroutine of its own and arms no timer. `_begin` and
        `Tool._open` are inlined here (keep them in step): on this path every call
        is a sizeable share of the cost.
        """
        if self._running or self._dynamic_args or self._dynamic_kwargs:
            return Later(self._returning([]))  # which refuses to run twice, or evaluates
        self._running = True
        self.output = None
        self._stop_reason = CANCELLED
        started = self._start = monotonic()
        self._end = self._to_wall = None
        tool, args, kwargs = self._tool, self._args, self._kwargs
        tool_times = None
        if len(args) > tool._positional_room:  # ignored, as Tool._open does
            args = args[: tool._positional_room]
        try:
            if tool._hooks or _ANY_TOOL_HOOK or tool._lock is not None:
                step = tool._call(args, kwargs)  # the wrapper fires them, and keeps the times
            else:
                validator = tool._validator
                if validator is not None:
                    converted = validator(args, kwargs)
                    if converted is not None:  # some arguments made into their annotated types
                        args, kwargs = converted
                tool_times = tool.metadata
                tool_times._start = started
                tool_times._end = tool_times._to_wall = None
                if kwargs or not tool._spec.plain:
                    kwargs = tool._spec.bind(args, kwargs)
                step = tool.fn(*args, **kwargs)
            pending = step.send(None)
        except StopIteration as stop:
            ended = self._end = monotonic()
            if tool_times is not None:
                tool_times._end = ended
            self._running = False
            self.output = output = stop.value
            self._stop_reason = COMPLETED
            return output
        except BaseException as exc:
            self._stopped_by(exc, tool_times)
            raise
        return Later(self._finish(step, pending, started, tool_times))

    async def _finish(
        self, step: Any, pending: Any, started: float, tool_times: ToolMetadata | None
    ) -> Any:
        """The rest of an unobserved run whose tool suspended on `pending`."""
        try:
            output = await resume_within(step, pending, started + self._timeout)
        except Exception as exc:
            raise self._record_failure(exc)  # noqa: B904 (the cause is the tool's own error)
        finally:
            self._end_run(tool_times)
        self.output = output
        self._stop_reason = COMPLETED
        return output

    async def _returning(self, hooks: list[Hook]) -> Any:
        """Run with `hooks` (the turn's own, plus an agent's turn hooks)."""
        started = tool_start = self._begin(wants_generator=False)
        ended = None  # the tool's end, also the run's while no hook has run since
        try:
            if hooks or _BEFORE_RUN:
                await fire_on(_BEFORE_RUN, hooks, self._tags, self)
                tool_start = monotonic()
            args, kwargs = self._evaluated()
            step, tool_times = self._tool._open(args, kwargs, tool_start)
            try:
                # Most tools finish without suspending: only one that suspends needs a timer.
                pending = step.send(None)
            except StopIteration as stop:
                output = stop.value
            else:
                output = await resume_within(step, pending, started + self._timeout)
            finally:
                ended = monotonic()
                if tool_times is not None:
                    tool_times._end = ended
        except Exception as exc:
            error = self._record_failure(exc)
            ended = None
            await self._report_failure(hooks, exc)
            raise error  # noqa: B904 (the cause is the tool's own error)
        else:
            self.output = output
            self._stop_reason = COMPLETED
            if hooks or _AFTER_RUN:
                ended = None
                await fire_on(_AFTER_RUN, hooks, self._tags, self, output)
            return output
        finally:
            self._end = monotonic() if ended is None else ended
            if hooks or _ON_COMPLETE:
                await self._complete(hooks)
            else:
                self._running = False

    def _steps(self, hooks: list[Hook]) -> Steps:
        """Run a generator turn for an agent, which takes its values from `next()`."""
        if hooks or ANY_TURN_HOOK:
            return HookedSteps(self._yielding(hooks))
        started = self._begin(wants_generator=True)
        steps = ToolSteps(self, started, whole_run=True)
        try:
            steps.open(started)
        except BaseException as exc:
            self._stopped_by(exc, None)
            raise
        return steps

    async def _yielding(self, hooks: list[Hook]) -> AsyncGenerator[Any, None]:
        started = self._begin(wants_generator=True)
        steps = ToolSteps(self, started, whole_run=False)
        try:
            if hooks or _BEFORE_RUN:
                await fire_on(_BEFORE_RUN, hooks, self._tags, self)
            steps.open(monotonic() if hooks or _BEFORE_RUN else started)
            try:
                while True:
                    value = steps.next()
                    if type(value) is Later:
                        value = await value.rest
                    if value is DONE:
                        break
                    yield value
            finally:
                await steps.close()
        except Exception as exc:
            error = self._record_failure(exc)
            await self._report_failure(hooks, exc)
            raise error  # noqa: B904 (the cause is the tool's own error)
        else:
            self._stop_reason = COMPLETED
            if hooks or _AFTER_RUN:
                await fire_on(_AFTER_RUN, hooks, self._tags, self, self.output)
        finally:
            self._end = monotonic()
            if hooks or _ON_COMPLETE:
                await self._complete(hooks)
            else:
                self._running = False
