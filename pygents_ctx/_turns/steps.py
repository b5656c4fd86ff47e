"""Running a step without a timer when it does not suspend: what turns and agents share.

asyncio can interrupt a coroutine only where it suspends, so a step that runs
to its end without suspending needs no timeout armed. A turn therefore drives
its tool's first step itself (`send(None)`) and arms its deadline only if the
step suspends (`resume_within`). Generator turns are driven the same way, one
value at a time (`Steps`, see `_turns.running.ToolSteps`), which also checks the
deadline between values.
"""

from __future__ import annotations

import asyncio
import types
from time import monotonic
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Generator

__all__ = ["DONE", "Expired", "Later", "Steps", "resume_within"]


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
