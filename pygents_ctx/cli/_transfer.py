"""The `export` and `import` commands, and the session file one writes and the other reads.

One JSON object, format version 3:

    {
      "version": 3,
      "session_id": "demo",
      "input_tokens": 1200,
      "output_tokens": 340,
      "archived": [ ...messages in to_dict() form, oldest first... ],
      "archived_run_ids": [ ...each archived message's run id, or null... ],
      "messages": [ ...the live history, oldest first... ],
      "run_ids": [ ...each live message's run id, or null... ],
      "usage": [ ...the usage records in UsageRecord.to_dict() form, oldest first... ]
    }

Only `messages` is required when reading: `version` defaults to 3, `session_id`
to none (a new id), `archived` and `usage` to `[]`, the run ids to null and the
token counts to 0. Version 2 (written before usage records were kept) is the
same without `usage`, and version 1 (before run ids) also without the two run
id lists; each refuses the keys it did not have. Unknown keys are refused, so a
typo does not silently drop data.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from pygents_ctx._json import dumps, shown
from pygents_ctx.cli._db import CliError, check_database, with_session
from pygents_ctx.cli._render import Output, plural
from pygents_ctx.context.messages import Message, from_dict, to_dict
from pygents_ctx.context.stores import SessionInfo, SQLiteContextStore, connect
from pygents_ctx.context.stores._common import LARGEST, new_session_id
from pygents_ctx.context.stores.base import ContextStore, SessionSnapshot, StoredMessage
from pygents_ctx.context.usage import UsageRecord

__all__ = [
    "FORMAT_VERSION",
    "SessionFile",
    "SessionFileError",
    "export",
    "import_",
    "load_session",
    "parse_session_file",
    "save_session",
]

FORMAT_VERSION: Final = 3
_KEYS_V1: Final = ("version", "session_id", "input_tokens", "output_tokens", "archived", "messages")
_KEYS_V2: Final = (*_KEYS_V1[:5], "archived_run_ids", "messages", "run_ids")
_KEYS: Final = {1: _KEYS_V1, 2: _KEYS_V2, 3: (*_KEYS_V2, "usage")}


class SessionFileError(ValueError):
    """A session file that cannot be imported; the message names the field."""


@dataclass(frozen=True, slots=True, init=False)
class SessionFile:
    """A session as the file holds it: its id, history and archive with run ids, token
    usage and usage records.

    `messages` and `archived` accept `StoredMessage`s or plain `Message`s
    (no run id).
    """

    session_id: str | None
    messages: tuple[StoredMessage, ...]
    archived: tuple[StoredMessage, ...]
    input_tokens: int
    output_tokens: int
    usage: tuple[UsageRecord, ...]

    def __init__(
        self,
        session_id: str | None,
        messages: Sequence[StoredMessage | Message],
        archived: Sequence[StoredMessage | Message],
        input_tokens: int = 0,
        output_tokens: int = 0,
        usage: Sequence[UsageRecord] = (),
    ) -> None:
        object.__setattr__(self, "session_id", session_id)
        object.__setattr__(self, "messages", _as_stored(messages))
        object.__setattr__(self, "archived", _as_stored(archived))
        object.__setattr__(self, "input_tokens", input_tokens)
        object.__setattr__(self, "output_tokens", output_tokens)
        object.__setattr__(self, "usage", tuple(usage))

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
        }

    def to_json(self) -> bytes:
        """The file's bytes: indented JSON with a final newline."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"


def _as_stored(messages: Sequence[StoredMessage | Message]) -> tuple[StoredMessage, ...]:
    return tuple(m if isinstance(m, StoredMessage) else StoredMessage(m) for m in messages)


def parse_session_file(data: bytes, source: str) -> SessionFile:
    """Read a session file's bytes; `source` names the file in error messages.

    Raises:
        SessionFileError: The bytes are not JSON, not an object, hold an
            unknown key or version, or a field of the wrong type.

    Examples:
        >>> file = parse_session_file(b'{"session_id": "s", "messages": []}', "s.json")
        >>> file.session_id, file.messages, file.input_tokens
        ('s', (), 0)
    """
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise SessionFileError(f"{source} is not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise SessionFileError(
            f"{source} must hold a JSON object with a 'messages' list, "
            f"not a {type(document).__name__}"
        )
    version = document.get("version", FORMAT_VERSION)  # each version reads the one before
    if isinstance(version, bool) or not isinstance(version, int) or version not in _KEYS:
        newer = isinstance(version, int) and version > FORMAT_VERSION
        raise SessionFileError(
            f"{source}: version {shown(version)} is not supported; this pygents_ctx reads versions "
            f"1 to {FORMAT_VERSION}{' (upgrade pygents_ctx to read newer files)' if newer else ''}"
        )
    keys = _KEYS[version]
    unknown = sorted(set(document) - set(keys))
    if unknown:
        raise SessionFileError(
            f"{source} has unknown keys {', '.join(map(repr, unknown))}; "
            f"a version {version} session file holds only {', '.join(keys)}"
        )
    if "messages" not in document:
        raise SessionFileError(f"{source} has no 'messages' list; export writes one")
    session_id = document.get("session_id")
    if session_id is not None and (not isinstance(session_id, str) or not session_id):
        raise SessionFileError(
            f"{source}: session_id must be a non-empty string or null, not {shown(session_id)}"
        )
    return SessionFile(
        session_id,
        _stored(document, "messages", "run_ids", source),
        _stored(document, "archived", "archived_run_ids", source),
        _tokens(document, "input_tokens", source),
        _tokens(document, "output_tokens", source),
        _usage(document, source),
    )


