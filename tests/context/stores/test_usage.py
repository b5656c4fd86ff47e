"""Usage records on every backend: kept in order, per run, added to the session's tokens."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import (
    AutoCompactStore,
    MemoryContextStore,
    Message,
    SQLiteContextStore,
    Usage,
    UsageRecord,
    connect,
)
from pygents_ctx.context.stores import _sqlite_schema
from pygents_ctx.testing import ScriptedSummarizer

from .conftest import MakeStore
from .helpers import ListStore


def record(input_tokens: int, output_tokens: int, **fields: Any) -> UsageRecord:
    return UsageRecord(Usage(input_tokens, output_tokens), **fields)


async def test_records_come_back_in_order_with_every_field(make_store: MakeStore) -> None:
    store = await make_store()
    first = UsageRecord(
        Usage(1_000, 40, cached_tokens=600, cache_write_tokens=300, reasoning_tokens=25),
        run_id="run-1",
        model="claude-x",
        estimated_input_tokens=950,
    )
    second = record(1_200, 60, run_id="run-2", model="gpt-y")

    await store.record_usage(first)
    await store.record_usage(second)

    assert await store.get_usage() == [first, second]


async def test_recording_adds_the_calls_tokens_to_the_session(make_store: MakeStore) -> None:
    store = await make_store()
    await store.set_context_tokens(10, 1)

    await store.record_usage(record(100, 20))
    await store.record_usage(record(300, 40))

    assert await store.get_context_tokens() == (410, 61)


async def test_usage_can_be_read_for_one_run(make_store: MakeStore) -> None:
    store = await make_store()
    for run_id in ("a", "b", "a", None):
        await store.record_usage(record(10, 1, run_id=run_id))

    assert [r.run_id for r in await store.get_usage(run_id="a")] == ["a", "a"]
    assert len(await store.get_usage()) == 4
    assert await store.get_usage(run_id="missing") == []
    with pytest.raises(TypeError, match="run_id"):
        await store.get_usage(run_id=3)  # type: ignore[arg-type]


async def test_clearing_messages_keeps_what_was_spent(make_store: MakeStore) -> None:
    store = await make_store(Message("user", "hi"))
    await store.append(Message("assistant", "hello"), run_id="r")
    await store.record_usage(record(50, 5, run_id="r"))

    await store.clear_run("r")
    await store.clear()

    assert [r.usage for r in await store.get_usage()] == [Usage(50, 5)]


async def test_a_fork_counts_only_its_own_calls_so_spend_adds_up_once(
    make_store: MakeStore,
) -> None:
    store = await make_store(Message("user", "hi"))
    await store.record_usage(record(50, 5, run_id="r"))

    fork = await store.fork()
    await fork.record_usage(record(70, 7))
    twice = await fork.fork()  # a fork of a fork starts empty too

    assert [r.usage for r in await fork.get_usage()] == [Usage(70, 7)]
    assert [r.usage for r in await store.get_usage()] == [Usage(50, 5)]
    assert (await fork.get_context_tokens(), await store.get_context_tokens()) == (
        (70, 7),
        (50, 5),
    )
    assert (await twice.get_usage(), await twice.get_context_tokens()) == ([], (0, 0))
    # Adding up every session's records counts each call once.
    spent = [r.usage for s in (store, fork, twice) for r in await s.get_usage()]
    assert sum(spent, Usage()) == Usage(120, 12)


async def test_from_context_copies_records_and_totals(make_store: MakeStore) -> None:
    source = await make_store(Message("user", "hi"))
    await source.record_usage(record(50, 5, run_id="r", model="m"))
    await source.add_context_tokens(1, 1)  # reported without a record

    clone = await MemoryContextStore.from_context(source)

    assert await clone.get_usage() == await source.get_usage()
    assert await clone.get_context_tokens() == (51, 6)


async def test_concurrent_records_all_land(make_store: MakeStore) -> None:
    store = await make_store()

    await asyncio.gather(*(store.record_usage(record(3, 1)) for _ in range(20)))

    assert len(await store.get_usage()) == 20
    assert await store.get_context_tokens() == (60, 20)


async def test_a_bad_record_is_refused_and_changes_nothing(make_store: MakeStore) -> None:
    store = await make_store()

    with pytest.raises(TypeError, match="UsageRecord"):
        await store.record_usage(Usage(1, 1))  # type: ignore[arg-type]

    assert await store.get_usage() == []
    assert await store.get_context_tokens() == (0, 0)


def test_usage_adds_up_and_checks_its_parts() -> None:
    total = sum((Usage(10, 2, cached_tokens=4), Usage(5, 1, cache_write_tokens=5)), Usage())

    assert total == Usage(15, 3, cached_tokens=4, cache_write_tokens=5)
    assert total.total_tokens == 18
    assert Usage.from_dict(total.to_dict()) == total
    with pytest.raises(ValueError, match="parts of input_tokens"):
        Usage(10, 0, cached_tokens=8, cache_write_tokens=3)
    with pytest.raises(ValueError, match="at least 0"):
        Usage(-1)
    with pytest.raises(TypeError, match="int"):
        Usage(True)
    with pytest.raises(ValueError, match="no field 'tokens'"):
        Usage.from_dict({"tokens": 3})


def test_reasoning_tokens_are_a_part_of_the_output_and_older_dicts_still_read() -> None:
    total = Usage(10, 8, reasoning_tokens=6) + Usage(5, 4, reasoning_tokens=1)

    assert total == Usage(15, 12, reasoning_tokens=7)
    assert Usage.from_dict(total.to_dict()) == total
    older = {"input_tokens": 15, "output_tokens": 12, "cached_tokens": 0, "cache_write_tokens": 0}
    assert Usage.from_dict(older) == Usage(15, 12)
    with pytest.raises(ValueError, match=r"reasoning_tokens \(4\) is a part of output_tokens"):
        Usage(10, 3, reasoning_tokens=4)


async def test_an_older_sqlite_file_keeps_its_records_and_gains_reasoning_tokens(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    _sqlite_schema.migrate(db, _sqlite_schema.MIGRATIONS[:7])
    db.execute(
        "INSERT INTO pygents_usage (session_id, model, input_tokens, output_tokens, created_at) "
        "VALUES ('old', 'o3', 9, 4, '2025-01-01T00:00:00.000000+00:00')"
    )
    db.close()

    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="old")
        await store.record_usage(UsageRecord(Usage(5, 3, reasoning_tokens=2), model="o3"))

        assert [r.usage for r in await store.get_usage()] == [
            Usage(9, 4),
            Usage(5, 3, reasoning_tokens=2),
        ]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"usage": (1, 1)}, TypeError),
        ({"run_id": 5}, TypeError),
        ({"model": None}, TypeError),
        ({"estimated_input_tokens": -3}, ValueError),
        ({"call_id": 7}, TypeError),
        ({"parent_session": b"chat", "call_id": "c"}, TypeError),
        ({"subagent_session": "s"}, ValueError),  # a link without its call
        ({"parent_session": "chat"}, ValueError),
    ],
)
def test_a_record_checks_its_fields(fields: dict[str, Any], error: type[Exception]) -> None:
    arguments: dict[str, Any] = {"usage": Usage(1, 1), **fields}
    usage = arguments.pop("usage")

    with pytest.raises(error, match="UsageRecord"):
        UsageRecord(usage, **arguments)


async def test_auto_compact_store_compacts_on_a_recorded_call_over_its_limit() -> None:
    inner = MemoryContextStore(
        [Message("user" if i % 2 == 0 else "assistant", f"message {i} " * 20) for i in range(6)]
    )
    store = AutoCompactStore(inner, ScriptedSummarizer(["summary"]), keep_recent=2, max_tokens=500)

    await store.record_usage(record(400, 10, run_id="r"))
    assert await store.count() == 6  # under the limit: nothing happens
    await store.record_usage(record(800, 10, run_id="r"))

    assert await store.count() == 4  # summary, bridge, and the two kept messages
    assert [r.usage.input_tokens for r in await store.get_usage(run_id="r")] == [400, 800]


async def test_a_version_1_sqlite_file_gains_the_usage_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    _sqlite_schema.migrate(db, _sqlite_schema.MIGRATIONS[:1])
    db.execute(
        "INSERT INTO pygents_sessions (session_id, created_at, input_tokens) "
        "VALUES ('old', '2025-01-01T00:00:00.000000+00:00', 7)"
    )
    db.close()

    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="old")
        await store.record_usage(record(5, 1))

        assert await store.get_context_tokens() == (12, 1)
        assert [r.usage for r in await store.get_usage()] == [Usage(5, 1)]


async def test_a_custom_store_gets_working_defaults() -> None:
    store, other = ListStore(), ListStore()
    await store.record_usage(record(9, 2, run_id="r"))

    assert [r.usage for r in await store.get_usage(run_id="r")] == [Usage(9, 2)]
    assert await store.get_context_tokens() == (9, 2)
    assert await other.get_usage() == []  # records are per instance


def test_a_record_round_trips_through_its_dict_and_refuses_unknown_fields() -> None:
    full = UsageRecord(
        Usage(1_000, 40, cached_tokens=600),
        run_id="run-1",
        model="m",
        estimated_input_tokens=950,
        created_at="2026-11-25T10:00:00.000000+00:00",
    )

    assert UsageRecord.from_dict(full.to_dict()) == full
    assert UsageRecord.from_dict({"usage": {"input_tokens": 3}}).usage == Usage(3, 0)
    with pytest.raises(ValueError, match="UsageRecord has no field 'cost'"):
        UsageRecord.from_dict({"usage": {}, "cost": 0.1})
    with pytest.raises(TypeError, match=r"UsageRecord\.usage must be a dict of amounts"):
        UsageRecord.from_dict({"model": "m"})
    with pytest.raises(TypeError, match=r"UsageRecord\.run_id must be a str or None"):
        UsageRecord.from_dict({"usage": {}, "run_id": 5})


SUB_AGENT_CALL = UsageRecord(
    Usage(300, 20),
    run_id="sub-run",
    model="m",
    parent_session="chat",
    call_id="call_1",
    subagent_session="sub-1",
)


async def test_a_sub_agents_link_is_kept_and_read_back(make_store: MakeStore) -> None:
    store = await make_store(session_id="chat")
    await store.record_usage(record(100, 10))
    await store.record_usage(SUB_AGENT_CALL)
    await store.record_usage(replace(SUB_AGENT_CALL, subagent_session=None))

    records = await store.get_usage()
    assert records[1:] == [SUB_AGENT_CALL, replace(SUB_AGENT_CALL, subagent_session=None)]
    assert (records[0].parent_session, records[0].call_id, records[0].subagent_session) == (
        None,
        None,
        None,
    )
    assert await store.get_context_tokens() == (700, 50)  # the sub-agent's spend counts here
    assert await store.get_usage() == records  # read again: the same


def test_a_linked_record_round_trips_through_its_dict() -> None:
    data = SUB_AGENT_CALL.to_dict()

    assert (data["parent_session"], data["call_id"], data["subagent_session"]) == (
        "chat",
        "call_1",
        "sub-1",
    )
    assert UsageRecord.from_dict(data) == SUB_AGENT_CALL
    assert "call_id" not in record(1, 1).to_dict()  # a session's own call: the fields of before


async def test_an_older_sqlite_file_gains_the_link_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    _sqlite_schema.migrate(db, _sqlite_schema.MIGRATIONS[:6])
    db.execute(
        "INSERT INTO pygents_sessions (session_id, created_at) "
        "VALUES ('old', '2025-01-01T00:00:00.000000+00:00')"
    )
    db.execute(
        "INSERT INTO pygents_usage (session_id, model, input_tokens, output_tokens, created_at) "
        "VALUES ('old', 'm', 5, 1, '2025-01-01T00:00:00.000000+00:00')"
    )
    db.close()

    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="old")
        await store.record_usage(SUB_AGENT_CALL)

        old, new = await store.get_usage()
        assert (old.usage, old.call_id) == (Usage(5, 1), None)
        assert new == SUB_AGENT_CALL


async def test_a_sub_agents_large_call_does_not_compact_its_callers_conversation() -> None:
    inner = MemoryContextStore(
        [Message("user" if i % 2 == 0 else "assistant", f"message {i} " * 20) for i in range(6)]
    )
    store = AutoCompactStore(inner, ScriptedSummarizer(["summary"]), keep_recent=2, max_tokens=500)

    await store.record_usage(replace(SUB_AGENT_CALL, usage=Usage(5_000, 10)))

    assert await store.count() == 6  # its input was the sub-agent's conversation, not this one
    assert len(await store.get_usage()) == 1
