"""The task board contract: per-(conversation, agent) boards of tasks, and how a task moves.

A *board* holds the tasks one agent keeps for one conversation, numbered from
1 in the order they were added. A *task store* keeps many boards and hands
out the board for a `(conversation, agent)` pair; given to an agent as a
resource, it gives each run the board of that agent's conversation (see
`RunScope`).

How a task's status may change:

```
pending ──► in_progress ──► succeeded
   │             │
   ├─────────────┴────────► failed ──retry()──► pending   (while attempts < max_attempts)
   └──────────────────────► succeeded
succeeded / failed ──retry(force=True)──► pending            (any number of times)
```

- `update_status` moves a task along the arrows; anything else (a finished
  task, the status it already has) raises `TaskTransitionError`, which makes
  `update_status(id, IN_PROGRESS)` a safe way for workers to claim a task:
  only one of them succeeds.
- A task is on its first attempt when added; `retry()` sends a failed task
  back to `pending` for its next attempt while it has attempts left, and
  raises `RetryLimitError` once it has none. `retry(force=True)`, the human
  override, re-opens a failed or succeeded task whatever its attempts.
- `settle()` marks every `in_progress` task of the board `succeeded`: at the
  end of a run, nothing is left spinning.

Every change checks and applies the rule under the backend's lock or
transaction, so concurrent workers (tasks of one event loop, or processes
sharing a database) never both win a transition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final, Protocol, runtime_checkable

from pygents_ctx._checks import LARGEST, SMALLEST, storable_text, whole_number
from pygents_ctx._resources import RunScope, injectable
from pygents_ctx.errors import RetryLimitError, TaskNotFoundError, TaskTransitionError
from pygents_ctx.memory._shared import check_key, utc_now

__all__ = ["Task", "TaskBoard", "TaskStatus", "TaskStore"]

DEFAULT_MAX_ATTEMPTS: Final = 3


class TaskStatus(StrEnum):
    """Where a task is: `pending`, `in_progress`, `succeeded` or `failed`."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


_NEXT: Final[dict[TaskStatus, frozenset[TaskStatus]]] = {
    TaskStatus.PENDING: frozenset(
        {TaskStatus.IN_PROGRESS, TaskStatus.SUCCEEDED, TaskStatus.FAILED}
    ),
    TaskStatus.IN_PROGRESS: frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED}),
    TaskStatus.SUCCEEDED: frozenset(),
    TaskStatus.FAILED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class Task:
    """One task on a board, as it was when read.

    Attributes:
        id: Its number on the board, from 1, in the order tasks were added.
        title: What to do.
        status: Where it is (see `TaskStatus`).
        attempts: Which attempt it is on: 1 when added, one more per retry.
        max_attempts: How many attempts `retry()` allows (forced retries aside).
        note: The note given with its latest status change, if any.
        created_at: When it was added (UTC).
        updated_at: When it last changed (UTC).
    """

    id: int
    title: str
    status: TaskStatus
    attempts: int
    max_attempts: int
    note: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def attempts_left(self) -> int:
        """How many more times `retry()` may send it back to `pending`."""
        return max(self.max_attempts - self.attempts, 0)


