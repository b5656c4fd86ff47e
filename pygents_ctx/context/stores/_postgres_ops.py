"""The SQL of the PostgreSQL store: coroutines that run with the connection to themselves.

Each function takes the psycopg `AsyncConnection` (autocommit mode) last, so the
store binds the other arguments with `functools.partial` and hands the result
to `PostgresConnection.run`, which runs one call at a time.

Every change locks the session's row first: an append with the upsert that
reserves its positions, the others with their first statement. So no
transaction works on a session that a concurrent one is changing, and
positions are handed out in commit order: a reader never sees a message
without every message before it.
"""

from __future__ import annotations

import itertools
from datetime import UTC
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores import _lease_sql as lease_sql
from pygents_ctx.context.stores import _usage_sql as usage_sql
from pygents_ctx.context.stores._common import (
    APPEND_CHUNK,
    Erasure,
    blob_handles,
    changed_prefix,
    decode,
    decode_rows,
    encode_message,
    preview_of,
    same_prefix,
    session_not_empty,
)
from pygents_ctx.context.stores._decisions_sql import read_postgres as get_decisions
from pygents_ctx.context.stores._decisions_sql import record_postgres as record_decision
from pygents_ctx.context.stores._journal_sql import finish_postgres as journal_finish
from pygents_ctx.context.stores._journal_sql import read_postgres as get_journal
from pygents_ctx.context.stores._journal_sql import start_postgres as journal_start
from pygents_ctx.context.stores._lease_sql import acquire_postgres as acquire_lease
from pygents_ctx.context.stores._lease_sql import release_postgres as release_lease
from pygents_ctx.context.stores._lease_sql import renew_postgres as renew_lease
from pygents_ctx.context.stores._lineage import (
    HIGHEST,
    LOWEST,
    Segment,
    check_at,
    postgres_segments,
)
from pygents_ctx.context.stores._lineage import shared_postgres as shared_from
from pygents_ctx.context.stores._paged import postgres_page as page
from pygents_ctx.context.stores._search_sql import indexed_words
from pygents_ctx.context.stores._search_sql import live_ids_postgres as live_ids
from pygents_ctx.context.stores._usage_sql import read_postgres as get_usage
from pygents_ctx.context.stores._usage_sql import record_postgres as record_usage
from pygents_ctx.context.stores.base import (
    CheckpointInfo,
    SessionInfo,
    SessionSnapshot,
    StoredCheckpoint,
    StoredMessage,
)
from pygents_ctx.context.tokens import count_message_tokens
from pygents_ctx.context.usage import UsageRecord

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Iterator
    from datetime import datetime

    from psycopg import AsyncConnection

__all__ = [
    "ADD_TOKENS",
    "LIVE_TOKENS",
    "MESSAGE_COUNT",
    "MISSING",
    "SET_TOKENS",
    "Batch",
    "Read",
    "Version",
    "acquire_lease",
    "append_rows",
    "batches",
    "claim",
    "clear",
    "clear_run",
    "delete_blob",
    "encode",
    "erase",
    "fenced",
    "fork",
    "get_checkpoint",
    "get_decisions",
    "get_journal",
    "get_tokens",
    "get_usage",
    "journal_finish",
    "journal_start",
    "list_checkpoints",
    "list_sessions",
    "live_ids",
    "own_fork",
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
    "set_tokens",
    "shared_from",
    "snapshot",
]

T = TypeVar("T")
# A streamed append's statements carry at most this much message data each: psycopg
# dumps a bytea array as escaped text, some twelve times the data at its peak.
BATCH_BYTES: Final = 1_000_000
MISSING: Final = (-1, -1)  # the version of a session that has no row yet


class Batch(NamedTuple):
    """Messages ready to store, as the parallel arrays the SQL unnests."""

    tokens: list[int]
    previews: list[bytes | None]
    data: list[bytes]
    words: list[str]  # what `search` indexes (`indexed_words`)

    @property
    def total(self) -> int:
        return sum(self.tokens)

    @property
    def preview(self) -> bytes:
        """The session preview this batch gives a session that has none (b"" if none)."""
        return next((p for p in self.previews if p is not None), b"")


def encode(messages: Iterable[Message]) -> Batch:
    """The batch for `messages`.

    Raises:
        TypeError: A message holds a value JSON cannot hold.
    """
    batch = Batch([], [], [], [])
    for message in messages:
        _add(batch, message)
    return batch


def batches(messages: Iterable[Message]) -> Iterator[Batch]:
    """`messages` encoded into batches of at most `APPEND_CHUNK` messages or
    `BATCH_BYTES` bytes, each made when the one before has been sent."""
    batch = Batch([], [], [], [])
    size = 0
    for message in messages:
        size += _add(batch, message)
        if len(batch.data) >= APPEND_CHUNK or size >= BATCH_BYTES:
            yield batch
            batch, size = Batch([], [], [], []), 0
    if batch.data:
        yield batch


def _add(batch: Batch, message: Message) -> int:
    data = encode_message(message)
    preview = preview_of(message)
    batch.data.append(data)
    batch.words.append(indexed_words(message))
    batch.previews.append(None if preview is None else preview.encode())
    batch.tokens.append(count_message_tokens(message))
    return len(data)


async def fenced(
    session_id: str,
    token: int,
    work: Callable[[AsyncConnection[Any]], Awaitable[T]],
    conn: AsyncConnection[Any],
) -> T:
    """`work` and the check of lease `token` in one transaction: both commit, or neither.

    The check comes last (`lease_sql.check_postgres`), after `work` locked the
    session's row as every write does: the lease row is locked in the same
    order as a takeover locks them.

    Raises:
        Refused: The lease passed to another holder or ran out; `work` was rolled back.
    """
    async with conn.transaction():
        result = await work(conn)
        await lease_sql.check_postgres(session_id, token, conn)
    return result


# -- appends ----------------------------------------------------------------------

