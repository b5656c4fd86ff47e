"""The `export` and `import` commands, and the session file one writes and the other reads.

One JSON object, format version 5:

    {
      "version": 5,
      "session_id": "demo",
      "input_tokens": 1200,
      "output_tokens": 340,
      "archived": [ ...messages in to_dict() form, oldest first... ],
      "archived_run_ids": [ ...each archived message's run id, or null... ],
      "messages": [ ...the live history, oldest first... ],
      "run_ids": [ ...each live message's run id, or null... ],
      "usage": [ ...the usage records in UsageRecord.to_dict() form, oldest first... ],
      "blobs": [ ...{"name", "content_type", "data" (base64)}: the whole text of each
                 offloaded tool result the messages name, by its handle... ],
      "checkpoint_states": [ ...{"digest", "data" (base64)}: each distinct saved state
                 of the agents' checkpoints once, by its BLAKE2b-160 digest (hex)... ],
      "checkpoints": [ ...{"agent", "at", "created_at", "state" (a digest)}: the agents'
                 checkpoints (`list_checkpoints()`), in order of message, then agent... ]
    }

Only `messages` is required when reading: `version` defaults to 5, `session_id`
to none (a new id), `archived`, `usage`, `blobs` and the checkpoint lists to
`[]`, the run ids to null and the token counts to 0. Version 4 (written before
checkpoints were kept) is the same without the two checkpoint lists, version 3
(before tool results were offloaded) also without `blobs`, version 2 (before
usage records were kept) also without `usage`, and version 1 (before run ids)
also without the two run id lists; each refuses the keys it did not have, and a
newer version is refused with a word to upgrade. A checkpoint is at a message
of the file (`at` from 0 to the number of `messages`) and names a state the
file holds, whose data has that digest; a state no checkpoint names is
refused. A blob named
`tool-results/<sha256>` must hold the text of that SHA-256. Export carries the
blobs the database holds (in its `SQLiteBlobStore` tables, where `ModelLoop`
puts them by default); import writes them there, in the same transaction.
Unknown keys are refused, at the top level and in every message and block, so
a typo does not silently drop data; a key may appear once.

Both commands stream (`_session_reader` reads, `write_session_file` writes): a
session of any length is imported and exported in bounded memory, the import
in one transaction.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import io
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

import orjson

from pygents_ctx.cli._db import CliError, check_database, with_session
from pygents_ctx.cli._render import Output, plural
from pygents_ctx.cli._session_reader import (
    FORMAT_VERSION,
    SessionBlob,
    SessionFileError,
    SessionHeader,
    peek_session_id,
    read_session,
)
from pygents_ctx.context.messages import Message, to_dict
from pygents_ctx.context.stores import SessionInfo, SQLiteContextStore, connect
from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores import _sqlite_ops as ops
from pygents_ctx.context.stores import _usage_sql as usage_sql
from pygents_ctx.context.stores._checkpoint_sql import digest
from pygents_ctx.context.stores._common import decode, new_session_id, now_iso, preview_of
from pygents_ctx.context.stores._lineage import archive_of, live_of
from pygents_ctx.context.stores._sqlite_schema import has_table, migrate
from pygents_ctx.context.stores.base import (
    ContextStore,
    SessionSnapshot,
    StoredCheckpoint,
    StoredMessage,
)
from pygents_ctx.context.tokens import count_message_tokens
from pygents_ctx.context.usage import UsageRecord
from pygents_ctx.memory._shared import utc_now
from pygents_ctx.memory.blobs import sqlite as sqlite_blobs
from pygents_ctx.memory.blobs._sql import SCHEMA_LABEL, SCHEMA_TABLE
from pygents_ctx.memory.blobs.base import BlobStore

__all__ = [
    "FORMAT_VERSION",
    "SessionBlob",
    "SessionFile",
    "SessionFileError",
    "export",
    "import_",
    "load_session",
    "parse_session_file",
    "save_session",
    "write_session_file",
]

_BATCH = 1000  # messages per INSERT batch when importing


@dataclass(frozen=True, slots=True, init=False)
class SessionFile:
    """A session as the file holds it: its id, history and archive with run ids, token
    usage, usage records, the blobs of its offloaded tool results, and the agents'
    checkpoints.

    `messages` and `archived` accept `StoredMessage`s or plain `Message`s
    (no run id).
    """

    session_id: str | None
    messages: tuple[StoredMessage, ...]
    archived: tuple[StoredMessage, ...]
    input_tokens: int
    output_tokens: int
    usage: tuple[UsageRecord, ...]
    blobs: tuple[SessionBlob, ...]
    checkpoints: tuple[StoredCheckpoint, ...]

    def __init__(
        self,
        session_id: str | None,
        messages: Sequence[StoredMessage | Message],
        archived: Sequence[StoredMessage | Message],
        input_tokens: int = 0,
        output_tokens: int = 0,
        usage: Sequence[UsageRecord] = (),
        blobs: Sequence[SessionBlob] = (),
        checkpoints: Sequence[StoredCheckpoint] = (),
    ) -> None:
        object.__setattr__(self, "session_id", session_id)
        object.__setattr__(self, "messages", _as_stored(messages))
        object.__setattr__(self, "archived", _as_stored(archived))
        object.__setattr__(self, "input_tokens", input_tokens)
        object.__setattr__(self, "output_tokens", output_tokens)
        object.__setattr__(self, "usage", tuple(usage))
        object.__setattr__(self, "blobs", tuple(blobs))
        object.__setattr__(
            self, "checkpoints", tuple(sorted(checkpoints, key=lambda c: (c.at, c.agent)))
        )

    @classmethod
    def of(cls, snapshot: SessionSnapshot) -> SessionFile:
        """The file of a store's snapshot."""
        return cls(
            snapshot.session_id,
            snapshot.messages,
            snapshot.archived,
            snapshot.input_tokens,
            snapshot.output_tokens,
            snapshot.usage,
            checkpoints=snapshot.checkpoints,
        )

    def snapshot(self, session_id: str) -> SessionSnapshot:
        """What `restore()` writes for this file, into the session `session_id`."""
        return SessionSnapshot(
            session_id,
            self.messages,
            self.archived,
            self.input_tokens,
            self.output_tokens,
            usage=self.usage,
            checkpoints=self.checkpoints,
        )

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object (see the module docstring)."""
        return {
            "version": FORMAT_VERSION,
            "session_id": self.session_id,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "archived": [to_dict(stored.message) for stored in self.archived],
            "archived_run_ids": [stored.run_id for stored in self.archived],
            "messages": [to_dict(stored.message) for stored in self.messages],
            "run_ids": [stored.run_id for stored in self.messages],
            "usage": [record.to_dict() for record in self.usage],
            "blobs": [blob.to_dict() for blob in self.blobs],
            "checkpoint_states": [
                _state_dict(key, data) for key, data in _states_of(self.checkpoints).items()
            ],
            "checkpoints": [
                _checkpoint_dict(c.agent, c.at, c.created_at, digest(c.state))
                for c in self.checkpoints
            ],
        }

    def to_json(self) -> bytes:
        """The file's bytes: indented JSON with a final newline."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"


