"""`SQLiteTaskStore`: task boards in a SQLite file, safe for workers in many processes.

Tables (made on first use; their version is in `pygents_task_schema`):

- `pygents_task_boards`: `(conversation, agent)` -> `next_id`, the number the
  board's next task gets.
- `pygents_tasks`: `(conversation, agent, id)` -> the task's fields; times are
  ISO 8601 text in UTC.

The store is `SQLTaskStore` over this dialect's operations. Every change is
one `BEGIN IMMEDIATE` transaction that reads the task, applies
the shared rules (`after_update`, `after_retry`) and writes it back: SQLite
lets one writer in at a time across processes, so two workers can never both
move a task out of the same status.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Final, TypeVar

from pygents_ctx.context.stores._worker import SQLiteConnection
from pygents_ctx.memory._shared import OnSQLite, SQLiteTables, from_iso, to_iso
from pygents_ctx.memory.tasks._sql import COLUMNS, SQLTaskStore, TaskSQL, stored_task
from pygents_ctx.memory.tasks.base import Task, TaskStatus, missing_task, new_tasks, settled

__all__ = ["SQLiteTaskStore"]

Db = sqlite3.Connection
T = TypeVar("T")
_Key = tuple[str, str]

_V1: Final = (
    """
    CREATE TABLE pygents_task_boards (
        conversation TEXT    NOT NULL,
        agent        TEXT    NOT NULL,
        next_id      INTEGER NOT NULL,
        PRIMARY KEY (conversation, agent)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE pygents_tasks (
        conversation TEXT    NOT NULL,
        agent        TEXT    NOT NULL,
        id           INTEGER NOT NULL,
        title        TEXT    NOT NULL,
        status       TEXT    NOT NULL
                     CHECK (status IN ('pending', 'in_progress', 'succeeded', 'failed')),
        attempts     INTEGER NOT NULL,
        max_attempts INTEGER NOT NULL,
        note         TEXT,
        created_at   TEXT    NOT NULL,
        updated_at   TEXT    NOT NULL,
        PRIMARY KEY (conversation, agent, id),
        FOREIGN KEY (conversation, agent) REFERENCES pygents_task_boards (conversation, agent)
            ON DELETE CASCADE
    ) WITHOUT ROWID
    """,
)
MIGRATIONS: Final = (_V1,)


def _task(row: tuple[int, str, str, int, int, str | None, str, str]) -> Task:
    return stored_task(row, from_iso)


def _add(key: _Key, titles: list[str], limit: int, now: datetime, db: Db) -> list[Task]:
    (after,) = db.execute(
        "INSERT INTO pygents_task_boards (conversation, agent, next_id) VALUES (?, ?, ?) "
        "ON CONFLICT (conversation, agent) DO UPDATE SET next_id = next_id + ? "
        "RETURNING next_id",
        (*key, 1 + len(titles), len(titles)),
    ).fetchone()
    added = new_tasks(after - len(titles), titles, limit, now)
    db.executemany(
        f"INSERT INTO pygents_tasks (conversation, agent, {COLUMNS}) "
        "VALUES (?, ?, ?, ?, 'pending', 1, ?, NULL, ?, ?)",
        [(*key, t.id, t.title, limit, to_iso(now), to_iso(now)) for t in added],
    )
    return added


def _list(key: _Key, status: TaskStatus | None, db: Db) -> list[Task]:
    if status is None:
        rows = db.execute(
            f"SELECT {COLUMNS} FROM pygents_tasks WHERE conversation = ? AND agent = ? ORDER BY id",
            key,
        )
    else:
        rows = db.execute(
            f"SELECT {COLUMNS} FROM pygents_tasks "
            "WHERE conversation = ? AND agent = ? AND status = ? ORDER BY id",
            (*key, status.value),
        )
    return [_task(row) for row in rows]


def _read(key: _Key, number: int, db: Db) -> Task:
    row = db.execute(
        f"SELECT {COLUMNS} FROM pygents_tasks WHERE conversation = ? AND agent = ? AND id = ?",
        (*key, number),
    ).fetchone()
    if row is None:
        raise missing_task(number, *key)
    return _task(row)


def _write(key: _Key, task: Task, db: Db) -> Task:
    db.execute(
        "UPDATE pygents_tasks SET status = ?, attempts = ?, note = ?, updated_at = ? "
        "WHERE conversation = ? AND agent = ? AND id = ?",
        (task.status.value, task.attempts, task.note, to_iso(task.updated_at), *key, task.id),
    )
    return task


def _change(key: _Key, number: int, rule: Callable[[Task], Task], db: Db) -> Task:
    return _write(key, rule(_read(key, number, db)), db)


def _settle(key: _Key, now: datetime, db: Db) -> list[Task]:
    return [_write(key, settled(task, now), db) for task in _list(key, TaskStatus.IN_PROGRESS, db)]


def _clear(key: _Key, db: Db) -> int:
    (count,) = db.execute(
        "SELECT count(*) FROM pygents_tasks WHERE conversation = ? AND agent = ?", key
    ).fetchone()
    db.execute("DELETE FROM pygents_task_boards WHERE conversation = ? AND agent = ?", key)
    return int(count)


def _boards(conversation: str | None, db: Db) -> list[tuple[str, str]]:
    rows = db.execute(
        "SELECT DISTINCT conversation, agent FROM pygents_tasks "
        "WHERE :conversation IS NULL OR conversation = :conversation "
        "ORDER BY conversation, agent",
        {"conversation": conversation},
    )
    return [(row[0], row[1]) for row in rows]


_SQL: Final = TaskSQL(MIGRATIONS, _add, _list, _read, _change, _settle, _clear, _boards)


class SQLiteTaskStore(SQLTaskStore[SQLiteTables], OnSQLite):
    """A `TaskStore` in a SQLite database: survives restarts, shared safely by processes.

    Many boards live in one database, beside the conversations they belong to
    (open the connection with `connect()`, as for the context stores).

    Args:
        conn: An open connection, from `await connect(path)`.
        settle_after_run: As a resource of an agent, settle the run's board
            when the run ends normally.

    Raises:
        TypeError: `conn` is not a `SQLiteConnection`.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import connect
        >>> async def main():
        ...     async with connect(":memory:") as conn:
        ...         board = SQLiteTaskStore(conn).board("chat-1", "writer")
        ...         [task] = await board.add_tasks(["draft"], max_attempts=2)
        ...         await board.update_status(task.id, "failed", note="timed out")
        ...         task = await board.retry(task.id)
        ...         return task.status.value, task.attempts, task.note
        >>> asyncio.run(main())
        ('pending', 2, 'timed out')
    """

    __slots__ = ()

    _sql = _SQL

    def __init__(self, conn: SQLiteConnection, *, settle_after_run: bool = False) -> None:
        super().__init__(SQLiteTables, conn, settle_after_run)
