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

import math
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from operator import itemgetter
from time import monotonic
from typing import Any, Generic

from typing_extensions import TypeVar

from pygents_ctx._calls import any_dynamic, evaluate_dynamic, tag_set
from pygents_ctx._clock import RunTimes
from pygents_ctx._dispatch import HookSlot, fire_on, hooks_from_dict, hooks_to_dict
from pygents_ctx._json import JsonSerializable, is_mapping, refuses_deep_nesting
from pygents_ctx._lending import lent_turn_changing
from pygents_ctx._steps import DONE, Expired, HookedSteps, Later, Steps, ToolSteps, resume_within
from pygents_ctx.errors import SafeExecutionError, TurnTimeoutError, WrongRunMethodError
from pygents_ctx.hooks import Hook, ToolHook, TurnHook
from pygents_ctx.registry import HookRegistry, ToolRegistry
from pygents_ctx.tools import Tool, ToolMetadata

__all__ = ["StopReason", "Turn", "TurnMetadata"]

_BEFORE_RUN = HookRegistry.globals_for(TurnHook.BEFORE_RUN)
_AFTER_RUN = HookRegistry.globals_for(TurnHook.AFTER_RUN)
_ON_TIMEOUT = HookRegistry.globals_for(TurnHook.ON_TIMEOUT)
_ON_ERROR = HookRegistry.globals_for(TurnHook.ON_ERROR)
_ON_COMPLETE = HookRegistry.globals_for(TurnHook.ON_COMPLETE)
# Every global turn hook, of any kind: an agent asks "does a hook watch this turn?".
ANY_TURN_HOOK = HookRegistry.globals_for_any(TurnHook)
_ANY_TOOL_HOOK = HookRegistry.globals_for_any(ToolHook)


# (str, Enum), not StrEnum: str() stays "StopReason.ERROR", as pygents prints it.
class StopReason(str, Enum):  # noqa: UP042
    """How a turn's latest run ended (a `str` enum: `StopReason.ERROR == "error"`)."""

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
        return cls(*_read_metadata(data))


# Every run sets one of these. Reading a member off an Enum class costs about 100 ns
# (the enum metaclass defines __getattr__), more than many a whole hot-path step.
_COMPLETED, _CANCELLED = StopReason.COMPLETED, StopReason.CANCELLED

_NO_METADATA = TurnMetadata()  # what every turn reports before its first run
_NO_SAVED_METADATA = _NO_METADATA.to_dict()  # and saves: most queued turns never ran

# The saved fields of a turn that hold what users gave it (see `Turn._user_values`).
_USER_FIELDS = itemgetter("args", "kwargs", "output")
_NO_TAGS: frozenset[str] = frozenset()
_NO_SAVED_HOOKS: dict[str, list[str]] = {}  # only compared with, never changed


def _read_metadata(
    data: object,
) -> tuple[datetime | None, datetime | None, StopReason | None]:
    """The fields of saved metadata, checked (`Turn.from_dict` needs no `TurnMetadata`).

    Raises:
        ValueError: A time is not ISO 8601 or the stop reason is unknown.
    """
    if not is_mapping(data):
        raise ValueError(f"turn metadata must be a dict, not {data!r}")
    reason = data.get("stop_reason")
    try:
        stop_reason = None if reason is None else StopReason(reason)
    except ValueError:
        raise ValueError(
            f"turn metadata 'stop_reason' must be one of "
            f"{[r.value for r in StopReason]} or null, not {reason!r}"
        ) from None
    return _parse_time(data, "start_time"), _parse_time(data, "end_time"), stop_reason


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


