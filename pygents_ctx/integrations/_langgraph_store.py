"""`ContextStoreMemory`, LangGraph's long-term memory (imported on first use; needs langgraph).

An item is a row of `pygents_lg_store` (or, in memory, an entry of a dict);
its vectors are documents of one collection of our vector store on the same
connection (`InMemoryVectorStore`, `SQLiteVectorStore`, `PostgresVectorStore`),
named `langgraph_store`. A put writes in three steps, each one transaction:
the new vectors, under ids holding a token drawn for this put; the item,
naming that token (the row it replaces is read in the same transaction);
then the deletion of the replaced row's vectors. A search keeps a vector only
when its item names its token, so a put broken off between two steps leaves
vectors no search returns, never an item with the wrong ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import secrets
import threading
import time
from array import array
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import islice
from typing import Any, Final, TypeVar

import orjson
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from pygents_ctx._checks import storable_text, whole_number
from pygents_ctx._json import dumps
from pygents_ctx.context.stores import PostgresConnection, SQLiteConnection
from pygents_ctx.errors import CollectionNotFoundError
from pygents_ctx.integrations._langgraph_sql import (
    STORE_SCHEMA,
    PostgresDatabase,
    SQLiteDatabase,
)
from pygents_ctx.memory import (
    InMemoryVectorStore,
    PostgresVectorStore,
    SQLiteVectorStore,
    VectorDocument,
)
from pygents_ctx.memory._table import check_vector
from pygents_ctx.memory.vectors.base import VectorStoreBase

__all__ = ["ContextStoreMemory"]

T = TypeVar("T")
COLLECTION: Final = "langgraph_store"
MAX_NAME: Final = 1024  # characters of a key, and of a namespace's labels joined
_OPERATORS: Final = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_FIRST_K: Final = 16  # vectors asked for first by a search, at least


@dataclass(frozen=True, slots=True)
class _Row:
    """An item as stored: its namespace's labels joined by ".", its value as JSON."""

    namespace: str
    key: str
    value: bytes
    created_at: int  # microseconds since 1970, UTC
    updated_at: int
    vectors: str  # the token in its vectors' ids; "" when it has none
    vector_count: int

    def item(self) -> Item:
        return Item(
            value=orjson.loads(self.value),
            key=self.key,
            namespace=tuple(self.namespace.split(".")),
            created_at=_time(self.created_at),
            updated_at=_time(self.updated_at),
        )

    def found(self, score: float | None = None) -> SearchItem:
        return SearchItem(
            tuple(self.namespace.split(".")),
            self.key,
            orjson.loads(self.value),
            _time(self.created_at),
            _time(self.updated_at),
            score,
        )


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _time(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def _now() -> int:
    return time.time_ns() // 1000


# -- the items: in memory, or in a table -----------------------------------------


Change = tuple[str, str, "_Row | None"]  # namespace, key, and the new row or None to delete


class _MemoryItems:
    """Items in a dict, in this process."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], _Row] = {}

    async def setup(self) -> None:
        pass

    async def get(self, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], _Row]:
        return {pair: self._rows[pair] for pair in wanted if pair in self._rows}

    async def change(self, changes: Sequence[Change]) -> list[_Row | None]:
        old: list[_Row | None] = []
        for namespace, key, row in changes:
            before = self._rows.get((namespace, key))
            old.append(before)
            if row is None:
                self._rows.pop((namespace, key), None)
            else:
                if before is not None:
                    row = replace(row, created_at=before.created_at)
                self._rows[namespace, key] = row
        return old

    async def scan(
        self,
        prefix: str | None,
        *,
        unscored: bool = False,
        limit: int | None = None,
    ) -> list[_Row]:
        rows = [
            row
            for row in self._rows.values()
            if _under(row.namespace, prefix) and not (unscored and row.vector_count)
        ]
        if limit is not None:
            return heapq.nsmallest(limit, rows, key=_newest_first)
        return sorted(rows, key=_newest_first)

    async def first(
        self, prefix: str | None, keep: Callable[[_Row], bool], count: int, *, unscored: bool
    ) -> list[_Row]:
        rows = await self.scan(prefix, unscored=unscored)
        return list(islice((row for row in rows if keep(row)), count))

    async def namespaces(self) -> list[str]:
        return list({namespace for namespace, _ in self._rows})


def _newest_first(row: _Row) -> tuple[int, str, str]:
    return (-row.updated_at, row.namespace, row.key)


def _under(namespace: str, prefix: str | None) -> bool:
    return prefix is None or namespace == prefix or namespace.startswith(prefix + ".")


_COLUMNS: Final = "namespace, key, value, created_at, updated_at, vectors, vector_count"
_UPSERT: Final = f"""
    INSERT INTO pygents_lg_store ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value,
        updated_at = excluded.updated_at, vectors = excluded.vectors,
        vector_count = excluded.vector_count
"""
# A namespace under a prefix: the prefix itself, or it and a "." then more labels.
_UNDER: Final = "(namespace = ? OR substr(namespace, 1, CAST(? AS integer)) = ?)"


def _row(values: Sequence[Any]) -> _Row:
    namespace, key, value, created_at, updated_at, vectors, count = values
    data = value.encode() if isinstance(value, str) else bytes(value)
    return _Row(namespace, key, data, int(created_at), int(updated_at), vectors, int(count))


class _TableItems:
    """Items in `pygents_lg_store`, on a SQLite or PostgreSQL connection."""

    def __init__(self, db: SQLiteDatabase | PostgresDatabase) -> None:
        self._db = db

    async def setup(self) -> None:
        await self._db.setup()

    async def get(self, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], _Row]:
        queries: list[tuple[str, tuple[object, ...]]] = [
            (f"SELECT {_COLUMNS} FROM pygents_lg_store WHERE namespace = ? AND key = ?", pair)
            for pair in dict.fromkeys(wanted)
        ]
        found = await self._db.read(queries) if queries else []
        rows = [_row(values) for rows in found for values in rows]
        return {(row.namespace, row.key): row for row in rows}

    async def change(self, changes: Sequence[Change]) -> list[_Row | None]:
        select = f"SELECT {_COLUMNS} FROM pygents_lg_store WHERE namespace = ? AND key = ?"
        lock = self._db.row_lock
        queries: list[tuple[str, tuple[object, ...]]] = []
        reads: list[int] = []  # where the rows replaced are, in the results
        # In one order, so two writers lock the rows they share in the same order.
        for namespace, key, row in sorted(changes, key=lambda change: change[:2]):
            if lock is not None:  # another writer may be inserting the row
                queries.append((lock, (f"{namespace}\x1f{key}",)))
            reads.append(len(queries))
            queries.append((select, (namespace, key)))
            if row is None:
                delete = "DELETE FROM pygents_lg_store WHERE namespace = ? AND key = ?"
                queries.append((delete, (namespace, key)))
            else:
                values = (namespace, key, row.value.decode(), row.created_at, row.updated_at)
                queries.append((_UPSERT, (*values, row.vectors, row.vector_count)))
        found = await self._db.exchange(queries)
        return [_row(found[at][0]) if found[at] else None for at in reads]

    def _scan(self, prefix: str | None, *, unscored: bool) -> tuple[str, list[object]]:
        where: list[str] = []
        params: list[object] = []
        if prefix is not None:
            where.append(_UNDER)
            params += [prefix, len(prefix) + 1, prefix + "."]
        if unscored:
            where.append("vector_count = 0")
        sql = f"SELECT {_COLUMNS} FROM pygents_lg_store"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return sql + " ORDER BY updated_at DESC, namespace, key", params

    async def scan(
        self, prefix: str | None, *, unscored: bool = False, limit: int | None = None
    ) -> list[_Row]:
        sql, params = self._scan(prefix, unscored=unscored)
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        (rows,) = await self._db.read([(sql, tuple(params))])
        return [_row(values) for values in rows]

    async def first(
        self, prefix: str | None, keep: Callable[[_Row], bool], count: int, *, unscored: bool
    ) -> list[_Row]:
        sql, params = self._scan(prefix, unscored=unscored)
        rows = await self._db.first(sql, tuple(params), lambda values: keep(_row(values)), count)
        return [_row(values) for values in rows]

    async def namespaces(self) -> list[str]:
        (rows,) = await self._db.read([("SELECT DISTINCT namespace FROM pygents_lg_store", ())])
        return [str(values[0]) for values in rows]


# -- checks ------------------------------------------------------------------------


def _check_namespace(namespace: object, what: str) -> None:
    """Refuse what LangGraph's label checks would let through: a str, a label no
    database can hold (NUL, a lone surrogate), or a name too long."""
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(
            f"{what} must be a tuple of str labels, e.g. ('users', 'u1'), not {namespace!r}"
        )
    for index, label in enumerate(namespace):
        if isinstance(label, str):
            try:
                storable_text(label, f"{what}[{index}]", empty=True)
            except ValueError as exc:
                raise InvalidNamespaceError(str(exc)) from None
    length = sum(len(label) + 1 for label in namespace if isinstance(label, str))
    if length > MAX_NAME + 1:
        raise InvalidNamespaceError(
            f"{what} {namespace!r} is {length - 1} characters long joined; "
            f"keep it to {MAX_NAME} at most"
        )


def _check_key(key: object) -> str:
    checked = storable_text(key, "an item's key", empty=True)
    if len(checked) > MAX_NAME:
        raise ValueError(f"an item's key is {len(checked)} characters long; keep it to {MAX_NAME}")
    return checked


def _check_filter(filter: object) -> dict[str, Any]:
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise TypeError(f"search filter must be a dict of value keys to values, not {filter!r}")
    for key, wanted in filter.items():
        if not isinstance(key, str):
            raise TypeError(f"search filter keys must be str, not {key!r}")
        _check_condition(wanted, key)
    return dict(filter)


def _check_condition(wanted: object, where: str) -> None:
    if isinstance(wanted, Mapping):
        for name, operand in wanted.items():
            if isinstance(name, str) and name.startswith("$"):
                if name not in _OPERATORS:
                    raise ValueError(
                        f"search filter {where!r} uses the operator {name!r}; "
                        f"the operators are {', '.join(_OPERATORS)}"
                    )
            else:
                _check_condition(operand, f"{where}.{name}")
    elif isinstance(wanted, list | tuple):
        for index, element in enumerate(wanted):
            _check_condition(element, f"{where}[{index}]")


def _same(value: Any, wanted: Any) -> bool:
    """JSON equality: a bool is not a number (True is not 1); 1 equals 1.0."""
    if isinstance(value, bool) or isinstance(wanted, bool):
        return type(value) is type(wanted) and value == wanted
    return bool(value == wanted)


def _ordered(value: Any, wanted: Any) -> tuple[Any, Any] | None:
    """The pair, when the two can be ordered: two numbers or two strings."""
    numbers = (int, float)
    if isinstance(value, str) and isinstance(wanted, str):
        return value, wanted
    if (
        isinstance(value, numbers)
        and isinstance(wanted, numbers)
        and not isinstance(value, bool)
        and not isinstance(wanted, bool)
    ):
        return value, wanted
    return None


def _holds(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return _same(value, operand)
    if operator == "$ne":
        return not _same(value, operand)
    pair = _ordered(value, operand)
    if pair is None:
        return False
    left, right = pair
    if operator == "$gt":
        return bool(left > right)
    if operator == "$gte":
        return bool(left >= right)
    if operator == "$lt":
        return bool(left < right)
    return bool(left <= right)  # $lte


def _matches(value: Any, wanted: Any) -> bool:
    """Whether a stored value meets a filter's condition (see `ContextStoreMemory.search`)."""
    if isinstance(wanted, Mapping):
        if any(isinstance(name, str) and name.startswith("$") for name in wanted):
            return all(_holds(value, name, operand) for name, operand in wanted.items())
        return isinstance(value, dict) and all(
            _matches(value.get(name), operand) for name, operand in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list)
            and len(value) == len(wanted)
            and all(_matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return _same(value, wanted)


def _kept(row: _Row, conditions: dict[str, Any]) -> bool:
    if not conditions:
        return True
    value = orjson.loads(row.value)
    return all(_matches(value.get(name), wanted) for name, wanted in conditions.items())


def _check_index(index: object) -> list[str] | bool | None:
    if index is None or index is False:
        return index
    if isinstance(index, str) or not isinstance(index, list | tuple):
        raise TypeError(
            f"put's index must be False, None or a list of field paths (['text']), not {index!r}"
        )
    for path in index:
        if not isinstance(path, str) or not path:
            raise TypeError(f"put's index must hold field paths (non-empty str), not {path!r}")
    return list(index)


@dataclass(frozen=True, slots=True)
class _Put:
    namespace: str
    key: str
    value: bytes | None  # None: delete
    texts: list[tuple[str, str]]  # (field path, text) to embed


# -- the store ---------------------------------------------------------------------


class ContextStoreMemory(BaseStore):
    """LangGraph's long-term memory (`BaseStore`) in a pygents_ctx SQLite or PostgreSQL database.

    Pass it where an app passes LangGraph's `InMemoryStore`:
    `graph.compile(checkpointer=..., store=ContextStoreMemory(conn))`, `conn`
    from `await connect(path)` or `await connect_postgres(dsn)`: the same
    connection (and file or database) as the context stores and the
    checkpointer. With no connection it keeps everything in this process.
    Its table is created on first use.

    It keeps LangGraph's semantics: items under tuple namespaces, found by
    `get`, `search` (in a namespace and every namespace under it, with
    `filter`, `limit` and `offset`) and `list_namespaces` (prefix, suffix,
    `"*"` wildcards, `max_depth`). What differs from `InMemoryStore`, where
    `InMemoryStore` leaves it to chance:

    - Without a query, `search` returns the most recently updated items
      first (as LangGraph's SQLite and PostgreSQL stores do).
    - `created_at` is when the item was first put; a put updates only
      `updated_at`.
    - `list_namespaces` lists the namespaces that hold items (not those
      only looked in, or emptied).
    - A filter compares JSON values: `True` is not `1`; `$gt`, `$gte`,
      `$lt` and `$lte` hold between two numbers or two strings, never
      between a number and a string or a missing value.
    - A search with a `query` on a store without `index` raises a
      `ValueError` (LangGraph's stores ignore the query).
    - A put replaces the item's vectors: LangGraph's stores keep those of
      texts the new put does not embed (with `index=False`, all of them), so
      the item stayed found by its old text.

    With `index={"dims": ..., "embed": ..., "fields": [...]}` (LangGraph's
    `IndexConfig`), each put embeds the texts at `fields` (default `["$"]`,
    the whole value; a put's `index=[...]` names others, `index=False` none),
    and a search with a `query` ranks items by the cosine similarity of their
    best-matching text, best first, then the items with no vector (e.g. put
    with `index=False`), newest first. The vectors live in our vector store
    on the same connection (`SQLiteVectorStore`, `PostgresVectorStore` with
    pgvector, or `InMemoryVectorStore`), in a collection named
    `langgraph_store`. A text whose vector is all zeros has no direction and
    is not indexed.

    The async methods (`aput`, `asearch`, and a graph's `ainvoke`) run on the
    event loop the connection was opened on. The sync ones work from other
    threads while that loop runs (`await asyncio.to_thread(graph.invoke,
    ...)`), and raise on the loop's own thread. A store without a connection
    made outside a running loop runs its sync methods in a loop of its own.
    TTLs are not supported (`ttl=` raises `NotImplementedError`).

    Args:
        conn: A `SQLiteConnection` or `PostgresConnection`, or None to keep
            the items in this process.
        index: Embed and search items by meaning: `dims` (the vectors'
            length), `embed` (a LangChain `Embeddings`, a sync or async
            function of a list of texts, or a provider string) and `fields`.

    Raises:
        TypeError: `conn` is not one of our connections, or `index` is not
            a dict with `dims` and `embed`.
        ValueError: `index["dims"]` is below 1.
        RuntimeError: `conn` is given and no event loop is running (make the
            store inside `async def`).

    Examples:
        >>> import asyncio
        >>> from pygents_ctx.integrations.langgraph import ContextStoreMemory
        >>> async def main():
        ...     store = ContextStoreMemory()
        ...     await store.aput(("users", "u1"), "prefs", {"theme": "dark"})
        ...     found = await store.asearch(("users",), filter={"theme": "dark"})
        ...     return [(item.namespace, item.key) for item in found]
        >>> asyncio.run(main())
        [(('users', 'u1'), 'prefs')]
    """

    supports_ttl = False

    def __init__(
        self,
        conn: SQLiteConnection | PostgresConnection | None = None,
        *,
        index: IndexConfig | None = None,
    ) -> None:
        self._loop: asyncio.AbstractEventLoop | None
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        if conn is None:
            self._items: _MemoryItems | _TableItems = _MemoryItems()
            vectors: Callable[[], VectorStoreBase] = InMemoryVectorStore
        elif isinstance(conn, SQLiteConnection | PostgresConnection):
            if self._loop is None:
                raise RuntimeError(
                    "make ContextStoreMemory inside a running event loop (in `async def`), "
                    "the loop its connection was opened on"
                )
            if isinstance(conn, SQLiteConnection):
                self._items = _TableItems(SQLiteDatabase(conn, STORE_SCHEMA))
                vectors = partial(SQLiteVectorStore, conn)
            else:
                self._items = _TableItems(PostgresDatabase(conn, STORE_SCHEMA))
                vectors = partial(PostgresVectorStore, conn)
        else:
            raise TypeError(
                "ContextStoreMemory needs the connection from `await connect(path)` or "
                f"`await connect_postgres(dsn)`, or None, not {type(conn).__name__}"
            )
        self.conn = conn
        self.index_config: IndexConfig | None = None
        self.embeddings: Embeddings | None = None
        self._dims = 0
        self._fields: list[tuple[str, str | list[str]]] = []
        if index is not None:
            self._dims, self.embeddings, self._fields = _check_index_config(index)
            self.index_config = index
        # Also without an index: a put replacing an item another store indexed deletes
        # its vectors.
        self._vectors: VectorStoreBase = vectors()
        self._ready = False
        self._sync = threading.Lock()

    def __repr__(self) -> str:
        where = "in memory" if self.conn is None else repr(self.conn)
        indexed = f", index dims={self._dims}" if self.index_config else ""
        return f"ContextStoreMemory({where}{indexed})"

    async def setup(self) -> None:
        """Create the store's table (and vector collection), or bring them up to date.

        Run by the first call; calling it first only moves that work earlier.
        """
        if self._ready:
            return
        await self._items.setup()
        if self.index_config is not None:
            await self._vectors.create_collection(COLLECTION, self._dims)
        self._ready = True

    # -- batches ---------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in order of their results: the reads see the store before its writes.

        Every op is checked before any runs; the puts run last, the last put
        of an item winning (as in LangGraph's stores).

        Raises:
            InvalidNamespaceError: A namespace is not a tuple of non-empty
                labels without ".", or a put's is empty or starts with "langgraph".
            TypeError: A key is not a str, a value not a dict of JSON values,
                a filter not a dict, or `limit`/`offset` not an int.
            ValueError: A search has a query and the store no `index`, a
                filter an unknown operator, or `limit`/`offset` is negative.
            NotImplementedError: A put has a `ttl`.
        """
        checked = [self._check(op) for op in ops]
        latest = {(op.namespace, op.key): op for op in checked if isinstance(op, PutOp)}
        puts = [self._put(op) for op in latest.values()]  # the last put of an item wins
        await self.setup()
        results: list[Result] = []
        for op in checked:
            if isinstance(op, GetOp):
                namespace = ".".join(op.namespace)
                rows = await self._items.get([(namespace, op.key)])
                row = rows.get((namespace, op.key))
                results.append(None if row is None else row.item())
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            else:
                results.append(None)
        if puts:
            await self._write(puts)
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """`abatch`, from another thread than the store's event loop."""
        results: list[Result] = self._wait(self.abatch(list(ops)))
        return results

    def _check(self, op: object) -> Op:
        if not isinstance(op, GetOp | SearchOp | ListNamespacesOp | PutOp):
            raise TypeError(
                f"ContextStoreMemory runs GetOp, SearchOp, ListNamespacesOp and PutOp, not {op!r}"
            )
        if isinstance(op, GetOp | PutOp):
            _check_namespace(op.namespace, "a namespace")
            _check_key(op.key)
        elif isinstance(op, SearchOp):
            _check_namespace(op.namespace_prefix, "a search's namespace prefix")
        validate_op_namespace(op)
        if isinstance(op, SearchOp):
            whole_number(op.limit, "search limit")
            whole_number(op.offset, "search offset")
            _check_filter(op.filter)
            if op.query is not None:
                if not isinstance(op.query, str):
                    raise TypeError(f"a search query must be a str, not {op.query!r}")
                if self.index_config is None:
                    raise ValueError(
                        "this ContextStoreMemory has no index, so it cannot search by meaning: "
                        'make it with index={"dims": ..., "embed": ..., "fields": [...]}, '
                        "or search with filter= instead of query="
                    )
        elif isinstance(op, ListNamespacesOp):
            if op.max_depth is not None:
                whole_number(op.max_depth, "search max_depth")
            whole_number(op.limit, "search limit")
            whole_number(op.offset, "search offset")
            for condition in op.match_conditions or ():
                _check_namespace(condition.path, "a match condition's path")
                if condition.match_type not in ("prefix", "suffix"):
                    raise ValueError(
                        f'a match condition is "prefix" or "suffix", not {condition.match_type!r}'
                    )
        elif isinstance(op, PutOp):
            if op.value is not None:
                if not op.namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
                if op.namespace[0] == "langgraph":
                    raise InvalidNamespaceError(
                        f'Root label for namespace cannot be "langgraph". Got: {op.namespace}'
                    )
                if not isinstance(op.value, Mapping):
                    raise TypeError(
                        "an item's value must be a dict of JSON values (str keys), not "
                        f"{type(op.value).__name__}: wrap it, e.g. {{'value': ...}}"
                    )
                _check_index(op.index)
            if op.ttl is not None:
                raise NotImplementedError(
                    "TTL is not supported by ContextStoreMemory: put without ttl "
                    "(delete old items with store.delete)"
                )
        return op

    def _put(self, op: PutOp) -> _Put:
        namespace = ".".join(op.namespace)
        if op.value is None:
            return _Put(namespace, op.key, None, [])
        value = dumps(dict(op.value), f"the value of item {op.key!r}")
        texts: list[tuple[str, str]] = []
        if self.index_config is not None and op.index is not False:
            paths = (
                self._fields
                if op.index is None
                else [(path, tokenize_path(path)) for path in op.index]
            )
            for path, tokens in paths:
                found = get_text_at_path(op.value, tokens)
                for position, text in enumerate(found):
                    texts.append((f"{path}.{position}" if len(found) > 1 else path, text))
        return _Put(namespace, op.key, value, texts)

    # -- writing ---------------------------------------------------------------

    async def _write(self, puts: list[_Put]) -> None:
        now = _now()
        embedded = await self._embed_documents([text for put in puts for _, text in put.texts])
        vectors = iter(embedded)
        documents: list[VectorDocument] = []
        changes: list[Change] = []
        for put in puts:
            if put.value is None:
                changes.append((put.namespace, put.key, None))
                continue
            token = secrets.token_hex(8) if put.texts else ""
            count = 0
            prefixes = _prefixes(put.namespace.split("."))
            for path, text in put.texts:
                vector = next(vectors)
                if not any(vector):
                    continue  # no direction: not indexed
                documents.append(
                    VectorDocument(
                        f"{token}.{count}",
                        text,
                        {"ns": put.namespace, "key": put.key, "token": token, "path": path}
                        | prefixes,
                        tuple(vector),
                    )
                )
                count += 1
            row = _Row(put.namespace, put.key, put.value, now, now, token if count else "", count)
            changes.append((put.namespace, put.key, row))
        if documents:
            await self._vectors.upsert(COLLECTION, documents)
        replaced = await self._items.change(changes)
        stale = [
            f"{row.vectors}.{position}"
            for row in replaced
            if row is not None and row.vector_count
            for position in range(row.vector_count)
        ]
        if stale:
            with contextlib.suppress(CollectionNotFoundError):  # deleted by hand meanwhile
                await self._vectors.delete(COLLECTION, stale)

    async def _embed_documents(self, texts: list[str]) -> list[array[float]]:
        if not texts:
            return []
        assert self.embeddings is not None
        vectors = await self.embeddings.aembed_documents(texts)
        if len(vectors) != len(texts):
            raise ValueError(
                f"index['embed'] returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return [self._checked(vector, text) for vector, text in zip(vectors, texts, strict=True)]

    def _checked(self, vector: object, text: str) -> array[float]:
        """`vector` as 32-bit floats, if it is one of `dims` finite numbers (zeros allowed)."""
        what = f"the vector index['embed'] gave for {text[:40]!r}"
        if (
            isinstance(vector, Sized)
            and not isinstance(vector, str | bytes | Mapping)
            and len(vector) != self._dims
        ):
            raise ValueError(
                f"{what} has {len(vector)} numbers, but index['dims'] is {self._dims}: "
                "set dims to the embedding model's vector length"
            )
        return check_vector(vector, what, self._dims, allow_zero=True)

    # -- reading ---------------------------------------------------------------

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = ".".join(op.namespace_prefix) if op.namespace_prefix else None
        conditions = _check_filter(op.filter)
        wanted = op.offset + op.limit
        found: list[SearchItem] = []
        if op.query is not None:
            ranked = await self._ranked(op.query, op.namespace_prefix, conditions, wanted)
            found = [row.found(score) for row, score in ranked]
        if len(found) < wanted:  # then the items without a vector (all of them, without a query)
            rest = await self._rest(
                prefix,
                conditions,
                wanted - len(found),
                unscored=op.query is not None,
            )
            found += [row.found() for row in rest]
        return found[op.offset : wanted]

    async def _rest(
        self, prefix: str | None, conditions: dict[str, Any], count: int, *, unscored: bool
    ) -> list[_Row]:
        """The first `count` items in `prefix` meeting `conditions`, newest first."""
        if not conditions:
            return await self._items.scan(prefix, unscored=unscored, limit=count)
        return await self._items.first(
            prefix, partial(_kept, conditions=conditions), count, unscored=unscored
        )

    async def _ranked(
        self,
        query: str,
        prefix: tuple[str, ...],
        conditions: dict[str, Any],
        wanted: int,
    ) -> list[tuple[_Row, float]]:
        """The best `wanted` items with vectors, best first, each scored by its best vector."""
        assert self.embeddings is not None
        if wanted == 0:
            return []
        vector = self._checked(await self.embeddings.aembed_query(query), query)
        if not any(vector):
            return []
        under = {f"p{len(prefix)}": ".".join(prefix)} if prefix else None
        k = max(_FIRST_K, 2 * wanted)
        while True:
            hits = await self._vectors.search(COLLECTION, vector, k=k, filter=under)
            pairs = [(hit.metadata["ns"], hit.metadata["key"]) for hit in hits]
            rows = await self._items.get(pairs)
            best: dict[tuple[str, str], tuple[_Row, float]] = {}
            for hit, pair in zip(hits, pairs, strict=True):
                row = rows.get(pair)
                if pair in best or row is None or row.vectors != hit.metadata["token"]:
                    continue  # a lower score of the item, or a vector of a replaced value
                if _kept(row, conditions):
                    best[pair] = (row, hit.score)
            ranked = sorted(
                best.values(), key=lambda found: (-found[1], found[0].namespace, found[0].key)
            )
            if len(ranked) >= wanted or len(hits) < k:
                return ranked[:wanted]
            k *= 4

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [tuple(text.split(".")) for text in await self._items.namespaces()]
        conditions = op.match_conditions or ()
        kept = [ns for ns in namespaces if all(_fits(condition, ns) for condition in conditions)]
        if op.max_depth is not None:
            kept = list({ns[: op.max_depth] for ns in kept})
        kept.sort()
        return kept[op.offset : op.offset + op.limit]

    # -- the sync API ------------------------------------------------------------

    def _wait(self, coroutine: Awaitable[T]) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._loop is None:
            if running is not None:
                coroutine.close()  # type: ignore[attr-defined]
                raise RuntimeError(
                    "ContextStoreMemory's sync methods were called inside a running event "
                    "loop: use the async API (await store.aput(...), graph.ainvoke)"
                )
            with self._sync:  # a sync graph's nodes may call from several threads
                return asyncio.run(coroutine)  # type: ignore[arg-type]
        if running is self._loop:
            coroutine.close()  # type: ignore[attr-defined]
            raise RuntimeError(
                "ContextStoreMemory's sync methods wait for its event loop, and were called "
                "on it: use the async API (await store.aput(...), graph.ainvoke), or run the "
                "sync one in another thread (await asyncio.to_thread(graph.invoke, ...))"
            )
        if not self._loop.is_running():
            coroutine.close()  # type: ignore[attr-defined]
            raise RuntimeError(
                "ContextStoreMemory's event loop is not running, and its sync methods run "
                "there: call them while the loop that made the store runs"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()  # type: ignore[arg-type]


def _prefixes(labels: Sequence[str]) -> dict[str, str]:
    """A vector's metadata naming each prefix of its item's namespace: `p2` is its first two
    labels joined, so a search under a prefix is one equality filter."""
    return {f"p{depth}": ".".join(labels[:depth]) for depth in range(1, len(labels) + 1)}


def _fits(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(want in ("*", have) for want, have in zip(path, part, strict=True))


def _check_index_config(index: object) -> tuple[int, Embeddings, list[tuple[str, str | list[str]]]]:
    if not isinstance(index, Mapping):
        raise TypeError(
            'index must be a dict: {"dims": 1536, "embed": ..., "fields": ["text"]}, '
            f"not {index!r}"
        )
    dims = index.get("dims")
    dims = whole_number(dims, "index['dims']", least=1, fix="the vectors' length")
    if index.get("embed") is None:
        raise TypeError(
            "index['embed'] is missing: pass LangChain Embeddings, a function of a list "
            "of texts returning their vectors, or a provider string"
        )
    fields = index.get("fields") or ["$"]
    if isinstance(fields, str) or not isinstance(fields, list | tuple):
        raise TypeError(f"index['fields'] must be a list of field paths, not {fields!r}")
    for path in fields:
        if not isinstance(path, str) or not path:
            raise TypeError(f"index['fields'] must hold field paths (non-empty str), not {path!r}")
    tokenized: list[tuple[str, str | list[str]]] = [
        (path, path if path == "$" else tokenize_path(path)) for path in fields
    ]
    return dims, ensure_embeddings(index["embed"]), tokenized