# One statement, so its own transaction: the upsert creates or locks the session's
# row and reserves `n` positions; the insert fills them. The lock is held to the
# commit, so a concurrent appender waits and then reserves the positions after.
APPEND: Final = """
    WITH reserved AS (
        INSERT INTO pygents_sessions AS s
            (session_id, next_position, message_count, live_tokens, running_end, preview)
        VALUES (%(session)s, %(n)s, %(n)s, %(total)s, %(total)s, %(preview)s)
        ON CONFLICT (session_id) DO UPDATE SET
            next_position = s.next_position + excluded.next_position,
            message_count = s.message_count + excluded.message_count,
            live_tokens = s.live_tokens + excluded.live_tokens,
            running_end = s.running_end + excluded.running_end,
            preview = CASE WHEN s.preview = '' THEN excluded.preview ELSE s.preview END
        RETURNING s.next_position - %(n)s AS start, s.running_end - %(total)s AS base
    )
    INSERT INTO pygents_messages
        (session_id, position, run_id, tokens, preview, data, running, search)
    SELECT %(session)s, reserved.start + batch.ord - 1, %(run)s,
           batch.tokens, batch.preview, batch.data,
           reserved.base + sum(batch.tokens) OVER (ORDER BY batch.ord),
           to_tsvector('simple', batch.words)
    FROM reserved,
         unnest(%(tokens)s::integer[], %(previews)s::bytea[], %(data)s::bytea[],
                %(words)s::text[])
             WITH ORDINALITY AS batch (tokens, preview, data, words, ord)
"""

# Messages put in at `start`: their running counts end at `end`, where the running
# count of the row after them begins.
INSERT_AT: Final = """
    INSERT INTO pygents_messages
        (session_id, position, run_id, tokens, preview, data, running, search)
    SELECT %(session)s, %(start)s + batch.ord - 1, %(run)s,
           batch.tokens, batch.preview, batch.data,
           %(end)s - coalesce(sum(batch.tokens) OVER (
               ORDER BY batch.ord DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
           ), 0),
           to_tsvector('simple', batch.words)
    FROM unnest(%(tokens)s::integer[], %(previews)s::bytea[], %(data)s::bytea[],
                %(words)s::text[])
        WITH ORDINALITY AS batch (tokens, preview, data, words, ord)
"""


def _batch_params(session_id: str, run_id: str | None, batch: Batch) -> dict[str, Any]:
    return {
        "session": session_id,
        "run": run_id,
        "n": len(batch.data),
        "total": batch.total,
        "preview": batch.preview,
        "tokens": batch.tokens,
        "previews": batch.previews,
        "data": batch.data,
        "words": batch.words,
    }


async def append_rows(
    session_id: str,
    run_id: str | None,
    first: Batch,
    rest: Iterator[Batch],
    conn: AsyncConnection[Any],
) -> None:
    """Append `first`, then each batch of `rest` as it is made: one transaction.

    A single batch is one statement (its own transaction).
    """
    second = next(rest, None)
    if second is None:
        await conn.execute(APPEND, _batch_params(session_id, run_id, first))
        return
    async with conn.transaction():
        for batch in itertools.chain((first, second), rest):
            await conn.execute(APPEND, _batch_params(session_id, run_id, batch))


# -- reads ------------------------------------------------------------------------

# The ranges of other sessions' rows a fork reads (see `_lineage`), oldest first, then
# the session's own rows: a CTE for the statements that read a whole history at once.
# Positions of the ranges do not overlap, so ordering by position orders the history.
LINEAGE: Final = f"""
    SELECT source_id, live_from, live_upto, archive_upto FROM pygents_forks
    WHERE session_id = %(session)s
    UNION ALL
    SELECT %(session)s, coalesce(max(live_upto), {LOWEST}), {HIGHEST}, {HIGHEST}
    FROM pygents_forks WHERE session_id = %(session)s
"""

# One statement, so one snapshot: the session's version, the live rows the reader
# lacks (all of them when its version is out of date) and, if asked, the archive.
# The rows to read start after one position, so the index gives them directly.
READ_SINCE: Final = """
    WITH session AS (
        SELECT id, generation FROM pygents_sessions WHERE session_id = %(session)s
    ), since AS (
        SELECT CASE
            WHEN %(after)s::bigint IS NOT NULL AND EXISTS (
                SELECT 1 FROM session
                WHERE id = %(id)s::bigint AND generation = %(generation)s::bigint
            ) THEN %(after)s::bigint
            ELSE -9223372036854775807
        END AS position
    ), lineage AS (LINEAGE)
    SELECT 0 AS part, id AS ord, generation AS tokens, NULL::bytea AS data FROM session
    UNION ALL
    SELECT 1, m.position, m.tokens, m.data FROM lineage AS l JOIN pygents_messages AS m
    ON m.session_id = l.source_id AND m.position >= l.live_from AND m.position < l.live_upto
    WHERE m.position > (SELECT position FROM since)
    UNION ALL
    SELECT 2, a.id, a.tokens, a.data FROM lineage AS l JOIN pygents_archive AS a
    ON a.session_id = l.source_id AND a.id <= l.archive_upto
    WHERE %(archive)s
    ORDER BY part, ord
""".replace("LINEAGE", LINEAGE)

# A session's version: (its row's id, its generation). The id tells a session
# deleted and created again apart from the one a reader cached.
Version = tuple[int, int]


class Read(NamedTuple):
    generation: Version
    reset: bool  # the cache must be replaced, not extended
    messages: list[Message]
    last_position: int | None
    archived: list[Message]


