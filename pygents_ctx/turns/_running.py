"""How a turn runs: what `returning()` and `yielding()` do (and an agent, through them).

A run marks the turn running, fires its turn hooks (the turn's own, then the
global ones), awaits the tool under the turn's `timeout`, and records how the
run ended. `TurnRunning` is a base of `pygents_ctx.turns.Turn`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from time import monotonic
from typing import TYPE_CHECKING, Any

from pygents_ctx.errors import SafeExecutionError, TurnTimeoutError, WrongRunMethodError
from pygents_ctx.hooks import TurnHook
from pygents_ctx.hooks._dispatch import fire
from pygents_ctx.turns._state import CANCELLED, COMPLETED, StopReason, TurnRun, TurnState

if TYPE_CHECKING:
    from pygents_ctx.hooks import Hook

__all__ = ["TurnRunning"]


class _Expired(Exception):
    """This turn's own deadline passed (a nested turn's timeout is just an error)."""


class TurnRunning(TurnState):
    """Running a turn: what `Turn.returning()` and `Turn.yielding()` do."""

    __slots__ = ()

    def _begin(self, wants_generator: bool) -> tuple[TurnRun, float]:
        """Mark the turn running: its new run, and its deadline (an event loop `time()`)."""
        declared = self._declared
        if declared.tool.is_generator is not wants_generator:
            method, other = "returning", "yielding"
            if wants_generator:
                method, other = other, method
            raise WrongRunMethodError(
                f"tool {declared.tool.key!r} is {'not ' if wants_generator else ''}an async "
                f"generator; use {other}() instead of {method}() to run this turn"
            )
        if self._running:
            raise SafeExecutionError(
                f"turn for tool {declared.tool.key!r} is running; it cannot be started again "
                f"until its run ends"
            )
        # Until the run says otherwise, an interrupted run reads as cancelled.
        run = self._run = TurnRun(True, CANCELLED)
        run._mark_start(monotonic())
        return run, asyncio.get_running_loop().time() + declared.timeout

    def _record_failure(self, run: TurnRun, exc: Exception) -> Exception:
        """Record a failed run; return what to raise (`TurnTimeoutError` on its own expiry)."""
        if isinstance(exc, _Expired):
            run.stop_reason = StopReason.TIMEOUT
            declared = self._declared
            expired = TurnTimeoutError(
                f"turn for tool {declared.tool.key!r} timed out after {declared.timeout}s; "
                f"raise its timeout or make the tool faster"
            )
            expired.__suppress_context__ = True
            return expired
        run.stop_reason = StopReason.ERROR
        return exc

    async def _report_failure(self, run: TurnRun, hooks: list[Hook], exc: Exception) -> None:
        """Fire `on_timeout` or `on_error` for a failure `_record_failure` recorded."""
        if run.stop_reason is StopReason.TIMEOUT:
            await fire(TurnHook.ON_TIMEOUT, hooks, self._declared.tags, self)
        else:
            await fire(TurnHook.ON_ERROR, hooks, self._declared.tags, self, exc)

    async def _complete(self, run: TurnRun, hooks: list[Hook]) -> None:
        """End the run and fire `on_complete` (always, last): over even if a hook raises."""
        run._end = monotonic()
        try:
            await fire(TurnHook.ON_COMPLETE, hooks, self._declared.tags, self, run.stop_reason)
        finally:
            run.running = False

    async def _returning(self, hooks: list[Hook]) -> Any:
        """Run a coroutine tool with `hooks` (the turn's own, plus an agent's turn hooks)."""
        run, at = self._begin(wants_generator=False)
        deadline = asyncio.timeout_at(at)
        tags = self._declared.tags
        try:
            await fire(TurnHook.BEFORE_RUN, hooks, tags, self)
            args, kwargs = self._evaluated()
            async with deadline:
                output = await self._declared.tool._call(args, kwargs)
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():
                exc = _Expired()
            error = self._record_failure(run, exc)
            await self._report_failure(run, hooks, exc)
            raise error  # noqa: B904 (the cause is the tool's own error)
        else:
            run.output = output
            run.stop_reason = COMPLETED
            await fire(TurnHook.AFTER_RUN, hooks, tags, self, output)
            return output
        finally:
            await self._complete(run, hooks)

    async def _yielding(self, hooks: list[Hook]) -> AsyncGenerator[Any, None]:
        """Run a generator tool with `hooks`, yielding its values; `output` collects them.

        The timeout covers the whole iteration, the time the consumer takes
        between values included: it is checked before each value, and each value
        is awaited under what is left of it.
        """
        run, deadline = self._begin(wants_generator=True)
        loop = asyncio.get_running_loop()
        produced: list[Any] = []
        run.output = produced
        tags = self._declared.tags
        try:
            await fire(TurnHook.BEFORE_RUN, hooks, tags, self)
            args, kwargs = self._evaluated()
            values: AsyncGenerator[Any, None] = self._declared.tool._call(args, kwargs)
            async with aclosing(values):
                while True:
                    if loop.time() >= deadline:
                        raise _Expired
                    step = asyncio.timeout_at(deadline)
                    try:
                        async with step:
                            value = await anext(values)
                    except StopAsyncIteration:
                        break
                    except TimeoutError:
                        if step.expired():
                            raise _Expired from None
                        raise
                    produced.append(value)
                    yield value
        except Exception as exc:
            error = self._record_failure(run, exc)
            await self._report_failure(run, hooks, exc)
            raise error  # noqa: B904 (the cause is the tool's own error)
        else:
            run.stop_reason = COMPLETED
            await fire(TurnHook.AFTER_RUN, hooks, tags, self, produced)
        finally:
            await self._complete(run, hooks)
