"""Checkpoints of agents' state, kept beside a session's messages: the checks and the SQL.

A checkpoint is the bytes of one agent's saved state (its turns, queue and
pool, as `Agent.checkpoint()` writes them) recorded at a point of the
session's live history. The point is the session's `next_position` when it
was taken: the checkpoint describes the agent while the live history was the
messages stored below that position. That stays true while the history grows
and when compaction rewrites messages before it; what removes messages below
it (a `rewind` before it, `clear`, a `clear_run` of an earlier message, a
compaction that archives past it) drops the checkpoint in the same transaction.

Live message `k` (as in `history[:k]`) holds the checkpoints whose position
`c` lies in `(position of message k - 1, position of message k]`: the messages
stored below `c` are then exactly `history[:k]` (the interval allows for the
gaps a `clear_run` leaves). The newest such checkpoint is the one read.

Both databases keep two tables (created by a migration of each store):

- `pygents_checkpoint_data`: the state bytes, once per distinct content
  (keyed by its BLAKE2b digest), whatever the session or the position: an
  agent whose state did not change between two checkpoints, or a fork that
  inherits them, stores no second copy.
- `pygents_checkpoints`: a small row per checkpoint: session, agent name,
  position, digest. A session's rows go with the session (foreign key); a
  trigger deletes data that no row names any more.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from pygents_ctx._checks import storable_text
from pygents_ctx.context.stores._common import POSTGRES_LOCK_SESSION, SQLITE_NEW_SESSION, now_iso

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "KEEP_STATE_POSTGRES",
    "KEEP_STATE_SQLITE",
    "POSTGRES_TABLE",
    "PUT_POSTGRES",
    "PUT_SQLITE",
    "SQLITE_TABLE",
    "Row",
    "check_agent",
    "check_state",
    "copy_postgres",
    "copy_sqlite",
    "digest",
    "drop_postgres",
    "drop_sqlite",
    "iso",
    "live",
    "read_postgres",
    "read_sqlite",
    "restore_postgres",
    "restore_sqlite",
    "rows_postgres",
    "rows_sqlite",
    "save_postgres",
    "save_sqlite",
    "states_postgres",
    "states_sqlite",
]

SQLITE_TABLE: Final = (
    """
    CREATE TABLE pygents_checkpoint_data (
        id     INTEGER PRIMARY KEY,
        digest BLOB    NOT NULL UNIQUE,
        data   BLOB    NOT NULL
    )
    """,
    """
    CREATE TABLE pygents_checkpoints (
        session_id TEXT    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        agent      TEXT    NOT NULL,
        position   INTEGER NOT NULL,
        digest     BLOB    NOT NULL,
        created_at TEXT    NOT NULL,
        PRIMARY KEY (session_id, agent, position)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX pygents_checkpoints_by_digest ON pygents_checkpoints (digest)",
    # Deletes by a session's foreign key fire it too.
    """
    CREATE TRIGGER pygents_checkpoints_dropped AFTER DELETE ON pygents_checkpoints BEGIN
        DELETE FROM pygents_checkpoint_data WHERE digest = OLD.digest
        AND NOT EXISTS (SELECT 1 FROM pygents_checkpoints WHERE digest = OLD.digest);
    END
    """,
    """
    CREATE TRIGGER pygents_checkpoints_replaced AFTER UPDATE OF digest ON pygents_checkpoints
    WHEN NEW.digest IS NOT OLD.digest BEGIN
        DELETE FROM pygents_checkpoint_data WHERE digest = OLD.digest
        AND NOT EXISTS (SELECT 1 FROM pygents_checkpoints WHERE digest = OLD.digest);
    END
    """,
)

