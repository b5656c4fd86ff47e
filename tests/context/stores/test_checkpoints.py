"""Agents' checkpoints in every store, and `Agent.rewind` over them: one contract suite.

A checkpoint is kept at a point of the live history (after `history[:n]`); it
stays while the messages before that point do, is shared by forks made at or
after it, and goes with whatever removes a message before it. `Agent.rewind(to)`
gives the agent back the state saved at message `to`, or says it could not.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    ContextConfig,
    ContextItem,
    ContextPool,
    ContextQueue,
    Message,
    Rewind,
    Tool,
    Turn,
    tool,
)
from pygents_ctx.context.stores import (
    AutoCompactStore,
    ContextStore,
    MemoryContextStore,
    SessionSnapshot,
    SQLiteConnection,
    SQLiteContextStore,
    StoredCheckpoint,
    connect,
)
from pygents_ctx.context.stores import _postgres_schema as postgres_schema
from pygents_ctx.context.stores import _sqlite_schema as sqlite_schema
from pygents_ctx.context.stores._checkpoint_sql import POSTGRES_TABLE, SQLITE_TABLE
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.errors import SafeExecutionError, UnregisteredToolError
from pygents_ctx.registry import ToolRegistry
from pygents_ctx.testing import ScriptedSummarizer
from tests import postgres_server

from .conftest import MakeStore
from .helpers import ListStore, numbered, texts
from .test_postgres import fresh_database

NOW = "2026-01-15T10:30:00.123456+00:00"


async def states(store: ContextStore, agent: str = "a") -> list[bytes | None]:
    """The agent's checkpoint at each message of the live history, 0 to the count."""
    return [await store.get_checkpoint(agent, at) for at in range(await store.count() + 1)]


async def data_rows(store: ContextStore) -> int | None:
    """How many distinct states the database keeps (None for the memory store)."""
    sql = "SELECT count(*) FROM pygents_checkpoint_data"
    if isinstance(store, SQLiteContextStore):
        return int(await store.connection.run(lambda db: db.execute(sql).fetchone()[0]))
    if isinstance(store, PostgresContextStore):

        async def count(db: Any) -> int:
            cursor = await db.execute(sql)
            return int((await cursor.fetchone())[0])

        return await store.connection.run(count)
    return None


# -- where a checkpoint is found ----------------------------------------------------------


async def test_a_checkpoint_is_found_at_its_message_and_nowhere_else(
    make_store: MakeStore,
) -> None:
    store = await make_store(*numbered(3))
    assert await store.save_checkpoint("a", b"three") == 3
    await store.append_many(numbered(2, "n"))
    assert await store.save_checkpoint("a", b"five") == 5
    assert await store.save_checkpoint("b", b"other agent") == 5

    assert await states(store) == [None, None, None, b"three", None, b"five"]
    assert await states(store, "b") == [None] * 5 + [b"other agent"]
    assert await states(store, "nobody") == [None] * 6


async def test_a_second_checkpoint_at_the_same_message_replaces_the_first(
    make_store: MakeStore,
) -> None:
    store = await make_store(*numbered(2))
    await store.save_checkpoint("a", b"first")
    await store.save_checkpoint("a", b"second")

    assert await store.get_checkpoint("a", 2) == b"second"
    assert await data_rows(store) in (None, 1)  # the replaced state is not kept


async def test_an_empty_session_takes_a_checkpoint_at_message_0(make_store: MakeStore) -> None:
    store = await make_store()
    assert await store.save_checkpoint("a", b"empty") == 0
    await store.append(Message("user", "hi"))
    assert await states(store) == [b"empty", None]


async def test_equal_states_are_kept_once(make_store: MakeStore) -> None:
    store = await make_store()
    for text in ("a", "b", "c"):
        await store.append(Message("user", text))
        await store.save_checkpoint("a", b"unchanged")
    other = await make_store(session_id="other")
    await other.save_checkpoint("a", b"unchanged")

    assert await states(store) == [None, b"unchanged", b"unchanged", b"unchanged"]
    assert await data_rows(store) in (None, 1)


# -- rewinds, compactions, runs and clears ------------------------------------------------


