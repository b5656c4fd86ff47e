"""`PostgresVectorStore`: collections in PostgreSQL with pgvector, searched exactly.

It runs on the same `PostgresConnection` as the context stores (`await
connect_postgres(dsn)`, the `postgres` extra). The server needs the pgvector
extension installed (Debian and Ubuntu: `postgresql-<major>-pgvector`); the
store creates it in the database (`CREATE EXTENSION IF NOT EXISTS vector`,
which needs the right to do so the first time) and its tables, with their
own schema version (`pygents_vector_schema`), at first use:

- `pygents_vector_collections`: a collection's name and dimension.
- `pygents_vectors`: one row per document: its text, its metadata as `jsonb`
  (with a GIN index, `jsonb_path_ops`, that filters read) and its embedding as
  a pgvector `vector` (32-bit floats).

A search is one SELECT ordered by pgvector's cosine distance (`<=>`), then
by id. By default (`index="exact"`) it compares every vector of the
collection that passes the filter, so it is exact; a filter's rows are found
through the metadata index, so a selective filter compares only those.
With `index="hnsw"` each collection gets a pgvector HNSW index of its own:
a partial index (`WHERE collection = ... AND vector_dims(embedding) = n`,
so rows of another collection, or of the same name made again with another
dimension, never reach it) on the embedding cast to the collection's
dimension (`vector(n)`, which an index needs), named
`pygents_hnsw_<hash of the name>_<dimension>`; a search then
walks the graph: approximate, and much faster on large collections.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import orjson

from pygents_ctx._checks import whole_number
from pygents_ctx.context.stores._postgres_schema import migrate
from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.errors import MissingExtensionError
from pygents_ctx.memory._table import unit_vector
from pygents_ctx.memory.embedders import Embedder
from pygents_ctx.memory.vectors._bulk import Columns
from pygents_ctx.memory.vectors._writes import Outcome, Write, runs
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
    from psycopg import AsyncConnection, AsyncCursor

__all__ = ["PostgresVectorStore"]

T = TypeVar("T")
IndexKind = Literal["exact", "hnsw"]

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
    (
        # What a filter reads first: the rows whose metadata contains the
        # filter's values (`@>`), then only those are compared with the query.
        "CREATE INDEX pygents_vectors_metadata ON pygents_vectors "
        "USING gin (metadata jsonb_path_ops)",
    ),
)
# feature_not_supported ("extension is not available"), undefined_file (older
# servers), undefined_object (type "vector" does not exist).
_NO_EXTENSION: Final = frozenset({"0A000", "58P01", "42704"})


def _hnsw_prefix(name: str) -> str:
    """The start of the names of a collection's HNSW indexes (PostgreSQL names: 63 bytes)."""
    return f"pygents_hnsw_{hashlib.sha256(name.encode()).hexdigest()[:24]}_"


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
        index: `"exact"` (default) compares every vector: exact results.
            `"hnsw"` gives each collection this store creates or searches a
            pgvector HNSW index (built at that moment, which takes a while
            on a large collection) and searches through it: approximate
            results (recall@10 0.91 to 0.94 with the defaults on the bench's
            200,000 clustered vectors, 0.97 with `ef_search=100`), far faster on
            large collections. With a filter, the index finds candidates and
            the filter is applied to them (pgvector's iterative scan keeps
            looking until `k` pass or the graph is exhausted).
        m: HNSW: links per node (2 to 100; pgvector's default 16). More
            means better recall, a larger index and a slower build.
        ef_construction: HNSW: candidates kept while building (at least
            `2 * m`, up to 1000; default 64).
        ef_search: HNSW: candidates kept while searching (1 to 1000;
            default 40, and never fewer than `k`). More means better recall
            and slower searches.

    Raises:
        TypeError: `conn` is not a `PostgresConnection`, or an HNSW setting
            is not an int.
        ValueError: `index` is neither "exact" nor "hnsw", or an HNSW
            setting is out of its range.
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
        index: IndexKind = "exact",
        m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 40,
    ) -> None:
        if not isinstance(conn, PostgresConnection):
            raise TypeError(
                "PostgresVectorStore needs the connection from `await connect_postgres(dsn)`, "
                f"not {type(conn).__name__}"
            )
        if index not in ("exact", "hnsw"):
            raise ValueError(f'PostgresVectorStore index must be "exact" or "hnsw", not {index!r}')
        self._m = whole_number(m, "PostgresVectorStore m", least=2, most=100)
        self._ef_construction = whole_number(
            ef_construction, "PostgresVectorStore ef_construction", least=2 * m, most=1000
        )
        self._ef_search = whole_number(
            ef_search, "PostgresVectorStore ef_search", least=1, most=1000
        )
        super().__init__(embedder=embedder, batch_size=batch_size)
        self._conn = conn
        self._ready = False
        self._vector_oid = 0  # the `vector` type's, read at first use
        self._index: IndexKind = index
        self._indexed: set[tuple[str, int]] = set()  # (collection, dimension) known indexed

    def __repr__(self) -> str:
        index = ", index='hnsw'" if self._index == "hnsw" else ""
        return f"PostgresVectorStore({self._conn.target!r}{index})"

    @property
    def index(self) -> IndexKind:
        """How searches find their documents: `"exact"` or `"hnsw"`."""
        return self._index

    @property
    def connection(self) -> PostgresConnection:
        """The connection this store runs on."""
        return self._conn

    async def _run(self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Await `fn(conn)` on the connection, after creating the tables once."""
        if not self._ready:
            self._vector_oid = await self._conn.run(_migrate)
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
        if self._index == "hnsw":
            await self._ensure_index(name, dimension)

    async def _ensure_index(self, name: str, dimension: int) -> None:
        """Create the collection's HNSW index unless it exists (once per store and collection)."""
        if (name, dimension) in self._indexed:
            return
        from psycopg import sql

        statement = sql.SQL(
            "CREATE INDEX IF NOT EXISTS {index} ON pygents_vectors USING hnsw "
            "((embedding::vector({dimension})) vector_cosine_ops) "
            "WITH (m = {m}, ef_construction = {ef}) "
            "WHERE collection = {name} AND vector_dims(embedding) = {dimension}"
        ).format(
            index=sql.Identifier(f"{_hnsw_prefix(name)}{dimension}"),
            dimension=sql.Literal(dimension),
            m=sql.Literal(self._m),
            ef=sql.Literal(self._ef_construction),
            name=sql.Literal(name),
        )

        async def create(db: AsyncConnection[Any]) -> None:
            await db.execute(statement)

        await self._run(create)
        self._indexed.add((name, dimension))

    async def _drop(self, name: str) -> None:
        from psycopg import sql

        async def drop(db: AsyncConnection[Any]) -> None:
            async with db.transaction():
                cursor = await db.execute(
                    "DELETE FROM pygents_vector_collections WHERE name = %s", (name,)
                )
                if cursor.rowcount == 0:
                    raise unknown_collection(name)
                # Its HNSW indexes go too, whoever made them: a collection made
                # again with another dimension could not be written through them.
                cursor = await db.execute(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'pygents_vectors' "
                    "AND starts_with(indexname, %s)",
                    (_hnsw_prefix(name),),
                )
                for (index,) in await cursor.fetchall():
                    await db.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index)))

        self._indexed = {held for held in self._indexed if held[0] != name}
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

    def _refuse(self, columns: Columns) -> None:
        refuse_single_precision_overflow(columns, "PostgresVectorStore (pgvector)")

    async def _commit(self, batch: list[Write]) -> list[Outcome]:
        """The batch's runs in one transaction: one INSERT a chunk of a run's rows, the
        embeddings in binary."""
        oid = self._vector_oid

        async def write(db: AsyncConnection[Any]) -> list[Outcome]:
            from pygents_ctx.memory.vectors._pg_binary import VectorArray, VectorArrayDumper

            outcomes: list[Outcome] = []
            dimensions: dict[str, int | None] = {}
            async with db.transaction():
                cursor = db.cursor()
                cursor.adapters.register_dumper(VectorArray, VectorArrayDumper)
                for run in runs(batch):
                    if run.name not in dimensions:
                        dimensions[run.name] = await _held_dimension(db, run.name)
                    now = dimensions[run.name]
                    if now != run.dimension:
                        error = dimension_changed(run.name, run.dimension, now)
                        outcomes.extend([error] * len(run.writes))
                        continue
                    written = await _insert(cursor, run.name, run.columns, run.replace, oid)
                    outcomes.extend(run.outcomes(written))
            return outcomes

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
        if self._index == "hnsw":
            return await self._hnsw_search(name, vector, k, where[1:], params[1:])
        if conditions:
            # Every row that passes holds the filter's values: the metadata index
            # finds those rows (containment, which the equalities above then
            # check exactly), and only those are compared with the query.
            where.append("metadata @> %s::jsonb")
            params.append(orjson.dumps(conditions).decode())
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

    async def _hnsw_search(
        self, name: str, vector: array[float], k: int, where: list[str], params: list[Any]
    ) -> list[SearchResult]:
        """Walk the collection's HNSW index: the `k` nearest it finds, best first."""
        from psycopg import sql

        dimension = await self._dimension(name)
        await self._ensure_index(name, dimension)
        # The collection and dimension are literals, not parameters: the planner
        # must see them to match the partial index, also in a prepared statement.
        distance = sql.SQL("embedding::vector({dimension}) <=> %s::vector({dimension})").format(
            dimension=sql.Literal(dimension)
        )
        query = sql.SQL(
            "SELECT id, text, metadata, 1 - ({distance}) AS score FROM pygents_vectors "
            "WHERE collection = {name} AND vector_dims(embedding) = {dimension}{filters} "
            "ORDER BY {distance} LIMIT %s"
        ).format(
            distance=distance,
            name=sql.Literal(name),
            dimension=sql.Literal(dimension),
            filters=sql.SQL("".join(f" AND {condition}" for condition in where)),
        )
        literal = _literal(unit_vector(vector))
        ef_search = max(self._ef_search, k)

        async def search(db: AsyncConnection[Any]) -> list[SearchResult]:
            async with db.transaction():
                await db.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(ef_search))
                if where:
                    await db.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                cursor = await db.execute(query, (literal, *params, literal, k))
                rows = await cursor.fetchall()
            found = [
                SearchResult(i, text, metadata, float(score)) for i, text, metadata, score in rows
            ]
            # Best first, equal scores by id, as every backend orders them.
            return sorted(found, key=lambda hit: (-hit.score, hit.id))

        return await self._run(search)


