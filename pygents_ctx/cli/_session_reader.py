"""Reading a session file one value at a time, in bounded memory, with every rule checked.

`read_session(stream, source, sink)` reads the file's object key by key and
each list element by element (see `_json_stream`), checks each value as it
comes and hands it to `sink`: `parse_session_file` keeps them all, `import`
writes them to the database in batches inside one transaction. What only the
whole file can tell (the version's keys, `messages` present, one run id per
message) is checked at the end; `import` then rolls back, so a refused file
leaves nothing behind either way.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Final, Protocol

from pygents_ctx._checks import storable_text
from pygents_ctx._json import shown
from pygents_ctx.cli._json_stream import JsonStreamError, NotAnObjectError, ObjectReader
from pygents_ctx.context.messages import Message, from_dict
from pygents_ctx.context.stores._checkpoint_sql import check_agent, digest
from pygents_ctx.context.stores._common import (
    LARGEST,
    check_session_id,
    check_usage_record,
    encode_message,
)
from pygents_ctx.context.stores._records import check_created_at
from pygents_ctx.context.usage import UsageRecord
from pygents_ctx.memory.blobs.base import check_content_type, check_name
from pygents_ctx.model.offload import HANDLE_PREFIX

__all__ = [
    "FORMAT_VERSION",
    "KEYS",
    "SessionBlob",
    "SessionFileError",
    "SessionHeader",
    "SessionSink",
    "peek_session_id",
    "read_session",
]

FORMAT_VERSION: Final = 5
_KEYS_V1: Final = ("version", "session_id", "input_tokens", "output_tokens", "archived", "messages")
_KEYS_V2: Final = (*_KEYS_V1[:5], "archived_run_ids", "messages", "run_ids")
_KEYS_V3: Final = (*_KEYS_V2, "usage")
_KEYS_V4: Final = (*_KEYS_V3, "blobs")
KEYS: Final = {
    1: _KEYS_V1,
    2: _KEYS_V2,
    3: _KEYS_V3,
    4: _KEYS_V4,
    5: (*_KEYS_V4, "checkpoint_states", "checkpoints"),
}
_BLOB_KEYS: Final = ("name", "content_type", "data")
_STATE_KEYS: Final = ("digest", "data")
_CHECKPOINT_KEYS: Final = ("agent", "at", "created_at", "state")
_RUNS_OF: Final = {"run_ids": "messages", "archived_run_ids": "archived"}


class SessionFileError(ValueError):
    """A session file that cannot be imported; the message names the field."""


class SessionSink(Protocol):
    """Where `read_session` puts what it reads, one value at a time."""

    def message(self, key: str, message: Message, data: bytes) -> None:
        """The next message of `key` (`messages` or `archived`) and the bytes a store writes."""

    def run_id(self, key: str, index: int, run_id: str) -> None:
        """Run id `index` of `key` (`run_ids` or `archived_run_ids`), when it is not null."""

    def usage_record(self, record: UsageRecord) -> None:
        """The next usage record."""

    def blob(self, blob: SessionBlob) -> None:
        """The next blob (the whole text of an offloaded tool result)."""

    def checkpoint_state(self, key: bytes, data: bytes) -> None:
        """The next saved state of a checkpoint, and the digest it is kept under."""

    def checkpoint(self, agent: str, at: int, created_at: str, key: bytes) -> None:
        """The next checkpoint: agent `agent`'s state `key` at live message `at`."""


@dataclass(frozen=True, slots=True)
class SessionBlob:
    """A blob a session file carries: the whole text of an offloaded tool result.

    In the file: `{"name", "content_type", "data"}`, the data in base64.
    """

    name: str
    content_type: str
    data: bytes

    def to_dict(self) -> dict[str, str]:
        """Its JSON object in the session file."""
        return {
            "name": self.name,
            "content_type": self.content_type,
            "data": base64.b64encode(self.data).decode("ascii"),
        }


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """What a session file holds besides its lists, and how long its message lists were."""

    session_id: str | None
    input_tokens: int
    output_tokens: int
    messages: int
    archived: int


