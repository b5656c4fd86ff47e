"""A worker frozen (SIGSTOP) inside a step past its lease's ttl never writes into the next run.

Two worker processes run `ModelLoop`s (one tool call, then an answer). In each
trial, on a new session, one starts a run and stops inside its tool call or
its model call; the parent freezes it there with SIGSTOP, so it renews its
lease no more. The other worker runs on the same session: it waits for the
lease to run out, takes it over, and finishes its run. Then the parent
resumes the frozen worker (SIGCONT) and lets its call return: the step it was
in would write the tool's result, or the model's reply, into the session. The
store refuses that write (the lease's token is checked in the write's own
transaction), and the run ends with `LeaseLostError`.

After every trial: the frozen worker wrote nothing once it was taken over,
nothing either worker was told was written is missing, and the transcript is
one a provider accepts (each tool call answered once, in the next message).
The workers swap roles from trial to trial and keep running between trials.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import orjson
import pytest

from pygents_ctx import Message, from_dict

from .children import Child, Database

pytestmark = pytest.mark.timeout(120)

TTL = 0.6  # renewed every 0.2 s: a busy machine's hiccups do not cost a holder its lease
TRIALS = {"sqlite": 20, "postgres": 10}
Row = tuple[Any, ...]


def transcript(db: Database, session: str) -> list[Row]:
    """The live messages as stored: `(position, run_id, data)`, in order."""
    return db.query(
        "SELECT position, run_id, data FROM pygents_messages WHERE session_id = ? "
        "ORDER BY position",
        session,
    )


def decoded(rows: list[Row]) -> list[Message]:
    messages = [from_dict(orjson.loads(data)) for _, _, data in rows]
    assert all(isinstance(message, Message) for message in messages)
    return messages  # type: ignore[return-value]


def assert_valid(messages: list[Message], note: str) -> None:
    """Each tool call answered exactly once, by the message right after it; no stray result."""
    answered: set[str] = set()
    for index, message in enumerate(messages):
        results = [result.tool_use_id for result in message.tool_results]
        before = {call.id for call in messages[index - 1].tool_uses} if index else set()
        assert len(results) == len(set(results)), f"a call answered twice in one message {note}"
        assert set(results) <= before, f"a result not right after its call {note}"
        assert not answered & set(results), f"a call answered twice {note}"
        answered.update(results)
        calls = {call.id for call in message.tool_uses}
        if calls:
            following = messages[index + 1] if index + 1 < len(messages) else None
            got = {r.tool_use_id for r in following.tool_results} if following else set()
            assert calls == got, f"calls {calls} answered by {got} in the next message {note}"


def run_once(frozen: Child, successor: Child, db: Database, session: str, where: str) -> None:
    note = f"(trial on {session}, frozen in the {where} call)"
    frozen.tell(orjson.dumps({"session": session, "stall": where}).decode())
    assert frozen.reply() == {"stalled": where}, note
    acknowledged = transcript(db, session)  # every write its run made so far returned
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        reply = successor.send(session=session, stall=None)
        assert reply == {"ok": "the sum is 5"}, f"{reply} {note}"
        assert time.monotonic() - began < TTL + 5, f"the lease took long to change hands {note}"
        finished = transcript(db, session)
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    frozen.tell()  # its call returns: its step would write now
    reply = frozen.reply()
    assert reply["error"] == "LeaseLostError", f"{reply} {note}"

    stored = transcript(db, session)
    assert stored == finished, f"the frozen worker wrote after it was taken over {note}"
    assert stored[: len(acknowledged)] == acknowledged, f"an acknowledged write was lost {note}"
    frozen_runs = {run_id for _, run_id, _ in acknowledged}
    assert len(frozen_runs) == 1, note
    assert [run for _, run, _ in stored if run in frozen_runs] == [*frozen_runs] * len(
        acknowledged
    ), f"the frozen run's messages changed {note}"
    messages = decoded(stored)
    assert_valid(messages, note)
    assert messages[-1].text == "the sum is 5", note


def test_a_frozen_worker_never_writes_into_the_run_that_took_over(
    db: Database, session: str
) -> None:
    workers = [Child(db, session, "stall", TTL) for _ in range(2)]
    try:
        for worker in workers:
            worker.expect("ready")
        for trial in range(TRIALS[db.backend]):
            frozen, successor = workers[trial % 2], workers[1 - trial % 2]
            where = "tool" if trial % 4 < 2 else "model"
            run_once(frozen, successor, db, f"{session}-{trial}", where)
        for worker in workers:
            worker.finish()
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                os.kill(worker.pid, signal.SIGKILL)
                worker.process.communicate(timeout=10)
