"""Fenced writes: a store refuses a write made under a lease that passed on or ran out.

Every backend (memory, SQLite, PostgreSQL), every kind of write. The old
holder keeps running in the test's own context, as a stalled worker would
when it wakes; the new holder takes the lease in a task of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from pygents_ctx import LeaseLostError, Message, SessionLease
from pygents_ctx.context.stores import (
    AutoCompactStore,
    ContextStore,
    MemoryContextStore,
    PostgresContextStore,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores import _lease_sql as lease_sql
from pygents_ctx.context.stores.base import SessionSnapshot, StoredMessage
from pygents_ctx.context.stores.postgres import connect_postgres
from pygents_ctx.context.usage import Usage, UsageRecord
from tests import postgres_server

from .conftest import MakeStore
from .test_lease import same_session

TTL = 0.3

Write = Callable[[ContextStore], Awaitable[None]]

# Each kind of write a lease holder makes, with the name the test ids show.
WRITES: dict[str, Write] = {
    "append": lambda s: s.append(Message("user", "stale"), run_id="r"),
    "append_many": lambda s: s.append_many([Message("user", "a"), Message("assistant", "b")]),
    "append_many_streamed": lambda s: s.append_many(Message("user", str(i)) for i in range(2_500)),
    "replace_prefix": lambda s: s.replace_prefix(1, [Message("user", "summary")]),
    "rewind": lambda s: s.rewind(1),
    "clear": lambda s: s.clear(),
    "clear_run": lambda s: s.clear_run("r"),
    "record_usage": lambda s: s.record_usage(UsageRecord(Usage(10, 2), run_id="r")),
    "set_context_tokens": lambda s: s.set_context_tokens(7, 7),
    "add_context_tokens": lambda s: s.add_context_tokens(7, 7),
}


LONG = " and so on" * 40  # long enough that a summary is smaller


async def seeded(make_store: MakeStore) -> ContextStore:
    store = await make_store(session_id="chat")
    turns = [Message("user", "hi" + LONG), Message("assistant", "hello" + LONG)] * 2
    await store.append_many(turns, run_id="r")
    await store.record_usage(UsageRecord(Usage(5, 1), run_id="r"))
    return store


async def take_over(store: ContextStore) -> SessionLease:
    """The lease, taken by another holder: in a task of its own, as another worker's."""
    return await asyncio.create_task(same_session(store).lease(ttl=30, owner="new").acquire())


async def stored(store: ContextStore) -> SessionSnapshot:
    """Everything the session holds, read by a store object that holds no lease."""
    return await same_session(store).snapshot()


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
async def test_a_write_under_a_lease_taken_over_is_refused_and_stores_nothing(
    make_store: MakeStore, write: Write
) -> None:
    store = await seeded(make_store)
    old = await store.lease(ttl=TTL, renew=False, owner="old").acquire()
    await asyncio.sleep(TTL + 0.1)  # stalled past its ttl
    new = await take_over(store)
    before = await stored(store)

    with pytest.raises(LeaseLostError) as caught:
        await write(store)

    assert "'new' took the lease over" in str(caught.value)
    assert (caught.value.session_id, caught.value.owner) == ("chat", "old")
    assert await stored(store) == before
    assert old.lost
    with pytest.raises(LeaseLostError):
        await old.check()
    assert new.held
    await new.release()
    await old.release()


async def test_restore_under_a_lease_taken_over_is_refused_and_stores_nothing(
    make_store: MakeStore,
) -> None:
    store = await make_store(session_id="empty")
    await store.lease(ttl=TTL, renew=False, create=True).acquire()
    await asyncio.sleep(TTL + 0.1)
    new = await take_over(store)
    snapshot = SessionSnapshot(
        "source",
        [StoredMessage(Message("user", "restored"), "r")],
        [],
        3,
        4,
        usage=[UsageRecord(Usage(3, 4))],
    )
    with pytest.raises(LeaseLostError, match="took the lease over"):
        await store.restore(snapshot)
    after = await stored(store)
    assert (after.messages, after.usage, after.input_tokens) == ((), (), 0)
    await new.release()


async def test_a_write_after_the_lease_ran_out_unclaimed_is_refused(make_store: MakeStore) -> None:
    store = await seeded(make_store)
    lease = await store.lease(ttl=TTL, renew=False).acquire()
    await store.append(Message("user", "in time"))  # held: it goes through
    await asyncio.sleep(TTL + 0.1)
    before = await stored(store)
    with pytest.raises(LeaseLostError, match="ran out"):
        await store.append(Message("user", "too late"))
    assert await stored(store) == before
    assert lease.lost
    await lease.release()
    await store.append(Message("user", "no lease held: not fenced"))
    assert (await store.get_history())[-1].text == "no lease held: not fenced"


async def test_tasks_started_under_the_lease_and_other_store_objects_are_fenced(
    make_store: MakeStore,
) -> None:
    """A tool runs in a task the holder started, and may open its own store object."""
    store = await seeded(make_store)
    old = await store.lease(ttl=TTL, renew=False).acquire()
    await asyncio.sleep(TTL + 0.1)
    new = await take_over(store)
    count = await store.count()
    with pytest.raises(LeaseLostError):
        await asyncio.create_task(same_session(store).append(Message("user", "from a tool")))
    assert await store.count() == count
    await new.release()
    await old.release()