async def read_since(
    session_id: str,
    generation: Version,
    after: int | None,
    with_archive: bool,
    conn: AsyncConnection[Any],
) -> Read:
    params = {
        "session": session_id,
        "after": after,
        "id": generation[0],
        "generation": generation[1],
        "archive": with_archive,
    }
    # Binary results: bytea comes as its bytes, not hex text twice its size to decode.
    cursor = await conn.execute(READ_SINCE, params, binary=True)
    current: Version = MISSING
    live: list[tuple[int, int, bytes]] = []
    archived: list[tuple[int, int, bytes]] = []
    for row in await cursor.fetchall():
        if row[0] == 1:
            live.append(row[1:])
        elif row[0] == 0:
            current = (row[1], row[2])
        else:
            archived.append(row[1:])
    return Read(
        current,
        current != generation,
        decode_rows(session_id, live),
        live[-1][0] if live else None,
        decode_rows(session_id, archived),
    )


async def read_newest(
    session_id: str, limit: int, offset: int, conn: AsyncConnection[Any]
) -> list[Message]:
    wanted, rows = limit + offset, list[Any]()
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        for source, low, high, _ in reversed(await postgres_segments(conn, session_id)):
            if len(rows) >= wanted:
                break
            cursor = await conn.execute(
                "SELECT position, tokens, data FROM pygents_messages WHERE session_id = %s "
                "AND position >= %s AND position < %s ORDER BY position DESC LIMIT %s",
                (source, low, high, wanted - len(rows)),
                binary=True,
            )
            rows += await cursor.fetchall()
    return decode_rows(session_id, reversed(rows[offset:wanted]))


async def _oldest_rows(
    session_id: str, count: int, conn: AsyncConnection[Any]
) -> list[tuple[int, int, bytes]]:
    cursor = await conn.execute(
        "SELECT position, tokens, data FROM pygents_messages WHERE session_id = %s "
        "ORDER BY position LIMIT %s",
        (session_id, count),
        binary=True,
    )
    return await cursor.fetchall()


MESSAGE_COUNT: Final = "SELECT message_count FROM pygents_sessions WHERE session_id = %s"
LIVE_TOKENS: Final = "SELECT live_tokens FROM pygents_sessions WHERE session_id = %s"


async def scalar(sql: str, session_id: str, conn: AsyncConnection[Any]) -> int:
    """The one number `sql` (`MESSAGE_COUNT` or `LIVE_TOKENS`) reads; 0 for no session."""
    cursor = await conn.execute(sql, (session_id,))
    row = await cursor.fetchone()
    return 0 if row is None else int(row[0])


# -- clear, clear_run, replace_prefix, fork -----------------------------------------


async def clear(session_id: str, conn: AsyncConnection[Any]) -> None:
    async with conn.transaction():
        cursor = await conn.execute(
            "UPDATE pygents_sessions SET message_count = 0, live_tokens = 0, next_position = 0, "
            "running_end = 0, preview = '', generation = generation + 1 WHERE session_id = %s",
            (session_id,),
        )
        if cursor.rowcount:  # no row, no messages (they reference it)
            await detach_readers(session_id, LOWEST, conn)
            # The checkpoints too: positions start again at 0.
            for table in (
                "pygents_checkpoints",
                "pygents_forks",
                "pygents_messages",
                "pygents_archive",
            ):
                await conn.execute(f"DELETE FROM {table} WHERE session_id = %s", (session_id,))


async def _bump_generation(
    session_id: str, returning: str, conn: AsyncConnection[Any]
) -> tuple[Any, ...]:
    """Create or lock the session's row (no other writer until the commit) and bump its
    generation, which tells every cached reader to read afresh; the row's `returning`
    columns (`s` names the row)."""
    cursor = await conn.execute(
        "INSERT INTO pygents_sessions AS s (session_id) VALUES (%s) "
        "ON CONFLICT (session_id) DO UPDATE SET generation = s.generation + 1 "
        f"RETURNING {returning}",
        (session_id,),
    )
    row = await cursor.fetchone()
    assert row is not None  # an upsert with RETURNING always gives a row
    return tuple(row)


async def _lock(session_id: str, conn: AsyncConnection[Any]) -> bool:
    cursor = await conn.execute(
        "SELECT 1 FROM pygents_sessions WHERE session_id = %s FOR UPDATE", (session_id,)
    )
    return await cursor.fetchone() is not None


FIRST_PREVIEW: Final = """
    coalesce(
        (SELECT preview FROM pygents_archive
         WHERE session_id = %(session)s AND preview IS NOT NULL ORDER BY id LIMIT 1),
        (SELECT preview FROM pygents_messages
         WHERE session_id = %(session)s AND preview IS NOT NULL ORDER BY position LIMIT 1),
        ''
    )
"""


async def clear_run(session_id: str, run_id: str, conn: AsyncConnection[Any]) -> None:
    params = {"session": session_id, "run": run_id}
    async with conn.transaction():
        if not await _lock(session_id, conn):
            return
        await detach_readers(session_id, LOWEST, conn)
        await detach(session_id, conn)
        cursor = await conn.execute(
            "WITH gone AS (DELETE FROM pygents_messages "
            "WHERE session_id = %(session)s AND run_id = %(run)s RETURNING tokens, position) "
            "SELECT count(*), coalesce(sum(tokens), 0), min(position) FROM gone",
            params,
        )
        live = await cursor.fetchone()
        assert live is not None  # an aggregate always gives a row
        if live[2] is not None:  # checkpoints after it saw a message that is gone
            await checkpoint_sql.drop_postgres(session_id, live[2] + 1, HIGHEST, conn)
        archived = await conn.execute(
            "DELETE FROM pygents_archive WHERE session_id = %(session)s AND run_id = %(run)s",
            params,
        )
        if live[0] or archived.rowcount:
            await conn.execute(
                "UPDATE pygents_sessions SET message_count = message_count - %(count)s, "
                "live_tokens = live_tokens - %(tokens)s, generation = generation + 1, "
                f"preview = {FIRST_PREVIEW} WHERE session_id = %(session)s",
                {**params, "count": live[0], "tokens": live[1]},
            )


