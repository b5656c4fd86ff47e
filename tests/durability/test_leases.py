"""One writer per session across processes, with holders killed (SIGKILL) at random moments.

Three children contend for one session's lease (SQLite, then PostgreSQL), and
the parent kills one every so often, the current holder half the time, and
starts a new one in its place. Each holder writes only while it holds the
lease, tagging what it writes, so the transcript shows who held it when:

- `hold` children append blocks of messages `TOKEN:PID:i` under the lease:
  every block is one unbroken run of messages, blocks follow in the order of
  their fencing tokens, and a block cut short by a kill is followed by
  another holder's: the dead holder's lease ran out and was taken over.
- `loop` children run a `ModelLoop` (one tool call, then an answer) again and
  again: each run's messages (by run id) are one unbroken stretch, and every
  tool call is answered by the message after it, so the transcript stays
  valid for the provider.

After each kill of the holder, the parent times how long the lease takes to
change hands: about the lease's ttl, never much more.

A holder frozen with SIGSTOP past its ttl loses the lease to another, and
once resumed it stops with `LeaseLostError` before writing again: fencing.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import time

import orjson
import pytest

from pygents_ctx import Message, from_dict
from pygents_ctx.context.stores.postgres import STALLED_WRITE_TIMEOUT

from .children import Child, Database

# Many processes (or thousands of examples) per test: on a busy machine, sharing its
# cores with the other test workers, one can take minutes; the guard is against hangs.
pytestmark = pytest.mark.timeout(300)

TTL = 0.5
BLOCK = 15  # a block takes 1.5 ttl: it is renewed while held
CONTENDERS = 3
KILLS = 6


def decoded(data: bytes) -> Message:
    message = from_dict(orjson.loads(data))
    assert isinstance(message, Message)
    return message


def holder_pid(db: Database, session: str) -> tuple[int, int] | None:
    """`(pid, token)` of the child whose lease the store holds (live or not), if any."""
    rows = db.query("SELECT owner, token FROM pygents_leases WHERE session_id = ?", session)
    if not rows:
        return None
    owner, token = rows[0]
    return int(owner.split(":")[1]), int(token)


def contend(db: Database, session: str, mode: str, *args: object) -> tuple[list[float], str]:
    """Run the contenders, kill one now and then; return the hand-over times after each
    killed holder, and a note with the random seed."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    note = f"(random seed {seed})"
    children = [Child(db, session, mode, TTL, *args) for _ in range(CONTENDERS)]
    handovers: list[float] = []
    try:
        for child in children:
            child.expect("ready")
        for kill in range(KILLS):
            time.sleep(rng.uniform(0.2, 1.2))
            held = holder_pid(db, session)
            by_pid = {child.pid: index for index, child in enumerate(children)}
            if kill % 2 == 0 and held is not None and held[0] in by_pid:
                victim = by_pid[held[0]]  # the holder, at a random moment of its work
            else:
                victim = rng.randrange(len(children))
            os.kill(children[victim].pid, signal.SIGKILL)
            children[victim].process.communicate(timeout=10)
            killed_at = time.monotonic()
            if held is not None and children[victim].pid == held[0]:
                while holder_pid(db, session) == held:  # until another takes it
                    assert time.monotonic() - killed_at < TTL + 5, f"never taken over {note}"
                    time.sleep(0.01)
                handovers.append(time.monotonic() - killed_at)
            children[victim] = Child(db, session, mode, TTL, *args)  # joins once started
        time.sleep(TTL * 2)
    finally:
        for child in children:
            if child.process.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
            child.process.communicate(timeout=10)
    return handovers, note


