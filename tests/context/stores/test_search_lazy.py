"""The SQLite search index is lazy: an append writes nothing to it, a search catches it up.

Every data row with an id up to `pygents_search_state.indexed_through` is
indexed and none above it; whatever changes the rows (appends, erasures that
free the newest ids, SQL of your own through the compatibility views), the
index FTS5 checks against the stored text after a search is whole, and the
search finds exactly what is stored.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import Message
from pygents_ctx.context.stores import SQLiteContextStore, connect
from pygents_ctx.context.stores._common import encode_message
from pygents_ctx.context.stores._search_sql import SQLITE_LAZY_INDEX
from pygents_ctx.context.stores._sqlite_schema import MIGRATIONS, migrate

from .test_sqlite_archive import build_v4_file


def query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def indexed_count(path: Path) -> int:
    """How many documents the FTS5 index holds (one `docsize` row each)."""
    return int(query(path, "SELECT count(*) FROM pygents_search_docsize")[0][0])


def check_index(path: Path) -> None:
    """The index holds each word of each row up to `indexed_through` as the view reads
    it now, and nothing else; and FTS5's own check of its structure passes."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("INSERT INTO pygents_search (pygents_search) VALUES ('integrity-check')")
        db.execute(
            "CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, pygents_search, instance)"
        )
        indexed = Counter(db.execute("SELECT doc, term FROM temp.terms"))
        (through,) = db.execute("SELECT indexed_through FROM pygents_search_state").fetchone()
        rows = db.execute("SELECT id, text FROM pygents_search_source WHERE id <= ?", (through,))
        expected = Counter(
            (row_id, word)
            for row_id, text in rows
            for word in re.findall(r"[a-z0-9]+", (text or "").lower())
        )
    finally:
        db.close()
    assert indexed == expected


def texts(hits: list[Any]) -> list[str]:
    return [hit.message.text for hit in hits]


async def test_appends_write_nothing_to_the_index_and_a_search_finds_them(db_path: Path) -> None:
    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        await store.append(Message("user", "the first heron"))
        assert texts(await store.search("heron")) == ["the first heron"]
        segments = query(db_path, "SELECT count(*), sum(length(block)) FROM pygents_search_data")

        for n in range(30):
            await store.append(Message("user", f"note {n} about the pelican"))

        assert indexed_count(db_path) == 1
        assert query(db_path, "SELECT count(*), sum(length(block)) FROM pygents_search_data") == (
            segments
        )
        hits = await store.search("pelican", limit=50)
        assert sorted(texts(hits)) == sorted(f"note {n} about the pelican" for n in range(30))
        assert indexed_count(db_path) == 31
        check_index(db_path)


async def test_an_id_freed_by_an_erase_and_reused_is_indexed(db_path: Path) -> None:
    async with connect(db_path) as conn:
        kept = SQLiteContextStore(conn, session_id="kept")
        gone = SQLiteContextStore(conn, session_id="gone")
        await kept.append(Message("user", "an old otter"))
        await gone.append_many([Message("user", "a secret badger"), Message("user", "more")])
        assert texts(await gone.search("badger")) == ["a secret badger"]  # indexed through 3

        await kept.erase(session="gone")  # frees ids 2 and 3
        await kept.append(Message("user", "a new otter"))  # takes id 2 again
        await kept.append(Message("user", "a newer otter"))

        assert sorted(texts(await kept.search("otter"))) == [
            "a new otter",
            "a newer otter",
            "an old otter",
        ]
        assert texts(await kept.search("badger")) == []
        check_index(db_path)
        await kept.erase(session="kept")
        check_index(db_path)
        assert indexed_count(db_path) == 0


async def test_messages_changed_or_deleted_by_sql_of_your_own(db_path: Path) -> None:
    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        await store.append_many([Message("user", f"indexed {word}") for word in ("one", "two")])
        assert len(await store.search("indexed")) == 2
        await store.append_many([Message("user", f"waiting {word}") for word in ("three", "four")])

    def edit(position: int, text: str) -> None:
        query(
            db_path,
            "UPDATE pygents_messages SET data = ? WHERE session_id = 'chat' AND position = ?",
            (encode_message(Message("user", text)), position),
        )

    edit(0, "changed kestrel")  # indexed: reindexed at once
    edit(2, "changed falcon")  # not indexed yet: indexed as it is now
    query(db_path, "DELETE FROM pygents_messages WHERE session_id = 'chat' AND position IN (1, 3)")

    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        assert sorted(texts(await store.search("changed"))) == ["changed falcon", "changed kestrel"]
        assert texts(await store.search("indexed waiting one two three four")) == []
        check_index(db_path)


async def test_a_file_indexed_eagerly_keeps_its_index_and_indexes_what_comes_after(
    db_path: Path,
) -> None:
    build_v4_file(db_path)
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    before = MIGRATIONS.index(SQLITE_LAZY_INDEX)
    assert migrate(db, MIGRATIONS[:before]) == before
    db.close()
    newest, rows = query(db_path, "SELECT max(id), count(*) FROM pygents_message_data")[0]

    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        assert query(db_path, "SELECT indexed_through FROM pygents_search_state") == [(newest,)]
        await store.append(Message("user", "after the upgrade"))
        assert indexed_count(db_path) == rows
        query(db_path, "DELETE FROM pygents_archive WHERE session_id = 'chat' AND id = 1")
        assert texts(await store.search("upgrade")) == ["after the upgrade"]
        assert "how are you" in texts(await store.search("how are you"))
        check_index(db_path)


# -- any interleaving of appends, searches, erasures and edits ----------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 4)),
        st.tuples(st.just("search"), st.integers(0, 2)),
        st.tuples(st.just("erase"), st.integers(0, 2)),
        st.tuples(st.just("edit"), st.integers(0, 2)),
    ),
    max_size=16,
)


async def play(path: Path, program: list[tuple[Any, ...]]) -> None:
    stored: dict[str, list[str]] = {"s0": [], "s1": [], "s2": []}  # session: live texts
    made = 0

    async def verify(session: str) -> None:
        hits = await SQLiteContextStore(conn, session_id=session).search("word", limit=100)
        assert sorted(texts(hits)) == sorted(stored[session])
        check_index(path)

    async with connect(path) as conn:
        for step in program:
            session = f"s{step[1]}"
            store = SQLiteContextStore(conn, session_id=session)
            if step[0] == "append":
                batch = [f"word tok{made + i}" for i in range(step[2])]
                made += step[2]
                await store.append_many([Message("user", text) for text in batch])
                stored[session] += batch
            elif step[0] == "search":
                await verify(session)
            elif step[0] == "erase":
                await store.erase(session=session)
                stored[session] = []
            elif stored[session]:  # edit the session's newest message with SQL
                text = f"word edited tok{made}"
                made += 1
                position = len(stored[session]) - 1
                await conn.run(
                    lambda db, p=position, t=text, s=session: db.execute(
                        "UPDATE pygents_messages SET data = ? WHERE session_id = ? "
                        "AND position = ?",
                        (encode_message(Message("user", t)), s, p),
                    )
                )
                stored[session][-1] = text
        for session in stored:
            await verify(session)


@settings(max_examples=60, deadline=None)
@given(program=operations)
def test_the_index_matches_the_stored_text_after_any_writes(program: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(play(Path(directory) / "lazy.db", program))