async def test_a_rewind_drops_the_checkpoints_after_its_point_and_keeps_the_one_at_it(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    for at in range(4):
        await store.save_checkpoint("a", f"s{at}".encode())
        await store.append(Message("user", f"m{at}"))

    assert await store.rewind(2) == 2
    assert await states(store) == [b"s0", b"s1", b"s2"]
    await store.append_many(numbered(2, "again"))  # the same positions once more
    assert await states(store) == [b"s0", b"s1", b"s2", None, None]
    assert await data_rows(store) in (None, 3)


async def test_a_compaction_keeps_the_checkpoints_from_its_boundary_on(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    for at in range(5):
        await store.save_checkpoint("a", f"s{at}".encode())
        await store.append(Message("user", f"m{at}"))

    await store.replace_prefix(3, [Message("user", "summary")])
    # Before the summary nothing; after it, the state after m2 (what it summarizes).
    assert await states(store) == [None, b"s3", b"s4", None]
    await store.replace_prefix(0, [Message("system", "put in front")])
    assert await states(store) == [None, None, b"s3", b"s4", None]


async def test_clear_drops_every_checkpoint_and_clear_run_those_after_its_first_message(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    for at, run in enumerate(["r1", "r2", "r1", "r2"]):
        await store.save_checkpoint("a", f"s{at}".encode())
        await store.append(Message("user", f"m{at}"), run_id=run)
    await store.save_checkpoint("a", b"s4")

    await store.clear_run("r2")  # m1 and m3 go: what saw m1 goes too
    assert texts(await store.get_history()) == ["m0", "m2"]
    assert await states(store) == [b"s0", b"s1", None]

    await store.clear()
    await store.append(Message("user", "fresh"))
    assert await states(store) == [None, None]
    assert await data_rows(store) in (None, 0)


# -- forks and erasures -------------------------------------------------------------------


async def test_a_fork_has_the_checkpoints_up_to_its_point_and_keeps_them(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    for at in range(4):
        await store.save_checkpoint("a", f"s{at}".encode())
        await store.append(Message("user", f"m{at}"))
    await store.save_checkpoint("a", b"s4")

    fork = await store.fork(at=2)
    whole = await store.fork()
    assert await states(fork) == [b"s0", b"s1", b"s2"]
    assert await states(whole) == [b"s0", b"s1", b"s2", b"s3", b"s4"]

    await fork.append(Message("user", "fork's own"))
    await fork.save_checkpoint("a", b"fork's")
    await store.rewind(0)
    await store.erase(session=store.session_id)
    assert await states(fork) == [b"s0", b"s1", b"s2", b"fork's"]
    assert await states(whole) == [b"s0", b"s1", b"s2", b"s3", b"s4"]
    assert await data_rows(fork) in (None, 6)  # shared with the forks: nothing copied


async def test_an_erased_session_takes_its_checkpoints_with_it(make_store: MakeStore) -> None:
    store = await make_store(*numbered(2))
    await store.save_checkpoint("a", b"gone with it")
    kept = await make_store(*numbered(1), session_id="kept")
    await kept.save_checkpoint("a", b"stays")

    assert await store.erase(session=store.session_id) == 1
    assert await store.get_checkpoint("a", 0) is None
    assert await states(kept) == [None, b"stays"]
    assert await data_rows(store) in (None, 1)


async def test_a_compacting_store_keeps_checkpoints_in_the_one_it_wraps(
    make_store: MakeStore,
) -> None:
    inner = await make_store(*numbered(2))
    store = AutoCompactStore(inner, ScriptedSummarizer(["summary"]), keep_recent=1)
    await store.save_checkpoint("a", b"state")
    assert await inner.get_checkpoint("a", 2) == b"state"
    assert await store.get_checkpoint("a", 2) == b"state"


# -- listing, snapshots and restores ----------------------------------------------------


async def test_the_listed_checkpoints_are_those_a_rewind_finds_in_order(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    await store.save_checkpoint("b", b"b at 0")
    for at, run in enumerate(["r1", "r2", "r1"]):
        await store.append(Message("user", f"m{at}"), run_id=run)
        await store.save_checkpoint("a", f"a at {at + 1}".encode())
    await store.save_checkpoint("b", b"b at 3!")
    await store.clear_run("r2")  # m1 goes: a's checkpoints at 2 and 3 go with it

    listed = await store.list_checkpoints()
    assert [(c.agent, c.at, c.size) for c in listed] == [("b", 0, 6), ("a", 1, 6)]
    assert [c.at for c in await store.list_checkpoints("b")] == [0]
    assert await store.list_checkpoints("nobody") == []
    for info in listed:
        assert await store.get_checkpoint(info.agent, info.at) is not None
        assert datetime.fromisoformat(info.created_at).utcoffset() == timedelta(0)
    assert listed[0].created_at < listed[1].created_at


async def test_a_fork_lists_the_checkpoints_up_to_its_point_with_their_times(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    for at in range(3):
        await store.save_checkpoint("a", f"s{at}".encode())
        await store.append(Message("user", f"m{at}"))
    await store.append(Message("user", "gap"))
    await store.rewind(3)  # positions are no longer 0, 1, 2, ... after a compaction
    await store.replace_prefix(1, [Message("user", "summary"), Message("user", "more")])

    fork = await store.fork(at=3)
    assert [(c.at, c.size) for c in await fork.list_checkpoints()] == [(2, 2), (3, 2)]
    assert await fork.list_checkpoints() == (await store.list_checkpoints())[:2]


async def test_a_snapshot_carries_the_checkpoints_and_a_restore_keeps_them(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    for at in range(3):
        await store.append(Message("user", f"m{at}"), run_id="r1")
        await store.save_checkpoint("a", f"s{at}".encode())
        await store.save_checkpoint("b", b"unchanged")
    await store.replace_prefix(1, [Message("user", "summary")])

    snapshot = await store.snapshot()
    assert [(c.agent, c.at, c.state) for c in snapshot.checkpoints] == [
        ("a", 1, b"s0"),
        ("b", 1, b"unchanged"),
        ("a", 2, b"s1"),
        ("b", 2, b"unchanged"),
        ("a", 3, b"s2"),
        ("b", 3, b"unchanged"),
    ]
    copy = await make_store(session_id="copy")
    await copy.restore(snapshot)
    assert await copy.list_checkpoints() == await store.list_checkpoints()
    assert await states(copy) == await states(store)
    assert (await copy.snapshot()).checkpoints == snapshot.checkpoints
    await copy.append(Message("user", "after"))
    assert await states(copy, "b") == [None, b"unchanged", b"unchanged", b"unchanged", None]
    assert await data_rows(copy) in (None, 4)  # each distinct state once, shared


async def test_a_restore_into_another_backend_keeps_the_checkpoints(
    make_store: MakeStore, conn: SQLiteConnection
) -> None:
    store = await make_store(*numbered(2))
    await store.save_checkpoint("a", b"at two")
    copy = SQLiteContextStore(conn, session_id="elsewhere")
    await copy.restore(await store.snapshot())
    assert await states(copy) == [None, None, b"at two"]
    back = MemoryContextStore()
    await back.restore(await copy.snapshot())
    assert await back.list_checkpoints() == await store.list_checkpoints()


async def test_a_store_of_your_own_lists_none_and_a_restore_into_it_keeps_the_messages(
    make_store: MakeStore,
) -> None:
    store = await make_store(*numbered(2))
    await store.save_checkpoint("a", b"state")
    own = ListStore()
    await own.restore(await store.snapshot())
    assert texts(own.messages) == ["m0", "m1"]
    assert await own.list_checkpoints() == []
    assert (await own.snapshot()).checkpoints == ()


class CheckpointListStore(MemoryContextStore):
    """A store of your own that keeps checkpoints through the defaults of the rest."""

    restore = ContextStore.restore
    snapshot = ContextStore.snapshot


async def test_the_default_restore_saves_each_checkpoint_at_its_message() -> None:
    source = MemoryContextStore()
    await source.save_checkpoint("a", b"at 0")
    await source.append_many(numbered(2), run_id="r1")
    await source.save_checkpoint("a", b"at 2")
    await source.save_checkpoint("b", b"b at 2")
    await source.append(Message("user", "last"), run_id="r2")
    await source.save_checkpoint("a", b"at 3")

    copy = CheckpointListStore()
    await copy.restore(await source.snapshot())
    assert await states(copy) == [b"at 0", None, b"at 2", b"at 3"]
    assert await states(copy, "b") == [None, None, b"b at 2", None]
    snapshot = await copy.snapshot()
    assert [(c.agent, c.at) for c in snapshot.checkpoints] == [
        ("a", 0),
        ("a", 2),
        ("b", 2),
        ("a", 3),
    ]
    assert texts([s.message for s in snapshot.messages]) == ["m0", "m1", "last"]


@pytest.mark.parametrize(
    ("checkpoints", "match"),
    [
        ([StoredCheckpoint("a", 3, NOW, b"x")], r"checkpoints\[0\] is at message 3, past the 2"),
        (
            [StoredCheckpoint("a", 1, NOW, b"x"), StoredCheckpoint("a", 1, NOW, b"y")],
            "two checkpoints at message 1",
        ),
        (["not one"], r"checkpoints\[0\] must be a StoredCheckpoint"),
    ],
)
async def test_a_snapshot_with_a_checkpoint_at_no_message_is_refused(
    checkpoints: list[Any], match: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        SessionSnapshot("s", numbered(2), checkpoints=checkpoints)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (("a", -1, NOW, b"x"), "at must be at least 0"),
        (("a", True, NOW, b"x"), "at must be an int"),
        (("a", 0, "yesterday", b"x"), "created_at must be an ISO 8601 time with a time zone"),
        (("a", 0, "2025-01-15T10:30:00", b"x"), "with a time zone"),
        (("", 0, NOW, b"x"), "agent must not be empty"),
        (("a", 0, NOW, b""), "must not be empty"),
    ],
)
def test_a_bad_stored_checkpoint_names_its_field(fields: tuple[Any, ...], match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        StoredCheckpoint(*fields)


# -- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "state", "error"),
    [
        (1, b"x", TypeError),
        ("", b"x", ValueError),
        ("a\x00b", b"x", ValueError),
        ("a", "text, not bytes", TypeError),
        ("a", b"", ValueError),
    ],
)
async def test_a_bad_checkpoint_is_refused_and_writes_nothing(
    make_store: MakeStore, agent: Any, state: Any, error: type[Exception]
) -> None:
    store = await make_store(*numbered(1))
    with pytest.raises(error):
        await store.save_checkpoint(agent, state)
    assert await data_rows(store) in (None, 0)


@pytest.mark.parametrize(("at", "error"), [(-1, ValueError), (3, ValueError), ("1", TypeError)])
async def test_a_checkpoint_at_no_message_is_an_error_naming_the_range(
    make_store: MakeStore, at: Any, error: type[Exception]
) -> None:
    store = await make_store(*numbered(2))
    with pytest.raises(error, match="get_checkpoint"):
        await store.get_checkpoint("a", at)


async def test_a_store_of_your_own_keeps_no_checkpoints_and_says_so() -> None:
    store = ListStore()
    with pytest.raises(NotImplementedError, match="keeps no checkpoints"):
        await store.save_checkpoint("a", b"x")
    assert await store.get_checkpoint("a", 0) is None
    with pytest.raises(ValueError, match="keeps checkpoints"):
        ContextConfig(store, checkpoints=True)


# -- any program: the checkpoints of a model of copied sessions -------------------------------

sessions_made = st.integers(0, 2)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), sessions_made, st.sampled_from([None, "r1", "r2"])),
        st.tuples(st.just("append"), sessions_made, st.sampled_from([None, "r1", "r2"])),
        st.tuples(st.just("checkpoint"), sessions_made, st.sampled_from(["a", "b"])),
        st.tuples(st.just("checkpoint"), sessions_made, st.sampled_from(["a", "b"])),
        st.tuples(st.just("fork"), sessions_made, st.integers(0, 12)),
        st.tuples(st.just("rewind"), sessions_made, st.integers(0, 12)),
        st.tuples(st.just("compact"), sessions_made, st.integers(0, 12)),
        st.tuples(st.just("clear_run"), sessions_made, st.sampled_from(["r1", "r2"])),
        st.tuples(st.just("clear"), sessions_made, st.none()),
    ),
    max_size=30,
)


class Model:
    """A session's live history (run ids) and its checkpoints, as copies behave."""

    def __init__(self, runs: list[str | None] | None = None, saved: Any = None) -> None:
        self.runs: list[str | None] = list(runs or [])
        self.saved: dict[str, dict[int, bytes]] = {
            agent: dict(states) for agent, states in (saved or {}).items()
        }

    def keep(self, keep: Any) -> None:
        """Keep the checkpoints at the messages `keep(at)` gives a new index for."""
        self.saved = {
            agent: {keep(at): state for at, state in states.items() if keep(at) is not None}
            for agent, states in self.saved.items()
        }


async def run_program(program: list[tuple[Any, ...]], make: Any) -> None:
    stores: list[ContextStore] = [await make(uuid.uuid4().hex)]
    models = [Model()]
    for step, (name, which, arg) in enumerate(program):
        index = which % len(stores)
        store, model = stores[index], models[index]
        count = len(model.runs)
        if name == "append":
            await store.append(Message("user", f"s{step}"), run_id=arg)
            model.runs.append(arg)
        elif name == "checkpoint":
            state = f"{arg} at step {step % 4}".encode()  # repeated: shared bytes
            assert await store.save_checkpoint(arg, state) == count
            model.saved.setdefault(arg, {})[count] = state
        elif name == "fork":
            at = arg % (count + 1)
            stores.append(await store.fork(at=at))
            fork = Model(model.runs[:at], model.saved)
            fork.keep(lambda n, at=at: n if n <= at else None)
            models.append(fork)
        elif name == "rewind":
            to = arg % (count + 1)
            await store.rewind(to)
            del model.runs[to:]
            model.keep(lambda n, to=to: n if n <= to else None)
        elif name == "compact":
            cut = arg % (count + 1)
            await store.replace_prefix(cut, [Message("user", f"sum{step}")], run_id="r1")
            model.runs[:cut] = ["r1"]
            first = cut if cut else 1  # with nothing archived, message 0 is a new one's
            model.keep(lambda n, cut=cut, first=first: n - cut + 1 if n >= first else None)
        elif name == "clear_run":
            gone = [i for i, run in enumerate(model.runs) if run == arg]
            await store.clear_run(arg)
            model.runs = [run for run in model.runs if run != arg]
            if gone:
                model.keep(lambda n, first=gone[0]: n if n <= first else None)
        else:
            await store.clear()
            model.runs, model.saved = [], {}
        for session, expected in zip(stores, models, strict=True):
            assert await session.count() == len(expected.runs), (step, name)
            for agent in ("a", "b"):
                want = [
                    expected.saved.get(agent, {}).get(at) for at in range(len(expected.runs) + 1)
                ]
                assert await states(session, agent) == want, (step, name, agent)
            listed = [(c.at, c.agent) for c in await session.list_checkpoints()]
            assert listed == sorted(
                (at, agent) for agent, saved in expected.saved.items() for at in saved
            ), (step, name)
    for store in stores:  # a copy made by restore(snapshot()) finds the same ones
        copy = await make(uuid.uuid4().hex)
        await copy.restore(await store.snapshot())
        assert await copy.list_checkpoints() == await store.list_checkpoints()
        for agent in ("a", "b"):
            assert await states(copy, agent) == await states(store, agent)


def no_orphans(db: sqlite3.Connection) -> tuple[int, int]:
    """(states no checkpoint names, checkpoints naming no state)."""
    orphans = db.execute(
        "SELECT count(*) FROM pygents_checkpoint_data WHERE digest NOT IN "
        "(SELECT digest FROM pygents_checkpoints)"
    ).fetchone()[0]
    dangling = db.execute(
        "SELECT count(*) FROM pygents_checkpoints WHERE digest NOT IN "
        "(SELECT digest FROM pygents_checkpoint_data)"
    ).fetchone()[0]
    return orphans, dangling


CHECKPOINT_FORK_COMPACT = [
    *[("append", 0, "r1"), ("checkpoint", 0, "a")] * 4,
    ("fork", 0, 3),
    ("compact", 0, 2),
    ("clear_run", 1, "r1"),
    ("rewind", 0, 1),
]


@settings(max_examples=60, deadline=None)
@example(program=CHECKPOINT_FORK_COMPACT)
@given(program=operations)
def test_any_program_keeps_the_checkpoints_a_copy_would_in_memory_and_sqlite(
    program: list[tuple[Any, ...]],
) -> None:
    async def main() -> None:
        await run_program(program, lambda sid: asyncio.sleep(0, MemoryContextStore(session_id=sid)))
        with tempfile.TemporaryDirectory() as tmp:
            async with connect(Path(tmp) / "ctx.db") as conn:
                await run_program(
                    program, lambda sid: asyncio.sleep(0, SQLiteContextStore(conn, session_id=sid))
                )
                assert await conn.run(no_orphans) == (0, 0)

    asyncio.run(main())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(program=CHECKPOINT_FORK_COMPACT)
@given(program=operations)
def test_any_program_keeps_the_checkpoints_a_copy_would_in_postgres(
    postgres: postgres_server.PostgresServer, program: list[tuple[Any, ...]]
) -> None:
    async def main() -> None:
        async with connect_postgres(postgres.dsn) as conn:
            await run_program(
                program, lambda sid: asyncio.sleep(0, PostgresContextStore(conn, session_id=sid))
            )

            async def orphans(db: Any) -> Any:
                cursor = await db.execute(
                    "SELECT count(*) FROM pygents_checkpoint_data WHERE digest NOT IN "
                    "(SELECT digest FROM pygents_checkpoints)"
                )
                return (await cursor.fetchone())[0]

            assert await conn.run(orphans) == 0

    asyncio.run(main())


# -- older databases --------------------------------------------------------------------


async def test_an_older_sqlite_file_gets_the_checkpoint_tables_and_keeps_its_sessions(
    db_path: Path,
) -> None:
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    before = sqlite_schema.MIGRATIONS.index(SQLITE_TABLE)
    sqlite_schema.migrate(db, sqlite_schema.MIGRATIONS[:before])
    db.close()
    async with connect(db_path) as conn:
        await SQLiteContextStore(conn, session_id="old").append_many(numbered(2))
    # Written by the older version: its tables only (the newer ones are dropped).
    db = sqlite3.connect(db_path, isolation_level=None)
    for table in ("pygents_checkpoints", "pygents_checkpoint_data"):
        db.execute(f"DROP TABLE {table}")
    db.execute("UPDATE pygents_schema SET version = ?", (before,))
    db.close()

    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="old")
        assert await store.save_checkpoint("a", b"after the upgrade") == 2
        assert await states(store) == [None, None, b"after the upgrade"]
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT version FROM pygents_schema").fetchall() == [
        (sqlite_schema.SCHEMA_VERSION,)
    ]
    db.close()


