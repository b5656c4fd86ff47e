"""Pipeline and UntilFits: strategies run in order, all of them or until the window fits."""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ClearToolResults,
    ContextOverflowError,
    Message,
    PygentsError,
    StableWindow,
    ToolResultBlock,
    ToolUseBlock,
    count_tokens,
)
from pygents_ctx.context.strategies import ContextStrategy
from pygents_ctx.context.strategies.budget import FitTokens
from pygents_ctx.context.strategies.compose import (
    MODEL_CONTEXT_WINDOWS,
    Pipeline,
    UnknownModelError,
    UntilFits,
    model_context_window,
    register_model,
)
from pygents_ctx.context.strategies.window import SlidingWindow, TrimRounds

# Counting characters with no per-message overhead makes every size below easy to check.
EXACT: dict[str, Any] = {"counter": len, "per_message_overhead": 0}


def history(size: int) -> list[Message]:
    """The task (4 tokens with EXACT counting), then `size` messages of 10 tokens each."""
    return [Message("user", "task")] + [
        Message("assistant" if i % 2 else "user", f"message {i:02}") for i in range(size)
    ]


class Step:
    """A strategy that drops the `drop` oldest messages after the task, and logs its input."""

    def __init__(self, name: str, log: list[tuple[str, int]], drop: int = 1) -> None:
        self.name, self.log, self.drop = name, log, drop

    def __repr__(self) -> str:
        return f"Step({self.name!r})"

    async def compact(self, messages: list[Message]) -> list[Message]:
        self.log.append((self.name, len(messages)))
        if not self.drop:
            return messages
        return [messages[0], *messages[1 + self.drop :]]


@pytest.fixture
def log() -> list[tuple[str, int]]:
    return []


@pytest.fixture
def models() -> Iterator[dict[str, int]]:
    """The model table, restored after the test whatever it registered."""
    saved = dict(MODEL_CONTEXT_WINDOWS)
    yield MODEL_CONTEXT_WINDOWS
    MODEL_CONTEXT_WINDOWS.clear()
    MODEL_CONTEXT_WINDOWS.update(saved)


# ----------------------------------------------------------------------------- Pipeline


async def test_pipeline_runs_each_stage_on_the_previous_stage_output(
    log: list[tuple[str, int]],
) -> None:
    messages = history(10)
    pipeline = Pipeline([Step("a", log, drop=2), Step("b", log, drop=0), Step("c", log, drop=3)])

    window = await pipeline.compact(messages)

    assert log == [("a", 11), ("b", 9), ("c", 9)]
    assert window == [messages[0], *messages[6:]]
    assert len(messages) == 11


@pytest.mark.parametrize("stages", [0, 1, 3])
async def test_pipeline_that_changes_nothing_returns_its_input(
    log: list[tuple[str, int]], stages: int
) -> None:
    messages = history(4)
    pipeline = Pipeline([Step(str(i), log, drop=0) for i in range(stages)])

    assert await pipeline.compact(messages) is messages
    assert len(log) == stages


async def test_pipeline_composes_the_package_strategies() -> None:
    messages = history(10)
    pipeline = Pipeline([TrimRounds(3), SlidingWindow(5)])

    window = await pipeline.compact(messages)

    assert isinstance(pipeline, ContextStrategy)
    assert window == [messages[0], *messages[7:]]
    assert await Pipeline([TrimRounds(3), SlidingWindow(7)]).compact(window) is window


async def test_pipeline_keeps_the_stages_it_was_given(log: list[tuple[str, int]]) -> None:
    stages: list[Any] = [Step("a", log)]
    pipeline = Pipeline(stages)
    stages.append(Step("b", log))

    await pipeline.compact(history(4))

    assert [name for name, _ in log] == ["a"]
    assert pipeline.strategies == (stages[0],)


def test_pipeline_repr_lists_its_stages() -> None:
    assert repr(Pipeline([TrimRounds(2), SlidingWindow(10)])) == (
        "Pipeline([TrimRounds(2), SlidingWindow(max_messages=10)])"
    )


# ----------------------------------------------------------------------------- UntilFits


async def test_until_fits_returns_an_input_that_fits_without_running_anything(
    log: list[tuple[str, int]],
) -> None:
    messages = history(10)  # 104 tokens

    fit = UntilFits(104, [Step("a", log)], **EXACT)

    assert await fit.compact(messages) is messages
    assert log == []