def _check_timeout(timeout: object) -> float:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout < math.inf
    ):
        raise ValueError(f"Turn timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout) if isinstance(timeout, float) else timeout


def _bad_kwargs(kwargs: object) -> TypeError:
    return TypeError(f"Turn kwargs must be a dict with str keys, not {kwargs!r}")


T = TypeVar("T", default=Any)  # what a turn's tool produces


class Turn(RunTimes, JsonSerializable, Generic[T]):
    """One unit of work: a tool, its arguments and a timeout.

    Generic in what its tool produces: `Turn[int]` runs a tool returning an
    `int` (or, for a generator tool, yielding them).

    Args:
        tool: The tool, its registry key, or the function it decorates.
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

    # Slots: an agent reads a dozen of these per turn, over thousands of queued turns.
    __slots__ = (
        "_args",
        "_dynamic_args",
        "_dynamic_kwargs",
        "_kwargs",
        "_running",
        "_stop_reason",
        "_tags",
        "_timeout",
        "_tool",
        "hooks",
        "output",
    )

    before_run = HookSlot(TurnHook.BEFORE_RUN)
    after_run = HookSlot(TurnHook.AFTER_RUN)
    on_timeout = HookSlot(TurnHook.ON_TIMEOUT)
    on_error = HookSlot(TurnHook.ON_ERROR)
    on_complete = HookSlot(TurnHook.ON_COMPLETE)

    def __init__(
        self,
        tool: Tool[..., Any] | str | Callable[..., Any],
        args: Iterable[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        timeout: float = 60,
        tags: Iterable[str] | None = None,
    ) -> None:
        self._fill(
            self._resolve(tool),
            *self._check_args(args),
            *self._check_kwargs(kwargs),
            _check_timeout(timeout),
            tag_set(tags),
        )

    def _fill(
        self,
        tool: Tool[..., Any],
        args: tuple[Any, ...],
        dynamic_args: bool,
        kwargs: dict[str, Any],
        dynamic_kwargs: bool,
        timeout: float,
        tags: frozenset[str],
    ) -> None:
        """Set every field of a new turn from checked values (`__init__`, copies)."""
        self._running = False
        self._tool = tool
        # `_args` is a tuple and `_kwargs` is never changed in place (the setter
        # replaces it; a call never writes into it): copies of a turn share both.
        self._args, self._dynamic_args = args, dynamic_args
        self._kwargs, self._dynamic_kwargs = kwargs, dynamic_kwargs
        self._timeout = timeout
        self._tags = tags
        self.hooks: list[Hook] = []
        self.output: Any = None
        RunTimes.__init__(self)
        self._stop_reason: StopReason | None = None

    # -- the guarded fields ------------------------------------------------

    def _guard(self, field: str) -> None:
        """Called by every setter before it changes the turn's declaration."""
        if self._running:
            raise SafeExecutionError(
                f"Cannot change property {field!r} while the turn is running "
                f"(tool {self._tool.key!r}); wait for it to finish"
            )
        lent_turn_changing(self)  # branches that borrow this turn copy it first

    @staticmethod
    def _resolve(tool: Tool[..., Any] | str | Callable[..., Any]) -> Tool[..., Any]:
        if isinstance(tool, Tool):
            return tool
        if isinstance(tool, str):
            return ToolRegistry.get(tool)
        name = getattr(tool, "__name__", None)
        if callable(tool) and isinstance(name, str):
            held = ToolRegistry.get(name)
            if held.fn is tool:  # the function a tool decorates names that tool
                return held
        raise TypeError(f"Turn tool must be a Tool or a tool name, not {tool!r}")

    @staticmethod
    def _check_args(args: Iterable[Any] | None) -> tuple[tuple[Any, ...], bool]:
        if args is None:
            return (), False
        if not isinstance(args, (list, tuple)):
            hint = "; pass timeout=... by keyword" if isinstance(args, (int, float)) else ""
            raise TypeError(f"Turn args must be a list or tuple, not {type(args).__name__}{hint}")
        values = tuple(args)
        return values, any_dynamic(values)

    @staticmethod
    def _check_kwargs(kwargs: Mapping[str, Any] | None) -> tuple[dict[str, Any], bool]:
        if kwargs is None:
            return {}, False
        if not is_mapping(kwargs):
            raise _bad_kwargs(kwargs)
        for key in kwargs:
            if not isinstance(key, str):
                raise _bad_kwargs(kwargs)
        values = dict(kwargs)
        return values, any_dynamic(values.values())

    @property
    def tool(self) -> Tool[..., Any]:
        """The tool this turn runs."""
        return self._tool

    @tool.setter
    def tool(self, value: Tool[..., Any] | str | Callable[..., Any]) -> None:
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
        start, end = self._wall_datetimes()
        stop_reason = None if self._running else self._stop_reason
        if start is None and end is None and stop_reason is None:
            return _NO_METADATA
        return TurnMetadata(start, end, stop_reason)

    def __repr__(self) -> str:
        tool, timeout = self._tool.key, self._timeout
        return f"Turn(tool={tool!r}, timeout={timeout!r}, metadata={self.metadata!r})"

    # -- running -------------------------------------------------------------

    def _evaluated(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args = tuple(map(evaluate_dynamic, self._args)) if self._dynamic_args else self._args
        kwargs = (
            {k: evaluate_dynamic(v) for k, v in self._kwargs.items()}
            if self._dynamic_kwargs
            else self._kwargs  # safe to share: a tool call never writes into its kwargs
        )
        return args, kwargs

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
        self._stop_reason = _CANCELLED
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
        self._stop_reason = _COMPLETED

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

    def returning(self) -> Coroutine[Any, Any, T]:
        """Run a coroutine tool and return its result (also kept in `output`).

        Use as `await turn.returning()`.

        Raises:
            WrongRunMethodError: The tool is an async generator.
            SafeExecutionError: The turn is already running.
            TurnTimeoutError: The tool ran past `timeout`.
        """
        return self._returning(self.hooks)

    def yielding(self) -> AsyncGenerator[T, None]:
        """Run a generator tool, yielding each value as the tool produces it.

        `output` collects the values yielded so far.

        Raises:
            WrongRunMethodError: The tool is a coroutine function.
            SafeExecutionError: The turn is already running.
            TurnTimeoutError: The whole iteration ran past `timeout`.
        """
        return self._yielding(self.hooks)

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
        self._stop_reason = _CANCELLED
        started = self._start = monotonic()
        self._end = self._to_wall = None
        tool, args, kwargs = self._tool, self._args, self._kwargs
        tool_times = None
        try:
            if tool.hooks or _ANY_TOOL_HOOK or tool._lock is not None:
                step = tool._call(args, kwargs)  # the wrapper fires them, and keeps the times
            else:
                validator = tool._validator
                if validator is not None:
                    validator(args, kwargs)
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
            self._stop_reason = _COMPLETED
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
        self._stop_reason = _COMPLETED
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
            self._stop_reason = _COMPLETED
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
            self._stop_reason = _COMPLETED
            if hooks or _AFTER_RUN:
                await fire_on(_AFTER_RUN, hooks, self._tags, self, self.output)
        finally:
            self._end = monotonic()
            if hooks or _ON_COMPLETE:
                await self._complete(hooks)
            else:
                self._running = False

    def copy(self) -> Turn:
        """A fresh, unrun turn with the same tool, arguments, timeout, tags and hooks."""
        return self._twin(list(self.hooks))

    def _twin(self, hooks: list[Hook]) -> Turn:
        """A fresh, unrun `Turn` with this one's declaration (checked: not again) and `hooks`."""
        twin = object.__new__(Turn)
        arguments = (self._args, self._dynamic_args, self._kwargs, self._dynamic_kwargs)
        twin._fill(self._tool, *arguments, self._timeout, self._tags)
        twin.hooks = hooks
        return twin

    # -- serialization -------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The turn as plain data; dynamic arguments are evaluated now.

        Raises:
            UnserializableHookError: A hook cannot be saved by name.
        """
        return self._saved(fresh=True)

    def _json_data(self) -> dict[str, Any]:
        return self._saved(fresh=False)

    @classmethod
    def _user_values(cls, data: dict[str, Any]) -> list[Any]:
        return cls._user_values_of([data])

    @staticmethod
    def _user_values_of(saved_turns: Iterable[dict[str, Any]]) -> list[Any]:
        """`_user_values` of many saved turns: their arguments and outputs."""
        return list(map(_USER_FIELDS, saved_turns))

    def _saved(self, fresh: bool) -> dict[str, Any]:
        """`to_dict()`; unless `fresh`, sharing this turn's own containers, not copies."""
        # Most turns hold plain arguments, have never run and have no hooks or tags:
        # each of those takes a short path (an agent saves its whole queue at once).
        if self._dynamic_args or self._dynamic_kwargs:
            args, kwargs = self._evaluated()
        else:
            args, kwargs = self._args, self._kwargs
        if self._start is None and self._end is None and self._stop_reason is None:
            metadata = _NO_SAVED_METADATA.copy() if fresh else _NO_SAVED_METADATA
        else:
            metadata = self.metadata.to_dict()
        hooks, tags = self.hooks, self._tags
        return {
            "tool_name": self._tool.key,
            # A list, as JSON reads it back (to_json compares); `[]` is the quicker new one.
            "args": list(args) if args else [],
            "kwargs": dict(kwargs) if fresh else kwargs,
            "timeout": self._timeout,
            "metadata": metadata,
            # A turn in flight runs again from the start when restored: its partial
            # output (routed items included) is not state worth saving.
            "output": None if self._running else self.output,
            "hooks": hooks_to_dict(hooks, TurnHook, f"turn {self._tool.key!r}") if hooks else {},
            "tags": sorted(tags) if tags else [],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        """Rebuild a turn saved by `to_dict()`; only `tool_name` is required.

        Raises:
            ValueError: A key is missing or has the wrong type.
            UnregisteredToolError: The tool is not registered.
            UnregisteredHookError: A hook name is not registered.
        """
        return cls._from_saved(data, {}, parsed=False)

    @classmethod
    def _from_json_data(cls, data: Any) -> Turn:
        return cls._from_saved(data, {}, parsed=True)

    @classmethod
    @refuses_deep_nesting("Turn")
    def _from_saved(cls, data: object, tools: dict[str, Tool[..., Any]], parsed: bool) -> Turn:
        """`from_dict`, looking tool names up in `tools` before the registry.

        Loading many turns (an agent's queue) with one `tools` resolves each name
        once; afterwards `tools` holds every tool the turns use. `parsed`: `data`
        is fresh from `from_json` (see `JsonSerializable._from_json_data`).
        """
        if not is_mapping(data) or "tool_name" not in data:
            raise ValueError(f"a saved turn must be a dict with a 'tool_name', not {data!r}")
        name = data["tool_name"]
        if not isinstance(name, str):
            raise ValueError(f"turn 'tool_name' must be a string, not {name!r}")
        tool = tools.get(name)
        if tool is None:
            tool = tools[name] = ToolRegistry.get(name)
        args, kwargs, tags = data.get("args"), data.get("kwargs"), data.get("tags")
        try:
            if parsed and type(args) is list and type(kwargs) is dict:
                # Fresh JSON holds no functions to call at run time and only string
                # keys, and nothing else holds the dict: the turn can keep it.
                args, dynamic_args, dynamic_kwargs = tuple(args), False, False
            else:
                args, dynamic_args = cls._check_args(args)
                kwargs, dynamic_kwargs = cls._check_kwargs(kwargs)
            timeout = data.get("timeout", 60)
            if type(timeout) is not int or timeout < 1:  # a positive int needs no other check
                timeout = _check_timeout(timeout)
            tags = _NO_TAGS if tags == [] else tag_set(tags)
        except TypeError as exc:
            raise ValueError(f"saved turn for {name!r}: {exc}") from None
        start: float | None = None
        end: float | None = None
        stop_reason: StopReason | None = None
        metadata = data.get("metadata")
        if metadata and metadata != _NO_SAVED_METADATA:
            start_time, end_time, stop_reason = _read_metadata(metadata)
            start = None if start_time is None else start_time.timestamp()
            end = None if end_time is None else end_time.timestamp()
        saved_hooks = data.get("hooks", _NO_SAVED_HOOKS)
        # Most turns have none: then skip naming the owner for error messages.
        hooks = (
            []
            if saved_hooks == _NO_SAVED_HOOKS
            else hooks_from_dict(saved_hooks, TurnHook, f"turn {name!r}")
        )
        # Values checked as __init__ would: calling it would check them again.
        turn = object.__new__(cls)
        turn._fill(tool, args, dynamic_args, kwargs, dynamic_kwargs, timeout, tags)
        turn.hooks = hooks
        turn.output = data.get("output")
        turn._load_times(start, end)
        turn._stop_reason = stop_reason
        return turn
