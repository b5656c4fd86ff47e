"""Compaction on the store: `compact_context` and `AutoCompactStore`, on every backend."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ConcurrentModificationError,
    Message,
    SummarizationError,
    ToolResultBlock,
    ToolUseBlock,
    count_tokens,
)
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SQLiteConnection,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores.compaction import AutoCompactStore, compact_context
from pygents_ctx.context.strategies.summarize import (
    bridge_message,
    is_bridge,
    is_summary,
    summary_covers,
    summary_message,
    summary_text,
)
from pygents_ctx.testing import ScriptedSummarizer

from .conftest import MakeStore
from .helpers import numbered


def words(count: int, prefix: str = "m") -> list[Message]:
    """Like `numbered`, with texts long enough that a short summary is smaller."""
    roles = ("user", "assistant")
    return [Message(roles[i % 2], f"{prefix}{i} " + "word " * 20) for i in range(count)]


def plain(messages: Sequence[Message]) -> list[Message]:
    """The conversation without summaries and bridges."""
    return [m for m in messages if not is_summary(m) and not is_bridge(m)]


async def snapshot(store: ContextStore) -> tuple[Any, ...]:
    """Everything a user can read from a store."""
    return (
        await store.get_history(),
        await store.get_history(include_archived=True),
        await store.count(),
        await store.token_count(),
        await store.get_context_tokens(),
    )


def call(call_id: str, name: str = "search") -> ToolUseBlock:
    return ToolUseBlock(call_id, name, {"q": call_id})


def result(call_id: str) -> ToolResultBlock:
    return ToolResultBlock(call_id, f"result of {call_id} " + "data " * 10)


# -- compact_context ------------------------------------------------------------


@pytest.mark.parametrize(("length", "keep_recent"), [(0, 6), (6, 6), (3, 5), (1, 1)])
async def test_compact_context_returns_none_when_the_history_is_too_short(
    make_store: MakeStore, length: int, keep_recent: int
) -> None:
    store = await make_store(*words(length))
    summarizer = ScriptedSummarizer()

    assert await compact_context(store, summarizer, keep_recent=keep_recent) is None
    assert summarizer.calls == []


async def test_compact_context_with_only_system_messages_and_recent_ones_returns_none(
    make_store: MakeStore,
) -> None:
    store = await make_store(Message("system", "be brief"), *words(3))

    assert await compact_context(store, ScriptedSummarizer(), keep_recent=3) is None


async def test_compact_context_leaves_the_store_unchanged(make_store: MakeStore) -> None:
    store = await make_store(*words(10))
    await store.add_context_tokens(500, 20)
    before = await snapshot(store)

    compacted = await compact_context(store, ScriptedSummarizer(["short"]), keep_recent=2)

    assert compacted is not None
    assert await snapshot(store) == before


async def test_compact_context_summarizes_the_old_part_and_keeps_recent_verbatim(
    make_store: MakeStore,
) -> None:
    history = words(10)
    store = await make_store(*history)
    summarizer = ScriptedSummarizer(["They talked."])

    compacted = await compact_context(store, summarizer, keep_recent=4)

    assert compacted is not None
    assert summary_text(compacted[0]) == "They talked."
    assert compacted[-4:] == history[-4:]
    assert len(compacted) == 6  # summary, bridge, 4 recent
    assert [(c.messages, c.previous_summary) for c in summarizer.calls] == [
        (tuple(history[:6]), None)
    ]


async def test_compact_context_keeps_leading_system_messages_out_of_the_summary(
    make_store: MakeStore,
) -> None:
    head = [Message("system", "be brief"), Message("system", "answer in French")]
    history = words(8)
    store = await make_store(*head, *history)
    summarizer = ScriptedSummarizer(["short"])

    compacted = await compact_context(store, summarizer, keep_recent=2)

    assert compacted is not None
    assert compacted[:2] == head
    assert is_summary(compacted[2])
    assert list(summarizer.calls[0].messages) == history[:6]


async def test_keep_recent_zero_summarizes_everything(make_store: MakeStore) -> None:
    store = await make_store(*words(4))

    compacted = await compact_context(store, ScriptedSummarizer(["short"]), keep_recent=0)

    assert compacted is not None
    assert [summary_text(m) for m in compacted] == ["short"]


@pytest.mark.parametrize(
    ("recent_first_role", "expected_roles"),
    [
        ("user", ["user", "assistant", "user", "assistant", "user"]),
        ("assistant", ["user", "assistant", "user", "assistant"]),
    ],
)
async def test_roles_keep_alternating_around_the_summary(
    make_store: MakeStore, recent_first_role: str, expected_roles: list[str]
) -> None:
    # 9 messages from user: keep_recent=3 starts the recent part with a user
    # message; 8 messages: with an assistant message.
    length = 9 if recent_first_role == "user" else 8
    store = await make_store(*words(length))

    compacted = await compact_context(store, ScriptedSummarizer(["short"]), keep_recent=3)

    assert compacted is not None
    assert [m.role for m in compacted] == expected_roles
    assert is_summary(compacted[0])
    assert is_bridge(compacted[1]) == (recent_first_role == "user")


def parallel_calls_then_results(results_together: bool) -> list[Message]:
    """A conversation ending in two parallel tool calls (message 5) and their results."""
    if results_together:
        results = [Message("user", [result("a"), result("b")])]
    else:
        results = [Message("user", [result("a")]), Message("user", [result("b")])]
    return [*words(5), Message("assistant", [call("a"), call("b", "fetch")]), *results]


@pytest.mark.parametrize("results_together", [True, False], ids=["one-message", "one-each"])
@pytest.mark.parametrize("keep_recent", [1, 2, 3])
async def test_the_split_never_separates_parallel_tool_calls_from_their_results(
    make_store: MakeStore, results_together: bool, keep_recent: int
) -> None:
    history = parallel_calls_then_results(results_together)
    calls_at = 5  # the assistant message with both calls
    store = await make_store(*history)
    summarizer = ScriptedSummarizer(["short"])

    compacted = await compact_context(store, summarizer, keep_recent=keep_recent)

    assert compacted is not None
    kept_from = min(calls_at, len(history) - keep_recent)
    assert compacted[-(len(history) - kept_from) :] == history[kept_from:]
    assert list(summarizer.calls[0].messages) == history[:kept_from]


async def test_a_tool_result_without_its_call_does_not_block_compaction(
    make_store: MakeStore,
) -> None:
    # The call was cut off (a truncated copy of a session): the result has
    # nothing to be paired with, so the split may pass it.
    orphan = Message("user", [result("gone")])
    history = [*words(6), orphan, Message("assistant", "ok " + "word " * 20)]
    store = await make_store(*history)

    compacted = await compact_context(store, ScriptedSummarizer(["short"]), keep_recent=2)

    assert compacted is not None
    assert compacted[-2:] == history[-2:]


async def test_a_second_compaction_updates_the_summary_with_only_the_newly_old_messages(
    make_store: MakeStore,
) -> None:
    first_part, second_part = words(8, "a"), words(4, "b")
    store = await make_store(*first_part)
    summarizer = ScriptedSummarizer(["First summary.", "Updated summary."])
    compacted = await compact_context(store, summarizer, keep_recent=2)
    assert compacted is not None
    store = await make_store(*compacted, *second_part)

    again = await compact_context(store, summarizer, keep_recent=2)

    assert again is not None
    assert [summary_text(m) for m in again if is_summary(m)] == ["Updated summary."]
    assert again[-2:] == second_part[-2:]
    second = summarizer.calls[1]
    assert second.previous_summary == "First summary."
    assert list(second.messages) == first_part[-2:] + second_part[:2]


async def test_a_summary_no_smaller_than_the_old_part_is_not_used(make_store: MakeStore) -> None:
    store = await make_store(*numbered(4))  # four tiny messages
    summarizer = ScriptedSummarizer(["a summary longer than the two messages it replaces"])

    assert await compact_context(store, summarizer, keep_recent=2) is None
    assert len(summarizer.calls) == 1


@pytest.mark.parametrize(
    "reply",
    [ValueError("model down"), "", "   "],
    ids=["raises", "empty", "blank"],
)
async def test_compact_context_raises_summarization_error_when_the_summarizer_fails(
    make_store: MakeStore, reply: str | Exception
) -> None:
    store = await make_store(*words(8))
    before = await snapshot(store)

    with pytest.raises(SummarizationError, match="nothing was changed"):
        await compact_context(store, ScriptedSummarizer([reply]), keep_recent=2)

    assert await snapshot(store) == before


async def not_text(messages: list[Message], previous: str | None) -> Any:
    return 42


@pytest.mark.parametrize(
    "summarizer",
    [lambda messages, previous: "a sync summary", not_text],
    ids=["sync-function", "returns-a-number"],
)
async def test_a_summarizer_that_breaks_the_protocol_raises_summarization_error(
    make_store: MakeStore, summarizer: Any
) -> None:
    store = await make_store(*words(8))
    before = await snapshot(store)

    with pytest.raises(SummarizationError):
        await compact_context(store, summarizer, keep_recent=2)
    with pytest.raises(SummarizationError):
        await AutoCompactStore(store, summarizer, keep_recent=2).compact()

    assert await snapshot(store) == before


async def test_the_summarizers_own_exception_is_the_cause() -> None:
    store = MemoryContextStore(words(8))
    failure = ValueError("model down")

    with pytest.raises(SummarizationError) as raised:
        await compact_context(store, ScriptedSummarizer(error=failure), keep_recent=2)

    assert raised.value.__cause__ is failure


@pytest.mark.parametrize("keep_recent", [-1, 1.5, True, "3", None])
async def test_compact_context_rejects_a_bad_keep_recent(keep_recent: Any) -> None:
    summarizer = ScriptedSummarizer()

    with pytest.raises(int_error(keep_recent), match="keep_recent"):
        await compact_context(MemoryContextStore(words(8)), summarizer, keep_recent=keep_recent)
    assert summarizer.calls == []


# -- AutoCompactStore: when it compacts ---------------------------------------------


@pytest.mark.parametrize(
    ("settings_", "limit"),
    [
        ({}, 96_000),  # 0.75 of the 128,000 default window
        ({"threshold": 1.0}, 128_000),
        ({"context_window": 10_000}, 7_500),
        ({"context_window": 10_000, "threshold": 0.5}, 5_000),
        ({"max_tokens": 1_000}, 1_000),
        ({"max_tokens": 1_000, "context_window": 10_000, "threshold": 0.5}, 1_000),
    ],
    ids=["default", "default-window", "window", "window-threshold", "max", "max-wins"],
)
async def test_add_context_tokens_compacts_only_over_the_limit(
    make_store: MakeStore, settings_: dict[str, Any], limit: int
) -> None:
    summarizer = ScriptedSummarizer(["short"])
    store = AutoCompactStore(await make_store(*words(10)), summarizer, keep_recent=2, **settings_)
    assert store.limit == limit

    await store.add_context_tokens(limit, 7)  # at the limit: not over it
    assert summarizer.calls == []
    assert await store.count() == 10

    await store.add_context_tokens(limit + 1, 7)
    assert len(summarizer.calls) == 1
    assert summary_text((await store.get_history())[0]) == "short"
    assert await store.get_context_tokens() == (2 * limit + 1, 14)  # usage is kept


async def test_compaction_keeps_the_reported_usage(make_store: MakeStore) -> None:
    store = AutoCompactStore(await make_store(*words(10)), ScriptedSummarizer(), max_tokens=100)
    await store.add_context_tokens(50, 5)

    await store.add_context_tokens(150, 10)

    assert await store.get_context_tokens() == (200, 15)
    assert any(is_summary(m) for m in await store.get_history())


async def test_a_store_too_short_to_compact_is_left_alone(make_store: MakeStore) -> None:
    summarizer = ScriptedSummarizer()
    store = AutoCompactStore(await make_store(*words(4)), summarizer, max_tokens=10)

    await store.add_context_tokens(1_000, 0)

    assert summarizer.calls == []
    assert await store.compact() is False
    assert await store.count() == 4


# -- AutoCompactStore: what compaction does to the store -----------------------------


async def test_compact_replaces_the_old_part_with_a_summary(make_store: MakeStore) -> None:
    history = words(10)
    store = AutoCompactStore(await make_store(*history), ScriptedSummarizer(["short"]))
    ids = await store._live_ids(10)
    assert ids is not None
    assert len(set(ids)) == 10  # every built-in store keeps ids

    assert await store.compact() is True

    live = await store.get_history()
    # The recent part starts with a user message: a bridge keeps the roles alternating.
    # The summary names the ids of the four messages it replaced.
    summary = summary_message("short", summary_of=ids[:4])
    assert live == [summary, bridge_message("assistant"), *history[4:]]
    assert all(summary_covers(live[0], i) for i in ids[:4])
    assert not any(summary_covers(live[0], i) for i in ids[4:])
    assert await store.count() == 8
    assert await store.token_count() == count_tokens(live)
    assert await store.token_count() < count_tokens(history)


async def test_messages_written_while_the_summarizer_runs_are_kept_after_it(
    make_store: MakeStore,
) -> None:
    history = words(10)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[Message], previous: str | None) -> str:
        started.set()
        await release.wait()
        return "short"

    store = AutoCompactStore(await make_store(*history), ScriptedSummarizer(slow), max_tokens=100)
    ids = await store._live_ids(4)
    assert ids is not None
    compacting = asyncio.create_task(store.add_context_tokens(1_000, 0))
    await started.wait()
    late = [Message("user", "late 1"), Message("assistant", "late 2"), Message("user", "late 3")]
    await store.append(late[0])
    await store.append_many(late[1:])
    release.set()
    await compacting

    live = await store.get_history()
    summary = summary_message("short", summary_of=ids)
    assert live == [summary, bridge_message("assistant"), *history[4:], *late]
    assert await store.count() == len(live)
    assert await store.token_count() == count_tokens(live)


async def test_clearing_while_the_summarizer_runs_does_not_bring_the_old_part_back(
    make_store: MakeStore,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[Message], previous: str | None) -> str:
        started.set()
        await release.wait()
        return "what was said before the clear"

    store = AutoCompactStore(await make_store(*words(10)), ScriptedSummarizer(slow))
    compacting = asyncio.create_task(store.compact())
    await started.wait()
    await store.clear()
    fresh = words(10, "new")
    await store.append_many(fresh)
    release.set()

    assert await compacting is False
    assert await store.get_history() == fresh
    assert await store.get_history(include_archived=True) == fresh


@pytest.mark.parametrize("reply", [RuntimeError("model down"), ""], ids=["raises", "returns-empty"])
async def test_a_failing_summarizer_leaves_the_store_exactly_as_it_was(
    make_store: MakeStore, reply: str | Exception
) -> None:
    store = AutoCompactStore(await make_store(*words(10)), ScriptedSummarizer([reply]))
    await store.add_context_tokens(40, 4)
    before = await snapshot(store)

    with pytest.raises(SummarizationError):
        await store.compact()

    assert await snapshot(store) == before


async def test_a_cancelled_compaction_leaves_the_store_as_it_was(make_store: MakeStore) -> None:
    started = asyncio.Event()

    async def hangs(messages: list[Message], previous: str | None) -> str:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    store = AutoCompactStore(await make_store(*words(10)), ScriptedSummarizer(hangs))
    before = await snapshot(store)
    compacting = asyncio.create_task(store.compact())
    await started.wait()

    compacting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await compacting

    assert await snapshot(store) == before
    store.summarizer = ScriptedSummarizer()
    assert await store.compact() is True  # the lock was released


async def test_a_failing_summarizer_on_add_context_tokens_keeps_the_usage_only(
    make_store: MakeStore,
) -> None:
    # The model call happened: its usage is recorded; the history is untouched.
    store = AutoCompactStore(
        await make_store(*words(10)), ScriptedSummarizer(error=RuntimeError), max_tokens=100
    )
    history, archive = await store.get_history(), await store.get_history(include_archived=True)
    tokens = await store.token_count()

    with pytest.raises(SummarizationError):
        await store.add_context_tokens(1_000, 9)

    assert await store.get_history() == history
    assert await store.get_history(include_archived=True) == archive
    assert (await store.count(), await store.token_count()) == (10, tokens)
    assert await store.get_context_tokens() == (1_000, 9)


async def test_a_summary_no_smaller_than_the_old_part_is_not_written(
    make_store: MakeStore,
) -> None:
    store = AutoCompactStore(
        await make_store(*numbered(4)), ScriptedSummarizer(["much longer than m0 and m1"]),
        keep_recent=2,
    )  # fmt: skip
    before = await snapshot(store)

    assert await store.compact() is False
    assert await snapshot(store) == before


async def test_two_compactions_leave_one_updated_summary_and_archive_everything(
    make_store: MakeStore,
) -> None:
    first, second = words(8, "a"), words(4, "b")
    summarizer = ScriptedSummarizer(["First summary.", "Updated summary."])
    store = AutoCompactStore(await make_store(*first), summarizer, keep_recent=2)
    first_ids = await store._live_ids(8)
    assert first_ids is not None

    assert await store.compact() is True
    await store.append_many(second)
    second_ids = await store._live_ids(6)  # the summary, its bridge, b0, b1, ...
    assert second_ids is not None
    assert await store.compact() is True

    bridge = bridge_message("assistant")  # both recent parts start with a user message
    live = await store.get_history()
    # The updated summary stands for what the first did, and what it folded in since.
    updated = summary_message("Updated summary.", summary_of=[*first_ids, *second_ids[4:]])
    assert live == [updated, bridge, *second[2:]]
    assert [c.previous_summary for c in summarizer.calls] == [None, "First summary."]
    assert list(summarizer.calls[1].messages) == first[6:] + second[:2]
    assert await store.get_history(include_archived=True) == [
        *first[:6],
        summary_message("First summary.", summary_of=first_ids[:6]),
        bridge,
        *first[6:],
        *second[:2],
        updated,
        bridge,
        *second[2:],
    ]


async def test_the_bridge_is_replaced_not_summarized(make_store: MakeStore) -> None:
    first, second = words(9, "a"), words(5, "b")  # recent parts start with a user message
    summarizer = ScriptedSummarizer(["First summary.", "Updated summary."])
    store = AutoCompactStore(await make_store(*first), summarizer, keep_recent=3)

    await store.compact()
    assert is_bridge((await store.get_history())[1])
    await store.append_many(second[1:])  # keep user/assistant alternating
    await store.compact()

    live = await store.get_history()
    assert [is_bridge(m) for m in live].count(True) == 1
    assert summary_text(live[0]) == "Updated summary."
    assert live[1] == bridge_message("assistant")
    assert not any(is_bridge(m) or is_summary(m) for m in summarizer.calls[1].messages)


async def test_leading_system_messages_stay_first_after_compactions(
    make_store: MakeStore,
) -> None:
    system = Message("system", "be brief")
    store = AutoCompactStore(await make_store(system, *words(8)), ScriptedSummarizer())

    await store.compact()
    await store.append_many(words(6, "b"))
    await store.compact()

    live = await store.get_history()
    assert live[0] == system
    assert [m.role for m in live].count("system") == 1
    assert summary_text(live[1]) == "summary 2"
    assert [is_summary(m) for m in live].count(True) == 1


async def test_concurrent_compactions_summarize_once_and_never_stack_summaries(
    make_store: MakeStore,
) -> None:
    release = asyncio.Event()

    async def slow(messages: list[Message], previous: str | None) -> str:
        await release.wait()
        return f"summary after {previous}"

    summarizer = ScriptedSummarizer(slow)
    store = AutoCompactStore(await make_store(*words(12)), summarizer, keep_recent=2)
    tasks = [asyncio.create_task(store.compact()) for _ in range(2)]
    await asyncio.sleep(0.01)
    release.set()
    results = await asyncio.gather(*tasks)

    assert sorted(results) == [False, True]
    assert len(summarizer.calls) == 1  # the second waited, then found nothing old
    assert [is_summary(m) for m in await store.get_history()].count(True) == 1


class PrefixUnchecked(MemoryContextStore):
    """A store whose `replace_prefix` predates `expected`."""

    async def replace_prefix(  # type: ignore[override]
        self, count: int, messages: Sequence[Message], *, run_id: str | None = None
    ) -> None:
        await super().replace_prefix(count, messages, run_id=run_id)


@pytest.mark.parametrize("old_style", [False, True], ids=["backend", "no-expected-parameter"])
async def test_a_compaction_another_writer_overtook_is_not_written(
    make_store: MakeStore, old_style: bool
) -> None:
    history = words(10)
    inner = PrefixUnchecked(history) if old_style else await make_store(*history)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[Message], previous: str | None) -> str:
        started.set()
        await release.wait()
        return "mine"

    mine = AutoCompactStore(inner, ScriptedSummarizer(slow))
    theirs = AutoCompactStore(inner, ScriptedSummarizer(["theirs"]))  # another worker's wrapper
    compacting = asyncio.create_task(mine.compact())
    await started.wait()
    assert await theirs.compact() is True
    await inner.append(Message("user", "late"))
    release.set()

    assert await compacting is False
    live = await inner.get_history()
    assert [summary_text(m) for m in live if is_summary(m)] == ["theirs"]
    assert live[-1].text == "late"
    assert plain(await inner.get_history(include_archived=True)) == [*history, live[-1]]


async def test_replace_prefix_through_the_wrapper_checks_expected_for_an_old_store() -> None:
    store = AutoCompactStore(PrefixUnchecked(words(3)), ScriptedSummarizer())

    with pytest.raises(ConcurrentModificationError):
        await store.replace_prefix(1, [Message("user", "S")], expected=words(1, "other"))
    await store.replace_prefix(1, [Message("user", "S")], expected=words(1))

    assert (await store.get_history())[0].text == "S"


async def test_compaction_on_sqlite_creates_no_extra_session(conn: SQLiteConnection) -> None:
    inner = SQLiteContextStore(conn, session_id="long-chat")
    await inner.append_many(words(10))
    store = AutoCompactStore(inner, ScriptedSummarizer(), max_tokens=100)

    for batch in range(3):
        await store.add_context_tokens(1_000, 0)
        await store.append_many(words(6, f"batch{batch}-"))

    sessions = await store.list_sessions()
    assert [s.session_id for s in sessions] == ["long-chat"]
    assert sessions[0].message_count == await store.count()
    assert sessions[0].preview == words(1)[0].text[:80]


async def test_a_compacted_sqlite_session_reads_the_same_after_reopening(
    conn: SQLiteConnection, db_path: Path
) -> None:
    store = AutoCompactStore(SQLiteContextStore(conn, session_id="s"), ScriptedSummarizer())
    await store.append_many(words(10))
    await store.compact()
    live, everything = await store.get_history(), await store.get_history(include_archived=True)

    async with connect(db_path) as other:
        reopened = SQLiteContextStore(other, session_id="s")
        assert await reopened.get_history() == live
        assert await reopened.get_history(include_archived=True) == everything


# -- AutoCompactStore: a store like any other ---------------------------------------


class Spy(MemoryContextStore):
    """A memory store that records which methods were called, with what."""

    def __init__(self) -> None:
        super().__init__(words(4), session_id="spied")
        self.seen: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if name.startswith("_") or name == "seen" or not callable(value):
            return value
        seen = super().__getattribute__("seen")

        def spy(*args: Any, **kwargs: Any) -> Any:
            seen.append((name, args, kwargs))
            return value(*args, **kwargs)

        return spy


MESSAGE = Message("user", "hello")
DELEGATED: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("append", (MESSAGE,), {"run_id": "r1"}),
    ("append_many", ([MESSAGE, MESSAGE],), {"run_id": "r1"}),
    ("get_history", (), {"limit": 2, "offset": 1, "include_archived": True}),
    ("count", (), {}),
    ("token_count", (), {}),
    ("clear", (), {}),
    ("clear_run", ("r1",), {}),
    ("replace_prefix", (1, [MESSAGE]), {"run_id": "r2"}),
    ("set_context_tokens", (10, 2), {}),
    ("get_context_tokens", (), {}),
    ("add_context_tokens", (10, 2), {}),
    ("list_sessions", (), {"owner": None}),
    ("erase", (), {"owner": None, "session": "nobody", "older_than": None}),
    ("snapshot", (), {}),
    ("close", (), {}),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), DELEGATED, ids=[d[0] for d in DELEGATED])
async def test_every_method_delegates_to_the_inner_store(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    twin, spy = MemoryContextStore(words(4)), Spy()
    store = AutoCompactStore(spy, ScriptedSummarizer())

    returned = await getattr(store, name)(*args, **kwargs)

    expected = await getattr(twin, name)(*args, **kwargs)
    assert spy.seen[0] == (name, args, kwargs)
    if name not in ("list_sessions", "snapshot", "erase"):  # ids and creation times differ
        assert returned == expected
    assert await store.get_history(include_archived=True) == await twin.get_history(
        include_archived=True
    )


async def test_session_id_and_repr_come_from_the_inner_store() -> None:
    store = AutoCompactStore(MemoryContextStore(session_id="abc"), ScriptedSummarizer())

    assert store.session_id == "abc"
    assert "abc" in repr(store)
    assert "limit=96000" in repr(store)


async def test_async_with_closes_the_inner_store() -> None:
    spy = Spy()

    async with AutoCompactStore(spy, ScriptedSummarizer()) as store:
        assert await store.count() == 4

    assert spy.seen[-1] == ("close", (), {})


class SeedStore(ContextStore):
    """A store written for the seed API: `append(message)` and `get_history()` only."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def append(self, message: Message) -> None:  # type: ignore[override]
        self.messages.append(message)

    async def get_history(self) -> list[Message]:  # type: ignore[override]
        return list(self.messages)

    async def clear(self) -> None:
        self.messages.clear()