@injectable
@runtime_checkable
class TaskBoard(Protocol):
    """The tasks one agent keeps for one conversation.

    Get one from a `TaskStore` (`store.board(conversation, agent)`), or, in a
    tool, by annotating a parameter `TaskBoard`: an agent given
    `resources={TaskBoard: store}` hands each of its tools the board of its
    own conversation. Every method is a coroutine and checks its input before
    it changes anything.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx.memory import InMemoryTaskStore, TaskStatus
        >>> async def main():
        ...     board = InMemoryTaskStore().board("chat-1", "planner")
        ...     first, second = await board.add_tasks(["search", "summarize"])
        ...     await board.update_status(first.id, TaskStatus.IN_PROGRESS)
        ...     await board.update_status(first.id, TaskStatus.SUCCEEDED, note="3 papers")
        ...     return [(t.title, t.status.value) for t in await board.tasks()]
        >>> asyncio.run(main())
        [('search', 'succeeded'), ('summarize', 'pending')]
    """

    @property
    def conversation(self) -> str:
        """The conversation the board belongs to."""
        ...

    @property
    def agent(self) -> str:
        """The agent whose board it is."""
        ...

    async def add_tasks(
        self, titles: Iterable[str], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> list[Task]:
        """Add a `pending` task per title, in order, numbered after the board's last.

        Raises:
            TypeError: `titles` is a single string or holds a non-string.
            ValueError: A title is empty, or `max_attempts` is less than 1.
        """
        ...

    async def tasks(self, *, status: TaskStatus | str | None = None) -> list[Task]:
        """The board's tasks (those with `status`, when given), by id."""
        ...

    async def get(self, task_id: int) -> Task:
        """The task numbered `task_id`.

        Raises:
            TaskNotFoundError: The board has no such task.
        """
        ...

    async def update_status(
        self, task_id: int, status: TaskStatus | str, *, note: str | None = None
    ) -> Task:
        """Move a task to `status` (along the arrows in the module docs); the task after.

        `note` replaces the task's note when given.

        Raises:
            TaskNotFoundError: The board has no such task.
            TaskTransitionError: The task cannot move to `status` from where it is.
        """
        ...

    async def retry(self, task_id: int, *, force: bool = False, note: str | None = None) -> Task:
        """Send a failed task back to `pending` for its next attempt; the task after.

        Args:
            task_id: The task.
            force: Re-open a failed or succeeded task even with no attempts left.
            note: Replaces the task's note when given.

        Raises:
            TaskNotFoundError: The board has no such task.
            RetryLimitError: The task has used its `max_attempts` (and not `force`).
            TaskTransitionError: The task is not failed (or, forced, not finished).
        """
        ...

    async def settle(self) -> list[Task]:
        """Mark every `in_progress` task `succeeded`; the tasks it changed."""
        ...

    async def clear(self) -> int:
        """Remove every task of the board; how many there were. Numbering restarts at 1."""
        ...


@runtime_checkable
class TaskStore(Protocol):
    """Keeps task boards, one per `(conversation, agent)`.

    Implemented by `InMemoryTaskStore`, `SQLiteTaskStore` and
    `PostgresTaskStore`. A task store is a `RunResource`: give it to an agent
    as `resources={TaskBoard: store}` and each run's tools receive
    `store.board(conversation, agent)` for that run; with
    `settle_after_run=True`, the board is settled when the run ends normally.
    """

    settle_after_run: bool

    def board(self, conversation: str, agent: str) -> TaskBoard:
        """The board of `agent` in `conversation` (made when its first task is added).

        Raises:
            TypeError: A name is not a str.
            ValueError: A name is empty or holds a NUL or a lone surrogate.
        """
        ...

    async def boards(self, conversation: str | None = None) -> list[tuple[str, str]]:
        """The `(conversation, agent)` of every board holding tasks (in `conversation`), sorted."""
        ...

    def open_run(self, scope: RunScope) -> TaskBoard:
        """The board of the run's agent in its conversation."""
        ...

    async def close_run(self, value: object, scope: RunScope) -> None:
        """At the normal end of a run: settle its board if `settle_after_run`."""
        ...


class TaskStoreBase:
    """What every task store shares: checked board keys, and being a `RunResource`.

    A backend implements `_board` and `_boards`, which get checked arguments.
    """

    __slots__ = ("settle_after_run",)

    def __init__(self, settle_after_run: bool) -> None:
        self.settle_after_run = bool(settle_after_run)

    def board(self, conversation: str, agent: str) -> TaskBoard:
        """The board of `agent` in `conversation` (see `TaskStore.board`)."""
        return self._board(*check_board(conversation, agent))

    async def boards(self, conversation: str | None = None) -> list[tuple[str, str]]:
        """The `(conversation, agent)` of every board holding tasks (in `conversation`), sorted."""
        return await self._boards(
            None if conversation is None else check_key("conversation", conversation)
        )

    def open_run(self, scope: RunScope) -> TaskBoard:
        """The board of the run's agent in its conversation."""
        return self.board(scope.conversation, scope.agent)

    async def close_run(self, value: object, scope: RunScope) -> None:
        """At the normal end of a run: settle its board if `settle_after_run`."""
        if self.settle_after_run and isinstance(value, TaskBoard):
            await value.settle()

    def _board(self, conversation: str, agent: str) -> TaskBoard:
        raise NotImplementedError

    async def _boards(self, conversation: str | None) -> list[tuple[str, str]]:
        raise NotImplementedError


class TaskBoardBase:
    """What every board shares: the checks and the rules, before one call of its own.

    A backend implements the `_`-methods, which get checked arguments: `_change`
    reads a task, applies `rule` (which raises for a move the rules forbid)
    and writes the result back, as one atomic step.
    """

    __slots__ = ("_key",)

    def __init__(self, conversation: str, agent: str) -> None:
        self._key = (conversation, agent)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} conversation={self._key[0]!r} agent={self._key[1]!r}>"

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
        return await self._add(batch, limit, utc_now()) if batch else []

    async def tasks(self, *, status: TaskStatus | str | None = None) -> list[Task]:
        """The board's tasks (those with `status`, when given), by id."""
        return await self._tasks(None if status is None else check_status(status))

    async def get(self, task_id: int) -> Task:
        """The task numbered `task_id` (see `TaskBoard.get`)."""
        return await self._get(check_task_id(task_id))

    async def update_status(
        self, task_id: int, status: TaskStatus | str, *, note: str | None = None
    ) -> Task:
        """Move a task to `status` (see `TaskBoard.update_status`)."""
        number, target, text = check_task_id(task_id), check_status(status), check_note(note)
        return await self._change(number, update_rule(target, text, utc_now()))

    async def retry(self, task_id: int, *, force: bool = False, note: str | None = None) -> Task:
        """Send a finished task back to `pending` (see `TaskBoard.retry`)."""
        number, text = check_task_id(task_id), check_note(note)
        return await self._change(number, retry_rule(bool(force), text, utc_now()))

    async def settle(self) -> list[Task]:
        """Mark every `in_progress` task `succeeded`; the tasks it changed."""
        return await self._settle(utc_now())

    async def clear(self) -> int:
        """Remove every task of the board; how many there were."""
        return await self._clear()

    async def _add(self, titles: list[str], max_attempts: int, now: datetime) -> list[Task]:
        raise NotImplementedError

    async def _tasks(self, status: TaskStatus | None) -> list[Task]:
        raise NotImplementedError

    async def _get(self, number: int) -> Task:
        raise NotImplementedError

    async def _change(self, number: int, rule: Callable[[Task], Task]) -> Task:
        raise NotImplementedError

    async def _settle(self, now: datetime) -> list[Task]:
        raise NotImplementedError

    async def _clear(self) -> int:
        raise NotImplementedError


