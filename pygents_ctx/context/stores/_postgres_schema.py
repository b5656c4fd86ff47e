"""The PostgreSQL schema of the context stores, and the migrations that build it on open.

`MIGRATIONS[n]` takes a database from schema version `n` to `n + 1`; the
version lives in the one-row table `pygents_schema`. Opening runs the missing
steps in one transaction (PostgreSQL's DDL is transactional, so a failed step
leaves the old version whole) while holding an advisory lock, so processes
opening a new database at once migrate it once. A database newer than this code is
refused rather than misread.

Tables are created unqualified, in the first schema of the connection's
`search_path` (`public` by default; `options=-c search_path=...` in the DSN
picks another).

- `pygents_sessions`: one row per session: `created_at` (the server's clock),
  the provider's token usage, counters kept by the store's statements
  (`message_count`, `live_tokens`, `next_position`, `preview`), and
  `generation`, bumped by every change other than an append so readers know
  to drop their cached history. `id` breaks ties between equal `created_at`.
- `pygents_messages`: the live history; `position` orders a session's messages
  and is unique within it. Appends take `next_position`; `replace_prefix` puts
  its messages just before the first one it keeps (positions may go negative).
- `pygents_archive`: messages `replace_prefix` took out, in the order they left.
- `pygents_usage`: one row per model call whose usage was recorded, in order;
  a sub-agent's call says where it came from (version 8: `parent_session`,
  `call_id`, `subagent_session`, indexed by the calling session and call),
  and what a reasoning model spent thinking (version 9: `reasoning_tokens`),
  and the window it was sent (version 10: `window_record`, see `_usage_sql`).
- Version 6 adds to the live history and the archive `message_id` (from the
  sequence `pygents_message_ids`, kept when a message is archived) and
  `search`, the `tsvector` that `search` looks in (see `_search_sql`);
  version 14 indexes each session's `message_id`s (`messages_after`).
- The tables `_sqlite_schema` describes for the lease, forks, running counts,
  decisions, journal and checkpoints, the same on both (see each table's
  `_*_sql` module), came here in these versions: `pygents_leases` (3),
  `pygents_forks` (4), `running` and `running_end` (5), `pygents_decisions`
  (7), `pygents_journal` (12), `pygents_checkpoints` and
  `pygents_checkpoint_data` (13).

Messages are `bytea` holding the same orjson bytes as the SQLite store, and
previews are `bytea` of UTF-8: PostgreSQL `text` and `jsonb` cannot hold the
NUL character, which a message may contain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores import _decisions_sql as decisions_sql
from pygents_ctx.context.stores import _journal_sql as journal_sql
from pygents_ctx.context.stores import _lease_sql as lease_sql
from pygents_ctx.context.stores._search_sql import POSTGRES_INDEX, POSTGRES_MESSAGE_IDS
from pygents_ctx.context.stores._usage_sql import (
    LINKS,
    POSTGRES_REASONING,
    POSTGRES_TABLE,
    WINDOW,
)
from pygents_ctx.errors import StoreSchemaError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "StoreSchemaError", "migrate"]

_V1: Final = (
    """
    CREATE TABLE pygents_sessions (
        session_id    text        NOT NULL PRIMARY KEY,
        id            bigint      GENERATED ALWAYS AS IDENTITY,
        created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
        input_tokens  bigint      NOT NULL DEFAULT 0,
        output_tokens bigint      NOT NULL DEFAULT 0,
        message_count bigint      NOT NULL DEFAULT 0,
        live_tokens   bigint      NOT NULL DEFAULT 0,
        next_position bigint      NOT NULL DEFAULT 0,
        generation    bigint      NOT NULL DEFAULT 0,
        preview       bytea       NOT NULL DEFAULT ''
    )
    """,
    "CREATE INDEX pygents_sessions_by_created ON pygents_sessions (created_at, id)",
    """
    CREATE TABLE pygents_messages (
        session_id text    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        position   bigint  NOT NULL,
        run_id     text,
        tokens     integer NOT NULL,
        preview    bytea,
        data       bytea   NOT NULL,
        PRIMARY KEY (session_id, position)
    )
    """,
    """
    CREATE INDEX pygents_messages_by_run ON pygents_messages (session_id, run_id)
    WHERE run_id IS NOT NULL
    """,
    """
    CREATE TABLE pygents_archive (
        id         bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id text    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        run_id     text,
        tokens     integer NOT NULL,
        preview    bytea,
        data       bytea   NOT NULL
    )
    """,
    "CREATE INDEX pygents_archive_by_session ON pygents_archive (session_id, id)",
)

# Version 4: forks share their source's rows instead of copying them (see `_lineage`).
# The source's foreign key is checked at the commit: a source cannot be deleted
# alone while a fork reads it, but both can go together (the fork's lineage rows
# go with the fork, whichever order the deletes run in).
_V4: Final = (
    """
    CREATE TABLE pygents_forks (
        session_id   text   NOT NULL
                     REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        source_id    text   NOT NULL REFERENCES pygents_sessions (session_id)
                     DEFERRABLE INITIALLY DEFERRED,
        live_from    bigint NOT NULL,
        live_upto    bigint NOT NULL,
        archive_upto bigint NOT NULL,
        PRIMARY KEY (session_id, source_id)
    )
    """,
    "CREATE INDEX pygents_forks_by_source ON pygents_forks (source_id)",
)

# Version 5: each live row's `running` token count, so the tokens of any stretch of a
# history are two indexed lookups (what a fork in the middle of one needs): within
# a session, `running` of a row is that of the row before it plus its own
# `tokens`, wherever no row is missing between them. Appends take it from the
# session's `running_end` (the last appended row's); the other writes set it.
# Existing rows get it from a running sum in position order.
_V5: Final = (
    "ALTER TABLE pygents_messages ADD COLUMN running bigint NOT NULL DEFAULT 0",
    "ALTER TABLE pygents_sessions ADD COLUMN running_end bigint NOT NULL DEFAULT 0",
    """
    UPDATE pygents_messages AS m SET running = w.total FROM (
        SELECT session_id, position,
               sum(tokens) OVER (PARTITION BY session_id ORDER BY position) AS total
        FROM pygents_messages
    ) AS w
    WHERE w.session_id = m.session_id AND w.position = m.position
    """,
    """
    UPDATE pygents_sessions AS s SET running_end = coalesce((
        SELECT running FROM pygents_messages AS m
        WHERE m.session_id = s.session_id ORDER BY position DESC LIMIT 1
    ), 0)
    """,
)

# A step of a migration: a statement, or a coroutine function that runs on the
# connection in the migration's transaction (what SQL alone cannot compute).
Step: TypeAlias = "str | Callable[[AsyncConnection[Any]], Awaitable[None]]"

# Version 2: usage records, one row per model call. Version 3: session leases.
# Version 4: forks share rows. Version 5: running token counts. Version 6: the
# full-text index of `search` (see `_search_sql`). Version 7: approval decisions.
# Version 8: a sub-agent call's links on its usage records. Version 9: the
# reasoning tokens of each usage record. Version 10: the window each call was sent.
# Version 11: each session's owner (a user or tenant id), and listing one owner's
# sessions newest first as an index range.
_V11: Final = (
    "ALTER TABLE pygents_sessions ADD COLUMN owner text",
    "CREATE INDEX pygents_sessions_by_owner ON pygents_sessions (owner, created_at, id) "
    "WHERE owner IS NOT NULL",
)
# Version 12: the step journal. Version 13: agents' checkpoints. Version 14: a session's
# messages found by `message_id`.
MIGRATIONS: Final[tuple[tuple[Step, ...], ...]] = (
    _V1,
    POSTGRES_TABLE,
    lease_sql.POSTGRES_TABLE,
    _V4,
    _V5,
    POSTGRES_INDEX,
    decisions_sql.POSTGRES_TABLE,
    LINKS,
    POSTGRES_REASONING,
    WINDOW,
    _V11,
    journal_sql.POSTGRES_TABLE,
    checkpoint_sql.POSTGRES_TABLE,
    POSTGRES_MESSAGE_IDS,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)

# Any fixed number: every process migrating a database takes this lock first.
_MIGRATION_LOCK: Final = 0x7079_6765_6E74_73  # "pygents"


async def _version(conn: AsyncConnection[Any], table: str) -> int:
    cursor = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
    exists = await cursor.fetchone()
    if exists is None or not exists[0]:
        return 0
    cursor = await conn.execute(f"SELECT version FROM {table} WHERE id = 1")
    row = await cursor.fetchone()
    return 0 if row is None else int(row[0])


async def migrate(
    conn: AsyncConnection[Any],
    migrations: Sequence[Sequence[Step]] = MIGRATIONS,
    *,
    table: str = "pygents_schema",
    label: str = "context store",
) -> int:
    """Bring the database up to the newest schema version in one transaction; return it.

    `conn` must be in autocommit mode with no transaction open. `table` is the
    one-row table that holds this schema's version (each set of tables keeps
    its own) and `label` names the schema in the error message.

    Raises:
        StoreSchemaError: The database's version is newer than `len(migrations)`.
    """
    target = len(migrations)
    if await _version(conn, table) == target:  # the usual case: no lock taken
        return target
    # A session lock, taken before the transaction: a transaction started after it
    # sees the tables a migration that held it before created (one that started
    # earlier could still find them missing in its catalog cache).
    await conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
    try:
        async with conn.transaction():
            version = await _version(conn, table)  # another process may have migrated meanwhile
            if version > target:
                raise StoreSchemaError(
                    f"the database's {label} schema is version {version}, newer than "
                    f"version {target} that this pygents_ctx knows; "
                    "upgrade pygents_ctx to open it"
                )
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} "
                "(id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL)"
            )
            for migration in migrations[version:]:
                for step in migration:
                    if isinstance(step, str):
                        await conn.execute(step)
                    else:
                        await step(conn)
            await conn.execute(
                f"INSERT INTO {table} (id, version) VALUES (1, %s) "
                "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                (target,),
            )
    finally:
        if not conn.closed:  # a lost connection has released it, and would raise again
            await conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return target
