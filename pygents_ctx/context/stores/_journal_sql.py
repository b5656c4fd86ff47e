"""The SQL of the step journal, for the SQLite and PostgreSQL stores.

Both keep one row per tool call a model loop started in `pygents_journal`
(created by a migration of each store), keyed by `(session_id, call_id)`: written
as started before the tool runs, then given its result (the orjson bytes of the
`ToolResultBlock` the model reads) when it finishes. A row without a result is
a call that started and did not finish: it may have run. Starting a call twice
keeps the first row; finishing one twice keeps the first result.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Final

import orjson

from pygents_ctx.context.messages import ToolResultBlock, from_dict, to_dict
from pygents_ctx.context.stores._common import (
    POSTGRES_LOCK_SESSION,
    SQLITE_NEW_SESSION,
    now_iso,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "POSTGRES_TABLE",
    "SQLITE_TABLE",
    "decode",
    "encode",
    "finish_postgres",
    "finish_sqlite",
    "read_postgres",
    "read_sqlite",
    "start_postgres",
    "start_sqlite",
]

SQLITE_TABLE: Final = (
    """
    CREATE TABLE pygents_journal (
        session_id  TEXT NOT NULL
                    REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        call_id     TEXT NOT NULL,
        result      BLOB,
        started_at  TEXT NOT NULL,
        finished_at TEXT,
        PRIMARY KEY (session_id, call_id)
    ) WITHOUT ROWID
    """,
)

POSTGRES_TABLE: Final = (
    """
    CREATE TABLE pygents_journal (
        session_id  text        NOT NULL
                    REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        call_id     text        NOT NULL,
        result      bytea,
        started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
        finished_at timestamptz,
        PRIMARY KEY (session_id, call_id)
    )
    """,
)


def encode(result: ToolResultBlock) -> bytes:
    """`result` as the bytes a journal row keeps."""
    return orjson.dumps(to_dict(result))


def decode(data: bytes | None) -> ToolResultBlock | None:
    """The result a journal row keeps (None: the call started and did not finish)."""
    if data is None:
        return None
    block = from_dict(orjson.loads(data))
    assert isinstance(block, ToolResultBlock)  # written by `encode`
    return block


# ----------------------------------------------------------------------------- SQLite


def start_sqlite(session_id: str, call_id: str, db: sqlite3.Connection) -> None:
    """Record `call_id` as started unless it is recorded (inside the caller's transaction)."""
    _start(session_id, now_iso(), call_id, db)


def _start(session_id: str, at: str, call_id: str, db: sqlite3.Connection) -> None:
    db.execute(SQLITE_NEW_SESSION, (session_id, at))
    db.execute(
        "INSERT INTO pygents_journal (session_id, call_id, started_at) VALUES (?, ?, ?) "
        "ON CONFLICT (session_id, call_id) DO NOTHING",
        (session_id, call_id, at),
    )


def finish_sqlite(session_id: str, call_id: str, result: bytes, db: sqlite3.Connection) -> None:
    """Record `call_id` as finished with `result`, unless it has one (started if it was not)."""
    at = now_iso()
    _start(session_id, at, call_id, db)
    db.execute(
        "UPDATE pygents_journal SET result = ?, finished_at = ? "
        "WHERE session_id = ? AND call_id = ? AND result IS NULL",
        (result, at, session_id, call_id),
    )


def read_sqlite(
    session_id: str, call_ids: tuple[str, ...], db: sqlite3.Connection
) -> dict[str, ToolResultBlock | None]:
    found: dict[str, ToolResultBlock | None] = {}
    for call_id in call_ids:
        row = db.execute(
            "SELECT result FROM pygents_journal WHERE session_id = ? AND call_id = ?",
            (session_id, call_id),
        ).fetchone()
        if row is not None:
            found[call_id] = decode(row[0])
    return found


# ----------------------------------------------------------------------------- PostgreSQL


async def start_postgres(session_id: str, call_id: str, conn: AsyncConnection[Any]) -> None:
    """Record `call_id` as started unless it is recorded, in one transaction."""
    async with conn.transaction():
        await conn.execute(POSTGRES_LOCK_SESSION, (session_id,))
        await conn.execute(
            "INSERT INTO pygents_journal (session_id, call_id) VALUES (%s, %s) "
            "ON CONFLICT (session_id, call_id) DO NOTHING",
            (session_id, call_id),
        )


async def finish_postgres(
    session_id: str, call_id: str, result: bytes, conn: AsyncConnection[Any]
) -> None:
    """Record `call_id` as finished with `result`, unless it has one, in one transaction."""
    async with conn.transaction():
        await conn.execute(POSTGRES_LOCK_SESSION, (session_id,))
        await conn.execute(
            "INSERT INTO pygents_journal (session_id, call_id, result, finished_at) "
            "VALUES (%s, %s, %s, clock_timestamp()) ON CONFLICT (session_id, call_id) DO UPDATE "
            "SET result = EXCLUDED.result, finished_at = EXCLUDED.finished_at "
            "WHERE pygents_journal.result IS NULL",
            (session_id, call_id, result),
        )


async def read_postgres(
    session_id: str, call_ids: tuple[str, ...], conn: AsyncConnection[Any]
) -> dict[str, ToolResultBlock | None]:
    cursor = await conn.execute(
        "SELECT call_id, result FROM pygents_journal WHERE session_id = %s AND call_id = ANY(%s)",
        (session_id, list(call_ids)),
    )
    return {
        row[0]: decode(None if row[1] is None else bytes(row[1])) for row in await cursor.fetchall()
    }