async def replace_prefix(
    session_id: str,
    count: int,
    run_id: str | None,
    batch: Batch,
    expected: list[Message] | None,
    conn: AsyncConnection[Any],
) -> None:
    params = _batch_params(session_id, run_id, batch)
    async with conn.transaction():
        live, next_position = await _bump_generation(
            session_id, "message_count, next_position", conn
        )
        await detach_readers(session_id, LOWEST, conn)
        await detach(session_id, conn)
        # The compare-and-swap: the row lock taken above keeps every other writer
        # of this session out until the commit, so the prefix cannot change after it.
        if expected is not None and not same_prefix(
            session_id, await _oldest_rows(session_id, count, conn), expected
        ):
            raise changed_prefix(session_id, count)
        if count > live:
            raise ValueError(f"count {count} exceeds the {live} messages in the live history")
        cursor = await conn.execute(
            "SELECT position FROM pygents_messages WHERE session_id = %s "
            "ORDER BY position LIMIT 1 OFFSET %s",
            (session_id, count),
        )
        first_kept = await cursor.fetchone()
        boundary = next_position if first_kept is None else first_kept[0]
        # Checkpoints before the boundary saw messages that leave the live history; with
        # nothing archived, the one at the boundary saw none of the messages put before it.
        await checkpoint_sql.drop_postgres(session_id, LOWEST, boundary + (count == 0), conn)
        # The running counts of what goes in end where the first one kept begins (or
        # where the next append will), so they stay a running sum.
        end = await _one(
            "SELECT coalesce((SELECT running - tokens FROM pygents_messages "
            "WHERE session_id = %s AND position = %s), "
            "(SELECT running_end FROM pygents_sessions WHERE session_id = %s))",
            (session_id, boundary, session_id),
            conn,
        )
        moved_tokens = 0
        if count:
            cursor = await conn.execute(
                "WITH moved AS (DELETE FROM pygents_messages "
                "  WHERE session_id = %(session)s AND position < %(boundary)s "
                "  RETURNING position, run_id, tokens, preview, data, message_id, search), "
                "archived AS (INSERT INTO pygents_archive "
                "  (session_id, run_id, tokens, preview, data, message_id, search) "
                "  SELECT %(session)s, run_id, tokens, preview, data, message_id, search "
                "  FROM moved "
                "  ORDER BY position RETURNING tokens) "
                "SELECT coalesce(sum(tokens), 0) FROM archived",
                {"session": session_id, "boundary": boundary},
            )
            moved = await cursor.fetchone()
            assert moved is not None
            moved_tokens = moved[0]
        # The new messages take the positions just before the first one kept (the
        # archived ones freed them), so everything appended later stays after them.
        if batch.data:
            await conn.execute(
                INSERT_AT, {**params, "start": boundary - len(batch.data), "end": end}
            )
        await conn.execute(
            "UPDATE pygents_sessions SET message_count = message_count - %(count)s + %(n)s, "
            "live_tokens = live_tokens - %(moved)s + %(total)s, "
            "preview = CASE WHEN preview = '' THEN %(preview)s ELSE preview END "
            "WHERE session_id = %(session)s",
            {**params, "count": count, "moved": moved_tokens},
        )


# Share locks on the session and every session it reads, oldest first as every
# writer takes them: none of them changes its rows until the fork is committed.
# The session's own row comes last, with the top of its archive.
LOCK_SOURCES: Final = """
    SELECT s.session_id, s.message_count, s.next_position, s.live_tokens, s.preview,
           (SELECT coalesce(max(id), 0) FROM pygents_archive WHERE session_id = %(session)s)
    FROM pygents_sessions AS s
    WHERE s.session_id = %(session)s OR s.session_id IN (
        SELECT source_id FROM pygents_forks WHERE session_id = %(session)s
    )
    ORDER BY (
        SELECT live_from FROM pygents_forks
        WHERE session_id = %(session)s AND source_id = s.session_id
    ) NULLS LAST
    FOR SHARE OF s
"""

# The fork's session row and its lineage rows, in one statement; how many rows it made.
# Its spend starts at 0: each model call's usage counts in the session that made it.
MAKE_FORK: Final = """
    WITH made AS (
        INSERT INTO pygents_sessions (session_id, message_count, live_tokens, next_position,
            preview)
        VALUES (%(id)s, %(count)s, %(tokens)s, %(cut)s, %(preview)s)
        ON CONFLICT (session_id) DO NOTHING RETURNING session_id
    ), lineage AS (
        INSERT INTO pygents_forks (session_id, source_id, live_from, live_upto, archive_upto)
        SELECT made.session_id, l.source_id, l.live_from, l.live_upto, l.archive_upto
        FROM made, unnest(%(sources)s::text[], %(froms)s::bigint[], %(uptos)s::bigint[],
                          %(tops)s::bigint[]) AS l (source_id, live_from, live_upto, archive_upto)
    )
    SELECT count(*) FROM made
"""


async def fork(session_id: str, new_id: str, at: int | None, conn: AsyncConnection[Any]) -> None:
    """Make session `new_id` read the oldest `at` live messages (all when None) and the
    archive of `session_id` where they are stored: a session row and a few lineage rows.

    Call it in a transaction.
    """
    while True:
        cursor = await conn.execute(LOCK_SOURCES, {"session": session_id})
        locked = await cursor.fetchall()
        lineage = await postgres_segments(conn, session_id)
        # The session's lineage changed while this waited for a lock: lock again.
        if {source for source, *_ in lineage[:-1]} <= {row[0] for row in locked}:
            break
    source = locked[-1][1:] if locked and locked[-1][0] == session_id else None
    count, next_position, tokens, preview, top = source or (0, 0, 0, b"", 0)
    keep = count if at is None else check_at(at, count, session_id, "fork(at=...)")
    edges = None if keep == count else await bounds(lineage, conn)
    whole = edges is not None and edges[1] - edges[0] + 1 == count
    cut = await position_of(lineage, keep, count, next_position, edges, conn)
    if keep < count:  # sum the smaller side
        tokens = (
            await tokens_between(lineage, LOWEST, cut, whole, conn)
            if keep <= count - keep
            else tokens - await tokens_between(lineage, cut, HIGHEST, whole, conn)
        )
        if preview:
            preview = await first_preview(lineage, cut, conn)
    reads = []  # what the fork reads of each session: (source, from, up to, archive top)
    if source is not None:
        *inherited, (_, own_low, _, _) = lineage
        reads = [
            (name, low, min(high, cut), last)
            for name, low, high, last in [*inherited, (session_id, own_low, cut, top)]
        ]
    made = await _one(
        MAKE_FORK,
        {
            "id": new_id,
            "count": keep,
            "tokens": tokens,
            "cut": cut,
            "preview": preview,
            "sources": [read[0] for read in reads],
            "froms": [read[1] for read in reads],
            "uptos": [read[2] for read in reads],
            "tops": [read[3] for read in reads],
        },
        conn,
    )
    if not made:
        raise ValueError(f"session {new_id!r} already exists; fork into a new session_id")