async def test_a_store_written_for_the_seed_api_can_be_wrapped() -> None:
    store = AutoCompactStore(SeedStore(), ScriptedSummarizer(["short"]), max_tokens=100)

    await store.append(words(1)[0])
    await store.append_many(words(9)[1:])
    await store.add_context_tokens(1_000, 0)
    branch = await store.fork()

    assert summary_text((await store.get_history())[0]) == "short"
    assert await store.count() == 7
    assert await branch.get_history() == await store.get_history()


@pytest.mark.parametrize("session_id", [None, "branch"])
async def test_fork_wraps_an_independent_fork_with_the_same_settings(
    make_store: MakeStore, session_id: str | None
) -> None:
    summarizer = ScriptedSummarizer()
    store = AutoCompactStore(
        await make_store(*words(10)), summarizer,
        keep_recent=3, threshold=0.5, max_tokens=1_234, context_window=5_000,
    )  # fmt: skip
    await store.add_context_tokens(10, 1)

    branch = await store.fork(session_id=session_id)

    assert isinstance(branch, AutoCompactStore)
    assert type(branch.inner) is type(store.inner)
    assert branch.inner is not store.inner
    assert branch.session_id != store.session_id
    if session_id is not None:
        assert branch.session_id == session_id
    settings_ = ("summarizer", "keep_recent", "threshold", "max_tokens", "context_window")
    assert all(getattr(branch, s) is getattr(store, s) for s in settings_)
    assert await branch.get_context_tokens() == (0, 0)  # spend counts where it was made

    await branch.append(MESSAGE)
    await branch.add_context_tokens(2_000, 0)  # compacts the branch only
    assert await store.get_history() == words(10)
    assert is_summary((await branch.get_history())[0])


