"""`PostgresTaskStore`: task boards in PostgreSQL, safe for workers on many machines.

Needs the `postgres` extra (psycopg 3). The tables mirror the SQLite store's
(version in `pygents_task_schema`; times are `timestamptz`). Adding tasks
reserves their numbers with one upsert of the board's row, which locks it
until the commit, so concurrent adders get consecutive, distinct numbers.
Every change reads the task `FOR UPDATE`, applies the shared rules and writes
it back in one transaction: a second worker waits for the first and then
sees the status it left.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.memory._shared import OnPostgres, PostgresTables, in_utc
from pygents_ctx.memory.tasks._sql import COLUMNS, SQLTaskStore, TaskSQL, stored_task
from pygents_ctx.memory.tasks.base import Task, TaskStatus, missing_task, new_tasks, settled

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresTaskStore"]

_Key = tuple[str, str]

_V1: Final = (
    """
    CREATE TABLE pygents_task_boards (
        conversation text   NOT NULL,
        agent        text   NOT NULL,
        next_id      bigint NOT NULL,
        PRIMARY KEY (conversation, agent)
    )
    """,
    """
    CREATE TABLE pygents_tasks (
        conversation text        NOT NULL,
        agent        text        NOT NULL,
        id           bigint      NOT NULL,
        title        text        NOT NULL,
        status       text        NOT NULL
                     CHECK (status IN ('pending', 'in_progress', 'succeeded', 'failed')),
        attempts     integer     NOT NULL,
        max_attempts integer     NOT NULL,
        note         text,
        created_at   timestamptz NOT NULL,
        updated_at   timestamptz NOT NULL,
        PRIMARY KEY (conversation, agent, id),
        FOREIGN KEY (conversation, agent) REFERENCES pygents_task_boards (conversation, agent)
            ON DELETE CASCADE
    )
    """,
)
MIGRATIONS: Final = (_V1,)

_WHERE_BOARD: Final = "conversation = %s AND agent = %s"


def _task(row: tuple[Any, ...]) -> Task:
    return stored_task(row, in_utc)


async def _add(
    key: _Key, titles: list[str], limit: int, now: datetime, conn: AsyncConnection[Any]
) -> list[Task]:
    cursor = await conn.execute(
        "INSERT INTO pygents_task_boards AS b (conversation, agent, next_id) "
        "VALUES (%s, %s, %s) ON CONFLICT (conversation, agent) "
        "DO UPDATE SET next_id = b.next_id + %s RETURNING next_id",
        (*key, 1 + len(titles), len(titles)),
    )
    row = await cursor.fetchone()
    assert row is not None  # an upsert with RETURNING always gives its row
    added = new_tasks(int(row[0]) - len(titles), titles, limit, now)
    await conn.execute(
        f"INSERT INTO pygents_tasks (conversation, agent, {COLUMNS}) "
        "SELECT %s, %s, t.id, t.title, 'pending', 1, %s, NULL, %s, %s "
        "FROM unnest(%s::bigint[], %s::text[]) AS t (id, title)",
        (*key, limit, now, now, [t.id for t in added], titles),
    )
    return added


async def _list(key: _Key, status: TaskStatus | None, conn: AsyncConnection[Any]) -> list[Task]:
    cursor = await conn.execute(
        f"SELECT {COLUMNS} FROM pygents_tasks WHERE {_WHERE_BOARD} "
        "AND (%s::text IS NULL OR status = %s::text) ORDER BY id",
        (*key, None if status is None else status.value, None if status is None else status.value),
    )
    return [_task(row) for row in await cursor.fetchall()]


async def _read(key: _Key, number: int, conn: AsyncConnection[Any], *, lock: bool) -> Task:
    cursor = await conn.execute(
        f"SELECT {COLUMNS} FROM pygents_tasks WHERE {_WHERE_BOARD} AND id = %s"
        + (" FOR UPDATE" if lock else ""),
        (*key, number),
    )
    row = await cursor.fetchone()
    if row is None:
        raise missing_task(number, *key)
    return _task(row)


async def _write(key: _Key, task: Task, conn: AsyncConnection[Any]) -> Task:
    await conn.execute(
        "UPDATE pygents_tasks SET status = %s, attempts = %s, note = %s, updated_at = %s "
        f"WHERE {_WHERE_BOARD} AND id = %s",
        (task.status.value, task.attempts, task.note, task.updated_at, *key, task.id),
    )
    return task


async def _change(
    key: _Key, number: int, rule: Callable[[Task], Task], conn: AsyncConnection[Any]
) -> Task:
    return await _write(key, rule(await _read(key, number, conn, lock=True)), conn)


async def _settle(key: _Key, now: datetime, conn: AsyncConnection[Any]) -> list[Task]:
    cursor = await conn.execute(
        f"SELECT {COLUMNS} FROM pygents_tasks WHERE {_WHERE_BOARD} "
        "AND status = 'in_progress' ORDER BY id FOR UPDATE",
        key,
    )
    lingering = [_task(row) for row in await cursor.fetchall()]
    return [await _write(key, settled(task, now), conn) for task in lingering]


async def _clear(key: _Key, conn: AsyncConnection[Any]) -> int:
    cursor = await conn.execute(f"DELETE FROM pygents_tasks WHERE {_WHERE_BOARD}", key)
    removed = cursor.rowcount
    await conn.execute(f"DELETE FROM pygents_task_boards WHERE {_WHERE_BOARD}", key)
    return max(removed, 0)


async def _boards(conversation: str | None, conn: AsyncConnection[Any]) -> list[tuple[str, str]]:
    cursor = await conn.execute(
        "SELECT DISTINCT conversation, agent FROM pygents_tasks "
        "WHERE %s::text IS NULL OR conversation = %s::text",
        (conversation, conversation),
    )
    # Sorted here, by code point as the other backends sort: the server's collation may differ.
    return sorted((row[0], row[1]) for row in await cursor.fetchall())


_SQL: Final = TaskSQL(
    MIGRATIONS, _add, _list, partial(_read, lock=False), _change, _settle, _clear, _boards
)


class PostgresTaskStore(SQLTaskStore[PostgresTables], OnPostgres):
    """A `TaskStore` in PostgreSQL: boards shared safely by workers on many machines.

    Behaves as `SQLiteTaskStore` does, method for method.

    Args:
        conn: An open connection, from `await connect_postgres(dsn)`.
        settle_after_run: As a resource of an agent, settle the run's board
            when the run ends normally.

    Raises:
        TypeError: `conn` is not a `PostgresConnection`.
    """

    __slots__ = ()

    _sql = _SQL

    def __init__(self, conn: PostgresConnection, *, settle_after_run: bool = False) -> None:
        super().__init__(PostgresTables, conn, settle_after_run)
