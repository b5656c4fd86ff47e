"""Owners, retention and erasure: `owner=`, `list_sessions(owner=...)`, `erase(...)`.

The canary tests plant 1,000 distinct strings in everything a session stores
(live messages, the archive after a compaction, usage, approval decisions,
offloaded blobs, the search index, the lease), erase, checkpoint, and read the
raw bytes: SQLite's file and WAL, PostgreSQL's tables and the database's files.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import Message, ToolResultBlock, Usage, UsageRecord
from pygents_ctx.context.messages import OffloadedResult
from pygents_ctx.context.stores import (
    AutoCompactStore,
    ContextStore,
    MemoryContextStore,
    SQLiteConnection,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores.base import ApprovalDecision
from pygents_ctx.context.stores.postgres import (
    PostgresConnection,
    PostgresContextStore,
    connect_postgres,
)
from pygents_ctx.errors import SessionNotFoundError
from pygents_ctx.memory import PostgresBlobStore, SQLiteBlobStore
from pygents_ctx.memory.blobs.base import BlobStore
from pygents_ctx.testing import ScriptedSummarizer
from tests import postgres_server

from .test_postgres import fresh_database

MARKER = "canaryzq"
CANARIES = [f"{i:04d}{MARKER}" for i in range(1000)]

Conn = SQLiteConnection | PostgresConnection


def make(conn: Conn, session_id: str, owner: str | None = None) -> ContextStore:
    if isinstance(conn, SQLiteConnection):
        return SQLiteContextStore(conn, session_id=session_id, owner=owner)
    return PostgresContextStore(conn, session_id=session_id, owner=owner)


def blob_store(conn: Conn) -> BlobStore:
    if isinstance(conn, SQLiteConnection):
        return SQLiteBlobStore(conn)
    return PostgresBlobStore(conn)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest) -> Conn:
    name = "conn" if request.param == "sqlite" else "pg_conn"
    conn: Conn = request.getfixturevalue(name)
    return conn


def offloaded(text: str, call_id: str) -> tuple[Message, str]:
    """A tool result message whose whole text is only in the blob it names."""
    handle = "tool-results/" + hashlib.sha256(text.encode()).hexdigest()
    stub = OffloadedResult(handle, chars=len(text), tokens=len(text) // 4, head="", tail="")
    block = ToolResultBlock(call_id, stub.stub_text(), offloaded=stub)
    return Message("user", [block]), handle


async def texts(store: ContextStore) -> list[str]:
    return [message.text for message in await store.get_history()]


# -- owners ------------------------------------------------------------------------


async def test_owner_is_set_by_the_first_write_listed_and_kept_by_forks(db: Conn) -> None:
    alice = make(db, "a1", owner="alice")
    await alice.append(Message("user", "hello"))
    await make(db, "b1", owner="bob").append(Message("user", "hi"))
    await make(db, "nobody").append(Message("user", "hey"))
    fork = await alice.fork()
    assert fork.owner == "alice"

    listed = {info.session_id: info.owner for info in await alice.list_sessions()}
    assert listed == {"a1": "alice", fork.session_id: "alice", "b1": "bob", "nobody": None}
    assert {info.session_id for info in await alice.list_sessions(owner="alice")} == {
        "a1",
        fork.session_id,
    }
    assert await alice.list_sessions(owner="carol") == []


async def test_another_owners_session_is_refused_and_unchanged(db: Conn) -> None:
    await make(db, "s", owner="alice").append(Message("user", "mine"))
    intruder = make(db, "s", owner="bob")
    with pytest.raises(ValueError, match=r"belongs to owner 'alice'.*owner='alice'"):
        await intruder.append(Message("user", "theirs"))
    with pytest.raises(ValueError, match="belongs to owner 'alice'"):
        await intruder.record_usage(UsageRecord(Usage(1, 1)))
    assert await texts(make(db, "s")) == ["mine"]
    assert [info.owner for info in await intruder.list_sessions()] == ["alice"]


async def test_a_session_without_an_owner_is_taken_by_the_first_owner(db: Conn) -> None:
    await make(db, "s").append(Message("user", "before owners"))
    await make(db, "s", owner="alice").append(Message("user", "after"))
    with pytest.raises(ValueError, match="belongs to owner 'alice'"):
        await make(db, "s", owner="bob").append(Message("user", "no"))
    assert [info.owner for info in await make(db, "x").list_sessions()] == ["alice"]
    assert await texts(make(db, "s")) == ["before owners", "after"]


@pytest.mark.parametrize(
    ("owner", "error"),
    [("", ValueError), ("a\x00b", ValueError), (7, TypeError)],
)
async def test_a_bad_owner_is_refused(db: Conn, owner: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="owner"):
        make(db, "s", owner=owner)
    with pytest.raises(error, match="owner"):
        await make(db, "s").list_sessions(owner=owner)


# -- erase -------------------------------------------------------------------------


async def test_erase_without_owner_or_session_names_the_fix_and_changes_nothing(
    db: Conn,
) -> None:
    store = make(db, "s", owner="alice")
    await store.append(Message("user", "kept"))
    with pytest.raises(ValueError, match=r"owner=\.\.\..*session=\.\.\..*nothing was erased"):
        await store.erase()
    with pytest.raises(ValueError, match=r"owner=\.\.\."):
        await store.erase(older_than=timedelta(0))
    with pytest.raises(TypeError, match="older_than"):
        await store.erase(owner="alice", older_than=30)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="older_than"):
        await store.erase(owner="alice", older_than=timedelta(days=-1))
    assert await texts(store) == ["kept"]


async def test_erase_session_removes_everything_of_it_and_only_it(db: Conn) -> None:
    gone = make(db, "gone", owner="alice")
    await gone.append_many([Message("user", f"old words {i}") for i in range(4)])
    await gone.replace_prefix(2, [Message("user", "summary words")])
    await gone.record_usage(UsageRecord(Usage(10, 5), model="m"))
    await gone.record_decision("call-1", ApprovalDecision(False, "no"))
    await gone.journal_finish("call-2", ToolResultBlock("call-2", "refunded words"))
    await gone.lease(ttl=300, owner="worker").acquire()
    stays = make(db, "stays", owner="alice")
    await stays.append(Message("user", "other words"))

    assert await gone.erase(session="gone") == 1
    again = make(db, "gone")
    assert await texts(again) == []
    assert [item async for item in again.iter_history(include_archived=True)] == []
    assert await again.get_usage() == []
    assert await again.get_decisions() == {}
    assert await again.get_journal(["call-2"]) == {}
    assert await again.get_context_tokens() == (0, 0)
    assert await again.search("words") == []
    assert [info.session_id for info in await stays.list_sessions()] == ["stays"]
    assert await texts(stays) == ["other words"]
    assert [hit.message.text for hit in await stays.search("words")] == ["other words"]
    assert await gone.erase(session="gone") == 0
    with pytest.raises(SessionNotFoundError):  # the session is gone, its lease with it
        await again.lease(owner="someone else").acquire()
    async with again.lease(owner="someone else", create=True):  # not held by "worker"
        pass


async def test_a_fork_of_an_erased_session_keeps_its_history(db: Conn) -> None:
    source = make(db, "src", owner="alice")
    await source.append_many([Message("user", f"m{i}") for i in range(5)])
    await source.replace_prefix(2, [Message("user", "summary")])
    fork = await source.fork(session_id="fork", at=3)
    grandchild = await fork.fork(session_id="grandchild")
    await fork.append(Message("user", "own"))
    before = [item async for item in fork.iter_history(include_archived=True)]

    assert await source.erase(session="src") == 1
    assert [item async for item in fork.iter_history(include_archived=True)] == before
    assert await texts(make(db, "grandchild")) == ["summary", "m2", "m3"]
    assert await texts(grandchild) == ["summary", "m2", "m3"]
    assert [hit.message.text for hit in await make(db, "fork").search("m2")] == ["m2"]


async def test_erase_owner_with_older_than_keeps_newer_sessions_and_other_owners(
    db: Conn,
) -> None:
    for session_id, owner in (("old", "alice"), ("new", "alice"), ("bobs", "bob")):
        await make(db, session_id, owner=owner).append(Message("user", session_id))
    sql = "UPDATE pygents_sessions SET created_at = {} WHERE session_id IN ('old', 'bobs')"
    if isinstance(db, SQLiteConnection):
        await db.run(lambda raw: raw.execute(sql.format("'2020-01-01T00:00:00.000000+00:00'")))
    else:
        await db.run(lambda raw: raw.execute(sql.format("'2020-01-01'::timestamptz")))

    # Older than the calendar goes back: no session, where the date could not be computed.
    assert await make(db, "x").erase(owner="alice", older_than=timedelta.max) == 0
    assert await make(db, "x").erase(owner="alice", older_than=timedelta(days=30)) == 1
    assert {info.session_id for info in await make(db, "x").list_sessions()} == {"new", "bobs"}
    assert await make(db, "x").erase(owner="alice", session="bobs") == 0  # both must hold
    assert await make(db, "x").erase(owner="alice") == 1
    assert [info.session_id for info in await make(db, "x").list_sessions()] == ["bobs"]


async def test_erase_keeps_a_blob_another_session_still_names(db: Conn) -> None:
    blobs = blob_store(db)
    shared, shared_handle = offloaded("shared text", "c1")
    own, own_handle = offloaded("own text", "c2")
    for handle, text in ((shared_handle, "shared text"), (own_handle, "own text")):
        await blobs.put(handle, text.encode())
    await make(db, "gone", owner="alice").append_many([shared, own])
    await make(db, "stays", owner="bob").append(shared)

    assert await make(db, "x").erase(owner="alice") == 1
    # (the PostgreSQL database is the worker's: other tests' blobs may be listed too)
    names = {info.name for info in await blobs.list("tool-results/")}
    assert shared_handle in names
    assert own_handle not in names
    assert (await blobs.get(shared_handle)).data == b"shared text"


async def test_erase_through_an_autocompact_store_reaches_the_inner_store(conn: Any) -> None:
    inner = SQLiteContextStore(conn, session_id="s", owner="alice")
    store = AutoCompactStore(inner, ScriptedSummarizer(), max_tokens=10_000)
    await store.append(Message("user", "x"))
    assert store.owner == "alice"
    assert [info.session_id for info in await store.list_sessions(owner="alice")] == ["s"]
    assert await store.erase(owner="alice") == 1
    assert await store.list_sessions() == []


async def test_memory_store_erases_itself_when_named() -> None:
    store = MemoryContextStore([Message("user", "a")], session_id="s", owner="alice")
    await store.replace_prefix(1, [Message("user", "summary")])
    await store.record_usage(UsageRecord(Usage(3, 4)))
    await store.record_decision("c", ApprovalDecision(True))
    with pytest.raises(ValueError, match=r"owner=\.\.\."):
        await store.erase()
    assert await store.erase(owner="bob") == 0
    assert await store.erase(session="other") == 0
    assert await store.erase(owner="alice", older_than=timedelta(days=1)) == 0
    assert await store.count() == 1
    assert await store.erase(owner="alice", session="s") == 1
    assert [item async for item in store.iter_history(include_archived=True)] == []
    assert await store.get_usage() == []
    assert await store.get_decisions() == {}
    assert await store.get_context_tokens() == (0, 0)
    assert [info.owner for info in await store.list_sessions(owner="alice")] == ["alice"]
    assert await store.list_sessions(owner="bob") == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    owners=st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=8),
    forks=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3)), max_size=4),
    target=st.sampled_from(["a", "b", "c"]),
)
async def test_erasing_an_owner_leaves_every_other_history_as_it_was(
    tmp_path_factory: pytest.TempPathFactory,
    owners: list[str | None],
    forks: list[tuple[int, int]],
    target: str,
) -> None:
    async with connect(tmp_path_factory.mktemp("p") / "ctx.db") as conn:
        stores: list[ContextStore] = []
        for i, owner in enumerate(owners):
            store = SQLiteContextStore(conn, session_id=f"s{i}", owner=owner)
            await store.append_many([Message("user", f"s{i} m{k}") for k in range(3)])
            stores.append(store)
        for source, at in forks:  # a fork takes its source's owner
            chosen = stores[source % len(stores)]
            stores.append(await chosen.fork(at=min(at, await chosen.count())))
        before = {s.session_id: (s.owner, await texts(s)) for s in stores}
        erased = await stores[0].erase(owner=target)
        assert erased == sum(owner == target for owner, _ in before.values())
        for store in stores:
            owner, history = before[store.session_id]
            fresh = SQLiteContextStore(conn, session_id=store.session_id)
            assert await texts(fresh) == ([] if owner == target else history)


# -- canaries ----------------------------------------------------------------------


async def plant(store: ContextStore, blobs: BlobStore) -> None:
    """Put the 1,000 canaries everywhere the session keeps something."""
    chunks = [CANARIES[i : i + 2] for i in range(0, 400, 2)]
    await store.append_many([Message("user", " ".join(pair)) for pair in chunks])
    # A compaction: the first 100 messages (200 canaries) move to the archive.
    await store.replace_prefix(100, [Message("user", "summary " + " ".join(CANARIES[400:500]))])
    for i, canary in enumerate(CANARIES[500:600]):  # only in the blob: the stub names its handle
        message, handle = offloaded(f"result {canary} end", f"call-{i}")
        await blobs.put(handle, f"result {canary} end".encode())
        await store.append(message)
    for canary in CANARIES[600:700]:
        await store.record_usage(UsageRecord(Usage(1, 1), model=canary))
    for i, canary in enumerate(CANARIES[700:800]):
        await store.record_decision(f"call-{i}", ApprovalDecision(False, canary))
    await store.append_many(
        [Message("assistant", " ".join(CANARIES[i : i + 2])) for i in range(800, 1000, 2)]
    )
    await store.lease(ttl=300, owner=f"worker-{MARKER}").acquire()
    assert len(await store.search(CANARIES[900])) == 1


async def keep_bob(conn: Conn, blobs: BlobStore) -> None:
    bob = make(conn, "bob-1", owner="bob")
    message, handle = offloaded("bob's result", "call-b")
    await blobs.put(handle, b"bob's result")
    await bob.append_many([Message("user", "bob keeps this"), message])


async def check_bob(conn: Conn, blobs: BlobStore) -> None:
    bob = make(conn, "bob-1")
    assert (await texts(bob))[0] == "bob keeps this"
    assert [hit.message.text for hit in await bob.search("keeps")] == ["bob keeps this"]
    assert [info.session_id for info in await bob.list_sessions()] == ["bob-1"]
    assert len(await blobs.list("tool-results/")) == 1


def found(raw: bytes) -> list[str]:
    return [canary for canary in CANARIES if canary.encode() in raw]


def sqlite_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


async def test_sqlite_erase_leaves_no_canary_in_the_file_or_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "ctx.db"
    async with connect(path, secure_delete=True) as conn:
        blobs = blob_store(conn)
        await plant(make(conn, "alice-1", owner="alice"), blobs)
        await keep_bob(conn, blobs)
        assert found(sqlite_bytes(path)) == CANARIES  # all of them are on disk: the test can fail

        assert await make(conn, "x").erase(owner="alice") == 1
        await conn.run(lambda db: db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
        raw = sqlite_bytes(path)
        assert found(raw) == []
        assert MARKER.encode() not in raw  # nor any piece of the search index's words
        await check_bob(conn, blobs)


def database_files(server: postgres_server.PostgresServer, oid: int) -> bytes:
    return b"".join(
        p.read_bytes() for p in (server.directory / "data" / "base" / str(oid)).iterdir()
    )


async def text_columns(conn: PostgresConnection) -> list[str]:
    """Every text, bytea or tsvector column of the database's tables, as a text expression."""

    async def read(db: psycopg.AsyncConnection[Any]) -> list[str]:
        cursor = await db.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type IN "
            "('text', 'bytea', 'tsvector', 'character varying', 'jsonb')"
        )
        return [
            f'SELECT encode("{c}", \'escape\') FROM "{t}"'
            if kind == "bytea"
            else f'SELECT "{c}"::text FROM "{t}"'
            for t, c, kind in await cursor.fetchall()
        ]

    return await conn.run(read)