async def test_until_fits_stops_at_the_first_output_that_fits(
    log: list[tuple[str, int]],
) -> None:
    messages = history(10)  # 104 tokens
    fit = UntilFits(75, [Step(name, log, drop=2) for name in "abc"], **EXACT)

    window = await fit.compact(messages)

    assert log == [("a", 11), ("b", 9)]
    assert window == [messages[0], *messages[5:]]  # 64 tokens


async def test_until_fits_goes_on_past_a_strategy_that_changed_nothing(
    log: list[tuple[str, int]],
) -> None:
    fit = UntilFits(90, [Step("a", log, drop=0), Step("b", log, drop=2)], **EXACT)

    window = await fit.compact(history(10))

    assert log == [("a", 11), ("b", 11)]
    assert len(window) == 9


async def test_until_fits_keeps_the_last_output_when_nothing_fits(
    log: list[tuple[str, int]],
) -> None:
    messages = history(10)
    fit = UntilFits(10, [Step("a", log), Step("b", log)], **EXACT)

    window = await fit.compact(messages)

    assert log == [("a", 11), ("b", 10)]
    assert window == [messages[0], *messages[3:]]


async def test_until_fits_raises_when_asked_and_nothing_fits(log: list[tuple[str, int]]) -> None:
    fit = UntilFits(10, [Step("a", log), Step("b", log)], on_overflow="raise", **EXACT)

    with pytest.raises(ContextOverflowError, match="after all 2 strategies") as caught:
        await fit.compact(history(10))

    assert (caught.value.tokens, caught.value.budget) == (84, 10)


async def test_until_fits_without_strategies_checks_the_budget() -> None:
    messages = history(10)

    assert await UntilFits(104, [], **EXACT).compact(messages) is messages
    assert await UntilFits(50, [], **EXACT).compact(messages) is messages
    with pytest.raises(ContextOverflowError) as caught:
        await UntilFits(50, [], on_overflow="raise", **EXACT).compact(messages)
    assert (caught.value.tokens, caught.value.budget) == (104, 50)


async def test_until_fits_measures_with_its_default_counter(log: list[tuple[str, int]]) -> None:
    messages = history(10)
    tokens = count_tokens(messages)  # the heuristic counter, 4 tokens of overhead a message

    assert await UntilFits(tokens, [Step("a", log)]).compact(messages) is messages
    assert await UntilFits(tokens - 1, [Step("a", log)]).compact(messages) is not messages


async def test_until_fits_runs_budgeted_strategies_until_one_is_enough() -> None:
    messages = history(30)  # 304 tokens
    fit = UntilFits(200, [TrimRounds(12), FitTokens(100, **EXACT)], **EXACT)

    window = await fit.compact(messages)

    assert count_tokens(window, len, per_message_overhead=0) <= 100
    assert window == [messages[0], *messages[-8:]]  # FitTokens ran: TrimRounds was not enough


async def test_until_fits_measures_a_long_history_only_as_far_as_the_budget() -> None:
    counted: list[str] = []

    def counter(text: str) -> int:
        counted.append(text)
        return len(text)

    messages = history(1000)
    budgeted = {"counter": counter, "per_message_overhead": 0}
    fit = UntilFits(100, [FitTokens(100, **budgeted)], **budgeted)

    window = await fit.compact(messages)

    assert window == [messages[0], *messages[-8:]]
    assert len(counted) < 30  # newest first until over, then the window: not 1,001 messages


def test_until_fits_repr_shows_budget_and_strategies() -> None:
    assert repr(UntilFits(100, [TrimRounds(3)])) == "UntilFits(100, [TrimRounds(3)])"
    assert repr(UntilFits(100, [], on_overflow="raise")) == (
        "UntilFits(100, [], on_overflow='raise')"
    )


# ----------------------------------------------------------------------------- for_model


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4-0125-preview", 128_000),
        ("gpt-4.1-mini-2025-04-14", 1_047_576),
        ("gpt-5-mini", 272_000),
        ("gpt-5-chat-latest", 128_000),
        ("o1-2024-12-17", 200_000),
        ("o1-mini-2024-09-12", 128_000),
        ("o3-mini", 200_000),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("claude-3-5-sonnet@20240620", 200_000),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("claude-opus-4-1", 200_000),
        ("gemini-1.5-pro-002", 2_097_152),
        ("gemini-2.5-flash-lite", 1_048_576),
        ("openai/gpt-4o", 128_000),
        ("models/gemini-2.0-flash", 1_048_576),
    ],
)
def test_model_windows_resolve_dated_and_variant_names_to_their_family(
    name: str, window: int
) -> None:
    assert model_context_window(name) == window