async def _one(
    sql: str, params: tuple[Any, ...] | dict[str, Any], conn: AsyncConnection[Any]
) -> Any:
    cursor = await conn.execute(sql, params)
    row = await cursor.fetchone()
    return None if row is None else row[0]


async def bounds(lineage: list[Segment], conn: AsyncConnection[Any]) -> tuple[int, int] | None:
    """The first and the last stored position of a session's live history (None: empty)."""
    edges = []
    for order, sources in (("", lineage), (" DESC", lineage[::-1])):
        for source, low, high, _ in sources:
            found = await _one(
                "SELECT position FROM pygents_messages WHERE session_id = %s AND position >= %s "
                f"AND position < %s ORDER BY position{order} LIMIT 1",
                (source, low, high),
                conn,
            )
            if found is not None:
                edges.append(int(found))
                break
    return (edges[0], edges[1]) if edges else None


async def position_of(
    lineage: list[Segment],
    index: int,
    count: int,
    end: int,
    edges: tuple[int, int] | None,
    conn: AsyncConnection[Any],
) -> int:
    """The stored position of live message `index` (`end`, the next position, past the last).

    `edges`: the session's `bounds`.
    """
    if index == count:
        return end
    if edges is not None and edges[1] - edges[0] + 1 == count:  # no gaps: no scan
        return edges[0] + index
    for source, low, high, _ in lineage:
        found = await _one(
            "SELECT position FROM pygents_messages WHERE session_id = %s AND position >= %s "
            "AND position < %s ORDER BY position LIMIT 1 OFFSET %s",
            (source, low, high, index),
            conn,
        )
        if found is not None:
            return int(found)
        index -= int(
            await _one(
                "SELECT count(*) FROM pygents_messages WHERE session_id = %s "
                "AND position >= %s AND position < %s",
                (source, low, high),
                conn,
            )
        )
    return end  # not reached: index < count


async def tokens_between(
    lineage: list[Segment], low: int, high: int, whole: bool, conn: AsyncConnection[Any]
) -> int:
    """The token count of a session's live rows with `low <= position < high`.

    With `whole` (no position missing between the session's first and last), two
    lookups per range: the running count of its last row, less that of its first,
    plus the first's tokens; else a sum.
    """
    total = 0
    for source, start, end, _ in lineage:
        start, end = max(start, low), min(end, high)
        if start >= end:
            continue
        if whole:
            found = await _one(
                "SELECT (SELECT running FROM pygents_messages WHERE session_id = %(s)s "
                "AND position >= %(a)s AND position < %(b)s ORDER BY position DESC LIMIT 1) - "
                "(SELECT running - tokens FROM pygents_messages WHERE session_id = %(s)s "
                "AND position >= %(a)s AND position < %(b)s ORDER BY position LIMIT 1)",
                {"s": source, "a": start, "b": end},
                conn,
            )
        else:
            found = await _one(
                "SELECT sum(tokens) FROM pygents_messages "
                "WHERE session_id = %s AND position >= %s AND position < %s",
                (source, start, end),
                conn,
            )
        total += int(found or 0)
    return total


async def first_preview(lineage: list[Segment], below: int, conn: AsyncConnection[Any]) -> bytes:
    """A session's preview: its first user text, archive first (live rows before `below`)."""
    for source, _, _, top in lineage:
        found = await _one(
            "SELECT preview FROM pygents_archive WHERE session_id = %s AND id <= %s "
            "AND preview IS NOT NULL ORDER BY id LIMIT 1",
            (source, top),
            conn,
        )
        if found is not None:
            return bytes(found)
    for source, low, high, _ in lineage:
        found = await _one(
            "SELECT preview FROM pygents_messages WHERE session_id = %s AND position >= %s "
            "AND position < %s AND preview IS NOT NULL ORDER BY position LIMIT 1",
            (source, low, min(high, below)),
            conn,
        )
        if found is not None:
            return bytes(found)
    return b""


async def detach(session_id: str, conn: AsyncConnection[Any]) -> None:
    """Copy what the session inherits into rows of its own, and drop its lineage.

    Call it in a transaction holding the session's row lock. What it reads stays
    the same (the positions, and the archive's order), and its counters with it.
    """
    *inherited, _ = await postgres_segments(conn, session_id)
    for source, low, high, top in inherited:
        await conn.execute(
            "INSERT INTO pygents_archive "
            "(session_id, run_id, tokens, preview, data, message_id, search) "
            "SELECT %s, run_id, tokens, preview, data, message_id, search FROM pygents_archive "
            "WHERE session_id = %s AND id <= %s ORDER BY id",
            (session_id, source, top),
        )
        await conn.execute(
            "INSERT INTO pygents_messages "
            "(session_id, position, run_id, tokens, preview, data, message_id, search) "
            "SELECT %s, position, run_id, tokens, preview, data, message_id, search "
            "FROM pygents_messages "
            "WHERE session_id = %s AND position >= %s AND position < %s",
            (session_id, source, low, high),
        )
    if not inherited:
        return
    await conn.execute("DELETE FROM pygents_forks WHERE session_id = %s", (session_id,))
    # The copies' running counts come from the source: one running sum over them all.
    await conn.execute(
        "UPDATE pygents_messages AS m SET running = w.total FROM (SELECT position, "
        "sum(tokens) OVER (ORDER BY position) AS total FROM pygents_messages "
        "WHERE session_id = %(session)s) AS w "
        "WHERE m.session_id = %(session)s AND m.position = w.position",
        {"session": session_id},
    )
    await conn.execute(RUNNING_END, {"session": session_id})


