"""`PostgresVectorStore`: collections in PostgreSQL with pgvector, searched exactly.

It runs on the same `PostgresConnection` as the context stores (`await
connect_postgres(dsn)`, the `postgres` extra). The server needs the pgvector
extension installed (Debian and Ubuntu: `postgresql-<major>-pgvector`); the
store creates it in the database (`CREATE EXTENSION IF NOT EXISTS vector`,
which needs the right to do so the first time) and its tables, with their
own schema version (`pygents_vector_schema`), at first use:

- `pygents_vector_collections`: a collection's name and dimension.
- `pygents_vectors`: one row per document: its text, its metadata as `jsonb`
  and its embedding as a pgvector `vector` (32-bit floats).

A search is one SELECT ordered by pgvector's cosine distance (`<=>`), then
by id; without an approximate index it compares every vector of the
collection, so it is exact. (An HNSW index on `embedding` would make large
collections faster and the results approximate: that trade is left to you.)
"""

from __future__ import annotations

from array import array
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from pygents_ctx.context.stores._postgres_schema import migrate
from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.errors import MissingExtensionError
from pygents_ctx.memory._table import unit_vector
from pygents_ctx.memory.embedders import Embedder
from pygents_ctx.memory.vectors._bulk import Row
from pygents_ctx.memory.vectors.base import (
    CollectionInfo,
    MetadataValue,
    SearchResult,
    VectorDocument,
    VectorStoreBase,
    dimension_changed,
    other_dimension,
    refuse_single_precision_overflow,
    unknown_collection,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresVectorStore"]

T = TypeVar("T")

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        "CREATE EXTENSION IF NOT EXISTS vector",
        """
        CREATE TABLE pygents_vector_collections (
            name      text    COLLATE "C" NOT NULL PRIMARY KEY,
            dimension integer NOT NULL
        )
        """,
        """
        CREATE TABLE pygents_vectors (
            collection text   COLLATE "C" NOT NULL
                       REFERENCES pygents_vector_collections (name) ON DELETE CASCADE,
            id         text   COLLATE "C" NOT NULL,
            text       text   NOT NULL,
            metadata   jsonb  NOT NULL,
            embedding  vector NOT NULL,
            PRIMARY KEY (collection, id)
        )
        """,
    ),
)
# feature_not_supported ("extension is not available"), undefined_file (older
# servers), undefined_object (type "vector" does not exist).
_NO_EXTENSION: Final = frozenset({"0A000", "58P01", "42704"})


def _literal(vector: array[float]) -> str:
    """A pgvector literal that parses back to exactly these 32-bit floats."""
    return "[" + ",".join(map(repr, vector.tolist())) + "]"


def _parse(text: str) -> tuple[float, ...]:
    """pgvector's text form back into its 32-bit floats."""
    return tuple(array("f", map(float, text[1:-1].split(","))).tolist())