@pytest.mark.parametrize("name", ["llama-3-70b", "gpt", "gpt-4x", "gpt-4.7", "o2", ""])
def test_unknown_model_error_says_how_to_register_it(name: str) -> None:
    with pytest.raises(UnknownModelError) as caught:
        model_context_window(name)

    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, PygentsError)
    assert str(caught.value) == (
        f"no context window is known for model {name!r}; register it with "
        f"register_model({name!r}, <tokens>), or give UntilFits a max_tokens"
    )


def test_model_name_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="model name must be a str"):
        model_context_window(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "ratio", "max_tokens"),
    [
        ("gpt-4o", 0.8, 102_400),
        ("gpt-4-0613", 0.8, 6_553),
        ("claude-3-7-sonnet-latest", 0.5, 100_000),
        ("gemini-2.5-pro", 1, 1_048_576),
    ],
)
def test_for_model_budgets_a_share_of_the_model_window(
    name: str, ratio: float, max_tokens: int
) -> None:
    fit = UntilFits.for_model(name, [TrimRounds(3)], ratio)

    assert fit.max_tokens == max_tokens
    assert repr(fit) == f"UntilFits({max_tokens}, [TrimRounds(3)])"


def test_for_model_defaults_to_80_percent() -> None:
    assert UntilFits.for_model("claude-opus-4", []).max_tokens == 160_000


async def test_for_model_passes_the_counting_options_on() -> None:
    fit = UntilFits.for_model(
        "gpt-4", [], 0.001, counter=len, per_message_overhead=0, on_overflow="raise"
    )

    assert fit.max_tokens == 8
    with pytest.raises(ContextOverflowError) as caught:
        await fit.compact([Message("user", "123456789")])
    assert (caught.value.tokens, caught.value.budget) == (9, 8)


def test_registered_model_resolves_with_its_variants(models: dict[str, int]) -> None:
    register_model("acme-chat", 32_000)

    assert models["acme-chat"] == 32_000
    assert model_context_window("acme-chat-2025-01-01") == 32_000
    assert model_context_window("acme-chat:latest") == 32_000
    assert UntilFits.for_model("acme-chat-mini", []).max_tokens == 25_600


def test_registering_a_variant_overrides_its_family(models: dict[str, int]) -> None:
    register_model("gpt-4o-mini", 64_000)

    assert model_context_window("gpt-4o-mini-2024-07-18") == 64_000
    assert model_context_window("gpt-4o-2024-08-06") == 128_000


def test_register_model_replaces_a_window(models: dict[str, int]) -> None:
    register_model("gpt-4o", 100_000)

    assert model_context_window("gpt-4o") == 100_000


@pytest.mark.parametrize(
    ("name", "window", "message"),
    [
        ("", 1000, "register_model name must be a non-empty model name"),
        ("   ", 1000, "register_model name must be a non-empty model name"),
        (5, 1000, "register_model name must be a non-empty model name"),
        ("acme", 0, "context_window must be at least 1, not 0"),
        ("acme", -10, "context_window must be at least 1, not -10"),
        ("acme", 1.5, "context_window must be an int, not float"),
        ("acme", True, "context_window must be an int, not bool"),
    ],
)
def test_register_model_rejects_bad_entries(
    models: dict[str, int], name: Any, window: Any, message: str
) -> None:
    before = dict(models)

    with pytest.raises((TypeError, ValueError), match=message):
        register_model(name, window)

    assert models == before


