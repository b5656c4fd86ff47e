"""`SQLiteBlobStore`: blobs in a SQLite file, streamed with incremental blob I/O.

Tables (made on first use; their version is in `pygents_blob_schema`):

- `pygents_blob_contents`: `id` (never reused: `AUTOINCREMENT`) -> `data`.
  A content row is written once and never changed.
- `pygents_blobs`: `name` -> `content_id`, `size`, `content_type`, `sha256`,
  `created_at`, `updated_at` (ISO 8601 text in UTC).

A put inserts a new content row and points the name at it, deleting the old
content, in one transaction: readers see the old blob or the new one. A
stream looks the name up once, then reads its content row piece by piece
with `blobopen` (each piece one call on the connection's worker thread, so
other stores sharing the connection are not held up); if the blob is
replaced or deleted meanwhile, its old row is gone and the stream raises
`BlobNotFoundError` rather than mixing two versions. `put_stream` gathers the
chunks in a temporary file (in memory up to 8 MiB) and copies them into a
zero-filled row with `blobopen`, in one transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime
from functools import partial
from typing import IO, Final

from pygents_ctx.context.stores._sqlite_ops import delete_blob
from pygents_ctx.context.stores._worker import SQLiteConnection
from pygents_ctx.memory._shared import OnSQLite, SQLiteTables, from_iso, to_iso
from pygents_ctx.memory.blobs._sql import INFO, BlobSQL, SQLBlobStore, stored_info
from pygents_ctx.memory.blobs.base import (
    Blob,
    BlobInfo,
    changed_while_read,
    missing_blob,
    names_after,
)

__all__ = ["SQLiteBlobStore"]

Db = sqlite3.Connection

_V1: Final = (
    """
    CREATE TABLE pygents_blob_contents (
        id   INTEGER PRIMARY KEY AUTOINCREMENT,
        data BLOB NOT NULL
    )
    """,
    """
    CREATE TABLE pygents_blobs (
        name         TEXT    NOT NULL PRIMARY KEY,
        content_id   INTEGER NOT NULL UNIQUE REFERENCES pygents_blob_contents (id),
        size         INTEGER NOT NULL,
        content_type TEXT    NOT NULL,
        sha256       TEXT    NOT NULL,
        created_at   TEXT    NOT NULL,
        updated_at   TEXT    NOT NULL
    ) WITHOUT ROWID
    """,
)
MIGRATIONS: Final = (_V1,)

_COPY: Final = 1 << 20  # put_stream copies into the row this much at a time


def _info(row: tuple[str, int, str, str, str, str]) -> BlobInfo:
    return stored_info(row, from_iso)


def _check_size(size: int, name: str, db: Db) -> None:
    largest = db.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    if size > largest:
        raise ValueError(
            f"blob {name!r} is {size:,} bytes; this SQLite keeps at most {largest:,} bytes "
            "in one value: use a DirectoryBlobStore for blobs this large"
        )


def write_blob(
    name: str,
    content_type: str,
    sha256: str,
    size: int,
    source: bytes | IO[bytes],
    now: datetime,
    db: Db,
) -> BlobInfo:
    """Store a blob inside the caller's transaction (the tables made by `MIGRATIONS`).

    What `put` does, for a caller that writes other rows in the same
    transaction (the command line's `import`).
    """
    _check_size(size, name, db)
    if isinstance(source, bytes):
        (content_id,) = db.execute(
            "INSERT INTO pygents_blob_contents (data) VALUES (?) RETURNING id", (source,)
        ).fetchone()
    else:
        (content_id,) = db.execute(
            "INSERT INTO pygents_blob_contents (data) VALUES (zeroblob(?)) RETURNING id",
            (size,),
        ).fetchone()
        if size:
            source.seek(0)
            with db.blobopen("pygents_blob_contents", "data", content_id) as blob:
                while piece := source.read(_COPY):
                    blob.write(piece)
    old = db.execute(
        "SELECT content_id, created_at FROM pygents_blobs WHERE name = ?", (name,)
    ).fetchone()
    created = to_iso(now) if old is None else old[1]
    db.execute(
        f"INSERT INTO pygents_blobs (content_id, {INFO}) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET content_id = excluded.content_id, "
        "size = excluded.size, content_type = excluded.content_type, "
        "sha256 = excluded.sha256, updated_at = excluded.updated_at",
        (content_id, name, size, content_type, sha256, created, to_iso(now)),
    )
    if old is not None:
        db.execute("DELETE FROM pygents_blob_contents WHERE id = ?", (old[0],))
    return BlobInfo(name, size, content_type, sha256, from_iso(created), now)


def _lookup(name: str, db: Db) -> tuple[int, BlobInfo]:
    row = db.execute(
        f"SELECT content_id, {INFO} FROM pygents_blobs WHERE name = ?", (name,)
    ).fetchone()
    if row is None:
        raise missing_blob(name)
    return row[0], _info(row[1:])


def read_blob(name: str, db: Db) -> Blob:
    """The blob under `name`, read whole on `db` (for a caller in its own transaction).

    Raises:
        BlobNotFoundError: There is none.
    """
    row = db.execute(
        "SELECT c.data, b.name, b.size, b.content_type, b.sha256, b.created_at, b.updated_at "
        "FROM pygents_blobs AS b JOIN pygents_blob_contents AS c ON c.id = b.content_id "
        "WHERE b.name = ?",
        (name,),
    ).fetchone()
    if row is None:
        raise missing_blob(name)
    return Blob(_info(row[1:]), bytes(row[0]))


def _read_piece(name: str, content_id: int, offset: int, length: int, db: Db) -> bytes:
    try:
        with db.blobopen("pygents_blob_contents", "data", content_id, readonly=True) as blob:
            blob.seek(offset)
            return blob.read(length)
    except sqlite3.OperationalError:  # the row is gone: replaced or deleted
        raise changed_while_read(name) from None


def _list(prefix: str, db: Db) -> list[BlobInfo]:
    # A range on the primary key, not LIKE (whose % and _ a prefix may hold).
    end = names_after(prefix)
    rows = db.execute(
        f"SELECT {INFO} FROM pygents_blobs WHERE name >= ? AND (? IS NULL OR name < ?) "
        "ORDER BY name",
        (prefix, end, end),
    )
    return [_info(row) for row in rows]


_SQL: Final = BlobSQL(MIGRATIONS, write_blob, read_blob, _lookup, _list, delete_blob)


class SQLiteBlobStore(SQLBlobStore[SQLiteTables], OnSQLite):
    """A `BlobStore` in a SQLite database, beside the conversations that made the blobs.

    Open the connection with `connect()`, as for the context stores; several
    stores can share it. Safe for many processes (each write is one
    transaction). SQLite keeps at most about 1 GB in one value by default:
    larger blobs are refused with a `ValueError`.

    Args:
        conn: An open connection, from `await connect(path)`.

    Raises:
        TypeError: `conn` is not a `SQLiteConnection`.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import connect
        >>> async def main():
        ...     async with connect(":memory:") as conn:
        ...         blobs = SQLiteBlobStore(conn)
        ...         await blobs.put("scan.png", b"\\x89PNG...", content_type="image/png")
        ...         return [chunk async for chunk in blobs.stream("scan.png", chunk_size=4)]
        >>> asyncio.run(main())
        [b'\\x89PNG', b'...']
    """

    __slots__ = ()

    _sql = _SQL

    def __init__(self, conn: SQLiteConnection) -> None:
        super().__init__(SQLiteTables, conn)

    async def _stream(self, name: str, chunk_size: int) -> AsyncIterator[bytes]:
        # Each piece read with blobopen, one call on the worker thread (see the module docs).
        content_id, found = await self._tables.run(partial(_lookup, name))
        for offset in range(0, found.size, chunk_size):
            length = min(chunk_size, found.size - offset)
            yield await self._tables.run(partial(_read_piece, name, content_id, offset, length))