class PostgresVectorStore(VectorStoreBase):
    """Collections in PostgreSQL with pgvector, for many workers on many machines.

    Every write is one transaction; the collection's row is locked while
    documents are written, so a concurrent delete or re-create of the
    collection cannot interleave. Scores come from pgvector (its arithmetic
    is single precision).

    Args:
        conn: An open connection, from `await connect_postgres(dsn)`.
        embedder: Embeds documents without an embedding, and text queries.
        batch_size: The most texts sent to `embedder.embed` in one call.

    Raises:
        TypeError: `conn` is not a `PostgresConnection`.
        MissingExtensionError: (at first use) pgvector is not installed on
            the server.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import PostgresVectorStore, VectorDocument, connect_postgres
        >>> async def main(dsn):
        ...     async with connect_postgres(dsn) as conn:
        ...         store = PostgresVectorStore(conn)
        ...         await store.create_collection("notes", 2)
        ...         await store.upsert("notes", [VectorDocument("a", "north", embedding=[0, 1])])
        ...         return [hit.id for hit in await store.search("notes", [0.1, 0.9])]
        >>> asyncio.run(main(dsn))  # doctest: +SKIP
        ['a']
    """

    def __init__(
        self,
        conn: PostgresConnection,
        *,
        embedder: Embedder | None = None,
        batch_size: int = 128,
    ) -> None:
        if not isinstance(conn, PostgresConnection):
            raise TypeError(
                "PostgresVectorStore needs the connection from `await connect_postgres(dsn)`, "
                f"not {type(conn).__name__}"
            )
        super().__init__(embedder=embedder, batch_size=batch_size)
        self._conn = conn
        self._ready = False

    def __repr__(self) -> str:
        return f"PostgresVectorStore({self._conn.target!r})"

    @property
    def connection(self) -> PostgresConnection:
        """The connection this store runs on."""
        return self._conn

    async def _run(self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Await `fn(conn)` on the connection, after creating the tables once."""
        if not self._ready:
            await self._conn.run(_migrate)
            self._ready = True
        return await self._conn.run(fn)

    # -- collections ---------------------------------------------------------

    async def _create(self, name: str, dimension: int) -> None:
        async def create(db: AsyncConnection[Any]) -> None:
            async with db.transaction():
                await db.execute(
                    "INSERT INTO pygents_vector_collections (name, dimension) VALUES (%s, %s) "
                    "ON CONFLICT (name) DO NOTHING",
                    (name, dimension),
                )
                existing = await _dimension_in(db, name)
            if existing != dimension:
                raise other_dimension(name, dimension, int(existing or 0))

        await self._run(create)

    async def _drop(self, name: str) -> None:
        async def drop(db: AsyncConnection[Any]) -> None:
            cursor = await db.execute(
                "DELETE FROM pygents_vector_collections WHERE name = %s", (name,)
            )
            if cursor.rowcount == 0:
                raise unknown_collection(name)

        await self._run(drop)

    async def _collections(self) -> list[CollectionInfo]:
        async def read(db: AsyncConnection[Any]) -> list[CollectionInfo]:
            cursor = await db.execute(
                "SELECT c.name, c.dimension, count(v.id) FROM pygents_vector_collections c "
                "LEFT JOIN pygents_vectors v ON v.collection = c.name "
                "GROUP BY c.name, c.dimension ORDER BY c.name"
            )
            return [CollectionInfo(n, int(d), int(c)) for n, d, c in await cursor.fetchall()]

        return await self._run(read)

    async def _dimension(self, name: str) -> int:
        async def read(db: AsyncConnection[Any]) -> int | None:
            return await _dimension_in(db, name)

        dimension = await self._run(read)
        if dimension is None:
            raise unknown_collection(name)
        return dimension

    async def _count(self, name: str) -> int:
        async def count(db: AsyncConnection[Any]) -> int:
            await _require(db, name)
            cursor = await db.execute(
                "SELECT count(*) FROM pygents_vectors WHERE collection = %s", (name,)
            )
            row = await cursor.fetchone()
            return 0 if row is None else int(row[0])

        return await self._run(count)

    # -- documents -----------------------------------------------------------

    async def _present(self, name: str, ids: list[str]) -> set[str]:
        async def present(db: AsyncConnection[Any]) -> set[str]:
            cursor = await db.execute(
                "SELECT id FROM pygents_vectors WHERE collection = %s AND id = ANY(%s)",
                (name, ids),
            )
            return {row[0] for row in await cursor.fetchall()}

        return await self._run(present)

    async def _write(
        self, name: str, dimension: int, rows: list[Row], *, replace: bool
    ) -> list[str]:
        refuse_single_precision_overflow(rows, "PostgresVectorStore (pgvector)")
        columns = (
            [r.id for r in rows],
            [r.text for r in rows],
            [r.metadata for r in rows],
            [_literal(r.vector) for r in rows],
        )
        conflict = (
            "UPDATE SET text = excluded.text, metadata = excluded.metadata, "
            "embedding = excluded.embedding"
            if replace
            else "NOTHING"
        )
        sql = (
            "INSERT INTO pygents_vectors (collection, id, text, metadata, embedding) "
            "SELECT %s, d.id, d.text, d.metadata::jsonb, d.embedding::vector "
            "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) "
            "AS d(id, text, metadata, embedding) "
            f"ON CONFLICT (collection, id) DO {conflict} RETURNING id"
        )

        async def write(db: AsyncConnection[Any]) -> list[str]:
            async with db.transaction():
                # Locked until the commit: the collection cannot go or change meanwhile.
                cursor = await db.execute(
                    "SELECT dimension FROM pygents_vector_collections WHERE name = %s FOR SHARE",
                    (name,),
                )
                row = await cursor.fetchone()
                now = None if row is None else int(row[0])
                if now != dimension:
                    raise dimension_changed(name, dimension, now)
                cursor = await db.execute(sql, (name, *columns))
                written = {r[0] for r in await cursor.fetchall()}
            return [r.id for r in rows if r.id in written]

        return await self._run(write)

    async def _delete(self, name: str, ids: list[str]) -> int:
        async def delete(db: AsyncConnection[Any]) -> int:
            async with db.transaction():
                await _require(db, name)
                cursor = await db.execute(
                    "DELETE FROM pygents_vectors WHERE collection = %s AND id = ANY(%s)",
                    (name, ids),
                )
            return cursor.rowcount

        return await self._run(delete)

    async def _get(self, name: str, document_id: str) -> VectorDocument | None:
        async def get(db: AsyncConnection[Any]) -> VectorDocument | None:
            await _require(db, name)
            cursor = await db.execute(
                "SELECT text, metadata, embedding::text FROM pygents_vectors "
                "WHERE collection = %s AND id = %s",
                (name, document_id),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            text, metadata, embedding = row
            return VectorDocument(document_id, text, metadata, _parse(embedding))

        return await self._run(get)

    async def _search(
        self, name: str, vector: array[float], k: int, conditions: dict[str, MetadataValue]
    ) -> list[SearchResult]:
        where, params = ["collection = %s"], [name]
        for key, value in conditions.items():
            # jsonb equality: 1 = 1.0, true is not 1, null only where the key holds null.
            where.append("metadata -> %s = %s::jsonb")
            params.extend([key, orjson.dumps(value).decode()])
        sql = (
            "SELECT id, text, metadata, 1 - (embedding <=> %s::vector) AS score "
            f"FROM pygents_vectors WHERE {' AND '.join(where)} "
            "ORDER BY score DESC, id LIMIT %s"
        )

        async def search(db: AsyncConnection[Any]) -> list[SearchResult]:
            await _require(db, name)
            cursor = await db.execute(sql, (_literal(unit_vector(vector)), *params, k))
            return [
                SearchResult(i, text, metadata, float(score))
                for i, text, metadata, score in await cursor.fetchall()
            ]

        return await self._run(search)


async def _migrate(db: AsyncConnection[Any]) -> None:
    import psycopg

    try:
        await migrate(db, MIGRATIONS, table="pygents_vector_schema", label="vector store")
    except psycopg.Error as exc:
        if exc.sqlstate not in _NO_EXTENSION:
            raise
        raise MissingExtensionError(
            f"PostgresVectorStore needs the pgvector extension on the server ({exc}): "
            "install it (Debian/Ubuntu: `apt-get install postgresql-<major>-pgvector`), "
            "then connect again; the store runs `CREATE EXTENSION IF NOT EXISTS vector`"
        ) from exc


async def _dimension_in(db: AsyncConnection[Any], name: str) -> int | None:
    cursor = await db.execute(
        "SELECT dimension FROM pygents_vector_collections WHERE name = %s", (name,)
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def _require(db: AsyncConnection[Any], name: str) -> None:
    if await _dimension_in(db, name) is None:
        raise unknown_collection(name)
