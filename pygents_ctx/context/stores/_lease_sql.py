"""The SQL of session leases, for the SQLite and PostgreSQL stores.

Both keep at most one row per session in `pygents_leases`: who holds the lease
(`owner`), its fencing `token`, and when it runs out (`expires_at`). The row
outlives a release (which only ends it), so the token only ever grows while
the session exists; deleting the session deletes its lease row with it.

Taking the lease is one upsert that succeeds only if there is no row, or the
row's lease has run out: the database serializes it, so two processes can
never both take it. A renewal succeeds only while the row still holds this
holder's owner and token: once another holder took over, the old one is fenced.
So is every write made under the lease: the store reads the row inside the
write's transaction (`check_sqlite`, `check_postgres`) and rolls the write
back, raising `Refused`, unless the row still holds the writer's token and
has not run out.

SQLite stores times as Unix seconds from the writing process's clock (every
process on one machine shares it); PostgreSQL uses the server's
`clock_timestamp()`, so machines with skewed clocks still agree.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from pygents_ctx.context.stores._common import now_iso
from pygents_ctx.errors import SessionNotFoundError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "POSTGRES_TABLE",
    "SQLITE_TABLE",
    "LeaseState",
    "Refused",
    "acquire_postgres",
    "acquire_sqlite",
    "check_postgres",
    "check_sqlite",
    "missing_session",
    "refusal",
    "release_postgres",
    "release_sqlite",
    "renew_postgres",
    "renew_sqlite",
]


class LeaseState(NamedTuple):
    """A session's lease as the store holds it.

    `expires_at` is Unix seconds by the store's clock; `remaining` is the
    seconds it had left by that clock when it was read (never negative).
    """

    owner: str
    token: int
    expires_at: float
    remaining: float


class Refused(Exception):
    """A write under a lease the store no longer grants: rolled back. `why` says what happened.

    Never reaches a user: the store raises the lease's `LeaseLostError` instead.
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def refusal(token: int, held: tuple[str, int, float] | None) -> str | None:
    """Why a write under lease `token` is refused, or None if it may go ahead.

    `held` is the session's lease as the write's transaction reads it:
    `(owner, token, seconds since it ran out)`, the last negative while it runs.
    """
    if held is None:
        return "the store refused a write: the session was deleted"
    owner, current, overdue = held
    if current != token:
        return (
            f"the store refused a write: {owner!r} took the lease over (token {current}, "
            f"this holder's was {token})"
        )
    if overdue >= 0:
        return (
            f"the store refused a write: the lease ran out {overdue:.1f} s before it, "
            "without a renewal (or it was released)"
        )
    return None


def missing_session(session_id: str) -> SessionNotFoundError:
    """The error of a lease on a session the store has never created."""
    return SessionNotFoundError(
        f"session {session_id!r} does not exist in this store (nothing was ever written "
        "to it): check the session id (`list_sessions()` lists them), or pass "
        "lease(create=True) to create the session and lease it",
        session_id=session_id,
    )


SQLITE_TABLE: Final = (
    """
    CREATE TABLE pygents_leases (
        session_id  TEXT    NOT NULL PRIMARY KEY
                    REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        owner       TEXT    NOT NULL,
        token       INTEGER NOT NULL,
        acquired_at REAL    NOT NULL,
        expires_at  REAL    NOT NULL
    )
    """,
)

POSTGRES_TABLE: Final = (
    """
    CREATE TABLE pygents_leases (
        session_id  text        NOT NULL PRIMARY KEY
                    REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        owner       text        NOT NULL,
        token       bigint      NOT NULL,
        acquired_at timestamptz NOT NULL,
        expires_at  timestamptz NOT NULL
    )
    """,
)

# -- SQLite -------------------------------------------------------------------------

