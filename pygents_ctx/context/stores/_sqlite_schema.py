"""The SQLite schema of the context stores, and the migrations that build it on open.

`MIGRATIONS[n]` takes a database from schema version `n` to `n + 1`; the
version lives in the one-row table `pygents_schema`. Opening runs the missing
steps in one transaction, so a crash mid-upgrade leaves the old version. A
database newer than this code is refused rather than misread.

Tables (schema version 12):

- `pygents_sessions`: one row per session, with its counters kept by triggers
  (`message_count`, `live_tokens`, `next_position`, `preview`), the provider's
  token usage, and `generation`, bumped by every change other than an append
  so readers know to drop their cached history. A new row starts at a random
  generation (migration 2), so a session deleted and created again never
  looks like the one a reader cached.
- `pygents_message_data`: each message's JSON bytes, live or archived, written
  once and never moved; `session_id` is there so a session's data goes with it.
- `pygents_live_rows`: the live history, a small row per message (its
  `position`, run id, token count, preview, and `data_id`), keyed by
  `(session_id, position)`. Appends take `next_position`; `replace_prefix`
  puts its messages just before the first one it keeps (positions may go
  negative). The counter triggers are on this table.
- `pygents_archive_rows`: the messages `replace_prefix` took out, the same
  small rows keyed by `(session_id, id)`, `id` counting up in the order they
  left. Compaction moves rows from the live table to this one; their data
  stays where it is.
- `pygents_messages` and `pygents_archive`: views joining those rows to their
  data, with the columns the tables of these names had up to version 4 (the
  live history by `position`, without the row `id` nothing read; the archive
  by `id`). INSTEAD OF triggers carry an INSERT, UPDATE or DELETE on them to
  the tables underneath, so SQL written against version 4 (the command line's
  viewer, export and import) works unchanged. The stores read through them
  and write the tables directly where it saves work.
- `pygents_search` (version 8): the FTS5 index of every message's text, live
  or archived, kept by triggers on `pygents_message_data`; since version 16 a
  search first indexes the rows above `pygents_search_state.indexed_through`
  (see `_search_sql`).
- `pygents_usage`: one row per model call whose usage was recorded, in order;
  a sub-agent's call says where it came from (version 10: `parent_session`,
  `call_id`, `subagent_session`, indexed by the calling session and call),
  and what a reasoning model spent thinking (version 11: `reasoning_tokens`),
  and the window it was sent (version 12: `window_record`, see `_usage_sql`).
- `pygents_leases`: who holds each session's lease and until when (see
  `_lease_sql`); a session's row goes with the session.

- `pygents_forks` (version 6): what a forked session reads of other
  sessions' rows instead of copying them (see `_lineage`).
- Version 7: `running` on each live row and `running_end` on each session,
  the running token count that makes summing a stretch of history two lookups.
- `pygents_decisions` (version 9): a person's decision on each tool call of
  the session that waited for approval (see `_decisions_sql`); a session's
  rows go with the session.
- `pygents_journal` (version 15): the step journal, one row per tool call a
  model loop started, with its result once it finished (see `_journal_sql`);
  a session's rows go with the session.
- `pygents_checkpoints` and `pygents_checkpoint_data` (version 17): agents'
  saved states at points of a session's history, the bytes kept once per
  distinct content (see `_checkpoint_sql`); a session's rows go with the
  session, and bytes no row names go with the last row.

Every message's data is pointed at by exactly one live or archive row: the
stores delete a row and its data in the same transaction (no foreign key from
rows to data, which would make deleting data search both tables). A fork
reads its source's rows through `pygents_forks`, never its own rows pointing
at another session's data.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores import _decisions_sql as decisions_sql
from pygents_ctx.context.stores import _journal_sql as journal_sql
from pygents_ctx.context.stores import _lease_sql as lease_sql
from pygents_ctx.context.stores._search_sql import (
    SQLITE_INDEX,
    SQLITE_LAZY_INDEX,
    SQLITE_OFFLOADED_WORDS,
)
from pygents_ctx.context.stores._usage_sql import (
    LINKS,
    SQLITE_REASONING,
    SQLITE_TABLE,
    WINDOW,
)
from pygents_ctx.errors import StoreSchemaError

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "StoreSchemaError",
    "configure",
    "migrate",
    "open_database",
]


def _counted_by_triggers(table: str) -> tuple[str, str]:
    """The triggers that keep a session's counters in step with its live rows in `table`.

    The counters change in the same statement as the rows, so an append is one
    INSERT and no crash can leave them out of step.
    """
    added = f"""
    CREATE TRIGGER {table}_added AFTER INSERT ON {table} BEGIN
        UPDATE pygents_sessions SET
            message_count = message_count + 1,
            live_tokens = live_tokens + NEW.tokens,
            next_position = max(next_position, NEW.position + 1),
            preview = CASE
                WHEN preview = '' AND NEW.preview IS NOT NULL THEN NEW.preview
                ELSE preview
            END
        WHERE session_id = NEW.session_id;
    END
    """
    removed = f"""
    CREATE TRIGGER {table}_removed AFTER DELETE ON {table} BEGIN
        UPDATE pygents_sessions SET
            message_count = message_count - 1,
            live_tokens = live_tokens - OLD.tokens
        WHERE session_id = OLD.session_id;
    END
    """
    return added, removed


_V1: Final = (
    """
    CREATE TABLE pygents_sessions (
        session_id    TEXT    NOT NULL PRIMARY KEY,
        created_at    TEXT    NOT NULL,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        message_count INTEGER NOT NULL DEFAULT 0,
        live_tokens   INTEGER NOT NULL DEFAULT 0,
        next_position INTEGER NOT NULL DEFAULT 0,
        generation    INTEGER NOT NULL DEFAULT 0,
        preview       TEXT    NOT NULL DEFAULT ''
    )
    """,
    "CREATE INDEX pygents_sessions_by_created ON pygents_sessions (created_at)",
    """
    CREATE TABLE pygents_messages (
        id         INTEGER PRIMARY KEY,
        session_id TEXT    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        position   INTEGER NOT NULL,
        run_id     TEXT,
        tokens     INTEGER NOT NULL,
        preview    TEXT,
        data       BLOB    NOT NULL,
        UNIQUE (session_id, position)
    )
    """,
    """
    CREATE INDEX pygents_messages_by_run ON pygents_messages (session_id, run_id)
    WHERE run_id IS NOT NULL
    """,
    """
    CREATE TABLE pygents_archive (
        id         INTEGER PRIMARY KEY,
        session_id TEXT    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        run_id     TEXT,
        tokens     INTEGER NOT NULL,
        preview    TEXT,
        data       BLOB    NOT NULL
    )
    """,
    "CREATE INDEX pygents_archive_by_session ON pygents_archive (session_id, id)",
    *_counted_by_triggers("pygents_messages"),
)

# A session's row deleted behind the stores' backs and created again would
# start again at generation 0, and a store that cached the old history at
# generation 0 would take the new rows for an extension of it. Every row now
# starts at a random generation (62 bits: never the -1 or -2 the stores use as
# markers), so a recreated session reads as a change. The row's rowid cannot
# tell the two apart: SQLite reuses the largest rowid once it is deleted.
_V2: Final = (
    """
    CREATE TRIGGER pygents_sessions_created AFTER INSERT ON pygents_sessions BEGIN
        UPDATE pygents_sessions SET generation = random() & 4611686018427387903
        WHERE rowid = NEW.rowid;
    END
    """,
)

# Version 5: a message's bytes are written once, into `pygents_message_data`, and
# never move. The live history and the archive are small rows pointing at them, so
# `replace_prefix` moves a few dozen bytes per message instead of copying each one
# into the archive and deleting it (an UPDATE of a large row rewrites it too).
# `pygents_messages` and `pygents_archive` become views with their version 4
# columns: SQL written against them (the viewer, export and import, users' own)
# reads and writes as before, through the INSTEAD OF triggers below.
_V5_TABLES: Final = (
    """
    CREATE TABLE pygents_message_data (
        id         INTEGER PRIMARY KEY,
        session_id TEXT    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        data       BLOB    NOT NULL
    )
    """,
    "CREATE INDEX pygents_message_data_by_session ON pygents_message_data (session_id)",
    # No foreign key from the rows to their data: a delete of data would search
    # both tables for rows pointing at it. The stores delete the two together.
    """
    CREATE TABLE pygents_live_rows (
        session_id TEXT    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        position   INTEGER NOT NULL,
        run_id     TEXT,
        tokens     INTEGER NOT NULL,
        preview    TEXT,
        data_id    INTEGER NOT NULL,
        PRIMARY KEY (session_id, position)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE pygents_archive_rows (
        session_id TEXT    NOT NULL
                   REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        id         INTEGER NOT NULL,
        run_id     TEXT,
        tokens     INTEGER NOT NULL,
        preview    TEXT,
        data_id    INTEGER NOT NULL,
        PRIMARY KEY (session_id, id)
    ) WITHOUT ROWID
    """,
)
# The version 4 rows move over with their ids, positions and order: live data
# keeps its row id, archived data takes ids above every live one. The counters
# in `pygents_sessions` stay right: the triggers come after the copy.
_ARCHIVE_DATA_ID: Final = "id + (SELECT coalesce(max(id), 0) FROM pygents_messages)"
_V5_COPY: Final = (
    "INSERT INTO pygents_message_data (id, session_id, data) "
    "SELECT id, session_id, data FROM pygents_messages",
    "INSERT INTO pygents_message_data (id, session_id, data) "
    f"SELECT {_ARCHIVE_DATA_ID}, session_id, data FROM pygents_archive",
    "INSERT INTO pygents_live_rows (session_id, position, run_id, tokens, preview, data_id) "
    "SELECT session_id, position, run_id, tokens, preview, id FROM pygents_messages",
    "INSERT INTO pygents_archive_rows (session_id, id, run_id, tokens, preview, data_id) "
    f"SELECT session_id, id, run_id, tokens, preview, {_ARCHIVE_DATA_ID} FROM pygents_archive",
    "DROP TABLE pygents_archive",
    "DROP TABLE pygents_messages",  # its index and triggers go with it
)
_V5_LIVE: Final = (
    """
    CREATE INDEX pygents_live_rows_by_run ON pygents_live_rows (session_id, run_id)
    WHERE run_id IS NOT NULL
    """,
    *_counted_by_triggers("pygents_live_rows"),
    """
    CREATE VIEW pygents_messages (session_id, position, run_id, tokens, preview, data) AS
    SELECT r.session_id, r.position, r.run_id, r.tokens, r.preview, d.data
    FROM pygents_live_rows AS r JOIN pygents_message_data AS d ON d.id = r.data_id
    """,
    # One statement writes the data and its row, so an append stays one INSERT.
    """
    CREATE TRIGGER pygents_messages_insert INSTEAD OF INSERT ON pygents_messages BEGIN
        INSERT INTO pygents_message_data (session_id, data) VALUES (NEW.session_id, NEW.data);
        INSERT INTO pygents_live_rows (session_id, position, run_id, tokens, preview, data_id)
        VALUES (
            NEW.session_id, NEW.position, NEW.run_id, NEW.tokens, NEW.preview,
            last_insert_rowid()
        );
    END
    """,
    """
    CREATE TRIGGER pygents_messages_delete INSTEAD OF DELETE ON pygents_messages BEGIN
        DELETE FROM pygents_message_data WHERE id = (
            SELECT data_id FROM pygents_live_rows
            WHERE session_id = OLD.session_id AND position = OLD.position
        );
        DELETE FROM pygents_live_rows
        WHERE session_id = OLD.session_id AND position = OLD.position;
    END
    """,
    """
    CREATE TRIGGER pygents_messages_update INSTEAD OF UPDATE ON pygents_messages BEGIN
        SELECT RAISE(ABORT, 'a message cannot move to another session_id')
        WHERE NEW.session_id IS NOT OLD.session_id;
        UPDATE pygents_message_data SET data = NEW.data
        WHERE NEW.data IS NOT OLD.data AND id = (
            SELECT data_id FROM pygents_live_rows
            WHERE session_id = OLD.session_id AND position = OLD.position
        );
        UPDATE pygents_live_rows SET
            position = NEW.position, run_id = NEW.run_id,
            tokens = NEW.tokens, preview = NEW.preview
        WHERE session_id = OLD.session_id AND position = OLD.position;
    END
    """,
)
_V5_ARCHIVE: Final = (
    """
    CREATE VIEW pygents_archive (id, session_id, run_id, tokens, preview, data) AS
    SELECT r.id, r.session_id, r.run_id, r.tokens, r.preview, d.data
    FROM pygents_archive_rows AS r JOIN pygents_message_data AS d ON d.id = r.data_id
    """,
    # Without an id, a row goes after the session's last one.
    """
    CREATE TRIGGER pygents_archive_insert INSTEAD OF INSERT ON pygents_archive BEGIN
        INSERT INTO pygents_message_data (session_id, data) VALUES (NEW.session_id, NEW.data);
        INSERT INTO pygents_archive_rows (session_id, id, run_id, tokens, preview, data_id)
        VALUES (
            NEW.session_id,
            coalesce(NEW.id, (
                SELECT coalesce(max(id), 0) + 1 FROM pygents_archive_rows
                WHERE session_id = NEW.session_id
            )),
            NEW.run_id, NEW.tokens, NEW.preview, last_insert_rowid()
        );
    END
    """,
    """
    CREATE TRIGGER pygents_archive_delete INSTEAD OF DELETE ON pygents_archive BEGIN
        DELETE FROM pygents_message_data WHERE id = (
            SELECT data_id FROM pygents_archive_rows
            WHERE session_id = OLD.session_id AND id = OLD.id
        );
        DELETE FROM pygents_archive_rows WHERE session_id = OLD.session_id AND id = OLD.id;
    END
    """,
    """
    CREATE TRIGGER pygents_archive_update INSTEAD OF UPDATE ON pygents_archive BEGIN
        SELECT RAISE(ABORT, 'a message cannot move to another session_id')
        WHERE NEW.session_id IS NOT OLD.session_id;
        UPDATE pygents_message_data SET data = NEW.data
        WHERE NEW.data IS NOT OLD.data AND id = (
            SELECT data_id FROM pygents_archive_rows
            WHERE session_id = OLD.session_id AND id = OLD.id
        );
        UPDATE pygents_archive_rows SET
            id = NEW.id, run_id = NEW.run_id, tokens = NEW.tokens, preview = NEW.preview
        WHERE session_id = OLD.session_id AND id = OLD.id;
    END
    """,
)
_V5: Final = (*_V5_TABLES, *_V5_COPY, *_V5_LIVE, *_V5_ARCHIVE)

# Version 6: forks share their source's rows instead of copying them (see `_lineage`).
# The source's foreign key is checked at the commit: a source cannot be deleted
# alone while a fork reads it, but both can go together (the fork's lineage rows
# go with the fork, whichever order the deletes run in).
_V6: Final = (
    """
    CREATE TABLE pygents_forks (
        session_id   TEXT    NOT NULL
                     REFERENCES pygents_sessions (session_id) ON DELETE CASCADE,
        source_id    TEXT    NOT NULL REFERENCES pygents_sessions (session_id)
                     DEFERRABLE INITIALLY DEFERRED,
        live_from    INTEGER NOT NULL,
        live_upto    INTEGER NOT NULL,
        archive_upto INTEGER NOT NULL,
        PRIMARY KEY (session_id, source_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX pygents_forks_by_source ON pygents_forks (source_id)",
)

# Version 7: each live row's `running` token count, so the tokens of any stretch of a
# history are two indexed lookups (what a fork in the middle of one needs): within
# a session's own rows, `running` of a row is that of the row before it plus its
# own `tokens`, wherever no row is missing between them. Appends take it from the
# session's `running_end` (the last appended row's); the stores set it for the rows
# they put anywhere else (`replace_prefix`'s, a fork's copy). Existing rows get it
# from a running sum in position order.
_V7: Final = (
    "ALTER TABLE pygents_live_rows ADD COLUMN running INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE pygents_sessions ADD COLUMN running_end INTEGER NOT NULL DEFAULT 0",
    # Through a temporary table, since UPDATE ... FROM needs SQLite 3.33.
    """
    CREATE TEMP TABLE pygents_running (
        session_id TEXT, position INTEGER, total INTEGER, PRIMARY KEY (session_id, position)
    ) WITHOUT ROWID
    """,
    """
    INSERT INTO temp.pygents_running (session_id, position, total)
    SELECT session_id, position,
           sum(tokens) OVER (PARTITION BY session_id ORDER BY position)
    FROM pygents_live_rows
    """,
    """
    UPDATE pygents_live_rows SET running = (
        SELECT total FROM temp.pygents_running AS w
        WHERE w.session_id = pygents_live_rows.session_id
        AND w.position = pygents_live_rows.position
    )
    """,
    "DROP TABLE temp.pygents_running",
    """
    UPDATE pygents_sessions SET running_end = coalesce((
        SELECT running FROM pygents_live_rows AS r
        WHERE r.session_id = pygents_sessions.session_id ORDER BY position DESC LIMIT 1
    ), 0)
    """,
    "DROP TRIGGER pygents_live_rows_added",
    """
    CREATE TRIGGER pygents_live_rows_added AFTER INSERT ON pygents_live_rows BEGIN
        UPDATE pygents_sessions SET
            message_count = message_count + 1,
            live_tokens = live_tokens + NEW.tokens,
            running_end = CASE
                WHEN NEW.position >= next_position THEN NEW.running ELSE running_end
            END,
            next_position = max(next_position, NEW.position + 1),
            preview = CASE
                WHEN preview = '' AND NEW.preview IS NOT NULL THEN NEW.preview
                ELSE preview
            END
        WHERE session_id = NEW.session_id;
    END
    """,
    "DROP TRIGGER pygents_messages_insert",
    """
    CREATE TRIGGER pygents_messages_insert INSTEAD OF INSERT ON pygents_messages BEGIN
        INSERT INTO pygents_message_data (session_id, data) VALUES (NEW.session_id, NEW.data);
        INSERT INTO pygents_live_rows
            (session_id, position, run_id, tokens, preview, data_id, running)
        VALUES (
            NEW.session_id, NEW.position, NEW.run_id, NEW.tokens, NEW.preview,
            last_insert_rowid(),
            NEW.tokens + coalesce((
                SELECT running_end FROM pygents_sessions WHERE session_id = NEW.session_id
            ), 0)
        );
    END
    """,
)

# Version 3: usage records, one row per model call. Version 4: session leases.
# Version 6: forks share rows. Version 7: running token counts. Version 8: the
# full-text index of `search` (see `_search_sql`).
# Version 9: approval decisions, one row per decided tool call. Version 10: a
# sub-agent call's links on its usage records. Version 11: the reasoning tokens of
# each usage record. Version 12: the window each call was sent.
# Version 13: each session's owner (a user or tenant id), and listing one owner's
# sessions newest first as an index range. Version 14: the words of offloaded tool
# results in the search index.
_V13: Final = (
    "ALTER TABLE pygents_sessions ADD COLUMN owner TEXT",
    "CREATE INDEX pygents_sessions_by_owner ON pygents_sessions (owner, created_at) "
    "WHERE owner IS NOT NULL",
)
# Version 15: the step journal. Version 16: the search index catches up at search
# time, not on each append (`pygents_search_state`). Version 17: agents' checkpoints.
MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    _V1,
    _V2,
    SQLITE_TABLE,
    lease_sql.SQLITE_TABLE,
    _V5,
    _V6,
    _V7,
    SQLITE_INDEX,
    decisions_sql.SQLITE_TABLE,
    LINKS,
    SQLITE_REASONING,
    WINDOW,
    _V13,
    SQLITE_OFFLOADED_WORDS,
    journal_sql.SQLITE_TABLE,
    SQLITE_LAZY_INDEX,
    checkpoint_sql.SQLITE_TABLE,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)

_SYNCHRONOUS: Final = frozenset({"NORMAL", "FULL"})


def open_database(name: str, timeout: float) -> sqlite3.Connection:
    """Open the SQLite file `name` (created if missing), refusing one another program made.

    Nothing is written to a refused file: the check runs before the pragmas,
    which would switch its journal to WAL.

    Raises:
        sqlite3.OperationalError: The file cannot be opened (its directory is
            missing, it is a directory, no permission); the message names it.
        StoreSchemaError: The file is not a SQLite database, or is one whose
            tables are all another program's (none is named `pygents_*`).
    """
    try:
        db = sqlite3.connect(name, timeout=timeout, isolation_level=None)
    except sqlite3.OperationalError as exc:
        raise _cannot_open(name, exc) from None
    try:
        tables = [
            row[0]
            for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            )
        ]
    except sqlite3.OperationalError as exc:
        db.close()
        raise _cannot_open(name, exc) from None
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StoreSchemaError(
            f"{name!r} is not a SQLite database ({exc}); connect() opens a pygents_ctx "
            "SQLite file, or creates one at a path where there is no file"
        ) from None
    if tables and not any(table.startswith("pygents_") for table in tables):
        db.close()
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        raise StoreSchemaError(
            f"{name!r} is another program's SQLite database (tables {shown}), not a "
            "pygents_ctx store; connect() adds its tables only to a new or empty file or "
            "one pygents_ctx made: give the context store a file of its own"
        )
    return db


