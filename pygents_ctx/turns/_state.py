"""What a turn holds: its declared values, checked, and the state of its latest run.

`TurnState` owns every field of a `Turn`: its declaration (`Declared`, never
changed, so copies share it), its own hooks and its latest run (`TurnRun`).
`TurnRunning` (how a turn runs) and `TurnSaving` (how it is saved and loaded)
build on it, and `pygents_ctx.turns.Turn` adds what users declare: the
constructor and the guarded setters. `StopReason` and
`TurnMetadata` are public through `pygents_ctx.turns`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from pygents_ctx._clock import RunTimes
from pygents_ctx._json import JsonSerializable, is_mapping
from pygents_ctx.hooks._calls import any_dynamic, evaluate_dynamic
from pygents_ctx.hooks._dispatch import TurnHookList

if TYPE_CHECKING:
    from pygents_ctx.hooks import Hook
    from pygents_ctx.tools import Tool

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "NO_SAVED_METADATA",
    "Declared",
    "StopReason",
    "TurnMetadata",
    "TurnRun",
    "TurnState",
    "check_args",
    "check_kwargs",
    "check_timeout",
    "read_metadata",
]


# (str, Enum), not StrEnum: str() stays "StopReason.ERROR", as pygents prints it.
class StopReason(str, Enum):  # noqa: UP042
    """How a turn's latest run ended (a `str` enum: `StopReason.ERROR == "error"`)."""

    COMPLETED = "completed"
    TIMEOUT = "timeout"
    ERROR = "error"
    CANCELLED = "cancelled"


@dataclass
class TurnMetadata(JsonSerializable):
    """When a turn's latest run started and ended, and why it stopped (UTC times).

    `turn.metadata` is the turn's own: assigning its fields (as pygents allows)
    changes what the turn reports and saves, until its next run records new ones.
    """

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
        return cls(*read_metadata(data))


# Every run sets one of these. Reading a member off an Enum class costs about 100 ns
# (the enum metaclass defines __getattr__), more than many a whole hot-path step.
COMPLETED, CANCELLED = StopReason.COMPLETED, StopReason.CANCELLED

NO_SAVED_METADATA = TurnMetadata().to_dict()  # what most turns save: most queued turns never ran


