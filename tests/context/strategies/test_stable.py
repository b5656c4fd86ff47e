"""StableWindow: append-only between compactions, whole rounds shed in one step, pairs kept,
and the same window from the history alone (resumed, replayed, reloaded)."""

from __future__ import annotations

import asyncio
import copy
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ContextConfig,
    ContextOverflowError,
    MemoryContextStore,
    Message,
    SQLiteContextStore,
    StableWindow,
    ToolResultBlock,
    ToolUseBlock,
    connect,
    count_tokens,
    to_dict,
)
from pygents_ctx.context.strategies._rounds import unpaired_call_ids

# Characters are tokens and messages have no overhead: sizes are easy to read.
EXACT: dict[str, Any] = {"counter": len, "per_message_overhead": 0}


def call(*ids: str) -> Message:
    return Message("assistant", [ToolUseBlock(i, "search", {"q": i}) for i in ids])


def results(*ids: str) -> Message:
    return Message("user", [ToolResultBlock(i, f"result {i}") for i in ids])


def step(n: int) -> list[Message]:
    """A tool round: a call and its result (36 tokens with EXACT), now and then a question first."""
    messages = [Message("user", f"question {n:03}")] if n % 4 == 0 else []
    return [*messages, call(f"c{n:03}"), results(f"c{n:03}")]


def head() -> list[Message]:
    return [Message("system", "Be brief."), Message("user", "the task")]


def run(steps: int) -> list[Message]:
    history = head()
    for n in range(steps):
        history += step(n)
    return history


def dumps(messages: list[Message]) -> bytes:
    return orjson.dumps([to_dict(message) for message in messages])


def size(messages: list[Message]) -> int:
    return count_tokens(messages, len, per_message_overhead=0)


def build(builder: StableWindow, history: list[Message]) -> Any:
    return asyncio.run(builder.build(history))


# -- append-only, compacting in one bounded step ---------------------------------


def test_each_window_starts_with_the_previous_one_until_a_compaction() -> None:
    builder = StableWindow(600, 0.5, **EXACT)
    history, previous, compactions = head(), None, 0
    for n in range(60):
        history = history + step(n)
        window = build(builder, history)
        assert window.tokens == size(window.messages) <= 600
        assert window.messages[:2] == head()  # the system prompt and the task always stay
        if previous is None:  # the first window: read from the start
            assert window.repinned
            assert window.stable_prefix == 2
        elif window.repinned:
            compactions += 1
            # Down to low_water * max_tokens in one step, at the message that crossed
            # max_tokens; the step's later messages follow.
            assert window.tokens <= 300 + size(step(n))
            assert previous.tokens + size(step(n)) > 600
            assert window.stable_prefix == 2
        else:
            shared = len(previous.messages)
            assert all(a is b for a, b in zip(window.messages, previous.messages, strict=False))
            assert window.messages[shared:] == history[len(history) - len(step(n)) :]
            assert window.stable_prefix == shared
        previous = window
    # The first at 600 tokens, then one per about 300 tokens of new messages: not one per step.
    assert compactions == builder.compactions
    assert abs(compactions - (1 + (size(history) - 600) / 300)) <= 1


def test_a_compaction_drops_whole_rounds_from_the_front() -> None:
    history = run(40)
    window = build(StableWindow(600, 0.5, **EXACT), history)

    kept = window.messages[2:]
    assert kept == history[window.pin :]  # a suffix of the history, nothing edited
    first, before = kept[0], history[window.pin - 1]
    # A round starts with a question, or with a call that answers no question.
    assert not first.tool_results
    assert first.role == "user" or before.tool_results
    assert not unpaired_call_ids(window.messages)


def test_all_of_a_history_within_budget_is_the_history_itself() -> None:
    history = run(5)
    builder = StableWindow(10_000, **EXACT)

    assert asyncio.run(builder.compact(history)) is history
    assert build(builder, history).repinned is False  # nothing new: the same window


def test_the_newest_round_stays_whole_even_over_the_budget() -> None:
    huge = Message("user", [ToolResultBlock("big", "x" * 900)])
    history = [*run(8), call("big"), huge]

    kept = build(StableWindow(600, 0.5, **EXACT), history)
    assert kept.messages == [*head(), history[-3], call("big"), huge][:2] + history[-2:]
    with pytest.raises(ContextOverflowError) as caught:
        build(StableWindow(600, 0.5, on_overflow="raise", **EXACT), history)
    assert (caught.value.tokens, caught.value.budget) == (kept.tokens, 600)


# -- pairs --------------------------------------------------------------------------


def test_a_cut_never_separates_parallel_calls_from_their_late_results() -> None:
    history = [*head(), Message("user", "go"), call("a", "b")]
    for n in range(12):  # the results of a and b come rounds later
        history += [Message("user", f"also {n:02} " + "y" * 40), Message("assistant", "ok")]
    history.append(results("b", "a"))
    builder = StableWindow(400, 0.5, **EXACT)

    for stop in range(3, len(history) + 1):
        window = build(builder, history[:stop])
        ids = {b.id for m in window.messages for b in m.content if type(b) is ToolUseBlock}
        answers = {
            b.tool_use_id for m in window.messages for b in m.content if type(b) is ToolResultBlock
        }
        assert answers <= ids, "a result without its call"


def test_a_result_whose_call_was_dropped_is_left_out_of_its_message() -> None:
    # The call is cut while it waits (a question opens a newer round); its result
    # arrives after the cut, beside a result whose call is still in the window.
    history = [*head(), call("old"), Message("user", "q " + "z" * 300), call("new")]
    history.append(Message("user", [*results("old").content, *results("new").content]))
    builder = StableWindow(300, 0.5, **EXACT)

    window = build(builder, history)
    assert window.messages[-1] == results("new")
    assert not unpaired_call_ids(window.messages)


