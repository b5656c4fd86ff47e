"""Forks that share their parent's messages: the lineage both database stores keep.

A fork is a new session row and a few rows of `pygents_forks`, one per session
whose stored messages it reads without copying them:

- `source_id`: the session whose own rows it reads;
- `live_from`, `live_upto`: the source's own live rows with
  `live_from <= position < live_upto`;
- `archive_upto`: the source's own archive rows with `id <= archive_upto`.

A forked session's own rows all come after its inherited ones (its
`next_position` starts where the fork cut), so its live history is the
inherited ranges, oldest first, then its own rows: one indexed range read
each. Its archive is inherited only: a session with lineage rows has no
archive of its own.

Shared rows never change under a reader, because whatever would change or
remove a session's rows first *detaches* the sessions that read them: it
copies what they inherit into rows of their own, then drops their lineage
(copy on write). That is `clear`, `clear_run`, `replace_prefix` (compaction),
`restore` and a `rewind` below a fork's cut, on the source; the same
operations on a fork detach the fork itself first (a `clear` just drops its
lineage). Appending never does: a source appends after every cut.

A source cannot be deleted (by SQL, behind the stores' backs) while a fork
reads it: the foreign key of `source_id` refuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pygents_ctx._json import shown

if TYPE_CHECKING:
    import sqlite3

    from psycopg import AsyncConnection

__all__ = [
    "HIGHEST",
    "LOWEST",
    "Segment",
    "archive_of",
    "check_at",
    "live_of",
    "own_from",
    "postgres_segments",
    "shared_postgres",
    "shared_sqlite",
    "sqlite_segments",
]

LOWEST: Final = -(2**63)
HIGHEST: Final = 2**63 - 1

# (source session, its live rows from, up to (excluded), its archive rows up to (included))
Segment = tuple[str, int, int, int]


def own_from(segments: list[Segment]) -> int:
    """Where a session's own live rows begin: after every inherited range."""
    return max((segment[2] for segment in segments), default=LOWEST)


_LINEAGE: Final = (
    "SELECT source_id, live_from, live_upto, archive_upto FROM pygents_forks "
    "WHERE session_id = {0} ORDER BY live_from"
)


def _with_own(session_id: str, inherited: list[Any]) -> list[Segment]:
    rows: list[Segment] = [(str(a), int(b), int(c), int(d)) for a, b, c, d in inherited]
    return [*rows, (session_id, own_from(rows), HIGHEST, HIGHEST)]


def sqlite_segments(db: sqlite3.Connection, session_id: str) -> list[Segment]:
    """Where a session's history is: the ranges it inherits, oldest first, then its own rows."""
    return _with_own(session_id, db.execute(_LINEAGE.format("?"), (session_id,)).fetchall())


async def postgres_segments(conn: AsyncConnection[Any], session_id: str) -> list[Segment]:
    """`sqlite_segments` on PostgreSQL."""
    cursor = await conn.execute(_LINEAGE.format("%s"), (session_id,))
    return _with_own(session_id, await cursor.fetchall())


# The newest message id a fork reads of one source: of its live rows in the range, and of
# its archive rows up to the top (`ContextStore.shared_from`).
_SHARED_SQLITE: Final = (
    "SELECT max(coalesce((SELECT max(data_id) FROM pygents_live_rows WHERE session_id = ? "
    "AND position >= ? AND position < ?), 0), coalesce((SELECT max(data_id) "
    "FROM pygents_archive_rows WHERE session_id = ? AND id <= ?), 0))"
)
_SHARED_POSTGRES: Final = (
    "SELECT greatest(coalesce((SELECT max(message_id) FROM pygents_messages "
    "WHERE session_id = %(source)s AND position >= %(low)s AND position < %(high)s), 0), "
    "coalesce((SELECT max(message_id) FROM pygents_archive WHERE session_id = %(source)s "
    "AND id <= %(top)s), 0))"
)


def shared_sqlite(session_id: str, db: sqlite3.Connection) -> list[tuple[str, int]]:
    """The sessions whose rows `session_id` reads, oldest first, each with the newest
    message id it reads of them (those it reads none of left out)."""
    *inherited, _ = sqlite_segments(db, session_id)
    shared = [
        (source, int(db.execute(_SHARED_SQLITE, (source, low, high, source, top)).fetchone()[0]))
        for source, low, high, top in inherited
    ]
    return [(source, through) for source, through in shared if through > 0]


async def shared_postgres(session_id: str, conn: AsyncConnection[Any]) -> list[tuple[str, int]]:
    """`shared_sqlite` on PostgreSQL, in one repeatable-read transaction."""
    shared = []
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        *inherited, _ = await postgres_segments(conn, session_id)
        for source, low, high, top in inherited:
            cursor = await conn.execute(
                _SHARED_POSTGRES, {"source": source, "low": low, "high": high, "top": top}
            )
            row = await cursor.fetchone()
            through = 0 if row is None else int(row[0])
            if through > 0:
                shared.append((source, through))
    return shared


def check_at(at: object, count: int, session_id: str, call: str) -> int:
    """Return `at` if it is a number of messages of the live history (0 to `count`).

    Args:
        at: The argument.
        count: The messages in the session's live history.
        session_id: The session, for the message.
        call: The argument as the caller wrote it (`"fork(at=...)"`).

    Raises:
        TypeError: `at` is not an int.
        ValueError: It is negative or more than `count`.
    """
    name = call.split("=", 1)[0] + "=...)"
    if isinstance(at, bool) or not isinstance(at, int):
        raise TypeError(
            f"{name} takes the number of oldest live messages to keep (an int), "
            f"not {type(at).__name__}"
        )
    if not 0 <= at <= count:
        raise ValueError(
            f"{call.replace('...', str(at))}: there is no message {at} in session "
            f"{shown(session_id)}, which holds {count} live messages; pass a number "
            f"from 0 to {count} (how many of the oldest live messages to keep, as in "
            "history[:n]); nothing was changed"
        )
    return at


def live_of(alias: str = "pygents_messages") -> str:
    """A subquery with the columns of `pygents_messages`, a fork's inherited rows included.

    For SQL that reads a session's live history with `WHERE session_id = ?`
    (the viewer, the export): `FROM {live_of()} WHERE session_id = ?`.
    """
    return (
        "(SELECT session_id, position, run_id, tokens, preview, data FROM pygents_messages "
        "UNION ALL SELECT f.session_id, m.position, m.run_id, m.tokens, m.preview, m.data "
        "FROM pygents_forks AS f JOIN pygents_messages AS m ON m.session_id = f.source_id "
        f"AND m.position >= f.live_from AND m.position < f.live_upto) AS {alias}"
    )


def archive_of(alias: str = "pygents_archive") -> str:
    """`live_of` for the archive: `pygents_archive`'s columns, a fork's inherited rows included."""
    return (
        "(SELECT id, session_id, run_id, tokens, preview, data FROM pygents_archive "
        "UNION ALL SELECT a.id, f.session_id, a.run_id, a.tokens, a.preview, a.data "
        "FROM pygents_forks AS f JOIN pygents_archive AS a ON a.session_id = f.source_id "
        f"AND a.id <= f.archive_upto) AS {alias}"
    )