@pytest.mark.parametrize("ratio", [0, -0.5, 1.01, math.nan, True, "0.8", None])
def test_for_model_rejects_a_ratio_outside_0_to_1(ratio: Any) -> None:
    is_number = isinstance(ratio, int | float) and not isinstance(ratio, bool)
    error = ValueError if is_number else TypeError
    with pytest.raises(error, match="ratio must be a number"):
        UntilFits.for_model("gpt-4o", [], ratio)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "build",
    [
        lambda strategies: Pipeline(strategies),
        lambda strategies: UntilFits(100, strategies),
    ],
    ids=["Pipeline", "UntilFits"],
)
@pytest.mark.parametrize(
    ("strategies", "message"),
    [
        (TrimRounds(2), r"wrap the one strategy in a list: \w+\(\[TrimRounds\(2\)\]\)"),
        (5, "takes a list of strategies, not int"),
        ("abc", "takes a list of strategies, not str"),
        ([TrimRounds(2), "TrimRounds(2)"], r"strategies\[1\] must have an async compact"),
        ([None], r"strategies\[0\] must have an async compact"),
        ([TrimRounds], r"strategies\[0\] must be a strategy instance, not the class TrimRounds"),
    ],
)
def test_composition_rejects_what_is_not_a_list_of_strategies(
    build: Any, strategies: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        build(strategies)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_tokens": 0}, ValueError, "UntilFits max_tokens must be at least 1, not 0"),
        ({"max_tokens": "100"}, TypeError, "UntilFits max_tokens must be an int, not str"),
        ({"max_tokens": 100, "on_overflow": "drop"}, ValueError, "'keep' or 'raise'"),
        ({"max_tokens": 100, "counter": 4}, TypeError, "counter must be a callable"),
        ({"max_tokens": 100, "tokens_per_media": -1}, ValueError, "tokens_per_media"),
    ],
)
def test_until_fits_rejects_bad_parameters(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        UntilFits(strategies=[], **kwargs)


# -- a pipeline that builds windows ------------------------------------------------------


def _tool_step(n: int, size: int) -> list[Message]:
    call = Message("assistant", [ToolUseBlock(f"c{n}", "search", {"q": str(n)})])
    return [call, Message("user", [ToolResultBlock(f"c{n}", "x" * size)])]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=60),
    keep=st.integers(1, 6),
    budget=st.integers(600, 4_000),
)
async def test_a_pipelines_stable_prefix_is_what_it_shares_with_its_last_window(
    sizes: list[int], keep: int, budget: int
) -> None:
    exact: dict[str, Any] = {"counter": len, "per_message_overhead": 0}
    pipeline = Pipeline([StableWindow(budget, **exact), ClearToolResults(keep_recent=keep)])
    alone = StableWindow(budget, **exact)
    history = [Message("system", "Be brief."), Message("user", "the task")]
    last: list[Message] = []
    for n, size in enumerate(sizes):
        history += _tool_step(n, size)
        window = await pipeline.build(history)
        plain = await alone.build(history)
        assert window.messages == await ClearToolResults(keep_recent=keep).compact(plain.messages)
        assert window.messages[: window.stable_prefix] == last[: window.stable_prefix]
        assert window.stable_prefix <= plain.stable_prefix
        shared = 0
        while shared < min(len(last), len(window.messages)) and (
            last[shared] == window.messages[shared]
        ):
            shared += 1
        assert window.stable_prefix == min(shared, plain.stable_prefix)
        assert window.tokens == count_tokens(window.messages, **exact)
        last = window.messages


async def test_a_cleared_result_ends_the_stable_prefix_just_before_it() -> None:
    pipeline = Pipeline([StableWindow(100_000), ClearToolResults(keep_recent=2)])
    history = [Message("system", "Be brief."), Message("user", "the task")]
    for n in range(3):
        history += _tool_step(n, 50)
        await pipeline.build(history)
    history += _tool_step(3, 50)  # the result of c1 is now the third newest: cleared

    window = await pipeline.build(history)

    assert window.stable_prefix == 5  # head (2), c0's round (2), c1's call: up to c1's result
    assert not window.repinned


def test_build_needs_a_window_builder_first() -> None:
    pipeline = Pipeline([ClearToolResults(), StableWindow()])

    assert not pipeline.builds_windows
    with pytest.raises(TypeError, match="StableWindow or a PinnedWindow as the first stage"):
        asyncio.run(pipeline.build([Message("user", "hi")]))


async def test_a_copied_pipeline_builds_its_own_windows() -> None:
    pipeline = Pipeline([StableWindow(100_000), ClearToolResults(keep_recent=2)])
    history = [Message("system", "Be brief."), Message("user", "the task"), *_tool_step(0, 9)]
    await pipeline.build(history)
    branch = copy.copy(pipeline)

    first = await branch.build(history)

    assert branch.strategies[0] is not pipeline.strategies[0]
    assert first.repinned  # nothing built before, in the branch
    assert first.stable_prefix == 0


# -- building over what was built before ---------------------------------------------------


