"""SQLite schema 5: message data written once, the archive as rows pointing at it.

A version 4 file (built with the version 4 DDL and the version 4 writes) opens,
migrates in one transaction and reads back identically; compaction moves no
message data; the `pygents_messages` and `pygents_archive` views read and
write as the version 4 tables did; and nothing is ever left without its data.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from pygents_ctx import ConcurrentModificationError, Message, Usage, UsageRecord
from pygents_ctx.cli import main
from pygents_ctx.cli.viewer._queries import archive_page, messages_page
from pygents_ctx.cli.viewer._source import SQLiteSource
from pygents_ctx.context.stores import SQLiteConnection, SQLiteContextStore, connect
from pygents_ctx.context.stores._common import decode, encode_message, preview_of
from pygents_ctx.context.stores._sqlite_schema import MIGRATIONS, SCHEMA_VERSION, migrate
from pygents_ctx.context.tokens import count_message_tokens

from .helpers import numbered, texts, unaccounted

V4 = MIGRATIONS[:4]

# What a version 4 store wrote (its `_sqlite_ops`), kept here to build real v4 files.
V4_APPEND = """
    INSERT INTO pygents_messages (session_id, position, run_id, tokens, preview, data)
    VALUES (?, (SELECT next_position FROM pygents_sessions WHERE session_id = ?), ?, ?, ?, ?)
"""
V4_INSERT_AT = """
    INSERT INTO pygents_messages (session_id, position, run_id, tokens, preview, data)
    VALUES (?, ?, ?, ?, ?, ?)
"""


def v4_append(db: sqlite3.Connection, session: str, run_id: str | None, *texts: str) -> None:
    for index, text in enumerate(texts):
        message = Message("user" if index % 2 == 0 else "assistant", text)
        db.execute(
            V4_APPEND,
            (
                session,
                session,
                run_id,
                count_message_tokens(message),
                preview_of(message),
                encode_message(message),
            ),
        )


def v4_replace_prefix(db: sqlite3.Connection, session: str, count: int, summary: str) -> None:
    """Version 4's `replace_prefix`: copy the oldest `count` into the archive, delete them."""
    (boundary,) = db.execute(
        "SELECT position FROM pygents_messages WHERE session_id = ? "
        "ORDER BY position LIMIT 1 OFFSET ?",
        (session, count),
    ).fetchone()
    db.execute(
        "INSERT INTO pygents_archive (session_id, run_id, tokens, preview, data) "
        "SELECT session_id, run_id, tokens, preview, data FROM pygents_messages "
        "WHERE session_id = ? AND position < ? ORDER BY position",
        (session, boundary),
    )
    db.execute(
        "DELETE FROM pygents_messages WHERE session_id = ? AND position < ?", (session, boundary)
    )
    message = Message("system", summary)
    db.execute(
        V4_INSERT_AT,
        (session, boundary - 1, None, count_message_tokens(message), None, encode_message(message)),
    )
    db.execute(
        "UPDATE pygents_sessions SET generation = generation + 1 WHERE session_id = ?", (session,)
    )


