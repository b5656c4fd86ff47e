"""Writers killed with SIGKILL at random moments: nothing acknowledged is ever lost.

Each trial starts a child that appends to one session (SQLite, then
PostgreSQL) as fast as it can (single messages, batches, and now and then a
compaction that moves the oldest ten into the archive) and prints each
message's index once the call that wrote it returned. The parent kills it at a
random moment, sometimes before it has even opened the database. Afterwards
every acknowledged message is there, each run's messages are in order with no
hole, the counters agree with the rows, and SQLite finds the file intact.
(PostgreSQL rolls back the transaction of a client that vanished; what is
checked is that nothing of it shows.)

The command line's `import`, killed the same way, leaves the whole file or
nothing.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from pygents_ctx import count_message_tokens, from_dict
from pygents_ctx.cli._transfer import SessionFile
from pygents_ctx.context.stores import StoredMessage

from .children import Child, Database
from .worker import message

# Many processes (or thousands of examples) per test: on a busy machine, sharing its
# cores with the other test workers, one can take minutes; the guard is against hangs.
pytestmark = pytest.mark.timeout(300)

TRIALS = 24
IMPORT_TRIALS = 10


def kill_one(db: Database, session: str, run: str, rng: random.Random, early: bool) -> set[int]:
    """Start a writer, SIGKILL it at a random moment, return the indices it acknowledged."""
    child = Child(db, session, "crash", run)
    acknowledged: list[str] = []
    if early:  # while it starts, connects or migrates
        time.sleep(rng.uniform(0, 0.15))
    else:
        child.expect("ready")
        acknowledged += (child.line() for _ in range(rng.randrange(0, 150)))
        time.sleep(rng.uniform(0, 0.003))
    os.kill(child.pid, signal.SIGKILL)
    out, _ = child.process.communicate(timeout=10)
    assert child.process.returncode == -signal.SIGKILL
    return {int(line) for line in [*acknowledged, *out.split()] if line.isdigit()}


async def test_writers_killed_at_random_moments_never_lose_an_acknowledged_message(
    db: Database, session: str
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    note = f"(random seed {seed})"
    acknowledged = {
        f"r{trial}": kill_one(db, session, f"r{trial}", rng, early=trial % 8 == 0)
        for trial in range(TRIALS)
    }

    _, live_rows, archive_rows = db.stored(session)
    live = [from_dict(orjson.loads(data)) for *_, data in live_rows]  # every row parses
    archived = [from_dict(orjson.loads(data)) for *_, data in archive_rows]
    assert [tokens for _, _, tokens, _, _ in live_rows] == [count_message_tokens(m) for m in live]
    positions = [position for position, *_ in live_rows]
    assert positions == list(range(positions[0], positions[0] + len(positions))), note

    found: dict[str, list[int]] = {}
    for each in archived + live:  # the whole transcript, oldest first
        if each.text != "S":  # not a compaction's summary
            run, index = each.text.split()[0].split(":")
            found.setdefault(run, []).append(int(index))
    for run, acked in acknowledged.items():
        indices = found.get(run, [])
        assert indices == list(range(len(indices))), f"{run} has a hole or disorder {note}"
        assert acked <= set(indices), f"{run} lost acknowledged messages {note}"
    assert sum(map(len, acknowledged.values())) > 500, "the children barely wrote"
    assert archived, "no compaction ran"

    [(message_count, live_tokens, next_position, tokens_in, tokens_out)] = db.query(
        "SELECT message_count, live_tokens, next_position, input_tokens, output_tokens "
        "FROM pygents_sessions WHERE session_id = ?",
        session,
    )
    assert (message_count, next_position) == (len(live), positions[-1] + 1), note
    assert live_tokens == sum(tokens for _, _, tokens, _, _ in live_rows), note
    assert tokens_in == tokens_out, note  # each batch added (1, 1) in one statement
    if db.backend == "sqlite":
        assert db.query("PRAGMA integrity_check") == [("ok",)]
        assert db.query("PRAGMA foreign_key_check") == []
        assert db.unaccounted() == (0, 0, 0), note  # every message's data, and only once
    async with db.store(session) as store:
        assert await store.get_history() == live
        assert await store.get_history(include_archived=True) == archived + live


def test_an_import_killed_at_any_moment_leaves_all_of_the_file_or_none(
    sqlite_db: Database, tmp_path: Path
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    stored = [
        StoredMessage(message(f"m{i}", i), f"r{i % 3}" if i % 4 else None) for i in range(6000)
    ]
    file = tmp_path / "big.json"
    file.write_bytes(SessionFile("big", stored[2000:], stored[:2000], 5, 6).to_json())

    def start(session: str) -> subprocess.Popen[bytes]:
        command = ["--db", sqlite_db.target, "import", str(file), "--session", session]
        return subprocess.Popen([sys.executable, "-m", "pygents_ctx", *command])

    began = time.monotonic()
    assert start("whole").wait(timeout=30) == 0
    duration = time.monotonic() - began
    _, whole_live, whole_archive = sqlite_db.stored("whole")
    for trial in range(IMPORT_TRIALS):
        child = start(f"t{trial}")
        time.sleep(rng.uniform(0.3, 1.0) * duration)  # past the start-up, into the writing
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        _, live, archive = sqlite_db.stored(f"t{trial}")
        if live or archive:  # it finished: all of it, run ids and order included
            assert live == whole_live, f"half an import (seed {seed})"
            assert [row[1:] for row in archive] == [row[1:] for row in whole_archive]
    assert sqlite_db.query("PRAGMA integrity_check") == [("ok",)]
    assert sqlite_db.unaccounted() == (0, 0, 0)