def _states_of(checkpoints: Iterable[StoredCheckpoint]) -> dict[bytes, bytes]:
    """Each distinct state of `checkpoints` once, by digest, in the order first named."""
    return {digest(c.state): c.state for c in checkpoints}


def _state_dict(key: bytes, data: bytes) -> dict[str, str]:
    return {"digest": key.hex(), "data": base64.b64encode(data).decode("ascii")}


def _checkpoint_dict(agent: str, at: int, created_at: str, key: bytes) -> dict[str, Any]:
    return {"agent": agent, "at": at, "created_at": created_at, "state": key.hex()}


def _as_stored(messages: Sequence[StoredMessage | Message]) -> tuple[StoredMessage, ...]:
    return tuple(m if isinstance(m, StoredMessage) else StoredMessage(m) for m in messages)


def parse_session_file(data: bytes, source: str) -> SessionFile:
    """Read a session file's bytes; `source` names the file in error messages.

    The same reader and rules as `import`, which streams instead.

    Raises:
        SessionFileError: The bytes are not JSON, not an object, hold an
            unknown key or version, or a field of the wrong type.

    Examples:
        >>> file = parse_session_file(b'{"session_id": "s", "messages": []}', "s.json")
        >>> file.session_id, file.messages, file.input_tokens
        ('s', (), 0)
    """
    kept = _Kept()
    header = read_session(io.BytesIO(data), source, kept)
    return SessionFile(
        header.session_id,
        kept.stored("messages", "run_ids"),
        kept.stored("archived", "archived_run_ids"),
        header.input_tokens,
        header.output_tokens,
        kept.records,
        kept.blobs,
        [StoredCheckpoint(*row[:3], kept.states[row[3]]) for row in kept.checkpoints],
    )