def new_tasks(first: int, titles: list[str], max_attempts: int, now: datetime) -> list[Task]:
    """The tasks `add_tasks` makes, numbered from `first`."""
    return [
        Task(first + i, title, TaskStatus.PENDING, 1, max_attempts, None, now, now)
        for i, title in enumerate(titles)
    ]


# -- checks -----------------------------------------------------------------------------


def check_board(conversation: object, agent: object) -> tuple[str, str]:
    """The board's key, checked.

    Raises:
        TypeError: A name is not a str.
        ValueError: A name is empty or holds a NUL or a lone surrogate.
    """
    return check_key("conversation", conversation), check_key("agent", agent)


def check_titles(titles: object) -> list[str]:
    """The titles as a list, checked (each non-empty, no NUL).

    Raises:
        TypeError: `titles` is a single string, or holds a non-string.
        ValueError: A title is empty or holds a NUL or a lone surrogate.
    """
    if isinstance(titles, str) or not isinstance(titles, Iterable):
        raise TypeError(f"titles must be a list of task titles (e.g. [{titles!r}]), not {titles!r}")
    return [check_key(f"task title #{index + 1}", title) for index, title in enumerate(titles)]


def check_max_attempts(max_attempts: object) -> int:
    """Return `max_attempts` if it is an int from 1 to 2**63 - 1.

    Raises:
        TypeError: It is not an int.
        ValueError: It is below 1 or past 64 bits.
    """
    return whole_number(
        max_attempts, "max_attempts", least=1, most=LARGEST, fix="the first attempt counts"
    )