async def test_an_older_postgres_database_gets_the_checkpoint_tables(
    postgres: postgres_server.PostgresServer,
) -> None:
    with fresh_database(postgres) as dsn:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
            before = postgres_schema.MIGRATIONS.index(POSTGRES_TABLE)
            await postgres_schema.migrate(db, postgres_schema.MIGRATIONS[:before])
            await db.execute("INSERT INTO pygents_sessions (session_id) VALUES ('old')")
        async with connect_postgres(dsn) as conn:
            store = PostgresContextStore(conn, session_id="old")
            await store.append_many(numbered(2))
            assert await store.save_checkpoint("a", b"after the upgrade") == 2
            assert await states(store) == [None, None, b"after the upgrade"]


# -- Agent.rewind: the store and the agent together ---------------------------------------


def note_tool() -> Tool[..., Any]:
    """The tool the agents here have, in the test's registry."""
    try:
        return ToolRegistry.current().get("note")
    except UnregisteredToolError:

        @tool()
        async def note(text: str) -> None:
            """Note something."""

        return note


async def agent_on(store: ContextStore, name: str = "helper") -> Agent:
    return Agent(
        name,
        "takes notes",
        [note_tool()],
        context_queue=ContextQueue(limit=50),
        context_pool=ContextPool(limit=5),
        context=ContextConfig(store),
    )