# -- the same window from the history alone ------------------------------------------


async def test_a_reloaded_history_rebuilds_the_window_byte_for_byte(tmp_path: Path) -> None:
    history, sent = run(90), []
    builder = StableWindow(900, 0.5, **EXACT)
    async with connect(tmp_path / "run.db") as conn:
        store = SQLiteContextStore(conn, session_id="run")
        stored = 0
        for stop in [*range(2, len(history), 3), len(history)]:  # a call every few messages
            await store.append_many(history[stored:stop])
            stored = stop
            sent.append((await builder.build(await store.get_history())).messages)
    assert builder.compactions >= 3
    async with connect(tmp_path / "run.db") as conn:
        loaded = await SQLiteContextStore(conn, session_id="run").get_history()

    resumed = await StableWindow(900, 0.5, **EXACT).build(loaded)  # a new process
    assert dumps(resumed.messages) == dumps(sent[-1])
    # Built once at the end, at every message, or every few: the same window.
    every = StableWindow(900, 0.5, **EXACT)
    for stop in range(1, len(history) + 1):
        at_each = await every.build(history[:stop])
    assert dumps(at_each.messages) == dumps(sent[-1])


def test_a_rewritten_history_is_read_again() -> None:
    builder = StableWindow(600, 0.5, **EXACT)
    history = run(30)
    build(builder, history)
    shorter = [*head(), *history[-6:]]  # e.g. a store's compaction replaced the middle

    assert dumps(build(builder, shorter).messages) == dumps(
        build(StableWindow(600, 0.5, **EXACT), shorter).messages
    )
    builder.reset()
    assert builder.compactions == 0


def test_a_branch_gets_its_own_builder_with_the_same_settings() -> None:
    config = ContextConfig(MemoryContextStore(), StableWindow(5_000, 0.25))
    build(config.strategy, run(3))  # type: ignore[arg-type]

    child = config.branch().strategy
    assert isinstance(child, StableWindow)
    assert child is not config.strategy
    assert repr(child) == repr(config.strategy) == "StableWindow(max_tokens=5000, low_water=0.25)"
    assert copy.copy(child).compactions == 0


def test_one_builder_shared_by_threads_gives_each_history_its_own_window() -> None:
    # The viewer serves requests in threads, each with the spec's one strategy.
    builder = StableWindow(600, 0.5, **EXACT)
    histories = [run(steps) for steps in (20, 35, 50, 65)] * 5

    with ThreadPoolExecutor(4) as pool:
        windows = list(pool.map(lambda history: build(builder, history), histories))

    for history, window in zip(histories, windows, strict=True):
        alone = build(StableWindow(600, 0.5, **EXACT), history)
        assert dumps(window.messages) == dumps(alone.messages)


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_tokens": 0}, "StableWindow max_tokens must be at least 1, not 0"),
        ({"max_tokens": 1.5}, "StableWindow max_tokens must be an int, not float 1.5"),
        ({"low_water": 1}, "StableWindow low_water must be a number above 0 and below 1"),
        ({"low_water": 0.0}, "StableWindow low_water must be a number above 0 and below 1"),
        ({"low_water": True}, "StableWindow low_water must be a number, not bool True"),
        ({"on_overflow": "drop"}, "StableWindow on_overflow must be 'keep' or 'raise'"),
        ({"per_message_overhead": -1}, "per_message_overhead must be at least 0, not -1"),
    ],
)
def test_bad_settings_are_refused_with_the_field_named(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(
        (TypeError, ValueError), match=error.replace("(", r"\(").replace(")", r"\)")
    ):
        StableWindow(**kwargs)


def test_a_counter_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="counter must be a callable str -> int"):
        StableWindow(counter=4)  # type: ignore[arg-type]


# -- any history: late, early, duplicated and unknown results ---------------------------

IDS = ["a", "b", "c", "d", "e"]
any_message = st.one_of(
    st.builds(lambda n: Message("user", "q" * n), st.integers(1, 120)),
    st.builds(lambda n: Message("assistant", "r" * n), st.integers(1, 120)),
    st.builds(
        lambda ids: call(*ids), st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True)
    ),
    st.builds(
        lambda ids, n: Message("user", [ToolResultBlock(i, "x" * n) for i in ids]),
        st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True),
        st.integers(1, 200),
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    messages=st.lists(any_message, max_size=40),
    max_tokens=st.integers(1, 600),
    low_water=st.sampled_from([0.2, 0.5, 0.8]),
    calls_at=st.sets(st.integers(0, 40), max_size=10),
)
def test_for_any_history_no_result_is_left_without_its_call_and_rebuilds_agree(
    messages: list[Message], max_tokens: int, low_water: float, calls_at: set[int]
) -> None:
    history = [*head(), *messages]
    builder = StableWindow(max_tokens, low_water, **EXACT)
    for stop in sorted(calls_at | {len(history)}):  # the model is called now and then
        window = build(builder, history[: min(stop, len(history))])
        called: set[str] = set()
        for message in window.messages:
            for block in message.content:
                if type(block) is ToolResultBlock:
                    assert block.tool_use_id in called, "a result without its call before it"
                elif type(block) is ToolUseBlock:
                    called.add(block.id)
    fresh = build(StableWindow(max_tokens, low_water, **EXACT), history)
    assert dumps(fresh.messages) == dumps(window.messages)
    assert window.tokens == size(window.messages)
