"""Compaction against writers in other processes, on SQLite and on PostgreSQL.

The children's summaries list the ids of the messages they cover, so the
tests can check the live history exactly: every message appears once, either
verbatim or named by the one summary, never both, never twice, never not at
all.
"""

from __future__ import annotations

import collections
import sqlite3
from typing import Any

from pygents_ctx import Message, is_bridge, is_summary, summary_text

from .children import Child, Database


def ids(messages: list[Message]) -> list[str]:
    """The ids of the original messages, oldest first; summaries and bridges left out."""
    return [m.text.split()[0] for m in messages if not is_summary(m) and not is_bridge(m)]


def coverage(live: list[Message]) -> list[str]:
    """Every id the live history accounts for: named by its summary, then verbatim."""
    named = summary_text(live[0]).split(",") if live and is_summary(live[0]) else []
    return named + ids(live)


def serve(db: Database, session: str) -> Child:
    child = Child(db, session, "serve")
    child.expect("ready")
    return child


def everything_stored(db: Database, session: str) -> Any:
    """The session's rows as stored and, for SQLite, the whole database's dump."""
    if db.backend == "postgres":
        return db.stored(session)
    with sqlite3.connect(db.target) as conn:
        dump = "\n".join(conn.iterdump())
    conn.close()
    return db.stored(session), dump


async def test_a_write_racing_a_slow_compaction_is_kept(db: Database, session: str) -> None:
    compactor, writer = serve(db, session), serve(db, session)
    originals = [f"m{i}" for i in range(10)]
    assert writer.send(op="append", texts=originals) == {"ok": True}

    compactor.tell('{"op": "compact", "summarizer": "slow", "keep_recent": 2}')
    assert compactor.reply() == {"summarizing": True}
    assert writer.send(op="append", texts=["late0", "late1"]) == {"ok": True}
    assert writer.send(op="append", texts=["late2"]) == {"ok": True}
    compactor.tell()  # the summary comes back
    assert compactor.reply() == {"ok": True}

    async with db.store(session) as store:
        live = await store.get_history()
        everything = await store.get_history(include_archived=True)
    assert summary_text(live[0]) == ",".join(originals[:8])
    assert is_bridge(live[1])  # m8 is a user message: the roles keep alternating
    assert ids(live) == ["m8", "m9", "late0", "late1", "late2"]
    assert ids(everything) == [*originals, "late0", "late1", "late2"]
    compactor.finish()
    writer.finish()


async def test_a_compaction_another_process_overtook_is_not_written(
    db: Database, session: str
) -> None:
    slow, fast = serve(db, session), serve(db, session)
    originals = [f"m{i}" for i in range(10)]
    assert fast.send(op="append", texts=originals) == {"ok": True}

    slow.tell('{"op": "compact", "summarizer": "slow", "keep_recent": 2}')
    assert slow.reply() == {"summarizing": True}
    assert fast.send(op="compact", summarizer="list", keep_recent=4) == {"ok": True}
    assert fast.send(op="append", texts=["late"]) == {"ok": True}
    slow.tell()
    assert slow.reply() == {"ok": False}  # its summary is stale: not written

    async with db.store(session) as store:
        live = await store.get_history()
        everything = await store.get_history(include_archived=True)
    assert summary_text(live[0]) == ",".join(originals[:6])  # the fast one's summary only
    assert coverage(live) == [*originals, "late"]
    assert ids(everything) == [*originals, "late"]
    slow.finish()
    fast.finish()


async def test_a_summarizer_that_raises_leaves_the_stored_history_byte_identical(
    db: Database, session: str
) -> None:
    child = serve(db, session)
    assert child.send(op="append", texts=[f"m{i}" for i in range(10)], run_id="r1") == {"ok": True}
    assert child.send(op="compact", summarizer="list", keep_recent=4) == {"ok": True}
    assert child.send(op="append", texts=["m10", "m11", "m12"]) == {"ok": True}
    before = everything_stored(db, session)

    reply = child.send(op="compact", summarizer="fail", keep_recent=2)

    assert reply["error"] == "SummarizationError"
    assert "ConnectionError('the model is down')" in reply["message"]
    assert everything_stored(db, session) == before
    child.finish()


async def test_two_processes_appending_and_compacting_lose_and_repeat_nothing(
    db: Database, session: str
) -> None:
    each = 120
    # Compact whenever the live history is over ~6 messages: many compactions, many races.
    churners = [Child(db, session, "churn", name, each, 160) for name in "ab"]
    for churner in churners:
        churner.expect("ready")
    for churner in churners:
        churner.tell()
    for churner in churners:
        assert churner.finish() == "done\n"

    async with db.store(session) as store:
        live = await store.get_history()
        everything = await store.get_history(include_archived=True)

    written = [f"{name}:{i}" for name in "ab" for i in range(each)]
    accounted = collections.Counter(coverage(live))
    assert sorted(accounted) == sorted(written)  # nothing lost from what the model will see
    assert set(accounted.values()) == {1}  # nothing summarized twice or kept beside its summary
    assert sum(map(is_summary, live)) == 1
    transcript = ids(everything)
    assert sorted(transcript) == sorted(written)  # the archive holds each message once
    for name in "ab":  # and each process's messages in the order it wrote them
        assert [t for t in transcript if t.startswith(f"{name}:")] == [
            f"{name}:{i}" for i in range(each)
        ]
    assert len(everything) - len(transcript) > 10, "too few compactions to race"
