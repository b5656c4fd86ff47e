"""`SQLiteVectorStore`: collections in a SQLite database, searched exactly.

It runs on the same `SQLiteConnection` as the context stores (`await
connect(path)`), on its worker thread. Its tables have their own schema
version (`pygents_vector_schema`) and are created on first use:

- `pygents_vector_collections`: a collection's name, dimension and
  generation (bumped by every write to it; see `_sqlite_matrix`).
- `pygents_vectors`: one row per document: its text, its metadata as JSON, its
  embedding as little-endian 32-bit floats (the format sqlite-vec reads) and
  the embedding's norm.
- `pygents_vector_metadata`: the index filters read: one row per top-level
  scalar value of a document's metadata (collection, key, kind, value, id),
  written by triggers on `pygents_vectors` in the transaction of every
  insert, update and delete (see `_indexed`).

A filter is one lookup in that index a condition, so it reads the ids it
keeps, not every document. With numpy installed (and `matrix=True`, the
default), a search scores the collection's vectors kept in this process as
one float32 matrix, read from the table at the first search and kept in
step with it, only the rows the filter keeps (see `VectorTable.top_k`); SQL
then reads the texts of the hits. Otherwise a search is one SELECT that
scores every document passing the filter and keeps the best `k`
(`ORDER BY score DESC, id LIMIT k`), with a function registered on the
connection (in Python, in double precision) or, with the sqlite-vec
extension loaded, its `vec_distance_cosine` (in C, in single precision).
"""

from __future__ import annotations

import sqlite3
import sys
from array import array
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, Final, TypeVar

import orjson

from pygents_ctx.context.stores._sqlite_ops import in_transaction
from pygents_ctx.context.stores._sqlite_schema import migrate
from pygents_ctx.context.stores._worker import SQLiteConnection
from pygents_ctx.errors import MissingExtensionError
from pygents_ctx.memory._table import (
    VectorTable,
    cosine,
    norm,
    numpy_or_none,
    unit_vector,
)
from pygents_ctx.memory.embedders import Embedder
from pygents_ctx.memory.vectors._bulk import Columns
from pygents_ctx.memory.vectors._sqlite_matrix import Matrices, bump, first_generation
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

__all__ = ["SQLiteVectorStore"]

Db = sqlite3.Connection
T = TypeVar("T")


def _indexed(row: str, rows: str = "") -> str:
    """The SELECT of a document's indexed metadata: `(collection, key, kind, value, id)` for
    each top-level value that is not a list or an object, from the document `row` (in `rows`).

    JSON equality, as the filter compared values before the index (the same
    json_each): integers and reals are both a "number" (SQLite compares them
    by value: 1 = 1.0), a text a "text"; true, false and null are kinds of
    their own, with the value ''.
    """
    return (
        f"SELECT {row}.collection, m.key, "
        "CASE WHEN m.type IN ('integer', 'real') THEN 'number' ELSE m.type END, "
        f"CASE WHEN m.type IN ('integer', 'real', 'text') THEN m.value ELSE '' END, {row}.id "
        f"FROM {rows}json_each({row}.metadata) AS m WHERE m.type NOT IN ('object', 'array')"
    )


_INDEX: Final = "INSERT INTO pygents_vector_metadata (collection, key, kind, value, id) "
_UNINDEX: Final = (
    "DELETE FROM pygents_vector_metadata WHERE collection = {row}.collection AND id = {row}.id"
)

