"""The SQL of approval decisions, for the SQLite and PostgreSQL stores.

Both keep one row per decided tool call in `pygents_decisions` (created by a
migration of each store), keyed by `(session_id, call_id)`. The first decision
for a call is the one kept: a later one leaves it, and the caller is told the
kept one, all in one statement, so two people deciding at once cannot both win.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Final

from pygents_ctx.context.stores._common import (
    POSTGRES_LOCK_SESSION,
    SQLITE_NEW_SESSION,
    now_iso,
)
from pygents_ctx.context.stores._records import ApprovalDecision

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "POSTGRES_TABLE",
    "SQLITE_TABLE",
    "read_postgres",
    "read_sqlite",
    "record_postgres",
    "record_sqlite",
]

SQLITE_TABLE: Final = (
    """
    CREATE TABLE pygents_decisions (
        session_id TEXT    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        call_id    TEXT    NOT NULL,
        approved   INTEGER NOT NULL,
        reason     TEXT,
        created_at TEXT    NOT NULL,
        PRIMARY KEY (session_id, call_id)
    ) WITHOUT ROWID
    """,
)

POSTGRES_TABLE: Final = (
    """
    CREATE TABLE pygents_decisions (
        session_id text        NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        call_id    text        NOT NULL,
        approved   boolean     NOT NULL,
        reason     text,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (session_id, call_id)
    )
    """,
)


def _decision(approved: Any, reason: str | None) -> ApprovalDecision:
    return ApprovalDecision(bool(approved), reason)


# ----------------------------------------------------------------------------- SQLite


def record_sqlite(
    session_id: str, call_id: str, decision: ApprovalDecision, db: sqlite3.Connection
) -> ApprovalDecision:
    """Keep `decision` unless the call has one; the one kept (inside the caller's transaction)."""
    created_at = now_iso()
    db.execute(SQLITE_NEW_SESSION, (session_id, created_at))
    db.execute(
        "INSERT INTO pygents_decisions (session_id, call_id, approved, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, call_id) DO NOTHING",
        (session_id, call_id, int(decision.approved), decision.reason, created_at),
    )
    row = db.execute(
        "SELECT approved, reason FROM pygents_decisions WHERE session_id = ? AND call_id = ?",
        (session_id, call_id),
    ).fetchone()
    return _decision(*row)


def read_sqlite(session_id: str, db: sqlite3.Connection) -> dict[str, ApprovalDecision]:
    rows = db.execute(
        "SELECT call_id, approved, reason FROM pygents_decisions WHERE session_id = ?",
        (session_id,),
    ).fetchall()
    return {call_id: _decision(approved, reason) for call_id, approved, reason in rows}


# ----------------------------------------------------------------------------- PostgreSQL


async def record_postgres(
    session_id: str, call_id: str, decision: ApprovalDecision, conn: AsyncConnection[Any]
) -> ApprovalDecision:
    """Keep `decision` unless the call has one; the one kept, in one transaction."""
    async with conn.transaction():
        await conn.execute(POSTGRES_LOCK_SESSION, (session_id,))
        await conn.execute(
            "INSERT INTO pygents_decisions (session_id, call_id, approved, reason) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (session_id, call_id) DO NOTHING",
            (session_id, call_id, decision.approved, decision.reason),
        )
        cursor = await conn.execute(
            "SELECT approved, reason FROM pygents_decisions WHERE session_id = %s AND call_id = %s",
            (session_id, call_id),
        )
        row = await cursor.fetchone()
    assert row is not None  # inserted or already there, in this transaction
    return _decision(row[0], row[1])


async def read_postgres(session_id: str, conn: AsyncConnection[Any]) -> dict[str, ApprovalDecision]:
    cursor = await conn.execute(
        "SELECT call_id, approved, reason FROM pygents_decisions WHERE session_id = %s",
        (session_id,),
    )
    return {row[0]: _decision(row[1], row[2]) for row in await cursor.fetchall()}
