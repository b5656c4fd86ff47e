"""The session file the command line's `export` writes and `import` reads.

One JSON object, format version 1:

    {
      "version": 1,
      "session_id": "demo",
      "input_tokens": 1200,
      "output_tokens": 340,
      "archived": [ ...messages in to_dict() form, oldest first... ],
      "messages": [ ...the live history, oldest first... ]
    }

Only `messages` is required when reading: `version` defaults to 1, `session_id`
to none (a new id), `archived` to `[]` and the token counts to 0. Unknown keys
are refused, so a typo does not silently drop data. Run ids are not part of
the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from pygents_ctx.context.messages import Message, from_dict, to_dict
from pygents_ctx.context.stores.base import ContextStore

__all__ = [
    "FORMAT_VERSION",
    "SessionFile",
    "SessionFileError",
    "load_session",
    "parse_session_file",
    "save_session",
]

FORMAT_VERSION: Final = 1
_KEYS: Final = ("version", "session_id", "input_tokens", "output_tokens", "archived", "messages")


class SessionFileError(ValueError):
    """A session file that cannot be imported; the message names the field."""


@dataclass(frozen=True, slots=True)
class SessionFile:
    """A session as the file holds it: its id, history, archive and token usage."""

    session_id: str | None
    messages: list[Message]
    archived: list[Message]
    input_tokens: int = 0
    output_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object (see the module docstring)."""
        return {
            "version": FORMAT_VERSION,
            "session_id": self.session_id,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "archived": [to_dict(message) for message in self.archived],
            "messages": [to_dict(message) for message in self.messages],
        }

    def to_json(self) -> bytes:
        """The file's bytes: indented JSON with a final newline."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"


def parse_session_file(data: bytes, source: str) -> SessionFile:
    """Read a session file's bytes; `source` names the file in error messages.

    Raises:
        SessionFileError: The bytes are not JSON, not an object, hold an
            unknown key or version, or a field of the wrong type.

    Examples:
        >>> file = parse_session_file(b'{"session_id": "s", "messages": []}', "s.json")
        >>> file.session_id, file.messages, file.input_tokens
        ('s', [], 0)
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
    unknown = sorted(set(document) - set(_KEYS))
    if unknown:
        raise SessionFileError(
            f"{source} has unknown keys {', '.join(map(repr, unknown))}; "
            f"a session file holds only {', '.join(_KEYS)}"
        )
    version = document.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION or isinstance(version, bool):
        newer = isinstance(version, int) and version > FORMAT_VERSION
        raise SessionFileError(
            f"{source}: version {version!r} is not supported; this pygents_ctx reads version "
            f"{FORMAT_VERSION}{' (upgrade pygents_ctx to read newer files)' if newer else ''}"
        )
    if "messages" not in document:
        raise SessionFileError(f"{source} has no 'messages' list; export writes one")
    session_id = document.get("session_id")
    if session_id is not None and (not isinstance(session_id, str) or not session_id):
        raise SessionFileError(
            f"{source}: session_id must be a non-empty string or null, not {session_id!r}"
        )
    return SessionFile(
        session_id,
        _messages(document, "messages", source),
        _messages(document, "archived", source),
        _tokens(document, "input_tokens", source),
        _tokens(document, "output_tokens", source),
    )


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
        messages.append(message)
    return messages


def _strip_owner(reason: str) -> str:
    # from_dict calls the value it reads "message" (or "value" when it is no dict);
    # the caller puts the value's path in the file in its place.
    for owner in ("message", "value"):
        if reason.startswith(owner) and reason[len(owner) : len(owner) + 1] in (".", ":", " "):
            return reason[len(owner) :]
    return f": {reason}"


def _tokens(document: Mapping[str, Any], key: str, source: str) -> int:
    value = document.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SessionFileError(
            f"{source}: {key} must be a whole number of at least 0, not {value!r}"
        )
    return value


async def load_session(store: ContextStore) -> SessionFile:
    """The session `store` holds, as a `SessionFile`: history, archive and token usage."""
    everything = await store.get_history(include_archived=True)
    live = await store.get_history()
    archived = everything[: max(len(everything) - len(live), 0)]
    input_tokens, output_tokens = await store.get_context_tokens()
    return SessionFile(store.session_id, live, archived, input_tokens, output_tokens)


async def save_session(store: ContextStore, file: SessionFile) -> None:
    """Write `file` into `store`, which must hold no messages yet.

    Three steps (the messages, then the archive split, then the token usage),
    each its own transaction in the SQLite store.
    """
    await store.append_many([*file.archived, *file.messages])
    if file.archived:
        await store.replace_prefix(len(file.archived), ())
    await store.set_context_tokens(file.input_tokens, file.output_tokens)