def _stored(
    document: Mapping[str, Any], key: str, runs_key: str, source: str
) -> list[StoredMessage]:
    messages = _messages(document, key, source)
    run_ids = document.get(runs_key, [None] * len(messages))
    if not isinstance(run_ids, list) or len(run_ids) != len(messages):
        raise SessionFileError(
            f"{source}: {runs_key} must be a list with one run id (or null) for each of the "
            f"{len(messages)} {key}, not {shown(run_ids)}"
        )
    for index, run_id in enumerate(run_ids):
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise SessionFileError(
                f"{source}: {runs_key}[{index}] must be a non-empty string or null, "
                f"not {shown(run_id)}"
            )
    return list(map(StoredMessage, messages, run_ids))


def _messages(document: Mapping[str, Any], key: str, source: str) -> list[Message]:
    items = document.get(key, [])
    if not isinstance(items, list):
        raise SessionFileError(
            f"{source}: {key} must be a list of messages, not {type(items).__name__}"
        )
    messages = []
    for index, item in enumerate(items):
        try:
            message = from_dict(item)
        except ValueError as exc:
            raise SessionFileError(f"{source}: {key}[{index}]{_strip_owner(str(exc))}") from None
        if not isinstance(message, Message):
            raise SessionFileError(
                f"{source}: {key}[{index}] is a {type(message).__name__}, not a message "
                "(a message is an object with 'role' and 'content')"
            )
        try:  # what the store will write: refused now, before anything is written
            dumps(item, f"{source}: {key}[{index}]")
        except TypeError as exc:
            raise SessionFileError(str(exc)) from None
        messages.append(message)
    return messages


def _strip_owner(reason: str) -> str:
    # from_dict calls the value it reads "message" (or "value" when it is no dict);
    # the caller puts the value's path in the file in its place.
    for owner in ("message", "value"):
        if reason.startswith(owner) and reason[len(owner) : len(owner) + 1] in (".", ":", " "):
            return reason[len(owner) :]
    return f": {reason}"


def _usage(document: Mapping[str, Any], source: str) -> list[UsageRecord]:
    items = document.get("usage", [])
    if not isinstance(items, list):
        raise SessionFileError(
            f"{source}: usage must be a list of usage records, not {type(items).__name__}"
        )
    records = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise SessionFileError(
                f"{source}: usage[{index}] must be an object with a 'usage' dict of token "
                f"amounts (UsageRecord.to_dict() form), not {shown(item)}"
            )
        try:
            records.append(UsageRecord.from_dict(item))
        except (TypeError, ValueError) as exc:
            raise SessionFileError(f"{source}: usage[{index}]: {exc}") from None
    return records


def _tokens(document: Mapping[str, Any], key: str, source: str) -> int:
    value = document.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LARGEST:
        raise SessionFileError(
            f"{source}: {key} must be a whole number from 0 to 2**63 - 1, not {shown(value)}"
        )
    return value


async def load_session(store: ContextStore) -> SessionFile:
    """The session `store` holds, as a `SessionFile`, read at one moment (`store.snapshot()`)."""
    return SessionFile.of(await store.snapshot())


async def save_session(store: ContextStore, file: SessionFile) -> None:
    """Write `file` into `store`'s session, which must hold no messages yet: all or nothing.

    One `store.restore()`, so one transaction in the SQLite store: interrupted
    at any point, the session holds all of the file or none of it.

    Raises:
        ValueError: The session already holds messages (nothing is written).
    """
    await store.restore(file.snapshot(store.session_id))


# -- the export and import commands ---------------------------------------------------


def export(args: argparse.Namespace, out: Output) -> None:
    """`export`: a session as a session file, to stdout or `--output`."""

    async def read(store: SQLiteContextStore, info: SessionInfo) -> SessionFile:
        return await load_session(store)

    file = with_session(args.db, args.session, read)
    data = file.to_json()
    if args.output in (None, "-"):
        out.stream.write(data.decode())
        return
    Path(args.output).write_bytes(data)
    out.lines(
        [
            f"exported {plural(len(file.messages), 'message')} "
            f"({len(file.archived)} archived) of session {file.session_id} to {args.output}"
        ]
    )


def _read_input(name: str) -> tuple[bytes, str]:
    if name == "-":
        return sys.stdin.buffer.read(), "stdin"
    try:
        return Path(name).read_bytes(), name
    except FileNotFoundError:
        raise CliError(f"no file at {name!r} to import") from None
    except IsADirectoryError:
        raise CliError(f"{name!r} is a directory; import takes a file that export wrote") from None


def import_(args: argparse.Namespace, out: Output) -> None:
    """`import`: a new session (or an empty one) from a session file."""
    data, source = _read_input(args.file)
    file = parse_session_file(data, source)
    session_id = args.session or file.session_id or new_session_id()
    if Path(args.db).exists():  # a new database is fine, someone else's SQLite file is not
        check_database(args.db)

    async def write() -> None:
        async with connect(args.db) as conn:
            store = SQLiteContextStore(conn, session_id=session_id)
            if await store.get_history(include_archived=True, limit=1):
                raise CliError(
                    f"session {session_id!r} in {args.db!r} already holds messages; "
                    "import into a new session with --session NEW_ID"
                )
            await save_session(store, file)

    asyncio.run(write())
    if out.as_json:
        out.json(
            {
                "session_id": session_id,
                "messages": len(file.messages),
                "archived": len(file.archived),
            }
        )
        return
    out.lines(
        [
            f"imported {plural(len(file.messages), 'message')} ({len(file.archived)} archived) "
            f"into session {session_id}"
        ]
    )
