"""The SQL of the SQLite store: functions that run on the connection's worker thread.

Each function takes the `sqlite3.Connection` last, so the store binds the other
arguments with `functools.partial` and hands the result to `SQLiteConnection.run`.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple, TypeVar

from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores import _lease_sql as lease_sql
from pygents_ctx.context.stores import _usage_sql as usage_sql
from pygents_ctx.context.stores._checkpoint_sql import save_sqlite as save_checkpoint
from pygents_ctx.context.stores._common import (
    Erasure,
    blob_handles,
    changed_prefix,
    decode,
    decode_rows,
    encode_message,
    now_iso,
    preview_of,
    same_prefix,
    session_not_empty,
)
from pygents_ctx.context.stores._decisions_sql import read_sqlite as get_decisions
from pygents_ctx.context.stores._decisions_sql import record_sqlite as record_decision
from pygents_ctx.context.stores._journal_sql import finish_sqlite as journal_finish
from pygents_ctx.context.stores._journal_sql import read_sqlite as get_journal
from pygents_ctx.context.stores._journal_sql import start_sqlite as journal_start
from pygents_ctx.context.stores._lease_sql import acquire_sqlite as acquire_lease
from pygents_ctx.context.stores._lease_sql import release_sqlite as release_lease
from pygents_ctx.context.stores._lease_sql import renew_sqlite as renew_lease
from pygents_ctx.context.stores._lineage import (
    HIGHEST,
    LOWEST,
    Segment,
    check_at,
    sqlite_segments,
)
from pygents_ctx.context.stores._lineage import shared_sqlite as shared_from
from pygents_ctx.context.stores._paged import sqlite_page as page
from pygents_ctx.context.stores._search_sql import live_ids_sqlite as live_ids
from pygents_ctx.context.stores._sqlite_schema import has_table
from pygents_ctx.context.stores._usage_sql import read_sqlite as get_usage
from pygents_ctx.context.stores._usage_sql import record_sqlite as record_usage
from pygents_ctx.context.stores.base import (
    CheckpointInfo,
    SessionInfo,
    SessionSnapshot,
    StoredCheckpoint,
    StoredMessage,
)
from pygents_ctx.context.tokens import count_message_tokens
from pygents_ctx.context.usage import UsageRecord

__all__ = [
    "ADD_TOKENS",
    "MISSING",
    "SET_TOKENS",
    "Encoded",
    "Read",
    "acquire_lease",
    "append_rows",
    "claim",
    "clear",
    "clear_run",
    "delete_blob",
    "encode",
    "erase",
    "fork",
    "get_checkpoint",
    "get_decisions",
    "get_journal",
    "get_tokens",
    "get_usage",
    "in_transaction",
    "journal_finish",
    "journal_start",
    "list_checkpoints",
    "list_sessions",
    "live_ids",
    "live_rows",
    "page",
    "read_newest",
    "read_since",
    "record_decision",
    "record_usage",
    "release_lease",
    "renew_lease",
    "replace_prefix",
    "restore",
    "rewind",
    "save_checkpoint",
    "scalar",
    "segments",
    "shared_from",
    "snapshot",
    "write",
]

T = TypeVar("T")
Db = sqlite3.Connection
# A message ready to store: (token count, preview or None, orjson bytes).
Encoded = tuple[int, str | None, bytes]

MISSING: Final = -1  # the generation of a session that has no row yet

ENSURE: Final = "INSERT OR IGNORE INTO pygents_sessions (session_id, created_at) VALUES (?, ?)"
# The position comes from the session's counter in the same statement; the
# trigger advances the counter, so concurrent appenders never share a position.
APPEND: Final = """
    INSERT INTO pygents_messages (session_id, position, run_id, tokens, preview, data)
    VALUES (?, (SELECT next_position FROM pygents_sessions WHERE session_id = ?), ?, ?, ?, ?)
"""
INSERT_AT: Final = """
    INSERT INTO pygents_messages (session_id, position, run_id, tokens, preview, data)
    VALUES (?, ?, ?, ?, ?, ?)
