"""`InMemoryTaskStore`: task boards in dicts, for tests and single-process agents."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from pygents_ctx.memory._shared import check_key, utc_now
from pygents_ctx.memory.tasks.base import (
    DEFAULT_MAX_ATTEMPTS,
    RunBoards,
    Task,
    TaskStatus,
    after_retry,
    after_update,
    check_board,
    check_max_attempts,
    check_note,
    check_status,
    check_task_id,
    check_titles,
    missing_task,
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


class InMemoryTaskStore(RunBoards):
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

    __slots__ = ("_boards", "settle_after_run")

    def __init__(self, *, settle_after_run: bool = False) -> None:
        self._boards = _Boards()
        self.settle_after_run = bool(settle_after_run)

    def __repr__(self) -> str:
        return f"<InMemoryTaskStore {len(self._boards.tasks)} boards>"

    def board(self, conversation: str, agent: str) -> InMemoryTaskBoard:
        """The board of `agent` in `conversation`.

        Raises:
            TypeError: A name is not a str.
            ValueError: A name is empty or holds a NUL character.
        """
        return InMemoryTaskBoard(self._boards, *check_board(conversation, agent))

    async def boards(self, conversation: str | None = None) -> list[tuple[str, str]]:
        """The `(conversation, agent)` of every board holding tasks (in `conversation`), sorted."""
        if conversation is not None:
            check_key("conversation", conversation)
        with self._boards.lock:
            keys = [key for key, tasks in self._boards.tasks.items() if tasks]
        return sorted(key for key in keys if conversation is None or key[0] == conversation)


class InMemoryTaskBoard:
    """A `TaskBoard` of an `InMemoryTaskStore` (get it from `store.board()`)."""

    __slots__ = ("_boards", "_key")

    def __init__(self, boards: _Boards, conversation: str, agent: str) -> None:
        self._boards = boards
        self._key = (conversation, agent)

    def __repr__(self) -> str:
        return f"<InMemoryTaskBoard conversation={self._key[0]!r} agent={self._key[1]!r}>"

    @property
    def conversation(self) -> str:
        """The conversation the board belongs to."""
        return self._key[0]

    @property
    def agent(self) -> str:
        """The agent whose board it is."""
        return self._key[1]

    async def add_tasks(
        self, titles: Iterable[str], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> list[Task]:
        """Add a `pending` task per title, in order (see `TaskBoard.add_tasks`)."""
        batch = check_titles(titles)
        limit = check_max_attempts(max_attempts)
        boards, key, now = self._boards, self._key, utc_now()
        with boards.lock:
            first = boards.next_id.get(key, 1)
            added = [
                Task(first + i, title, TaskStatus.PENDING, 1, limit, None, now, now)
                for i, title in enumerate(batch)
            ]
            if added:
                board = boards.tasks.setdefault(key, {})
                board.update((task.id, task) for task in added)
                boards.next_id[key] = first + len(added)
        return added

    async def tasks(self, *, status: TaskStatus | str | None = None) -> list[Task]:
        """The board's tasks (those with `status`, when given), by id."""
        wanted = None if status is None else check_status(status)
        with self._boards.lock:
            board = list(self._boards.tasks.get(self._key, {}).values())
        return [task for task in board if wanted is None or task.status is wanted]

    async def get(self, task_id: int) -> Task:
        """The task numbered `task_id` (see `TaskBoard.get`)."""
        number = check_task_id(task_id)
        with self._boards.lock:
            return self._task(number)

    async def update_status(
        self, task_id: int, status: TaskStatus | str, *, note: str | None = None
    ) -> Task:
        """Move a task to `status` (see `TaskBoard.update_status`)."""
        number, target, text = check_task_id(task_id), check_status(status), check_note(note)
        with self._boards.lock:
            return self._store(after_update(self._task(number), target, text, utc_now()))

    async def retry(self, task_id: int, *, force: bool = False, note: str | None = None) -> Task:
        """Send a finished task back to `pending` (see `TaskBoard.retry`)."""
        number, text = check_task_id(task_id), check_note(note)
        with self._boards.lock:
            return self._store(after_retry(self._task(number), bool(force), text, utc_now()))

    async def settle(self) -> list[Task]:
        """Mark every `in_progress` task `succeeded`; the tasks it changed."""
        now = utc_now()
        with self._boards.lock:
            board = self._boards.tasks.get(self._key, {})
            return [
                self._store(settled(task, now))
                for task in list(board.values())
                if task.status is TaskStatus.IN_PROGRESS
            ]

    async def clear(self) -> int:
        """Remove every task of the board; how many there were."""
        with self._boards.lock:
            removed = self._boards.tasks.pop(self._key, {})
            self._boards.next_id.pop(self._key, None)
        return len(removed)

    def _task(self, number: int) -> Task:
        found = self._boards.tasks.get(self._key, {}).get(number)
        if found is None:
            raise missing_task(number, *self._key)
        return found

    def _store(self, task: Task) -> Task:
        self._boards.tasks[self._key][task.id] = task
        return task
