"""Run times: cheap monotonic readings while running, wall-clock datetimes when asked."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from time import monotonic, time

__all__ = ["RunTimes"]


class _WallOffset:
    """What to add to a `monotonic()` reading for a `time()` timestamp, shared.

    Taking it afresh per object would let two readings of the same instant (a
    turn's end and its tool's) differ by the microsecond between the two clock
    reads; sharing it, refreshed each second, keeps them equal while following
    adjustments of the wall clock.
    """

    __slots__ = ("_offset", "_taken")

    def __init__(self) -> None:
        self._taken = -math.inf
        self._offset = 0.0

    def __call__(self) -> float:
        now = monotonic()
        if now - self._taken > 1.0:
            self._offset, self._taken = time() - monotonic(), now
        return self._offset


_wall_offset = _WallOffset()


class RunTimes:
    """When the latest run of something (a tool call, a turn) started and ended.

    A run stores `monotonic()` readings, which a timeout needs anyway and which a
    caller that already holds one can share. They become `time()` timestamps only
    when read: the offset between the two clocks is taken at the first read after
    a run started and then kept, so every later read (the end included, once
    known) agrees with it. Saved times are loaded as timestamps with offset 0.
    """

    __slots__ = ("_end", "_start", "_to_wall")

    def __init__(self) -> None:
        self._start: float | None = None
        self._end: float | None = None
        self._to_wall: float | None = 0.0

    def _mark_start(self, reading: float) -> None:
        """Record a run starting at `reading` (a `monotonic()` value)."""
        self._start, self._end, self._to_wall = reading, None, None

    def _load_times(self, start: float | None, end: float | None) -> None:
        """Set times read from saved data (`time()` timestamps)."""
        self._start, self._end, self._to_wall = start, end, 0.0

    def _wall_times(self) -> tuple[float | None, float | None]:
        """The latest run's start and end as `time()` timestamps (None when unknown)."""
        to_wall = self._to_wall
        if to_wall is None:
            to_wall = self._to_wall = _wall_offset()
        start, end = self._start, self._end
        return (
            None if start is None else start + to_wall,
            None if end is None else end + to_wall,
        )

    def _wall_datetimes(self) -> tuple[datetime | None, datetime | None]:
        """`_wall_times()` as UTC datetimes."""
        start, end = self._wall_times()
        return (
            None if start is None else datetime.fromtimestamp(start, UTC),
            None if end is None else datetime.fromtimestamp(end, UTC),
        )
