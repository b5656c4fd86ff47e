"""`PostgresBlobStore`: blobs in PostgreSQL, kept and streamed in 1 MiB pieces.

Needs the `postgres` extra (psycopg 3). Tables (made on first use; their
version is in `pygents_blob_schema`):

- `pygents_blob_contents`: one row per written version (`id`), never changed.
- `pygents_blob_chunks`: `(content_id, seq)` -> `data`, the content in pieces
  of 1 MiB (so no blob is bound by `bytea`'s 1 GB, and a stream reads one
  piece per query); they go with their content row.
- `pygents_blobs`: `name` -> `content_id` and the blob's info (`timestamptz`).

A put or delete locks the name (a transaction-level advisory lock), writes the
new content, points the name at it and drops the old content, in one
transaction. As with `SQLiteBlobStore`, a stream whose blob is replaced or
deleted before it ends raises `BlobNotFoundError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from functools import partial
from typing import IO, TYPE_CHECKING, Any, Final

from pygents_ctx.context.stores._postgres_ops import delete_blob
from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.memory._shared import OnPostgres, PostgresTables, in_utc
from pygents_ctx.memory.blobs._sql import INFO, BlobSQL, SQLBlobStore, stored_info
from pygents_ctx.memory.blobs.base import (
    Blob,
    BlobInfo,
    changed_while_read,
    missing_blob,
    names_after,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresBlobStore"]

_V1: Final = (
    "CREATE TABLE pygents_blob_contents (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY)",
    """
    CREATE TABLE pygents_blob_chunks (
        content_id bigint  NOT NULL REFERENCES pygents_blob_contents (id) ON DELETE CASCADE,
        seq        integer NOT NULL,
        data       bytea   NOT NULL,
        PRIMARY KEY (content_id, seq)
    )
    """,
    # Pieces are read whole: storing them uncompressed saves the work of packing them.
    "ALTER TABLE pygents_blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    """
    CREATE TABLE pygents_blobs (
        name         text        NOT NULL PRIMARY KEY,
        content_id   bigint      NOT NULL UNIQUE REFERENCES pygents_blob_contents (id),
        size         bigint      NOT NULL,
        content_type text        NOT NULL,
        sha256       text        NOT NULL,
        created_at   timestamptz NOT NULL,
        updated_at   timestamptz NOT NULL
    )
    """,
)
MIGRATIONS: Final = (_V1,)

_PIECE: Final = 1 << 20
_LOCK_CLASS: Final = 0x626C6F62  # "blob": the first key of the names' advisory locks


def _info(row: tuple[Any, ...]) -> BlobInfo:
    return stored_info(row, in_utc)


def _lock_key(name: str) -> int:
    """The second key of the name's advisory lock: 32 bits of its hash."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big", signed=True)


async def _lock(name: str, conn: AsyncConnection[Any]) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, _lock_key(name)))


async def _store(
    name: str,
    content_type: str,
    sha256: str,
    size: int,
    source: bytes | IO[bytes],
    now: datetime,
    conn: AsyncConnection[Any],
) -> BlobInfo:
    await _lock(name, conn)
    cursor = await conn.execute("INSERT INTO pygents_blob_contents DEFAULT VALUES RETURNING id")
    row = await cursor.fetchone()
    assert row is not None  # an insert with RETURNING gives its row
    content_id = row[0]
    if isinstance(source, bytes):
        pieces: Iterable[bytes] = (
            source[start : start + _PIECE] for start in range(0, size, _PIECE)
        )
    else:
        source.seek(0)
        pieces = iter(partial(source.read, _PIECE), b"")
    async with conn.cursor() as writer:
        for seq, piece in enumerate(pieces):
            await writer.execute(
                "INSERT INTO pygents_blob_chunks (content_id, seq, data) VALUES (%s, %s, %s)",
                (content_id, seq, piece),
            )
    cursor = await conn.execute(
        "SELECT content_id, created_at FROM pygents_blobs WHERE name = %s", (name,)
    )
    old = await cursor.fetchone()
    created = now if old is None else in_utc(old[1])
    await conn.execute(
        f"INSERT INTO pygents_blobs (content_id, {INFO}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (name) DO UPDATE SET content_id = excluded.content_id, "
        "size = excluded.size, content_type = excluded.content_type, "
        "sha256 = excluded.sha256, updated_at = excluded.updated_at",
        (content_id, name, size, content_type, sha256, created, now),
    )
    if old is not None:
        await conn.execute("DELETE FROM pygents_blob_contents WHERE id = %s", (old[0],))
    return BlobInfo(name, size, content_type, sha256, created, now)


