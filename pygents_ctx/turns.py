"""Turns: the *what* of an agent, as plain data naming a tool and its arguments.

A turn is serializable: it holds the tool's registry key, the arguments and a
timeout, and runs with `await turn.returning()` (coroutine tools) or
`async for value in turn.yielding()` (generator tools).

Example:
    >>> import asyncio
    >>> from pygents_ctx import Turn, tool
    >>> @tool
    ... async def greet(name: str) -> str:
    ...     return f"hello {name}"
    >>> asyncio.run(Turn(greet, kwargs={"name": "ada"}).returning())
    'hello ada'
"""

from __future__ import annotations

import asyncio
import math
import types
from collections.abc import AsyncGenerator, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from time import monotonic, time
from typing import TYPE_CHECKING, Any

from pygents_ctx._calls import evaluate_dynamic, is_dynamic, tag_set
from pygents_ctx._dispatch import HookSlot, fire, hooks_from_dict, hooks_to_dict
from pygents_ctx._json import JsonSerializable
from pygents_ctx.errors import SafeExecutionError, TurnTimeoutError, WrongRunMethodError
from pygents_ctx.hooks import Hook, TurnHook
from pygents_ctx.registry import HookRegistry, ToolRegistry
from pygents_ctx.tools import Tool

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = ["StopReason", "Turn", "TurnMetadata"]

_BEFORE_RUN = HookRegistry.globals_for(TurnHook.BEFORE_RUN)
_AFTER_RUN = HookRegistry.globals_for(TurnHook.AFTER_RUN)
_ON_TIMEOUT = HookRegistry.globals_for(TurnHook.ON_TIMEOUT)
_ON_ERROR = HookRegistry.globals_for(TurnHook.ON_ERROR)
_ON_COMPLETE = HookRegistry.globals_for(TurnHook.ON_COMPLETE)