def read_session(stream: IO[bytes], source: str, sink: SessionSink) -> SessionHeader:
    """Read the session file `stream`, handing each message, run id and record to `sink`.

    Raises:
        SessionFileError: The file is not JSON, not an object, or breaks a rule
            (see the `_transfer` module docstring); the message names the field.
    """
    reader = ObjectReader(stream)
    try:
        return _read(reader, source, sink)
    except NotAnObjectError as exc:
        raise SessionFileError(
            f"{source} must hold a JSON object with a 'messages' list, not a {exc.kind}"
        ) from None
    except JsonStreamError as exc:
        raise SessionFileError(f"{source} is not valid JSON ({exc})") from None


def peek_session_id(stream: IO[bytes], source: str) -> str | None:
    """The file's `session_id`, read without parsing the rest (None when it has none).

    Raises:
        SessionFileError: The file is malformed before the id, or the id is.
    """
    reader = ObjectReader(stream)
    try:
        reader.start()
        while (key := reader.key()) is not None:
            if key == "session_id":
                return _session_id(reader.value(), source)
            reader.skip()
    except NotAnObjectError:
        return None  # the full read reports it
    except JsonStreamError as exc:
        raise SessionFileError(f"{source} is not valid JSON ({exc})") from None
    return None


def _read(reader: ObjectReader, source: str, sink: SessionSink) -> SessionHeader:
    reader.start()
    seen: list[str] = []
    scalars: dict[str, Any] = {}
    counts = {"messages": 0, "archived": 0, "run_ids": 0, "archived_run_ids": 0}
    checkpoints = _Checkpoints(sink)
    while (key := reader.key()) is not None:
        if key in seen:
            raise SessionFileError(f"{source} has the key {key!r} twice; a key appears once")
        seen.append(key)
        if key not in KEYS[FORMAT_VERSION]:
            _check_version(scalars.get("version", FORMAT_VERSION), source)
            _refuse_unknown(seen, scalars.get("version", FORMAT_VERSION), source)
        if key in ("messages", "archived"):
            counts[key] = _read_list(reader, key, source, "a list of messages", _message(sink))
        elif key in _RUNS_OF:
            counts[key] = _read_list(reader, key, source, "a list of run ids", _run_id(sink))
        elif key == "usage":
            what = "a list of usage records"
            _read_list(reader, key, source, what, _usage_record(sink))
        elif key == "blobs":
            _read_list(reader, key, source, "a list of blobs", _blob(sink))
        elif key == "checkpoint_states":
            what = "a list of saved states"
            _read_list(reader, key, source, what, checkpoints.take_state)
        elif key == "checkpoints":
            _read_list(reader, key, source, "a list of checkpoints", checkpoints.take)
        else:
            scalars[key] = reader.value()
    reader.finish()
    version = scalars.get("version", FORMAT_VERSION)  # each version reads the one before
    _check_version(version, source)
    _refuse_unknown(seen, version, source)
    if "messages" not in seen:
        raise SessionFileError(f"{source} has no 'messages' list; export writes one")
    for runs_key, key in _RUNS_OF.items():
        if runs_key in seen and counts[runs_key] != counts[key]:
            raise SessionFileError(
                f"{source}: {runs_key} must be a list with one run id (or null) for each of the "
                f"{counts[key]} {key}, not {counts[runs_key]} of them"
            )
    checkpoints.finish(counts["messages"], source)
    return SessionHeader(
        _session_id(scalars.get("session_id"), source),
        _tokens(scalars, "input_tokens", source),
        _tokens(scalars, "output_tokens", source),
        counts["messages"],
        counts["archived"],
    )


def _check_version(version: object, source: str) -> None:
    if isinstance(version, bool) or not isinstance(version, int) or version not in KEYS:
        newer = isinstance(version, int) and version > FORMAT_VERSION
        raise SessionFileError(
            f"{source}: version {shown(version)} is not supported; this pygents_ctx reads versions "
            f"1 to {FORMAT_VERSION}{' (upgrade pygents_ctx to read newer files)' if newer else ''}"
        )


def _refuse_unknown(seen: list[str], version: object, source: str) -> None:
    keys = KEYS.get(version, KEYS[FORMAT_VERSION]) if isinstance(version, int) else KEYS[4]
    unknown = sorted(set(seen) - set(keys))
    if unknown:
        raise SessionFileError(
            f"{source} has unknown keys {', '.join(map(repr, unknown))}; "
            f"a version {shown(version)} session file holds only {', '.join(keys)}"
        )