async def postgres_canaries(conn: PostgresConnection, columns: list[str]) -> set[str]:
    """The canaries any row of any table holds, in any text, bytea or tsvector column."""

    async def read(db: psycopg.AsyncConnection[Any]) -> set[str]:
        seen: set[str] = set()
        for query in columns:
            cursor = await db.execute(query)
            for (value,) in await cursor.fetchall():
                if value is not None and MARKER in value:
                    seen.update(c for c in CANARIES if c in value)
        return seen

    return await conn.run(read)


async def test_postgres_erase_leaves_no_canary_in_any_table_or_file(
    postgres: postgres_server.PostgresServer,
) -> None:
    with fresh_database(postgres) as dsn:
        async with connect_postgres(dsn) as conn:
            blobs = blob_store(conn)
            await plant(make(conn, "alice-1", owner="alice"), blobs)
            await keep_bob(conn, blobs)
            columns = await text_columns(conn)
            assert await postgres_canaries(conn, columns) == set(CANARIES)

            async def oid(db: psycopg.AsyncConnection[Any]) -> int:
                await db.execute("CHECKPOINT")
                cursor = await db.execute(
                    "SELECT oid FROM pg_database WHERE datname = current_database()"
                )
                row = await cursor.fetchone()
                assert row is not None
                return int(row[0])

            database = await conn.run(oid)
            assert MARKER.encode() in database_files(postgres, database)

            assert await make(conn, "x").erase(owner="alice") == 1
            await conn.run(lambda db: db.execute("VACUUM FULL"))
            await conn.run(lambda db: db.execute("CHECKPOINT"))
            assert await postgres_canaries(conn, columns) == set()
            assert MARKER.encode() not in database_files(postgres, database)
            await check_bob(conn, blobs)