_SQLITE_TAKE: Final = """
    INSERT INTO pygents_leases (session_id, owner, token, acquired_at, expires_at)
    VALUES (?, ?, 1, ?, ?)
    ON CONFLICT (session_id) DO UPDATE SET
        owner = excluded.owner,
        token = pygents_leases.token + 1,
        acquired_at = excluded.acquired_at,
        expires_at = excluded.expires_at
    WHERE pygents_leases.expires_at <= excluded.acquired_at
    RETURNING token
"""


def acquire_sqlite(
    session_id: str, owner: str, ttl: float, create: bool, db: sqlite3.Connection
) -> tuple[bool, LeaseState]:
    """Take the lease if it is free: `(True, ours)`, else `(False, the holder's)`.

    Runs in its own `BEGIN IMMEDIATE` transaction; `create` creates the
    session's row first if it is missing.

    Raises:
        SessionNotFoundError: The session has no row and `create` is False.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        if create:
            db.execute(
                "INSERT OR IGNORE INTO pygents_sessions (session_id, created_at) VALUES (?, ?)",
                (session_id, now_iso()),
            )
        elif not db.execute(
            "SELECT 1 FROM pygents_sessions WHERE session_id = ?", (session_id,)
        ).fetchone():
            raise missing_session(session_id)
        now = time.time()  # read under the write lock: no other taker is between
        row = db.execute(_SQLITE_TAKE, (session_id, owner, now, now + ttl)).fetchone()
        if row is not None:
            state = LeaseState(owner, int(row[0]), now + ttl, ttl)
        else:
            held = db.execute(
                "SELECT owner, token, expires_at FROM pygents_leases WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            state = LeaseState(held[0], int(held[1]), held[2], max(held[2] - now, 0.0))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return row is not None, state


def renew_sqlite(
    session_id: str, owner: str, token: int, ttl: float, db: sqlite3.Connection
) -> LeaseState | None:
    """Extend the lease by `ttl` from now, if this holder still has it; None if it was lost."""
    now = time.time()
    row = db.execute(
        "UPDATE pygents_leases SET expires_at = ? "
        "WHERE session_id = ? AND owner = ? AND token = ? RETURNING expires_at",
        (now + ttl, session_id, owner, token),
    ).fetchone()
    return None if row is None else LeaseState(owner, token, row[0], ttl)


def release_sqlite(session_id: str, owner: str, token: int, db: sqlite3.Connection) -> None:
    """End the lease now, if this holder still has it (the row and its token stay)."""
    db.execute(
        "UPDATE pygents_leases SET expires_at = ? "
        "WHERE session_id = ? AND owner = ? AND token = ? AND expires_at > ?",
        (time.time(), session_id, owner, token, time.time()),
    )


def check_sqlite(session_id: str, token: int, db: sqlite3.Connection) -> None:
    """Inside a write's `BEGIN IMMEDIATE` transaction: go ahead only under lease `token`.

    The transaction holds the database's write lock, so no taker can come
    between this check and the commit.

    Raises:
        Refused: Another holder took the lease over, it ran out, or the
            session was deleted; the caller rolls the transaction back.
    """
    row = db.execute(
        "SELECT owner, token, ? - expires_at FROM pygents_leases WHERE session_id = ?",
        (time.time(), session_id),
    ).fetchone()
    why = refusal(token, None if row is None else (row[0], int(row[1]), float(row[2])))
    if why is not None:
        raise Refused(why)


# -- PostgreSQL ---------------------------------------------------------------------

_EPOCH: Final = "extract(epoch FROM {0})::float8"
_PG_TAKE: Final = f"""
    INSERT INTO pygents_leases AS l (session_id, owner, token, acquired_at, expires_at)
    VALUES (%(session)s, %(owner)s, 1, clock_timestamp(),
            clock_timestamp() + make_interval(secs => %(ttl)s))
    ON CONFLICT (session_id) DO UPDATE SET
        owner = excluded.owner,
        token = l.token + 1,
        acquired_at = excluded.acquired_at,
        expires_at = excluded.expires_at
    WHERE l.expires_at <= clock_timestamp()
    RETURNING l.token, {_EPOCH.format("l.expires_at")}
