"""The task store on a database, written once over the SQL dialects.

`SQLiteTaskStore` and `PostgresTaskStore` are this store on their own
connection: each gives a `TaskSQL`, its tables' migrations and its
operations as functions of a connection (the SQL, the placeholders, the
types and the locks it takes differ), and its tables' `transaction` says how
a change runs as one transaction. Which operations change the board, and so
run in one, is said here once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, ClassVar, Final, Generic

from pygents_ctx.memory._shared import AnyTables, Migrations
from pygents_ctx.memory.tasks.base import Task, TaskBoard, TaskBoardBase, TaskStatus, TaskStoreBase

__all__ = ["COLUMNS", "SQLTaskBoard", "SQLTaskStore", "TaskSQL", "stored_task"]

Key = tuple[str, str]

# What both dialects select of a task, in the order `stored_task` reads it.
COLUMNS: Final = "id, title, status, attempts, max_attempts, note, created_at, updated_at"


def stored_task(row: Sequence[Any], moment: Callable[[Any], datetime]) -> Task:
    """The task of a row of `COLUMNS`, its times read back by the dialect's `moment`."""
    number, title, status, attempts, max_attempts, note, created, updated = row
    return Task(
        int(number),
        title,
        TaskStatus(status),
        attempts,
        max_attempts,
        note,
        moment(created),
        moment(updated),
    )


@dataclass(frozen=True, slots=True)
class TaskSQL:
    """One dialect's migrations and operations (the connection is an operation's last argument).

    The changes (`add`, `change`, `settle`, `clear`) are given the connection
    inside a transaction; reads run as they are.
    """

    migrations: Migrations  # what builds its tables, oldest version first
    add: Callable[..., Any]  # (key, titles, max_attempts, now, db) -> list[Task]
    tasks: Callable[..., Any]  # (key, status or None, db) -> list[Task]
    get: Callable[..., Any]  # (key, number, db) -> Task (TaskNotFoundError)
    change: Callable[..., Any]  # (key, number, rule, db) -> Task, read and written
    settle: Callable[..., Any]  # (key, now, db) -> list[Task] settled
    clear: Callable[..., Any]  # (key, db) -> int removed
    boards: Callable[..., Any]  # (conversation or None, db) -> list[(conversation, agent)]


class SQLTaskStore(TaskStoreBase, Generic[AnyTables]):
    """A `TaskStore` whose boards are rows of a database (see the module docs)."""

    __slots__ = ("_tables",)

    _sql: ClassVar[TaskSQL]

    def __init__(self, tables: type[AnyTables], conn: object, settle_after_run: bool) -> None:
        self._tables: AnyTables = tables(
            conn, type(self).__name__, self._sql.migrations, "pygents_task_schema", "task store"
        )
        super().__init__(settle_after_run)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._tables.where!r})"

    def _board(self, conversation: str, agent: str) -> TaskBoard:
        return SQLTaskBoard(self._tables, self._sql, conversation, agent)

    async def _boards(self, conversation: str | None) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = await self._tables.run(
            partial(self._sql.boards, conversation)
        )
        return found


class SQLTaskBoard(TaskBoardBase, Generic[AnyTables]):
    """A `TaskBoard` of a `SQLTaskStore`: each change one transaction."""

    __slots__ = ("_sql", "_tables")

    def __init__(self, tables: AnyTables, sql: TaskSQL, conversation: str, agent: str) -> None:
        super().__init__(conversation, agent)
        self._tables: AnyTables = tables
        self._sql = sql

    async def _add(self, titles: list[str], max_attempts: int, now: datetime) -> list[Task]:
        work = partial(self._sql.add, self._key, titles, max_attempts, now)
        added: list[Task] = await self._tables.transaction(work)
        return added

    async def _tasks(self, status: TaskStatus | None) -> list[Task]:
        found: list[Task] = await self._tables.run(partial(self._sql.tasks, self._key, status))
        return found

    async def _get(self, number: int) -> Task:
        found: Task = await self._tables.run(partial(self._sql.get, self._key, number))
        return found

    async def _change(self, number: int, rule: Callable[[Task], Task]) -> Task:
        work = partial(self._sql.change, self._key, number, rule)
        changed: Task = await self._tables.transaction(work)
        return changed

    async def _settle(self, now: datetime) -> list[Task]:
        settled: list[Task] = await self._tables.transaction(
            partial(self._sql.settle, self._key, now)
        )
        return settled

    async def _clear(self) -> int:
        removed: int = await self._tables.transaction(partial(self._sql.clear, self._key))
        return removed