_METADATA_INDEX: Final = (
    # The primary key's columns first, in its order (see the fourth migration).
    """
    CREATE TABLE pygents_vector_metadata (
        collection TEXT NOT NULL,
        id         TEXT NOT NULL,
        key        TEXT NOT NULL,
        kind       TEXT NOT NULL,
        value           NOT NULL,
        PRIMARY KEY (collection, id, key)
    ) WITHOUT ROWID
    """,
    # What a filter reads: the ids with a value (the primary key's columns
    # are in every entry, so it reads nothing else).
    "CREATE INDEX pygents_vector_metadata_values "
    "ON pygents_vector_metadata (collection, key, kind, value)",
    f"""
    CREATE TRIGGER pygents_vectors_indexed AFTER INSERT ON pygents_vectors BEGIN
        {_INDEX}{_indexed("new")};
    END
    """,
    f"""
    CREATE TRIGGER pygents_vectors_reindexed AFTER UPDATE OF collection, id, metadata
    ON pygents_vectors WHEN old.metadata IS NOT new.metadata
        OR old.id IS NOT new.id OR old.collection IS NOT new.collection BEGIN
        {_UNINDEX.format(row="old")};
        {_INDEX}{_indexed("new")};
    END
    """,
    f"""
    CREATE TRIGGER pygents_vectors_unindexed AFTER DELETE ON pygents_vectors BEGIN
        {_UNINDEX.format(row="old")};
    END
    """,
    _INDEX + _indexed("v", "pygents_vectors AS v, "),
)

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """
        CREATE TABLE pygents_vector_collections (
            name      TEXT    NOT NULL PRIMARY KEY,
            dimension INTEGER NOT NULL
        )
        """,
        """
        CREATE TABLE pygents_vectors (
            collection TEXT NOT NULL
                       REFERENCES pygents_vector_collections (name) ON DELETE CASCADE,
            id         TEXT NOT NULL,
            text       TEXT NOT NULL,
            metadata   TEXT NOT NULL,
            embedding  BLOB NOT NULL,
            norm       REAL NOT NULL,
            PRIMARY KEY (collection, id)
        )
        """,
    ),
    (
        # Bumped by every write to the collection, from a random start: a store
        # that keeps the vectors in memory sees whether anyone changed them.
        "ALTER TABLE pygents_vector_collections ADD COLUMN generation INTEGER NOT NULL DEFAULT 0",
    ),
    # An index of the documents' top-level scalar metadata values, kept by triggers in
    # the transaction of every write (whoever writes), from the same json_each the
    # filter read before: a filter reads the ids it keeps.
    _METADATA_INDEX,
    # Version 3 declared the index's columns out of its primary key's order, which
    # SQLite 3.40's integrity_check misreads as NULL values: a false alarm, but one a
    # health check raises. Built again, the key's columns first.
    (
        "DROP TRIGGER pygents_vectors_indexed",
        "DROP TRIGGER pygents_vectors_reindexed",
        "DROP TRIGGER pygents_vectors_unindexed",
        "DROP TABLE pygents_vector_metadata",
        *_METADATA_INDEX,
    ),
)
_SCORE_FUNCTION: Final = "pygents_vector_cosine"
_INSERT: Final = (
    "INSERT INTO pygents_vectors (collection, id, text, metadata, embedding, norm) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (collection, id) DO "
)
_REPLACE: Final = (
    "UPDATE SET text = excluded.text, metadata = excluded.metadata, "
    "embedding = excluded.embedding, norm = excluded.norm"
)
_LITTLE_ENDIAN: Final = sys.byteorder == "little"


def _blob(vector: array[float]) -> bytes:
    if _LITTLE_ENDIAN:
        return vector.tobytes()
    swapped = array("f", vector)
    swapped.byteswap()
    return swapped.tobytes()


def _vector(blob: bytes) -> array[float]:
    vector = array("f")
    vector.frombytes(blob)
    if not _LITTLE_ENDIAN:
        vector.byteswap()
    return vector


def _kept(name: str, conditions: dict[str, MetadataValue]) -> tuple[str, list[Any]]:
    """A SELECT of the ids in collection `name` whose metadata meets every condition, and its
    parameters: one lookup in the metadata index a condition (see `_indexed`)."""
    lookups, params = [], []
    for key, value in conditions.items():
        kind: str
        if value is None:
            kind, value = "null", ""
        elif isinstance(value, bool):
            kind, value = ("true" if value else "false"), ""
        else:
            kind = "number" if isinstance(value, int | float) else "text"
        lookups.append(
            "SELECT id FROM pygents_vector_metadata "
            "WHERE collection = ? AND key = ? AND kind = ? AND value = ?"
        )
        params.extend([name, key, kind, value])
    return " INTERSECT ".join(lookups), params