def check_task_id(task_id: object) -> int:
    """Return `task_id` if it is an int a database can hold (64 bits).

    Raises:
        TypeError: It is not an int.
        ValueError: It is past 64 bits.
    """
    return whole_number(task_id, "task_id", least=SMALLEST, most=LARGEST, fix="the task's number")


def check_status(status: object) -> TaskStatus:
    """`status` as a `TaskStatus`.

    Raises:
        ValueError: It is not one of the four statuses.
    """
    try:
        return TaskStatus(status)  # type: ignore[arg-type]  # anything: refused below
    except ValueError:
        names = ", ".join(repr(s.value) for s in TaskStatus)
        raise ValueError(f"status must be one of {names}, not {status!r}") from None


def check_note(note: object) -> str | None:
    """Return `note` if it is None or a str every store can hold.

    Raises:
        TypeError: It is not a str or None.
        ValueError: It holds a NUL character or a lone surrogate.
    """
    return (
        None
        if note is None
        else storable_text(note, "note", empty=True, fix="pass None for no note")
    )


def missing_task(task_id: int, conversation: str, agent: str) -> TaskNotFoundError:
    """The error for a task the board does not have."""
    return TaskNotFoundError(
        f"no task {task_id} on the board of agent {agent!r} in conversation {conversation!r}"
    )


# -- the rules, shared by every backend ---------------------------------------------------


def after_update(task: Task, status: TaskStatus, note: str | None, now: datetime) -> Task:
    """`task` moved to `status`.

    Raises:
        TaskTransitionError: The move is not allowed.
    """
    if status not in _NEXT[task.status]:
        if task.status is status:
            why = f"it is already {status}"
        elif _NEXT[task.status]:
            allowed = " or ".join(sorted(s.value for s in _NEXT[task.status]))
            why = f"from {task.status} it can only become {allowed}"
        else:
            hint = "retry() it" if task.status is TaskStatus.FAILED else "retry(force=True) it"
            why = f"it is {task.status}, which is final; {hint} to run it again"
        raise TaskTransitionError(
            f"task {task.id} cannot become {status}: {why}",
            task_id=task.id,
            status=task.status.value,
        )
    return _changed(task, status, task.attempts, note, now)


def after_retry(task: Task, force: bool, note: str | None, now: datetime) -> Task:
    """`task` sent back to `pending` for its next attempt.

    Raises:
        RetryLimitError: It has no attempts left and `force` is false.
        TaskTransitionError: It is not failed (forced: not failed or succeeded).
    """
    finished = (TaskStatus.FAILED, TaskStatus.SUCCEEDED) if force else (TaskStatus.FAILED,)
    if task.status not in finished:
        what = "failed or succeeded" if force else "failed"
        raise TaskTransitionError(
            f"task {task.id} is {task.status}; only a {what} task can be retried",
            task_id=task.id,
            status=task.status.value,
        )
    if not force and task.attempts >= task.max_attempts:
        raise RetryLimitError(
            f"task {task.id} has used all {task.max_attempts} of its attempts; "
            "retry(..., force=True) to run it again anyway",
            task_id=task.id,
            status=task.status.value,
        )
    return _changed(task, TaskStatus.PENDING, task.attempts + 1, note, now)


def update_rule(status: TaskStatus, note: str | None, now: datetime) -> Callable[[Task], Task]:
    """`after_update` with its arguments bound: what a backend applies to the task it read."""
    return lambda task: after_update(task, status, note, now)


def retry_rule(force: bool, note: str | None, now: datetime) -> Callable[[Task], Task]:
    """`after_retry` with its arguments bound: what a backend applies to the task it read."""
    return lambda task: after_retry(task, force, note, now)


def settled(task: Task, now: datetime) -> Task:
    """An `in_progress` task marked `succeeded` by `settle()`."""
    return _changed(task, TaskStatus.SUCCEEDED, task.attempts, None, now)


def _changed(
    task: Task, status: TaskStatus, attempts: int, note: str | None, now: datetime
) -> Task:
    return dataclasses.replace(
        task,
        status=status,
        attempts=attempts,
        note=task.note if note is None else note,
        updated_at=now,
    )
