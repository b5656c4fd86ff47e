"""The blob store on a database, written once over the SQL dialects.

`SQLiteBlobStore` and `PostgresBlobStore` are this store on their own
connection: each gives a `BlobSQL`, its tables' migrations and its
operations as functions of a connection (SQLite keeps a blob in one row,
PostgreSQL in pieces of 1 MiB, under an advisory lock of its name), and
streams in its own way; its tables say how a transaction and a read snapshot
run. Which operations write in one transaction, and which read from one
snapshot, is said here once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import IO, Any, ClassVar, Final, Generic

from pygents_ctx.memory._shared import AnyTables, Migrations, utc_now
from pygents_ctx.memory.blobs.base import Blob, BlobInfo, BlobStoreBase

__all__ = ["INFO", "SCHEMA_LABEL", "SCHEMA_TABLE", "BlobSQL", "SQLBlobStore", "stored_info"]

# What both dialects select of a blob's info, in the order `stored_info` reads it.
INFO: Final = "name, size, content_type, sha256, created_at, updated_at"
# The one-row table the blob tables keep their schema version in, and what errors call them.
SCHEMA_TABLE: Final = "pygents_blob_schema"
SCHEMA_LABEL: Final = "blob store"


def stored_info(row: Sequence[Any], moment: Callable[[Any], datetime]) -> BlobInfo:
    """The `BlobInfo` of a row of `INFO`, its times read back by the dialect's `moment`."""
    name, size, content_type, sha256, created, updated = row
    return BlobInfo(name, int(size), content_type, sha256, moment(created), moment(updated))


@dataclass(frozen=True, slots=True)
class BlobSQL:
    """One dialect's migrations and operations (the connection is an operation's last argument)."""

    migrations: Migrations  # what builds its tables, oldest version first
    store: Callable[..., Any]  # (name, type, sha256, size, bytes or file, now, db) -> BlobInfo
    get: Callable[..., Any]  # (name, db) -> Blob, in a snapshot
    lookup: Callable[..., Any]  # (name, db) -> (content id, BlobInfo)
    list: Callable[..., Any]  # (prefix, db) -> list[BlobInfo] by name
    delete: Callable[..., Any]  # (name, db) -> bool, in a transaction


class SQLBlobStore(BlobStoreBase, Generic[AnyTables]):
    """A `BlobStore` whose blobs are rows of a database (see the module docs)."""

    __slots__ = ("_tables",)

    _sql: ClassVar[BlobSQL]

    def __init__(self, tables: type[AnyTables], conn: object) -> None:
        self._tables: AnyTables = tables(
            conn, type(self).__name__, self._sql.migrations, SCHEMA_TABLE, SCHEMA_LABEL
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._tables.where!r})"

    async def _put(self, name: str, content_type: str, data: bytes, sha256: str) -> BlobInfo:
        work = partial(self._sql.store, name, content_type, sha256, len(data), data, utc_now())
        stored: BlobInfo = await self._tables.transaction(work)
        return stored

    async def _put_spooled(
        self, name: str, content_type: str, sha256: str, size: int, spool: IO[bytes]
    ) -> BlobInfo:
        work = partial(self._sql.store, name, content_type, sha256, size, spool, utc_now())
        stored: BlobInfo = await self._tables.transaction(work)
        return stored

    async def _get(self, name: str) -> Blob:
        found: Blob = await self._tables.snapshot(partial(self._sql.get, name))
        return found

    async def _info(self, name: str) -> BlobInfo:
        found: BlobInfo
        _, found = await self._tables.run(partial(self._sql.lookup, name))
        return found

    async def _list(self, prefix: str) -> list[BlobInfo]:
        found: list[BlobInfo] = await self._tables.run(partial(self._sql.list, prefix))
        return found

    async def _delete(self, name: str) -> bool:
        deleted: bool = await self._tables.transaction(partial(self._sql.delete, name))
        return deleted