def _read_list(
    reader: ObjectReader,
    key: str,
    source: str,
    what: str,
    take: Callable[[str, int, Any, str], None],
) -> int:
    if not reader.is_list():
        value = reader.value()
        raise SessionFileError(f"{source}: {key} must be {what}, not {type(value).__name__}")
    count = 0
    for index, item in enumerate(reader.items()):
        take(key, index, item, source)
        count += 1
    return count


def _message(sink: SessionSink) -> Callable[[str, int, Any, str], None]:
    def take(key: str, index: int, item: Any, source: str) -> None:
        where = f"{source}: {key}[{index}]"
        try:
            message = from_dict(item)
        except ValueError as exc:
            raise SessionFileError(f"{where}{_strip_owner(str(exc))}") from None
        if not isinstance(message, Message):
            raise SessionFileError(
                f"{where} is a {type(message).__name__}, not a message "
                "(a message is an object with 'role' and 'content')"
            )
        try:  # what the store will write: refused now, with the message's place in the file
            data = encode_message(message)
        except (TypeError, ValueError) as exc:
            raise SessionFileError(f"{where}: {exc}") from None
        sink.message(key, message, data)

    return take


def _run_id(sink: SessionSink) -> Callable[[str, int, Any, str], None]:
    def take(key: str, index: int, run_id: Any, source: str) -> None:
        if run_id is None:
            return
        if not isinstance(run_id, str) or not run_id:
            raise SessionFileError(
                f"{source}: {key}[{index}] must be a non-empty string or null, not {shown(run_id)}"
            )
        try:
            storable_text(run_id, "run id")
        except ValueError as exc:
            raise SessionFileError(f"{source}: {key}[{index}]: {exc}") from None
        sink.run_id(key, index, run_id)

    return take


def _usage_record(sink: SessionSink) -> Callable[[str, int, Any, str], None]:
    def take(key: str, index: int, item: Any, source: str) -> None:
        if not isinstance(item, dict):
            raise SessionFileError(
                f"{source}: usage[{index}] must be an object with a 'usage' dict of token "
                f"amounts (UsageRecord.to_dict() form), not {shown(item)}"
            )
        try:
            record = check_usage_record(UsageRecord.from_dict(item))
        except (TypeError, ValueError) as exc:
            raise SessionFileError(f"{source}: usage[{index}]: {exc}") from None
        sink.usage_record(record)

    return take


def _blob(sink: SessionSink) -> Callable[[str, int, Any, str], None]:
    def take(key: str, index: int, item: Any, source: str) -> None:
        where = f"{source}: blobs[{index}]"
        _check_keys(item, _BLOB_KEYS, where, " (the data in base64)")
        try:
            name, content_type = check_name(item["name"]), check_content_type(item["content_type"])
            raw = _base64_data(item["data"])
        except (TypeError, ValueError, binascii.Error) as exc:
            raise SessionFileError(f"{where}: {exc}") from None
        if (
            name.startswith(HANDLE_PREFIX)
            and name != HANDLE_PREFIX + hashlib.sha256(raw).hexdigest()
        ):
            raise SessionFileError(
                f"{where}: the data of {name!r} is not the text its name was made from "
                "(the SHA-256 differs); export the session again"
            )
        sink.blob(SessionBlob(name, content_type, raw))

    return take