async def say(agent: Agent, text: str) -> None:
    """What a run does with a message: the store, then the agent's queue."""
    assert agent.context is not None
    await agent.context.store.append(Message("user", text))
    await agent.context_queue.append(ContextItem(Message("user", text)))


def held(agent: Agent) -> tuple[list[Any], list[Any], list[Any]]:
    return (
        [turn.kwargs for turn in agent.turns],
        [item.content.text for item in agent.context_queue],
        [item.id for item in agent.context_pool],
    )


async def test_a_rewind_gives_the_agent_its_state_at_the_message(make_store: MakeStore) -> None:
    agent = await agent_on(await make_store())
    await say(agent, "first")
    await agent.context_pool.add(ContextItem("fact", "a fact", id="f1"))
    await agent.put(Turn(note_tool(), kwargs={"text": "later"}))
    assert await agent.checkpoint() == 1
    then = held(agent)
    await say(agent, "second")
    await say(agent, "third")
    await agent.context_pool.add(ContextItem("more", "another fact", id="f2"))
    await agent.context_pool.remove("f1")
    agent._turns.clear()

    rewound = await agent.rewind(1)

    assert rewound == Rewind(removed=2, restored=True)
    assert held(agent) == then
    assert texts(await agent.context.store.get_history()) == ["first"]  # type: ignore[union-attr]
    assert agent.context_queue.limit == 50
    assert agent.context_pool.limit == 5