POSTGRES_TABLE: Final = (
    """
    CREATE TABLE pygents_checkpoint_data (
        digest bytea NOT NULL PRIMARY KEY,
        data   bytea NOT NULL
    )
    """,
    """
    CREATE TABLE pygents_checkpoints (
        session_id text        NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        agent      text        NOT NULL,
        position   bigint      NOT NULL,
        digest     bytea       NOT NULL,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (session_id, agent, position)
    )
    """,
    "CREATE INDEX pygents_checkpoints_by_digest ON pygents_checkpoints (digest)",
    """
    CREATE FUNCTION pygents_checkpoint_dropped() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' OR NEW.digest IS DISTINCT FROM OLD.digest THEN
            DELETE FROM pygents_checkpoint_data WHERE digest = OLD.digest
            AND NOT EXISTS (SELECT 1 FROM pygents_checkpoints WHERE digest = OLD.digest);
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER pygents_checkpoints_dropped
    AFTER DELETE OR UPDATE OF digest ON pygents_checkpoints
    FOR EACH ROW EXECUTE FUNCTION pygents_checkpoint_dropped()
    """,
)


def check_agent(agent: object) -> str:
    """Return `agent` if it can name a checkpoint's agent.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty, or holds a NUL or a lone surrogate.
    """
    return storable_text(agent, "a checkpoint's agent", fix="the name of the agent it saves")


def check_state(state: object) -> bytes:
    """Return `state` if it is the bytes of a saved state.

    Raises:
        TypeError: It is not bytes.
        ValueError: It is empty.
    """
    if not isinstance(state, bytes):
        raise TypeError(f"a checkpoint's state is bytes, not {type(state).__name__}")
    if not state:
        raise ValueError("a checkpoint's state must not be empty")
    return state


def digest(state: bytes) -> bytes:
    """The key a checkpoint's bytes are kept under: equal bytes are kept once."""
    return hashlib.blake2b(state, digest_size=20).digest()


class Row(NamedTuple):
    """A session's checkpoint as its table row says (`size`: the state's length)."""

    agent: str
    position: int
    created_at: str
    digest: bytes
    size: int


def live(rows: Iterable[Row], positions: Iterable[int]) -> list[tuple[int, Row]]:
    """The checkpoints `get_checkpoint` finds, each with the live message it is at.

    `rows` in order of position, `positions` the live messages' positions in
    order. A checkpoint at position `c` is at live message `k`, the number of
    live positions below `c`; of an agent's checkpoints at one message (gaps
    a `clear_run` left), the newest. In order of message, then agent.
    """
    found: dict[tuple[str, int], Row] = {}
    below = 0
    ahead = iter(positions)
    upcoming = next(ahead, None)
    for row in rows:
        while upcoming is not None and upcoming < row.position:
            below += 1
            upcoming = next(ahead, None)
        found[row.agent, below] = row  # a later row is newer
    return sorted(((at, row) for (_, at), row in found.items()), key=lambda f: (f[0], f[1].agent))


# A state is stored once, under its digest, whoever saves it (a checkpoint, a restore,
# an imported session file).
_KEEP_STATE: Final = (
    "INSERT INTO pygents_checkpoint_data (digest, data) VALUES ({0}, {0}) "
    "ON CONFLICT (digest) DO NOTHING"
)
KEEP_STATE_SQLITE: Final = _KEEP_STATE.format("?")
KEEP_STATE_POSTGRES: Final = _KEEP_STATE.format("%s")

# One checkpoint of an agent at a position, with when it was taken; a later one at the
# same place replaces it.
_PUT: Final = (
    "INSERT INTO pygents_checkpoints (session_id, agent, position, digest, created_at) "
    "VALUES ({0}, {0}, {0}, {0}, {1}) ON CONFLICT (session_id, agent, position) "
    "DO UPDATE SET digest = excluded.digest, created_at = excluded.created_at"
)
PUT_SQLITE: Final = _PUT.format("?", "?")
PUT_POSTGRES: Final = _PUT.format("%s", "%s::timestamptz")


# ----------------------------------------------------------------------------- SQLite


