"""The tables of the LangGraph checkpointer, and the statements it runs, on SQLite and PostgreSQL.

The checkpointer's tables live beside the context stores' in the same
database, with a schema version of their own (`pygents_langgraph_schema`),
brought up to date by the stores' migration mechanism when the saver is
first used. Every table is keyed by thread id first:

- `pygents_lg_checkpoints`: one row per checkpoint: its parent's id, the run
  id from its metadata, and the checkpoint without its channel values and its
  metadata, each as the serializer's (type, bytes).
- `pygents_lg_versions`: the channel versions a checkpoint holds, one row per
  channel (what joins a checkpoint to its values, and what keeps a value
  alive when old checkpoints are pruned).
- `pygents_lg_blobs`: a channel's value at one version: the serializer's
  bytes, or, for a list of messages, no bytes and its `pygents_lg_ranges`.
- `pygents_lg_segments` and `pygents_lg_messages`: each message of a thread,
  stored once, at a position of a segment (a run of messages appended one
  after the other); `pygents_lg_ranges` says which runs of which segments a
  message list is made of, so a turn that adds two messages to a list of
  2,000 writes two messages and one range.
- `pygents_lg_writes`: the pending writes of a checkpoint's tasks. LangGraph
  may store a task's writes before the checkpoint they belong to, so they
  have no foreign key: each deletion of checkpoints deletes theirs itself.

The long-term memory store (`ContextStoreMemory`) keeps its items in one more
table, `pygents_lg_store`, with a schema version of its own
(`pygents_langgraph_store_schema`): a store alone makes no checkpointer tables.

A checkpoint's versions go with it (a foreign key, ON DELETE CASCADE); a
value no checkpoint holds and a segment no range uses are deleted by
`garbage()`'s statements, run after every deletion.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from pygents_ctx.context.stores._postgres_schema import migrate as _postgres_migrate
from pygents_ctx.context.stores._sqlite_ops import in_transaction
from pygents_ctx.context.stores._sqlite_schema import migrate as _sqlite_migrate

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from pygents_ctx.context.stores import PostgresConnection, SQLiteConnection

__all__ = [
    "MESSAGES",
    "POSTGRES_MIGRATIONS",
    "SCHEMA_TABLE",
    "SQLITE_MIGRATIONS",
    "STORE_SCHEMA",
    "PostgresDatabase",
    "SQLiteDatabase",
    "Schema",
    "garbage",
]

SCHEMA_TABLE: Final = "pygents_langgraph_schema"
# The blob type of a message list whose messages are in pygents_lg_ranges.
MESSAGES: Final = "pygents.messages"


def _tables(text: str, integer: str, blob: str) -> tuple[str, ...]:
    return (
        f"""
        CREATE TABLE pygents_lg_checkpoints (
            thread_id       {text}    NOT NULL,
            checkpoint_ns   {text}    NOT NULL,
            checkpoint_id   {text}    NOT NULL,
            parent_id       {text},
            run_id          {text},
            checkpoint_type {text}    NOT NULL,
            checkpoint      {blob}    NOT NULL,
            metadata_type   {text}    NOT NULL,
            metadata        {blob}    NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        )
        """,
        "CREATE INDEX pygents_lg_checkpoints_by_run ON pygents_lg_checkpoints (run_id)",
        f"""
        CREATE TABLE pygents_lg_versions (
            thread_id     {text} NOT NULL,
            checkpoint_ns {text} NOT NULL,
            checkpoint_id {text} NOT NULL,
            channel       {text} NOT NULL,
            version       {text} NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, channel),
            FOREIGN KEY (thread_id, checkpoint_ns, checkpoint_id)
                REFERENCES pygents_lg_checkpoints ON DELETE CASCADE
        )
        """,
        """
        CREATE INDEX pygents_lg_versions_by_value
            ON pygents_lg_versions (thread_id, checkpoint_ns, channel, version)
        """,
        f"""
        CREATE TABLE pygents_lg_blobs (
            thread_id     {text} NOT NULL,
            checkpoint_ns {text} NOT NULL,
            channel       {text} NOT NULL,
            version       {text} NOT NULL,
            type          {text} NOT NULL,
            data          {blob} NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )
        """,
        f"""
        CREATE TABLE pygents_lg_segments (
            thread_id {text}    NOT NULL,
            segment   {integer} NOT NULL,
            PRIMARY KEY (thread_id, segment)
        )
        """,
        f"""
        CREATE TABLE pygents_lg_messages (
            thread_id {text}    NOT NULL,
            segment   {integer} NOT NULL,
            position  {integer} NOT NULL,
            type      {text}    NOT NULL,
            data      {blob}    NOT NULL,
            PRIMARY KEY (thread_id, segment, position),
            FOREIGN KEY (thread_id, segment) REFERENCES pygents_lg_segments ON DELETE CASCADE
        )
        """,
        f"""
        CREATE TABLE pygents_lg_ranges (
            thread_id     {text}    NOT NULL,
            checkpoint_ns {text}    NOT NULL,
            channel       {text}    NOT NULL,
            version       {text}    NOT NULL,
            seq           {integer} NOT NULL,
            segment       {integer} NOT NULL,
            start         {integer} NOT NULL,
            stop          {integer} NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version, seq),
            FOREIGN KEY (thread_id, checkpoint_ns, channel, version)
                REFERENCES pygents_lg_blobs ON DELETE CASCADE,
            FOREIGN KEY (thread_id, segment) REFERENCES pygents_lg_segments
        )
        """,
        "CREATE INDEX pygents_lg_ranges_by_segment ON pygents_lg_ranges (thread_id, segment)",
        f"""
        CREATE TABLE pygents_lg_writes (
            thread_id     {text}    NOT NULL,
            checkpoint_ns {text}    NOT NULL,
            checkpoint_id {text}    NOT NULL,
            task_id       {text}    NOT NULL,
            idx           {integer} NOT NULL,
            channel       {text}    NOT NULL,
            type          {text}    NOT NULL,
            data          {blob}    NOT NULL,
            task_path     {text}    NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )
        """,
    )


SQLITE_MIGRATIONS: Final = (_tables("TEXT", "INTEGER", "BLOB"),)
POSTGRES_MIGRATIONS: Final = (_tables("text", "bigint", "bytea"),)


class Schema(NamedTuple):
    """A set of tables: its migrations on each database, where its version is kept, its name."""

    sqlite: tuple[tuple[str, ...], ...]
    postgres: tuple[tuple[str, ...], ...]
    table: str
    label: str


def _store_tables(text: str, integer: str) -> tuple[str, ...]:
    # The long-term memory store's items (ContextStoreMemory): a namespace is its labels
    # joined by "." (LangGraph refuses a label holding one), a value its JSON, a time
    # microseconds since 1970 in UTC; `vectors` is the token in the ids of the item's
    # vectors in the vector store ('' when it has none) and `vector_count` their number.
    return (
        f"""
        CREATE TABLE pygents_lg_store (
            namespace    {text}    NOT NULL,
            key          {text}    NOT NULL,
            value        {text}    NOT NULL,
            created_at   {integer} NOT NULL,
            updated_at   {integer} NOT NULL,
            vectors      {text}    NOT NULL,
            vector_count {integer} NOT NULL,
            PRIMARY KEY (namespace, key)
        )
        """,
        "CREATE INDEX pygents_lg_store_by_time ON pygents_lg_store (updated_at)",
    )


CHECKPOINT_SCHEMA: Final = Schema(SQLITE_MIGRATIONS, POSTGRES_MIGRATIONS, SCHEMA_TABLE, "LangGraph")
STORE_SCHEMA: Final = Schema(
    (_store_tables("TEXT", "INTEGER"),),
    (_store_tables("text", "bigint"),),
    "pygents_langgraph_store_schema",
    "LangGraph store",
)


def garbage(thread_id: str) -> list[tuple[str, tuple[object, ...]]]:
    """The statements deleting `thread_id`'s unheld values, then its unused segments."""
    return [
        (
            """
            DELETE FROM pygents_lg_blobs WHERE thread_id = ? AND NOT EXISTS (
                SELECT 1 FROM pygents_lg_versions v
                WHERE v.thread_id = pygents_lg_blobs.thread_id
                  AND v.checkpoint_ns = pygents_lg_blobs.checkpoint_ns
                  AND v.channel = pygents_lg_blobs.channel
                  AND v.version = pygents_lg_blobs.version
            )
            """,
            (thread_id,),
        ),
        (
            """
            DELETE FROM pygents_lg_segments WHERE thread_id = ? AND NOT EXISTS (
                SELECT 1 FROM pygents_lg_ranges r
                WHERE r.thread_id = pygents_lg_segments.thread_id
                  AND r.segment = pygents_lg_segments.segment
            )
            """,
            (thread_id,),
        ),
    ]