async def _lookup(name: str, conn: AsyncConnection[Any]) -> tuple[int, BlobInfo]:
    cursor = await conn.execute(
        f"SELECT content_id, {INFO} FROM pygents_blobs WHERE name = %s", (name,)
    )
    row = await cursor.fetchone()
    if row is None:
        raise missing_blob(name)
    return row[0], _info(row[1:])


async def _get(name: str, conn: AsyncConnection[Any]) -> Blob:
    content_id, info = await _lookup(name, conn)
    cursor = await conn.execute(
        "SELECT data FROM pygents_blob_chunks WHERE content_id = %s ORDER BY seq",
        (content_id,),
    )
    data = b"".join(bytes(row[0]) for row in await cursor.fetchall())
    return Blob(info, data)


async def _piece(name: str, content_id: int, seq: int, conn: AsyncConnection[Any]) -> bytes:
    cursor = await conn.execute(
        "SELECT data FROM pygents_blob_chunks WHERE content_id = %s AND seq = %s",
        (content_id, seq),
    )
    row = await cursor.fetchone()
    if row is None:  # the content is gone: the blob was replaced or deleted
        raise changed_while_read(name)
    return bytes(row[0])


async def _list(prefix: str, conn: AsyncConnection[Any]) -> list[BlobInfo]:
    end = names_after(prefix)
    cursor = await conn.execute(
        f"SELECT {INFO} FROM pygents_blobs "
        'WHERE name COLLATE "C" >= %s AND (%s::text IS NULL OR name COLLATE "C" < %s)',
        (prefix, end, end),
    )
    # Sorted here, by code point as the other backends sort: the server's collation may differ.
    return sorted((_info(row) for row in await cursor.fetchall()), key=lambda i: i.name)


async def _delete(name: str, conn: AsyncConnection[Any]) -> bool:
    await _lock(name, conn)
    return await delete_blob(name, conn)


_SQL: Final = BlobSQL(MIGRATIONS, _store, _get, _lookup, _list, _delete)


class PostgresBlobStore(SQLBlobStore[PostgresTables], OnPostgres):
    """A `BlobStore` in PostgreSQL: blobs shared safely by workers on many machines.

    Behaves as `SQLiteBlobStore` does, without its size limit: the content is
    kept in 1 MiB pieces.

    Args:
        conn: An open connection, from `await connect_postgres(dsn)`.

    Raises:
        TypeError: `conn` is not a `PostgresConnection`.
    """

    __slots__ = ()

    _sql = _SQL

    def __init__(self, conn: PostgresConnection) -> None:
        super().__init__(PostgresTables, conn)

    async def _stream(self, name: str, chunk_size: int) -> AsyncIterator[bytes]:
        # One stored piece read per query, cut to the chunks asked for.
        content_id, found = await self._tables.run(partial(_lookup, name))
        pending = bytearray()
        for seq in range(-(-found.size // _PIECE)):
            pending += await self._tables.run(partial(_piece, name, content_id, seq))
            start = 0
            while len(pending) - start >= chunk_size:
                yield bytes(pending[start : start + chunk_size])
                start += chunk_size
            del pending[:start]
        if pending:
            yield bytes(pending)