"""
LIVE: Final = "SELECT position, tokens, data FROM pygents_messages WHERE session_id = ?"


def in_transaction(db: Db, work: Callable[[Db], T], begin: str = "BEGIN IMMEDIATE") -> T:
    db.execute(begin)
    try:
        result = work(db)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return result


def write(session_id: str, fence: int | None, work: Callable[[Db], T], alone: bool, db: Db) -> T:
    """`work(db)` as one write to the session, under lease token `fence` if not None.

    Fenced, it runs in a `BEGIN IMMEDIATE` transaction that first checks the
    lease (`lease_sql.check_sqlite`): the write lock keeps any taker out until
    the commit. Unfenced, it runs in such a transaction too, unless `alone`
    says it is one statement (its own transaction).

    Raises:
        Refused: The lease passed to another holder or ran out; nothing was written.
    """
    if fence is None and alone:
        return work(db)

    def checked(db: Db) -> T:
        if fence is not None:
            lease_sql.check_sqlite(session_id, fence, db)
        return work(db)

    return in_transaction(db, checked)


class Read(NamedTuple):
    generation: int
    reset: bool  # the cache must be replaced, not extended
    messages: list[Message]
    last_position: int | None
    archived: list[Message]


def read_since(
    session_id: str, generation: int, after: int | None, with_archive: bool, db: Db
) -> Read:
    def read(db: Db) -> tuple[int, list[tuple[int, int, bytes]], list[tuple[int, int, bytes]]]:
        row = db.execute(
            "SELECT generation FROM pygents_sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        current = MISSING if row is None else int(row[0])
        lineage = segments(db, session_id)
        since = None if current != generation else after
        rows = live_rows(db, lineage, after=since)
        archived = archive_rows(db, lineage) if with_archive else []
        return current, rows, archived

    # One read transaction: the generation and the rows come from the same snapshot.
    current, rows, archived = in_transaction(db, read, "BEGIN")
    return Read(
        current,
        current != generation,
        decode_rows(session_id, rows),
        rows[-1][0] if rows else None,
        decode_rows(session_id, archived),
    )


def read_newest(session_id: str, limit: int, offset: int, db: Db) -> list[Message]:
    def read(db: Db) -> list[Any]:
        wanted, rows = limit + offset, list[Any]()
        for source, low, high, _ in reversed(segments(db, session_id)):
            if len(rows) >= wanted:
                break
            rows += db.execute(
                f"{OWN_LIVE} ORDER BY position DESC LIMIT ?",
                (source, low, high, wanted - len(rows)),
            ).fetchall()
        return rows[offset:wanted]

    return decode_rows(session_id, reversed(in_transaction(db, read, "BEGIN")))


# A session's own rows in one range: the piece of a history one lineage segment holds.
OWN_LIVE: Final = (
    "SELECT position, tokens, data FROM pygents_messages "
    "WHERE session_id = ? AND position >= ? AND position < ?"
)


def segments(db: Db, session_id: str) -> list[Segment]:
    """Where a session's history is (see `_lineage.sqlite_segments`)."""
    return sqlite_segments(db, session_id)


def live_rows(
    db: Db,
    lineage: list[Segment],
    *,
    after: int | None = None,
    columns: str = "position, tokens, data",
) -> list[Any]:
    """The live rows of a session (its `segments`) after position `after`, in order."""
    rows: list[Any] = []
    for source, low, high, _ in lineage:
        start = low if after is None else max(low, after + 1)
        if start < high:
            rows += db.execute(
                f"SELECT {columns} FROM pygents_messages WHERE session_id = ? "
                "AND position >= ? AND position < ? ORDER BY position",
                (source, start, high),
            ).fetchall()
    return rows


def archive_rows(db: Db, lineage: list[Segment], *, columns: str = "id, tokens, data") -> list[Any]:
    """The archive rows of a session (its `segments`), in order."""
    rows: list[Any] = []
    for source, _, _, top in lineage:
        rows += db.execute(
            f"SELECT {columns} FROM pygents_archive WHERE session_id = ? AND id <= ? ORDER BY id",
            (source, top),
        ).fetchall()
    return rows


def append_rows(
    session_id: str,
    ensure: str | None,
    run_id: str | None,
    messages: Iterable[Message],
    fence: int | None,
    db: Db,
) -> bool:
    """Append `messages`, encoded one at a time as they are read; whether any were.

    One message alone is one statement (its own transaction); more are one
    transaction, so a message that cannot be encoded, or is not a message,
    leaves nothing added.
    """
    params = ((session_id, session_id, run_id, *encode(message)) for message in messages)
    first = next(params, None)
    if first is None:
        return False
    second = next(params, None)
    if ensure is None and second is None and fence is None:
        try:
            db.execute(APPEND, first)  # one statement: its own transaction
        except sqlite3.IntegrityError:  # the session row is gone: recreate it below
            pass
        else:
            return True
    # Within a transaction the row is made sure of every time: someone may have
    # deleted it since this store last wrote. Under a lease it is there: the
    # lease's row, which the check found, refers to it.
    created_at = ensure or now_iso()
    head = [first] if second is None else [first, second]

    def work(db: Db) -> None:
        if fence is None:
            db.execute(ENSURE, (session_id, created_at))
        db.executemany(APPEND, itertools.chain(head, params))

    write(session_id, fence, work, False, db)
    return True