async def test_a_rewind_where_no_checkpoint_is_rewinds_the_transcript_and_says_so(
    make_store: MakeStore,
) -> None:
    agent = await agent_on(await make_store())
    await say(agent, "first")
    await agent.checkpoint()
    await say(agent, "second")
    await say(agent, "third")
    now = held(agent)

    rewound = await agent.rewind(2)

    assert rewound == Rewind(removed=1, restored=False)
    assert held(agent) == now  # the agent as it was: nothing to restore it from
    assert (await agent.rewind(1)).restored  # the checkpoint before it is still there


@pytest.mark.parametrize(("to", "error"), [(-1, ValueError), (4, ValueError), (1.0, TypeError)])
async def test_a_rewind_to_no_message_changes_nothing(
    make_store: MakeStore, to: Any, error: type[Exception]
) -> None:
    agent = await agent_on(await make_store())
    for text in ("a", "b", "c"):
        await say(agent, text)
        await agent.checkpoint()
    now = held(agent)

    with pytest.raises(error, match="rewind"):
        await agent.rewind(to)
    assert held(agent) == now
    assert await agent.context.store.count() == 3  # type: ignore[union-attr]


async def test_another_agents_checkpoint_is_not_restored(make_store: MakeStore) -> None:
    store = await make_store()
    first = await agent_on(store, "first")
    await say(first, "hello")
    await first.checkpoint()
    second = await agent_on(store, "second")
    await second.context_queue.append(ContextItem(Message("user", "second's own")))

    assert await second.rewind(1) == Rewind(removed=0, restored=False)
    # A state written under this agent's name by another: refused, nothing changed.
    await store.save_checkpoint("second", (await store.get_checkpoint("first", 1)) or b"")
    with pytest.raises(ValueError, match="agent 'first', not 'second'"):
        await second.rewind(1)
    assert held(second)[1] == ["second's own"]