"""
_PG_HOLDER: Final = f"""
    SELECT owner, token, {_EPOCH.format("expires_at")},
           greatest({_EPOCH.format("expires_at - clock_timestamp()")}, 0)
    FROM pygents_leases WHERE session_id = %s
"""


async def acquire_postgres(
    session_id: str, owner: str, ttl: float, create: bool, conn: AsyncConnection[Any]
) -> tuple[bool, LeaseState] | None:
    """Take the lease if it is free: `(True, ours)`, else `(False, the holder's)`.

    None when the holder let go between the two statements: ask again.

    Raises:
        SessionNotFoundError: The session has no row and `create` is false.
    """
    async with conn.transaction():
        if create:
            await conn.execute(
                "INSERT INTO pygents_sessions (session_id) VALUES (%s) "
                "ON CONFLICT (session_id) DO NOTHING",
                (session_id,),
            )
        # Locked so the session cannot be deleted before the lease row refers to it.
        cursor = await conn.execute(
            "SELECT 1 FROM pygents_sessions WHERE session_id = %s FOR KEY SHARE", (session_id,)
        )
        if await cursor.fetchone() is None:
            raise missing_session(session_id)
        cursor = await conn.execute(_PG_TAKE, {"session": session_id, "owner": owner, "ttl": ttl})
        taken = await cursor.fetchone()
        if taken is not None:
            return True, LeaseState(owner, int(taken[0]), float(taken[1]), ttl)
        # Read committed: this statement sees the holder whose row the upsert met.
        cursor = await conn.execute(_PG_HOLDER, (session_id,))
        held = await cursor.fetchone()
    if held is None:
        return None
    return False, LeaseState(held[0], int(held[1]), float(held[2]), float(held[3]))


async def renew_postgres(
    session_id: str, owner: str, token: int, ttl: float, conn: AsyncConnection[Any]
) -> LeaseState | None:
    """Extend the lease by `ttl` from now, if this holder still has it; None if it was lost."""
    cursor = await conn.execute(
        "UPDATE pygents_leases "
        "SET expires_at = clock_timestamp() + make_interval(secs => %s) "
        "WHERE session_id = %s AND owner = %s AND token = %s "
        f"RETURNING {_EPOCH.format('expires_at')}",
        (ttl, session_id, owner, token),
    )
    row = await cursor.fetchone()
    return None if row is None else LeaseState(owner, token, float(row[0]), ttl)


async def release_postgres(
    session_id: str, owner: str, token: int, conn: AsyncConnection[Any]
) -> None:
    """End the lease now, if this holder still has it (the row and its token stay)."""
    await conn.execute(
        "UPDATE pygents_leases SET expires_at = clock_timestamp() "
        "WHERE session_id = %s AND owner = %s AND token = %s AND expires_at > clock_timestamp()",
        (session_id, owner, token),
    )


async def check_postgres(session_id: str, token: int, conn: AsyncConnection[Any]) -> None:
    """Last in a write's transaction: commit only under lease `token`.

    The lease row is locked FOR SHARE: a takeover (an UPDATE of the row)
    waits for this transaction's commit, and one that committed first is what
    this read sees (read committed reads the newest committed row version
    after the lock). Taken after the write's own locks on the session's row,
    in the order a takeover takes them, so the two never deadlock.

    Raises:
        Refused: Another holder took the lease over, it ran out, or the
            session was deleted; the caller's transaction rolls back.
    """
    cursor = await conn.execute(
        f"SELECT owner, token, {_EPOCH.format('clock_timestamp() - expires_at')} "
        "FROM pygents_leases WHERE session_id = %s FOR SHARE",
        (session_id,),
    )
    row = await cursor.fetchone()
    why = refusal(token, None if row is None else (row[0], int(row[1]), float(row[2])))
    if why is not None:
        raise Refused(why)