def scalar(db: Db, sql: str, session_id: str, default: int = 0) -> int:
    row = db.execute(sql, (session_id,)).fetchone()
    return default if row is None else int(row[0])


def first_preview(db: Db, session_id: str, below: int = HIGHEST) -> str:
    """The session's preview: its first user text, archive first (live rows before `below`)."""
    lineage = segments(db, session_id)
    for source, _, _, top in lineage:
        row = db.execute(
            "SELECT preview FROM pygents_archive_rows WHERE session_id = ? AND id <= ? "
            "AND preview IS NOT NULL ORDER BY id LIMIT 1",
            (source, top),
        ).fetchone()
        if row is not None:
            return str(row[0])
    for source, low, high, _ in lineage:
        row = db.execute(
            "SELECT preview FROM pygents_live_rows WHERE session_id = ? AND position >= ? "
            "AND position < ? AND preview IS NOT NULL ORDER BY position LIMIT 1",
            (source, low, min(high, below)),
        ).fetchone()
        if row is not None:
            return str(row[0])
    return ""


def bump(db: Db, session_id: str) -> None:
    db.execute(
        "UPDATE pygents_sessions SET generation = generation + 1 WHERE session_id = ?",
        (session_id,),
    )


def clear(session_id: str, db: Db) -> None:
    detach_readers(db, session_id)
    for table in (
        "pygents_checkpoints",  # their positions start again at 0
        "pygents_forks",
        "pygents_live_rows",
        "pygents_archive_rows",
        "pygents_message_data",
    ):
        db.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
    db.execute(
        "UPDATE pygents_sessions SET message_count = 0, live_tokens = 0, next_position = 0, "
        "running_end = 0, preview = '', generation = generation + 1 WHERE session_id = ?",
        (session_id,),
    )


def clear_run(session_id: str, run_id: str, db: Db) -> None:
    detach_readers(db, session_id)
    detach(db, session_id)
    of_run = "FROM {} WHERE session_id = ? AND run_id = ?"
    live, archived = of_run.format("pygents_live_rows"), of_run.format("pygents_archive_rows")
    first_gone = db.execute(f"SELECT min(position) {live}", (session_id, run_id)).fetchone()[0]
    if first_gone is not None:  # checkpoints after it saw a message that is gone
        checkpoint_sql.drop_sqlite(session_id, first_gone + 1, HIGHEST, db)
    db.execute(
        f"DELETE FROM pygents_message_data WHERE id IN "
        f"(SELECT data_id {live} UNION ALL SELECT data_id {archived})",
        (session_id, run_id, session_id, run_id),
    )
    removed = 0
    for rows in (live, archived):
        removed += db.execute(f"DELETE {rows}", (session_id, run_id)).rowcount
    if removed:
        db.execute(
            "UPDATE pygents_sessions SET preview = ?, generation = generation + 1 "
            "WHERE session_id = ?",
            (first_preview(db, session_id), session_id),
        )