async def test_from_history_and_from_context_are_refused_with_a_hint() -> None:
    with pytest.raises(TypeError, match=r"build the inner one with from_history, then wrap it"):
        await AutoCompactStore.from_history([MESSAGE])
    with pytest.raises(TypeError, match=r"build the inner one with from_context, then wrap it"):
        await AutoCompactStore.from_context(MemoryContextStore())


async def test_restore_goes_to_the_inner_store() -> None:
    source = MemoryContextStore(words(3))
    await source.replace_prefix(1, [], run_id=None)
    store = AutoCompactStore(MemoryContextStore(session_id="inner"), ScriptedSummarizer())

    await store.restore(await source.snapshot())

    assert await store.inner.get_history(include_archived=True) == words(3)
    assert await store.snapshot() == await store.inner.snapshot()


def int_error(bad: object) -> type[Exception]:
    """What a bad whole number raises: ValueError out of range, TypeError not an int."""
    return ValueError if isinstance(bad, int) and not isinstance(bad, bool) else TypeError


SUMMARIZER = ScriptedSummarizer()
BAD_SETTINGS: list[tuple[dict[str, Any], type[Exception], str]] = [
    *[({"inner": bad}, TypeError, "ContextStore") for bad in ([], None, "store")],
    *[({"summarizer": bad}, TypeError, "summarizer") for bad in (None, "summarize", 3)],
    *[({"keep_recent": bad}, int_error(bad), "keep_recent") for bad in (-1, 2.0, True, "6", None)],
    *[
        ({"threshold": bad}, ValueError, "threshold must be a number above 0 and at most 1")
        for bad in (0, -0.5, 1.01, float("nan"), float("inf"))
    ],
    *[({"threshold": bad}, TypeError, "threshold must be a number") for bad in (True, "0.5", None)],
    *[
        ({name: bad}, int_error(bad), name)
        for name in ("max_tokens", "context_window")
        for bad in (0, -1, 1.5, True, "100")
    ],
]