def read_metadata(
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


def check_timeout(timeout: object) -> float:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout < math.inf
    ):
        raise ValueError(f"Turn timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout) if isinstance(timeout, float) else timeout


def _bad_kwargs(kwargs: object) -> TypeError:
    return TypeError(f"Turn kwargs must be a dict with str keys, not {kwargs!r}")


def check_args(args: Iterable[Any] | None) -> tuple[tuple[Any, ...], bool]:
    if args is None:
        return (), False
    if not isinstance(args, (list, tuple)):
        hint = "; pass timeout=... by keyword" if isinstance(args, (int, float)) else ""
        raise TypeError(f"Turn args must be a list or tuple, not {type(args).__name__}{hint}")
    values = tuple(args)
    return values, any_dynamic(values)


def check_kwargs(kwargs: Mapping[str, Any] | None) -> tuple[dict[str, Any], bool]:
    if kwargs is None:
        return {}, False
    if not is_mapping(kwargs):
        raise _bad_kwargs(kwargs)
    for key in kwargs:
        if not isinstance(key, str):
            raise _bad_kwargs(kwargs)
    values = dict(kwargs)
    return values, any_dynamic(values.values())


@dataclass(slots=True, eq=False)
class Declared:
    """What a turn runs: its tool, its arguments (checked), its timeout and tags.

    Never changed once made: a `Turn` setter gives the turn a new one
    (`dataclasses.replace`), so a copy of a turn (a branch's) shares its
    parent's, and neither sees the other's later changes. `args` is a tuple;
    `kwargs` is never written into (a call reads it), which is what makes
    sharing it safe.
    """

    tool: Tool[..., Any]
    args: tuple[Any, ...]
    dynamic_args: bool
    kwargs: dict[str, Any]
    dynamic_kwargs: bool
    timeout: float
    tags: frozenset[str]


class TurnRun(RunTimes):
    """The latest run of a turn: whether it is in progress, its output, its times and
    stop reason, and the `TurnMetadata` shown for them (made when first read, see
    `TurnState._metadata`).

    A run's start gives the turn a new one; a turn that never ran has none, until
    its metadata or output is read back from saved data or assigned.
    """

    __slots__ = ("metadata_held", "metadata_of", "output", "running", "stop_reason")

    def __init__(self, running: bool = False, stop_reason: StopReason | None = None) -> None:
        RunTimes.__init__(self)
        self.running = running
        self.output: Any = None
        self.stop_reason = stop_reason
        self.metadata_held: TurnMetadata | None = None
        self.metadata_of: tuple[Any, ...] = ()


# The hooks of a turn that has none (see `TurnState._own_hooks`): read, never changed.
_NO_HOOKS: list[Hook] = []


class TurnState:
    """The fields of a `Turn`: its declaration (`Declared`: tool, arguments, timeout,
    tags), its own hooks, and its latest run (`TurnRun`, with the run's output).

    Three fields, so that copying a turn (a branch copies thousands) is three
    assignments: the declaration is shared, the hooks list is copied only when
    the turn has hooks, and a copy has not run.
    """

    # Slots: an agent reads these per turn, over thousands of queued turns.
    __slots__ = ("_declared", "_hooks", "_run")

    def _fill(self, declared: Declared, hooks: TurnHookList | None = None) -> None:
        """Set every field of a new, unrun turn (`__init__`, loading; `Turn.copy` sets them too).

        `hooks`: the turn's own list, or None while it has none (`Turn.hooks`
        makes the list when first read).
        """
        self._declared = declared
        self._hooks: TurnHookList | None = hooks
        self._run: TurnRun | None = None

    @property
    def output(self) -> Any:
        """What the latest run produced: a coroutine tool's result, or the list of the
        values a generator tool yielded so far (None before a run)."""
        run = self._run
        return None if run is None else run.output

    @output.setter
    def output(self, value: Any) -> None:
        run = self._run
        if run is None:
            if value is None:  # what a turn that never ran has already
                return
            run = self._run = TurnRun()
        run.output = value

    @property
    def _own_hooks(self) -> list[Hook]:
        """The turn's own hooks to fire in a run: its list, or an empty one while it has none."""
        return self._hooks or _NO_HOOKS

    @property
    def _running(self) -> bool:
        """Whether a run of this turn is in progress."""
        run = self._run
        return run is not None and run.running

    def _metadata(self) -> TurnMetadata:
        """Times and stop reason of the latest run (all `None` before one).

        Made when first read and kept while the run state it shows stands, so
        that assignments to its fields stay; a run's start and end replace it.
        """
        run = self._run
        if run is None:  # never run: the record keeps what is read (and assigned)
            run = self._run = TurnRun()
        stop_reason = run.stop_reason
        # While running, CANCELLED is only the placeholder for an interrupted run: a
        # timeout or error recorded before the hooks fire shows (on_timeout sees TIMEOUT).
        if run.running and stop_reason is CANCELLED:
            stop_reason = None
        state = (run._start, run._end, stop_reason)
        held = run.metadata_held
        if held is not None and run.metadata_of == state:
            return held
        start, end = run._wall_datetimes()
        made = run.metadata_held = TurnMetadata(start, end, stop_reason)
        run.metadata_of = state
        return made

    def _evaluated(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments to call the tool with: dynamic ones evaluated now."""
        declared = self._declared
        args = (
            tuple(map(evaluate_dynamic, declared.args)) if declared.dynamic_args else declared.args
        )
        kwargs = (
            {k: evaluate_dynamic(v) for k, v in declared.kwargs.items()}
            if declared.dynamic_kwargs
            else declared.kwargs  # safe to share: a tool call never writes into its kwargs
        )
        return args, kwargs
