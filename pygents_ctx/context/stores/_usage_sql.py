"""The SQL of usage records, for the SQLite and PostgreSQL stores.

Both keep one row per model call in `pygents_usage` (created by the stores'
second migration; later ones add a sub-agent call's link columns,
`reasoning_tokens` and `window_record`, the call's `WindowRecord` as JSON text,
NULL when not recorded), and add the call's tokens to the session's counters in
the same transaction, so the records and the totals never disagree.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import orjson

from pygents_ctx.context.stores._common import now_iso
from pygents_ctx.context.usage import Usage, UsageRecord, WindowRecord

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "LINKS",
    "POSTGRES_REASONING",
    "POSTGRES_TABLE",
    "SQLITE_REASONING",
    "SQLITE_TABLE",
    "WINDOW",
    "read_postgres",
    "read_sqlite",
    "record_postgres",
    "record_sqlite",
]

SQLITE_TABLE: Final = (
    """
    CREATE TABLE pygents_usage (
        id                     INTEGER PRIMARY KEY,
        session_id             TEXT    NOT NULL
                               REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        run_id                 TEXT,
        model                  TEXT    NOT NULL DEFAULT '',
        input_tokens           INTEGER NOT NULL,
        output_tokens          INTEGER NOT NULL,
        cached_tokens          INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens     INTEGER NOT NULL DEFAULT 0,
        estimated_input_tokens INTEGER,
        created_at             TEXT    NOT NULL
    )
    """,
    "CREATE INDEX pygents_usage_by_session ON pygents_usage (session_id, run_id)",
)

POSTGRES_TABLE: Final = (
    """
    CREATE TABLE pygents_usage (
        id                     bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id             text    NOT NULL
                               REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        run_id                 text,
        model                  text    NOT NULL DEFAULT '',
        input_tokens           bigint  NOT NULL,
        output_tokens          bigint  NOT NULL,
        cached_tokens          bigint  NOT NULL DEFAULT 0,
        cache_write_tokens     bigint  NOT NULL DEFAULT 0,
        estimated_input_tokens bigint,
        created_at             text    NOT NULL
    )
    """,
    "CREATE INDEX pygents_usage_by_session ON pygents_usage (session_id, run_id)",
)

# A sub-agent's call: the session and the tool call that ran it, and its own transcript.
# Indexed by the calling session and call, so a transcript's call finds its sub-agent.
# The same SQL on SQLite and PostgreSQL.
LINKS: Final = (
    "ALTER TABLE pygents_usage ADD COLUMN parent_session TEXT",
    "ALTER TABLE pygents_usage ADD COLUMN call_id TEXT",
    "ALTER TABLE pygents_usage ADD COLUMN subagent_session TEXT",
    """
    CREATE INDEX pygents_usage_by_call ON pygents_usage (parent_session, call_id)
    WHERE parent_session IS NOT NULL
    """,
)

# What a reasoning model spent thinking, a part of output_tokens (0 for older rows).
SQLITE_REASONING: Final = (
    "ALTER TABLE pygents_usage ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0",
)
POSTGRES_REASONING: Final = (
    "ALTER TABLE pygents_usage ADD COLUMN reasoning_tokens bigint NOT NULL DEFAULT 0",
)

# The window each call was sent (`WindowRecord.to_dict()` as JSON text: PostgreSQL's
# jsonb would refuse a NUL escaped in a strategy's description).
WINDOW: Final = ("ALTER TABLE pygents_usage ADD COLUMN window_record TEXT",)

_COLUMNS: Final = (
    "run_id, model, input_tokens, output_tokens, cached_tokens, cache_write_tokens, "
    "estimated_input_tokens, created_at, parent_session, call_id, subagent_session, "
    "reasoning_tokens, window_record"
)


def _row(record: UsageRecord) -> tuple[Any, ...]:
    usage = record.usage
    return (
        record.run_id,
        record.model,
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_tokens,
        usage.cache_write_tokens,
        record.estimated_input_tokens,
        record.created_at,
        record.parent_session,
        record.call_id,
        record.subagent_session,
        usage.reasoning_tokens,
        None if record.window is None else orjson.dumps(record.window.to_dict()).decode(),
    )


def _record(row: tuple[Any, ...]) -> UsageRecord:
    run_id, model, input_tokens, output_tokens, cached, written, estimated, created_at = row[:8]
    parent_session, call_id, subagent_session, reasoning, window = row[8:]
    return UsageRecord(
        Usage(int(input_tokens), int(output_tokens), int(cached), int(written), int(reasoning)),
        run_id=run_id,
        model=model,
        estimated_input_tokens=None if estimated is None else int(estimated),
        created_at=created_at,
        parent_session=parent_session,
        call_id=call_id,
        subagent_session=subagent_session,
        window=None if window is None else WindowRecord.from_dict(orjson.loads(window)),
    )


def _select(placeholder: str, run_id: str | None) -> str:
    where = f"session_id = {placeholder}"
    if run_id is not None:
        where += f" AND run_id = {placeholder}"
    return f"SELECT {_COLUMNS} FROM pygents_usage WHERE {where} ORDER BY id"


# ----------------------------------------------------------------------------- SQLite

_SQLITE_INSERT: Final = (
    f"INSERT INTO pygents_usage (session_id, {_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SQLITE_ADD: Final = """
    INSERT INTO pygents_sessions (session_id, created_at, input_tokens, output_tokens)
    VALUES (?, ?, ?, ?)
    ON CONFLICT (session_id) DO UPDATE SET
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens
"""


def record_sqlite(session_id: str, record: UsageRecord, db: sqlite3.Connection) -> None:
    """Insert the record and add its tokens to the session (inside the caller's transaction)."""
    usage = record.usage
    db.execute(_SQLITE_ADD, (session_id, now_iso(), usage.input_tokens, usage.output_tokens))
    insert_sqlite(session_id, [record], db)


def insert_sqlite(session_id: str, records: Iterable[UsageRecord], db: sqlite3.Connection) -> None:
    """Insert the records as they are, leaving the session's token totals alone."""
    db.executemany(_SQLITE_INSERT, [(session_id, *_row(record)) for record in records])


def read_sqlite(session_id: str, run_id: str | None, db: sqlite3.Connection) -> list[UsageRecord]:
    sql = _select("?", run_id)
    params = (session_id,) if run_id is None else (session_id, run_id)
    return [_record(row) for row in db.execute(sql, params).fetchall()]


# ----------------------------------------------------------------------------- PostgreSQL

_POSTGRES_INSERT: Final = (
    f"INSERT INTO pygents_usage (session_id, {_COLUMNS}) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_POSTGRES_ADD: Final = """
    INSERT INTO pygents_sessions AS s (session_id, input_tokens, output_tokens)
    VALUES (%s, %s, %s)
    ON CONFLICT (session_id) DO UPDATE SET
        input_tokens = s.input_tokens + excluded.input_tokens,
        output_tokens = s.output_tokens + excluded.output_tokens
"""


async def record_postgres(session_id: str, record: UsageRecord, conn: AsyncConnection[Any]) -> None:
    """Insert the record and add its tokens to the session, in one transaction."""
    usage = record.usage
    async with conn.transaction():
        await conn.execute(_POSTGRES_ADD, (session_id, usage.input_tokens, usage.output_tokens))
        await insert_postgres(session_id, [record], conn)


async def insert_postgres(
    session_id: str, records: Sequence[UsageRecord], conn: AsyncConnection[Any]
) -> None:
    """Insert the records as they are, leaving the session's token totals alone."""
    if records:
        async with conn.cursor() as cursor:
            await cursor.executemany(
                _POSTGRES_INSERT, [(session_id, *_row(record)) for record in records]
            )


async def read_postgres(
    session_id: str, run_id: str | None, conn: AsyncConnection[Any]
) -> list[UsageRecord]:
    sql = _select("%s", run_id)
    params = (session_id,) if run_id is None else (session_id, run_id)
    cursor = await conn.execute(sql, params)
    return [_record(tuple(row)) for row in await cursor.fetchall()]