async def test_a_checkpoint_naming_a_tool_the_agent_lost_changes_nothing(
    make_store: MakeStore,
) -> None:
    agent = await agent_on(await make_store())
    await say(agent, "a")
    await agent.put(Turn(note_tool(), kwargs={"text": "queued"}))
    await agent.checkpoint()
    await say(agent, "b")
    agent._turns.clear()
    agent.tools = []

    with pytest.raises(ValueError, match="does not have now"):
        await agent.rewind(1)
    assert await agent.context.store.count() == 2  # type: ignore[union-attr]
    assert held(agent)[0] == []


async def test_a_checkpoint_of_an_unregistered_tool_changes_nothing(
    make_store: MakeStore,
) -> None:
    store = await make_store(*numbered(1))
    state = b'{"agent":"helper","turns":[{"tool_name":"gone"}],"queue":[],"pool":[]}'
    await store.save_checkpoint("helper", state)
    await store.append(Message("user", "after"))
    agent = await agent_on(store)

    with pytest.raises(UnregisteredToolError):
        await agent.rewind(1)
    assert await store.count() == 2


async def test_a_running_agent_is_not_rewound(make_store: MakeStore) -> None:
    agent = await agent_on(await make_store())
    await say(agent, "a")
    agent.pause()
    await agent.put(Turn(note_tool(), kwargs={"text": "x"}))
    with pytest.raises(SafeExecutionError, match="paused"):
        await agent.rewind(0)
    assert await agent.context.store.count() == 1  # type: ignore[union-attr]