class _Kept:
    """A session sink that keeps everything it is given, for `parse_session_file`."""

    def __init__(self) -> None:
        self.messages: dict[str, list[Message]] = {"messages": [], "archived": []}
        self.run_ids: dict[str, dict[int, str]] = {"run_ids": {}, "archived_run_ids": {}}
        self.records: list[UsageRecord] = []
        self.blobs: list[SessionBlob] = []
        self.states: dict[bytes, bytes] = {}
        self.checkpoints: list[tuple[str, int, str, bytes]] = []

    def message(self, key: str, message: Message, data: bytes) -> None:
        self.messages[key].append(message)

    def checkpoint_state(self, key: bytes, data: bytes) -> None:
        self.states[key] = data

    def checkpoint(self, agent: str, at: int, created_at: str, key: bytes) -> None:
        self.checkpoints.append((agent, at, created_at, key))

    def blob(self, blob: SessionBlob) -> None:
        self.blobs.append(blob)

    def run_id(self, key: str, index: int, run_id: str) -> None:
        self.run_ids[key][index] = run_id

    def usage_record(self, record: UsageRecord) -> None:
        self.records.append(record)

    def stored(self, key: str, runs_key: str) -> list[StoredMessage]:
        runs = self.run_ids[runs_key]
        return [StoredMessage(m, runs.get(i)) for i, m in enumerate(self.messages[key])]


async def load_session(store: ContextStore, blobs: BlobStore | None = None) -> SessionFile:
    """The session `store` holds, as a `SessionFile`, read at one moment (`store.snapshot()`).

    With `blobs`, the file carries the blobs of the offloaded tool results
    its messages name (those `blobs` holds).
    """
    file = SessionFile.of(await store.snapshot())
    if blobs is None:
        return file
    carried = []
    for name in sorted(_handles(to_dict(s.message) for s in (*file.archived, *file.messages))):
        try:
            blob = await blobs.get(name)
        except KeyError:
            continue
        carried.append(SessionBlob(name, blob.info.content_type, blob.data))
    return SessionFile(
        file.session_id,
        file.messages,
        file.archived,
        file.input_tokens,
        file.output_tokens,
        file.usage,
        carried,
        file.checkpoints,
    )


async def save_session(
    store: ContextStore, file: SessionFile, blobs: BlobStore | None = None
) -> None:
    """Write `file` into `store`'s session, which must hold no messages yet: all or nothing.

    One `store.restore()`, so one transaction in the SQLite store: interrupted
    at any point, the session holds all of the file or none of it. With
    `blobs`, the file's blobs are put there first (named by their content,
    writing one again changes nothing).

    Raises:
        ValueError: The session already holds messages (nothing is written).
    """
    if await store.count():
        raise ValueError(
            f"session {store.session_id!r} already holds messages; save into a new session"
        )
    if blobs is not None:
        for blob in file.blobs:
            await blobs.put(blob.name, blob.data, content_type=blob.content_type)
    await store.restore(file.snapshot(store.session_id))


def _handles(messages: Iterable[dict[str, Any]]) -> set[str]:
    """The handles of the offloaded tool results in messages in their `to_dict()` form."""
    return {
        block["offloaded"]["handle"]
        for message in messages
        for block in message["content"]
        if block.get("type") == "tool_result" and "offloaded" in block
    }


# -- the export and import commands ---------------------------------------------------


