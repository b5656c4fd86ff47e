"""Timing helpers: medians of repeats, ratios to a bare-Python floor."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

REPEATS = 7


@dataclass(frozen=True)
class Result:
    """One scenario: ns per operation for ours and the floor, and its target: a ratio
    to the floor, or a bound on ours (`bound_ns`, e.g. a trivial turn under 10 µs)."""

    name: str
    ours_ns: float
    floor_ns: float
    target: float | None
    bound_ns: float | None = None

    @property
    def ratio(self) -> float:
        return self.ours_ns / self.floor_ns

    @property
    def met(self) -> bool | None:
        if self.bound_ns is not None:
            return self.ours_ns <= self.bound_ns
        return None if self.target is None else self.ratio <= self.target


Step = Callable[[int], Awaitable[None]]


Clock = Callable[[], int]


async def per_op(
    run: Step,
    ops: int,
    prepare: Step | None = None,
    repeats: int = REPEATS,
    clock: Clock = time.perf_counter_ns,
) -> float:
    """Median ns per operation of `run(ops)` over `repeats` runs (GC paused while timing).

    `prepare(ops)`, when given, runs before each timed run and is not timed.
    `clock` reads the time in ns: wall time by default; `time.process_time_ns`
    counts this process's CPU only, steadier on a busy machine when all the
    work is in the process.
    """
    samples = []
    for _ in range(repeats):
        if prepare is not None:
            await prepare(ops)
        # Let the event loop run once, untimed: it drops the timers the last run's
        # turns armed and cancelled (asyncio does that only when the loop runs).
        await asyncio.sleep(0)
        gc.collect()
        gc.disable()
        try:
            start = clock()
            await run(ops)
            samples.append((clock() - start) / ops)
        finally:
            gc.enable()
    return statistics.median(samples)


async def compare(
    name: str,
    ours: Step,
    floor: Step,
    ops: int,
    target: float | None,
    prepare: Step | None = None,
    clock: Clock = time.perf_counter_ns,
    bound_ns: float | None = None,
) -> Result:
    """Time `ours` and `floor` interleaved (so machine noise hits both alike)."""
    ours_samples, floor_samples = [], []
    for _ in range(REPEATS):
        floor_samples.append(await per_op(floor, ops, repeats=1, clock=clock))
        ours_samples.append(await per_op(ours, ops, prepare, repeats=1, clock=clock))
    ours_ns, floor_ns = statistics.median(ours_samples), statistics.median(floor_samples)
    return Result(name, ours_ns, floor_ns, target, bound_ns)