async def test_a_failed_store_rewind_leaves_the_agent_as_it_was() -> None:
    class Failing(MemoryContextStore):
        async def rewind(self, to: int) -> int:
            raise OSError("disk gone")

    agent = await agent_on(Failing())
    await say(agent, "a")
    await agent.checkpoint()
    await say(agent, "b")
    now = held(agent)

    with pytest.raises(OSError, match="disk gone"):
        await agent.rewind(1)
    assert held(agent) == now


async def test_an_agent_without_a_stored_conversation_has_nothing_to_rewind() -> None:
    agent = Agent("bare", "no context", [note_tool()])
    with pytest.raises(ValueError, match="no conversation to rewind"):
        await agent.rewind(0)
    with pytest.raises(ValueError, match="no conversation to checkpoint"):
        await agent.checkpoint()
    with pytest.raises(ValueError, match="no conversation to list checkpoints of"):
        await agent.checkpoints()


async def test_an_agent_lists_its_own_checkpoints_and_a_rewind_drops_those_after(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    agent, other = await agent_on(store), await agent_on(store, "other")
    await agent.checkpoint()
    await say(agent, "first")
    await agent.checkpoint()
    await other.checkpoint()
    await say(agent, "second")
    await agent.context_pool.add(ContextItem("fact", "a fact", id="f1"))
    await agent.checkpoint()

    listed = await agent.checkpoints()
    assert [(c.agent, c.at) for c in listed] == [("helper", 0), ("helper", 1), ("helper", 2)]
    assert listed[2].size > listed[1].size  # the pool item is in the state at message 2
    assert [c.at for c in await other.checkpoints()] == [1]

    assert await agent.rewind(listed[1].at) == Rewind(removed=1, restored=True)
    assert [c.at for c in await agent.checkpoints()] == [0, 1]


# -- any run of an agent: a rewind restores what was saved at its message ---------------------

agent_steps = st.lists(
    st.one_of(
        st.tuples(st.just("say"), st.integers(0, 3)),
        st.tuples(st.just("pool"), st.integers(0, 6)),
        st.tuples(st.just("unpool"), st.integers(0, 6)),
        st.tuples(st.just("turn"), st.integers(0, 3)),
        st.tuples(st.just("checkpoint"), st.none()),
    ),
    max_size=25,
)


async def agent_program(
    store: ContextStore, steps: list[tuple[str, Any]], to: int, then: list[tuple[str, Any]]
) -> None:
    agent = await agent_on(store, f"a{uuid.uuid4().hex[:8]}")
    saved: dict[int, Any] = {}
    for name, arg in [*steps, *then]:
        if name == "say":
            await say(agent, f"said {arg}")
        elif name == "pool":
            await agent.context_pool.add(ContextItem(arg, f"item {arg}", id=f"i{arg}"))
        elif name == "unpool":
            if f"i{arg}" in agent.context_pool:
                await agent.context_pool.remove(f"i{arg}")
        elif name == "turn":
            await agent.put(Turn(note_tool(), kwargs={"text": str(arg)}))
        else:
            saved[await agent.checkpoint()] = held(agent)
    count = await store.count()
    target = to % (count + 1)
    before = held(agent)

    rewound = await agent.rewind(target)

    assert rewound == Rewind(count - target, target in saved)
    assert held(agent) == saved.get(target, before)
    assert await store.count() == target
    await say(agent, "after the rewind")
    # Those up to the point stay, restoring what they saved; nothing after it survives.
    found = [at for at, state in enumerate(await states(store, agent.name)) if state]
    assert found == sorted(at for at in saved if at <= target)
    for at in reversed(found):  # newest first: each rewind keeps the ones before
        assert (await agent.rewind(at)).restored
        assert held(agent) == saved[at]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=agent_steps, to=st.integers(0, 30), then=agent_steps)
def test_any_agent_run_rewinds_to_the_state_saved_at_the_message(
    steps: list[tuple[str, Any]], to: int, then: list[tuple[str, Any]]
) -> None:
    async def main() -> None:
        await agent_program(MemoryContextStore(), steps, to, then)
        with tempfile.TemporaryDirectory() as tmp:
            async with connect(Path(tmp) / "ctx.db") as conn:
                await agent_program(SQLiteContextStore(conn), steps, to, then)

    asyncio.run(main())
