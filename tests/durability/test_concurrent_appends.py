"""Two processes appending to one session at once, on SQLite and on PostgreSQL.

Each child appends 500 messages, one call each, starting together and
meeting halfway so their writes overlap. All 1,000 are stored, each child's
in its own order, at unique positions with no gap, and neither child ever
saw an error ("database is locked" included): both exit cleanly with nothing
on stderr.
"""

from __future__ import annotations

import itertools

from .children import Child, Database

EACH = 500


async def test_two_processes_appending_500_messages_each_lose_nothing(
    db: Database, session: str
) -> None:
    writers = [Child(db, session, "append", name, EACH) for name in "ab"]
    for writer in writers:
        writer.expect("ready")
    for writer in writers:
        writer.tell()
    for writer in writers:
        writer.expect("half")
    for writer in writers:
        writer.tell()
    for writer in writers:
        assert writer.finish() == "done\n"

    async with db.store(session) as store:
        history = [m.text.split()[0] for m in await store.get_history()]
        assert await store.count() == 2 * EACH

    assert len(history) == 2 * EACH
    for name in "ab":
        assert [t for t in history if t.startswith(f"{name}:")] == [
            f"{name}:{i}" for i in range(EACH)
        ]
    switches = sum(1 for x, y in itertools.pairwise(history) if x[0] != y[0])
    assert switches >= 2, "the writers did not overlap"
    assert db.positions(session) == list(range(2 * EACH))
    [(count, next_position)] = db.query(
        "SELECT message_count, next_position FROM pygents_sessions WHERE session_id = ?", session
    )
    assert (count, next_position) == (2 * EACH, 2 * EACH)
