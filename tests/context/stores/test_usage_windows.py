"""The window each model call was sent, kept with its usage record on every backend."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pygents_ctx import Agent, ContextConfig, Message, ModelLoop, Usage, UsageRecord
from pygents_ctx.context.strategies.budget import FitTokens
from pygents_ctx.context.strategies.summarize import summary_mark, summary_message
from pygents_ctx.context.usage import WindowRecord, history_indexes
from pygents_ctx.testing import ScriptedModel

from .conftest import MakeStore


def _chat(count: int) -> list[Message]:
    return [
        Message("user" if n % 2 == 0 else "assistant", f"message {n} " + "word " * 40)
        for n in range(count)
    ]


async def _ask(store: Any, strategy: Any, script: list[Any]) -> ScriptedModel:
    model = ScriptedModel(script)
    agent = Agent("helper", "Helps", [], context=ContextConfig(store, strategy), replace=True)
    await ModelLoop(agent, model, instructions="Be brief.").run("And now?")
    return model


async def test_the_loop_records_the_strategy_and_the_positions_it_sent(
    make_store: MakeStore,
) -> None:
    store = await make_store(*_chat(20))
    model = await _ask(store, FitTokens(400), ["Done."])

    (record,) = await store.get_usage()
    window = record.window
    assert window is not None
    assert window.strategy == "FitTokens(400)"
    history = await store.get_history()
    assert window.history == 21  # the 20 messages and the question; not yet the answer
    # The instructions are sent but sit at no history position.
    assert window.added == 1
    sent = [history[index] for index in window.indexes()]
    assert (Message("system", "Be brief."), *sent) == model.calls[0].messages
    # The budget left the middle out: the first message and a tail, as two runs.
    tail = 21 - (len(sent) - 1)
    assert window.positions == ((0, 1), (tail, 21))
    assert tail > 1
    assert record.estimated_input_tokens is not None


async def test_a_forks_positions_hold_for_its_sources_records_and_its_own(
    make_store: MakeStore,
) -> None:
    store = await make_store(*_chat(8))
    await _ask(store, FitTokens(300), ["Done."])
    fork = await store.fork()
    await _ask(fork, FitTokens(10_000), ["Again."])

    # Each call's record stays in the session that made it: the first in the source.
    (source_record,), (fork_record,) = await store.get_usage(), await fork.get_usage()
    fork_history = await fork.get_history()
    first, second = source_record.window, fork_record.window
    assert first is not None
    assert second is not None
    assert second.strategy == "FitTokens(10000)"
    assert second.history == 11  # the fork's own history: 9 shared messages, the answer, the ask
    assert second.indexes() == list(range(11))  # the whole history fits
    assert fork_history[: first.history] == (await store.get_history())[: first.history]


async def test_a_summary_marks_which_compaction_the_positions_count_from(
    make_store: MakeStore,
) -> None:
    store = await make_store(*_chat(6))
    await _ask(store, FitTokens(10_000), ["Done."])
    await store.replace_prefix(6, [summary_message("They talked.")])
    await _ask(store, FitTokens(10_000), ["Again."])

    before, after = (record.window for record in await store.get_usage())
    assert before is not None
    assert after is not None
    history = await store.get_history()
    assert before.summary is None
    assert after.summary == summary_mark(history) is not None
    assert [history[i] for i in after.indexes()] == history[: after.history]


async def test_records_without_a_window_still_round_trip(make_store: MakeStore) -> None:
    store = await make_store()
    plain = UsageRecord(Usage(10, 1), model="m")
    windowed = UsageRecord(
        Usage(20, 2), window=WindowRecord("SlidingWindow(max_messages=3)", 9, ((0, 1), (6, 9)))
    )
    await store.record_usage(plain)
    await store.record_usage(windowed)

    assert await store.get_usage() == [plain, windowed]
    snapshot = await store.snapshot()
    copy = await make_store(session_id="copy")
    await copy.restore(snapshot)
    assert await copy.get_usage() == [plain, windowed]


@given(
    st.integers(0, 60).flatmap(
        lambda size: st.tuples(
            st.just(size),
            st.lists(st.tuples(st.integers(0, max(size - 1, 0)), st.booleans()), max_size=size),
            st.integers(0, 3),
        )
    )
)
def test_positions_and_edits_come_back_as_chosen(case: tuple[int, list[Any], int]) -> None:
    size, picks, unstored = case
    notes = [Message("system", f"note {n}") for n in range(unstored)]  # the loop's instructions
    history = [Message("user", f"m{n}") for n in range(size)]
    chosen = sorted({index: edited for index, edited in picks if size}.items())
    window = notes + [
        Message("user", f"m{index}*") if edited else history[index] for index, edited in chosen
    ]
    record = WindowRecord.of("S()", notes + history, window, unstored=unstored)
    assert record.history == size
    kept = [index for index, edited in chosen if not edited]
    # An edited message is placed when it sits between placed ones with no gap to guess over.
    assert set(kept) <= set(record.indexes()) <= {index for index, _ in chosen}
    assert record.added == len(window) - len(record.indexes())
    assert WindowRecord.from_dict(record.to_dict()) == record
    assert len(record.positions) <= len(chosen)


@given(
    st.integers(0, 30).flatmap(
        lambda size: st.tuples(
            st.just(size),
            st.lists(st.one_of(st.none(), st.integers(0, max(size - 1, 0))), max_size=40),
        )
    )
)
def test_any_window_a_strategy_returns_gives_a_valid_record(case: tuple[int, list[Any]]) -> None:
    """Repeated, reordered or new messages never make the loop fail after its call."""
    size, picks = case
    history = [Message("user", f"m{n}") for n in range(size)]
    window = [
        Message("user", "new") if pick is None or not size else history[pick] for pick in picks
    ]
    record = WindowRecord.of("S()", history, window)
    indexes = record.indexes()
    assert indexes == sorted(set(indexes))
    assert record.added == len(window) - len(indexes)
    edited = {i for start, stop in record.edited for i in range(start, stop)}
    # A kept position's message is in the window as itself; an edited one was guessed from
    # a new message filling a gap of exactly its size.
    assert all(any(m is history[i] for m in window) for i in indexes if i not in edited)


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"positions": ((3, 2),)}, ValueError, "increasing, non-empty"),
        ({"positions": ((0, 12),)}, ValueError, "within the history's 10 messages"),
        ({"positions": ((4, 6), (0, 2))}, ValueError, "increasing"),
        ({"positions": ((0, 2),), "edited": ((5, 6),)}, ValueError, "edited must be a part"),
        ({"positions": [[0, "1"]]}, TypeError, "WindowRecord.positions must be an int"),
        ({"added": -1}, ValueError, "WindowRecord.added must be at least 0"),
        ({"summary": 3}, TypeError, "WindowRecord.summary must be a str"),
    ],
)
def test_a_bad_window_record_is_refused_naming_the_field(
    fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        WindowRecord("S()", 10, **fields)


def test_an_unknown_or_missing_field_is_refused() -> None:
    with pytest.raises(ValueError, match="WindowRecord has no field 'ids'"):
        WindowRecord.from_dict({"strategy": "S()", "history": 1, "ids": []})
    with pytest.raises(ValueError, match="needs 'strategy' and 'history'"):
        WindowRecord.from_dict({"strategy": "S()"})
    with pytest.raises(TypeError, match=r"UsageRecord\.window must be a WindowRecord"):
        UsageRecord(Usage(), window={"strategy": "S()"})  # type: ignore[arg-type]


@given(st.integers(0, 40), st.data())
def test_positions_match_a_lookup_over_the_whole_history(size: int, data: st.DataObject) -> None:
    """The ends-first matching finds what looking every message up would."""
    history = [Message("user", f"m{n}") for n in range(size)]
    chosen = sorted(data.draw(st.sets(st.integers(0, max(size - 1, 0)), max_size=size)))
    window = [history[i] for i in chosen if size]
    where = {id(message): index for index, message in enumerate(history)}
    assert history_indexes(history, window) == [where[id(m)] for m in window]
