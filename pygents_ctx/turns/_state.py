"""What a turn holds: its declared values, checked, and the state of its latest run.

`TurnState` owns every field of a `Turn` (`_fill` sets them all, for a new
turn, a copy or a loaded one). `TurnRunning` (how a turn runs) and `TurnSaving`
(how it is saved and loaded) build on it, and `pygents_ctx.turns.Turn` adds
what users declare: the constructor and the guarded setters. `StopReason` and
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
    "StopReason",
    "TurnMetadata",
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


class TurnState(RunTimes):
    """The fields of a `Turn`: its declaration (tool, arguments, timeout, tags), its
    hooks, and the state of its latest run (running, output, stop reason, times)."""

    # Slots: an agent reads a dozen of these per turn, over thousands of queued turns.
    __slots__ = (
        "_args",
        "_dynamic_args",
        "_dynamic_kwargs",
        "_hooks",
        "_kwargs",
        "_metadata_held",
        "_metadata_of",
        "_running",
        "_stop_reason",
        "_tags",
        "_timeout",
        "_tool",
        "output",
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
        hooks: TurnHookList | None = None,
    ) -> None:
        """Set every field of a new turn from checked values (`__init__`, copies, loading).

        `hooks`: the turn's own list (None: a new, empty one).
        """
        self._running = False
        self._tool = tool
        # `_args` is a tuple and `_kwargs` is never changed in place (the setter
        # replaces it; a call never writes into it): copies of a turn share both.
        self._args, self._dynamic_args = args, dynamic_args
        self._kwargs, self._dynamic_kwargs = kwargs, dynamic_kwargs
        self._timeout = timeout
        self._tags = tags
        self._hooks: list[Hook] = TurnHookList() if hooks is None else hooks
        self.output: Any = None
        RunTimes.__init__(self)
        self._stop_reason: StopReason | None = None
        self._metadata_held: TurnMetadata | None = None
        self._metadata_of: tuple[Any, ...] = ()

    def _metadata(self) -> TurnMetadata:
        """Times and stop reason of the latest run (all `None` before one).

        Made when first read and kept while the run state it shows stands, so
        that assignments to its fields stay; a run's start and end replace it.
        """
        stop_reason = self._stop_reason
        # While running, CANCELLED is only the placeholder for an interrupted run: a
        # timeout or error recorded before the hooks fire shows (on_timeout sees TIMEOUT).
        if self._running and stop_reason is CANCELLED:
            stop_reason = None
        state = (self._start, self._end, stop_reason)
        held = self._metadata_held
        if held is not None and self._metadata_of == state:
            return held
        start, end = self._wall_datetimes()
        made = self._metadata_held = TurnMetadata(start, end, stop_reason)
        self._metadata_of = state
        return made

    def _evaluated(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments to call the tool with: dynamic ones evaluated now."""
        args = tuple(map(evaluate_dynamic, self._args)) if self._dynamic_args else self._args
        kwargs = (
            {k: evaluate_dynamic(v) for k, v in self._kwargs.items()}
            if self._dynamic_kwargs
            else self._kwargs  # safe to share: a tool call never writes into its kwargs
        )
        return args, kwargs