def _load_sqlite_vec(db: Db) -> None:
    """Load sqlite-vec into `db` (a no-op when it is loaded).

    Raises:
        MissingExtensionError: The package is missing, or this Python's
            sqlite3 cannot load extensions, or loading failed.
    """
    try:
        db.execute("SELECT vec_version()")
        return
    except sqlite3.OperationalError:
        pass
    try:
        import sqlite_vec  # type: ignore[import-untyped]
    except ImportError:
        raise MissingExtensionError(
            "SQLiteVectorStore(sqlite_vec=True) needs the sqlite-vec package: the 'vec' extra "
            "(pip install -e '.[vec]' from a checkout)"
        ) from None
    if not hasattr(db, "enable_load_extension"):
        raise MissingExtensionError(
            "this Python's sqlite3 cannot load extensions (it was built without "
            "--enable-loadable-sqlite-extensions), so sqlite-vec cannot be used: use "
            "SQLiteVectorStore(conn, sqlite_vec=False), or a Python built with them"
        )
    try:
        db.enable_load_extension(True)
        try:
            sqlite_vec.load(db)
        finally:
            db.enable_load_extension(False)
    except sqlite3.Error as exc:
        raise MissingExtensionError(f"sqlite-vec failed to load: {exc}") from exc


def sqlite_vec_loads() -> bool:
    """Whether sqlite-vec loads into this Python's sqlite3 (what `sqlite_vec=None` finds).

    The bench and the tests ask it to choose their sqlite-vec rows and cases.
    """
    db = sqlite3.connect(":memory:")
    try:
        _load_sqlite_vec(db)
    except MissingExtensionError:
        return False
    finally:
        db.close()
    return True


