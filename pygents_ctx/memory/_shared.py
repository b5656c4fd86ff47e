"""What the memory stores share: key checks, JSON properties, and tables made on first use.

The database backends run on the connections the context stores open
(`connect()` / `connect_postgres()`), so one database file or server holds a
conversation and everything the agent remembers beside it. Each kind of
memory store keeps its tables' schema version in a table of its own, and
creates or upgrades its tables the first time a store object uses them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import orjson

from pygents_ctx._checks import storable_text
from pygents_ctx._json import dumps
from pygents_ctx.context.stores._postgres_schema import migrate as migrate_postgres
from pygents_ctx.context.stores._sqlite_ops import in_transaction
from pygents_ctx.context.stores._sqlite_schema import migrate as migrate_sqlite
from pygents_ctx.context.stores._worker import SQLiteConnection
from pygents_ctx.context.stores.postgres import PostgresConnection

if TYPE_CHECKING:
    pass

__all__ = [
    "MAX_KEY_LENGTH",
    "AnyTables",
    "Migrations",
    "OnPostgres",
    "OnSQLite",
    "PostgresTables",
    "SQLiteTables",
    "check_key",
    "decode_properties",
    "encode_properties",
    "from_iso",
    "in_utc",
    "to_iso",
    "utc_now",
]


MAX_KEY_LENGTH: Final = 1024

# A store's migrations: the statements of each schema version, oldest first.
Migrations = Sequence[Sequence[str]]


def check_key(what: str, value: object) -> str:
    """Return `value` if it can name something in every backend: a non-empty str.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty, longer than 1,024 characters, holds a NUL
            character (PostgreSQL text cannot), or a lone surrogate (not UTF-8).
    """
    key = storable_text(value, what)
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(
            f"{what} is {len(key)} characters long; keep it to {MAX_KEY_LENGTH} at most"
        )
    return key


def encode_properties(properties: object, owner: str) -> tuple[dict[str, Any], bytes]:
    """Check `properties` and return them as a fresh dict and as the JSON stored.

    The dict is read back from the JSON, so it holds only what every backend
    gives back (a tuple becomes a list) and shares nothing with the caller's.

    Raises:
        TypeError: `properties` is not a mapping with str keys, or holds a
            value JSON cannot hold (the message names the field).
    """
    if not isinstance(properties, Mapping):
        raise TypeError(f"{owner} must be a mapping of str to JSON values, not {properties!r}")
    encoded = dumps(dict(properties), owner)
    return orjson.loads(encoded), encoded


def decode_properties(data: bytes) -> dict[str, Any]:
    """Stored JSON back into a properties dict."""
    value: dict[str, Any] = orjson.loads(data)
    return value


def utc_now() -> datetime:
    """The current time, in UTC."""
    return datetime.now(UTC)


def to_iso(moment: datetime) -> str:
    """A time as a SQLite backend stores it: ISO 8601 text, to the microsecond."""
    return moment.isoformat(timespec="microseconds")


def from_iso(text: str) -> datetime:
    """A time stored by a SQLite backend (ISO 8601 in UTC) back into a datetime."""
    return datetime.fromisoformat(text)


def in_utc(moment: datetime) -> datetime:
    """A time a PostgreSQL backend read back (a `timestamptz`, in the session's zone) in UTC."""
    return moment.astimezone(UTC)


C = TypeVar("C", SQLiteConnection, PostgresConnection)


class _Tables(Generic[C]):
    """Runs calls on a connection, the first one after making sure a set of tables exists.

    `run`, `transaction` and `snapshot` are written once; a dialect says how
    a call is preceded by the migration (`_after`) and how it runs in a
    transaction (`_within`): the calls are plain functions of a
    `sqlite3.Connection` run on the worker thread, or coroutine functions of
    psycopg's connection.

    Args:
        conn: The connection.
        owner: The store's class name, for the error message.
        migrations: The steps that build the tables, oldest first.
        table: Where their schema version is kept.
        label: Names the schema in `StoreSchemaError`.

    Raises:
        TypeError: `conn` is not the kind of connection the store runs on.
    """

    __slots__ = ("_conn", "_migrate", "_ready")

    _kind: type[C]
    _opener: str  # how to open a connection of that kind, for the error message
    _migrator: Callable[..., Any]
    # (first, fn, db): the migration, then fn; (fn, db, *, snapshot): fn in a transaction.
    _after: Callable[..., Any]
    _within: Callable[..., Any]

    def __init__(
        self,
        conn: object,
        owner: str,
        migrations: Migrations,
        table: str,
        label: str,
    ) -> None:
        if not isinstance(conn, self._kind):
            raise TypeError(
                f"{owner} needs the connection from `{self._opener}`, not {type(conn).__name__}"
            )
        self._conn: C = conn
        self._migrate = partial(
            type(self)._migrator, migrations=migrations, table=table, label=label
        )
        self._ready = False

    @property
    def connection(self) -> C:
        """The connection the calls run on."""
        return self._conn

    async def run(self, fn: Callable[[Any], Any]) -> Any:
        """`fn` on the connection (see `SQLiteConnection.run`, `PostgresConnection.run`).

        Raises:
            StoreClosedError: The connection is closed (or, PostgreSQL, was lost).
            StoreSchemaError: The tables were made by a newer pygents_ctx.
        """
        if self._ready:
            return await self._conn.run(fn)
        result = await self._conn.run(partial(self._after, self._migrate, fn))
        self._ready = True
        return result

    async def transaction(self, fn: Callable[[Any], Any]) -> Any:
        """`fn` in one write transaction: committed if it returns, else rolled back."""
        return await self.run(partial(self._within, fn, snapshot=False))

    async def snapshot(self, fn: Callable[[Any], Any]) -> Any:
        """`fn` in one read transaction: every read it makes sees the same data."""
        return await self.run(partial(self._within, fn, snapshot=True))


class SQLiteTables(_Tables[SQLiteConnection]):
    """`_Tables` on a `SQLiteConnection` (from `await connect(path)`).

    A write transaction is `BEGIN IMMEDIATE` (SQLite lets one writer in at a
    time, across processes); a snapshot is a deferred `BEGIN`.
    """

    __slots__ = ()

    _kind = SQLiteConnection
    _opener = "await connect(path)"
    _migrator = staticmethod(migrate_sqlite)

    @property
    def where(self) -> str:
        """The database file's path (what a store's repr shows)."""
        return self._conn.path

    @staticmethod
    def _after(first: Callable[[Any], Any], fn: Callable[[Any], Any], db: Any) -> Any:
        first(db)
        return fn(db)

    @staticmethod
    def _within(fn: Callable[[Any], Any], db: Any, *, snapshot: bool) -> Any:
        return in_transaction(db, fn, "BEGIN" if snapshot else "BEGIN IMMEDIATE")


class PostgresTables(_Tables[PostgresConnection]):
    """`_Tables` on a `PostgresConnection` (from `await connect_postgres(dsn)`).

    A snapshot is a repeatable-read transaction.
    """

    __slots__ = ()

    _kind = PostgresConnection
    _opener = "await connect_postgres(dsn)"
    _migrator = staticmethod(migrate_postgres)

    @property
    def where(self) -> str:
        """The server and database, without the password (what a store's repr shows)."""
        return self._conn.target

    @staticmethod
    async def _after(first: Callable[[Any], Any], fn: Callable[[Any], Any], db: Any) -> Any:
        await first(db)
        return await fn(db)

    @staticmethod
    async def _within(fn: Callable[[Any], Any], db: Any, *, snapshot: bool) -> Any:
        async with db.transaction():
            if snapshot:
                await db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return await fn(db)


AnyTables = TypeVar("AnyTables", SQLiteTables, PostgresTables)


class OnSQLite:
    """A store that runs on a SQLite connection through `self._tables`."""

    __slots__ = ()

    _tables: SQLiteTables

    @property
    def connection(self) -> SQLiteConnection:
        """The connection this store runs on (shared: whoever opened it closes it)."""
        return self._tables.connection


class OnPostgres:
    """A store that runs on a PostgreSQL connection through `self._tables`."""

    __slots__ = ()

    _tables: PostgresTables

    @property
    def connection(self) -> PostgresConnection:
        """The connection this store runs on (shared: whoever opened it closes it)."""
        return self._tables.connection
