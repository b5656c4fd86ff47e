"""PostgresContextStore on a real server: sessions, concurrency, the schema, caching, processes.

The shared contract (test_base.py, test_compaction.py) runs on PostgreSQL
through the `backend` fixture; these are the tests only this backend needs.
"""

from __future__ import annotations

import ast
import asyncio
import doctest
import importlib
import re
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from psycopg import sql

from pygents_ctx import Message, ToolUseBlock, Usage, UsageRecord, count_message_tokens
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SessionSnapshot,
    SQLiteConnection,
    SQLiteContextStore,
    StoreClosedError,
    StoredMessage,
    StoreSchemaError,
)
from pygents_ctx.context.stores._postgres_schema import MIGRATIONS, SCHEMA_VERSION, migrate
from pygents_ctx.context.stores.postgres import (
    PostgresConnection,
    PostgresContextStore,
    connect_postgres,
)
from tests import postgres_server

from .helpers import numbered, texts
from .test_sqlite import SQL_METACHARACTERS, TABLES
from .test_store_properties import apply, observe, operations

Server = postgres_server.PostgresServer


async def query(conn: PostgresConnection, statement: str, *params: Any) -> list[Any]:
    """Rows of a statement run on `conn` (as an operator at a psql prompt would)."""

    async def run(db: psycopg.AsyncConnection[Any]) -> list[Any]:
        cursor = await db.execute(statement, params or None)
        return await cursor.fetchall() if cursor.description else []

    return await conn.run(run)