@pytest.mark.parametrize(("settings_", "error", "match"), BAD_SETTINGS)
def test_every_setting_is_validated(
    settings_: dict[str, Any], error: type[Exception], match: str
) -> None:
    arguments: dict[str, Any] = {"inner": MemoryContextStore(), "summarizer": SUMMARIZER}
    arguments.update(settings_)

    with pytest.raises(error, match=match):
        AutoCompactStore(**arguments)


@pytest.mark.parametrize(
    "settings_",
    [{"threshold": 1}, {"threshold": 0.01}, {"keep_recent": 0}, {"max_tokens": 1}],
)
def test_boundary_settings_are_accepted(settings_: dict[str, Any]) -> None:
    store = AutoCompactStore(MemoryContextStore(), SUMMARIZER, **settings_)

    assert all(getattr(store, name) == value for name, value in settings_.items())


# -- invariants ---------------------------------------------------------------------


CALL_IDS = itertools.count()  # unique across the parts of one history


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """A history of rounds: user text, then plain replies or parallel tool calls."""
    size = st.integers(0, 60)
    messages: list[Message] = []
    for _ in range(draw(st.integers(1, 8))):
        messages.append(Message("user", "ask " + "x" * draw(size)))
        for _ in range(draw(st.integers(0, 2))):  # tool rounds
            names = [f"c{next(CALL_IDS)}" for _ in range(draw(st.integers(1, 3)))]
            messages.append(Message("assistant", [call(n) for n in names]))
            if draw(st.booleans()):
                messages.append(Message("user", [result(n) for n in names]))
            else:
                messages.extend(Message("user", [result(n)]) for n in names)
        messages.append(Message("assistant", "answer " + "x" * draw(size)))
    return messages