def save_sqlite(session_id: str, agent: str, state: bytes, db: sqlite3.Connection) -> int:
    """Keep `state` as `agent`'s checkpoint at the end of the live history (in the
    caller's transaction); the number of live messages it was taken at."""
    at = now_iso()
    db.execute(SQLITE_NEW_SESSION, (session_id, at))
    key = _keep_sqlite(state, db)
    position, count = db.execute(
        "SELECT next_position, message_count FROM pygents_sessions WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    db.execute(PUT_SQLITE, (session_id, agent, position, key, at))
    return int(count)


def read_sqlite(
    session_id: str, agent: str, low: int, high: int, db: sqlite3.Connection
) -> bytes | None:
    """The state of `agent`'s newest checkpoint with `low < position <= high`, if any."""
    row = db.execute(
        "SELECT d.data FROM pygents_checkpoints AS c JOIN pygents_checkpoint_data AS d "
        "ON d.digest = c.digest WHERE c.session_id = ? AND c.agent = ? "
        "AND c.position > ? AND c.position <= ? ORDER BY c.position DESC LIMIT 1",
        (session_id, agent, low, high),
    ).fetchone()
    return None if row is None else bytes(row[0])


def drop_sqlite(session_id: str, low: int, high: int, db: sqlite3.Connection) -> None:
    """Drop the session's checkpoints with `low <= position < high` (every agent's)."""
    db.execute(
        "DELETE FROM pygents_checkpoints WHERE session_id = ? AND position >= ? AND position < ?",
        (session_id, low, high),
    )


def rows_sqlite(session_id: str, agent: str | None, db: sqlite3.Connection) -> list[Row]:
    """The session's checkpoint rows (of `agent` alone, if given), in order of position."""
    rows = db.execute(
        "SELECT c.agent, c.position, c.created_at, c.digest, length(d.data) "
        "FROM pygents_checkpoints AS c JOIN pygents_checkpoint_data AS d ON d.digest = c.digest "
        "WHERE c.session_id = ? AND (? IS NULL OR c.agent = ?) ORDER BY c.position, c.agent",
        (session_id, agent, agent),
    )
    return [Row(a, int(p), str(t), bytes(d), int(n)) for a, p, t, d, n in rows]


def states_sqlite(keys: Iterable[bytes], db: sqlite3.Connection) -> dict[bytes, bytes]:
    """The saved states kept under `keys`."""
    states = {}
    for key in keys:
        (data,) = db.execute(
            "SELECT data FROM pygents_checkpoint_data WHERE digest = ?", (key,)
        ).fetchone()
        states[key] = bytes(data)
    return states


def restore_sqlite(
    session_id: str,
    start: int,
    checkpoints: Iterable[tuple[str, int, str, bytes]],
    db: sqlite3.Connection,
) -> None:
    """Keep `(agent, at, created_at, state)` checkpoints of a session whose live message
    `k` is at position `start + k` (in the caller's transaction)."""
    for agent, at, created_at, state in checkpoints:
        key = _keep_sqlite(state, db)
        db.execute(PUT_SQLITE, (session_id, agent, start + at, key, created_at))


def copy_sqlite(source: str, target: str, db: sqlite3.Connection) -> None:
    """Give the fork `target` the checkpoints of `source` up to its cut (`target`'s
    `next_position`): their rows only, the state bytes are shared."""
    db.execute(
        "INSERT INTO pygents_checkpoints (session_id, agent, position, digest, created_at) "
        "SELECT ?, agent, position, digest, created_at FROM pygents_checkpoints "
        "WHERE session_id = ? AND position <= "
        "(SELECT next_position FROM pygents_sessions WHERE session_id = ?)",
        (target, source, target),
    )


# ----------------------------------------------------------------------------- PostgreSQL


async def save_postgres(
    session_id: str, agent: str, state: bytes, conn: AsyncConnection[Any]
) -> int:
    """`save_sqlite` on PostgreSQL, in the caller's transaction (the session's row locked
    first, as every write does)."""
    cursor = await conn.execute(
        f"{POSTGRES_LOCK_SESSION} RETURNING next_position, message_count", (session_id,)
    )
    row = await cursor.fetchone()
    assert row is not None  # an upsert with RETURNING always gives a row
    key = await _keep_postgres(state, conn)
    await conn.execute(
        "INSERT INTO pygents_checkpoints (session_id, agent, position, digest) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT (session_id, agent, position) "
        "DO UPDATE SET digest = excluded.digest, created_at = clock_timestamp()",
        (session_id, agent, row[0], key),
    )
    return int(row[1])


async def read_postgres(
    session_id: str, agent: str, low: int, high: int, conn: AsyncConnection[Any]
) -> bytes | None:
    """`read_sqlite` on PostgreSQL."""
    cursor = await conn.execute(
        "SELECT d.data FROM pygents_checkpoints AS c JOIN pygents_checkpoint_data AS d "
        "ON d.digest = c.digest WHERE c.session_id = %s AND c.agent = %s "
        "AND c.position > %s AND c.position <= %s ORDER BY c.position DESC LIMIT 1",
        (session_id, agent, low, high),
    )
    row = await cursor.fetchone()
    return None if row is None else bytes(row[0])


async def drop_postgres(session_id: str, low: int, high: int, conn: AsyncConnection[Any]) -> None:
    """`drop_sqlite` on PostgreSQL."""
    await conn.execute(
        "DELETE FROM pygents_checkpoints WHERE session_id = %s "
        "AND position >= %s AND position < %s",
        (session_id, low, high),
    )


async def rows_postgres(
    session_id: str, agent: str | None, conn: AsyncConnection[Any]
) -> list[Row]:
    """`rows_sqlite` on PostgreSQL."""
    cursor = await conn.execute(
        "SELECT c.agent, c.position, c.created_at, c.digest, octet_length(d.data) "
        "FROM pygents_checkpoints AS c JOIN pygents_checkpoint_data AS d ON d.digest = c.digest "
        "WHERE c.session_id = %s AND (%s::text IS NULL OR c.agent = %s) "
        "ORDER BY c.position, c.agent",
        (session_id, agent, agent),
    )
    return [Row(a, int(p), iso(t), bytes(d), int(n)) for a, p, t, d, n in await cursor.fetchall()]


async def states_postgres(keys: Iterable[bytes], conn: AsyncConnection[Any]) -> dict[bytes, bytes]:
    """`states_sqlite` on PostgreSQL."""
    cursor = await conn.execute(
        "SELECT digest, data FROM pygents_checkpoint_data WHERE digest = ANY(%s)", (list(keys),)
    )
    return {bytes(key): bytes(data) for key, data in await cursor.fetchall()}


async def restore_postgres(
    session_id: str,
    start: int,
    checkpoints: Iterable[tuple[str, int, str, bytes]],
    conn: AsyncConnection[Any],
) -> None:
    """`restore_sqlite` on PostgreSQL."""
    for agent, at, created_at, state in checkpoints:
        key = await _keep_postgres(state, conn)
        await conn.execute(PUT_POSTGRES, (session_id, agent, start + at, key, created_at))


def iso(moment: datetime) -> str:
    """A PostgreSQL time as the stores give times: ISO 8601 in UTC with microseconds."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


async def copy_postgres(source: str, target: str, conn: AsyncConnection[Any]) -> None:
    """`copy_sqlite` on PostgreSQL, up to the fork's cut (`target`'s `next_position`)."""
    await conn.execute(
        "INSERT INTO pygents_checkpoints (session_id, agent, position, digest, created_at) "
        "SELECT %s, agent, position, digest, created_at FROM pygents_checkpoints "
        "WHERE session_id = %s AND position <= "
        "(SELECT next_position FROM pygents_sessions WHERE session_id = %s)",
        (target, source, target),
    )


def _keep_sqlite(state: bytes, db: sqlite3.Connection) -> bytes:
    """Store `state` unless it is stored already; its digest."""
    key = digest(state)
    db.execute(KEEP_STATE_SQLITE, (key, state))
    return key


async def _keep_postgres(state: bytes, conn: AsyncConnection[Any]) -> bytes:
    """`_keep_sqlite` on PostgreSQL."""
    key = digest(state)
    await conn.execute(KEEP_STATE_POSTGRES, (key, state))
    return key
