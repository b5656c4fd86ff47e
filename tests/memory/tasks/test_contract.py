"""The `TaskStore` / `TaskBoard` contract, run against every backend."""

from __future__ import annotations

import asyncio
from datetime import UTC

import pytest

from pygents_ctx import (
    PygentsError,
    RetryLimitError,
    TaskNotFoundError,
    TaskTransitionError,
)
from pygents_ctx.memory import Task, TaskBoard, TaskStatus, TaskStore

PENDING, IN_PROGRESS = TaskStatus.PENDING, TaskStatus.IN_PROGRESS
SUCCEEDED, FAILED = TaskStatus.SUCCEEDED, TaskStatus.FAILED


def summary(tasks: list[Task]) -> list[tuple[int, str, str, int]]:
    return [(t.id, t.title, t.status.value, t.attempts) for t in tasks]


async def test_added_tasks_are_pending_numbered_in_order(tasks: TaskStore) -> None:
    board = tasks.board("chat", "planner")

    added = await board.add_tasks(["search", "read"], max_attempts=2)
    more = await board.add_tasks(["write"])

    assert summary(added + more) == [
        (1, "search", "pending", 1),
        (2, "read", "pending", 1),
        (3, "write", "pending", 1),
    ]
    assert [t.max_attempts for t in added + more] == [2, 2, 3]
    assert await board.tasks() == added + more
    first = added[0]
    assert first.note is None
    assert first.created_at == first.updated_at
    assert first.created_at.tzinfo is not None
    assert first.created_at.utcoffset() == UTC.utcoffset(None)
    assert first.attempts_left == 1
    assert await board.add_tasks([]) == []


async def test_boards_are_kept_apart_by_conversation_and_agent(tasks: TaskStore) -> None:
    await tasks.board("chat-1", "planner").add_tasks(["a"])
    await tasks.board("chat-1", "writer").add_tasks(["b", "c"])
    await tasks.board("chat-2", "planner").add_tasks(["d"])
    same = tasks.board("chat-1", "writer")

    assert summary(await same.tasks()) == [(1, "b", "pending", 1), (2, "c", "pending", 1)]
    assert (same.conversation, same.agent) == ("chat-1", "writer")
    assert await tasks.boards() == [
        ("chat-1", "planner"),
        ("chat-1", "writer"),
        ("chat-2", "planner"),
    ]
    assert await tasks.boards("chat-2") == [("chat-2", "planner")]
    assert await tasks.board("chat-3", "nobody").tasks() == []


async def test_a_task_moves_along_the_allowed_transitions(tasks: TaskStore) -> None:
    board = tasks.board("chat", "worker")
    await board.add_tasks(["start then succeed", "fail directly", "succeed directly"])

    started = await board.update_status(1, IN_PROGRESS)
    assert started.status is IN_PROGRESS
    assert started.updated_at >= started.created_at
    done = await board.update_status(1, "succeeded", note="found 3")
    assert (done.status, done.note) == (SUCCEEDED, "found 3")
    assert (await board.update_status(2, FAILED, note="no access")).status is FAILED
    assert (await board.update_status(3, SUCCEEDED)).note is None

    assert await board.get(1) == done
    assert [t.id for t in await board.tasks(status=SUCCEEDED)] == [1, 3]
    assert [t.id for t in await board.tasks(status="failed")] == [2]


@pytest.mark.parametrize(
    ("path", "target", "reason"),
    [
        ([], PENDING, "it is already pending"),
        ([IN_PROGRESS], IN_PROGRESS, "it is already in_progress"),
        ([IN_PROGRESS], PENDING, "from in_progress it can only become failed or succeeded"),
        ([SUCCEEDED], IN_PROGRESS, r"succeeded, which is final; retry\(force=True\) it"),
        ([FAILED], PENDING, r"failed, which is final; retry\(\) it"),
        ([IN_PROGRESS, FAILED], SUCCEEDED, "final"),
    ],
)
async def test_a_move_the_rules_forbid_changes_nothing(
    tasks: TaskStore, path: list[TaskStatus], target: TaskStatus, reason: str
) -> None:
    board = tasks.board("chat", "worker")
    await board.add_tasks(["job"])
    for status in path:
        await board.update_status(1, status, note="before")
    before = await board.get(1)

    with pytest.raises(TaskTransitionError, match=reason) as info:
        await board.update_status(1, target, note="refused")

    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, PygentsError)
    assert (info.value.task_id, info.value.status) == (1, before.status.value)
    assert await board.get(1) == before


async def test_retry_is_bounded_by_max_attempts(tasks: TaskStore) -> None:
    board = tasks.board("chat", "worker")
    await board.add_tasks(["flaky"], max_attempts=2)
    await board.update_status(1, FAILED)

    again = await board.retry(1, note="second try")
    assert (again.status, again.attempts, again.note, again.attempts_left) == (
        PENDING,
        2,
        "second try",
        0,
    )
    await board.update_status(1, IN_PROGRESS)
    await board.update_status(1, FAILED)
    with pytest.raises(
        RetryLimitError, match=r"all 2 of its attempts; retry\(\.\.\., force=True\)"
    ):
        await board.retry(1)
    assert (await board.get(1)).status is FAILED

    forced = await board.retry(1, force=True)
    assert (forced.status, forced.attempts) == (PENDING, 3)


