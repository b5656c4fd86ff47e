"""Forks and rewinds on every backend: a fork reads as a copy would, and costs what a pointer does.

The database stores share the stored messages with the fork (see
`_lineage`); everything that reads or rewrites a history must see exactly what
it would see in a copied session, on both sides, whatever happens afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pygents_ctx import Message
from pygents_ctx.cli._transfer import write_session_file
from pygents_ctx.cli.viewer._queries import archive_page, messages_page, session_row
from pygents_ctx.cli.viewer._source import PostgresSource, SQLiteSource
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores import _postgres_schema as postgres_schema
from pygents_ctx.context.stores import _sqlite_schema as sqlite_schema
from pygents_ctx.context.stores._common import encode_message
from pygents_ctx.context.stores.postgres import (
    PostgresConnection,
    PostgresContextStore,
    connect_postgres,
)
from pygents_ctx.context.tokens import count_tokens
from tests import postgres_server

from .conftest import MakeStore
from .helpers import numbered, texts, unaccounted
from .test_postgres import fresh_database


async def history(store: ContextStore, *, archived: bool = False) -> list[str]:
    return texts(await store.get_history(include_archived=archived))


async def test_a_fork_at_a_message_holds_the_messages_before_it(make_store: MakeStore) -> None:
    parent = await make_store(*numbered(10))
    child = await parent.fork(at=4)

    assert await history(child) == ["m0", "m1", "m2", "m3"]
    assert await child.count() == 4
    assert await child.token_count() == count_tokens(numbered(4))
    assert [m.text async for m in child.iter_history(batch=3)] == ["m0", "m1", "m2", "m3"]
    assert texts(await child.get_history(limit=2, offset=1)) == ["m1", "m2"]
    assert await history(parent) == [f"m{i}" for i in range(10)]


async def test_a_whole_fork_shows_its_sources_preview_on_every_store(
    make_store: MakeStore,
) -> None:
    # The preview is the first user text the session was given: a message put in
    # front later (replace_prefix with count 0) does not change it, nor does forking.
    store = await make_store(Message("user", "first question"))
    await store.replace_prefix(0, [Message("user", "put in front")])
    whole = await store.fork()
    for each in (store, whole):  # a memory store lists only its own session
        infos = {info.session_id: info.preview for info in await each.list_sessions()}
        assert infos[each.session_id] == "first question"


async def test_appends_on_either_side_stay_on_their_side(make_store: MakeStore) -> None:
    parent = await make_store(*numbered(6))
    child = await parent.fork(at=3)
    await parent.append(Message("user", "parent"))
    await child.append(Message("user", "child"))
    grandchild = await child.fork()
    await grandchild.append(Message("user", "grandchild"))
    await child.append(Message("user", "child again"))

    assert await history(parent) == ["m0", "m1", "m2", "m3", "m4", "m5", "parent"]
    assert await history(child) == ["m0", "m1", "m2", "child", "child again"]
    assert await history(grandchild) == ["m0", "m1", "m2", "child", "grandchild"]
    assert texts(await grandchild.get_history(limit=3)) == ["m2", "child", "grandchild"]
    assert [m.text async for m in grandchild.iter_history(batch=2)] == await history(grandchild)


async def test_rewriting_the_parent_leaves_the_forks_as_they_were(make_store: MakeStore) -> None:
    parent = await make_store()
    await parent.append_many(numbered(4), run_id="r1")
    await parent.append_many(numbered(4, "n"), run_id="r2")
    child = await parent.fork(at=6)
    grandchild = await child.fork()
    before = (await child.snapshot(), await grandchild.snapshot())

    await parent.replace_prefix(5, [Message("user", "summary")])
    assert await history(parent) == ["summary", "n1", "n2", "n3"]
    await parent.clear_run("r2")
    await parent.rewind(0)
    await parent.clear()

    for store, snapshot in zip((child, grandchild), before, strict=True):
        after = await store.snapshot()
        assert (after.messages, after.archived) == (snapshot.messages, snapshot.archived)
        assert await store.count() == 6
        assert await store.token_count() == count_tokens([s.message for s in after.messages])


async def test_rewriting_a_fork_leaves_its_parent_and_siblings(make_store: MakeStore) -> None:
    parent = await make_store(*numbered(8))
    first, second = await parent.fork(at=5), await parent.fork(at=7)

    await first.replace_prefix(3, [Message("user", "summary")])
    await second.rewind(2)

    assert await history(first) == ["summary", "m3", "m4"]
    assert await history(first, archived=True) == ["m0", "m1", "m2", "summary", "m3", "m4"]
    assert await history(second) == ["m0", "m1"]
    assert await history(parent) == [f"m{i}" for i in range(8)]


async def test_a_fork_keeps_the_archive_and_the_runs(make_store: MakeStore) -> None:
    parent = await make_store()
    await parent.append_many(numbered(5), run_id="r1")
    await parent.replace_prefix(2, [Message("system", "summary")])
    await parent.append(Message("user", "late"), run_id="r2")
    child = await parent.fork(at=3)

    assert await history(child, archived=True) == ["m0", "m1", "summary", "m2", "m3"]
    snapshot = await child.snapshot()
    assert [s.run_id for s in snapshot.messages] == [None, "r1", "r1"]
    await child.clear_run("r1")
    assert await history(child, archived=True) == ["summary"]
    assert await history(parent, archived=True) == ["m0", "m1", "summary", "m2", "m3", "m4", "late"]


async def test_rewind_keeps_the_oldest_messages_and_says_how_many_went(
    make_store: MakeStore,
) -> None:
    store = await make_store(*numbered(5))
    assert await store.rewind(5) == 0
    assert await store.rewind(2) == 3
    await store.append(Message("user", "again"))

    assert await history(store) == ["m0", "m1", "again"]
    assert await store.count() == 3
    assert await store.token_count() == count_tokens(await store.get_history())
    [info] = [i for i in await store.list_sessions() if i.session_id == store.session_id]
    assert (info.message_count, info.preview) == (3, "m0")


async def test_a_rewound_fork_reads_less_of_its_parent(make_store: MakeStore) -> None:
    parent = await make_store(*numbered(6))
    child = await parent.fork()
    await child.append(Message("user", "own"))
    assert await child.rewind(3) == 4
    await child.append(Message("user", "new"))

    assert await history(child) == ["m0", "m1", "m2", "new"]
    assert await child.token_count() == count_tokens(await child.get_history())
    assert await history(parent) == [f"m{i}" for i in range(6)]


async def test_sessions_list_a_fork_as_a_copy(make_store: MakeStore) -> None:
    parent = await make_store(Message("assistant", "hello"), *numbered(4))
    await parent.set_context_tokens(7, 3)
    child = await parent.fork(at=2, session_id="child")
    infos = {info.session_id: info for info in await parent.list_sessions()}

    # A memory store lists its own session only.
    listed = infos.get("child") or (await child.list_sessions())[0]
    assert (listed.message_count, listed.preview) == (2, "m0")
    assert (listed.input_tokens, listed.output_tokens) == (0, 0)  # the parent's spend is its own
    assert await child.get_context_tokens() == (0, 0)


async def test_restore_into_a_fork_counts_what_it_inherits(make_store: MakeStore) -> None:
    parent = await make_store(*numbered(4))
    empty = await parent.fork(at=0)
    await empty.restore(await parent.snapshot())
    assert await history(empty) == await history(parent)

    await parent.replace_prefix(2, [Message("user", "summary")])
    archived_only = await parent.fork(at=0)
    with pytest.raises(ValueError, match="already holds messages"):
        await archived_only.restore(await parent.snapshot())
    assert await history(archived_only, archived=True) == ["m0", "m1"]


@pytest.mark.parametrize("call", ["fork", "rewind"])
@pytest.mark.parametrize("bad", [-1, 4, 100])
async def test_a_point_not_in_the_session_is_refused_and_nothing_changes(
    make_store: MakeStore, call: str, bad: int
) -> None:
    store = await make_store(*numbered(3), session_id="chat")
    before = (await store.snapshot(), len(await store.list_sessions()))
    name = "at" if call == "fork" else "to"

    attempt = store.fork(at=bad, session_id="never") if call == "fork" else store.rewind(bad)
    with pytest.raises(ValueError, match=rf"{call}\({name}={bad}\): there is no message") as err:
        await attempt

    assert "from 0 to 3" in str(err.value)
    assert (await store.snapshot(), len(await store.list_sessions())) == before
    wrong = store.fork(at="2") if call == "fork" else store.rewind("2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=rf"{call}\({name}=...\) takes the number"):
        await wrong


async def test_a_fork_shares_the_sqlite_data_instead_of_copying(db_path: Path) -> None:
    async with connect(db_path) as conn:
        parent = SQLiteContextStore(conn, session_id="parent")
        await parent.append_many(numbered(50))
        fork = await parent.fork(at=25)
        await fork.append(Message("user", "own"))
        assert rows_of(db_path, "SELECT count(*) FROM pygents_message_data") == [(51,)]
        await parent.replace_prefix(10, [Message("user", "summary")])  # copies, for the fork

    with contextlib.closing(sqlite3.connect(db_path)) as db:
        assert unaccounted(db) == (0, 0, 0)
        data = db.execute("SELECT session_id, count(*) FROM pygents_message_data GROUP BY 1")
        assert dict(data.fetchall()) == {"parent": 51, fork.session_id: 26}

    async with connect(db_path) as conn:
        another = await SQLiteContextStore(conn, session_id="parent").fork(at=30)
        assert len(await another.get_history()) == 30
    assert rows_of(db_path, "SELECT count(*) FROM pygents_message_data") == [(51 + 26,)]


async def test_a_fork_shares_the_postgres_rows_instead_of_copying(
    pg_conn: PostgresConnection,
) -> None:
    async def rows(db: Any) -> dict[str, int]:
        cursor = await db.execute("SELECT session_id, count(*) FROM pygents_messages GROUP BY 1")
        return dict(await cursor.fetchall())

    parent = PostgresContextStore(pg_conn, session_id="parent")
    await parent.append_many(numbered(40))
    fork = await parent.fork(at=20)
    await fork.append(Message("user", "own"))
    assert await pg_conn.run(rows) == {"parent": 40, fork.session_id: 1}

    await parent.replace_prefix(10, [Message("user", "summary")])  # copies, for the fork
    assert await pg_conn.run(rows) == {"parent": 31, fork.session_id: 21}
    assert await history(fork) == [*(f"m{i}" for i in range(20)), "own"]


def rows_of(db_path: Path, sql: str) -> list[Any]:
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        return db.execute(sql).fetchall()


async def test_a_source_cannot_be_deleted_alone_while_a_fork_reads_it(db_path: Path) -> None:
    async with connect(db_path) as conn:
        parent = SQLiteContextStore(conn, session_id="parent")
        await parent.append_many(numbered(4))
        fork = await parent.fork(session_id="fork")

        def delete(sql: str) -> Any:
            def run(db: sqlite3.Connection) -> None:
                db.execute("BEGIN")
                try:
                    db.execute(sql)
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise

            return conn.run(run)

        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            await delete("DELETE FROM pygents_sessions WHERE session_id = 'parent'")
        assert await history(fork) == ["m0", "m1", "m2", "m3"]
        await delete("DELETE FROM pygents_sessions")  # both at once: fine
        assert await history(fork) == []


# -- the model: sessions that copy ------------------------------------------------------

sessions_made = st.integers(0, 3)
appends = st.tuples(st.just("append"), sessions_made, st.sampled_from([None, "r1", "r2"]))
operations = st.lists(
    st.one_of(
        appends,
        appends,  # twice as likely: histories long enough to fork inside
        appends,
        st.tuples(st.just("fork"), sessions_made, st.integers(0, 12)),
        st.tuples(st.just("rewind"), sessions_made, st.integers(0, 12)),
        st.tuples(st.just("compact"), sessions_made, st.integers(0, 12)),
        st.tuples(st.just("clear_run"), sessions_made, st.sampled_from(["r1", "r2"])),
        st.tuples(st.just("clear"), sessions_made, st.none()),
    ),
    max_size=30,
)


class Copied:
    """A session as a copied one behaves: lists of (text, run id), copied on fork."""

    def __init__(self, live: list[Any] | None = None, archive: list[Any] | None = None) -> None:
        self.live, self.archive = list(live or []), list(archive or [])


async def run_program(program: list[tuple[Any, ...]], make: Any) -> None:
    stores: list[ContextStore] = [await make(uuid.uuid4().hex)]
    models = [Copied()]
    for step, (name, which, arg) in enumerate(program):
        index = which % len(stores)
        store, model = stores[index], models[index]
        if name == "append":
            text = f"s{step}" + " word" * (step % 7)  # token counts of all sizes
            await store.append(Message("user", text), run_id=arg)
            model.live.append((text, arg))
        elif name == "fork":
            at = arg % (len(model.live) + 1)
            stores.append(await store.fork(at=at))
            models.append(Copied(model.live[:at], model.archive))
        elif name == "rewind":
            to = arg % (len(model.live) + 1)
            assert await store.rewind(to) == len(model.live) - to
            del model.live[to:]
        elif name == "compact":
            count = arg % (len(model.live) + 1)
            summary = f"sum{step}" + " of" * (count % 5)
            await store.replace_prefix(count, [Message("user", summary)], run_id="r1")
            model.archive += model.live[:count]
            model.live[:count] = [(summary, "r1")]
        elif name == "clear_run":
            await store.clear_run(arg)
            model.live = [entry for entry in model.live if entry[1] != arg]
            model.archive = [entry for entry in model.archive if entry[1] != arg]
        else:
            await store.clear()
            model.live, model.archive = [], []
        for session, expected in zip(stores, models, strict=True):
            snapshot = await session.snapshot()
            seen = [(s.message.text, s.run_id) for s in snapshot.messages]
            assert seen == expected.live, (step, name)
            assert [(s.message.text, s.run_id) for s in snapshot.archived] == expected.archive
            assert await history(session) == [text for text, _ in expected.live]
            assert [m.text async for m in session.iter_history(batch=2)] == (
                [text for text, _ in expected.live]
            )
            assert await session.count() == len(expected.live)
            assert await session.token_count() == count_tokens(
                [Message("user", text) for text, _ in expected.live]
            )


# A fork inside a compacted history, and one from a fork whose parent then compacts.
COMPACT_THEN_FORK = [("append", 0, None)] * 6 + [("compact", 0, 3), ("fork", 0, 2)]
FORK_THEN_COMPACT = [
    *[("append", 0, "r1")] * 5,
    ("fork", 0, 4),
    ("append", 1, None),
    ("compact", 0, 2),
    ("fork", 1, 3),
    ("rewind", 1, 2),
    ("append", 2, None),
]


@settings(max_examples=60, deadline=None)
@example(program=COMPACT_THEN_FORK)
@example(program=FORK_THEN_COMPACT)
@given(program=operations)
def test_any_program_reads_as_copies_in_sqlite_and_memory(program: list[tuple[Any, ...]]) -> None:
    async def main() -> None:
        await run_program(program, lambda sid: asyncio.sleep(0, MemoryContextStore(session_id=sid)))
        with tempfile.TemporaryDirectory() as tmp:
            async with connect(Path(tmp) / "ctx.db") as conn:
                await run_program(
                    program, lambda sid: asyncio.sleep(0, SQLiteContextStore(conn, session_id=sid))
                )
                assert await conn.run(unaccounted) == (0, 0, 0)

    asyncio.run(main())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(program=COMPACT_THEN_FORK)
@example(program=FORK_THEN_COMPACT)
@given(program=operations)
def test_any_program_reads_as_copies_in_postgres(
    postgres: postgres_server.PostgresServer, program: list[tuple[Any, ...]]
) -> None:
    async def main() -> None:
        async with connect_postgres(postgres.dsn) as conn:
            await run_program(
                program, lambda sid: asyncio.sleep(0, PostgresContextStore(conn, session_id=sid))
            )

    asyncio.run(main())


# -- what the command line reads --------------------------------------------------------


async def fork_and_copy(parent: ContextStore) -> None:
    """Session "fork": a fork at message 4 of a session with an archive and runs; and
    session "copy", a copy of it made by hand."""
    await parent.append_many(numbered(6), run_id="r1")
    await parent.replace_prefix(2, [Message("system", "summary")], run_id="r2")
    await parent.append_many(numbered(3, "late"))
    fork = await parent.fork(at=4, session_id="fork")
    await fork.append(Message("user", "own"), run_id="r3")
    await parent.append(Message("user", "after"))
    snapshot = await fork.snapshot()
    copy = type(parent)(parent.connection, session_id="copy")  # type: ignore[attr-defined]
    await copy.restore(snapshot)


def pages(reading: Any, session_id: str) -> tuple[Any, ...]:
    def plain(entries: list[Any]) -> list[Any]:
        return [(e.index, e.run_id, e.tokens, e.message) for e in entries]

    row = session_row(reading, session_id)
    return (
        plain(messages_page(reading, session_id, 0, 100)),
        plain(messages_page(reading, session_id, 2, 2)),
        plain(archive_page(reading, session_id, 0, 100)),
        (row.messages, row.live_tokens, row.preview, row.runs, row.archived),
    )


async def test_the_viewer_and_the_export_read_a_fork_as_a_copy(db_path: Path) -> None:
    async with connect(db_path) as conn:
        await fork_and_copy(SQLiteContextStore(conn, session_id="parent"))

    with SQLiteSource(str(db_path)).reading() as reading:
        assert pages(reading, "fork") == pages(reading, "copy")
        assert len(pages(reading, "fork")[0]) == 5

    exported = {}
    for session_id in ("fork", "copy"):
        out = io.BytesIO()
        write_session_file(str(db_path), session_id, out.write)
        exported[session_id] = orjson.loads(out.getvalue())
        del exported[session_id]["session_id"]
    assert exported["fork"] == exported["copy"]
    assert exported["fork"]["run_ids"] == ["r2", "r1", "r1", "r1", "r3"]


async def test_the_viewer_reads_a_postgres_fork_as_a_copy(
    pg_conn: PostgresConnection, postgres: postgres_server.PostgresServer
) -> None:
    await fork_and_copy(PostgresContextStore(pg_conn, session_id="parent"))

    source = PostgresSource(postgres.dsn)
    try:
        with source.reading() as reading:
            assert pages(reading, "fork") == pages(reading, "copy")
            assert len(pages(reading, "fork")[2]) == 2
    finally:
        source.close()


# -- databases made before forks shared ---------------------------------------------------


async def test_a_sqlite_file_of_schema_5_migrates_and_its_sessions_fork(db_path: Path) -> None:
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    assert sqlite_schema.migrate(db, sqlite_schema.MIGRATIONS[:5]) == 5
    db.execute("INSERT INTO pygents_sessions (session_id, created_at) VALUES ('old', 'then')")
    for position, message in enumerate(numbered(6)):
        db.execute(
            "INSERT INTO pygents_messages (session_id, position, run_id, tokens, preview, data) "
            "VALUES ('old', ?, 'r1', 5, ?, ?)",
            (position, message.text if message.role == "user" else None, encode_message(message)),
        )
    db.close()

    async with connect(db_path) as conn:
        old = SQLiteContextStore(conn, session_id="old")
        fork = await old.fork(at=3)
        await old.rewind(1)
        assert await history(fork) == ["m0", "m1", "m2"]
        assert await history(old) == ["m0"]
        assert (await fork.token_count(), await old.token_count()) == (15, 5)
    assert rows_of(db_path, "SELECT version FROM pygents_schema") == [
        (sqlite_schema.SCHEMA_VERSION,)
    ]


async def test_a_postgres_database_of_schema_3_migrates_and_its_sessions_fork(
    postgres: postgres_server.PostgresServer,
) -> None:
    with fresh_database(postgres) as dsn:
        with psycopg.connect(dsn, autocommit=True) as db:
            for step in postgres_schema.MIGRATIONS[:3]:
                for statement in step:
                    db.execute(statement)
            db.execute("CREATE TABLE pygents_schema (id integer PRIMARY KEY, version integer)")
            db.execute("INSERT INTO pygents_schema VALUES (1, 3)")
            db.execute(
                "INSERT INTO pygents_sessions (session_id, message_count, live_tokens, "
                "next_position) VALUES ('old', 6, 30, 6)"
            )
            for position, message in enumerate(numbered(6)):
                db.execute(
                    "INSERT INTO pygents_messages (session_id, position, tokens, data) "
                    "VALUES ('old', %s, 5, %s)",
                    (position, encode_message(message)),
                )

        async with connect_postgres(dsn) as conn:
            old = PostgresContextStore(conn, session_id="old")
            fork = await old.fork(at=3)
            await old.rewind(1)
            assert await history(fork) == ["m0", "m1", "m2"]
            assert await history(old) == ["m0"]
            assert (await fork.token_count(), await old.token_count()) == (15, 5)