def _cannot_open(name: str, exc: sqlite3.OperationalError) -> sqlite3.OperationalError:
    target = Path(name)
    if target.is_dir():
        why = "it is a directory; pass a file path"
    elif not target.parent.exists():
        why = f"its directory {str(target.parent)!r} does not exist; create it first"
    else:
        why = "check that the file and its directory can be read and written"
    return sqlite3.OperationalError(f"cannot open the SQLite database {name!r} ({exc}): {why}")


def configure(db: sqlite3.Connection, synchronous: str, *, secure_delete: bool = False) -> None:
    """Set the connection's pragmas: WAL, foreign keys, the `synchronous` level, and
    `secure_delete` (deleted content overwritten with zeros) when asked."""
    # In WAL mode readers never block the writer, and NORMAL syncs only at checkpoints:
    # a killed process loses nothing committed; a power cut may lose the last commits.
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")  # one of _SYNCHRONOUS, checked
    db.execute("PRAGMA foreign_keys = ON")
    if secure_delete:
        db.execute("PRAGMA secure_delete = ON")


def check_synchronous(value: object) -> str:
    """Return `value` if it is a supported `synchronous` level.

    Raises:
        ValueError: It is not "NORMAL" or "FULL".
    """
    if value not in _SYNCHRONOUS:
        raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', not {value!r}")
    return str(value)