class StopReason(Enum):
    """How a turn's latest run ended."""

    COMPLETED = "completed"
    TIMEOUT = "timeout"
    ERROR = "error"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class TurnMetadata(JsonSerializable):
    """When a turn's latest run started and ended, and why it stopped (UTC times)."""

    start_time: datetime | None = None
    end_time: datetime | None = None
    stop_reason: StopReason | None = None

    def to_dict(self) -> dict[str, Any]:
        """`{"start_time", "end_time", "stop_reason"}` as ISO strings / enum value / null."""
        return {
            "start_time": None if self.start_time is None else self.start_time.isoformat(),
            "end_time": None if self.end_time is None else self.end_time.isoformat(),
            "stop_reason": None if self.stop_reason is None else self.stop_reason.value,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnMetadata:
        """Rebuild metadata saved by `to_dict()`; missing keys mean `None`.

        Raises:
            ValueError: A time is not ISO 8601 or the stop reason is unknown.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"turn metadata must be a dict, not {data!r}")
        reason = data.get("stop_reason")
        try:
            stop_reason = None if reason is None else StopReason(reason)
        except ValueError:
            raise ValueError(
                f"turn metadata 'stop_reason' must be one of "
                f"{[r.value for r in StopReason]} or null, not {reason!r}"
            ) from None
        return cls(_parse_time(data, "start_time"), _parse_time(data, "end_time"), stop_reason)


def _parse_time(data: Mapping[str, Any], key: str) -> datetime | None:
    value = data.get(key)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"turn metadata {key!r} must be an ISO 8601 string, not {value!r}"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _Expired(Exception):
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


async def _within(step: Coroutine[Any, Any, Any], started: float, seconds: float) -> Any:
    """Await `step`, raising `_Expired` if it is still suspended `seconds` after `started`.

    A step that finishes without suspending cannot be interrupted by asyncio
    anyway, so it runs without arming a timer: that keeps a fast turn cheap.
    `started` is a `time.monotonic()` reading.
    """
    try:
        pending = step.send(None)
    except StopIteration as stop:
        return stop.value
    scope = asyncio.timeout(seconds - (monotonic() - started))
    try:
        async with scope:
            return await _resume(step, pending)
    except TimeoutError:
        if scope.expired():
            raise _Expired from None
        raise


def _check_timeout(timeout: object) -> float:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout < math.inf
    ):
        raise ValueError(f"Turn timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout) if isinstance(timeout, float) else timeout


class Turn(JsonSerializable):
    """One unit of work: a tool, its arguments and a timeout.

    Args:
        tool: The tool, or its registry key.
        args: Positional arguments for the tool.
        kwargs: Keyword arguments for the tool.
        timeout: Seconds the whole run (every step of a generator) may take.
        tags: Tags that global hooks can filter on.

    Any zero-argument function among the `args` / `kwargs` values is called
    for its value when the tool is invoked, not when the turn is made.

    Raises:
        UnregisteredToolError: No tool is registered under `tool`.
        ValueError: `timeout` is not a positive number.
        TypeError: `args` is not a list or tuple, or `kwargs` is not a dict of str keys.
    """

    before_run = HookSlot(TurnHook.BEFORE_RUN)
    after_run = HookSlot(TurnHook.AFTER_RUN)
    on_timeout = HookSlot(TurnHook.ON_TIMEOUT)
    on_error = HookSlot(TurnHook.ON_ERROR)
    on_complete = HookSlot(TurnHook.ON_COMPLETE)

    def __init__(
        self,
        tool: Tool[..., Any] | str,
        args: Iterable[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        timeout: float = 60,
        tags: Iterable[str] | None = None,
    ) -> None:
        self._running = False
        self._tool = self._resolve(tool)
        self._args, self._dynamic_args = self._check_args(args)
        self._kwargs, self._dynamic_kwargs = self._check_kwargs(kwargs)
        self._timeout = _check_timeout(timeout)
        self._tags = tag_set(tags)
        self.hooks: list[Hook] = []
        self.output: Any = None
        self._start: float | None = None
        self._end: float | None = None
        self._stop_reason: StopReason | None = None

    # -- the guarded fields ------------------------------------------------

    def _guard(self, field: str) -> None:
        if self._running:
            raise SafeExecutionError(
                f"cannot change {field!r} of a running turn for tool {self._tool.key!r}; "
                f"wait for it to finish"
            )

    @staticmethod
    def _resolve(tool: Tool[..., Any] | str) -> Tool[..., Any]:
        if isinstance(tool, Tool):
            return tool
        if isinstance(tool, str):
            return ToolRegistry.get(tool)
        raise TypeError(f"Turn tool must be a Tool or a tool name, not {tool!r}")

    @staticmethod
    def _check_args(args: Iterable[Any] | None) -> tuple[tuple[Any, ...], bool]:
        if args is None:
            return (), False
        if not isinstance(args, list | tuple):
            raise TypeError(f"Turn args must be a list or tuple, not {type(args).__name__}")
        values = tuple(args)
        return values, any(map(is_dynamic, values))

    @staticmethod
    def _check_kwargs(kwargs: Mapping[str, Any] | None) -> tuple[dict[str, Any], bool]:
        if kwargs is None:
            return {}, False
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise TypeError(f"Turn kwargs must be a dict with str keys, not {kwargs!r}")
        values = dict(kwargs)
        return values, any(map(is_dynamic, values.values()))

    @property
    def tool(self) -> Tool[..., Any]:
        """The tool this turn runs."""
        return self._tool

    @tool.setter
    def tool(self, value: Tool[..., Any] | str) -> None:
        self._guard("tool")
        self._tool = self._resolve(value)

    @property
    def tool_name(self) -> str:
        """The tool's registry key."""
        return self._tool.key

    @property
    def args(self) -> list[Any]:
        """A copy of the positional arguments."""
        return list(self._args)

    @args.setter
    def args(self, value: Iterable[Any] | None) -> None:
        self._guard("args")
        self._args, self._dynamic_args = self._check_args(value)

    @property
    def kwargs(self) -> dict[str, Any]:
        """A copy of the keyword arguments."""
        return dict(self._kwargs)

    @kwargs.setter
    def kwargs(self, value: Mapping[str, Any] | None) -> None:
        self._guard("kwargs")
        self._kwargs, self._dynamic_kwargs = self._check_kwargs(value)

    @property
    def timeout(self) -> float:
        """Seconds the whole run may take."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self._guard("timeout")
        self._timeout = _check_timeout(value)

    @property
    def tags(self) -> frozenset[str]:
        """Tags that global hooks can filter on."""
        return self._tags

    @tags.setter
    def tags(self, value: Iterable[str] | None) -> None:
        self._guard("tags")
        self._tags = tag_set(value)

    @property
    def is_running(self) -> bool:
        """Whether a run of this turn is in progress."""
        return self._running

    @property
    def metadata(self) -> TurnMetadata:
        """Times and stop reason of the latest run (all `None` before one)."""
        return TurnMetadata(
            None if self._start is None else datetime.fromtimestamp(self._start, UTC),
            None if self._end is None else datetime.fromtimestamp(self._end, UTC),
            None if self._running else self._stop_reason,
        )

    def __repr__(self) -> str:
        return f"<Turn {self._tool.key}>"

    # -- running -------------------------------------------------------------

    def _evaluated(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args = tuple(map(evaluate_dynamic, self._args)) if self._dynamic_args else self._args
        kwargs = (
            {k: evaluate_dynamic(v) for k, v in self._kwargs.items()}
            if self._dynamic_kwargs
            else self._kwargs  # safe to share: a tool call never writes into its kwargs
        )
        return args, kwargs

    def _begin(self, wants_generator: bool) -> None:
        if self._tool.is_generator is not wants_generator:
            method, other = "returning", "yielding"
            if wants_generator:
                method, other = other, method
            raise WrongRunMethodError(
                f"tool {self._tool.key!r} is {'not ' if wants_generator else ''}an async "
                f"generator: run this turn with {other}(), not {method}()"
            )
        if self._running:
            raise SafeExecutionError(
                f"turn for tool {self._tool.key!r} is already running; it cannot be started again"
            )
        self._running = True
        self.output = None
        # Until the run says otherwise, an interrupted run reads as cancelled.
        self._start, self._end, self._stop_reason = time(), None, StopReason.CANCELLED

    async def _finish(self, hooks: list[Hook]) -> None:
        """Record the end of a run and fire `on_complete` (always, last)."""
        self._end = time()
        try:
            if hooks or _ON_COMPLETE:
                await fire(TurnHook.ON_COMPLETE, hooks, self._tags, self, self._stop_reason)
        finally:
            self._running = False

    async def _failed(self, hooks: list[Hook], exc: Exception) -> None:
        """Record a failed run and fire its hooks; raise `TurnTimeoutError` on expiry."""
        if isinstance(exc, _Expired):
            self._stop_reason = StopReason.TIMEOUT
            if hooks or _ON_TIMEOUT:
                await fire(TurnHook.ON_TIMEOUT, hooks, self._tags, self)
            raise TurnTimeoutError(
                f"turn for tool {self._tool.key!r} timed out after {self._timeout} s; "
                f"raise its timeout or make the tool faster"
            ) from None
        self._stop_reason = StopReason.ERROR
        if hooks or _ON_ERROR:
            await fire(TurnHook.ON_ERROR, hooks, self._tags, self, exc)

    def returning(self) -> Coroutine[Any, Any, Any]:
        """Run a coroutine tool and return its result (also kept in `output`).

        Use as `await turn.returning()`.

        Raises:
            WrongRunMethodError: The tool is an async generator.
            SafeExecutionError: The turn is already running.
            TurnTimeoutError: The tool ran past `timeout`.
        """
        return self._returning(self.hooks)

    def yielding(self) -> AsyncGenerator[Any, None]:
        """Run a generator tool, yielding each value as the tool produces it.

        `output` collects the values yielded so far.

        Raises:
            WrongRunMethodError: The tool is a coroutine function.
            SafeExecutionError: The turn is already running.
            TurnTimeoutError: The whole iteration ran past `timeout`.
        """
        return self._yielding(self.hooks)

    async def _returning(self, hooks: list[Hook]) -> Any:
        """Run with `hooks` (the turn's own, plus an agent's turn hooks)."""
        self._begin(wants_generator=False)
        started = monotonic()
        try:
            if hooks or _BEFORE_RUN:
                await fire(TurnHook.BEFORE_RUN, hooks, self._tags, self)
            args, kwargs = self._evaluated()
            output = await _within(self._tool._call(args, kwargs), started, self._timeout)
        except Exception as exc:
            await self._failed(hooks, exc)
            raise
        else:
            self.output = output
            self._stop_reason = StopReason.COMPLETED
            if hooks or _AFTER_RUN:
                await fire(TurnHook.AFTER_RUN, hooks, self._tags, self, output)
            return output
        finally:
            await self._finish(hooks)

    async def _yielding(self, hooks: list[Hook]) -> AsyncGenerator[Any, None]:
        self._begin(wants_generator=True)
        started = monotonic()
        produced: list[Any] = []
        self.output = produced
        try:
            if hooks or _BEFORE_RUN:
                await fire(TurnHook.BEFORE_RUN, hooks, self._tags, self)
            args, kwargs = self._evaluated()
            timeout = self._timeout
            generator = self._tool._call(args, kwargs)
            try:
                while True:
                    if monotonic() - started >= timeout:
                        raise _Expired
                    try:
                        value = await _within(generator.__anext__(), started, timeout)
                    except StopAsyncIteration:
                        break
                    produced.append(value)
                    yield value
            finally:
                await generator.aclose()
        except Exception as exc:
            await self._failed(hooks, exc)
            raise
        else:
            self._stop_reason = StopReason.COMPLETED
            if hooks or _AFTER_RUN:
                await fire(TurnHook.AFTER_RUN, hooks, self._tags, self, produced)
        finally:
            await self._finish(hooks)

    def copy(self) -> Turn:
        """A fresh, unrun turn with the same tool, arguments, timeout, tags and hooks."""
        twin = Turn(self._tool, self._args, self._kwargs, self._timeout, self._tags)
        twin.hooks = list(self.hooks)
        return twin

    # -- serialization -------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The turn as plain data; dynamic arguments are evaluated now.

        Raises:
            UnserializableHookError: A hook cannot be saved by name.
        """
        args, kwargs = self._evaluated()
        return {
            "tool_name": self._tool.key,
            "args": list(args),
            "kwargs": dict(kwargs),
            "timeout": self._timeout,
            "metadata": self.metadata.to_dict(),
            # A turn in flight runs again from the start when restored: its partial
            # output (routed items included) is not state worth saving.
            "output": None if self._running else self.output,
            "hooks": hooks_to_dict(self.hooks, TurnHook, f"turn {self._tool.key!r}"),
            "tags": sorted(self._tags),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        """Rebuild a turn saved by `to_dict()`; only `tool_name` is required.

        Raises:
            ValueError: A key is missing or has the wrong type.
            UnregisteredToolError: The tool is not registered.
            UnregisteredHookError: A hook name is not registered.
        """
        if not isinstance(data, Mapping) or "tool_name" not in data:
            raise ValueError(f"a saved turn must be a dict with a 'tool_name', not {data!r}")
        name = data["tool_name"]
        if not isinstance(name, str):
            raise ValueError(f"turn 'tool_name' must be a string, not {name!r}")
        try:
            turn = cls(
                name,
                args=data.get("args"),
                kwargs=data.get("kwargs"),
                timeout=data.get("timeout", 60),
                tags=data.get("tags"),
            )
        except TypeError as exc:
            raise ValueError(f"saved turn for {name!r}: {exc}") from None
        metadata = TurnMetadata.from_dict(data.get("metadata") or {})
        turn.hooks = hooks_from_dict(data.get("hooks", {}), TurnHook, f"turn {name!r}")
        turn.output = data.get("output")
        turn._start = None if metadata.start_time is None else metadata.start_time.timestamp()
        turn._end = None if metadata.end_time is None else metadata.end_time.timestamp()
        turn._stop_reason = metadata.stop_reason
        return turn
