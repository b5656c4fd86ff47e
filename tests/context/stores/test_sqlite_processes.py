"""SQLiteContextStore across real OS processes: concurrent writers, and writers killed mid-write."""

from __future__ import annotations

import itertools
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson

from pygents_ctx import count_message_tokens, from_dict
from pygents_ctx.context.stores import SQLiteContextStore, connect

from .helpers import texts

WRITER = """
import asyncio, sys
from pygents_ctx import Message
from pygents_ctx.context.stores import SQLiteContextStore, connect

async def main(path, name, count, batch):
    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="shared")
        print("ready", flush=True)
        sys.stdin.readline()  # start together
        for start in range(0, count, batch):
            if start == count // 2:  # both finish their first half before either goes on
                print("half", flush=True)
                sys.stdin.readline()
            messages = [Message("user", f"{name}:{i}") for i in range(start, start + batch)]
            if batch == 1:
                await store.append(messages[0])
            else:
                await store.append_many(messages)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""

# Appends forever, printing each index once its write returned (is acknowledged).
CRASHER = """
import asyncio, sys
from pygents_ctx import Message
from pygents_ctx.context.stores import SQLiteContextStore, connect

async def main(path, run):
    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="crash")
        print("ready", flush=True)
        i = 0
        while True:
            if i % 7 == 3:
                await store.append_many(
                    [Message("user", f"{run}:{i + k}") for k in range(3)], run_id=run
                )
                await store.add_context_tokens(1, 1)
                done = range(i, i + 3)
            else:
                await store.append(Message("assistant", f"{run}:{i}"), run_id=run)
                done = range(i, i + 1)
            print(*done, sep="\\n", flush=True)
            i = done[-1] + 1

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stored_rows(db_path: Path, session_id: str) -> list[tuple[int, int, bytes]]:
    db = sqlite3.connect(db_path)
    try:
        return db.execute(
            "SELECT position, tokens, data FROM pygents_messages WHERE session_id = ? "
            "ORDER BY position",
            (session_id,),
        ).fetchall()
    finally:
        db.close()


def session_counters(db_path: Path, session_id: str) -> tuple[int, ...]:
    db = sqlite3.connect(db_path)
    try:
        return db.execute(
            "SELECT message_count, live_tokens, next_position, input_tokens, output_tokens "
            "FROM pygents_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
    finally:
        db.close()


async def test_two_processes_appending_to_one_session_lose_nothing(db_path: Path) -> None:
    async with connect(db_path):
        pass  # create the schema first, so both writers start on equal terms
    writers = [spawn(WRITER, db_path, "a", 1000, 1), spawn(WRITER, db_path, "b", 1000, 10)]
    for writer in writers:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
    for command in ("go\n", "on\n"):
        for writer in writers:
            assert writer.stdin is not None
            writer.stdin.write(command)
            writer.stdin.flush()
        if command == "go\n":
            for writer in writers:
                assert writer.stdout is not None
                assert writer.stdout.readline() == "half\n"
    for writer in writers:
        _, err = writer.communicate(timeout=30)
        assert writer.returncode == 0, err

    async with connect(db_path) as conn:
        history = texts(await SQLiteContextStore(conn, session_id="shared").get_history())

    assert len(history) == 2000
    for name in "ab":
        assert [t for t in history if t.startswith(f"{name}:")] == [
            f"{name}:{i}" for i in range(1000)
        ]
    switches = sum(1 for x, y in itertools.pairwise(history) if x[0] != y[0])
    assert switches >= 2, "the writers did not overlap"
    rows = stored_rows(db_path, "shared")
    assert [position for position, _, _ in rows] == list(range(2000))
    assert session_counters(db_path, "shared")[:3] == (2000, sum(t for _, t, _ in rows), 2000)


def _kill_one(db_path: Path, run: str, rng: random.Random, before_ready: bool) -> set[int]:
    """Start a crasher, SIGKILL it at a random moment, return the indices it acknowledged."""
    child = spawn(CRASHER, db_path, run)
    assert child.stdout is not None
    lines: list[str] = []
    if before_ready:  # die while starting, connecting or migrating
        time.sleep(rng.uniform(0, 0.15))
    else:
        assert child.stdout.readline() == "ready\n"
        lines += (child.stdout.readline() for _ in range(rng.randrange(0, 120)))
        time.sleep(rng.uniform(0, 0.003))
    os.kill(child.pid, signal.SIGKILL)
    out, _ = child.communicate(timeout=10)
    assert child.returncode == -signal.SIGKILL
    return {int(line) for line in [*lines, *out.split()] if line.strip().isdigit()}


async def test_writers_killed_at_random_moments_never_lose_an_acknowledged_message(
    db_path: Path,
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    acknowledged: dict[str, set[int]] = {}
    for round_ in range(22):
        run = f"r{round_}"
        acknowledged[run] = _kill_one(db_path, run, rng, before_ready=round_ % 8 == 0)

    rows = stored_rows(db_path, "crash")
    note = f"(random seed {seed})"
    assert [position for position, _, _ in rows] == list(range(len(rows))), note
    messages = [from_dict(orjson.loads(data)) for _, _, data in rows]  # every row parses
    assert [tokens for _, tokens, _ in rows] == [count_message_tokens(m) for m in messages]
    found: dict[str, list[int]] = {}
    for message in messages:
        run, index = message.text.split(":")
        found.setdefault(run, []).append(int(index))
    for run, acked in acknowledged.items():
        indices = found.get(run, [])
        assert indices == list(range(len(indices))), f"{run} has a hole or disorder {note}"
        assert acked <= set(indices), f"{run} lost acknowledged messages {note}"
    message_count, live_tokens, next_position, tokens_in, tokens_out = session_counters(
        db_path, "crash"
    )
    assert (message_count, next_position) == (len(rows), len(rows)), note
    assert live_tokens == sum(tokens for _, tokens, _ in rows), note
    assert tokens_in == tokens_out, note
    async with connect(db_path) as conn:
        assert await conn.run(lambda db: db.execute("PRAGMA integrity_check").fetchone()) == ("ok",)
        store = SQLiteContextStore(conn, session_id="crash")
        assert await store.get_history() == messages
        assert await store.count() == len(rows)
