"""Session leases, on every backend: one holder at a time, waiting, expiry, fencing, bad input."""

from __future__ import annotations

import asyncio
import contextlib
import math
import pickle
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pygents_ctx import (
    LeaseLostError,
    Message,
    SessionBusyError,
    SessionLease,
    SessionNotFoundError,
)
from pygents_ctx.context.stores import (
    AutoCompactStore,
    ContextStore,
    MemoryContextStore,
    PostgresContextStore,
    SQLiteConnection,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores._lease_sql import LeaseState
from pygents_ctx.context.stores._sqlite_schema import MIGRATIONS, migrate

from .conftest import MakeStore
from .helpers import ListStore

TTL = 0.3


def same_session(store: ContextStore) -> ContextStore:
    """Another store object on `store`'s session, where the backend has such a thing.

    A memory store is its session: another object would be another session.
    """
    if isinstance(store, SQLiteContextStore):
        return SQLiteContextStore(store.connection, session_id=store.session_id)
    if isinstance(store, PostgresContextStore):
        return PostgresContextStore(store.connection, session_id=store.session_id)
    return store


async def leased_store(make_store: MakeStore, session_id: str = "chat") -> ContextStore:
    return await make_store(Message("user", "hi"), session_id=session_id)


# -- taking it, and being refused --------------------------------------------------


async def test_a_lease_is_held_until_the_block_ends(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    before = datetime.now(UTC)
    async with store.lease(ttl=30, owner="worker-1") as lease:
        assert (lease.held, lease.lost, lease.owner, lease.session_id) == (
            True,
            False,
            "worker-1",
            "chat",
        )
        assert isinstance(lease.token, int)
        assert lease.expires_at is not None
        assert before + timedelta(seconds=29) < lease.expires_at < before + timedelta(seconds=32)
    assert not lease.held
    async with same_session(store).lease() as again:  # given back: free at once
        assert again.held


async def test_a_second_taker_is_refused_with_the_holder_and_its_expiry(
    make_store: MakeStore,
) -> None:
    store = await leased_store(make_store)
    async with store.lease(ttl=20, owner="worker-1") as lease:
        with pytest.raises(SessionBusyError) as caught:
            await same_session(store).lease(owner="worker-2").acquire()
    busy = caught.value
    assert (busy.session_id, busy.holder, busy.waited) == ("chat", "worker-1", 0.0)
    assert lease.expires_at is not None
    assert abs((busy.expires_at - lease.expires_at).total_seconds()) < 1
    message = str(busy)
    assert "'chat'" in message
    assert "'worker-1'" in message
    assert "lease(wait=seconds)" in message
    assert "ModelLoop(lease=LeasePolicy(wait=seconds))" in message


async def test_two_leases_with_one_owner_still_exclude_each_other(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    async with store.lease(owner="api"):
        with pytest.raises(SessionBusyError):
            await same_session(store).lease(owner="api").acquire()


async def test_a_waiting_taker_gets_the_lease_once_the_holder_lets_go(
    make_store: MakeStore,
) -> None:
    store = await leased_store(make_store)
    holder = await store.lease(ttl=30).acquire()
    waiter = asyncio.create_task(same_session(store).lease(wait=10).acquire())
    await asyncio.sleep(0.15)
    assert not waiter.done()  # still waiting while it is held
    released = time.monotonic()
    await holder.release()
    taken = await asyncio.wait_for(waiter, 5)
    assert time.monotonic() - released < 1.0
    assert taken.held
    assert taken.token is not None
    assert holder.token is None
    await taken.release()


async def test_a_taker_waits_no_longer_than_it_said(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    async with store.lease(ttl=30, owner="slow"):
        began = time.monotonic()
        with pytest.raises(SessionBusyError) as caught:
            await same_session(store).lease(wait=0.25).acquire()
        took = time.monotonic() - began
    assert 0.25 <= caught.value.waited <= took < 2
    assert "after waiting" in str(caught.value)


async def test_tokens_grow_each_time_the_lease_changes_hands(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    tokens = []
    for _ in range(4):
        async with same_session(store).lease() as lease:
            tokens.append(lease.token)
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == 4


# -- keeping it, running out, being fenced -------------------------------------------


async def test_renewal_keeps_the_lease_well_past_its_ttl(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    async with store.lease(ttl=TTL, owner="keeper") as lease:
        await asyncio.sleep(TTL * 3)
        with pytest.raises(SessionBusyError) as caught:
            await same_session(store).lease().acquire()
        assert caught.value.holder == "keeper"
        assert lease.held


async def test_an_unrenewed_lease_runs_out_and_another_takes_it_over(
    make_store: MakeStore,
) -> None:
    store = await leased_store(make_store)
    crashed = await store.lease(ttl=TTL, renew=False).acquire()  # never renewed: as if dead
    with pytest.raises(SessionBusyError):
        await same_session(store).lease().acquire()
    await asyncio.sleep(TTL + 0.1)
    successor = await same_session(store).lease().acquire()
    assert successor.token is not None
    assert crashed.token is not None
    assert successor.token > crashed.token
    await successor.release()


async def test_the_old_holder_is_fenced_once_another_took_over(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    old = await store.lease(ttl=TTL, renew=False, owner="old").acquire()
    await asyncio.sleep(TTL + 0.1)
    new = await same_session(store).lease(ttl=30, owner="new").acquire()

    with pytest.raises(LeaseLostError) as caught:
        await old.renew()
    assert (caught.value.session_id, caught.value.owner) == ("chat", "old")
    assert "take the lease again" in str(caught.value)
    assert old.lost
    assert not old.held
    with pytest.raises(LeaseLostError):
        await old.check()
    await old.release()  # gives back nothing: the lease is the new holder's
    with pytest.raises(SessionBusyError) as busy:
        await same_session(store).lease().acquire()
    assert busy.value.holder == "new"
    assert new.held
    await new.release()


async def test_a_lease_that_ran_out_unclaimed_can_still_be_renewed(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    lease = await store.lease(ttl=TTL, renew=False).acquire()
    await asyncio.sleep(TTL + 0.1)
    await lease.check()  # past its expiry: asks the store, which says nobody took it
    assert lease.held
    with pytest.raises(SessionBusyError):
        await same_session(store).lease().acquire()
    await lease.release()


async def test_a_block_that_loses_its_lease_is_stopped_with_lease_lost_error(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await leased_store(make_store)
    other = same_session(store)
    reached = []
    taken: list[SessionLease] = []
    answer = asyncio.Event()
    renew = store._renew_lease

    async def slow_database(owner: str, token: int, ttl: float) -> LeaseState | None:
        await answer.wait()  # the renewal hangs past the lease's expiry
        return await renew(owner, token, ttl)

    monkeypatch.setattr(store, "_renew_lease", slow_database)

    async def stall_then_write() -> None:
        async with store.lease(ttl=TTL, owner="stalled"):
            await asyncio.sleep(TTL + 0.1)  # the lease runs out, unrenewed
            taken.append(await other.lease(owner="successor").acquire())
            answer.set()  # the renewal reaches the store: taken over
            await asyncio.sleep(5)  # cancelled here once the renewal finds it taken
            reached.append("after")

    with pytest.raises(LeaseLostError) as caught:
        await stall_then_write()
    assert reached == []
    assert isinstance(caught.value.__cause__, asyncio.CancelledError)
    [successor] = taken
    assert successor.held
    with pytest.raises(SessionBusyError) as busy:
        await other.lease().acquire()
    assert busy.value.holder == "successor"
    await successor.release()


async def test_a_lease_that_cannot_be_renewed_before_it_runs_out_is_lost(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await leased_store(make_store)

    async def unreachable(owner: str, token: int, ttl: float) -> None:
        raise ConnectionError("the database is unreachable")

    began = time.monotonic()

    async def hold() -> None:
        async with store.lease(ttl=TTL):
            monkeypatch.setattr(store, "_renew_lease", unreachable)
            await asyncio.sleep(5)

    with pytest.raises(LeaseLostError, match="could not be renewed"):
        await hold()
    assert time.monotonic() - began < TTL + 1
    monkeypatch.undo()
    await asyncio.sleep(0.05)
    async with same_session(store).lease() as lease:  # it ran out: anyone may take it
        assert lease.held


# -- giving it back --------------------------------------------------------------------


async def test_the_lease_is_given_back_when_the_block_fails(make_store: MakeStore) -> None:
    store = await leased_store(make_store)

    async def fail() -> None:
        async with store.lease(ttl=30):
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        await fail()
    async with same_session(store).lease() as lease:
        assert lease.held


async def test_the_lease_is_given_back_when_the_block_is_cancelled(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    inside = asyncio.Event()

    async def hold() -> None:
        async with store.lease(ttl=30):
            inside.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(hold())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # the cancellation goes on: it is not turned into anything else
    async with same_session(store).lease() as lease:
        assert lease.held


async def test_a_lease_granted_to_a_taker_cancelled_meanwhile_is_given_back(
    make_store: MakeStore,
) -> None:
    store = await leased_store(make_store)
    for _ in range(3):  # cancelled while the store grants it
        taker = asyncio.create_task(store.lease(ttl=30).acquire())
        await asyncio.sleep(0)
        taker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await taker
        # Not held for 30 s by nobody: free again at once.
        lease = await same_session(store).lease(wait=2).acquire()
        await lease.release()


async def test_release_is_idempotent_and_a_lease_can_be_taken_again(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    lease = store.lease()
    first = (await lease.acquire()).token
    with pytest.raises(RuntimeError, match="already held"):
        await lease.acquire()
    await lease.release()
    await lease.release()
    with pytest.raises(RuntimeError, match="not held"):
        await lease.renew()
    second = (await lease.acquire()).token
    assert first is not None
    assert second is not None
    assert second > first
    await lease.release()


# -- bad input, and sessions that do not exist ----------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "field"),
    [
        ({"ttl": 0}, ValueError, "ttl"),
        ({"ttl": -1}, ValueError, "ttl"),
        ({"ttl": math.inf}, ValueError, "ttl"),
        ({"ttl": math.nan}, ValueError, "ttl"),
        ({"ttl": "30"}, TypeError, "ttl"),
        ({"ttl": True}, TypeError, "ttl"),
        ({"wait": -0.5}, ValueError, "wait"),
        ({"wait": math.nan}, ValueError, "wait"),
        ({"wait": True}, ValueError, "math.inf"),
        ({"wait": "5"}, TypeError, "wait"),
        ({"owner": ""}, ValueError, "owner"),
        ({"owner": 7}, TypeError, "owner"),
        ({"create": "yes"}, TypeError, "create"),
        ({"renew": None}, TypeError, "renew"),
    ],
)
async def test_bad_options_are_refused_naming_the_field(
    make_store: MakeStore, options: dict[str, object], error: type[Exception], field: str
) -> None:
    store = await leased_store(make_store)
    with pytest.raises(error, match=field):
        store.lease(**options)  # type: ignore[arg-type]
    async with store.lease() as lease:  # nothing was taken by the refused call
        assert lease.held


async def test_waiting_forever_is_spelled_math_inf(make_store: MakeStore) -> None:
    store = await leased_store(make_store)
    holder = await store.lease(ttl=TTL, renew=False).acquire()
    lease = await same_session(store).lease(wait=math.inf).acquire()  # until it runs out
    assert lease.held
    assert lease.wait == math.inf
    assert holder.token != lease.token
    await lease.release()


@pytest.fixture(params=["sqlite", "postgres"])
def make_db_store(request: pytest.FixtureRequest) -> MakeStore:
    """`make_store` for the backends whose sessions exist only once written."""
    conn = request.getfixturevalue("conn" if request.param == "sqlite" else "pg_conn")

    async def make(*messages: Message, session_id: str | None = None) -> ContextStore:
        store: ContextStore
        if isinstance(conn, SQLiteConnection):
            store = SQLiteContextStore(conn, session_id=session_id)
        else:
            store = PostgresContextStore(conn, session_id=session_id)
        await store.append_many(messages)
        return store

    return make


async def test_a_lease_on_a_session_the_store_never_wrote_is_refused(
    make_db_store: MakeStore,
) -> None:
    await make_db_store(Message("user", "hi"), session_id="support-42")
    typo = await make_db_store(session_id="suport-42")
    with pytest.raises(SessionNotFoundError) as caught:
        await typo.lease().acquire()
    assert caught.value.session_id == "suport-42"
    assert isinstance(caught.value, KeyError)
    assert "'suport-42'" in str(caught.value)
    assert "create=True" in str(caught.value)
    assert [info.session_id for info in await typo.list_sessions()] == ["support-42"]


async def test_create_makes_the_session_and_leases_it(make_db_store: MakeStore) -> None:
    store = await make_db_store(session_id="new-chat")
    async with store.lease(create=True) as lease:
        assert lease.held
        sessions = {info.session_id: info for info in await store.list_sessions()}
        assert sessions["new-chat"].message_count == 0
    async with store.lease() as again:  # it exists now
        assert again.held


async def test_a_memory_store_is_its_session_and_always_exists() -> None:
    async with MemoryContextStore(session_id="fresh").lease() as lease:
        assert lease.held


# -- wrappers, custom stores, the errors themselves --------------------------------------


async def test_an_auto_compact_store_leases_its_inner_session(make_store: MakeStore) -> None:
    inner = await leased_store(make_store)

    async def summarizer(messages: list[Message], previous: str | None) -> str:
        return "summary"

    wrapped = AutoCompactStore(inner, summarizer, keep_recent=2)
    async with wrapped.lease(owner="wrapped"):
        with pytest.raises(SessionBusyError, match="'wrapped'"):
            await same_session(inner).lease().acquire()


async def test_a_custom_store_gets_a_lease_held_in_this_process() -> None:
    store = ListStore()
    async with store.lease(owner="one"):
        with pytest.raises(SessionBusyError, match="'one'"):
            await store.lease().acquire()
    assert isinstance(store.lease(), SessionLease)


def test_the_lease_errors_survive_pickling() -> None:
    busy = SessionBusyError(
        "busy", session_id="s", holder="h", expires_at=datetime.now(UTC), waited=1.5
    )
    lost = LeaseLostError("lost", session_id="s", owner="o")
    missing = SessionNotFoundError("missing", session_id="s")
    for error in (busy, lost, missing):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)
        assert vars(copy) == vars(error)


# -- schema ------------------------------------------------------------------------------


async def test_a_version_3_sqlite_database_is_upgraded_and_its_sessions_leased(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, MIGRATIONS[:3])  # what pygents_ctx wrote before leases
    db.execute("INSERT INTO pygents_sessions (session_id, created_at) VALUES ('old', '2025-01-01')")
    db.close()
    async with connect(path) as conn, SQLiteContextStore(conn, session_id="old").lease() as lease:
        assert lease.held
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM pygents_schema").fetchall() == [(len(MIGRATIONS),)]
    assert db.execute("SELECT session_id, token FROM pygents_leases").fetchall() == [("old", 1)]
    db.close()


async def test_deleting_a_session_deletes_its_lease(make_db_store: MakeStore) -> None:
    store = await make_db_store(Message("user", "hi"), session_id="doomed")
    lease = await store.lease(renew=False).acquire()
    sql = "DELETE FROM pygents_sessions WHERE session_id = 'doomed'"
    connection = store.connection  # type: ignore[attr-defined]
    await connection.run(lambda db: db.execute(sql))
    with pytest.raises(LeaseLostError, match="deleted"):
        await lease.renew()
