"""Where the viewer reads: a SQLite file opened read-only, or a PostgreSQL database.

Every page reads inside one read-only transaction (`Source.reading()`), so it
sees one consistent state of a store that another process keeps writing to,
and can never change it: SQLite is opened with the `mode=ro` URI, PostgreSQL
sessions are `READ ONLY` transactions at `REPEATABLE READ`.

The SQL is written once, with `?` placeholders; the PostgreSQL source turns
them into psycopg's `%s`, and `Reading.contains` says "this blob holds these
bytes" in each dialect.
"""

from __future__ import annotations

import queue
import re
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

from pygents_ctx.cli._db import CliError, check_database

__all__ = [
    "PostgresSource",
    "Reading",
    "SQLiteSource",
    "Source",
    "as_bytes",
    "as_text",
    "open_source",
]

_POSTGRES_EXTRA: Final = "pip install 'psycopg[binary]' (the postgres extra)"
_URL_PASSWORD: Final = re.compile(r"(://[^:/@]*:)[^@]*@")
_KEY_PASSWORD: Final = re.compile(r"(password=)\S+")


def as_text(value: Any) -> str:
    """A column as text: PostgreSQL's `bytea` previews and `timestamptz` times included."""
    if value is None:
        return ""
    if isinstance(value, bytes | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds")
    return str(value)


def as_bytes(value: Any) -> bytes:
    """A BLOB or `bytea` column as bytes."""
    return (
        bytes(value) if isinstance(value, bytes | memoryview | bytearray) else bytes(value, "utf-8")
    )


class Reading(Protocol):
    """One read-only transaction: run queries, see one state of the database."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows `sql` (with `?` placeholders) returns."""
        ...

    def contains(self, column: str) -> str:
        """SQL true when the BLOB `column` holds the bytes of the next parameter."""
        ...

    def tables(self) -> frozenset[str]:
        """The names of the tables the database has."""
        ...

    def columns(self, table: str) -> frozenset[str]:
        """The names of the columns of `table` (none when there is no such table)."""
        ...


class Source(Protocol):
    """A database the viewer reads, and the name to show for it."""

    name: str

    def reading(self) -> Any:
        """A context manager giving a `Reading`."""
        ...

    def close(self) -> None:
        """Close what the source keeps open."""
        ...


class _Catalog(ABC):
    """A reading's tables and columns, each read once: a page reads one snapshot of the
    database, so they cannot change while it is made."""

    def __init__(self) -> None:
        self._tables: frozenset[str] | None = None
        self._columns: dict[str, frozenset[str]] = {}

    def tables(self) -> frozenset[str]:
        if self._tables is None:
            self._tables = self._read_tables()
        return self._tables

    def columns(self, table: str) -> frozenset[str]:
        found = self._columns.get(table)
        if found is None:
            found = self._columns[table] = self._read_columns(table)
        return found

    @abstractmethod
    def _read_tables(self) -> frozenset[str]:
        """Read from the database."""

    @abstractmethod
    def _read_columns(self, table: str) -> frozenset[str]:
        """Read from the database."""

    @abstractmethod
    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Read from the database."""


class _SQLiteReading(_Catalog):
    def __init__(self, db: sqlite3.Connection) -> None:
        super().__init__()
        self.db = db

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.db.execute(sql, tuple(params)).fetchall()

    def contains(self, column: str) -> str:
        return f"instr({column}, ?) > 0"

    def _read_tables(self) -> frozenset[str]:
        found = self.rows("SELECT name FROM sqlite_master WHERE type = 'table'")
        return frozenset(name for (name,) in found)

    def _read_columns(self, table: str) -> frozenset[str]:
        found = self.rows("SELECT name FROM pragma_table_info(?)", [table])
        return frozenset(name for (name,) in found)


class SQLiteSource:
    """A pygents_ctx SQLite file, opened read-only (`mode=ro`) for each page."""

    def __init__(self, path: str) -> None:
        check_database(path)  # the command line's own errors: missing, foreign, a directory
        self.name = path
        self._uri = Path(path).absolute().as_uri() + "?mode=ro"

    @contextmanager
    def reading(self) -> Iterator[Reading]:
        try:
            db = sqlite3.connect(self._uri, uri=True, timeout=5.0, check_same_thread=False)
        except sqlite3.OperationalError as exc:  # deleted or moved since the start
            raise CliError(f"cannot read {self.name!r}: {exc}") from None
        try:
            db.execute("BEGIN")  # one snapshot for the whole page, even mid-write elsewhere
            yield _SQLiteReading(db)
        finally:
            db.close()

    def close(self) -> None:
        pass


class _PostgresReading(_Catalog):
    def __init__(self, conn: Any) -> None:
        super().__init__()
        self.conn = conn

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.conn.execute(sql.replace("?", "%s"), tuple(params))
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []

    def contains(self, column: str) -> str:
        return f"position(? in {column}) > 0"

    def _read_tables(self) -> frozenset[str]:
        found = self.rows(
            "SELECT tablename FROM pg_tables WHERE schemaname = ANY (current_schemas(false))"
        )
        return frozenset(name for (name,) in found)

    def _read_columns(self, table: str) -> frozenset[str]:
        found = self.rows(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "AND table_schema = ANY (current_schemas(false))",
            [table],
        )
        return frozenset(str(name) for (name,) in found)


class PostgresSource:
    """A PostgreSQL database read through psycopg (the `postgres` extra), read-only.

    Connections are kept for the next page; each page is one `READ ONLY`,
    `REPEATABLE READ` transaction, rolled back at its end.
    """

    def __init__(self, dsn: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise CliError(f"--dsn needs psycopg: {_POSTGRES_EXTRA}") from None
        self._psycopg = psycopg
        self._dsn = dsn
        self.name = _KEY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", dsn))
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        with self.reading() as reading:
            found = reading.rows("SELECT to_regclass('pygents_sessions') IS NOT NULL")
        if not found or not found[0][0]:
            self.close()
            raise CliError(
                f"the PostgreSQL database {self.name!r} is not a pygents_ctx store (no sessions)"
            )

    def _connect(self) -> Any:
        try:
            conn = self._psycopg.connect(self._dsn)
        except self._psycopg.Error as exc:
            raise CliError(f"cannot connect to {self.name!r}: {exc}".strip()) from None
        conn.read_only = True
        conn.isolation_level = self._psycopg.IsolationLevel.REPEATABLE_READ
        return conn

    @contextmanager
    def reading(self) -> Iterator[Reading]:
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self._connect()
        try:
            yield _PostgresReading(conn)
        except self._psycopg.OperationalError as exc:  # the server went away, say
            conn.close()
            raise CliError(f"cannot read {self.name!r}: {exc}".strip()) from None
        except BaseException:
            conn.close()
            raise
        conn.rollback()
        self._idle.put(conn)

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


def open_source(db: str | None, dsn: str | None) -> Source:
    """The source `--dsn` names, else the SQLite file `--db` names; checked now.

    Raises:
        CliError: A missing file, a directory, a file that is not a pygents_ctx
            store, a database that cannot be reached, or psycopg missing.
    """
    if dsn is not None:
        return PostgresSource(dsn)
    assert db is not None
    return SQLiteSource(db)