class _Checkpoints:
    """Reads `checkpoint_states` and `checkpoints`, and checks at the end what only both
    lists and the message count can tell: each checkpoint at a message of the file,
    each state a checkpoint names present, each state present named."""

    def __init__(self, sink: SessionSink) -> None:
        self._sink = sink
        self._states: dict[bytes, int] = {}  # digest -> its index in checkpoint_states
        self._named: dict[bytes, int] = {}  # digest -> the first checkpoint naming it
        self._last: tuple[int, str] | None = None
        self._count = 0

    def take_state(self, key: str, index: int, item: Any, source: str) -> None:
        where = f"{source}: checkpoint_states[{index}]"
        _check_keys(item, _STATE_KEYS, where, " (the data in base64)")
        named = _digest(item["digest"], f"{where}.digest")
        try:
            data = _base64_data(item["data"])
        except (TypeError, ValueError, binascii.Error) as exc:
            raise SessionFileError(f"{where}: {exc}") from None
        if not data:
            raise SessionFileError(f"{where}: data must not be empty (a saved state is not)")
        if digest(data) != named:
            raise SessionFileError(
                f"{where}: the data is not the state its digest was made from (the "
                "BLAKE2b digest differs); export the session again"
            )
        if named in self._states:
            raise SessionFileError(
                f"{where} is checkpoint_states[{self._states[named]}] again; "
                "a state appears once, however many checkpoints name it"
            )
        self._states[named] = index
        self._sink.checkpoint_state(named, data)

    def take(self, key: str, index: int, item: Any, source: str) -> None:
        where = f"{source}: checkpoints[{index}]"
        _check_keys(item, _CHECKPOINT_KEYS, where, "")
        at = item["at"]
        if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= LARGEST:
            raise SessionFileError(
                f"{where}.at must be the number of the message it was taken at (0 or more), "
                f"not {shown(at)}"
            )
        try:
            agent = check_agent(item["agent"])
            created_at = check_created_at(item["created_at"], "created_at")
        except (TypeError, ValueError) as exc:
            raise SessionFileError(f"{where}: {exc}") from None
        named = _digest(item["state"], f"{where}.state")
        if self._last is not None and (at, agent) <= self._last:
            raise SessionFileError(
                f"{where} (agent {agent!r} at message {at}) comes after agent "
                f"{self._last[1]!r} at message {self._last[0]}: checkpoints are in order of "
                "message, then agent, one per agent and message (as export writes them)"
            )
        self._last = (at, agent)
        self._named.setdefault(named, index)
        self._count = index + 1
        self._sink.checkpoint(agent, at, created_at, named)

    def finish(self, messages: int, source: str) -> None:
        if self._last is not None and self._last[0] > messages:
            raise SessionFileError(
                f"{source}: checkpoints[{self._count - 1}] is at message {self._last[0]}, but "
                f"the file holds {messages} messages: a checkpoint is at a message from 0 to "
                f"{messages}; remove it, or export the session again"
            )
        for named, index in self._named.items():
            if named not in self._states:
                raise SessionFileError(
                    f"{source}: checkpoints[{index}] names the state {named.hex()}, which "
                    "checkpoint_states does not hold; export the session again"
                )
        for named, index in self._states.items():
            if named not in self._named:
                raise SessionFileError(
                    f"{source}: checkpoint_states[{index}] is named by no checkpoint; "
                    "remove it, or export the session again"
                )


def _check_keys(item: object, keys: tuple[str, ...], where: str, note: str) -> None:
    """Refuse `item` unless it is an object of exactly `keys`."""
    if not isinstance(item, dict) or set(item) != set(keys):
        raise SessionFileError(
            f"{where} must be an object of exactly {', '.join(keys)}{note}, not {shown(item)}"
        )


def _base64_data(data: object) -> bytes:
    """The bytes a `data` field holds as base64 text.

    Raises:
        TypeError: `data` is not a str.
        binascii.Error: It is not base64.
    """
    if not isinstance(data, str):
        raise TypeError(f"data must be base64 text, not {type(data).__name__}")
    return base64.b64decode(data, validate=True)


def _digest(value: object, where: str) -> bytes:
    """A state's digest as the file writes it: 40 lowercase hex digits."""
    if isinstance(value, str) and len(value) == 40:
        try:
            key = bytes.fromhex(value)
        except ValueError:
            pass
        else:
            if key.hex() == value:
                return key
    raise SessionFileError(
        f"{where} must be a state's digest (40 lowercase hex digits), not {shown(value)}"
    )


def _strip_owner(reason: str) -> str:
    # from_dict calls the value it reads "message" (or "value" when it is no dict);
    # the caller puts the value's path in the file in its place.
    for owner in ("message", "value"):
        if reason.startswith(owner) and reason[len(owner) : len(owner) + 1] in (".", ":", " "):
            return reason[len(owner) :]
    return f": {reason}"


def _session_id(value: object, source: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SessionFileError(
            f"{source}: session_id must be a non-empty string or null, not {shown(value)}"
        )
    try:
        return check_session_id(value)
    except ValueError as exc:
        raise SessionFileError(f"{source}: {exc}") from None


def _tokens(scalars: dict[str, Any], key: str, source: str) -> int:
    value = scalars.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LARGEST:
        raise SessionFileError(
            f"{source}: {key} must be a whole number from 0 to 2**63 - 1, not {shown(value)}"
        )
    return value
