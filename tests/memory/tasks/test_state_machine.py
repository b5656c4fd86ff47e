"""Task boards against a model of the rules, through random sequences of operations.

The model restates the transition table independently of the package; after
every step the board must hold exactly what the model holds, and a refused
step must be refused with the error the model expects and change nothing.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pygents_ctx import RetryLimitError, TaskNotFoundError, TaskTransitionError
from pygents_ctx.context.stores import SQLiteConnection, connect, connect_postgres
from pygents_ctx.memory import (
    InMemoryTaskStore,
    PostgresTaskStore,
    SQLiteTaskStore,
    TaskBoard,
    TaskStatus,
)
from tests import postgres_server

T = TypeVar("T")
STATUSES = ["pending", "in_progress", "succeeded", "failed"]
ALLOWED = {
    ("pending", "in_progress"),
    ("pending", "succeeded"),
    ("pending", "failed"),
    ("in_progress", "succeeded"),
    ("in_progress", "failed"),
}


class Model:
    """What the board must hold: id -> [title, status, attempts, max_attempts, note, forced]."""

    def __init__(self) -> None:
        self.tasks: dict[int, list[Any]] = {}
        self.next_id = 1

    def view(self) -> list[tuple[Any, ...]]:
        return [(i, *fields[:5]) for i, fields in sorted(self.tasks.items())]


class BoardMachine(RuleBasedStateMachine):
    open_board: Callable[[asyncio.AbstractEventLoop], Awaitable[tuple[TaskBoard, Any]]]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.board, self.closer = self.run(type(self).open_board(self.loop))
        self.model = Model()

    def run(self, work: Awaitable[T]) -> T:
        return self.loop.run_until_complete(work)

    def teardown(self) -> None:
        if self.closer is not None:
            self.run(self.closer())
        self.loop.close()

    def expect(self, error: type[Exception] | None, work: Awaitable[Any]) -> Any:
        before = self.run(self.board.tasks())
        if error is None:
            return self.run(work)
        with pytest.raises(error):
            self.run(work)
        assert self.run(self.board.tasks()) == before
        return None

    @initialize(max_attempts=st.lists(st.integers(1, 3), min_size=1, max_size=4))
    def start_with_tasks(self, max_attempts: list[int]) -> None:
        for limit in max_attempts:
            self.add([f"task {self.model.next_id}"], limit)

    @rule(
        titles=st.lists(st.text(alphabet="abc ", min_size=1, max_size=5), min_size=1, max_size=3),
        max_attempts=st.integers(1, 3),
    )
    def add(self, titles: list[str], max_attempts: int) -> None:
        added = self.run(self.board.add_tasks(titles, max_attempts=max_attempts))
        assert [t.id for t in added] == list(
            range(self.model.next_id, self.model.next_id + len(titles))
        )
        for task, title in zip(added, titles, strict=True):
            self.model.tasks[task.id] = [title, "pending", 1, max_attempts, None, False]
        self.model.next_id += len(titles)

    def pick(self, choice: int) -> int:
        """Mostly a task on the board; now and then a number it does not have."""
        numbers = sorted(self.model.tasks)
        if choice == 0 or not numbers:
            return self.model.next_id + choice
        return numbers[choice % len(numbers)]

    @rule(
        choice=st.integers(0, 9),
        status=st.sampled_from(STATUSES),
        note=st.none() | st.text(alphabet="xyz ", max_size=3),
    )
    def update(self, choice: int, status: str, note: str | None) -> None:
        task_id = self.pick(choice)
        task = self.model.tasks.get(task_id)
        if task is None:
            self.expect(TaskNotFoundError, self.board.update_status(task_id, status, note=note))
        elif (task[1], status) not in ALLOWED:
            self.expect(TaskTransitionError, self.board.update_status(task_id, status, note=note))
        else:
            self.expect(None, self.board.update_status(task_id, status, note=note))
            task[1] = status
            task[4] = task[4] if note is None else note

    @rule(choice=st.integers(1, 9))
    def fail(self, choice: int) -> None:
        """Failures on purpose, so that retries often have something to retry."""
        self.update(choice, "failed", None)

    @rule(choice=st.integers(0, 9), force=st.booleans(), note=st.none() | st.just("again"))
    def retry(self, choice: int, force: bool, note: str | None) -> None:
        task_id = self.pick(choice)
        task = self.model.tasks.get(task_id)
        work = self.board.retry(task_id, force=force, note=note)
        if task is None:
            self.expect(TaskNotFoundError, work)
            return
        finished = ("failed", "succeeded") if force else ("failed",)
        if task[1] not in finished:
            self.expect(TaskTransitionError, work)
        elif not force and task[2] >= task[3]:
            self.expect(RetryLimitError, work)
        else:
            self.expect(None, work)
            task[1], task[2] = "pending", task[2] + 1
            task[4] = task[4] if note is None else note
            task[5] = task[5] or force

    @rule()
    def settle(self) -> None:
        changed = self.run(self.board.settle())
        lingering = [i for i, t in sorted(self.model.tasks.items()) if t[1] == "in_progress"]
        assert [t.id for t in changed] == lingering
        for number in lingering:
            self.model.tasks[number][1] = "succeeded"

    @rule()
    def clear(self) -> None:
        assert self.run(self.board.clear()) == len(self.model.tasks)
        self.model = Model()

    @invariant()
    def board_matches_the_model(self) -> None:
        tasks = self.run(self.board.tasks())
        assert [
            (t.id, t.title, t.status.value, t.attempts, t.max_attempts, t.note) for t in tasks
        ] == self.model.view()
        for task in tasks:
            assert isinstance(task.status, TaskStatus)
            assert task.attempts >= 1
            assert task.updated_at >= task.created_at
            if not self.model.tasks[task.id][5]:  # never forced: the bound holds
                assert task.attempts <= task.max_attempts
        assert [t.id for t in tasks] == sorted(self.model.tasks)


async def _in_memory(loop: asyncio.AbstractEventLoop) -> tuple[TaskBoard, None]:
    return InMemoryTaskStore().board("c", "a"), None


def test_in_memory_board_follows_the_model() -> None:
    machine = type("InMemoryBoard", (BoardMachine,), {"open_board": staticmethod(_in_memory)})
    machine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
    machine.TestCase().runTest()


@pytest.fixture(scope="module")
def sqlite_path() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        yield Path(directory) / "boards.db"


def test_sqlite_board_follows_the_model(sqlite_path: Path) -> None:
    async def open_board(loop: asyncio.AbstractEventLoop) -> tuple[TaskBoard, Any]:
        conn: SQLiteConnection = await connect(sqlite_path)
        return SQLiteTaskStore(conn).board(uuid.uuid4().hex, "a"), conn.close

    machine = type("SQLiteBoard", (BoardMachine,), {"open_board": staticmethod(open_board)})
    machine.TestCase.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
    machine.TestCase().runTest()


def test_postgres_board_follows_the_model(postgres: postgres_server.PostgresServer) -> None:
    async def open_board(loop: asyncio.AbstractEventLoop) -> tuple[TaskBoard, Any]:
        conn = await connect_postgres(postgres.dsn)
        return PostgresTaskStore(conn).board(uuid.uuid4().hex, "a"), conn.close

    machine = type("PostgresBoard", (BoardMachine,), {"open_board": staticmethod(open_board)})
    machine.TestCase.settings = settings(max_examples=12, stateful_step_count=20, deadline=None)
    machine.TestCase().runTest()