def replace_prefix(
    session_id: str,
    ensure: str | None,
    count: int,
    run_id: str | None,
    rows: list[Encoded],
    expected: list[Message] | None,
    seen_at: int | None,
    db: Db,
) -> None:
    """Archive the oldest `count` live messages and put `rows` in their place.

    `seen_at` is a generation at which the caller read `expected` as the
    session's oldest messages (from its cache), or None: while the session is
    still at that generation only appends happened since, so the prefix is
    unchanged and its rows need not be read and compared.
    """
    db.execute(ENSURE, (session_id, ensure or now_iso()))
    detach_readers(db, session_id)
    detach(db, session_id)
    session = db.execute(
        "SELECT message_count, next_position, generation FROM pygents_sessions "
        "WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    live, next_position, generation = (0, 0, MISSING) if session is None else session
    # The compare-and-swap: inside the write transaction, so nobody changes the
    # prefix between this check and the rewrite.
    if (
        expected is not None
        and seen_at != generation
        and not same_prefix(
            session_id,
            db.execute(f"{LIVE} ORDER BY position LIMIT ?", (session_id, count)).fetchall(),
            expected,
        )
    ):
        raise changed_prefix(session_id, count)
    if count > live:
        raise ValueError(f"count {count} exceeds the {live} messages in the live history")
    first_kept = db.execute(
        "SELECT position FROM pygents_live_rows WHERE session_id = ? "
        "ORDER BY position LIMIT 1 OFFSET ?",
        (session_id, count),
    ).fetchone()
    boundary = next_position if first_kept is None else first_kept[0]
    # Checkpoints before the boundary saw messages that leave the live history; with
    # nothing archived, the one at the boundary saw none of the messages put before it.
    checkpoint_sql.drop_sqlite(session_id, LOWEST, boundary + (count == 0), db)
    if count:
        # Only the small rows move: the messages' data stays where it was written.
        last_archived = scalar(
            db,
            "SELECT coalesce(max(id), 0) FROM pygents_archive_rows WHERE session_id = ?",
            session_id,
        )
        db.execute(
            "INSERT INTO pygents_archive_rows (session_id, id, run_id, tokens, preview, data_id) "
            "SELECT session_id, ? + row_number() OVER (ORDER BY position), run_id, tokens, "
            "preview, data_id FROM pygents_live_rows WHERE session_id = ? AND position < ?",
            (last_archived, session_id, boundary),
        )
        db.execute(
            "DELETE FROM pygents_live_rows WHERE session_id = ? AND position < ?",
            (session_id, boundary),
        )
    # The new messages take the positions just before the first one kept (the
    # archived ones freed them), so everything appended later stays after them.
    start = boundary - len(rows)
    db.executemany(
        INSERT_AT,
        [(session_id, start + index, run_id, *row) for index, row in enumerate(rows)],
    )
    # Their running counts end where the first one kept begins (or where the next
    # append begins), so the running counts stay a running sum.
    if first_kept is None:
        end = scalar(
            db, "SELECT running_end FROM pygents_sessions WHERE session_id = ?", session_id
        )
    else:
        end = scalar_of(
            db,
            "SELECT running - tokens FROM pygents_live_rows WHERE session_id = ? AND position = ?",
            (session_id, boundary),
        )
    updates = []
    for index in reversed(range(len(rows))):
        updates.append((end, session_id, start + index))
        end -= rows[index][0]
    db.executemany(
        "UPDATE pygents_live_rows SET running = ? WHERE session_id = ? AND position = ?", updates
    )
    bump(db, session_id)


def fork(
    session_id: str, new_id: str, created_at: str, at: int | None, owner: str | None, db: Db
) -> None:
    """Make session `new_id` read the oldest `at` live messages (all when None) and the
    archive of `session_id` where they are stored: a session row and a few lineage rows.
    Its owner is `owner`, or the source's when None."""
    _fork(session_id, new_id, created_at, at, db)
    db.execute(
        "UPDATE pygents_sessions SET owner = coalesce(?, "
        "(SELECT owner FROM pygents_sessions WHERE session_id = ?)) WHERE session_id = ?",
        (owner, session_id, new_id),
    )


def _fork(session_id: str, new_id: str, created_at: str, at: int | None, db: Db) -> None:
    if db.execute("SELECT 1 FROM pygents_sessions WHERE session_id = ?", (new_id,)).fetchone():
        raise ValueError(f"session {new_id!r} already exists; fork into a new session_id")
    source = db.execute(
        "SELECT message_count, next_position, live_tokens, preview "
        "FROM pygents_sessions WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    count, next_position, tokens, preview = source or (0, 0, 0, None)
    keep = count if at is None else check_at(at, count, session_id, "fork(at=...)")
    if source is None:
        db.execute(ENSURE, (new_id, created_at))
        return
    lineage = segments(db, session_id)
    whole = no_gaps(db, lineage, count)
    cut = position_of(db, lineage, keep, count, next_position, whole)
    if keep < count:  # sum the smaller side
        tokens = (
            tokens_between(db, lineage, LOWEST, cut, whole)
            if keep <= count - keep
            else tokens - tokens_between(db, lineage, cut, HIGHEST, whole)
        )
        # A whole fork keeps its source's preview, as a copied session would (and as
        # PostgreSQL and memory do); a shorter one reads its own first user text.
        preview = first_preview(db, session_id, cut)
    archive_top = scalar(
        db,
        "SELECT coalesce(max(id), 0) FROM pygents_archive_rows WHERE session_id = ?",
        session_id,
    )
    # The fork's spend starts at 0: each model call's usage counts in the session that made it.
    db.execute(
        "INSERT INTO pygents_sessions (session_id, created_at, message_count, live_tokens, "
        "next_position, preview) VALUES (?, ?, ?, ?, ?, ?)",
        (new_id, created_at, keep, tokens, cut, preview),
    )
    *inherited, (_, own_low, _, _) = lineage
    db.executemany(
        "INSERT INTO pygents_forks (session_id, source_id, live_from, live_upto, archive_upto) "
        "VALUES (?, ?, ?, ?, ?)",
        [
            (new_id, source_id, low, min(high, cut), top)
            for source_id, low, high, top in [*inherited, (session_id, own_low, cut, archive_top)]
        ],
    )


def bounds(db: Db, lineage: list[Segment]) -> tuple[int, int] | None:
    """The first and the last stored position of a session's live history (None: empty)."""
    edges = []
    for order in ("", " DESC"):
        for source, low, high, _ in lineage if order == "" else reversed(lineage):
            row = db.execute(
                "SELECT position FROM pygents_live_rows WHERE session_id = ? AND position >= ? "
                f"AND position < ? ORDER BY position{order} LIMIT 1",
                (source, low, high),
            ).fetchone()
            if row is not None:
                edges.append(int(row[0]))
                break
    return (edges[0], edges[1]) if edges else None


def position_of(
    db: Db, lineage: list[Segment], index: int, count: int, end: int, whole: bool
) -> int:
    """The stored position of live message `index` (`end`, the next position, past the last).

    `whole`: no position is missing between the first and the last (see `no_gaps`).
    """
    if index == count:
        return end
    if whole:
        edges = bounds(db, lineage)
        assert edges is not None  # index < count: there are messages
        return edges[0] + index
    for source, low, high, _ in lineage:
        row = db.execute(
            "SELECT position FROM pygents_live_rows WHERE session_id = ? AND position >= ? "
            "AND position < ? ORDER BY position LIMIT 1 OFFSET ?",
            (source, low, high, index),
        ).fetchone()
        if row is not None:
            return int(row[0])
        index -= scalar_of(
            db,
            "SELECT count(*) FROM pygents_live_rows WHERE session_id = ? "
            "AND position >= ? AND position < ?",
            (source, low, high),
        )
    return end  # not reached: index < count


def no_gaps(db: Db, lineage: list[Segment], count: int) -> bool:
    """Whether the `count` live rows of a session hold every position from its first to its
    last: then message `i` is at the first position plus `i`, and the running token
    counts of any stretch of it add up."""
    edges = bounds(db, lineage)
    return edges is None or edges[1] - edges[0] + 1 == count


def tokens_between(db: Db, lineage: list[Segment], low: int, high: int, whole: bool) -> int:
    """The token count of a session's live rows with `low <= position < high`.

    With `whole` (see `no_gaps`), two lookups per range: the running count of its
    last row, less that of its first, plus the first's tokens; else a sum.
    """
    total = 0
    for source, start, end, _ in lineage:
        start, end = max(start, low), min(end, high)
        if start >= end:
            continue
        if not whole:
            total += scalar_of(
                db,
                "SELECT coalesce(sum(tokens), 0) FROM pygents_live_rows WHERE session_id = ? "
                "AND position >= ? AND position < ?",
                (source, start, end),
            )
            continue
        edge = (
            "SELECT running, tokens FROM pygents_live_rows WHERE session_id = ? "
            "AND position >= ? AND position < ? ORDER BY position{} LIMIT 1"
        )
        first = db.execute(edge.format(""), (source, start, end)).fetchone()
        if first is not None:
            last = db.execute(edge.format(" DESC"), (source, start, end)).fetchone()
            total += last[0] - first[0] + first[1]
    return total


def scalar_of(db: Db, sql: str, params: tuple[Any, ...]) -> int:
    return int(db.execute(sql, params).fetchone()[0])


def detach(db: Db, session_id: str) -> None:
    """Copy what the session inherits into rows of its own, and drop its lineage.

    What it reads stays the same (the same positions and archive ids), so its
    counters stay and its readers' caches stay good: no new generation.
    """
    *inherited, _ = segments(db, session_id)
    if not inherited:
        return
    counters = db.execute(
        "SELECT message_count, live_tokens, next_position, preview FROM pygents_sessions "
        "WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    for source, low, high, top in inherited:
        db.execute(
            "INSERT INTO pygents_archive (session_id, id, run_id, tokens, preview, data) "
            "SELECT ?, id, run_id, tokens, preview, data FROM pygents_archive "
            "WHERE session_id = ? AND id <= ? ORDER BY id",
            (session_id, source, top),
        )
        db.execute(
            "INSERT INTO pygents_messages (session_id, position, run_id, tokens, preview, data) "
            "SELECT ?, position, run_id, tokens, preview, data FROM pygents_messages "
            "WHERE session_id = ? AND position >= ? AND position < ? ORDER BY position",
            (session_id, source, low, high),
        )
    db.execute("DELETE FROM pygents_forks WHERE session_id = ?", (session_id,))
    # The copies' running counts come from the source: one running sum over them all.
    running, updates = 0, []
    for position, tokens in db.execute(
        "SELECT position, tokens FROM pygents_live_rows WHERE session_id = ? ORDER BY position",
        (session_id,),
    ).fetchall():
        running += tokens
        updates.append((running, session_id, position))
    db.executemany(
        "UPDATE pygents_live_rows SET running = ? WHERE session_id = ? AND position = ?", updates
    )
    # The insert triggers counted the copies again: put the counters back.
    db.execute(
        "UPDATE pygents_sessions SET message_count = ?, live_tokens = ?, next_position = ?, "
        "preview = ?, running_end = ? WHERE session_id = ?",
        (*counters, running, session_id),
    )


def detach_readers(db: Db, session_id: str, below: int = LOWEST) -> None:
    """Detach every fork reading the session's live rows at `below` or after (all by default)."""
    readers = db.execute(
        "SELECT session_id FROM pygents_forks WHERE source_id = ? AND live_upto > ?",
        (session_id, below),
    ).fetchall()
    for (reader,) in readers:
        detach(db, reader)


def counters(db: Db, session_id: str) -> tuple[int, int] | None:
    """The session's `(message_count, next_position)`, or None when it has no row."""
    row: tuple[int, int] | None = db.execute(
        "SELECT message_count, next_position FROM pygents_sessions WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return row


def rewind(session_id: str, to: int, db: Db) -> int:
    """Keep the oldest `to` live messages, remove the rest; return how many went."""
    count, next_position = counters(db, session_id) or (0, 0)
    keep = check_at(to, count, session_id, "rewind(to=...)")
    if keep == count:
        return 0
    lineage = segments(db, session_id)
    whole = no_gaps(db, lineage, count)
    cut = position_of(db, lineage, keep, count, next_position, whole)
    detach_readers(db, session_id, cut)
    checkpoint_sql.drop_sqlite(session_id, cut + 1, HIGHEST, db)
    *inherited, _ = lineage
    dropped = tokens_between(db, inherited, cut, HIGHEST, whole)
    # The inherited rows past the cut stop being read; the own ones are deleted (their
    # trigger takes them off the counters).
    db.execute(
        "UPDATE pygents_forks SET live_upto = max(live_from, ?) "
        "WHERE session_id = ? AND live_upto > ?",
        (cut, session_id, cut),
    )
    db.execute(
        "DELETE FROM pygents_message_data WHERE id IN (SELECT data_id FROM pygents_live_rows "
        "WHERE session_id = ? AND position >= ?)",
        (session_id, cut),
    )
    db.execute(
        "DELETE FROM pygents_live_rows WHERE session_id = ? AND position >= ?", (session_id, cut)
    )
    # The next append's running count follows the last row left.
    db.execute(
        "UPDATE pygents_sessions SET message_count = ?, live_tokens = live_tokens - ?, "
        "next_position = ?, generation = generation + 1, running_end = coalesce(("
        "SELECT running FROM pygents_live_rows WHERE session_id = ? "
        "ORDER BY position DESC LIMIT 1), 0) WHERE session_id = ?",
        (keep, dropped, cut, session_id, session_id),
    )
    db.execute(
        "UPDATE pygents_sessions SET preview = ? WHERE session_id = ?",
        (first_preview(db, session_id), session_id),
    )
    return count - keep


def get_checkpoint(session_id: str, agent: str, at: int, db: Db) -> bytes | None:
    """The state of `agent`'s checkpoint at live message `at` (see `_checkpoint_sql`)."""

    def read(db: Db) -> bytes | None:
        session = counters(db, session_id)
        count, next_position = session or (0, 0)
        keep = check_at(at, count, session_id, "get_checkpoint(at=...)")
        if session is None:
            return None
        lineage = segments(db, session_id)
        whole = no_gaps(db, lineage, count)
        high = position_of(db, lineage, keep, count, next_position, whole)
        low = (
            LOWEST if keep == 0 else position_of(db, lineage, keep - 1, count, next_position, whole)
        )
        return checkpoint_sql.read_sqlite(session_id, agent, low, high, db)

    return in_transaction(db, read, "BEGIN")


def list_checkpoints(session_id: str, agent: str | None, db: Db) -> list[CheckpointInfo]:
    """The checkpoints `get_checkpoint` finds (of `agent` alone, if given), read at one moment."""

    def read(db: Db) -> list[CheckpointInfo]:
        rows = checkpoint_sql.rows_sqlite(session_id, agent, db)
        if not rows:
            return []
        lineage = segments(db, session_id)
        count = scalar(
            db, "SELECT message_count FROM pygents_sessions WHERE session_id = ?", session_id
        )
        edges = bounds(db, lineage)
        positions: Iterable[int] = (
            []
            if edges is None  # an empty session: every checkpoint is at message 0
            else range(edges[0], edges[1] + 1)
            if edges[1] - edges[0] + 1 == count
            else [row[0] for row in live_rows(db, lineage, columns="position")]
        )
        return [
            CheckpointInfo(row.agent, at, row.created_at, row.size)
            for at, row in checkpoint_sql.live(rows, positions)
        ]

    return in_transaction(db, read, "BEGIN")


def _row_of(checkpoint: StoredCheckpoint) -> tuple[str, int, str, bytes]:
    return checkpoint.agent, checkpoint.at, checkpoint.created_at, checkpoint.state


def snapshot(session_id: str, db: Db) -> SessionSnapshot:
    def read(db: Db) -> tuple[Any, ...]:
        tokens = db.execute(
            "SELECT input_tokens, output_tokens FROM pygents_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        lineage = segments(db, session_id)
        live = live_rows(db, lineage, columns="position, tokens, data, run_id")
        archived = archive_rows(db, lineage, columns="id, tokens, data, run_id")
        found = checkpoint_sql.live(
            checkpoint_sql.rows_sqlite(session_id, None, db), (row[0] for row in live)
        )
        states = checkpoint_sql.states_sqlite({row.digest for _, row in found}, db)
        checkpoints = [
            StoredCheckpoint(row.agent, at, row.created_at, states[row.digest]) for at, row in found
        ]
        usage = usage_sql.read_sqlite(session_id, None, db)
        return tokens or (0, 0), live, archived, usage, checkpoints

    # One read transaction: one moment, whoever writes meanwhile.
    (input_tokens, output_tokens), live, archived, usage, checkpoints = in_transaction(
        db, read, "BEGIN"
    )
    return SessionSnapshot(
        session_id,
        [StoredMessage(decode(session_id, *row), run_id) for *row, run_id in live],
        [StoredMessage(decode(session_id, *row), run_id) for *row, run_id in archived],
        input_tokens,
        output_tokens,
        usage=usage,
        checkpoints=checkpoints,
    )


def restore(
    session_id: str,
    created_at: str,
    live: list[tuple[str | None, Encoded]],
    archived: list[tuple[str | None, Encoded]],
    tokens: tuple[int, int],
    usage: tuple[UsageRecord, ...],
    checkpoints: tuple[StoredCheckpoint, ...],
    db: Db,
) -> None:
    db.execute(ENSURE, (session_id, created_at))
    held = scalar(db, "SELECT message_count FROM pygents_sessions WHERE session_id = ?", session_id)
    if held or any(
        db.execute(
            "SELECT 1 FROM pygents_archive_rows WHERE session_id = ? AND id <= ? LIMIT 1",
            (source, top),
        ).fetchone()
        for source, _, _, top in segments(db, session_id)
    ):
        raise session_not_empty(session_id)
    detach_readers(db, session_id)
    db.execute("DELETE FROM pygents_forks WHERE session_id = ?", (session_id,))
    db.executemany(
        "INSERT INTO pygents_archive (session_id, run_id, tokens, preview, data) "
        "VALUES (?, ?, ?, ?, ?)",
        [(session_id, run_id, *row) for run_id, row in archived],
    )
    start = scalar(
        db, "SELECT next_position FROM pygents_sessions WHERE session_id = ?", session_id
    )
    db.executemany(APPEND, [(session_id, session_id, run_id, *row) for run_id, row in live])
    usage_sql.insert_sqlite(session_id, usage, db)
    checkpoint_sql.restore_sqlite(session_id, start, (_row_of(c) for c in checkpoints), db)
    db.execute(
        "UPDATE pygents_sessions SET input_tokens = ?, output_tokens = ?, preview = ?, "
        "generation = generation + 1 WHERE session_id = ?",
        (*tokens, first_preview(db, session_id), session_id),
    )


UPSERT_TOKENS: Final = """
    INSERT INTO pygents_sessions (session_id, created_at, input_tokens, output_tokens)
    VALUES (?, ?, ?, ?)
    ON CONFLICT (session_id) DO UPDATE SET {}
"""
SET_TOKENS: Final = UPSERT_TOKENS.format(
    "input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens"
)
ADD_TOKENS: Final = UPSERT_TOKENS.format(
    "input_tokens = input_tokens + excluded.input_tokens, "
    "output_tokens = output_tokens + excluded.output_tokens"
)


def list_sessions(owner: str | None, db: Db) -> list[SessionInfo]:
    columns = (
        "SELECT session_id, message_count, preview, created_at, input_tokens, output_tokens, "
        "owner FROM pygents_sessions"
    )
    if owner is None:
        rows = db.execute(f"{columns} ORDER BY created_at DESC, rowid DESC").fetchall()
    else:  # a range of pygents_sessions_by_owner
        rows = db.execute(
            f"{columns} WHERE owner = ? ORDER BY created_at DESC, rowid DESC", (owner,)
        ).fetchall()
    return [SessionInfo(*row) for row in rows]


def claim(session_id: str, owner: str, db: Db) -> str:
    """Make the session `owner`'s: create its row owned, or take an existing row
    without an owner. Returns the session's owner (another's stays as it was)."""
    row = db.execute(
        "INSERT INTO pygents_sessions (session_id, created_at, owner) VALUES (?, ?, ?) "
        "ON CONFLICT (session_id) DO UPDATE SET owner = coalesce(owner, excluded.owner) "
        "RETURNING owner",
        (session_id, now_iso(), owner),
    ).fetchone()
    return str(row[0])


def get_tokens(session_id: str, db: Db) -> tuple[int, int]:
    row = db.execute(
        "SELECT input_tokens, output_tokens FROM pygents_sessions WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def erase(target: Erasure, db: Db) -> int:
    """Delete the sessions `target` names and all that is theirs; returns how many.

    Runs in the caller's transaction. Forks of them that stay get their own rows
    first; the blobs of offloaded tool results they named go unless a message of
    a session that stays names them too; the search index is merged so no
    deleted word stays in its pages.
    """
    condition, params = target.where("?", "?")
    doomed = [
        row[0]
        for row in db.execute(f"SELECT session_id FROM pygents_sessions WHERE {condition}", params)
    ]
    if not doomed:
        return 0
    gone = set(doomed)
    handles: set[str] = set()
    for session_id in doomed:
        for (reader,) in db.execute(
            "SELECT session_id FROM pygents_forks WHERE source_id = ?", (session_id,)
        ).fetchall():
            if reader not in gone:
                detach(db, reader)
        handles |= blob_handles(
            row[0]
            for row in db.execute(
                "SELECT data FROM pygents_message_data WHERE session_id = ? "
                "AND instr(data, CAST('tool-results/' AS BLOB)) > 0",
                (session_id,),
            )
        )
    # Everything else references the session row: its delete cascades to them
    # (the search index rows go with the message data, by trigger).
    db.executemany("DELETE FROM pygents_sessions WHERE session_id = ?", [(s,) for s in doomed])
    if handles and has_table(db, "pygents_blobs"):
        for handle in sorted(handles):
            still_named = db.execute(
                "SELECT 1 FROM pygents_message_data WHERE instr(data, CAST(? AS BLOB)) > 0 LIMIT 1",
                (handle,),
            ).fetchone()
            if still_named is None:
                delete_blob(handle, db)
    # FTS5 keeps a deleted row's words in its segments until they are merged.
    db.execute("INSERT INTO pygents_search (pygents_search) VALUES ('optimize')")
    return len(doomed)


def delete_blob(name: str, db: Db) -> bool:
    """Delete the blob `name` of `SQLiteBlobStore`'s tables; whether there was one.

    Here, below the memory layer, so that erasing a session can delete its offloaded
    results; the blob store deletes with it too. A blob is its name's row and its
    content's row.
    """
    row = db.execute(
        "DELETE FROM pygents_blobs WHERE name = ? RETURNING content_id", (name,)
    ).fetchone()
    if row is not None:
        db.execute("DELETE FROM pygents_blob_contents WHERE id = ?", (row[0],))
    return row is not None


def encode(message: Message) -> Encoded:
    return count_message_tokens(message), preview_of(message), encode_message(message)