# The next append's running count follows the session's last row.
RUNNING_END: Final = """
    UPDATE pygents_sessions SET running_end = coalesce((
        SELECT running FROM pygents_messages WHERE session_id = %(session)s
        ORDER BY position DESC LIMIT 1
    ), 0) WHERE session_id = %(session)s
"""


async def detach_readers(session_id: str, below: int, conn: AsyncConnection[Any]) -> None:
    """Detach every fork reading the session's live rows at `below` or after.

    Call it in a transaction holding the session's row lock; each reader's row is
    locked in turn (a source before its forks, the order every writer keeps).
    """
    cursor = await conn.execute(
        "SELECT s.session_id FROM pygents_forks AS f JOIN pygents_sessions AS s "
        "ON s.session_id = f.session_id WHERE f.source_id = %s AND f.live_upto > %s "
        "ORDER BY s.session_id FOR UPDATE OF s",
        (session_id, below),
    )
    for (reader,) in await cursor.fetchall():
        await detach(reader, conn)


async def rewind(session_id: str, to: int, conn: AsyncConnection[Any]) -> int:
    """Keep the oldest `to` live messages, remove the rest; return how many went."""
    async with conn.transaction():
        cursor = await conn.execute(
            "SELECT message_count, next_position FROM pygents_sessions WHERE session_id = %s "
            "FOR UPDATE",
            (session_id,),
        )
        count, next_position = await cursor.fetchone() or (0, 0)
        keep = check_at(to, count, session_id, "rewind(to=...)")
        if keep == count:
            return 0
        lineage = await postgres_segments(conn, session_id)
        edges = await bounds(lineage, conn)
        whole = edges is not None and edges[1] - edges[0] + 1 == count
        cut = await position_of(lineage, keep, count, next_position, edges, conn)
        await detach_readers(session_id, cut, conn)
        await checkpoint_sql.drop_postgres(session_id, cut + 1, HIGHEST, conn)
        dropped = await tokens_between(lineage, cut, HIGHEST, whole, conn)
        await conn.execute(
            "UPDATE pygents_forks SET live_upto = greatest(live_from, %s) "
            "WHERE session_id = %s AND live_upto > %s",
            (cut, session_id, cut),
        )
        await conn.execute(
            "DELETE FROM pygents_messages WHERE session_id = %s AND position >= %s",
            (session_id, cut),
        )
        await conn.execute(RUNNING_END, {"session": session_id})
        await conn.execute(
            "UPDATE pygents_sessions SET message_count = %s, live_tokens = live_tokens - %s, "
            "next_position = %s, generation = generation + 1, preview = %s "
            "WHERE session_id = %s",
            (
                keep,
                dropped,
                cut,
                await first_preview(await postgres_segments(conn, session_id), HIGHEST, conn),
                session_id,
            ),
        )
    return count - keep


# -- checkpoints (see `_checkpoint_sql`) --------------------------------------------


async def save_checkpoint(
    session_id: str, agent: str, state: bytes, conn: AsyncConnection[Any]
) -> int:
    """Keep `state` as `agent`'s checkpoint at the end of the live history, in one
    transaction; the number of live messages it was taken at."""
    async with conn.transaction():
        return await checkpoint_sql.save_postgres(session_id, agent, state, conn)


async def get_checkpoint(
    session_id: str, agent: str, at: int, conn: AsyncConnection[Any]
) -> bytes | None:
    """The state of `agent`'s checkpoint at live message `at`, read at one moment."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        cursor = await conn.execute(
            "SELECT message_count, next_position FROM pygents_sessions WHERE session_id = %s",
            (session_id,),
        )
        session = await cursor.fetchone()
        count, next_position = session or (0, 0)
        keep = check_at(at, count, session_id, "get_checkpoint(at=...)")
        if session is None:
            return None
        lineage = await postgres_segments(conn, session_id)
        edges = await bounds(lineage, conn)
        high = await position_of(lineage, keep, count, next_position, edges, conn)
        low = (
            LOWEST
            if keep == 0
            else await position_of(lineage, keep - 1, count, next_position, edges, conn)
        )
        return await checkpoint_sql.read_postgres(session_id, agent, low, high, conn)


async def list_checkpoints(
    session_id: str, agent: str | None, conn: AsyncConnection[Any]
) -> list[CheckpointInfo]:
    """The checkpoints `get_checkpoint` finds (of `agent` alone, if given), read at one moment."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        rows = await checkpoint_sql.rows_postgres(session_id, agent, conn)
        if not rows:
            return []
        count = await _one(
            "SELECT message_count FROM pygents_sessions WHERE session_id = %s", (session_id,), conn
        )
        edges = await bounds(await postgres_segments(conn, session_id), conn)
        positions: Iterable[int]
        if edges is None:  # an empty session: every checkpoint is at message 0
            positions = []
        elif edges[1] - edges[0] + 1 == count:
            positions = range(edges[0], edges[1] + 1)
        else:
            cursor = await conn.execute(LIVE_POSITIONS, {"session": session_id})
            positions = [int(position) for (position,) in await cursor.fetchall()]
    return [
        CheckpointInfo(row.agent, at, row.created_at, row.size)
        for at, row in checkpoint_sql.live(rows, positions)
    ]


