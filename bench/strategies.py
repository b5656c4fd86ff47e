"""Context strategies before every model call, and over a huge history.

A synthetic agent run of `steps` steps: each step is an assistant tool call and
a user message with its ~2 KB result; every 25th step a user follow-up and the
assistant's answer come first. A strategy runs before every step on the whole
history so far, as an agent loop would, with one instance for the whole run:

- `FitTokens(8000)`;
- `Pipeline([ClearToolResults(), FitTokens(8000)])`.

Reported per strategy: the cost of one call around step `steps // 10` and
around step `steps` (the mean of the ten calls up to it; flat means the cost
does not grow with the history), and the whole run. The floor is what any
window builder does at least: slice the history to the window size ours
returned at that step (`[*head, *history[-k:]]`), in an `async def` called
the same way. Message objects are new for every repeat, so each run counts
each message once, as a real one would.

Then one pass of each strategy over a `size`-message history (token counts
already cached, as they are for a history that grew message by message; the
strategy instance is new, so nothing else is remembered). The floor slices to
the same window size for strategies that select whole rounds, and for those
that must look at every message, a comprehension that reads each message's
first block.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable

from bench.harness import REPEATS, Result, compare
from pygents_ctx import (
    ClearToolInputs,
    ClearToolResults,
    ContextStrategy,
    DropToolRounds,
    FitTokens,
    Message,
    MiddleOut,
    PinnedWindow,
    Pipeline,
    SlidingWindow,
    Summarize,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TrimRounds,
    Truncate,
    TruncateToolResults,
    UntilFits,
    count_message_tokens,
)
from pygents_ctx.testing import ScriptedSummarizer

BUDGET = 8_000
FOLLOW_UP_EVERY = 25
WINDOW = 10  # calls averaged for "per call at step n"
OUTPUT = "".join(f"line {i:03d}: ok, 14 passed, 0 failed in 0.42s\n" for i in range(44))  # ~2 KB

Compact = Callable[[list[Message]], Awaitable[list[Message]]]


def _head() -> list[Message]:
    return [
        Message("system", "You are a coding agent. Use the tools; be brief."),
        Message("user", "The test suite fails on main. Find out why and fix it."),
    ]


def _step(i: int) -> list[Message]:
    """One step of the run: maybe a follow-up and its answer, then a call and its result."""
    messages = []
    if i and i % FOLLOW_UP_EVERY == 0:
        messages += [
            Message("user", f"Step {i}: how far along are you?"),
            Message("assistant", f"About {i} files checked; continuing with the next one."),
        ]
    call_id = f"call-{i:05d}"
    messages += [
        Message(
            "assistant",
            [
                TextBlock(f"Running the tests of module {i}."),
                ToolUseBlock(call_id, "run_tests", {"module": f"pkg/module_{i:05d}.py"}),
            ],
        ),
        Message("user", [ToolResultBlock(call_id, f"module {i}\n{OUTPUT}")]),
    ]
    return messages


def _run_messages(steps: int) -> list[list[Message]]:
    return [_step(i) for i in range(steps)]


async def _timed_run(
    compact: Compact, head: list[Message], planned: list[list[Message]], marks: tuple[int, ...]
) -> tuple[int, dict[int, float], list[int]]:
    """Grow the history step by step, calling `compact` before each step.

    Returns the total ns spent in `compact`, the mean ns per call over the
    `WINDOW` calls up to each mark, and the window size returned at each step.
    """
    history = list(head)
    total, sizes, per_call = 0, [], {}
    spans: list[int] = []
    clock = time.perf_counter_ns
    for step in planned:
        history += step
        start = clock()
        window = await compact(history)
        spent = clock() - start
        total += spent
        spans.append(spent)
        sizes.append(len(window))
    for mark in marks:
        per_call[mark] = statistics.fmean(spans[mark - WINDOW : mark])
    return total, per_call, sizes


async def _sliced_run(
    head: list[Message], planned: list[list[Message]], sizes: list[int], marks: tuple[int, ...]
) -> tuple[int, dict[int, float]]:
    """The floor: the same growth, slicing to the window size ours returned at each step."""
    keep = len(head)
    history = list(head)
    total, spans = 0, []
    clock = time.perf_counter_ns

    async def window(messages: list[Message], size: int) -> list[Message]:
        return [*messages[:keep], *messages[len(messages) - size + keep :]]

    for step, size in zip(planned, sizes, strict=True):
        history += step
        start = clock()
        await window(history, size)
        spent = clock() - start
        total += spent
        spans.append(spent)
    return total, {mark: statistics.fmean(spans[mark - WINDOW : mark]) for mark in marks}


async def agent_run(name: str, make: Callable[[], ContextStrategy], steps: int) -> list[Result]:
    """Per-call cost early and late in a `steps`-step run, and the whole run, for one strategy."""
    marks = (steps // 10, steps)
    ours_total, floor_total = [], []
    ours_marks: dict[int, list[float]] = {mark: [] for mark in marks}
    floor_marks: dict[int, list[float]] = {mark: [] for mark in marks}
    for _ in range(REPEATS):
        head, planned = _head(), _run_messages(steps)
        gc.collect()
        gc.disable()
        try:
            total, per_call, sizes = await _timed_run(make().compact, head, planned, marks)
            floor, floor_per_call = await _sliced_run(head, planned, sizes, marks)
        finally:
            gc.enable()
        if sizes[-1] >= len(head) + sum(map(len, planned)):  # it must have had work to do
            raise AssertionError(f"{name} kept the whole {steps:,}-step history")
        ours_total.append(total)
        floor_total.append(floor)
        for mark in marks:
            ours_marks[mark].append(per_call[mark])
            floor_marks[mark].append(floor_per_call[mark])
    results = [
        Result(
            f"{name}: call at step {mark:,}",
            statistics.median(ours_marks[mark]),
            statistics.median(floor_marks[mark]),
            None,
        )
        for mark in marks
    ]
    results.append(
        Result(
            f"{name}: {steps:,}-step run",
            statistics.median(ours_total),
            statistics.median(floor_total),
            None,
        )
    )
    return results


# ----------------------------------------------------------------------------- one huge history


def _history(size: int) -> list[Message]:
    messages = _head()
    step = 0
    while len(messages) < size:
        messages += _step(step)
        step += 1
    del messages[size:]
    if messages[-1].tool_uses:  # end on a whole step
        messages.pop()
    for message in messages:
        count_message_tokens(message)
    return messages


async def _summary(messages: list[Message], previous: str | None) -> str:
    return f"{len(messages)} messages: tests were run module by module."


def _passes() -> list[tuple[str, Callable[[], ContextStrategy], bool]]:
    """(name, new instance, selects): every strategy, in a typical setting.

    A strategy that selects whole rounds looks only at what it keeps; its floor
    slices to the same window size. The others must read every message.
    """
    return [
        ("SlidingWindow(100)", lambda: SlidingWindow(100), True),
        ("TrimRounds(10)", lambda: TrimRounds(10), True),
        ("Truncate(200 messages)", lambda: Truncate(max_messages=200), True),
        ("FitTokens(8000)", lambda: FitTokens(BUDGET), True),
        ("MiddleOut(8000)", lambda: MiddleOut(BUDGET), True),
        ("TruncateToolResults(500)", lambda: TruncateToolResults(500), False),
        ("ClearToolResults()", lambda: ClearToolResults(), False),
        ("ClearToolInputs()", lambda: ClearToolInputs(), False),
        ("DropToolRounds()", lambda: DropToolRounds(), False),
        (
            "Summarize(8000 recent)",
            lambda: Summarize(ScriptedSummarizer(_summary), keep_recent_tokens=BUDGET),
            False,
        ),
        ("Pipeline(clear, fit)", lambda: Pipeline([ClearToolResults(), FitTokens(BUDGET)]), False),
        (
            "UntilFits(clip, fit)",
            lambda: UntilFits(BUDGET, [TruncateToolResults(500), FitTokens(BUDGET)]),
            False,
        ),
        ("PinnedWindow(fit)", lambda: PinnedWindow(FitTokens(BUDGET), 2 * BUDGET), True),
    ]


async def one_pass(size: int) -> list[Result]:
    """One call of each strategy on a `size`-message history, against its floor."""
    messages = _history(size)
    return [await _pass(name, make, selects, messages) for name, make, selects in _passes()]


async def _pass(
    name: str, make: Callable[[], ContextStrategy], selects: bool, messages: list[Message]
) -> Result:
    kept = len(await make().compact(messages))
    strategy: list[ContextStrategy] = []

    async def prepare(n: int) -> None:
        strategy[:] = [make()]  # a new instance: nothing remembered from a previous call

    async def ours(n: int) -> None:
        await strategy[0].compact(messages)

    async def sliced(n: int) -> None:
        [*messages[:2], *messages[len(messages) - kept + 2 :]]

    async def scanned(n: int) -> None:
        [message for message in messages if message.content[0].type]

    floor = sliced if selects else scanned
    return await compare(f"{name}, {len(messages):,} msgs", ours, floor, 1, None, prepare)


async def strategies(steps: int = 3_000, size: int = 100_000) -> list[Result]:
    """The agent run for two strategies, then one pass of each over `size` messages.

    "Clear+FitTokens" is `Pipeline([ClearToolResults(), FitTokens(8000)])`. In
    the one-pass names, clear = `ClearToolResults()`, clip =
    `TruncateToolResults(500)`, fit = `FitTokens(8000)`.
    """
    results = await agent_run("FitTokens", lambda: FitTokens(BUDGET), steps)
    results += await agent_run(
        "Clear+FitTokens", lambda: Pipeline([ClearToolResults(), FitTokens(BUDGET)]), steps
    )
    results += await one_pass(size)
    return results
