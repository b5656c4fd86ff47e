"""What every store backend shares: argument checks, windows, previews, cached counts."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Final, TypeVar

from pygents_ctx.context.messages import Message
from pygents_ctx.context.tokens import DEFAULT_COUNTER

__all__ = [
    "PREVIEW_LENGTH",
    "check_count",
    "check_messages",
    "check_run_id",
    "check_session_id",
    "check_tokens",
    "check_window",
    "new_session_id",
    "now_iso",
    "preview_of",
    "require_run_id",
    "window",
    "with_token_count",
]

T = TypeVar("T")

PREVIEW_LENGTH: Final = 80
# The key `count_message_tokens` caches a default count under (counter, overhead, media).
_DEFAULT_COUNT_KEY: Final = (DEFAULT_COUNTER, 4, 600)


def with_token_count(message: Message, tokens: int) -> Message:
    """Put the stored default-settings token count in the message's cache, and return it.

    `count_message_tokens(message)` then answers from the cache instead of re-tokenizing.
    """
    object.__setattr__(message, "_tokens", (_DEFAULT_COUNT_KEY, tokens))
    return message


def preview_of(message: Message) -> str | None:
    """The session preview a message gives: a user message's text, cut to 80 characters."""
    if message.role != "user":
        return None
    text = message.text
    return text[:PREVIEW_LENGTH] if text else None


def now_iso() -> str:
    """The current UTC time, ISO 8601 with microseconds (sorts as text)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def new_session_id() -> str:
    """A fresh random session id (a uuid4 in hex)."""
    return uuid.uuid4().hex


def check_session_id(session_id: object) -> str:
    """Return `session_id` if it is a non-empty str.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, not {type(session_id).__name__}")
    if not session_id:
        raise ValueError("session_id must not be empty; pass None for a generated id")
    return session_id


def check_run_id(run_id: object) -> str | None:
    """Return `run_id` if it is None or a non-empty str.

    Raises:
        TypeError: It is not a str or None.
        ValueError: It is empty.
    """
    return None if run_id is None else require_run_id(run_id)


def require_run_id(run_id: object) -> str:
    """Return `run_id` if it is a non-empty str.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty.
    """
    if not isinstance(run_id, str):
        raise TypeError(f"run_id must be a str, not {type(run_id).__name__}")
    if not run_id:
        raise ValueError("run_id must not be empty")
    return run_id


def check_messages(messages: Iterable[Message], owner: str = "messages") -> list[Message]:
    """The messages as a new list, after checking that each one is a `Message`.

    Raises:
        TypeError: `messages` is not iterable, is a single message, or holds something else.
    """
    if isinstance(messages, Message) or not isinstance(messages, Iterable):
        raise TypeError(f"{owner} must be an iterable of Message, not {type(messages).__name__}")
    batch = list(messages)
    for index, message in enumerate(batch):
        if not isinstance(message, Message):
            raise TypeError(f"{owner}[{index}] must be a Message, not {type(message).__name__}")
    return batch


def _check_natural(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be at least 0, not {value}")
    return value


def check_window(limit: object, offset: object) -> None:
    """Check `get_history` arguments: `limit` None or an int >= 0, `offset` an int >= 0.

    Raises:
        TypeError: A value is not an int.
        ValueError: A value is negative.
    """
    if limit is not None:
        _check_natural("limit", limit)
    _check_natural("offset", offset)


def check_count(count: object) -> int:
    """Check `replace_prefix`'s `count`: an int >= 0."""
    return _check_natural("count", count)


def check_tokens(input_tokens: object, output_tokens: object) -> tuple[int, int]:
    """Check a pair of token amounts: ints >= 0."""
    return _check_natural("input_tokens", input_tokens), _check_natural(
        "output_tokens", output_tokens
    )


def window(items: Sequence[T], limit: int | None, offset: int) -> list[T]:
    """The newest `limit` items (all when None), skipping the newest `offset`; oldest first."""
    end = max(len(items) - offset, 0)
    start = 0 if limit is None else max(end - limit, 0)
    return list(items[start:end])