LIVE_POSITIONS: Final = f"""
    WITH lineage AS ({LINEAGE})
    SELECT m.position FROM lineage AS l JOIN pygents_messages AS m
    ON m.session_id = l.source_id AND m.position >= l.live_from AND m.position < l.live_upto
    ORDER BY m.position
"""


# -- snapshot and restore ---------------------------------------------------------

# The token usage, the archive and the live history in one statement; `snapshot` reads
# the usage records beside it in the same repeatable-read transaction (one moment).
SNAPSHOT: Final = f"""
    WITH lineage AS ({LINEAGE})
    SELECT 0 AS part, 0 AS ord, input_tokens AS tokens, NULL::bytea AS data,
           NULL::text AS run_id, output_tokens AS extra
    FROM pygents_sessions WHERE session_id = %(session)s
    UNION ALL
    SELECT 1, a.id, a.tokens, a.data, a.run_id, 0 FROM lineage AS l JOIN pygents_archive AS a
    ON a.session_id = l.source_id AND a.id <= l.archive_upto
    UNION ALL
    SELECT 2, m.position, m.tokens, m.data, m.run_id, 0
    FROM lineage AS l JOIN pygents_messages AS m
    ON m.session_id = l.source_id AND m.position >= l.live_from AND m.position < l.live_upto
    ORDER BY part, ord
"""


async def snapshot(session_id: str, conn: AsyncConnection[Any]) -> SessionSnapshot:
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        cursor = await conn.execute(SNAPSHOT, {"session": session_id}, binary=True)
        rows = await cursor.fetchall()
        usage = await usage_sql.read_postgres(session_id, None, conn)
        found = checkpoint_sql.live(
            await checkpoint_sql.rows_postgres(session_id, None, conn),
            (int(row[1]) for row in rows if row[0] == 2),
        )
        states = await checkpoint_sql.states_postgres({row.digest for _, row in found}, conn)
    tokens = (0, 0)
    parts: tuple[list[StoredMessage], list[StoredMessage]] = ([], [])
    for part, order, count, data, run_id, extra in rows:
        if part == 0:
            tokens = (int(count), int(extra))
        else:
            parts[part - 1].append(StoredMessage(decode(session_id, order, count, data), run_id))
    archived, live = parts
    checkpoints = [
        StoredCheckpoint(row.agent, at, row.created_at, states[row.digest]) for at, row in found
    ]
    return SessionSnapshot(
        session_id, live, archived, *tokens, usage=usage, checkpoints=checkpoints
    )


async def restore(
    session_id: str,
    live: tuple[list[str | None], Batch],
    archived: tuple[list[str | None], Batch],
    tokens: tuple[int, int],
    usage: tuple[UsageRecord, ...],
    checkpoints: tuple[StoredCheckpoint, ...],
    conn: AsyncConnection[Any],
) -> None:
    (live_runs, batch), (archived_runs, old) = live, archived
    async with conn.transaction():
        start, held = await _bump_generation(
            session_id,
            "next_position, message_count > 0 OR EXISTS "
            "(SELECT 1 FROM pygents_archive a WHERE a.session_id = s.session_id)",
            conn,
        )
        if held or await _one(
            "SELECT 1 FROM pygents_forks AS f JOIN pygents_archive AS a "
            "ON a.session_id = f.source_id AND a.id <= f.archive_upto "
            "WHERE f.session_id = %s LIMIT 1",
            (session_id,),
            conn,
        ):
            raise session_not_empty(session_id)
        await detach_readers(session_id, LOWEST, conn)
        await conn.execute("DELETE FROM pygents_forks WHERE session_id = %s", (session_id,))
        await conn.execute(
            "INSERT INTO pygents_archive (session_id, run_id, tokens, preview, data, search) "
            "SELECT %(session)s, b.run_id, b.tokens, b.preview, b.data, "
            "to_tsvector('simple', b.words) "
            "FROM unnest(%(runs)s::text[], %(tokens)s::integer[], %(previews)s::bytea[], "
            "%(data)s::bytea[], %(words)s::text[]) "
            "WITH ORDINALITY AS b (run_id, tokens, preview, data, words, ord) "
            "ORDER BY b.ord",
            {
                "session": session_id,
                "runs": archived_runs,
                "tokens": old.tokens,
                "previews": old.previews,
                "data": old.data,
                "words": old.words,
            },
        )
        await conn.execute(
            "INSERT INTO pygents_messages "
            "(session_id, position, run_id, tokens, preview, data, running, search) "
            "SELECT %(session)s, %(start)s + b.ord - 1, b.run_id, b.tokens, b.preview, b.data, "
            "sum(b.tokens) OVER (ORDER BY b.ord), to_tsvector('simple', b.words) "
            "FROM unnest(%(runs)s::text[], %(tokens)s::integer[], %(previews)s::bytea[], "
            "%(data)s::bytea[], %(words)s::text[]) "
            "WITH ORDINALITY AS b (run_id, tokens, preview, data, words, ord)",
            {
                "session": session_id,
                "start": start,
                "runs": live_runs,
                "tokens": batch.tokens,
                "previews": batch.previews,
                "data": batch.data,
                "words": batch.words,
            },
        )
        await usage_sql.insert_postgres(session_id, usage, conn)
        await checkpoint_sql.restore_postgres(
            session_id, start, ((c.agent, c.at, c.created_at, c.state) for c in checkpoints), conn
        )
        await conn.execute(
            "UPDATE pygents_sessions SET message_count = %(count)s, live_tokens = %(total)s, "
            "running_end = %(total)s, "
            "next_position = next_position + %(count)s, input_tokens = %(input)s, "
            f"output_tokens = %(output)s, preview = {FIRST_PREVIEW} "
            "WHERE session_id = %(session)s",
            {
                "session": session_id,
                "count": len(batch.data),
                "total": batch.total,
                "input": tokens[0],
                "output": tokens[1],
            },
        )