def has_table(db: sqlite3.Connection, table: str) -> bool:
    """Whether the database has `table` (an older schema may not)."""
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return found.fetchone() is not None


def _version(db: sqlite3.Connection, table: str) -> int:
    if not has_table(db, table):
        return 0
    row = db.execute(f"SELECT version FROM {table} WHERE id = 1").fetchone()
    return 0 if row is None else int(row[0])


def migrate(
    db: sqlite3.Connection,
    migrations: Sequence[Sequence[str]] = MIGRATIONS,
    *,
    table: str = "pygents_schema",
    label: str = "context store",
) -> int:
    """Bring the database up to the newest schema version in one transaction; return it.

    Args:
        db: The connection, in autocommit mode with no transaction open.
        migrations: The steps, oldest first.
        table: The one-row table that holds this schema's version: each set of
            tables (the context stores', each memory store's) keeps its own.
        label: Names the schema in the error message.

    Raises:
        StoreSchemaError: The database's version is newer than `len(migrations)`.
    """
    target = len(migrations)
    if _version(db, table) == target:  # the usual case: no write lock taken
        return target
    db.execute("BEGIN IMMEDIATE")
    try:
        version = _version(db, table)  # another process may have migrated meanwhile
        if version > target:
            raise StoreSchemaError(
                f"the database's {label} schema is version {version}, newer than "
                f"version {target} that this pygents_ctx knows; upgrade pygents_ctx to open it"
            )
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {table} "
            "(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )
        for step in migrations[version:]:
            for statement in step:
                db.execute(statement)
        db.execute(
            f"INSERT INTO {table} (id, version) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
            (target,),
        )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return target