async def _migrate(db: AsyncConnection[Any]) -> int:
    """Bring the tables up to date; the `vector` type's OID (binary parameters name it)."""
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
    cursor = await db.execute("SELECT 'vector'::regtype::oid")
    row = await cursor.fetchone()
    assert row is not None  # a cast gives one row
    return int(row[0])


async def _dimension_in(db: AsyncConnection[Any], name: str) -> int | None:
    cursor = await db.execute(
        "SELECT dimension FROM pygents_vector_collections WHERE name = %s", (name,)
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def _require(db: AsyncConnection[Any], name: str) -> None:
    if await _dimension_in(db, name) is None:
        raise unknown_collection(name)


def _on_conflict(replace: bool) -> str:
    """The `ON CONFLICT (collection, id) DO ...` action of a write: replace, or keep what is."""
    if replace:
        return (
            "UPDATE SET text = excluded.text, metadata = excluded.metadata, "
            "embedding = excluded.embedding"
        )
    return "NOTHING"


async def _held_dimension(db: AsyncConnection[Any], name: str) -> int | None:
    """Lock collection `name` until the commit (it cannot go or change meanwhile); its
    dimension, or None when it is gone."""
    cursor = await db.execute(
        "SELECT dimension FROM pygents_vector_collections WHERE name = %s FOR SHARE", (name,)
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def _insert(
    cursor: AsyncCursor[Any], name: str, columns: Columns, replace: bool, vector_oid: int
) -> set[str]:
    """Insert the rows of `columns`, one INSERT a chunk (replacing stored ids with
    `replace`, else leaving them as they are); the ids written."""
    from pygents_ctx.memory.vectors._pg_binary import vector_arrays

    sql = (
        "INSERT INTO pygents_vectors (collection, id, text, metadata, embedding) "
        "SELECT %s, d.id, d.text, d.metadata::jsonb, d.embedding "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::vector[]) "
        "AS d (id, text, metadata, embedding) "
        f"ON CONFLICT (collection, id) DO {_on_conflict(replace)} RETURNING id"
    )
    ids, texts, metadata = columns.ids, columns.texts, columns.metadata
    written: set[str] = set()
    for start, stop, vectors in vector_arrays(columns, vector_oid):
        chunk = slice(start, stop)
        await cursor.execute(sql, (name, ids[chunk], texts[chunk], metadata[chunk], vectors))
        written.update(row[0] for row in await cursor.fetchall())
    return written