def pairs_of(messages: Sequence[Message]) -> dict[str, int]:
    """For each tool call id, the index of the message holding its call."""
    return {use.id: index for index, m in enumerate(messages) for use in m.tool_uses}


def assert_no_call_split_from_its_result(live: list[Message], original: list[Message]) -> None:
    live_calls = {use.id for m in live for use in m.tool_uses}
    live_results = {r.tool_use_id for m in live for r in m.tool_results}
    original_results = {r.tool_use_id for m in original for r in m.tool_results}
    assert live_results <= live_calls
    assert live_calls & original_results <= live_results


async def _open(backend: str) -> tuple[ContextStore, SQLiteConnection | None]:
    if backend == "memory":
        return MemoryContextStore(), None
    conn = await connect(":memory:")
    return SQLiteContextStore(conn), conn


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(max_examples=40, deadline=None)
@given(
    system=st.booleans(),
    parts=st.lists(conversations(), min_size=1, max_size=3),
    keep_recent=st.integers(0, 8),
    summary_size=st.integers(1, 400),
)
def test_compaction_loses_nothing_splits_no_pair_and_never_grows(
    backend: str, system: bool, parts: list[list[Message]], keep_recent: int, summary_size: int
) -> None:
    head = [Message("system", "be brief")] if system else []
    parts[0] = head + parts[0]

    async def run() -> None:
        inner, conn = await _open(backend)
        summarizer = ScriptedSummarizer(lambda messages, previous: "s" * summary_size)
        store = AutoCompactStore(inner, summarizer, keep_recent=keep_recent)
        original: list[Message] = []
        try:
            for part in parts:
                await store.append_many(part)
                original += part
                before = await store.token_count()
                compacted = await store.compact()
                event("compacted" if compacted else "left as it was")
                live = await store.get_history()
                after = await store.token_count()
                assert after < before if compacted else after == before
                assert after == count_tokens(live)
                assert_no_call_split_from_its_result(live, original)
                conversation = [m for m in original if m.role != "system"]
                kept = [m for m in plain(live) if m.role != "system"]
                assert kept == conversation[len(conversation) - len(kept) :]  # recent, verbatim
                assert live[: len(head)] == head
                assert [m.role for m in live].count("system") == len(head)
                assert [is_summary(m) for m in live].count(True) <= 1
                # Leading system messages are rewritten (so archived) by each compaction.
                everything = await store.get_history(include_archived=True)
                assert [m for m in plain(everything) if m.role != "system"] == conversation
        finally:
            if conn is not None:
                await conn.close()

    asyncio.run(run())
