"""Reading a session's history a page at a time: `iter_history` of the database stores.

A fork's page reads the ranges it shares with other sessions, then its own
rows (see `_lineage`). Pages follow the stored order by key (the archive's `id`, the history's
`position`), each page the next `batch` rows after the last key read, so a
page costs the same wherever it is and memory holds one page at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

from pygents_ctx._checks import LARGEST, whole_number
from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores._common import decode
from pygents_ctx.context.stores._lineage import Segment, postgres_segments, sqlite_segments

if TYPE_CHECKING:
    import sqlite3

    from psycopg import AsyncConnection

__all__ = ["ReadPage", "check_batch", "iter_pages", "iter_windows", "postgres_page", "sqlite_page"]

Row: TypeAlias = tuple[int, int, bytes]
# (table, key column, after key or None for the first page, page size) -> rows
ReadPage: TypeAlias = Callable[[str, str, "int | None", int], Awaitable[list[Row]]]
_TABLES: Final = (("pygents_archive", "id"), ("pygents_messages", "position"))


def check_batch(batch: object) -> int:
    """Return `batch` if it is a positive int of at most 64 bits (a page a database reads).

    Raises:
        TypeError: It is not an int.
        ValueError: It is less than 1 or past 64 bits.
    """
    return whole_number(batch, "batch", least=1, most=LARGEST)


async def iter_pages(
    session_id: str, read_page: ReadPage, batch: int, include_archived: bool
) -> AsyncIterator[Message]:
    """The archive (when asked for), then the live history, oldest first, page by page."""
    for table, key in _TABLES if include_archived else _TABLES[1:]:
        after: int | None = None
        while True:
            rows = await read_page(table, key, after, batch)
            for row in rows:
                yield decode(session_id, *row)
            if len(rows) < batch:
                break
            after = rows[-1][0]


class _Windowed(Protocol):
    async def count(self) -> int: ...

    async def get_history(
        self, *, limit: int | None = None, offset: int = 0, include_archived: bool = False
    ) -> list[Message]: ...


async def iter_windows(
    store: _Windowed, batch: int, include_archived: bool
) -> AsyncIterator[Message]:
    """`ContextStore.iter_history` for any store: pages of `get_history` windows."""
    if include_archived:  # no window API for the archive alone: one read
        for message in await store.get_history(include_archived=True):
            yield message
        return
    done = 0
    while True:
        total = await store.count()  # again each page: appends meanwhile are read too
        if done >= total:
            return
        size = min(batch, total - done)
        page = await store.get_history(limit=size, offset=total - done - size)
        if not page:
            return
        for message in page:
            yield message
        done += len(page)


def _sql(table: str, key: str, after: int | None, mark: str) -> str:
    since = "" if after is None else f" AND {key} > {mark}"
    bound = "position >= {0} AND position < {0}" if key == "position" else "id <= {0}"
    return (
        f"SELECT {key}, tokens, data FROM {table} WHERE session_id = {mark} "
        f"AND {bound.format(mark)}{since} ORDER BY {key} LIMIT {mark}"
    )


def _params(source: Segment, key: str, after: int | None, limit: int) -> tuple[Any, ...]:
    session, low, high, top = source
    bounds = (session, low, high) if key == "position" else (session, top)
    return (*bounds, limit) if after is None else (*bounds, after, limit)


def sqlite_page(
    session_id: str, table: str, key: str, after: int | None, limit: int, db: sqlite3.Connection
) -> list[Row]:
    """One page of a SQLite table (`table` and `key` from `_TABLES`, never from users).

    A fork's page runs over the ranges it reads of other sessions, then its own rows.
    """
    rows: list[Row] = []
    for source in sqlite_segments(db, session_id):
        rows += db.execute(
            _sql(table, key, after, "?"), _params(source, key, after, limit - len(rows))
        ).fetchall()
        if len(rows) == limit:
            break
    return rows


async def postgres_page(
    session_id: str,
    table: str,
    key: str,
    after: int | None,
    limit: int,
    conn: AsyncConnection[Any],
) -> list[Row]:
    """One page of a PostgreSQL table (`table` and `key` from `_TABLES`, never from users)."""
    rows: list[Row] = []
    for source in await postgres_segments(conn, session_id):
        cursor = await conn.execute(
            _sql(table, key, after, "%s"), _params(source, key, after, limit - len(rows))
        )
        rows += [(value, tokens, bytes(data)) for value, tokens, data in await cursor.fetchall()]
        if len(rows) == limit:
            break
    return rows