def export(args: argparse.Namespace, out: Output) -> None:
    """`export`: a session as a session file, to stdout or `--output`, streamed."""

    async def find(store: SQLiteContextStore, info: SessionInfo) -> str:
        return info.session_id

    session_id = with_session(args.db, args.session, find)
    if args.output in (None, "-"):
        write_session_file(args.db, session_id, lambda data: out.stream.write(data.decode()))
        return
    with Path(args.output).open("wb") as target:
        header = write_session_file(args.db, session_id, target.write)
    out.lines(
        [
            f"exported {plural(header.messages, 'message')} "
            f"({header.archived} archived) of session {session_id} to {args.output}"
        ]
    )


def write_session_file(
    path: str, session_id: str, write: Callable[[bytes], object]
) -> SessionHeader:
    """Write the session file of `session_id` in the SQLite database `path`, piece by piece.

    The bytes are those of `SessionFile.to_json()`, written a message at a time
    from one read transaction (one moment of the session, whatever other
    processes write), so memory stays bounded however long the session is.
    """
    db = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True)
    try:
        db.execute("BEGIN")
        tokens = db.execute(
            "SELECT input_tokens, output_tokens FROM pygents_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone() or (0, 0)
        write(b'{\n  "version": %d,\n  "session_id": ' % FORMAT_VERSION)
        write(orjson.dumps(session_id))
        write(b',\n  "input_tokens": %d,\n  "output_tokens": %d' % tuple(tokens))
        counts, handles = [], set[str]()
        # A fork reads rows of other sessions too (schema 6 and later).
        forks = (
            has_table(db, "pygents_forks")
            and db.execute(
                "SELECT 1 FROM pygents_forks WHERE session_id = ? LIMIT 1", (session_id,)
            ).fetchone()
        )
        for key, runs_key, table, order in (
            ("archived", "archived_run_ids", archive_of() if forks else "pygents_archive", "id"),
            ("messages", "run_ids", live_of() if forks else "pygents_messages", "position"),
        ):
            rows = db.execute(
                f"SELECT {order}, tokens, data FROM {table} WHERE session_id = ? ORDER BY {order}",
                (session_id,),
            )
            messages = (to_dict(decode(session_id, *row)) for row in rows)
            counts.append(_write_member(write, key, _noting_handles(messages, handles)))
            runs = db.execute(
                f"SELECT run_id FROM {table} WHERE session_id = ? ORDER BY {order}",
                (session_id,),
            )
            _write_member(write, runs_key, (run_id for (run_id,) in runs))
        records = usage_sql.read_sqlite(session_id, None, db)
        _write_member(write, "usage", (record.to_dict() for record in records))
        _write_member(write, "blobs", _blobs_in(db, sorted(handles)))
        found = _checkpoints_in(db, session_id, live_of() if forks else "pygents_messages")
        keys = list(dict.fromkeys(row.digest for _, row in found))  # each once, as first named
        states = (_state_dict(key, checkpoint_sql.states_sqlite([key], db)[key]) for key in keys)
        _write_member(write, "checkpoint_states", states)
        checkpoints = (_checkpoint_dict(r.agent, at, r.created_at, r.digest) for at, r in found)
        _write_member(write, "checkpoints", checkpoints)
        write(b"\n}\n")
    finally:
        db.close()
    return SessionHeader(session_id, tokens[0], tokens[1], counts[1], counts[0])


def _checkpoints_in(
    db: sqlite3.Connection, session_id: str, live: str
) -> list[tuple[int, checkpoint_sql.Row]]:
    """The session's checkpoints as `list_checkpoints()` finds them (none in a database
    older than them), each with its live message; the states are not read."""
    if not has_table(db, "pygents_checkpoints"):
        return []
    rows = checkpoint_sql.rows_sqlite(session_id, None, db)
    if not rows:
        return []
    positions = db.execute(
        f"SELECT position FROM {live} WHERE session_id = ? ORDER BY position", (session_id,)
    )
    return checkpoint_sql.live(rows, (position for (position,) in positions))


def _noting_handles(
    messages: Iterable[dict[str, Any]], handles: set[str]
) -> Iterator[dict[str, Any]]:
    """`messages` as they come (a message at a time), adding their stubs' handles to `handles`."""
    for message in messages:
        handles |= _handles((message,))
        yield message


def _blobs_in(db: sqlite3.Connection, names: list[str]) -> Iterable[dict[str, str]]:
    """Each named blob the database holds, one at a time, in its session-file form."""
    if not has_table(db, "pygents_blobs"):
        return
    for name in names:
        try:
            blob = sqlite_blobs.read_blob(name, db)
        except KeyError:  # written elsewhere (a blob store of another kind): not carried
            continue
        yield SessionBlob(name, blob.info.content_type, blob.data).to_dict()


def _write_member(write: Callable[[bytes], object], key: str, items: Iterable[Any]) -> int:
    """Write `,\\n  "key": [...]` as orjson's two-space indentation writes it; count the items."""
    write(b',\n  "%s": ' % key.encode())
    count = 0
    for item in items:
        write(b"[\n    " if count == 0 else b",\n    ")
        write(orjson.dumps(item, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    "))
        count += 1
    write(b"[]" if count == 0 else b"\n  ]")
    return count


def _open_input(name: str) -> tuple[IO[bytes], str]:
    if name == "-":  # spooled to disk: the reader may need a second look, at the session id
        spool = tempfile.TemporaryFile()  # noqa: SIM115 - the caller closes it
        shutil.copyfileobj(sys.stdin.buffer, spool)
        spool.seek(0)
        return spool, "stdin"
    try:
        return Path(name).open("rb"), name
    except FileNotFoundError:
        raise CliError(f"no file at {name!r} to import") from None
    except IsADirectoryError:
        raise CliError(f"{name!r} is a directory; import takes a file that export wrote") from None


def import_(args: argparse.Namespace, out: Output) -> None:
    """`import`: a new session (or an empty one) from a session file, streamed.

    The file is read a message at a time and written in batches, all in one
    transaction: a refused file (or an interrupted import) leaves nothing.
    """
    stream, source = _open_input(args.file)
    with stream:
        session_id = args.session or peek_session_id(stream, source) or new_session_id()
        stream.seek(0)
        created = not Path(args.db).exists()
        if not created:  # a new database is fine, someone else's SQLite file is not
            check_database(args.db)

        async def write() -> SessionHeader:
            async with connect(args.db) as conn:
                # The blob tables first: made (if missing) outside the import's transaction.
                blob_tables = partial(
                    migrate,
                    migrations=sqlite_blobs.MIGRATIONS,
                    table=SCHEMA_TABLE,
                    label=SCHEMA_LABEL,
                )
                await conn.run(blob_tables)
                return await conn.run(
                    lambda db: ops.in_transaction(
                        db, lambda db: _import_into(db, stream, source, session_id, args.db)
                    )
                )

        try:
            header = asyncio.run(write())
        except BaseException:
            if created:  # the transaction left it empty: leave no file behind either
                for suffix in ("", "-wal", "-shm"):
                    Path(args.db + suffix).unlink(missing_ok=True)
            raise
    if out.as_json:
        out.json(
            {"session_id": session_id, "messages": header.messages, "archived": header.archived}
        )
        return
    out.lines(
        [
            f"imported {plural(header.messages, 'message')} ({header.archived} archived) "
            f"into session {session_id}"
        ]
    )


_RUNS_TABLE = "temp.pygents_import_runs"  # this connection's own, gone when it closes


def _import_into(
    db: sqlite3.Connection, stream: IO[bytes], source: str, session_id: str, path: str
) -> Any:
    db.execute(ops.ENSURE, (session_id, now_iso()))
    held = db.execute(
        "SELECT EXISTS (SELECT 1 FROM pygents_messages WHERE session_id = ?) "
        "OR EXISTS (SELECT 1 FROM pygents_archive WHERE session_id = ?)",
        (session_id, session_id),
    ).fetchone()[0]
    if held:
        raise CliError(
            f"session {session_id!r} in {path!r} already holds messages; "
            "import into a new session with --session NEW_ID"
        )
    # Run ids come after their messages in the file: they wait here, then go in at once.
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {_RUNS_TABLE} "
        "(kind TEXT NOT NULL, idx INTEGER NOT NULL, run_id TEXT NOT NULL, "
        "PRIMARY KEY (kind, idx))"
    )
    db.execute(f"DELETE FROM {_RUNS_TABLE}")
    start = db.execute(
        "SELECT next_position FROM pygents_sessions WHERE session_id = ?", (session_id,)
    ).fetchone()[0]
    sink = _DatabaseSink(db, session_id, start)
    header = read_session(stream, source, sink)
    sink.flush()
    for kind, table, order in (
        ("messages", "pygents_messages", "position"),
        ("archived", "pygents_archive", "id"),
    ):
        runs = "run_ids" if kind == "messages" else "archived_run_ids"
        db.execute(
            f"UPDATE {table} SET run_id = (SELECT r.run_id FROM {_RUNS_TABLE} AS r "
            f"WHERE r.kind = ? AND r.idx = {table}.{order} - (SELECT min({order}) FROM {table} "
            "WHERE session_id = ?)) WHERE session_id = ?",
            (runs, session_id, session_id),
        )
    db.execute(f"DELETE FROM {_RUNS_TABLE}")
    db.execute(
        "UPDATE pygents_sessions SET input_tokens = ?, output_tokens = ?, preview = ?, "
        "generation = generation + 1 WHERE session_id = ?",
        (header.input_tokens, header.output_tokens, ops.first_preview(db, session_id), session_id),
    )
    return header


class _DatabaseSink:
    """A session sink writing into the import's transaction, a batch at a time."""

    def __init__(self, db: sqlite3.Connection, session_id: str, start: int) -> None:
        self._db, self._session_id = db, session_id
        self._start = start  # the position the first live message is written at
        self._archived: list[tuple[Any, ...]] = []
        self._live: list[tuple[Any, ...]] = []
        self._runs: list[tuple[str, int, str]] = []
        self._records: list[UsageRecord] = []
        self._checkpoints: list[tuple[str, str, int, bytes, str]] = []

    def message(self, key: str, message: Message, data: bytes) -> None:
        row = (count_message_tokens(message), preview_of(message), data)
        if key == "archived":
            self._archived.append((self._session_id, None, *row))
        else:
            self._live.append((self._session_id, self._session_id, None, *row))
        if len(self._archived) + len(self._live) >= _BATCH:
            self.flush()

    def run_id(self, key: str, index: int, run_id: str) -> None:
        self._runs.append((key, index, run_id))
        if len(self._runs) >= _BATCH:
            self.flush()

    def usage_record(self, record: UsageRecord) -> None:
        self._records.append(record)
        if len(self._records) >= _BATCH:
            self.flush()

    def blob(self, blob: SessionBlob) -> None:
        digest = hashlib.sha256(blob.data).hexdigest()
        sqlite_blobs.write_blob(
            blob.name, blob.content_type, digest, len(blob.data), blob.data, utc_now(), self._db
        )

    def checkpoint_state(self, key: bytes, data: bytes) -> None:
        self._db.execute(checkpoint_sql.KEEP_STATE_SQLITE, (key, data))

    def checkpoint(self, agent: str, at: int, created_at: str, key: bytes) -> None:
        # Live message `at` is at position start + at (the import writes them in a row);
        # the reader refuses a file whose checkpoints name missing messages or states.
        self._checkpoints.append((self._session_id, agent, self._start + at, key, created_at))
        if len(self._checkpoints) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        """Write what waits."""
        self._db.executemany(
            "INSERT INTO pygents_archive (session_id, run_id, tokens, preview, data) "
            "VALUES (?, ?, ?, ?, ?)",
            self._archived,
        )
        self._db.executemany(ops.APPEND, self._live)
        self._db.executemany(
            f"INSERT INTO {_RUNS_TABLE} (kind, idx, run_id) VALUES (?, ?, ?)",
            self._runs,
        )
        usage_sql.insert_sqlite(self._session_id, self._records, self._db)
        self._db.executemany(checkpoint_sql.PUT_SQLITE, self._checkpoints)
        self._archived, self._live, self._runs, self._records = [], [], [], []
        self._checkpoints = []