class SQLiteVectorStore(VectorStoreBase):
    """Collections in a SQLite database: the embedded default, searched exactly in SQL.

    Needs nothing beyond the standard library (numpy makes searches fast).
    Several stores (and the context stores) can share one connection; several
    processes can share the file. Every write is one transaction.

    Args:
        conn: An open connection, from `await connect(path)`.
        embedder: Embeds documents without an embedding, and text queries.
        batch_size: The most texts sent to `embedder.embed` in one call.
        sqlite_vec: Score with the sqlite-vec extension (the `vec` extra):
            `None` (default) when it loads, `True`
            always (an error when it cannot load), `False` never. Searches
            use it when they run in SQL; its scores are single precision.
        matrix: Search a float32 copy of each searched collection kept in
            this process (4 bytes a number), with numpy; it is read once and
            kept in step with every writer. `False` (or no numpy) searches
            in SQL instead, holding nothing.

    Raises:
        TypeError: `conn` is not a `SQLiteConnection`, `sqlite_vec` is not
            a bool or None, or `matrix` not a bool.
        MissingExtensionError: (at first use) `sqlite_vec=True` and the
            extension cannot be loaded.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import SQLiteVectorStore, VectorDocument, connect
        >>> async def main():
        ...     async with connect(":memory:") as conn:
        ...         store = SQLiteVectorStore(conn)
        ...         await store.create_collection("notes", 2)
        ...         await store.add("notes", [VectorDocument("a", "north", embedding=[0, 1]),
        ...                                   VectorDocument("b", "east", embedding=[1, 0])])
        ...         hits = await store.search("notes", [0.1, 0.9], k=1)
        ...         return [(hit.id, round(hit.score, 3)) for hit in hits]
        >>> asyncio.run(main())
        [('a', 0.994)]
    """

    def __init__(
        self,
        conn: SQLiteConnection,
        *,
        embedder: Embedder | None = None,
        batch_size: int = 128,
        sqlite_vec: bool | None = None,
        matrix: bool = True,
    ) -> None:
        if not isinstance(conn, SQLiteConnection):
            raise TypeError(
                "SQLiteVectorStore needs the connection from `await connect(path)`, "
                f"not {type(conn).__name__}"
            )
        if sqlite_vec is not None and not isinstance(sqlite_vec, bool):
            raise TypeError(f"sqlite_vec must be True, False or None, not {sqlite_vec!r}")
        if not isinstance(matrix, bool):
            raise TypeError(f"matrix must be True or False, not {matrix!r}")
        super().__init__(embedder=embedder, batch_size=batch_size)
        self._conn = conn
        self._want_vec = sqlite_vec
        self._uses_vec: bool | None = None  # decided at first use
        self._want_matrix = matrix
        self._matrices = Matrices()

    def __repr__(self) -> str:
        return f"SQLiteVectorStore({self._conn.path!r})"

    @property
    def connection(self) -> SQLiteConnection:
        """The connection this store runs on."""
        return self._conn

    @property
    def uses_sqlite_vec(self) -> bool | None:
        """Whether searches in SQL score with sqlite-vec (None until the store's first use)."""
        return self._uses_vec

    @property
    def uses_matrix(self) -> bool:
        """Whether searches run on the in-memory float32 matrix (`matrix=True` and numpy)."""
        return self._want_matrix and numpy_or_none() is not None

    async def _run(self, fn: Callable[[Db], T]) -> T:
        """Run `fn` on the worker thread, after bringing the schema up to date once."""
        if self._uses_vec is None:
            self._uses_vec = await self._conn.run(self._prepare)
        return await self._conn.run(fn)

    def _prepare(self, db: Db) -> bool:
        migrate(db, MIGRATIONS, table="pygents_vector_schema", label="vector store")
        if self._want_vec is False:
            return False
        try:
            _load_sqlite_vec(db)
        except MissingExtensionError:
            if self._want_vec:
                raise
            return False
        return True

    # -- collections ---------------------------------------------------------

    async def _create(self, name: str, dimension: int) -> None:
        def create(db: Db) -> None:
            db.execute(
                "INSERT INTO pygents_vector_collections (name, dimension, generation) "
                "VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
                (name, dimension, first_generation()),
            )
            existing = _dimension_in(db, name)
            if existing != dimension:
                raise other_dimension(name, dimension, int(existing or 0))

        await self._run(partial(in_transaction, work=create))

    async def _drop(self, name: str) -> None:
        def drop(db: Db) -> None:
            self._matrices.forget(name)
            if (
                db.execute(
                    "DELETE FROM pygents_vector_collections WHERE name = ?", (name,)
                ).rowcount
                == 0
            ):
                raise unknown_collection(name)

        await self._run(partial(in_transaction, work=drop))

    async def _collections(self) -> list[CollectionInfo]:
        def read(db: Db) -> list[CollectionInfo]:
            rows = db.execute(
                "SELECT c.name, c.dimension, "
                "(SELECT count(*) FROM pygents_vectors v WHERE v.collection = c.name) "
                "FROM pygents_vector_collections c ORDER BY c.name"
            ).fetchall()
            return [CollectionInfo(name, int(dim), int(count)) for name, dim, count in rows]

        return await self._run(read)

    async def _dimension(self, name: str) -> int:
        dimension = await self._run(partial(_dimension_in, name=name))
        if dimension is None:
            raise unknown_collection(name)
        return dimension

    async def _count(self, name: str) -> int:
        def count(db: Db) -> int:
            _require(db, name)
            row = db.execute(
                "SELECT count(*) FROM pygents_vectors WHERE collection = ?", (name,)
            ).fetchone()
            return int(row[0])

        return await self._run(count)

    # -- documents -----------------------------------------------------------

    async def _present(self, name: str, ids: list[str]) -> set[str]:
        return await self._run(partial(_stored, name=name, ids=ids))

    def _refuse(self, columns: Columns) -> None:
        if self._uses_vec:
            refuse_single_precision_overflow(columns, "SQLiteVectorStore with sqlite-vec")

    async def _commit(self, batch: list[Write]) -> list[Outcome]:
        return await self._run(partial(self._commit_batch, batch))

    def _commit_batch(self, batch: list[Write], db: Db) -> list[Outcome]:
        """Write the batch's runs in one transaction, then bring the matrices in step."""
        outcomes: list[Outcome] = []
        changes: list[tuple[str, Columns]] = []

        def write(db: Db) -> dict[str, int | None]:
            dimensions: dict[str, int | None] = {}
            for run in runs(batch):
                if run.name not in dimensions:
                    dimensions[run.name] = _dimension_in(db, run.name)
                now = dimensions[run.name]
                if now != run.dimension:
                    outcomes.extend(
                        [dimension_changed(run.name, run.dimension, now)] * len(run.writes)
                    )
                    continue
                kept = _insert(db, run.name, run.columns, run.replace)
                outcomes.extend(run.outcomes(set(kept.ids)))
                changes.append((run.name, kept))
            return {name: bump(db, name) for name, _ in changes}

        generations = in_transaction(db, write)
        for name, generation in generations.items():
            mine = [kept for changed, kept in changes if changed == name]
            self._matrices.changed(name, generation, partial(_put_all, mine))
        return outcomes

    def _committed(
        self,
        name: str,
        write: Callable[[Db], tuple[list[str], int | None]],
        change: Callable[[VectorTable, list[str]], None],
        db: Db,
    ) -> list[str]:
        """Run `write` in a transaction, then bring this store's matrix in step with it."""
        written, generation = in_transaction(db, write)
        if written:
            self._matrices.changed(name, generation, lambda table: change(table, written))
        return written

    async def _delete(self, name: str, ids: list[str]) -> int:
        deleted: list[str] = []

        def delete(db: Db) -> tuple[list[str], int | None]:
            _require(db, name)
            for item_id in ids:
                if db.execute(
                    "DELETE FROM pygents_vectors WHERE collection = ? AND id = ?", (name, item_id)
                ).rowcount:
                    deleted.append(item_id)
            return deleted, bump(db, name) if deleted else None

        def change(table: VectorTable, written: list[str]) -> None:
            for item_id in written:
                table.discard(item_id)

        return len(await self._run(partial(self._committed, name, delete, change)))

    async def _get(self, name: str, document_id: str) -> VectorDocument | None:
        def get(db: Db) -> VectorDocument | None:
            _require(db, name)
            row = db.execute(
                "SELECT text, metadata, embedding FROM pygents_vectors "
                "WHERE collection = ? AND id = ?",
                (name, document_id),
            ).fetchone()
            if row is None:
                return None
            text, metadata, blob = row
            return VectorDocument(
                document_id, text, orjson.loads(metadata), tuple(_vector(blob).tolist())
            )

        return await self._run(get)

    async def _search(
        self, name: str, vector: array[float], k: int, conditions: dict[str, MetadataValue]
    ) -> list[SearchResult]:
        kept, params = _kept(name, conditions) if conditions else ("", [])
        if self.uses_matrix:
            return await self._run(partial(self._matrix_search, name, vector, k, kept, params))
        uses_vec = self._uses_vec
        score = (
            "1.0 - vec_distance_cosine(embedding, ?)"
            if uses_vec
            else f"{_SCORE_FUNCTION}(embedding, norm)"
        )
        sql = (
            f"SELECT id, text, metadata, {score} AS score FROM pygents_vectors "
            f"WHERE collection = ?{f' AND id IN ({kept})' if kept else ''} "
            "ORDER BY score DESC, id LIMIT ?"
        )
        query_norm = norm(vector)

        def score_row(blob: bytes, row_norm: float) -> float:
            return cosine(_vector(blob), row_norm, vector, query_norm)

        def search(db: Db) -> list[SearchResult]:
            _require(db, name)
            if uses_vec:
                rows = db.execute(sql, (_blob(unit_vector(vector)), name, *params, k)).fetchall()
            else:
                # Registered per search (the worker runs one call at a time), so the
                # function holds this query.
                db.create_function(_SCORE_FUNCTION, 2, score_row, deterministic=True)
                rows = db.execute(sql, (name, *params, k)).fetchall()
            return [
                SearchResult(i, text, orjson.loads(metadata), float(s))
                for i, text, metadata, s in rows
            ]

        return await self._run(search)

    def _matrix_search(
        self,
        name: str,
        vector: array[float],
        k: int,
        kept: str,
        params: list[Any],
        db: Db,
    ) -> list[SearchResult]:
        """Score the collection's matrix (only the rows `kept` selects, when it is given);
        read the hits' texts in SQL."""
        db.execute("BEGIN")  # one snapshot: the generation, the rows and the texts agree
        try:
            found = db.execute(
                "SELECT dimension, generation FROM pygents_vector_collections WHERE name = ?",
                (name,),
            ).fetchone()
            if found is None:
                raise unknown_collection(name)
            table = self._matrices.table(db, name, int(found[0]), int(found[1]))
            among = None
            if kept:
                # Counted first (in the index): a filter that keeps every document
                # searches the whole matrix without reading an id.
                (count,) = db.execute(f"SELECT count(*) FROM ({kept})", params).fetchone()
                if count < len(table):
                    among = {row[0] for row in db.execute(kept, params)} if count else set()
            hits = table.top_k(vector, k, among)
            details = _texts(db, name, [item_id for item_id, _ in hits])
        finally:
            db.execute("COMMIT")
        return [SearchResult(item_id, *details[item_id], score) for item_id, score in hits]


