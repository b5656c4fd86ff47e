"""Writers killed with SIGKILL at random moments: nothing acknowledged is ever lost.

Each trial starts a child that appends to one SQLite session as fast as it
can (single messages, batches, and now and then a compaction that moves the
oldest ten into the archive) and prints each message's index once the call
that wrote it returned. The parent kills it at a random moment, sometimes
before it has even opened the database. Afterwards every acknowledged message
is there, each run's messages are in order with no hole, the counters agree
with the rows, and SQLite finds the file intact.
"""

from __future__ import annotations

import os
import random
import signal
import time

import orjson

from pygents_ctx import count_message_tokens, from_dict

from .children import Child, Database

TRIALS = 24


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
    sqlite_db: Database, session: str
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    note = f"(random seed {seed})"
    acknowledged = {
        f"r{trial}": kill_one(sqlite_db, session, f"r{trial}", rng, early=trial % 8 == 0)
        for trial in range(TRIALS)
    }

    _, live_rows, archive_rows = sqlite_db.stored(session)
    live = [from_dict(orjson.loads(data)) for *_, data in live_rows]  # every row parses
    archived = [from_dict(orjson.loads(data)) for *_, data in archive_rows]
    assert [tokens for _, _, tokens, _, _ in live_rows] == [count_message_tokens(m) for m in live]
    positions = [position for position, *_ in live_rows]
    assert positions == list(range(positions[0], positions[0] + len(positions))), note

    found: dict[str, list[int]] = {}
    for message in archived + live:  # the whole transcript, oldest first
        if message.text != "S":  # not a compaction's summary
            run, index = message.text.split()[0].split(":")
            found.setdefault(run, []).append(int(index))
    for run, acked in acknowledged.items():
        indices = found.get(run, [])
        assert indices == list(range(len(indices))), f"{run} has a hole or disorder {note}"
        assert acked <= set(indices), f"{run} lost acknowledged messages {note}"
    assert sum(map(len, acknowledged.values())) > 500, "the children barely wrote"
    assert archived, "no compaction ran"

    [(message_count, live_tokens, next_position, tokens_in, tokens_out)] = sqlite_db.query(
        "SELECT message_count, live_tokens, next_position, input_tokens, output_tokens "
        "FROM pygents_sessions WHERE session_id = ?",
        session,
    )
    assert (message_count, next_position) == (len(live), positions[-1] + 1), note
    assert live_tokens == sum(tokens for _, _, tokens, _, _ in live_rows), note
    assert tokens_in == tokens_out, note  # each batch added (1, 1) in one statement
    assert sqlite_db.query("PRAGMA integrity_check") == [("ok",)]
    assert sqlite_db.query("PRAGMA foreign_key_check") == []
    async with sqlite_db.store(session) as store:
        assert await store.get_history() == live
        assert await store.get_history(include_archived=True) == archived + live