# -- token usage and sessions -------------------------------------------------------

_UPSERT_TOKENS: Final = """
    INSERT INTO pygents_sessions AS s (session_id, input_tokens, output_tokens)
    VALUES (%s, %s, %s)
    ON CONFLICT (session_id) DO UPDATE SET {}
"""
SET_TOKENS: Final = _UPSERT_TOKENS.format(
    "input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens"
)
ADD_TOKENS: Final = _UPSERT_TOKENS.format(
    "input_tokens = s.input_tokens + excluded.input_tokens, "
    "output_tokens = s.output_tokens + excluded.output_tokens"
)


async def set_tokens(
    sql: str, session_id: str, input_tokens: int, output_tokens: int, conn: AsyncConnection[Any]
) -> None:
    await conn.execute(sql, (session_id, input_tokens, output_tokens))


async def get_tokens(session_id: str, conn: AsyncConnection[Any]) -> tuple[int, int]:
    cursor = await conn.execute(
        "SELECT input_tokens, output_tokens FROM pygents_sessions WHERE session_id = %s",
        (session_id,),
    )
    row = await cursor.fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


async def list_sessions(owner: str | None, conn: AsyncConnection[Any]) -> list[SessionInfo]:
    columns = (
        "SELECT session_id, message_count, preview, created_at, input_tokens, output_tokens, "
        "owner FROM pygents_sessions"
    )
    order = "ORDER BY created_at DESC, id DESC"
    if owner is None:
        cursor = await conn.execute(f"{columns} {order}")
    else:  # a range of pygents_sessions_by_owner
        cursor = await conn.execute(f"{columns} WHERE owner = %s {order}", (owner,))
    return [
        SessionInfo(session, count, preview.decode(), _iso(created), tokens_in, tokens_out, who)
        for session, count, preview, created, tokens_in, tokens_out, who in await cursor.fetchall()
    ]


async def claim(session_id: str, owner: str, conn: AsyncConnection[Any]) -> str:
    """Make the session `owner`'s: create its row owned, or take an existing row
    without an owner. Returns the session's owner (another's stays as it was)."""
    return str(
        await _one(
            "INSERT INTO pygents_sessions (session_id, owner) VALUES (%s, %s) "
            "ON CONFLICT (session_id) DO UPDATE "
            "SET owner = coalesce(pygents_sessions.owner, excluded.owner) RETURNING owner",
            (session_id, owner),
            conn,
        )
    )


async def own_fork(
    session_id: str, new_id: str, owner: str | None, conn: AsyncConnection[Any]
) -> None:
    """Give the fork `new_id` its owner: `owner`, or its source's when None."""
    await conn.execute(
        "UPDATE pygents_sessions SET owner = coalesce(%s, "
        "(SELECT owner FROM pygents_sessions WHERE session_id = %s)) WHERE session_id = %s",
        (owner, session_id, new_id),
    )


_NAMED_IN: Final = (
    "SELECT data FROM pygents_messages WHERE session_id = %(session)s AND {test} "
    "UNION ALL SELECT data FROM pygents_archive WHERE session_id = %(session)s AND {test}"
)


async def erase(target: Erasure, conn: AsyncConnection[Any]) -> int:
    """Delete the sessions `target` names and all that is theirs; returns how many.

    One transaction. Forks of them that stay get their own rows first; the blobs
    of offloaded tool results they named go unless a message of a session that
    stays names them too.
    """
    condition, params = target.where("%s", "%s::timestamptz")
    async with conn.transaction():
        # Locked in session order, before their forks: the order every writer keeps.
        cursor = await conn.execute(
            f"SELECT session_id FROM pygents_sessions WHERE {condition} "
            "ORDER BY session_id FOR UPDATE",
            params,
        )
        doomed = [row[0] for row in await cursor.fetchall()]
        if not doomed:
            return 0
        gone = set(doomed)
        handles: set[str] = set()
        for session_id in doomed:
            cursor = await conn.execute(
                "SELECT session_id FROM pygents_forks WHERE source_id = %s ORDER BY session_id",
                (session_id,),
            )
            for (reader,) in await cursor.fetchall():
                if reader not in gone and await _lock(reader, conn):
                    await detach(reader, conn)
            test = "position('tool-results/'::bytea in data) > 0"
            cursor = await conn.execute(_NAMED_IN.format(test=test), {"session": session_id})
            handles |= blob_handles(bytes(row[0]) for row in await cursor.fetchall())
        # Everything else references the session row: its delete cascades to them
        # (the search index is a column of the message rows).
        await conn.execute("DELETE FROM pygents_sessions WHERE session_id = ANY(%s)", (doomed,))
        if handles and await _one("SELECT to_regclass('pygents_blobs') IS NOT NULL", (), conn):
            for handle in sorted(handles):
                named = await _one(
                    "SELECT EXISTS (SELECT 1 FROM pygents_messages WHERE "
                    "position(%(name)s::bytea in data) > 0) OR EXISTS (SELECT 1 FROM "
                    "pygents_archive WHERE position(%(name)s::bytea in data) > 0)",
                    {"name": handle.encode()},
                    conn,
                )
                if not named:
                    await delete_blob(handle, conn)
    return len(doomed)


async def delete_blob(name: str, conn: AsyncConnection[Any]) -> bool:
    """Delete the blob `name` of `PostgresBlobStore`'s tables; whether there was one.

    Here, below the memory layer, so that erasing a session can delete its offloaded
    results; the blob store deletes with it too. A blob is its name's row and its
    content's row (its chunks cascade).
    """
    cursor = await conn.execute(
        "DELETE FROM pygents_blobs WHERE name = %s RETURNING content_id", (name,)
    )
    row = await cursor.fetchone()
    if row is not None:
        await conn.execute("DELETE FROM pygents_blob_contents WHERE id = %s", (row[0],))
    return row is not None