async def test_only_finished_tasks_can_be_retried(tasks: TaskStore) -> None:
    board = tasks.board("chat", "worker")
    await board.add_tasks(["waiting", "running", "done"])
    await board.update_status(2, IN_PROGRESS)
    await board.update_status(3, SUCCEEDED)

    for number in (1, 2):
        with pytest.raises(TaskTransitionError, match="only a failed task can be retried"):
            await board.retry(number)
        with pytest.raises(TaskTransitionError, match="only a failed or succeeded task"):
            await board.retry(number, force=True)
    with pytest.raises(TaskTransitionError, match="is succeeded") as info:
        await board.retry(3)
    assert not isinstance(info.value, RetryLimitError)

    redo = await board.retry(3, force=True)
    assert (redo.status, redo.attempts) == (PENDING, 2)


async def test_settle_finishes_what_is_left_in_progress(tasks: TaskStore) -> None:
    board = tasks.board("chat", "worker")
    other = tasks.board("chat", "someone else")
    await board.add_tasks(["a", "b", "c", "d"])
    await other.add_tasks(["x"])
    await other.update_status(1, IN_PROGRESS)
    await board.update_status(1, IN_PROGRESS, note="working")
    await board.update_status(3, IN_PROGRESS)
    await board.update_status(4, FAILED)

    changed = await board.settle()

    assert [(t.id, t.status, t.note) for t in changed] == [
        (1, SUCCEEDED, "working"),
        (3, SUCCEEDED, None),
    ]
    assert [t.status for t in await board.tasks()] == [SUCCEEDED, PENDING, SUCCEEDED, FAILED]
    assert (await other.get(1)).status is IN_PROGRESS
    assert await board.settle() == []


async def test_clear_empties_one_board_and_numbering_restarts(tasks: TaskStore) -> None:
    board = tasks.board("chat", "worker")
    other = tasks.board("chat", "other")
    await board.add_tasks(["a", "b"])
    await other.add_tasks(["x"])

    assert await board.clear() == 2
    assert await board.clear() == 0

    assert await board.tasks() == []
    assert [t.id for t in await board.add_tasks(["again"])] == [1]
    assert len(await other.tasks()) == 1


async def test_unknown_tasks_and_bad_input_are_refused(tasks: TaskStore) -> None:
    board = tasks.board("chat", "worker")
    await board.add_tasks(["only"])
    before = await board.tasks()

    with pytest.raises(TaskNotFoundError, match="no task 7 on the board of agent 'worker'") as info:
        await board.update_status(7, SUCCEEDED)
    assert isinstance(info.value, KeyError)
    with pytest.raises(TaskNotFoundError):
        await board.get(0)
    with pytest.raises(TaskNotFoundError):
        await board.retry(2, force=True)
    with pytest.raises(ValueError, match="task_id must be between"):
        await board.get(2**63)  # no database holds such an id
    with pytest.raises(ValueError, match="max_attempts must be between 1 and"):
        await board.add_tasks(["x"], max_attempts=2**63)
    with pytest.raises(ValueError, match="status must be one of 'pending', 'in_progress'"):
        await board.update_status(1, "done")
    with pytest.raises(ValueError, match="status must be one of"):
        await board.tasks(status="DONE")
    with pytest.raises(TypeError, match=r"task_id must be an int, .*; the task's number"):
        await board.get("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"list of task titles \(e\.g\. \['write'\]\)"):
        await board.add_tasks("write")
    with pytest.raises(ValueError, match="task title #2 must not be empty"):
        await board.add_tasks(["fine", ""])
    with pytest.raises(TypeError, match="task title #1 must be a str"):
        await board.add_tasks([3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_attempts must be between 1 and"):
        await board.add_tasks(["x"], max_attempts=0)
    with pytest.raises(TypeError, match="max_attempts must be an int"):
        await board.add_tasks(["x"], max_attempts=True)
    with pytest.raises(TypeError, match="note must be a str"):
        await board.update_status(1, SUCCEEDED, note=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NUL"):
        await board.retry(1, note="a\x00b")
    with pytest.raises(ValueError, match=r"note .* holds a lone surrogate"):
        await board.update_status(1, SUCCEEDED, note="a\ud800b")
    with pytest.raises(ValueError, match="conversation must not be empty"):
        tasks.board("", "worker")
    with pytest.raises(TypeError, match="agent must be a str"):
        tasks.board("chat", None)  # type: ignore[arg-type]

    assert await board.tasks() == before


async def test_concurrent_claims_let_exactly_one_worker_win_each_task(tasks: TaskStore) -> None:
    board = tasks.board("chat", "pool")
    await board.add_tasks([f"job {i}" for i in range(10)])
    claims: dict[int, list[str]] = {}

    async def worker(name: str) -> None:
        for task in await board.tasks():
            try:
                await board.update_status(task.id, IN_PROGRESS, note=name)
            except TaskTransitionError:
                continue
            claims.setdefault(task.id, []).append(name)
            await board.update_status(task.id, SUCCEEDED)

    await asyncio.gather(*(worker(f"w{i}") for i in range(5)))

    assert sorted(claims) == list(range(1, 11))
    assert all(len(winners) == 1 for winners in claims.values())
    assert {t.status for t in await board.tasks()} == {SUCCEEDED}


async def test_concurrent_adds_get_distinct_consecutive_numbers(tasks: TaskStore) -> None:
    board = tasks.board("chat", "pool")

    batches = await asyncio.gather(*(board.add_tasks([f"{i}a", f"{i}b"]) for i in range(8)))

    numbers = sorted(t.id for batch in batches for t in batch)
    assert numbers == list(range(1, 17))
    for batch in batches:
        assert batch[1].id == batch[0].id + 1
    assert len(await board.tasks()) == 16


def test_a_task_board_is_a_protocol_the_boards_meet(tasks: TaskStore) -> None:
    board = tasks.board("c", "a")

    assert isinstance(board, TaskBoard)
    assert isinstance(tasks, TaskStore)
    assert "conversation='c'" in repr(board)
    assert type(tasks).__name__ in repr(tasks)
