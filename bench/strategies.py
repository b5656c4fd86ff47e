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

Last, a step late in a long run (`per_step`): every built-in strategy and the
documented compositions (those of `python -m bench context`) with a 64k
window, on a `size`-message history read once, then a step at a time through
`ContextConfig.window_of`, as a run builds it; a step may cost 1 ms.
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
    ContextConfig,
    ContextStrategy,
    DropToolRounds,
    FitTokens,
    MemoryContextStore,
    Message,
    MiddleOut,
    PinnedWindow,
    Pipeline,
    SlidingWindow,
    StableWindow,
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
STEP_BUDGET = 64_000  # the window of the per-step timings
STEP_LIMIT_NS = 1_000_000  # what a step may cost there: 1 ms
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
        ("StableWindow(8000)", lambda: StableWindow(BUDGET), False),
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


# ----------------------------------------------------------------------------- per step, late


def _per_step_strategies(budget: int) -> list[tuple[str, Callable[[], ContextStrategy]]]:
    """Every built-in strategy and the documented compositions (those of `python -m bench
    context`), with a `budget`-token window."""
    inner = budget * 6 // 10

    def summarized(window: int) -> Pipeline:
        summarize = Summarize(
            ScriptedSummarizer(_summary),
            keep_recent_tokens=budget // 4,
            min_old_tokens=budget * 3 // 4,
            max_tokens=window,
        )
        return Pipeline([summarize, ClearToolResults(5), FitTokens(window)])

    return [
        ("StableWindow(B)", lambda: StableWindow(budget)),
        (
            "StableWindow(B) + ClearToolResults(5)",
            lambda: Pipeline([StableWindow(budget), ClearToolResults(5)]),
        ),
        ("SlidingWindow(100)", lambda: SlidingWindow(100)),
        ("TrimRounds(20)", lambda: TrimRounds(20)),
        ("Truncate(max_chars=4B)", lambda: Truncate(max_chars=4 * budget)),
        ("FitTokens(B)", lambda: FitTokens(budget)),
        ("MiddleOut(B)", lambda: MiddleOut(budget)),
        (
            "ClearToolResults(5) + FitTokens(B)",
            lambda: Pipeline([ClearToolResults(5), FitTokens(budget)]),
        ),
        (
            "ClearToolInputs(5) + FitTokens(B)",
            lambda: Pipeline([ClearToolInputs(5), FitTokens(budget)]),
        ),
        (
            "TruncateToolResults(500) + FitTokens(B)",
            lambda: Pipeline([TruncateToolResults(500), FitTokens(budget)]),
        ),
        (
            "DropToolRounds(5) + FitTokens(B)",
            lambda: Pipeline([DropToolRounds(5), FitTokens(budget)]),
        ),
        (
            "UntilFits(B, [ClearToolResults(5), DropToolRounds(5), FitTokens(B)])",
            lambda: UntilFits(budget, [ClearToolResults(5), DropToolRounds(5), FitTokens(budget)]),
        ),
        ("PinnedWindow(FitTokens(0.6B), B)", lambda: PinnedWindow(FitTokens(inner), budget)),
        (
            "PinnedWindow(ClearToolResults(5) + FitTokens(0.6B), B)",
            lambda: PinnedWindow(Pipeline([ClearToolResults(5), FitTokens(inner)]), budget),
        ),
        ("Summarize + ClearToolResults(5) + FitTokens(B)", lambda: summarized(budget)),
        (
            "PinnedWindow(Summarize + ClearToolResults(5) + FitTokens(0.6B), B)",
            lambda: PinnedWindow(summarized(inner), budget),
        ),
        # Alone, an editor's window is the whole history: counting it follows the history.
        ("TruncateToolResults(500)", lambda: TruncateToolResults(500)),
        ("ClearToolResults(5)", lambda: ClearToolResults(5)),
        ("ClearToolInputs(5)", lambda: ClearToolInputs(5)),
        ("DropToolRounds(5)", lambda: DropToolRounds(5)),
        (
            "Summarize(B/2 recent, B)",
            lambda: Summarize(
                ScriptedSummarizer(_summary), keep_recent_tokens=budget // 2, max_tokens=budget
            ),
        ),
        (
            "UntilFits(B, [TruncateToolResults(500), FitTokens(B)])",
            lambda: UntilFits(budget, [TruncateToolResults(500), FitTokens(budget)]),
        ),
        # Selecting first, editing the window: what a step costs does not follow the history.
        (
            "FitTokens(B) + ClearToolResults(5)",
            lambda: Pipeline([FitTokens(budget), ClearToolResults(5)]),
        ),
    ]


async def per_step(
    size: int = 100_000, steps: int = 30, budgets: tuple[int, ...] = (STEP_BUDGET,)
) -> list[Result]:
    """The cost of one step late in a long run: `size` messages, a 64k window.

    One `ContextConfig` per strategy builds the window of the `size`-message
    history once (not timed: what a resumed session costs once), then `steps`
    agent steps come, each a new history list (as a store returns it) one step
    longer, and `window_of` builds the window before each, as a run does (its
    token count included). Reported: the median step, in this process's CPU
    time (steadier than wall time on a shared machine), against the 1 ms a step
    may cost (`STEP_LIMIT_NS`); the floor slices the history to the window the
    strategy returned.
    """
    results = []
    for budget in budgets:
        for name, make in _per_step_strategies(budget):
            history = _history(size)
            config = ContextConfig(MemoryContextStore(), make())
            await config.window_of(history)
            spans, floors = [], []
            gc.collect()
            gc.disable()
            try:
                for n in range(steps):
                    history = history + _step(size + n)
                    start = time.process_time_ns()
                    window = await config.window_of(history)
                    spans.append(time.process_time_ns() - start)
                    kept = len(window.messages)
                    start = time.process_time_ns()
                    [*history[:2], *history[len(history) - kept + 2 :]]
                    floors.append(time.process_time_ns() - start)
            finally:
                gc.enable()
            ours, floor = statistics.median(spans), max(1.0, statistics.median(floors))
            label = f"{name}, B={budget // 1000}k: step at {size:,} msgs"
            results.append(Result(label, ours, floor, None, bound_ns=STEP_LIMIT_NS))
    return results


async def strategies(steps: int = 3_000, size: int = 100_000) -> list[Result]:
    """The agent run for two strategies, one pass of each over `size` messages, then a step of
    each late in a `size`-message run with a 64k window.

    "Clear+FitTokens" is `Pipeline([ClearToolResults(), FitTokens(8000)])`. In
    the one-pass names, clear = `ClearToolResults()`, clip =
    `TruncateToolResults(500)`, fit = `FitTokens(8000)`.
    """
    results = await agent_run("FitTokens", lambda: FitTokens(BUDGET), steps)
    results += await agent_run(
        "Clear+FitTokens", lambda: Pipeline([ClearToolResults(), FitTokens(BUDGET)]), steps
    )
    results += await agent_run("StableWindow(8000)", lambda: StableWindow(BUDGET), steps)
    results += await one_pass(size)
    results += await per_step(size, budgets=(STEP_BUDGET, 16_000))
    return results
