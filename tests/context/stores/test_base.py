"""The ContextStore contract, on every backend; and the defaults a custom store inherits."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from pygents_ctx import (
    ConcurrentModificationError,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UsageRecord,
    count_message_tokens,
    from_dict,
    to_dict,
)
from pygents_ctx.context.stores import (
    ContextStore,
    HistoryRetention,
    MemoryContextStore,
    SessionInfo,
    SessionSnapshot,
    SQLiteConnection,
    SQLiteContextStore,
    StoredMessage,
)
from pygents_ctx.context.tokens import DEFAULT_COUNTER

from .conftest import MakeStore
from .helpers import ListStore, numbered, texts

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def fresh_count(message: Message) -> int:
    """The token count of a copy of `message`, so no cached count is involved."""
    return count_message_tokens(from_dict(to_dict(message)))


def every_block_kind() -> list[Message]:
    return [
        Message("system", "be brief"),
        Message("user", [TextBlock("look"), ImageBlock("image/png", PNG)]),
        Message("assistant", [ToolUseBlock("c1", "search", {"q": "naïve ☃", "n": [1, 2.5]})]),
        Message(
            "user",
            [
                ToolResultBlock("c1", [TextBlock("found"), ImageBlock("image/gif", PNG)]),
                ToolResultBlock("c2", "boom", is_error=True),
            ],
        ),
    ]


# -- appending and reading ----------------------------------------------------


async def test_history_is_what_was_appended_in_order(make_store: MakeStore) -> None:
    store = await make_store()
    for message in numbered(3):
        await store.append(message)
    await store.append_many(numbered(2, "n"))

    assert texts(await store.get_history()) == ["m0", "m1", "m2", "n0", "n1"]


async def test_every_block_kind_comes_back_equal(make_store: MakeStore) -> None:
    store = await make_store(*every_block_kind())

    assert await store.get_history() == every_block_kind()


async def test_changing_a_returned_list_does_not_change_the_store(make_store: MakeStore) -> None:
    store = await make_store(*numbered(2))

    history = await store.get_history()
    history.clear()

    assert texts(await store.get_history()) == ["m0", "m1"]


@pytest.mark.parametrize(
    ("limit", "offset", "expected"),
    [
        (None, 0, ["m0", "m1", "m2", "m3", "m4"]),
        (2, 0, ["m3", "m4"]),
        (2, 1, ["m2", "m3"]),
        (3, 4, ["m0"]),
        (10, 0, ["m0", "m1", "m2", "m3", "m4"]),
        (None, 2, ["m0", "m1", "m2"]),
        (0, 0, []),
        (1, 5, []),
        (None, 9, []),
    ],
)
async def test_limit_takes_the_newest_and_offset_counts_back_from_the_newest(
    make_store: MakeStore, limit: int | None, offset: int, expected: list[str]
) -> None:
    store = await make_store(*numbered(5))

    assert texts(await store.get_history(limit=limit, offset=offset)) == expected


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"limit": -1}, ValueError),
        ({"offset": -1}, ValueError),
        ({"limit": 1.5}, TypeError),
        ({"limit": True}, TypeError),
        ({"offset": "1"}, TypeError),
    ],
)
async def test_bad_limit_or_offset_is_refused(
    make_store: MakeStore, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    store = await make_store(*numbered(2))

    with pytest.raises(error, match=r"limit|offset"):
        await store.get_history(**kwargs)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda s: s.append("hello"), TypeError, "Message"),
        (lambda s: s.append(Message("user", "x"), run_id=""), ValueError, "run_id"),
        (lambda s: s.append(Message("user", "x"), run_id=7), TypeError, "run_id"),
        (lambda s: s.append_many([Message("user", "x"), "y"]), TypeError, r"messages\[1\]"),
        (lambda s: s.append_many(Message("user", "x")), TypeError, "iterable"),
    ],
)
async def test_bad_appends_are_refused_and_change_nothing(
    make_store: MakeStore, call: Any, error: type[Exception], match: str
) -> None:
    store = await make_store(*numbered(1))

    with pytest.raises(error, match=match):
        await call(store)

    assert texts(await store.get_history()) == ["m0"]


async def test_concurrent_appends_all_land_in_call_order(make_store: MakeStore) -> None:
    store = await make_store()

    await asyncio.gather(*(store.append(m) for m in numbered(50)))

    assert texts(await store.get_history()) == [f"m{i}" for i in range(50)]


# -- counts -------------------------------------------------------------------


async def test_count_and_token_count_follow_the_live_history(make_store: MakeStore) -> None:
    messages = every_block_kind()
    store = await make_store(*messages)

    assert await store.count() == 4
    assert await store.token_count() == sum(fresh_count(m) for m in messages)

    await store.replace_prefix(3, [Message("user", "summary")])

    assert await store.count() == 2
    assert await store.token_count() == fresh_count(Message("user", "summary")) + fresh_count(
        messages[3]
    )


async def test_returned_messages_carry_their_stored_token_count(make_store: MakeStore) -> None:
    messages = every_block_kind()
    store = await make_store(*messages)

    history = await store.get_history()

    assert [m._tokens for m in history] == [
        ((DEFAULT_COUNTER, 4, 600), fresh_count(m)) for m in messages
    ]
    assert [count_message_tokens(m) for m in history] == [fresh_count(m) for m in messages]


# -- clear and clear_run ------------------------------------------------------


async def test_clear_removes_live_and_archived_messages_but_keeps_token_usage(
    make_store: MakeStore,
) -> None:
    store = await make_store(*numbered(4))
    await store.replace_prefix(2, [Message("user", "summary")])
    await store.set_context_tokens(100, 20)

    await store.clear()

    assert await store.get_history(include_archived=True) == []
    assert (await store.count(), await store.token_count()) == (0, 0)
    assert await store.get_context_tokens() == (100, 20)
    await store.append(Message("user", "again"))
    assert texts(await store.get_history()) == ["again"]
    assert (await store.list_sessions())[0].preview == "again"


async def test_clear_run_removes_only_that_runs_messages(make_store: MakeStore) -> None:
    store = await make_store()
    await store.append(Message("user", "keep 1"))
    await store.append_many(numbered(2, "run-a "), run_id="a")
    await store.append(Message("user", "b 1"), run_id="b")
    await store.append(Message("assistant", "keep 2"))

    await store.clear_run("a")

    assert texts(await store.get_history()) == ["keep 1", "b 1", "keep 2"]
    assert await store.count() == 3
    assert await store.token_count() == sum(fresh_count(m) for m in await store.get_history())


async def test_clear_run_reaches_the_archive_and_renews_the_preview(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    await store.append(Message("user", "first question"), run_id="a")
    await store.append(Message("assistant", "answer"), run_id="a")
    await store.append(Message("user", "second question"), run_id="b")
    await store.replace_prefix(2, [Message("user", "summary of a")], run_id="a")

    await store.clear_run("a")

    assert texts(await store.get_history(include_archived=True)) == ["second question"]
    assert (await store.list_sessions())[0].preview == "second question"


async def test_clear_run_of_an_unknown_run_changes_nothing(make_store: MakeStore) -> None:
    store = await make_store(*numbered(2))

    await store.clear_run("nope")

    assert texts(await store.get_history()) == ["m0", "m1"]


@pytest.mark.parametrize(("run_id", "error"), [(None, TypeError), ("", ValueError)])
async def test_clear_run_needs_a_run_id(
    make_store: MakeStore, run_id: Any, error: type[Exception]
) -> None:
    store = await make_store(*numbered(1))

    with pytest.raises(error, match="run_id"):
        await store.clear_run(run_id)


# -- replace_prefix and the archive -------------------------------------------


async def test_replace_prefix_swaps_the_oldest_and_archives_them(make_store: MakeStore) -> None:
    store = await make_store(*numbered(5))

    await store.replace_prefix(3, [Message("user", "S"), Message("assistant", "ok")])

    assert texts(await store.get_history()) == ["S", "ok", "m3", "m4"]
    assert texts(await store.get_history(include_archived=True)) == [
        "m0", "m1", "m2", "S", "ok", "m3", "m4",
    ]  # fmt: skip


async def test_messages_appended_while_summarizing_stay_after_the_summary(
    make_store: MakeStore,
) -> None:
    store = await make_store(*numbered(4))
    release = asyncio.Event()

    async def compact() -> None:
        seen = await store.get_history()
        await release.wait()  # the summarizer is "running"
        await store.replace_prefix(len(seen), [Message("user", "summary")])

    task = asyncio.create_task(compact())
    await asyncio.sleep(0)
    await store.append(Message("user", "late 1"))
    await store.append(Message("assistant", "late 2"))
    release.set()
    await task

    assert texts(await store.get_history()) == ["summary", "late 1", "late 2"]


async def test_a_second_compaction_archives_the_first_summary_in_order(
    make_store: MakeStore,
) -> None:
    store = await make_store(*numbered(4))
    await store.replace_prefix(2, [Message("user", "S1")])
    await store.append(Message("user", "m4"))

    await store.replace_prefix(2, [Message("user", "S2")])

    assert texts(await store.get_history()) == ["S2", "m3", "m4"]
    assert texts(await store.get_history(include_archived=True)) == [
        "m0", "m1", "S1", "m2", "S2", "m3", "m4",
    ]  # fmt: skip
    assert texts(await store.get_history(include_archived=True, limit=3, offset=2)) == [
        "S1", "m2", "S2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("count", "new", "expected"),
    [
        (0, ["front"], ["front", "m0", "m1", "m2"]),
        (0, [], ["m0", "m1", "m2"]),
        (2, [], ["m2"]),
        (3, ["all"], ["all"]),
        (1, ["a", "b", "c"], ["a", "b", "c", "m1", "m2"]),
    ],
)
async def test_replace_prefix_edges(
    make_store: MakeStore, count: int, new: list[str], expected: list[str]
) -> None:
    store = await make_store(*numbered(3))

    await store.replace_prefix(count, [Message("user", text) for text in new])
    await store.append(Message("user", "after"))

    assert texts(await store.get_history()) == [*expected, "after"]
    assert await store.count() == len(expected) + 1


@pytest.mark.parametrize(
    ("count", "error"), [(4, ValueError), (-1, ValueError), (1.0, TypeError), (True, TypeError)]
)
async def test_bad_replace_prefix_count_changes_nothing(
    make_store: MakeStore, count: Any, error: type[Exception]
) -> None:
    store = await make_store(*numbered(3))

    with pytest.raises(error, match="count"):
        await store.replace_prefix(count, [Message("user", "S")])

    assert texts(await store.get_history(include_archived=True)) == ["m0", "m1", "m2"]


# -- replace_prefix as a compare-and-swap ---------------------------------------


async def test_replace_prefix_with_the_expected_prefix_writes(make_store: MakeStore) -> None:
    store = await make_store(*numbered(4))
    seen = await store.get_history()
    await store.append(Message("user", "late"))  # an append is not a change of the prefix

    await store.replace_prefix(3, [Message("user", "S")], expected=seen[:3])

    assert texts(await store.get_history()) == ["S", "m3", "late"]
    assert texts(await store.get_history(include_archived=True))[:3] == ["m0", "m1", "m2"]


@pytest.mark.parametrize("change", ["compacted", "cleared", "run-cleared", "shrunk"])
async def test_replace_prefix_refuses_a_prefix_another_writer_changed(
    make_store: MakeStore, change: str
) -> None:
    store = await make_store(*numbered(2))
    await store.append_many(numbered(4)[2:], run_id="r1")
    seen = await store.get_history()
    if change == "compacted":
        await store.replace_prefix(2, [Message("user", "other summary")])
    elif change == "cleared":
        await store.clear()
        await store.append_many(numbered(4, "new"))
    elif change == "run-cleared":
        await store.clear_run("r1")
        await store.append_many(numbered(2, "new"))
    else:
        await store.replace_prefix(3, [])
    before = await store.get_history(include_archived=True)

    with pytest.raises(ConcurrentModificationError, match="oldest 3 messages"):
        await store.replace_prefix(3, [Message("user", "stale summary")], expected=seen[:3])

    assert await store.get_history(include_archived=True) == before


async def test_expected_must_hold_count_messages(make_store: MakeStore) -> None:
    store = await make_store(*numbered(3))

    with pytest.raises(ValueError, match="expected holds 2 messages but count is 3"):
        await store.replace_prefix(3, [], expected=numbered(2))
    with pytest.raises(TypeError, match=r"expected\[0\]"):
        await store.replace_prefix(1, [], expected=["m0"])  # type: ignore[list-item]

    assert texts(await store.get_history(include_archived=True)) == ["m0", "m1", "m2"]


# -- fork ---------------------------------------------------------------------


async def test_fork_is_an_independent_copy_with_a_new_id(make_store: MakeStore) -> None:
    store = await make_store(*numbered(3))
    await store.replace_prefix(1, [Message("user", "S")])
    await store.set_context_tokens(50, 5)

    fork = await store.fork()
    await fork.append(Message("user", "fork only"))
    await store.append(Message("user", "original only"))

    assert fork.session_id != store.session_id
    assert type(fork) is type(store)
    assert texts(await fork.get_history(include_archived=True)) == [
        "m0", "S", "m1", "m2", "fork only",
    ]  # fmt: skip
    assert texts(await store.get_history()) == ["S", "m1", "m2", "original only"]
    assert await fork.get_context_tokens() == (0, 0)  # spend counts where it was made
    assert await store.get_context_tokens() == (50, 5)
    assert await fork.token_count() == sum(fresh_count(m) for m in await fork.get_history())


async def test_fork_keeps_run_ids_and_takes_a_given_session_id(make_store: MakeStore) -> None:
    store = await make_store()
    await store.append(Message("user", "kept"))
    await store.append(Message("user", "run"), run_id="r")

    fork = await store.fork(session_id="branch")
    await fork.clear_run("r")

    assert fork.session_id == "branch"
    assert texts(await fork.get_history()) == ["kept"]
    assert texts(await store.get_history()) == ["kept", "run"]


# -- token usage ----------------------------------------------------------------


async def test_token_usage_is_set_and_added(make_store: MakeStore) -> None:
    store = await make_store()
    assert await store.get_context_tokens() == (0, 0)

    await store.add_context_tokens(100, 50)
    await store.add_context_tokens(200, 80)
    assert await store.get_context_tokens() == (300, 130)

    await store.set_context_tokens(7, 3)
    assert await store.get_context_tokens() == (7, 3)


async def test_concurrent_token_additions_all_count(make_store: MakeStore) -> None:
    store = await make_store()

    await asyncio.gather(*(store.add_context_tokens(1, 2) for _ in range(40)))

    assert await store.get_context_tokens() == (40, 80)


@pytest.mark.parametrize(
    ("amounts", "error"),
    [
        ((-1, 0), ValueError),
        ((0, 1.5), TypeError),
        ((True, 0), TypeError),
        ((2**63, 0), ValueError),
    ],
)
async def test_bad_token_amounts_are_refused(
    make_store: MakeStore, amounts: tuple[Any, Any], error: type[Exception]
) -> None:
    store = await make_store()
    await store.set_context_tokens(1, 1)

    with pytest.raises(error, match="tokens"):
        await store.add_context_tokens(*amounts)
    with pytest.raises(error, match="tokens"):
        await store.set_context_tokens(*amounts)

    assert await store.get_context_tokens() == (1, 1)


# -- sessions -------------------------------------------------------------------


async def test_session_info_describes_the_session(make_store: MakeStore) -> None:
    store = await make_store(session_id="s1")
    await store.append(Message("system", "be nice"))
    await store.append(Message("assistant", "hello"))
    await store.append(Message("user", [ToolResultBlock("c", "no text block")]))
    await store.append(Message("user", "Q" * 100))
    await store.append(Message("user", "later question"))
    await store.add_context_tokens(30, 4)

    [info] = [i for i in await store.list_sessions() if i.session_id == "s1"]

    assert info.message_count == 5
    assert info.preview == "Q" * 80
    assert (info.input_tokens, info.output_tokens) == (30, 4)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", info.created_at)
    assert datetime.fromisoformat(info.created_at).tzinfo == UTC


async def test_a_session_without_user_text_has_an_empty_preview(make_store: MakeStore) -> None:
    store = await make_store(Message("assistant", "hi"))

    assert (await store.list_sessions())[0].preview == ""


@pytest.mark.parametrize(("session_id", "error"), [("", ValueError), (5, TypeError)])
async def test_bad_session_ids_are_refused(
    make_store: MakeStore, session_id: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match="session_id"):
        await make_store(session_id=session_id)


async def test_a_session_id_is_generated_once(make_store: MakeStore) -> None:
    store = await make_store()

    assert re.fullmatch(r"[0-9a-f]{32}", store.session_id)
    assert store.session_id == store.session_id


async def test_async_with_gives_the_store(make_store: MakeStore) -> None:
    store = await make_store(*numbered(1))

    async with store as entered:
        assert entered is store
        assert texts(await entered.get_history()) == ["m0"]


# -- factories --------------------------------------------------------------------


async def test_from_history_and_from_context_work_for_every_backend(
    backend: str, make_store: MakeStore
) -> None:
    probe = await make_store()  # the backend's class, and its connection if it has one
    cls: type[ContextStore] = type(probe)
    kwargs: dict[str, Any] = {} if backend == "memory" else {"conn": probe.connection}  # type: ignore[attr-defined]

    source = await cls.from_history(numbered(3), **kwargs)
    await source.replace_prefix(1, [Message("user", "S")])
    await source.set_context_tokens(9, 1)
    clone = await cls.from_context(source, **kwargs)

    assert type(source) is type(clone) is cls
    assert texts(await source.get_history()) == ["S", "m1", "m2"]
    assert clone.session_id != source.session_id
    assert await clone.get_history(include_archived=True) == await source.get_history(
        include_archived=True
    )
    assert texts(await clone.get_history()) == ["S", "m1", "m2"]
    assert await clone.get_context_tokens() == (9, 1)


@pytest.mark.parametrize("direction", ["memory to sqlite", "sqlite to memory"])
async def test_from_context_copies_across_backends(conn: SQLiteConnection, direction: str) -> None:
    source: ContextStore
    if direction == "memory to sqlite":
        source, target = MemoryContextStore(numbered(3)), SQLiteContextStore
        kwargs: dict[str, Any] = {"conn": conn}
    else:
        source = await SQLiteContextStore.from_history(numbered(3), conn=conn)
        target, kwargs = MemoryContextStore, {}  # type: ignore[assignment]
    await source.replace_prefix(2, [])

    clone = await target.from_context(source, **kwargs)

    assert isinstance(clone, target)
    assert texts(await clone.get_history()) == ["m2"]
    assert texts(await clone.get_history(include_archived=True)) == ["m0", "m1", "m2"]


# -- snapshot and restore ------------------------------------------------------------


async def a_session_with_runs(make_store: MakeStore) -> ContextStore:
    """Live and archived messages from two runs and none, with token usage."""
    store = await make_store(Message("user", "first question"), session_id="source")
    await store.append_many(numbered(3), run_id="r1")
    await store.replace_prefix(2, [Message("user", "S")])
    await store.append(Message("assistant", "late"), run_id="r2")
    await store.record_usage(A_CALL)
    await store.set_context_tokens(120, 7)
    return store


A_CALL = UsageRecord(
    Usage(100, 5, cached_tokens=60),
    run_id="r2",
    model="model-1",
    estimated_input_tokens=98,
    created_at="2026-11-25T10:00:00.000000+00:00",
)


async def test_snapshot_holds_the_history_archive_run_ids_tokens_and_usage(
    make_store: MakeStore,
) -> None:
    snapshot = await (await a_session_with_runs(make_store)).snapshot()

    assert snapshot.session_id == "source"
    assert [(s.message.text, s.run_id) for s in snapshot.archived] == [
        ("first question", None), ("m0", "r1"),
    ]  # fmt: skip
    assert [(s.message.text, s.run_id) for s in snapshot.messages] == [
        ("S", None), ("m1", "r1"), ("m2", "r1"), ("late", "r2"),
    ]  # fmt: skip
    assert (snapshot.input_tokens, snapshot.output_tokens) == (120, 7)
    assert snapshot.usage == (A_CALL,)


async def test_restore_rebuilds_the_session_through_any_other_backend(
    make_store: MakeStore,
) -> None:
    source = await a_session_with_runs(make_store)
    snapshot = await source.snapshot()
    through_memory = MemoryContextStore()
    await through_memory.restore(snapshot)

    copy = await make_store(session_id="copy")
    await copy.restore(await through_memory.snapshot())

    assert await copy.get_history(include_archived=True) == await source.get_history(
        include_archived=True
    )
    assert await copy.snapshot() == dataclasses.replace(snapshot, session_id="copy")
    assert await copy.count() == 4
    assert await copy.token_count() == await source.token_count()
    [info] = [i for i in await copy.list_sessions() if i.session_id == "copy"]
    assert (info.preview, info.message_count, info.input_tokens) == ("first question", 4, 120)
    assert await copy.get_usage(run_id="r2") == [A_CALL]
    assert await copy.get_context_tokens() == (120, 7)  # the records did not add theirs again
    await copy.clear_run("r1")  # the run ids came along
    assert texts(await copy.get_history(include_archived=True)) == ["first question", "S", "late"]


@pytest.mark.parametrize("held", ["live", "archived"])
async def test_restore_into_a_session_that_holds_messages_writes_nothing(
    make_store: MakeStore, held: str
) -> None:
    store = await make_store(*numbered(2))
    if held == "archived":
        await store.replace_prefix(2, [])
    await store.set_context_tokens(1, 1)
    before = await store.snapshot()

    with pytest.raises(ValueError, match="already holds messages"):
        await store.restore(SessionSnapshot("other", numbered(3), [], 50, 5, usage=[A_CALL]))

    assert await store.snapshot() == before


async def test_restore_into_a_cleared_session_is_allowed(make_store: MakeStore) -> None:
    store = await make_store(*numbered(2))
    await store.get_history()  # a warm cache must not hide what restore writes
    await store.clear()

    await store.restore(SessionSnapshot("any", [StoredMessage(Message("user", "new"), "r")]))

    assert texts(await store.get_history()) == ["new"]
    assert await store.get_context_tokens() == (0, 0)


async def test_restore_refuses_what_is_not_a_snapshot(make_store: MakeStore) -> None:
    store = await make_store()

    with pytest.raises(TypeError, match="SessionSnapshot, not list"):
        await store.restore(numbered(2))  # type: ignore[arg-type]


async def test_a_restore_that_fails_half_way_writes_nothing(
    conn: SQLiteConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pygents_ctx.context.stores import _sqlite_ops

    def broken(db: object, session_id: str) -> str:
        raise sqlite3.OperationalError("disk I/O error")  # after every insert, before commit

    monkeypatch.setattr(_sqlite_ops, "first_preview", broken)
    store = SQLiteContextStore(conn, session_id="half")

    with pytest.raises(sqlite3.OperationalError):
        await store.restore(
            SessionSnapshot("x", numbered(5), numbered(2, "a"), 3, 4, usage=[A_CALL])
        )

    assert await store.snapshot() == SessionSnapshot("half")


def test_a_snapshot_checks_what_it_is_given() -> None:
    snapshot = SessionSnapshot("s", [Message("user", "plain")], iter([]))
    assert snapshot.messages == (StoredMessage(Message("user", "plain"), None),)
    assert snapshot.archived == ()

    with pytest.raises(TypeError, match="record_usage needs a UsageRecord, not Usage"):
        SessionSnapshot("s", usage=[Usage(1, 1)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"messages\[1\] must be a StoredMessage"):
        SessionSnapshot("s", [Message("user", "ok"), "text"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="archived must be an iterable"):
        SessionSnapshot("s", archived=Message("user", "one"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="input_tokens"):
        SessionSnapshot("s", input_tokens=-1)
    with pytest.raises(ValueError, match="session_id"):
        SessionSnapshot("")
    with pytest.raises(TypeError, match=r"StoredMessage\.message must be a Message"):
        StoredMessage("hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="run_id"):
        StoredMessage(Message("user", "hi"), "")
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.session_id = "t"  # type: ignore[misc]


# -- the contract's defaults, for a store that implements only the two methods ----


class ClearableStore(ListStore):
    async def clear(self) -> None:
        self.messages.clear()


def test_a_store_must_implement_append_and_get_history() -> None:
    class Incomplete(ContextStore):
        async def append(self, message: Message, *, run_id: str | None = None) -> None:
            pass

    with pytest.raises(TypeError, match="get_history"):
        Incomplete()  # type: ignore[abstract]


async def test_defaults_give_counts_tokens_sessions_and_batches() -> None:
    store = ListStore()
    await store.append_many([Message("assistant", "hi"), Message("user", "hello there")])
    await store.add_context_tokens(10, 2)
    await store.add_context_tokens(5, 1)

    assert await store.count() == 2
    assert await store.token_count() == fresh_count(Message("assistant", "hi")) + fresh_count(
        Message("user", "hello there")
    )
    assert await store.get_context_tokens() == (15, 3)
    assert await store.list_sessions() == [
        SessionInfo(store.session_id, 2, "hello there", "", 15, 3)
    ]


async def test_default_append_many_passes_the_run_id_on() -> None:
    seen: list[str | None] = []

    class RunStore(ListStore):
        async def append(self, message: Message, *, run_id: str | None = None) -> None:
            seen.append(run_id)

    await RunStore().append_many(numbered(2), run_id="r")

    assert seen == ["r", "r"]


async def test_default_clear_and_clear_run_say_what_to_override() -> None:
    store = ListStore()

    with pytest.raises(NotImplementedError, match=r"override clear\(\)"):
        await store.clear()
    with pytest.raises(NotImplementedError, match=r"override clear_run\(\)"):
        await store.clear_run("r")


async def test_default_fork_copies_into_a_memory_store() -> None:
    store = ListStore()
    await store.append(Message("user", "hello"))
    await store.set_context_tokens(3, 4)

    fork = await store.fork()
    await fork.append(Message("user", "fork only"))

    assert isinstance(fork, MemoryContextStore)
    assert texts(await fork.get_history()) == ["hello", "fork only"]
    assert texts(await store.get_history()) == ["hello"]
    assert await fork.get_context_tokens() == (0, 0)  # spend counts where it was made


async def test_default_replace_prefix_uses_clear_and_append() -> None:
    store = ClearableStore()
    await store.append_many(numbered(3))

    await store.replace_prefix(2, [Message("user", "S")])

    assert texts(await store.get_history()) == ["S", "m2"]
    with pytest.raises(ValueError, match="exceeds"):
        await store.replace_prefix(3, [])
    with pytest.raises(ConcurrentModificationError):
        await store.replace_prefix(1, [Message("user", "T")], expected=numbered(1))
    await store.replace_prefix(1, [Message("user", "T")], expected=[Message("user", "S")])
    assert texts(await store.get_history()) == ["T", "m2"]


async def test_default_replace_prefix_without_clear_fails_before_reading() -> None:
    class Unreadable(ListStore):
        async def get_history(
            self, *, limit: int | None = None, offset: int = 0, include_archived: bool = False
        ) -> list[Message]:
            raise AssertionError("read before the store was found unable to write")

    with pytest.raises(NotImplementedError, match=r"override replace_prefix\(\), or clear\(\)"):
        await Unreadable().replace_prefix(0, [Message("user", "S")])


async def test_default_snapshot_and_restore_use_the_two_methods_and_clear() -> None:
    source = MemoryContextStore(numbered(4))
    await source.append(Message("user", "tagged"), run_id="r")
    await source.replace_prefix(1, [])
    await source.record_usage(A_CALL)
    await source.set_context_tokens(5, 6)
    runs: list[str | None] = []

    class RunStore(ClearableStore):
        async def append(self, message: Message, *, run_id: str | None = None) -> None:
            runs.append(run_id)
            await super().append(message)

    store = RunStore()
    await store.restore(await source.snapshot())
    snapshot = await store.snapshot()

    assert texts([s.message for s in snapshot.messages]) == ["m1", "m2", "m3", "tagged"]
    assert snapshot.archived == ()  # the default replace_prefix keeps no archive
    assert {s.run_id for s in snapshot.messages} == {None}  # nor run ids
    assert (snapshot.input_tokens, snapshot.output_tokens) == (5, 6)
    assert snapshot.usage == (A_CALL,)  # kept by the default record_usage
    assert "r" in runs  # restore passed the run id to append
    with pytest.raises(ValueError, match="already holds messages"):
        await store.restore(await source.snapshot())


async def test_default_restore_into_a_store_without_clear_writes_the_live_history() -> None:
    source = MemoryContextStore(numbered(3))
    await source.replace_prefix(2, [Message("user", "S")])
    store = ListStore()

    await store.restore(await source.snapshot())

    assert texts(store.messages) == ["S", "m2"]  # what the store can hold: no archive


def test_a_store_with_neither_replace_prefix_nor_clear_cannot_be_compacted() -> None:
    from pygents_ctx import AutoCompactStore
    from pygents_ctx.testing import ScriptedSummarizer

    with pytest.raises(TypeError, match="neither replace_prefix\\(\\) nor clear\\(\\)"):
        AutoCompactStore(ListStore(), ScriptedSummarizer())
    AutoCompactStore(ClearableStore(), ScriptedSummarizer())  # the default rewrite will do


async def test_default_restore_archives_through_a_stores_own_replace_prefix() -> None:
    replaced: list[int] = []

    class ArchivingStore(ClearableStore):
        async def replace_prefix(  # type: ignore[override]
            self, count: int, messages: Sequence[Message], *, run_id: str | None = None
        ) -> None:
            replaced.append(count)
            del self.messages[:count]

    store = ArchivingStore()
    await store.restore(SessionSnapshot("s", numbered(3, "live"), numbered(2, "old")))

    assert replaced == [2]
    assert texts(store.messages) == ["live0", "live1", "live2"]


async def test_default_snapshot_of_a_seed_store_has_no_archive() -> None:
    class SeedStore(ListStore):
        async def get_history(self) -> list[Message]:  # type: ignore[override]
            return list(self.messages)

    store = SeedStore()
    await store.append(Message("user", "hi"))

    snapshot = await store.snapshot()

    assert [s.message.text for s in snapshot.messages] == ["hi"]
    assert snapshot.archived == ()
    copy = MemoryContextStore()
    await copy.restore(snapshot)
    assert texts(await copy.get_history()) == ["hi"]


async def test_default_factories_build_the_subclass() -> None:
    store = await ClearableStore.from_history(numbered(2))
    clone = await ClearableStore.from_context(store)

    assert isinstance(clone, ClearableStore)
    assert texts(await clone.get_history()) == ["m0", "m1"]
    with pytest.raises(TypeError, match="ContextStore"):
        await ClearableStore.from_context(["not a store"])  # type: ignore[arg-type]


async def test_default_close_and_async_with_do_nothing_harmful() -> None:
    async with ListStore() as store:
        await store.append(Message("user", "x"))
    await store.close()

    assert texts(await store.get_history()) == ["x"]


# -- value types --------------------------------------------------------------------


def test_session_info_is_frozen_with_zero_token_defaults() -> None:
    info = SessionInfo("abc123", 10, "What is the capital of France?", "2024-01-15 10:30:00")

    assert (info.input_tokens, info.output_tokens) == (0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.message_count = 11  # type: ignore[misc]


def test_history_retention_has_three_policies() -> None:
    assert [r.value for r in HistoryRetention] == ["permanent", "run", "none"]
    assert HistoryRetention("none") is HistoryRetention.NONE
