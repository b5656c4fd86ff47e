"""`InMemoryTaskStore`: task boards in dicts, for tests and single-process agents."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from pygents_ctx.memory.tasks.base import (
    Task,
    TaskBoard,
    TaskBoardBase,
    TaskStatus,
    TaskStoreBase,
    missing_task,
    new_tasks,
    settled,
)

__all__ = ["InMemoryTaskStore"]

_Key = tuple[str, str]


class _Boards:
    """The tasks of every board, and the lock every change takes."""

    __slots__ = ("lock", "next_id", "tasks")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tasks: dict[_Key, dict[int, Task]] = {}
        self.next_id: dict[_Key, int] = {}


class InMemoryTaskStore(TaskStoreBase):
    """A `TaskStore` in the process: boards live as long as the store.

    Every change reads, checks and writes under one lock with no `await` in
    between, so concurrent tools of one event loop (or threads) never both win
    a transition. Boards for the same `(conversation, agent)` from one store
    share their tasks.

    Args:
        settle_after_run: As a resource of an agent, settle the run's board
            when the run ends normally.

    Examples:
        >>> import asyncio
        >>> async def main():
        ...     store = InMemoryTaskStore()
        ...     await store.board("chat-1", "planner").add_tasks(["outline"])
        ...     return await store.boards()
        >>> asyncio.run(main())
        [('chat-1', 'planner')]
    """

    __slots__ = ("_all",)

    def __init__(self, *, settle_after_run: bool = False) -> None:
        super().__init__(settle_after_run)
        self._all = _Boards()

    def __repr__(self) -> str:
        return f"<InMemoryTaskStore {len(self._all.tasks)} boards>"

    def _board(self, conversation: str, agent: str) -> TaskBoard:
        return InMemoryTaskBoard(self._all, conversation, agent)

    async def _boards(self, conversation: str | None) -> list[tuple[str, str]]:
        with self._all.lock:
            keys = [key for key, tasks in self._all.tasks.items() if tasks]
        return sorted(key for key in keys if conversation is None or key[0] == conversation)


class InMemoryTaskBoard(TaskBoardBase):
    """A `TaskBoard` of an `InMemoryTaskStore` (get it from `store.board()`)."""

    __slots__ = ("_all",)

    def __init__(self, boards: _Boards, conversation: str, agent: str) -> None:
        super().__init__(conversation, agent)
        self._all = boards

    async def _add(self, titles: list[str], max_attempts: int, now: datetime) -> list[Task]:
        boards, key = self._all, self._key
        with boards.lock:
            added = new_tasks(boards.next_id.get(key, 1), titles, max_attempts, now)
            boards.tasks.setdefault(key, {}).update((task.id, task) for task in added)
            boards.next_id[key] = added[-1].id + 1
        return added

    async def _tasks(self, status: TaskStatus | None) -> list[Task]:
        with self._all.lock:
            board = list(self._all.tasks.get(self._key, {}).values())
        return [task for task in board if status is None or task.status is status]

    async def _get(self, number: int) -> Task:
        with self._all.lock:
            return self._task(number)

    async def _change(self, number: int, rule: Callable[[Task], Task]) -> Task:
        with self._all.lock:
            return self._store(rule(self._task(number)))

    async def _settle(self, now: datetime) -> list[Task]:
        with self._all.lock:
            board = self._all.tasks.get(self._key, {})
            return [
                self._store(settled(task, now))
                for task in list(board.values())
                if task.status is TaskStatus.IN_PROGRESS
            ]

    async def _clear(self) -> int:
        with self._all.lock:
            removed = self._all.tasks.pop(self._key, {})
            self._all.next_id.pop(self._key, None)
        return len(removed)

    def _task(self, number: int) -> Task:
        found = self._all.tasks.get(self._key, {}).get(number)
        if found is None:
            raise missing_task(number, *self._key)
        return found

    def _store(self, task: Task) -> Task:
        self._all.tasks[self._key][task.id] = task
        return task