Steps = list[tuple[str, Sequence[tuple[object, ...]]]]  # each statement with its rows of parameters
Queries = list[tuple[str, tuple[object, ...]]]


def _sqlite_rows(queries: Queries, db: sqlite3.Connection) -> list[list[tuple[Any, ...]]]:
    """The rows each of `queries` returns (none for a write), run in turn on `db`."""
    return [db.execute(sql, params).fetchall() for sql, params in queries]


class SQLiteDatabase:
    """The statements on a `SQLiteConnection`: each batch in one job of its worker thread."""

    # What a write transaction runs to have a row (named by one text) to itself until it
    # ends, even a row not there yet; None: SQLite's BEGIN IMMEDIATE keeps every other
    # writer out of the whole database.
    row_lock: Final[str | None] = None

    def __init__(self, conn: SQLiteConnection, schema: Schema = CHECKPOINT_SCHEMA) -> None:
        self.conn = conn
        self.schema = schema
        self.integrity_errors: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)

    async def setup(self) -> None:
        schema = self.schema
        await self.conn.run(
            partial(
                _sqlite_migrate, migrations=schema.sqlite, table=schema.table, label=schema.label
            )
        )

    async def write(self, steps: Steps) -> None:
        """Run `steps` in one `BEGIN IMMEDIATE` transaction: all of them or none."""

        def work(db: sqlite3.Connection) -> None:
            for sql, rows in steps:
                if rows:
                    db.executemany(sql, rows)

        await self.conn.run(partial(in_transaction, work=work))

    async def exchange(self, queries: Queries) -> list[list[tuple[Any, ...]]]:
        """Run `queries` in one `BEGIN IMMEDIATE` transaction; the rows each returned."""
        work = partial(_sqlite_rows, queries)
        return await self.conn.run(partial(in_transaction, work=work))

    async def read(self, queries: Queries) -> list[list[tuple[Any, ...]]]:
        """The rows of each query, all read in one transaction (one moment of the database)."""
        work = partial(_sqlite_rows, queries)
        return await self.conn.run(partial(in_transaction, work=work, begin="BEGIN"))

    async def first(
        self,
        sql: str,
        params: tuple[object, ...],
        keep: Callable[[tuple[Any, ...]], bool],
        count: int,
    ) -> list[tuple[Any, ...]]:
        """The first `count` rows of the query that `keep` keeps: the rest are not read."""

        def work(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
            kept = (row for row in db.execute(sql, params) if keep(row))
            return list(islice(kept, count))

        return await self.conn.run(partial(in_transaction, work=work, begin="BEGIN"))


class PostgresDatabase:
    """The statements on a `PostgresConnection`: each batch in one transaction."""

    row_lock: Final[str | None] = "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))"

    def __init__(self, conn: PostgresConnection, schema: Schema = CHECKPOINT_SCHEMA) -> None:
        import psycopg

        self.conn = conn
        self.schema = schema
        self.integrity_errors = (psycopg.errors.IntegrityError,)

    async def setup(self) -> None:
        schema = self.schema
        await self.conn.run(
            partial(
                _postgres_migrate,
                migrations=schema.postgres,
                table=schema.table,
                label=schema.label,
            )
        )

    async def write(self, steps: Steps) -> None:
        """Run `steps` in one transaction: all of them or none."""

        async def work(db: AsyncConnection[Any]) -> None:
            async with db.transaction(), db.cursor() as cursor:
                for sql, rows in steps:
                    if rows:
                        await cursor.executemany(_postgres(sql), rows)

        await self.conn.run(work)

    async def exchange(self, queries: Queries) -> list[list[tuple[Any, ...]]]:
        """Run `queries` in one transaction; the rows each returned (none for a write)."""

        async def work(db: AsyncConnection[Any]) -> list[list[tuple[Any, ...]]]:
            found: list[list[tuple[Any, ...]]] = []
            async with db.transaction(), db.cursor() as cursor:
                for sql, params in queries:
                    await cursor.execute(_postgres(sql), params)
                    rows = await cursor.fetchall() if cursor.description is not None else []
                    found.append([tuple(row) for row in rows])
            return found

        return await self.conn.run(work)

    async def read(self, queries: Queries) -> list[list[tuple[Any, ...]]]:
        """The rows of each query, all read in one REPEATABLE READ transaction."""

        async def work(db: AsyncConnection[Any]) -> list[list[tuple[Any, ...]]]:
            found = []
            async with db.transaction(), db.cursor() as cursor:
                await cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                for sql, params in queries:
                    await cursor.execute(_postgres(sql), params)
                    found.append([tuple(row) for row in await cursor.fetchall()])
            return found

        return await self.conn.run(work)

    async def first(
        self,
        sql: str,
        params: tuple[object, ...],
        keep: Callable[[tuple[Any, ...]], bool],
        count: int,
    ) -> list[tuple[Any, ...]]:
        """The first `count` rows of the query that `keep` keeps (all read: one round trip)."""
        (rows,) = await self.read([(sql, params)])
        return list(islice((row for row in rows if keep(row)), count))


def _postgres(sql: str) -> str:
    # The statements are written with SQLite's placeholder and hold no other "?".
    return sql.replace("?", "%s")