def build_v4_file(path: Path) -> None:
    """A version 4 database with live and archived messages, run ids, usage and a lease."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    assert migrate(db, V4) == 4
    db.execute("BEGIN")
    for session in ("chat", "other", "tokens only"):
        db.execute(
            "INSERT INTO pygents_sessions (session_id, created_at) VALUES (?, ?)",
            (session, f"2026-01-0{len(session) % 9}T00:00:00.000000+00:00"),
        )
    v4_append(db, "chat", "r1", "hello", "hi there", "how are you")
    v4_append(db, "other", None, "unrelated")
    v4_append(db, "chat", "r2", "fine", "good", "bye")
    v4_replace_prefix(db, "chat", 4, "summary one")
    v4_append(db, "chat", "r1", "again", "yes")
    v4_replace_prefix(db, "chat", 3, "summary two")
    v4_append(db, "other", "r2", "more")
    db.execute(
        "UPDATE pygents_sessions SET input_tokens = 120, output_tokens = 30 "
        "WHERE session_id IN ('chat', 'tokens only')"
    )
    db.execute(
        "INSERT INTO pygents_usage (session_id, run_id, model, input_tokens, output_tokens, "
        "created_at) VALUES ('chat', 'r1', 'gpt', 100, 20, '2026-01-01T00:00:00.000000+00:00')"
    )
    db.execute(
        "INSERT INTO pygents_leases (session_id, owner, token, acquired_at, expires_at) "
        "VALUES ('chat', 'worker-1', 3, 0, 0)"
    )
    db.execute("COMMIT")
    db.close()


# The same questions of a version 4 file (tables) and a version 5 one (views).
DUMP = (
    "SELECT session_id, created_at, input_tokens, output_tokens, message_count, live_tokens, "
    "next_position, generation, preview FROM pygents_sessions ORDER BY session_id",
    "SELECT session_id, position, run_id, tokens, preview, data FROM pygents_messages "
    "ORDER BY session_id, position",
    "SELECT session_id, id, run_id, tokens, preview, data FROM pygents_archive "
    "ORDER BY session_id, id",
    # The columns a version 4 file has (a later version adds a sub-agent call's links, NULL).
    "SELECT id, session_id, run_id, model, input_tokens, output_tokens, cached_tokens, "
    "cache_write_tokens, estimated_input_tokens, created_at FROM pygents_usage ORDER BY id",
    "SELECT * FROM pygents_leases ORDER BY session_id",
)


def dump(path: Path) -> list[list[Any]]:
    db = sqlite3.connect(path)
    try:
        return [db.execute(sql).fetchall() for sql in DUMP]
    finally:
        db.close()


def kinds(path: Path) -> dict[str, str]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT name, type FROM sqlite_master WHERE name IN ('pygents_messages', "
            "'pygents_archive', 'pygents_message_data')"
        ).fetchall()
    finally:
        db.close()
    return dict(rows)


def unaccounted_in(path: Path) -> tuple[int, int, int]:
    db = sqlite3.connect(path)
    try:
        return unaccounted(db)
    finally:
        db.close()


# -- migrating a version 4 file ------------------------------------------------------------


async def test_a_version_4_file_migrates_and_reads_back_identically(db_path: Path) -> None:
    build_v4_file(db_path)
    before = dump(db_path)
    assert kinds(db_path) == {"pygents_messages": "table", "pygents_archive": "table"}
    assert len(before[2]) == 7  # two compactions' worth of archive

    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        history = await store.get_history(include_archived=True)
        paged = [m async for m in store.iter_history(batch=2, include_archived=True)]
        snapshot = await store.snapshot()
        count, tokens = await store.count(), await store.token_count()
        sessions = {info.session_id: info for info in await store.list_sessions()}

    assert dump(db_path) == before  # every row, counter and id as it was
    assert kinds(db_path) == {
        "pygents_messages": "view",
        "pygents_archive": "view",
        "pygents_message_data": "table",
    }
    [_, live_rows, archive_rows, *_] = before
    chat_live = [row for row in live_rows if row[0] == "chat"]
    chat_archive = [row for row in archive_rows if row[0] == "chat"]
    expected = [decode("chat", row[1], row[3], row[5]) for row in chat_archive + chat_live]
    assert history == paged == expected
    assert texts(history) == [
        *["hello", "hi there", "how are you", "fine"],
        *["summary one", "good", "bye"],
        *["summary two", "again", "yes"],
    ]
    assert [s.run_id for s in snapshot.archived] == ["r1", "r1", "r1", "r2", None, "r2", "r2"]
    assert [s.run_id for s in snapshot.messages] == [None, "r1", "r1"]
    assert (snapshot.input_tokens, snapshot.output_tokens) == (120, 30)
    assert [r.usage.input_tokens for r in snapshot.usage] == [100]
    assert (count, tokens) == (3, sum(row[3] for row in chat_live))
    assert (sessions["chat"].message_count, sessions["chat"].preview) == (3, "hello")
    assert unaccounted_in(db_path) == (0, 0, 0)


def viewer_pages(path: Path) -> tuple[list[Any], list[Any]]:
    """The viewer's pages of session "chat": its archive and its live history.

    The viewer opens the file read-only, so a version 4 file is read as it is.
    """
    with SQLiteSource(str(path)).reading() as reading:
        return archive_page(reading, "chat", 0, 100), messages_page(reading, "chat", 0, 100)


def test_the_command_line_reads_a_migrated_file_as_it_read_version_4(
    db_path: Path, tmp_path: Path
) -> None:
    build_v4_file(db_path)
    before = viewer_pages(db_path)
    [_, live_rows, archive_rows, *_] = dump(db_path)
    out = tmp_path / "chat.json"

    assert main(["--db", str(db_path), "export", "chat", "-o", str(out)]) == 0  # migrates

    assert kinds(db_path)["pygents_archive"] == "view"
    assert viewer_pages(db_path) == before
    archive, live = before
    assert len(archive) == 7
    assert [entry.run_id for entry in live] == [None, "r1", "r1"]
    exported = orjson.loads(out.read_bytes())
    assert exported["archived"] == [orjson.loads(r[5]) for r in archive_rows if r[0] == "chat"]
    assert exported["messages"] == [orjson.loads(r[5]) for r in live_rows if r[0] == "chat"]


async def test_a_migrated_file_goes_on_where_version_4_left_off(db_path: Path) -> None:
    build_v4_file(db_path)

    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        await store.append(Message("user", "new"), run_id="r3")
        await store.replace_prefix(2, [Message("system", "summary three")])
        after_compaction = texts(await store.get_history(include_archived=True))
        await store.clear_run("r1")
        fork = await store.fork(session_id="chat fork")
        forked = await fork.get_history(include_archived=True)
        restored = SQLiteContextStore(conn, session_id="restored")
        await restored.restore(await store.snapshot())
        copied, original = await restored.snapshot(), await store.snapshot()
        assert (copied.messages, copied.archived) == (original.messages, original.archived)
        assert copied.usage == original.usage
        other = SQLiteContextStore(conn, session_id="other")
        await other.clear()

    assert after_compaction == [
        *["hello", "hi there", "how are you", "fine", "summary one", "good", "bye"],
        *["summary two", "again"],  # archived after the version 4 archive
        *["summary three", "yes", "new"],
    ]
    assert texts(forked) == [
        *["fine", "summary one", "good", "bye", "summary two", "summary three"],
        "new",  # run r1 gone from the archive and the live history alike
    ]
    db = sqlite3.connect(db_path)
    ids = [i for (i,) in db.execute("SELECT id FROM pygents_archive WHERE session_id = 'chat'")]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    assert unaccounted(db) == (0, 0, 0)
    db.close()


def test_a_migration_that_fails_after_version_5_leaves_version_4_whole(db_path: Path) -> None:
    build_v4_file(db_path)
    before = dump(db_path)
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")

    with pytest.raises(sqlite3.OperationalError):
        migrate(db, (*MIGRATIONS, ("THIS IS NOT SQL",)))

    assert db.execute("SELECT version FROM pygents_schema").fetchall() == [(4,)]
    db.close()
    assert kinds(db_path) == {"pygents_messages": "table", "pygents_archive": "table"}
    assert dump(db_path) == before


def test_a_new_file_and_a_migrated_one_have_the_same_schema(tmp_path: Path) -> None:
    fresh, migrated = tmp_path / "fresh.db", tmp_path / "migrated.db"
    build_v4_file(migrated)
    for path in (fresh, migrated):
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA foreign_keys = ON")
        assert migrate(db) == SCHEMA_VERSION == 17
        db.close()

    def schema(path: Path) -> list[Any]:
        db = sqlite3.connect(path)
        try:
            return db.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name LIKE 'pygents%' ORDER BY name"
            ).fetchall()
        finally:
            db.close()

    assert schema(fresh) == schema(migrated)


# -- compaction moves rows, not message data ---------------------------------------


def data_ids(path: Path, table: str) -> list[int]:
    """The data each row of `table` (live or archive rows) points at, in stored order."""
    order = "position" if table == "pygents_live_rows" else "id"
    db = sqlite3.connect(path)
    try:
        rows = db.execute(f"SELECT data_id FROM {table} WHERE session_id = 's' ORDER BY {order}")
        return [data_id for (data_id,) in rows]
    finally:
        db.close()


async def test_replace_prefix_archives_the_messages_where_they_were_written(
    db_path: Path, conn: SQLiteConnection
) -> None:
    store = SQLiteContextStore(conn, session_id="s")
    await store.append_many(numbered(6))
    written = data_ids(db_path, "pygents_live_rows")

    await store.replace_prefix(4, [Message("system", "S")], expected=numbered(4))

    assert data_ids(db_path, "pygents_archive_rows") == written[:4]  # not copied: the same data
    live = data_ids(db_path, "pygents_live_rows")
    assert live[1:] == written[4:]
    assert live[0] not in written
    assert texts(await store.get_history(include_archived=True)) == [
        *["m0", "m1", "m2", "m3"],
        *["S", "m4", "m5"],
    ]
    assert unaccounted_in(db_path) == (0, 0, 0)


async def test_a_prefix_read_from_the_cache_is_checked_without_reading_message_data(
    conn: SQLiteConnection,
) -> None:
    store = SQLiteContextStore(conn, session_id="s")
    await store.append_many(numbered(5))
    seen = await store.get_history()
    await store.append(Message("user", "appended since"))  # appends keep the prefix
    statements: list[str] = []
    await conn.run(lambda db: db.set_trace_callback(statements.append))
    try:
        await store.replace_prefix(3, [Message("system", "S")], expected=seen[:3])
    finally:
        await conn.run(lambda db: db.set_trace_callback(None))

    assert texts(await store.get_history()) == ["S", "m3", "m4", "appended since"]
    reads = [sql for sql in statements if "pygents_messages" in sql and "SELECT" in sql]
    assert reads == [], reads  # the prefix was not read back to compare it


@pytest.mark.parametrize("change", ["compacted elsewhere", "cleared elsewhere"])
async def test_a_prefix_from_a_cache_another_store_outdated_is_refused(
    db_path: Path, change: str
) -> None:
    async with connect(db_path) as mine, connect(db_path) as theirs:
        store = SQLiteContextStore(mine, session_id="s")
        await store.append_many(numbered(4))
        seen = await store.get_history()  # cached, and the cache is what goes stale
        other = SQLiteContextStore(theirs, session_id="s")
        if change == "compacted elsewhere":
            await other.replace_prefix(2, [Message("system", "theirs")])
        else:
            await other.clear()
            await other.append_many(numbered(4, "x"))
        before = await other.get_history(include_archived=True)

        with pytest.raises(ConcurrentModificationError):
            await store.replace_prefix(2, [Message("system", "mine")], expected=seen[:2])

        assert await other.get_history(include_archived=True) == before


async def test_a_prefix_from_an_outdated_cache_still_matches_when_it_is_unchanged(
    db_path: Path,
) -> None:
    async with connect(db_path) as mine, connect(db_path) as theirs:
        store = SQLiteContextStore(mine, session_id="s")
        await store.append_many(numbered(3))
        await store.append(Message("user", "later"), run_id="tail")
        seen = await store.get_history()
        await SQLiteContextStore(theirs, session_id="s").clear_run("tail")  # a new generation

        await store.replace_prefix(2, [Message("system", "S")], expected=seen[:2])

        assert texts(await store.get_history()) == ["S", "m2"]


# -- the views write as the version 4 tables did ------------------------------------------


async def test_rows_written_through_the_views_read_back_and_keep_the_counters(
    db_path: Path, conn: SQLiteConnection
) -> None:
    store = SQLiteContextStore(conn, session_id="s")
    await store.append_many(numbered(3))
    await store.replace_prefix(1, [])
    replaced = orjson.dumps({"role": "user", "content": [{"type": "text", "text": "edited"}]})
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("UPDATE pygents_messages SET data = ?, run_id = 'r' WHERE position = 1", (replaced,))
    db.execute(
        "INSERT INTO pygents_archive (session_id, tokens, data) VALUES ('s', 1, ?)",
        (encode_message(Message("user", "archived by hand")),),
    )
    db.execute("DELETE FROM pygents_messages WHERE position = 2")
    db.execute("DELETE FROM pygents_archive WHERE id = 1")
    with pytest.raises(sqlite3.IntegrityError, match="cannot move to another session_id"):
        db.execute("UPDATE pygents_messages SET session_id = 'elsewhere'")
    counters = db.execute(
        "SELECT message_count, live_tokens FROM pygents_sessions WHERE session_id = 's'"
    ).fetchone()
    tokens = db.execute("SELECT sum(tokens) FROM pygents_messages").fetchone()[0]
    runs = db.execute("SELECT run_id FROM pygents_messages").fetchall()
    assert unaccounted(db) == (0, 0, 0)
    db.close()

    fresh = SQLiteContextStore(conn, session_id="s")
    assert texts(await fresh.get_history(include_archived=True)) == ["archived by hand", "edited"]
    assert counters == (1, tokens)
    assert runs == [("r",)]


async def test_clearing_and_deleting_sessions_leave_no_message_data_behind(
    db_path: Path, conn: SQLiteConnection
) -> None:
    for session in ("cleared", "run cleared", "deleted"):
        store = SQLiteContextStore(conn, session_id=session)
        await store.append_many(numbered(4), run_id="r")
        await store.append_many(numbered(2, "x"))
        await store.replace_prefix(3, [Message("system", "S")], run_id="r")
        await store.record_usage(UsageRecord(Usage(1, 1)))
    await SQLiteContextStore(conn, session_id="cleared").clear()
    await SQLiteContextStore(conn, session_id="run cleared").clear_run("r")
    delete = "DELETE FROM pygents_sessions WHERE session_id = 'deleted'"
    await conn.run(lambda db: db.execute(delete))

    db = sqlite3.connect(db_path)
    remaining = db.execute(
        "SELECT session_id, count(*) FROM pygents_message_data GROUP BY session_id"
    ).fetchall()
    assert unaccounted(db) == (0, 0, 0)
    db.close()
    assert remaining == [("run cleared", 2)]
    kept = await SQLiteContextStore(conn, session_id="run cleared").get_history()
    assert texts(kept) == ["x0", "x1"]