class _Counting:
    """A user's strategy with only `compact`: keeps the newest `keep` messages after the task."""

    def __init__(self, keep: int) -> None:
        self.keep = keep

    async def compact(self, messages: list[Message]) -> list[Message]:
        if len(messages) <= self.keep + 1:
            return messages
        return [messages[0], *messages[-self.keep :]]


@pytest.mark.parametrize(
    "make",
    [
        lambda clear: Pipeline([clear, FitTokens(300, **EXACT)]),
        lambda clear: UntilFits(300, [clear, FitTokens(300, **EXACT)], **EXACT),
        lambda clear: Pipeline([_Counting(9), clear, _Counting(7)]),
    ],
)
async def test_one_editor_shared_by_two_compositions_builds_each_ones_window(make: Any) -> None:
    """Each composition passes its stages what it knows of their input; a stage another
    caller called since must not trust it, so sharing an instance stays correct."""
    shared = ClearToolResults(keep_recent=2)
    first, second = make(shared), make(shared)
    common = [Message("user", "the task")]
    for n in range(6):
        common += _tool_step(n, 30 + n)
    one, two = list(common), list(common)  # one start, then each its own way
    steps: dict[int, Any] = {}
    for n in range(12):
        one += _tool_step(10 + n, 40)
        two += _tool_step(100 + n, 25 + n)
        for composition, history in ((first, one), (second, two)):
            # Each composition vouches for the history it saw last: all but the new step.
            step = await composition.compact_since(
                list(history), steps.get(id(composition)), len(history) - 2
            )
            steps[id(composition)] = step
            expected = await make(ClearToolResults(keep_recent=2)).compact(list(history))
            assert step.messages == expected


async def test_a_step_says_what_stayed_and_what_it_counted() -> None:
    pipeline = Pipeline([ClearToolResults(keep_recent=2), FitTokens(400, **EXACT)])
    history = [Message("user", "the task")]
    step = None
    for n in range(20):
        history += _tool_step(n, 60)
        earlier = [] if step is None else list(step.messages)
        step = await pipeline.compact_since(list(history), step, len(history) - 2)
        assert step.tokens == count_tokens(step.messages, **EXACT) <= 400
        assert step.messages[: step.unchanged] == earlier[: step.unchanged]
        assert step.messages == await Pipeline(
            [ClearToolResults(keep_recent=2), FitTokens(400, **EXACT)]
        ).compact(history)


async def test_a_stage_another_caller_called_since_says_nothing_stayed() -> None:
    """A second pipeline sharing the editor calls it between two calls of the first: the
    editor reuses what it built from the other's history, but must not tell the stage
    after it that its window is unchanged since this pipeline's last call."""
    shared = ClearToolResults(keep_recent=2)
    first = Pipeline([shared, FitTokens(240, **EXACT)])
    second = Pipeline([shared, FitTokens(240, **EXACT)])
    common = [Message("user", "the task"), *_tool_step(0, 30)]
    own = [*common, *[m for n in range(100_000, 100_008) for m in _tool_step(n, 15)]]
    other = [*common, *[m for n in range(20, 28) for m in _tool_step(n, 70)]]

    step = await second.compact_since(own, None, 0)
    await first.compact_since(other, None, 0)
    grown = [*other, *_tool_step(40, 50)]
    step = await second.compact_since(grown, step, len(common))

    expected = await Pipeline([ClearToolResults(keep_recent=2), FitTokens(240, **EXACT)]).compact(
        grown
    )
    assert step.messages == expected


class _Slow:
    """A user's stage that awaits (as a summarizer would) and changes nothing."""

    async def compact(self, messages: list[Message]) -> list[Message]:
        await asyncio.sleep(0)
        return messages


async def test_calls_made_while_another_awaits_build_each_ones_window() -> None:
    pipeline = Pipeline([ClearToolResults(keep_recent=2), _Slow(), FitTokens(240, **EXACT)])
    fresh = Pipeline([ClearToolResults(keep_recent=2), FitTokens(240, **EXACT)])
    one = [Message("user", "the task"), *_tool_step(0, 30)]
    two = list(one)
    for n in range(10):
        one += _tool_step(10 + n, 40 + n)
        two += _tool_step(100 + n, 90 - n)
        windows = await asyncio.gather(pipeline.compact(list(one)), pipeline.compact(list(two)))
        assert windows == [await fresh.compact(one), await fresh.compact(two)]