def test_lease_holders_killed_at_random_never_write_at_once(db: Database, session: str) -> None:
    handovers, note = contend(db, session, "hold", BLOCK)

    rows = db.query(
        "SELECT data FROM pygents_messages WHERE session_id = ? ORDER BY position", session
    )
    marks = [decoded(data).text.split(":") for (data,) in rows] if rows else []
    blocks = [
        (int(token), [(int(pid), int(index)) for _, pid, index in group])
        for token, group in itertools.groupby(marks, key=lambda mark: mark[0])
    ]
    tokens = [token for token, _ in blocks]
    assert tokens == sorted(set(tokens)), f"two holders' blocks interleave {note}"
    for token, block in blocks:
        assert len({pid for pid, _ in block}) == 1, f"token {token} had two writers {note}"
        assert [index for _, index in block] == list(range(len(block))), note
    cut_short = [i for i, (_, block) in enumerate(blocks[:-1]) if len(block) < BLOCK]
    assert cut_short, f"no holder was killed mid-block and followed by another {note}"
    assert len(blocks) >= KILLS, f"the holders barely took turns {note}"
    assert handovers, f"no holder was killed {note}"
    # A dead holder's lease runs out TTL after its last renewal (at most TTL ago), and
    # the waiters poll at most every half second.
    assert max(handovers) < TTL + 1.5, f"hand-overs took {handovers} {note}"


def test_model_loops_killed_at_random_keep_one_valid_transcript(db: Database, session: str) -> None:
    _, note = contend(db, session, "loop")

    rows = db.query(
        "SELECT run_id, data FROM pygents_messages WHERE session_id = ? ORDER BY position",
        session,
    )
    history = [(run_id, decoded(data)) for run_id, data in rows]
    runs = [run_id for run_id, _ in itertools.groupby(run for run, _ in history)]
    assert len(runs) == len(set(runs)), f"two runs' messages interleave {note}"
    assert len(runs) >= KILLS, f"the loops barely ran {note}"
    messages = [message for _, message in history]
    for index, message in enumerate(messages):
        calls = {call.id for call in message.tool_uses}
        if calls:
            following = messages[index + 1] if index + 1 < len(messages) else None
            answered = {r.tool_use_id for r in following.tool_results} if following else set()
            assert calls <= answered or following is None, f"unanswered call {note}"
    prompts = [m for m in messages if m.role == "user" and m.text.endswith("what is 2 + 3?")]
    finished = [m for m in messages if m.text == "the sum is 5"]
    assert len(finished) >= len(prompts) - KILLS - CONTENDERS, note


def test_a_frozen_holder_is_fenced_when_it_wakes(db: Database, session: str) -> None:
    """SIGSTOP the holder past its ttl: another takes over, and the old one, resumed,
    stops with LeaseLostError before writing again."""
    frozen = Child(db, session, "hold", TTL, 10_000)  # holds for as long as it lives
    successor: Child | None = None
    try:
        frozen.expect("ready")
        deadline = time.monotonic() + 10
        while (held := holder_pid(db, session)) is None or held[0] != frozen.pid:
            assert time.monotonic() < deadline, "the first child never took the lease"
            time.sleep(0.01)
        time.sleep(TTL)  # it writes, renewing its lease
        os.kill(frozen.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        successor = Child(db, session, "hold", TTL, 10_000)
        # Frozen inside a write, it holds locks a takeover waits for, until PostgreSQL
        # ends the stalled transaction (connect_postgres's stalled_write_timeout).
        bound = TTL + STALLED_WRITE_TIMEOUT + 10
        while (taken := holder_pid(db, session)) is None or taken[0] != successor.pid:
            assert time.monotonic() - stopped_at < bound, "never taken over"
            time.sleep(0.01)
        time.sleep(TTL)  # the successor writes
        os.kill(frozen.pid, signal.SIGCONT)
        _, err = frozen.process.communicate(timeout=10)
        assert frozen.process.returncode != 0
        # Refused at its next write, or, frozen inside one, its transaction was ended.
        assert "LeaseLostError" in err or "idle-in-transaction timeout" in err, err
    finally:
        for child in (frozen, successor):
            if child is not None and child.process.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
                child.process.communicate(timeout=10)

    rows = db.query(
        "SELECT data FROM pygents_messages WHERE session_id = ? ORDER BY position", session
    )
    writers = [int(decoded(data).text.split(":")[1]) for (data,) in rows]
    assert [pid for pid, _ in itertools.groupby(writers)] == [frozen.pid, successor.pid]