def _insert(db: Db, name: str, columns: Columns, replace: bool) -> Columns:
    """Insert the rows of `columns` (replacing stored ids with `replace`, else leaving them
    as they are); the rows written."""
    if not replace:  # inside the write lock: the stored ids cannot change now
        stored = _stored(db, name, columns.ids)
        if stored:
            columns = columns.take([i for i, d in enumerate(columns.ids) if d not in stored])
    width = 4 * columns.dimension
    if _LITTLE_ENDIAN:
        data = columns.vector_bytes()
    else:
        swapped = columns.float_array()
        swapped.byteswap()
        data = memoryview(swapped).cast("B")
    db.executemany(
        _INSERT + _REPLACE,
        (
            (name, item_id, text, metadata, data[i * width : (i + 1) * width], row_norm)
            for i, (item_id, text, metadata, row_norm) in enumerate(
                zip(columns.ids, columns.texts, columns.metadata, columns.norms, strict=True)
            )
        ),
    )
    return columns


def _put_all(written: list[Columns], table: VectorTable) -> None:
    """Put the rows written, in order, into a collection's matrix."""
    for columns in written:
        table.put_many(columns.ids, columns.vectors, columns.norms)


def _dimension_in(db: Db, name: str) -> int | None:
    row = db.execute(
        "SELECT dimension FROM pygents_vector_collections WHERE name = ?", (name,)
    ).fetchone()
    return None if row is None else int(row[0])


def _chunks(ids: list[str]) -> Iterator[tuple[list[str], str]]:
    """`ids` in chunks under SQLite's bound-parameter limit, each with its `?` marks."""
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        yield chunk, ", ".join("?" * len(chunk))


def _stored(db: Db, name: str, ids: list[str]) -> set[str]:
    found: set[str] = set()
    for chunk, marks in _chunks(ids):
        found.update(
            row[0]
            for row in db.execute(
                f"SELECT id FROM pygents_vectors WHERE collection = ? AND id IN ({marks})",
                (name, *chunk),
            )
        )
    return found


def _texts(db: Db, name: str, ids: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for chunk, marks in _chunks(ids):
        for item_id, text, metadata in db.execute(
            "SELECT id, text, metadata FROM pygents_vectors "
            f"WHERE collection = ? AND id IN ({marks})",
            (name, *chunk),
        ):
            found[item_id] = (text, orjson.loads(metadata))
    return found


def _require(db: Db, name: str) -> None:
    if _dimension_in(db, name) is None:
        raise unknown_collection(name)
