"""Task boards shared by real OS processes: claims and additions never collide."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pygents_ctx.context.stores import connect
from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.memory import PostgresTaskStore, SQLiteTaskStore, TaskStatus, TaskStore
from tests import postgres_server

# argv: backend, where, name. Adds 20 tasks in batches of 2, then claims what it can.
WORKER = """
import asyncio, sys
from pygents_ctx import TaskTransitionError, connect, connect_postgres
from pygents_ctx.memory import PostgresTaskStore, SQLiteTaskStore

async def main(backend, where, name):
    opener = connect if backend == "sqlite" else connect_postgres
    async with opener(where) as conn:
        store = (SQLiteTaskStore if backend == "sqlite" else PostgresTaskStore)(conn)
        board = store.board("shared", "pool")
        print("ready", flush=True)
        sys.stdin.readline()  # start together
        for i in range(0, 20, 2):
            await board.add_tasks([f"{name}:{i}", f"{name}:{i + 1}"])
        print("added", flush=True)
        sys.stdin.readline()  # claim together, once every task is on the board
        for task in await board.tasks():
            try:
                await board.update_status(task.id, "in_progress", note=name)
            except TaskTransitionError:
                continue
            await asyncio.sleep(0.002)  # the work: long enough for the others to come in
            await board.update_status(task.id, "succeeded")
            print(task.id, flush=True)

asyncio.run(main(*sys.argv[1:]))
"""


def spawn(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def step_together(workers: list[subprocess.Popen[str]], expect: str) -> None:
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline() == expect
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()


async def check_board(store: TaskStore, claims: list[list[int]]) -> None:
    tasks = await store.board("shared", "pool").tasks()
    assert [t.id for t in tasks] == list(range(1, 81))
    for name in "abcd":  # each worker's batches kept their order and stayed together
        numbers = [t.id for t in tasks if t.title.startswith(f"{name}:")]
        assert [t.title for t in tasks if t.title.startswith(f"{name}:")] == [
            f"{name}:{i}" for i in range(20)
        ]
        assert all(numbers[i + 1] == numbers[i] + 1 for i in range(0, 20, 2))
    claimed = sorted(number for worker in claims for number in worker)
    assert claimed == list(range(1, 81)), "a task was claimed twice, or not at all"
    assert {t.status for t in tasks} == {TaskStatus.SUCCEEDED}
    winners = {t.note for t in tasks}
    assert len(winners) >= 2, "the workers did not overlap"


def run_workers(backend: str, where: str) -> list[list[int]]:
    workers = [spawn(backend, where, name) for name in "abcd"]
    try:
        step_together(workers, "ready\n")
        step_together(workers, "added\n")
        claims = []
        for worker in workers:
            out, err = worker.communicate(timeout=60)
            assert worker.returncode == 0, err
            claims.append([int(line) for line in out.split()])
        return claims
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()


async def test_sqlite_processes_share_a_board_safely(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    async with connect(path) as conn:
        await SQLiteTaskStore(conn).boards()  # the tables exist before the race

    claims = run_workers("sqlite", str(path))

    async with connect(path) as conn:
        await check_board(SQLiteTaskStore(conn), claims)


async def test_postgres_processes_share_a_board_safely(
    postgres: postgres_server.PostgresServer, pg_conn: PostgresConnection
) -> None:
    await PostgresTaskStore(pg_conn).boards()

    claims = run_workers("postgres", postgres.dsn)

    await check_board(PostgresTaskStore(pg_conn), claims)