@contextmanager
def fresh_database(server: Server) -> Iterator[str]:
    """The DSN of a new, empty database, dropped at the end."""
    name = f"fresh_{uuid.uuid4().hex}"
    with psycopg.connect(server.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield server.dsn_for(name)
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def fresh_dsn(postgres: Server) -> Iterator[str]:
    with fresh_database(postgres) as dsn:
        yield dsn


@pytest.fixture
async def other(postgres: Server, pg_conn: PostgresConnection) -> AsyncIterator[PostgresConnection]:
    """A second connection to the same database, as another worker would have."""
    async with connect_postgres(postgres.dsn) as second:
        yield second


# -- persistence and sessions -------------------------------------------------------


async def test_a_session_survives_reconnecting(
    postgres: Server, pg_conn: PostgresConnection
) -> None:
    store = PostgresContextStore(pg_conn, session_id="chat")
    await store.append_many(numbered(3), run_id="r1")
    await store.replace_prefix(1, [Message("user", "S")])
    await store.add_context_tokens(120, 30)

    async with connect_postgres(postgres.dsn) as conn:
        store = PostgresContextStore(conn, session_id="chat")

        assert texts(await store.get_history()) == ["S", "m1", "m2"]
        assert texts(await store.get_history(include_archived=True)) == ["m0", "S", "m1", "m2"]
        assert await store.get_context_tokens() == (120, 30)
        await store.clear_run("r1")
        assert texts(await store.get_history()) == ["S"]


async def test_list_sessions_is_newest_first_with_server_times_in_utc(
    pg_conn: PostgresConnection,
) -> None:
    await query(pg_conn, "SET TIME ZONE 'America/New_York'")  # reported in UTC all the same
    for index in range(20):
        await PostgresContextStore(pg_conn, session_id=f"s{index:02}").append(Message("user", "x"))

    infos = await PostgresContextStore(pg_conn).list_sessions()

    assert [info.session_id for info in infos] == [f"s{i:02}" for i in reversed(range(20))]
    stamps = [info.created_at for info in infos]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", s) for s in stamps)
    assert stamps == sorted(stamps, reverse=True)
    [[now]] = await query(pg_conn, "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
    assert stamps[0].startswith(now)


async def test_a_session_exists_from_its_first_write(pg_conn: PostgresConnection) -> None:
    reader = PostgresContextStore(pg_conn, session_id="read only")
    assert await reader.get_history() == []
    assert await reader.get_history(limit=3) == []
    assert (await reader.count(), await reader.token_count()) == (0, 0)
    assert await reader.get_context_tokens() == (0, 0)
    await reader.clear()
    await reader.clear_run("r")
    assert await reader.list_sessions() == []

    await PostgresContextStore(pg_conn, session_id="tokens only").add_context_tokens(5, 1)

    [info] = await reader.list_sessions()
    assert (info.session_id, info.message_count, info.input_tokens) == ("tokens only", 0, 5)


@pytest.mark.parametrize("session_id", SQL_METACHARACTERS)
async def test_session_ids_full_of_sql_are_plain_text(
    pg_conn: PostgresConnection, session_id: str
) -> None:
    bystander = PostgresContextStore(pg_conn, session_id="bystander")
    await bystander.append(Message("user", "still here"))
    store = PostgresContextStore(pg_conn, session_id=session_id)

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
    tables = await query(pg_conn, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    # Every table survived (the memory stores' tests may have added their own beside them).
    assert set(TABLES) <= {name for (name,) in tables}


async def test_nul_characters_are_kept_in_messages_and_refused_in_ids(
    pg_conn: PostgresConnection,
) -> None:
    store = PostgresContextStore(pg_conn, session_id="s")
    await store.append(Message("user", "a\x00b"))  # text and jsonb could not hold it

    assert texts(await store.get_history()) == ["a\x00b"]
    assert (await store.list_sessions())[0].preview == "a\x00b"
    with pytest.raises(ValueError, match=r"^session_id .* holds a NUL character"):
        PostgresContextStore(pg_conn, session_id="a\x00b")
    with pytest.raises(ValueError, match=r"^session_id .* holds a NUL character"):
        await store.fork(session_id="f\x00")
    for call in (
        lambda: store.append(Message("user", "x"), run_id="r\x00"),
        lambda: store.append_many([Message("user", "x")], run_id="r\x00"),
        lambda: store.replace_prefix(1, [], run_id="r\x00"),
        lambda: store.clear_run("r\x00"),
        # The snapshot refuses them when it is made, as on every backend.
        lambda: PostgresContextStore(pg_conn, session_id="new").restore(
            SessionSnapshot("s", [StoredMessage(Message("user", "x"), "r\x00")])
        ),
        lambda: PostgresContextStore(pg_conn, session_id="new").restore(
            SessionSnapshot("s", usage=[UsageRecord(Usage(1, 1), run_id="r\x00")])
        ),
    ):
        with pytest.raises(ValueError, match=r"run_id .* holds a NUL character"):
            await call()
    assert texts(await store.get_history(include_archived=True)) == ["a\x00b"]
    assert await PostgresContextStore(pg_conn, session_id="new").snapshot() == SessionSnapshot(
        "new"
    )


async def test_fork_refuses_an_existing_session_id(pg_conn: PostgresConnection) -> None:
    await PostgresContextStore(pg_conn, session_id="taken").append(Message("user", "x"))
    store = PostgresContextStore(pg_conn, session_id="source")
    await store.append(Message("user", "y"))

    with pytest.raises(ValueError, match="'taken' already exists"):
        await store.fork(session_id="taken")
    with pytest.raises(ValueError, match="'source' already exists"):
        await store.fork(session_id="source")

    assert [info.session_id for info in await store.list_sessions()] == ["source", "taken"]


async def test_forking_a_session_never_written_gives_an_empty_session(
    pg_conn: PostgresConnection,
) -> None:
    fork = await PostgresContextStore(pg_conn, session_id="unwritten").fork(session_id="f")

    assert await fork.get_history() == []
    assert [info.session_id for info in await fork.list_sessions()] == ["f"]


async def test_a_session_deleted_behind_the_stores_back_is_recreated_by_append(
    pg_conn: PostgresConnection,
) -> None:
    store = PostgresContextStore(pg_conn, session_id="s")
    await store.append(Message("user", "old"))
    await store.get_history()
    await query(pg_conn, "DELETE FROM pygents_sessions")  # the messages go with it

    await store.append(Message("user", "new"))

    assert texts(await store.get_history()) == ["new"]
    assert [info.message_count for info in await store.list_sessions()] == [1]


async def test_from_history_and_from_context_with_a_postgres_connection(
    pg_conn: PostgresConnection,
) -> None:
    source = await PostgresContextStore.from_history(numbered(3), conn=pg_conn)
    await source.replace_prefix(1, [Message("user", "S")])
    await source.set_context_tokens(9, 1)

    clone = await PostgresContextStore.from_context(source, conn=pg_conn)

    assert type(clone) is PostgresContextStore
    assert clone.session_id != source.session_id
    assert texts(await clone.get_history(include_archived=True)) == ["m0", "S", "m1", "m2"]
    assert texts(await clone.get_history()) == ["S", "m1", "m2"]
    assert await clone.get_context_tokens() == (9, 1)
    with pytest.raises(ValueError, match="already holds messages"):
        await PostgresContextStore.from_history(
            numbered(1), conn=pg_conn, session_id=clone.session_id
        )


@pytest.mark.parametrize("target", ["memory", "sqlite"])
async def test_from_context_copies_to_and_from_other_backends(
    pg_conn: PostgresConnection, conn: SQLiteConnection, target: str
) -> None:
    other: ContextStore = (
        MemoryContextStore(numbered(3))
        if target == "memory"
        else await SQLiteContextStore.from_history(numbered(3), conn=conn)
    )
    await other.replace_prefix(2, [])

    into_postgres = await PostgresContextStore.from_context(other, conn=pg_conn)
    back = await type(other).from_context(
        into_postgres, **({} if target == "memory" else {"conn": conn})
    )

    for store in (into_postgres, back):
        assert texts(await store.get_history()) == ["m2"]
        assert texts(await store.get_history(include_archived=True)) == ["m0", "m1", "m2"]


# -- the connection ---------------------------------------------------------------------


def test_the_store_needs_a_postgres_connection(conn: SQLiteConnection) -> None:
    for wrong in ("postgresql://localhost/app", conn):
        with pytest.raises(TypeError, match=r"await connect_postgres\(dsn\)"):
            PostgresContextStore(wrong)  # type: ignore[arg-type]


def test_connect_postgres_needs_a_str_dsn() -> None:
    with pytest.raises(TypeError, match="dsn must be a str, not bytes"):
        connect_postgres(b"host=/tmp")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        ("10", TypeError, "stalled_write_timeout must be a number, not str"),
        (True, TypeError, "stalled_write_timeout must be a number, not bool"),
        (
            0,
            ValueError,
            "must be a finite number more than 0, not 0; a number of seconds; None keeps",
        ),
        (float("inf"), ValueError, r"must be a finite number more than 0, not inf"),
    ],
)
def test_a_bad_stalled_write_timeout_is_refused_before_connecting(
    timeout: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        connect_postgres("host=/nowhere", stalled_write_timeout=timeout)


async def test_a_holder_stalled_inside_a_write_lets_the_lease_pass_on(postgres: Server) -> None:
    """A process frozen in the middle of a write holds the lease row's lock, which a
    takeover waits for: the server ends the stalled transaction, rolled back, after
    `stalled_write_timeout`, and the next worker takes the session over."""
    async with (
        connect_postgres(postgres.dsn, stalled_write_timeout=0.5) as frozen_conn,
        connect_postgres(postgres.dsn) as next_conn,
    ):
        session = f"stalled-{uuid.uuid4().hex}"
        frozen = PostgresContextStore(frozen_conn, session_id=session)
        await frozen.append(Message("user", "before the stall"))
        held = await frozen.lease(ttl=0.2).acquire()
        woken = asyncio.Event()

        async def write_then_stall(conn: Any) -> None:
            async with conn.transaction():  # as a fenced write: the session's rows, then the lease
                await conn.execute(
                    "SELECT 1 FROM pygents_leases WHERE session_id = %s FOR SHARE", (session,)
                )
                await conn.execute(
                    "UPDATE pygents_sessions SET preview = 'written while stalled' "
                    "WHERE session_id = %s",
                    (session,),
                )
                await woken.wait()  # the process is frozen here

        stalled = asyncio.ensure_future(frozen_conn.run(write_then_stall))
        started = asyncio.get_running_loop().time()
        successor = (
            await PostgresContextStore(next_conn, session_id=session)
            .lease(ttl=5, wait=10)
            .acquire()
        )
        waited = asyncio.get_running_loop().time() - started

        assert successor.token > held.token
        assert waited < 5  # the 0.5 s bound and the 0.2 s ttl, not the stall's length
        woken.set()  # the frozen process wakes and goes on to commit
        with pytest.raises(psycopg.Error, match="idle-in-transaction timeout"):
            await stalled  # the server ended the stalled transaction: nothing of it stays
        (preview,) = (
            await query(
                next_conn, "SELECT preview FROM pygents_sessions WHERE session_id = %s", session
            )
        )[0]
        assert preview != "written while stalled"
        await successor.release()


def test_without_psycopg_connecting_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what `import psycopg` sees uninstalled

    with pytest.raises(ImportError, match=r"pip install -e '\.\[postgres\]' from a checkout"):
        connect_postgres("host=/tmp")


async def test_the_store_shows_where_it_is_and_never_the_password(
    pg_conn: PostgresConnection,
) -> None:
    store = PostgresContextStore(pg_conn, session_id="s")

    assert store.connection is pg_conn
    assert re.fullmatch(r"postgres@/tmp/pygents-pg-\w+:5432/postgres", pg_conn.target)
    assert repr(store) == f"PostgresContextStore({pg_conn.target!r}, session_id='s')"
    assert repr(pg_conn) == f"<PostgresConnection {pg_conn.target!r} open>"


async def test_a_closed_connection_gives_a_clear_error_from_the_store(postgres: Server) -> None:
    conn = await connect_postgres(postgres.dsn)
    store = PostgresContextStore(conn, session_id="s")
    await store.append(Message("user", "x"))
    await store.close()
    open_after_store_close = not conn.closed  # the store does not own the connection
    await conn.close()
    await conn.close()  # idempotent

    assert open_after_store_close
    assert repr(conn).endswith(" closed>")
    for call in (store.get_history(), store.append(Message("user", "y")), store.count()):
        with pytest.raises(StoreClosedError, match=r"is closed; open a new one"):
            await call
    assert issubclass(StoreClosedError, RuntimeError)


async def test_a_lost_server_connection_gives_a_clear_error(
    pg_conn: PostgresConnection, other: PostgresConnection
) -> None:
    store = PostgresContextStore(other, session_id="s")
    await store.append(Message("user", "x"))
    [[pid]] = await query(other, "SELECT pg_backend_pid()")
    await query(pg_conn, "SELECT pg_terminate_backend(%s)", pid)

    with pytest.raises(psycopg.OperationalError):
        await store.get_history()  # the call that finds out

    assert other.closed
    with pytest.raises(StoreClosedError, match="the server connection was lost"):
        await store.append(Message("user", "y"))


async def test_calls_made_before_close_finish_first(postgres: Server) -> None:
    conn = await connect_postgres(postgres.dsn)
    store = PostgresContextStore(conn)

    append = asyncio.ensure_future(store.append_many(numbered(3)))
    await asyncio.sleep(0)
    await conn.close()
    await append

    async with connect_postgres(postgres.dsn) as again:
        assert await PostgresContextStore(again, session_id=store.session_id).count() == 3


async def test_a_cancelled_call_still_finishes_whole_and_the_connection_stays_usable(
    pg_conn: PostgresConnection,
) -> None:
    store = PostgresContextStore(pg_conn, session_id="s")
    await store.append_many(numbered(4))

    for call in (
        store.append_many(numbered(3, "x")),
        store.replace_prefix(2, [Message("user", "S")]),
    ):
        task = asyncio.ensure_future(call)
        await asyncio.sleep(0)  # the call is under way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert texts(await store.get_history()) == ["S", "m2", "m3", "x0", "x1", "x2"]
    assert await store.count() == 6


async def test_the_loop_keeps_running_while_another_worker_holds_the_session(
    postgres: Server, pg_conn: PostgresConnection
) -> None:
    store = PostgresContextStore(pg_conn, session_id="s")
    await store.append(Message("user", "first"))
    blocker = await psycopg.AsyncConnection.connect(postgres.dsn)  # not autocommit: holds locks
    await blocker.execute("SELECT 1 FROM pygents_sessions WHERE session_id = 's' FOR UPDATE")
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
    await blocker.commit()
    await blocker.close()
    await append
    ticker.cancel()

    assert waited
    assert ticks >= 5
    assert texts(await store.get_history()) == ["first", "second"]


def test_a_missing_server_fails_with_how_to_install_one(tmp_path: Path) -> None:
    with pytest.raises(postgres_server.ServerUnavailableError, match="apt-get install postgresql"):
        postgres_server.find_binaries(path=str(tmp_path), search=[str(tmp_path / "*/bin")])


# -- several connections and processes on one session -------------------------------------


async def test_workers_on_several_connections_never_leave_the_counters_behind(
    postgres: Server, pg_conn: PostgresConnection
) -> None:
    conns = [await connect_postgres(postgres.dsn) for _ in range(4)]
    try:
        stores = [PostgresContextStore(conn, session_id="busy") for conn in conns]
        await stores[0].append_many(numbered(10), run_id="old")

        async def work(index: int, store: PostgresContextStore) -> None:
            for step in range(15):
                await store.append(Message("user", f"w{index}:{step}"), run_id=f"r{step % 3}")
                await store.add_context_tokens(1, 2)
                if index == 0 and step % 5 == 4:
                    await store.replace_prefix(2, [Message("user", f"S{step}")])
                if index == 1 and step == 10:
                    await store.clear_run("r1")

        await asyncio.gather(*(work(i, s) for i, s in enumerate(stores)))
    finally:
        for conn in conns:
            await conn.close()

    store = PostgresContextStore(pg_conn, session_id="busy")
    history = await store.get_history()
    for index in range(4):  # each worker's surviving messages keep its order
        steps = [int(t.split(":")[1]) for t in texts(history) if t.startswith(f"w{index}:")]
        assert steps == sorted(steps)
    [(count, tokens, positions)] = await query(
        pg_conn,
        "SELECT count(*), sum(tokens), count(DISTINCT position) FROM pygents_messages "
        "WHERE session_id = 'busy'",
    )
    assert await store.count() == count == positions == len(history)
    assert await store.token_count() == tokens == sum(map(count_message_tokens, history))
    assert await store.get_context_tokens() == (60, 120)


# -- messages and the cached history ---------------------------------------------------------


async def test_messages_are_stored_as_orjson_bytes_beside_their_token_count(
    pg_conn: PostgresConnection,
) -> None:
    store = PostgresContextStore(pg_conn, session_id="s")
    message = Message("assistant", [ToolUseBlock("c1", "search", {"q": "naïve ☃"})])
    await store.append(message)

    [(tokens, data, as_json)] = await query(
        pg_conn,
        "SELECT tokens, data, convert_from(data, 'UTF8')::jsonb -> 'content' -> 0 ->> 'name' "
        "FROM pygents_messages",
    )

    assert tokens == count_message_tokens(message)
    assert isinstance(data, bytes)
    assert as_json == "search"


async def test_a_message_json_cannot_hold_is_refused_before_anything_is_stored(
    pg_conn: PostgresConnection,
) -> None:
    store = PostgresContextStore(pg_conn)
    bad = Message("assistant", [ToolUseBlock("c", "t", {"when": object()})])

    with pytest.raises(TypeError, match=r"Message\.content\[0\]\.input\.when"):
        await store.append_many([Message("user", "fine"), bad])

    assert await store.count() == 0


@pytest.mark.parametrize("data", [b"{not json", b'{"type": "text", "text": "a block"}'])
async def test_an_unreadable_row_names_its_session_and_position(
    pg_conn: PostgresConnection, data: bytes
) -> None:
    store = PostgresContextStore(pg_conn, session_id="s")
    await store.append_many(numbered(2))
    await query(pg_conn, "UPDATE pygents_messages SET data = %s WHERE position = 1", data)

    with pytest.raises(ValueError, match="position 1 of session 's' cannot be read"):
        await PostgresContextStore(pg_conn, session_id="s").get_history()


async def test_a_long_history_arrives_in_a_few_large_reads(
    pg_conn: PostgresConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 MB of history wakes the event loop some 30 to 120 times, not 500 or more.

    libpq's input buffer starts at 16 KiB, and each time psycopg finds it
    drained it waits on the loop again: at most 16 KiB a wait, 8 MB took 500
    waits or more (a third of a cold load's time). `connect_postgres` widens it.
    """
    await PostgresContextStore(pg_conn, session_id="long").append_many(
        Message("user", f"{index} " + "lorem ipsum " * 340) for index in range(2_000)
    )
    loop = asyncio.get_running_loop()
    waits = 0
    add_reader = loop.add_reader

    def counted(*args: Any) -> None:
        nonlocal waits
        waits += 1
        add_reader(*args)

    monkeypatch.setattr(loop, "add_reader", counted)
    history = await PostgresContextStore(pg_conn, session_id="long").get_history()
    monkeypatch.undo()

    assert [m.text.split()[0] for m in history] == [str(index) for index in range(2_000)]
    assert waits < 250, waits


# -- the schema and its migrations -----------------------------------------------------------


async def test_a_new_database_gets_the_current_schema(fresh_dsn: str) -> None:
    async with connect_postgres(fresh_dsn) as conn:
        assert await query(conn, "SELECT version FROM pygents_schema") == [(SCHEMA_VERSION,)]
        tables = await query(
            conn, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        )
        assert [name for (name,) in tables] == TABLES


async def test_workers_opening_a_new_database_at_once_migrate_it_once(fresh_dsn: str) -> None:
    opened = await asyncio.gather(
        *(connect_postgres(fresh_dsn) for _ in range(5)), return_exceptions=True
    )
    conns = [conn for conn in opened if isinstance(conn, PostgresConnection)]
    try:
        assert conns == opened
        assert await query(conns[0], "SELECT version FROM pygents_schema") == [(SCHEMA_VERSION,)]
    finally:
        for conn in conns:
            await conn.close()


async def test_the_tables_go_in_the_schema_the_search_path_names(fresh_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as db:
        await db.execute("CREATE SCHEMA agents")
    dsn = f"{fresh_dsn} options='-c search_path=agents'"

    async with connect_postgres(dsn) as conn:
        await PostgresContextStore(conn, session_id="s").append(Message("user", "x"))
        tables = await query(
            conn, "SELECT DISTINCT schemaname FROM pg_tables WHERE tablename LIKE 'pygents%'"
        )

    assert tables == [("agents",)]


async def test_a_newer_schema_is_refused_with_a_clear_error(fresh_dsn: str) -> None:
    async with connect_postgres(fresh_dsn) as conn:
        await query(conn, "UPDATE pygents_schema SET version = 99")

    newer = rf"version 99, newer than version {SCHEMA_VERSION} .* upgrade"
    with pytest.raises(StoreSchemaError, match=newer):
        await connect_postgres(fresh_dsn)


async def test_migrations_run_the_missing_steps_once_and_keep_the_data(fresh_dsn: str) -> None:
    step = ("ALTER TABLE pygents_sessions ADD COLUMN title text NOT NULL DEFAULT ''",)
    async with await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as db:
        assert await migrate(db) == SCHEMA_VERSION
        await db.execute("INSERT INTO pygents_sessions (session_id) VALUES ('kept')")

        assert await migrate(db, (*MIGRATIONS, step)) == SCHEMA_VERSION + 1
        assert (
            await migrate(db, (*MIGRATIONS, step)) == SCHEMA_VERSION + 1
        )  # nothing left: no error

        cursor = await db.execute("SELECT session_id, title FROM pygents_sessions")
        assert await cursor.fetchall() == [("kept", "")]
        cursor = await db.execute("SELECT version FROM pygents_schema")
        assert await cursor.fetchall() == [(SCHEMA_VERSION + 1,)]


async def test_a_version_2_database_is_upgraded_and_its_sessions_leased(fresh_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as db:
        await migrate(db, MIGRATIONS[:2])  # what pygents_ctx wrote before leases
        await db.execute("INSERT INTO pygents_sessions (session_id) VALUES ('old')")

    async with connect_postgres(fresh_dsn) as conn:
        async with PostgresContextStore(conn, session_id="old").lease() as lease:
            assert lease.held
        assert await query(conn, "SELECT version FROM pygents_schema") == [(SCHEMA_VERSION,)]
        assert await query(conn, "SELECT session_id, token FROM pygents_leases") == [("old", 1)]


async def test_a_failing_migration_leaves_the_old_version_whole(fresh_dsn: str) -> None:
    broken = ("CREATE TABLE half_done (x integer)", "THIS IS NOT SQL")
    async with await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as db:
        await migrate(db)

        with pytest.raises(psycopg.errors.SyntaxError):
            await migrate(db, (*MIGRATIONS, broken))

        cursor = await db.execute("SELECT version FROM pygents_schema")
        assert await cursor.fetchall() == [(SCHEMA_VERSION,)]
        cursor = await db.execute("SELECT to_regclass('half_done')")
        assert await cursor.fetchall() == [(None,)]


# -- the same behaviour as the memory store, for any program -------------------------------------


async def run_program(program: list[tuple[Any, ...]], dsn: str) -> None:
    """Drive one session through two connections (two workers) and the memory model."""
    async with connect_postgres(dsn) as first, connect_postgres(dsn) as second:
        session_id = uuid.uuid4().hex
        model: ContextStore = MemoryContextStore(session_id=session_id)
        handles = [PostgresContextStore(c, session_id=session_id) for c in (first, second)]
        await handles[0].set_context_tokens(0, 0)  # the session exists, for list_sessions
        for step, op in enumerate(program):
            handle = handles[op[-1]]
            if op[0] == "fork":
                model = await model.fork()
                fork = await handle.fork(session_id=model.session_id)
                handles = [
                    PostgresContextStore(c, session_id=fork.session_id) for c in (first, second)
                ]
            else:
                assert await apply(handle, op) == await apply(model, op), (step, op)
            for reader in handles:
                assert await observe(reader) == await observe(model), (step, op)


@settings(max_examples=60, deadline=None)
@given(program=operations)
def test_memory_and_postgres_agree_on_every_program(
    postgres: Server, program: list[tuple[Any, ...]]
) -> None:
    asyncio.run(run_program(program, postgres.dsn))


# -- the documented examples run against the server ------------------------------------------------

GUIDE = Path(__file__).resolve().parents[3] / "guides" / "concepts" / "stores.md"


def test_the_docstring_examples_run_against_a_real_server(postgres: Server) -> None:
    module = importlib.import_module("pygents_ctx.context.stores.postgres")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    skipped = 0
    with fresh_database(postgres) as dsn:
        for test in doctest.DocTestFinder().find(module, globs={**vars(module), "dsn": dsn}):
            for example in test.examples:
                # The +SKIP keeps the calls that need a server from the serverless doctests.
                skipped += example.options.pop(doctest.SKIP, False)
            runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)

    assert skipped >= 2
    assert results.failed == 0, "".join(report)


def test_the_guide_examples_run_against_a_real_server(postgres: Server) -> None:
    page = GUIDE.read_text(encoding="utf-8")
    section = page[page.index("\n## PostgreSQL") :]
    blocks = re.findall(r"^```py[ \t]*\n(.*?)^```[ \t]*$", section, re.DOTALL | re.MULTILINE)
    assert len(blocks) >= 2

    async def run_all(dsn: str) -> None:
        namespace: dict[str, Any] = {"__name__": "guides.stores.postgres", "dsn": dsn}
        for number, source in enumerate(blocks, start=1):
            code = compile(
                source,
                f"stores.md PostgreSQL block {number}",
                "exec",
                flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            )
            result = eval(code, namespace)
            if asyncio.iscoroutine(result):
                await result

    with fresh_database(postgres) as dsn:
        asyncio.run(run_all(dsn))


# -- many sessions --------------------------------------------------------------------


async def _plans(conn: PostgresConnection, call: Any) -> list[str]:
    """EXPLAIN of each statement `call()` runs on `conn` (captured as it runs them)."""
    seen: list[tuple[Any, Any]] = []

    async def capture(db: Any) -> None:
        original = db.execute

        async def execute(statement: Any, params: Any = None, **kwargs: Any) -> Any:
            if str(statement).lstrip().upper().startswith(("SELECT", "WITH", "INSERT")):
                seen.append((statement, params))
            return await original(statement, params, **kwargs)

        db.execute = execute

    async def release(db: Any) -> None:
        del db.execute

    await conn.run(capture)
    try:
        await call()
    finally:
        await conn.run(release)

    async def explain(db: Any) -> list[str]:
        plans = []
        for statement, params in seen:
            cursor = await db.execute("EXPLAIN " + str(statement), params)
            plans.append("\n".join(row[0] for row in await cursor.fetchall()))
        await db.rollback()  # EXPLAIN of an INSERT plans it, writes nothing
        return plans

    return await conn.run(explain)


async def test_appending_and_loading_one_of_many_sessions_reads_by_index(
    fresh_dsn: str,
) -> None:
    """With 20,000 sessions stored, a session's reads and writes touch only its rows."""
    async with connect_postgres(fresh_dsn) as conn:
        await query(
            conn,
            "INSERT INTO pygents_sessions (session_id, next_position, message_count) "
            "SELECT 'session-' || s, 5, 5 FROM generate_series(1, 20000) AS s",
        )
        await query(
            conn,
            "INSERT INTO pygents_messages (session_id, position, tokens, data) "
            "SELECT 'session-' || s, p, 3, convert_to("
            '\'{"role":"user","content":[{"type":"text","text":"m\' || p || \'"}]}\', '
            "'UTF8') FROM generate_series(1, 20000) AS s, generate_series(0, 4) AS p",
        )
        await query(conn, "ANALYZE pygents_sessions")
        await query(conn, "ANALYZE pygents_messages")
        store = PostgresContextStore(conn, session_id="session-777")

        plans = [
            *await _plans(
                conn, lambda: PostgresContextStore(conn, session_id="session-777").get_history()
            ),
            *await _plans(conn, lambda: store.append(Message("user", "one more"))),
            *await _plans(conn, lambda: store.get_history()),  # what changed since
        ]

        assert texts(await store.get_history()) == ["m0", "m1", "m2", "m3", "m4", "one more"]
    assert len(plans) >= 3
    for plan in plans:
        assert "Seq Scan on pygents_messages" not in plan, plan
        assert "Seq Scan on pygents_sessions" not in plan, plan
    assert any("pygents_messages_pkey" in plan for plan in plans)
    assert any("pygents_sessions_pkey" in plan for plan in plans)
