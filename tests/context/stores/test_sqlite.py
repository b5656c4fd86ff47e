"""SQLiteContextStore: persistence, sessions, the schema, caching, and other connections."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import Message, ToolUseBlock
from pygents_ctx.context.stores import (
    SQLiteConnection,
    SQLiteContextStore,
    StoreSchemaError,
    connect,
)
from pygents_ctx.context.stores._sqlite_schema import MIGRATIONS, SCHEMA_VERSION, migrate

from .helpers import numbered, texts

NEWER = rf"version 99, newer than version {SCHEMA_VERSION} .* upgrade"

# The tables of the PostgreSQL store (test_postgres checks them), and of SQLite's up to
# schema version 4; from version 5 SQLite's messages and archive are views over others.
TABLES = [
    "pygents_archive",
    "pygents_checkpoint_data",
    "pygents_checkpoints",
    "pygents_decisions",
    "pygents_forks",
    "pygents_journal",
    "pygents_leases",
    "pygents_messages",
    "pygents_schema",
    "pygents_sessions",
    "pygents_usage",
]
# FTS5 keeps the search index in tables of its own, named after it.
SEARCH_TABLES = {
    "pygents_search",
    *(f"pygents_search_{part}" for part in ("config", "data", "docsize", "idx", "state")),
}
SQLITE_TABLES = sorted(
    {*TABLES, "pygents_archive_rows", "pygents_live_rows", "pygents_message_data", *SEARCH_TABLES}
    - {"pygents_archive", "pygents_messages"}
)


def raw(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with sqlite3.connect(db_path) as db:
        rows = db.execute(sql, params).fetchall()
    db.close()
    return rows


# -- persistence and sessions ---------------------------------------------------


async def test_a_session_survives_a_restart(db_path: Path) -> None:
    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        await store.append_many(numbered(3), run_id="r1")
        await store.replace_prefix(1, [Message("user", "S")])
        await store.add_context_tokens(120, 30)

    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")

        assert texts(await store.get_history()) == ["S", "m1", "m2"]
        assert texts(await store.get_history(include_archived=True)) == ["m0", "S", "m1", "m2"]
        assert await store.get_context_tokens() == (120, 30)
        await store.clear_run("r1")
        assert texts(await store.get_history()) == ["S"]


async def test_sessions_sharing_a_connection_stay_apart(conn: SQLiteConnection) -> None:
    first = SQLiteContextStore(conn, session_id="a")
    second = SQLiteContextStore(conn, session_id="b")

    await first.append(Message("user", "for a"))
    await second.append(Message("user", "for b"))
    await second.clear()

    assert texts(await first.get_history()) == ["for a"]
    assert await second.get_history() == []


async def test_list_sessions_is_newest_first_with_sub_second_times(
    conn: SQLiteConnection,
) -> None:
    for index in range(30):
        await SQLiteContextStore(conn, session_id=f"s{index:02}").append(Message("user", "x"))

    infos = await SQLiteContextStore(conn).list_sessions()

    assert [info.session_id for info in infos] == [f"s{i:02}" for i in reversed(range(30))]
    stamps = [info.created_at for info in infos]
    assert stamps == sorted(stamps, reverse=True)
    assert len({stamp[:19] for stamp in stamps}) < len(set(stamps))  # same second, told apart


async def test_a_session_exists_from_its_first_write(conn: SQLiteConnection) -> None:
    reader = SQLiteContextStore(conn, session_id="read only")
    assert await reader.get_history() == []
    assert await reader.count() == 0
    assert await reader.get_context_tokens() == (0, 0)
    assert await reader.list_sessions() == []

    await SQLiteContextStore(conn, session_id="tokens only").add_context_tokens(5, 1)

    [info] = await reader.list_sessions()
    assert (info.session_id, info.message_count, info.input_tokens) == ("tokens only", 0, 5)


SQL_METACHARACTERS = [
    "'; DROP TABLE pygents_messages; --",
    "x'); DELETE FROM pygents_sessions; --",
    '" OR 1=1 --',
    "%_*\\?",
    "Robert'); DROP TABLE messages;--",
    "naïve ☃ \U0001f600",
]


@pytest.mark.parametrize("session_id", SQL_METACHARACTERS)
async def test_session_ids_full_of_sql_are_plain_text(
    db_path: Path, conn: SQLiteConnection, session_id: str
) -> None:
    bystander = SQLiteContextStore(conn, session_id="bystander")
    await bystander.append(Message("user", "still here"))
    store = SQLiteContextStore(conn, session_id=session_id)

    await store.append_many(
        [Message("user", session_id), Message("assistant", "ok")], run_id=session_id
    )
    await store.add_context_tokens(1, 1)
    fork = await store.fork(session_id=session_id + " (fork)")
    await store.replace_prefix(1, [Message("user", "S")])
    await fork.clear_run(session_id)

    assert texts(await store.get_history(include_archived=True)) == [session_id, "S", "ok"]
    assert await fork.get_history() == []
    assert texts(await bystander.get_history()) == ["still here"]
    ids = {info.session_id for info in await store.list_sessions()}
    assert ids == {"bystander", session_id, session_id + " (fork)"}
    tables = raw(db_path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    assert [name for (name,) in tables] == SQLITE_TABLES


async def test_fork_refuses_an_existing_session_id(conn: SQLiteConnection) -> None:
    await SQLiteContextStore(conn, session_id="taken").append(Message("user", "x"))
    store = SQLiteContextStore(conn, session_id="source")
    await store.append(Message("user", "y"))

    with pytest.raises(ValueError, match="'taken' already exists"):
        await store.fork(session_id="taken")


async def test_from_history_refuses_a_session_that_holds_messages(
    conn: SQLiteConnection,
) -> None:
    await SQLiteContextStore.from_history(numbered(1), conn=conn, session_id="taken")

    with pytest.raises(ValueError, match="'taken' already holds messages"):
        await SQLiteContextStore.from_history(numbered(1), conn=conn, session_id="taken")


async def test_forking_a_session_never_written_gives_an_empty_session(
    conn: SQLiteConnection,
) -> None:
    fork = await SQLiteContextStore(conn, session_id="unwritten").fork(session_id="f")

    assert await fork.get_history() == []
    assert [info.session_id for info in await fork.list_sessions()] == ["f"]


async def test_a_session_deleted_behind_the_stores_back_is_recreated_by_append(
    db_path: Path, conn: SQLiteConnection
) -> None:
    store = SQLiteContextStore(conn, session_id="s")
    await store.append(Message("user", "old"))
    with sqlite3.connect(db_path) as db:
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("DELETE FROM pygents_sessions")
    db.close()

    await store.append(Message("user", "new"))

    assert texts(await store.get_history()) == ["new"]
    assert [info.message_count for info in await store.list_sessions()] == [1]


def test_the_store_needs_a_connection() -> None:
    with pytest.raises(TypeError, match=r"await connect\(path\)"):
        SQLiteContextStore("ctx.db")  # type: ignore[arg-type]


async def test_the_store_shows_its_file_and_session(db_path: Path, conn: SQLiteConnection) -> None:
    store = SQLiteContextStore(conn, session_id="s")

    assert store.connection is conn
    assert repr(store) == f"SQLiteContextStore({str(db_path)!r}, session_id='s')"


async def test_a_closed_connection_gives_a_clear_error_from_the_store(db_path: Path) -> None:
    conn = await connect(db_path)
    store = SQLiteContextStore(conn, session_id="s")
    await store.append(Message("user", "x"))
    await store.close()
    assert not conn.closed  # the store does not own the connection
    await conn.close()

    with pytest.raises(RuntimeError, match="is closed"):
        await store.get_history()
    with pytest.raises(RuntimeError, match="is closed"):
        await store.append(Message("user", "y"))


async def test_a_message_json_cannot_hold_is_refused_before_anything_is_stored(
    conn: SQLiteConnection,
) -> None:
    store = SQLiteContextStore(conn)
    bad = Message("assistant", [ToolUseBlock("c", "t", {"when": object()})])

    with pytest.raises(TypeError, match=r"Message\.content\[0\]\.input\.when"):
        await store.append_many([Message("user", "fine"), bad])

    assert await store.count() == 0


@pytest.mark.parametrize("data", [b"{not json", b'{"type": "text", "text": "a block"}'])
async def test_an_unreadable_row_names_its_session_and_position(
    db_path: Path, conn: SQLiteConnection, data: bytes
) -> None:
    store = SQLiteContextStore(conn, session_id="s")
    await store.append_many(numbered(2))
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE pygents_messages SET data = ? WHERE position = 1", (data,))
    db.close()

    with pytest.raises(ValueError, match="position 1 of session 's' cannot be read"):
        await SQLiteContextStore(conn, session_id="s").get_history()


# -- the cached history -----------------------------------------------------------


async def test_concurrent_reads_of_one_store_agree(conn: SQLiteConnection) -> None:
    store = SQLiteContextStore(conn)
    await store.append_many(numbered(5))

    async def append_and_read(index: int) -> list[str]:
        await store.append(Message("user", f"x{index}"))
        return texts(await store.get_history())

    await asyncio.gather(*(append_and_read(i) for i in range(10)))

    history = texts(await store.get_history())
    assert history == texts(numbered(5)) + [f"x{i}" for i in range(10)]
    assert texts(await SQLiteContextStore(conn, session_id=store.session_id).get_history()) == (
        history
    )


# -- the event loop does not wait on the disk ----------------------------------------


async def test_the_loop_keeps_running_while_another_process_holds_the_write_lock(
    db_path: Path, conn: SQLiteConnection
) -> None:
    store = SQLiteContextStore(conn, session_id="s")
    await store.append(Message("user", "first"))
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.create_task(tick())
    append = asyncio.create_task(store.append(Message("user", "second")))
    await asyncio.sleep(0.1)
    waited = not append.done()
    blocker.execute("COMMIT")
    blocker.close()
    await append
    ticker.cancel()

    assert waited
    assert ticks >= 5
    assert texts(await store.get_history()) == ["first", "second"]


# -- the schema and its migrations ---------------------------------------------------


async def test_a_new_database_gets_the_current_schema_version(
    db_path: Path, conn: SQLiteConnection
) -> None:
    assert raw(db_path, "SELECT version FROM pygents_schema") == [(SCHEMA_VERSION,)]
    tables = raw(db_path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    assert [name for (name,) in tables] == SQLITE_TABLES
    views = raw(db_path, "SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name")
    assert views == [("pygents_archive",), ("pygents_messages",), ("pygents_search_source",)]


async def test_a_newer_schema_is_refused_with_a_clear_error(db_path: Path) -> None:
    async with connect(db_path):
        pass
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE pygents_schema SET version = 99")
    db.close()

    with pytest.raises(StoreSchemaError, match=NEWER):
        await connect(db_path)


def test_migrations_run_the_missing_steps_once_and_keep_the_data(db_path: Path) -> None:
    db = sqlite3.connect(db_path, isolation_level=None)
    assert migrate(db) == SCHEMA_VERSION
    db.execute("INSERT INTO pygents_sessions (session_id, created_at) VALUES ('kept', 'now')")
    step = ("ALTER TABLE pygents_sessions ADD COLUMN title TEXT NOT NULL DEFAULT ''",)

    assert migrate(db, (*MIGRATIONS, step)) == SCHEMA_VERSION + 1
    assert migrate(db, (*MIGRATIONS, step)) == SCHEMA_VERSION + 1  # nothing left: no error

    assert db.execute("SELECT session_id, title FROM pygents_sessions").fetchall() == [("kept", "")]
    assert db.execute("SELECT version FROM pygents_schema").fetchall() == [(SCHEMA_VERSION + 1,)]
    db.close()


async def test_a_version_1_database_is_upgraded_with_its_sessions_intact(db_path: Path) -> None:
    db = sqlite3.connect(db_path, isolation_level=None)
    migrate(db, MIGRATIONS[:1])
    db.execute("INSERT INTO pygents_sessions (session_id, created_at) VALUES ('old', 'then')")
    db.close()

    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="old")
        await store.append(Message("user", "kept"))
        await SQLiteContextStore(conn, session_id="new").append(Message("user", "fresh"))
        assert texts(await store.get_history()) == ["kept"]

    assert raw(db_path, "SELECT version FROM pygents_schema") == [(SCHEMA_VERSION,)]
    generations = dict(raw(db_path, "SELECT session_id, generation FROM pygents_sessions"))
    assert generations["old"] == 0  # a row from before keeps its generation
    assert generations["new"] != 0  # a new row starts at a random one


def test_a_session_row_created_again_starts_at_another_generation(db_path: Path) -> None:
    db = sqlite3.connect(db_path, isolation_level=None)
    migrate(db)
    create = "INSERT INTO pygents_sessions (session_id, created_at) VALUES ('s', 'now')"
    generation = "SELECT generation FROM pygents_sessions WHERE session_id = 's'"
    seen = set()
    for _ in range(10):
        db.execute(create)
        seen.add(db.execute(generation).fetchone()[0])
        db.execute("DELETE FROM pygents_sessions")  # the largest rowid: SQLite reuses it
    db.close()

    assert len(seen) == 10
    assert all(0 <= g < 2**62 for g in seen)


def test_a_failing_migration_leaves_the_old_version_whole(db_path: Path) -> None:
    db = sqlite3.connect(db_path, isolation_level=None)
    migrate(db)
    broken = ("CREATE TABLE half_done (x)", "THIS IS NOT SQL")

    with pytest.raises(sqlite3.OperationalError):
        migrate(db, (*MIGRATIONS, broken))

    assert db.execute("SELECT version FROM pygents_schema").fetchall() == [(SCHEMA_VERSION,)]
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchall() == []
    db.close()


async def test_expected_matches_a_message_stored_as_other_bytes(db_path: Path) -> None:
    """The compare-and-swap compares messages, not their bytes (an older writer's key order)."""
    from pygents_ctx import ConcurrentModificationError

    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="s")
        await store.append_many(numbered(3))
        seen = await store.get_history()
    raw(
        db_path,
        "UPDATE pygents_messages SET data = ? WHERE session_id = 's' AND data LIKE '%m0%'",
        (b'{"content": [{"text": "m0", "type": "text"}], "role": "user"}',),
    )
    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="s")
        with pytest.raises(ConcurrentModificationError):
            await store.replace_prefix(2, [Message("user", "S")], expected=numbered(2, "x"))
        await store.replace_prefix(2, [Message("user", "S")], expected=seen[:2])
        assert texts(await store.get_history()) == ["S", "m2"]
        assert texts(await store.get_history(include_archived=True))[:2] == ["m0", "m1"]