async def test_the_held_lease_lets_every_kind_of_write_through(make_store: MakeStore) -> None:
    store = await seeded(make_store)
    async with store.lease(ttl=30):
        for write in WRITES.values():
            await write(store)
        await store.append_many([Message("user", LONG), Message("assistant", LONG)] * 2)
        assert await AutoCompactStore(store, _summary, keep_recent=1).compact()
    history = await store.get_history()
    assert "summary" in history[0].text
    assert await store.get_context_tokens() == (14, 14)
    assert len(await store.get_usage()) == 2


async def _summary(messages: list[Message], previous: str | None) -> str:
    return "summary"


async def test_an_auto_compact_store_is_fenced_through_its_inner_store(
    make_store: MakeStore,
) -> None:
    inner = await seeded(make_store)
    wrapped = AutoCompactStore(inner, _summary, keep_recent=1)
    old = await wrapped.lease(ttl=TTL, renew=False).acquire()
    await asyncio.sleep(TTL + 0.1)
    new = await take_over(inner)
    before = await stored(inner)
    with pytest.raises(LeaseLostError):
        await wrapped.compact()
    with pytest.raises(LeaseLostError):
        await wrapped.append(Message("user", "stale"))
    assert await stored(inner) == before
    await new.release()
    await old.release()


# -- a lease fences its own session only --------------------------------------------


async def test_a_lease_on_another_session_does_not_fence_writes_here(
    make_store: MakeStore,
) -> None:
    here = await seeded(make_store)
    there = await make_store(Message("user", "x"), session_id="elsewhere")
    lease = await there.lease(ttl=TTL, renew=False).acquire()
    await asyncio.sleep(TTL + 0.1)  # ran out: its own session's writes would be refused
    for write in WRITES.values():
        await write(here)
    with pytest.raises(LeaseLostError):
        await there.append(Message("user", "stale"))
    await lease.release()


async def test_a_memory_store_with_the_same_session_id_is_another_session() -> None:
    first, second = MemoryContextStore(session_id="chat"), MemoryContextStore(session_id="chat")
    lease = await first.lease(ttl=TTL, renew=False).acquire()
    await asyncio.sleep(TTL + 0.1)
    await second.append(Message("user", "mine"))
    assert [m.text for m in await second.get_history()] == ["mine"]
    await lease.release()


async def test_sqlite_fences_by_database_file_not_by_connection(tmp_path: Path) -> None:
    async with (
        connect(tmp_path / "a.db") as conn,
        connect(tmp_path / "sub" / ".." / "a.db") as same_file,
        connect(tmp_path / "b.db") as other_file,
    ):
        store = SQLiteContextStore(conn, session_id="chat")
        await store.append(Message("user", "hi"))
        lease = await store.lease(ttl=TTL, renew=False).acquire()
        await asyncio.sleep(TTL + 0.1)
        with pytest.raises(LeaseLostError, match="ran out"):
            await SQLiteContextStore(same_file, session_id="chat").append(Message("user", "x"))
        await SQLiteContextStore(other_file, session_id="chat").append(Message("user", "y"))
        assert await store.count() == 1
        await lease.release()


async def test_postgres_fences_by_schema(postgres: postgres_server.PostgresServer) -> None:
    options = " options='-c search_path=fence_other'"
    async with connect_postgres(postgres.dsn) as setup:
        await setup.run(lambda db: db.execute("CREATE SCHEMA IF NOT EXISTS fence_other"))
    async with (
        connect_postgres(postgres.dsn) as conn,
        connect_postgres(postgres.dsn + options) as other_schema,
    ):
        store = PostgresContextStore(conn, session_id="fence-schema")
        await store.append(Message("user", "hi"))
        elsewhere = PostgresContextStore(other_schema, session_id="fence-schema")
        await elsewhere.append(Message("user", "hi"))
        lease = await store.lease(ttl=TTL, renew=False).acquire()
        await asyncio.sleep(TTL + 0.1)
        await elsewhere.append(Message("user", "another schema: its own session"))
        with pytest.raises(LeaseLostError, match="ran out"):
            await store.append(Message("user", "stale"))
        assert (await elsewhere.count(), await store.count()) == (2, 1)
        await lease.release()
        await other_schema.run(lambda db: db.execute("DROP SCHEMA fence_other CASCADE"))


# -- PostgreSQL: the check serializes with a takeover ---------------------------------


async def test_postgres_a_takeover_waits_for_a_fenced_write_in_flight(
    postgres: postgres_server.PostgresServer,
) -> None:
    async with connect_postgres(postgres.dsn) as conn, connect_postgres(postgres.dsn) as rival:
        store = PostgresContextStore(conn, session_id="fence-race")
        await store.append(Message("user", "hi"))
        lease = await store.lease(ttl=TTL, renew=False, owner="old").acquire()
        assert lease.token is not None
        checked = asyncio.Event()
        commit = asyncio.Event()

        async def slow_write(db: object) -> None:
            async with conn._conn.transaction():
                await lease_sql.check_postgres("fence-race", lease.token or 0, conn._conn)
                checked.set()  # the lease row is locked FOR SHARE until the commit
                await commit.wait()

        writing = asyncio.create_task(conn.run(slow_write))
        await checked.wait()
        await asyncio.sleep(TTL + 0.1)  # the lease runs out meanwhile
        taking = asyncio.create_task(
            PostgresContextStore(rival, session_id="fence-race").lease(owner="new").acquire()
        )
        await asyncio.sleep(0.3)
        assert not taking.done()  # the takeover waits for the write's transaction
        commit.set()
        await writing
        new = await taking
        assert new.token == lease.token + 1
        await new.release()
