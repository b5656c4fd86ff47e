"""What every store backend shares: argument checks, windows, previews, cached counts,
the history cache of the database backends, the statements that create a session's
row before a write, and how their connections open."""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Iterator,
    Sequence,
)
from datetime import UTC, datetime, timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    NamedTuple,
    Protocol,
    Self,
    TypeAlias,
    TypeVar,
)

import orjson

from pygents_ctx._checks import LARGEST, storable_text, unicode_text, whole_number
from pygents_ctx._json import dumps
from pygents_ctx.context.messages import Message, from_dict, to_dict
from pygents_ctx.context.tokens import DEFAULT_COUNTER
from pygents_ctx.context.usage import UsageRecord
from pygents_ctx.errors import ConcurrentModificationError

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "APPEND_CHUNK",
    "BLOB_HANDLE",
    "LARGEST",
    "MAX_MESSAGE_BYTES",
    "POSTGRES_LOCK_SESSION",
    "PREVIEW_LENGTH",
    "SQLITE_NEW_SESSION",
    "ClosesOnExit",
    "Connecting",
    "Erasure",
    "HistoryCache",
    "blob_handles",
    "changed_prefix",
    "check_count",
    "check_erase",
    "check_expected",
    "check_messages",
    "check_owner",
    "check_run_id",
    "check_session_id",
    "check_tokens",
    "check_usage_record",
    "check_window",
    "checked_messages",
    "decode",
    "decode_rows",
    "encode_message",
    "new_session_id",
    "now_iso",
    "preview_of",
    "require_run_id",
    "same_prefix",
    "session_not_empty",
    "takes_keyword",
    "window",
    "with_token_count",
]

T = TypeVar("T")

PREVIEW_LENGTH: Final = 80
# The key `count_message_tokens` caches a default count under (counter, overhead, media).
_DEFAULT_COUNT_KEY: Final = (DEFAULT_COUNTER, 4, 600)
# The `_tokens` slot's own setter (a message is frozen): faster than `object.__setattr__`.
_SET_TOKENS: Final = Message.__dict__["_tokens"].__set__


def with_token_count(message: Message, tokens: int) -> Message:
    """Put the stored default-settings token count in the message's cache, and return it.

    `count_message_tokens(message)` then answers from the cache instead of re-tokenizing.
    """
    _SET_TOKENS(message, (_DEFAULT_COUNT_KEY, tokens))
    return message


def decode(session_id: str, position: int, tokens: int, data: bytes) -> Message:
    """A stored row back into its message, with its stored token count cached on it."""
    try:
        parsed = orjson.loads(data)
        message = from_dict(parsed)  # plain text first, the usual stored message
        if not isinstance(message, Message):
            raise ValueError("it is not a message")
    except ValueError as exc:  # orjson.JSONDecodeError is a ValueError too
        raise ValueError(
            f"the message stored at position {position} of session {session_id!r} "
            f"cannot be read: {exc}"
        ) from exc
    return with_token_count(message, tokens)


def decode_rows(session_id: str, rows: Iterable[Sequence[Any]]) -> list[Message]:
    """`decode` of each (position, tokens, data) row, in order: how a history is read."""
    return [decode(session_id, position, tokens, data) for position, tokens, data in rows]


def same_prefix(
    session_id: str, rows: Sequence[tuple[int, int, bytes]], expected: Sequence[Message]
) -> bool:
    """Whether stored rows (position, tokens, data) hold the `expected` messages, in order.

    The compare-and-swap check of `replace_prefix`. A row whose bytes are what
    its expected message encodes to is equal without being decoded (decoding
    an encoding gives the message back); any other row is decoded and compared,
    since equal messages may be stored as other bytes (by an older version).
    """
    if len(rows) != len(expected):
        return False
    for row, message in zip(rows, expected, strict=True):
        if bytes(row[2]) != orjson.dumps(to_dict(message)) and (
            decode(session_id, *row) != message
        ):
            return False
    return True


def preview_of(message: Message) -> str | None:
    """The session preview a message gives: a user message's text, cut to 80 characters."""
    if message.role != "user":
        return None
    text = message.text
    return text[:PREVIEW_LENGTH] if text else None


def now_iso() -> str:
    """The current UTC time, ISO 8601 with microseconds (sorts as text)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


# A write to a session that may have no row yet creates the row first. On SQLite,
# inside the caller's transaction; the parameters are the session id and `created_at`.
SQLITE_NEW_SESSION: Final = (
    "INSERT INTO pygents_sessions (session_id, created_at) VALUES (?, ?) "
    "ON CONFLICT (session_id) DO NOTHING"
)
# On PostgreSQL the upsert creates or locks the session's row first, as every write
# does (the order a lease takeover locks rows in); the update changes nothing.
POSTGRES_LOCK_SESSION: Final = (
    "INSERT INTO pygents_sessions AS s (session_id) VALUES (%s) "
    "ON CONFLICT (session_id) DO UPDATE SET input_tokens = s.input_tokens"
)


def check_owner(owner: object) -> str | None:
    """Return `owner` (a user or tenant id) if it is None or a non-empty str every store can hold.

    Raises:
        TypeError: It is not a str or None.
        ValueError: It is empty, or holds a NUL or a lone surrogate.
    """
    if owner is None:
        return None
    return storable_text(owner, "owner", fix="pass None for a session without an owner")


class Erasure(NamedTuple):
    """Which sessions `erase` removes: all of the given conditions hold."""

    owner: str | None
    session: str | None
    before: str | None  # created before this moment (ISO 8601, UTC), or any time

    def where(self, value: str, moment: str) -> tuple[str, list[str]]:
        """The SQL condition on `pygents_sessions` and its parameters, with `value`
        the backend's placeholder and `moment` its placeholder for a timestamp."""
        conditions, params = [], []
        for column, given in (("owner", self.owner), ("session_id", self.session)):
            if given is not None:
                conditions.append(f"{column} = {value}")
                params.append(given)
        if self.before is not None:
            conditions.append(f"created_at < {moment}")
            params.append(self.before)
        return " AND ".join(conditions), params


def check_erase(owner: object, session: object, older_than: object) -> Erasure:
    """The checked arguments of `erase`, before anything is touched.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: Neither `owner` nor `session` is given (an erase never means
            "every session"), or `older_than` is negative.
    """
    if owner is None and session is None:
        raise ValueError(
            "erase needs owner=... (every session of that user or tenant) or session=... "
            "(one session id); with neither it would erase every session, so nothing was erased"
        )
    checked_owner = check_owner(owner)
    checked_session = None if session is None else check_session_id(session)
    before = None
    if older_than is not None:
        if not isinstance(older_than, timedelta):
            raise TypeError(
                f"older_than must be a datetime.timedelta or None, not {type(older_than).__name__}"
            )
        if older_than < timedelta(0):
            raise ValueError(f"older_than must not be negative, got {older_than}")
        try:
            moment = datetime.now(UTC) - older_than
        except OverflowError:  # before the calendar's first day: no session is that old
            moment = datetime.min.replace(tzinfo=UTC)
        before = moment.isoformat(timespec="microseconds")
    return Erasure(checked_owner, checked_session, before)


# The blob handles of offloaded tool results that a stored message names.
BLOB_HANDLE: Final = re.compile(rb"tool-results/[0-9a-f]{64}")


def blob_handles(data: Iterable[bytes]) -> set[str]:
    """The `tool-results/<sha256>` handles named in these stored messages' bytes."""
    return {match.decode() for item in data for match in BLOB_HANDLE.findall(item)}


def new_session_id() -> str:
    """A fresh random session id (a uuid4 in hex)."""
    return uuid.uuid4().hex


def check_session_id(session_id: object) -> str:
    """Return `session_id` if it is a non-empty str every store can hold.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty, or holds a NUL or a lone surrogate.
    """
    return storable_text(session_id, "session_id", fix="pass None for a generated id")


def check_run_id(run_id: object) -> str | None:
    """Return `run_id` if it is None or a non-empty str.

    Raises:
        TypeError: It is not a str or None.
        ValueError: It is empty.
    """
    return None if run_id is None else require_run_id(run_id)


def check_usage_record(record: object) -> UsageRecord:
    """Return `record` if it is a `UsageRecord`.

    Raises:
        TypeError: It is not.
    """
    if not isinstance(record, UsageRecord):
        raise TypeError(
            f"record_usage needs a UsageRecord, not {type(record).__name__}; "
            "write UsageRecord(Usage(input_tokens, output_tokens), run_id=...)"
        )
    if record.run_id is not None:
        storable_text(record.run_id, "UsageRecord.run_id", empty=True)
    storable_text(record.model, "UsageRecord.model", empty=True)
    return record


def require_run_id(run_id: object) -> str:
    """Return `run_id` if it is a non-empty str.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty.
    """
    return storable_text(run_id, "run_id")


# The most a stored message may take as JSON, on every store: well under SQLite's
# and PostgreSQL's 1 GB per value, so that each backend refuses the same messages.
MAX_MESSAGE_BYTES = 256 * 2**20  # read at each call, so that a test can lower it


def encode_message(message: Message) -> bytes:
    """The bytes a store writes for `message`: its `to_dict()` form as JSON.

    Raises:
        TypeError: A tool input holds a value JSON cannot hold.
        ValueError: A string in it holds a lone surrogate, or the JSON is
            larger than `MAX_MESSAGE_BYTES` (256 MiB).
    """
    data = to_dict(message)
    try:
        encoded = dumps(data, "Message")
    except TypeError:
        _refuse_surrogates(data, "Message")
        raise
    limit = MAX_MESSAGE_BYTES
    if len(encoded) > limit:
        raise ValueError(
            f"Message is {len(encoded):,} bytes as JSON, more than the {limit:,} bytes "
            f"(MAX_MESSAGE_BYTES) a store holds in one message; split it, or keep the large "
            "part (an image, a file) outside the store"
        )
    return encoded


def _refuse_surrogates(data: object, path: str) -> None:
    stack = [(data, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            unicode_text(value, where)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    unicode_text(key, f"{where} (a key)")
                stack.append((item, f"{where}.{key}"))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{where}[{index}]") for index, item in enumerate(value))


def check_messages(messages: Iterable[Message], owner: str = "messages") -> list[Message]:
    """The messages as a new list, after checking that each one is a `Message`.

    Raises:
        TypeError: `messages` is not iterable, is a single message, or holds something else.
    """
    return list(checked_messages(messages, owner))


# Messages a PostgreSQL append sends in one statement, at most: memory holds one such batch.
APPEND_CHUNK: Final = 1_000


def checked_messages(messages: Iterable[Message], owner: str = "messages") -> Iterator[Message]:
    """The messages of `messages`, each checked as it is reached (for a streamed append).

    Raises:
        TypeError: `messages` is not iterable or is a single message (at once);
            an item is not a `Message` (when reached, naming its index).
    """
    if isinstance(messages, Message) or not isinstance(messages, Iterable):
        raise TypeError(f"{owner} must be an iterable of Message, not {type(messages).__name__}")
    return _checked(messages, owner)


def _checked(messages: Iterable[Message], owner: str) -> Iterator[Message]:
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"{owner}[{index}] must be a Message, not {type(message).__name__}")
        yield message


def check_window(limit: object, offset: object) -> None:
    """Check `get_history` arguments: `limit` None or an int >= 0, `offset` an int >= 0.

    Raises:
        TypeError: A value is not an int.
        ValueError: A value is negative.
    """
    if limit is not None:
        whole_number(limit, "limit", most=LARGEST)
    whole_number(offset, "offset", most=LARGEST)


def check_count(count: object) -> int:
    """Check `replace_prefix`'s `count`: an int >= 0."""
    return whole_number(count, "count", most=LARGEST)


def check_expected(count: int, expected: Iterable[Message] | None) -> list[Message] | None:
    """Check `replace_prefix`'s `expected`: None, or exactly `count` messages.

    Raises:
        TypeError: `expected` holds something that is not a `Message`.
        ValueError: `expected` does not hold `count` messages.
    """
    if expected is None:
        return None
    batch = check_messages(expected, "expected")
    if len(batch) != count:
        raise ValueError(
            f"expected holds {len(batch)} messages but count is {count}; pass the "
            "oldest `count` messages as you read them"
        )
    return batch


def session_not_empty(session_id: str) -> ValueError:
    """The error of a `restore()` (or `from_history`) into a session that holds messages."""
    return ValueError(
        f"session {session_id!r} already holds messages; restore into a new session "
        "(another session_id, or leave it unset for a new one)"
    )


def changed_prefix(session_id: str, count: int) -> ConcurrentModificationError:
    """The error of a `replace_prefix` whose `expected` prefix is no longer there."""
    oldest = "oldest message" if count == 1 else f"oldest {count} messages"
    return ConcurrentModificationError(
        f"the {oldest} of session {session_id!r} changed since they were "
        "read (another writer compacted, cleared or removed them); nothing was replaced: "
        "read the history again and retry"
    )


def check_tokens(input_tokens: object, output_tokens: object) -> tuple[int, int]:
    """Check a pair of token amounts: ints >= 0."""
    return whole_number(input_tokens, "input_tokens", most=LARGEST), whole_number(
        output_tokens, "output_tokens", most=LARGEST
    )


def takes_keyword(method: Callable[..., Any], name: str) -> bool:
    """Whether `method` accepts the keyword argument `name`.

    A store written for the seed API has `get_history(self)` and a
    `replace_prefix` without `expected`: callers leave out what it cannot take.
    """
    parameters = inspect.signature(method).parameters.values()
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


def window(items: Sequence[T], limit: int | None, offset: int) -> list[T]:
    """The newest `limit` items (all when None), skipping the newest `offset`; oldest first."""
    end = max(len(items) - offset, 0)
    start = 0 if limit is None else max(end - limit, 0)
    return list(items[start:end])


# ----------------------------------------------------------------------------- history cache


class Read(Protocol):
    """What a backend's `read_since` returns."""

    @property
    def generation(self) -> object: ...
    @property
    def reset(self) -> bool: ...  # the cache must be replaced, not extended
    @property
    def messages(self) -> list[Message]: ...
    @property
    def last_position(self) -> int | None: ...
    @property
    def archived(self) -> list[Message]: ...


ReadSince: TypeAlias = Callable[[Any, "int | None", bool], Awaitable[Read]]
ReadNewest: TypeAlias = Callable[[int, int], Awaitable[list[Message]]]


class HistoryCache:
    """The live history a database store has read, and where to read on from.

    A read fetches only the rows after the cached ones; the session's
    generation, which `clear`, `clear_run` and `replace_prefix` bump from any
    process, makes it read the history afresh.

    Args:
        stale: The generation that means "read everything again".
    """

    __slots__ = ("generation", "messages", "position", "stale")

    def __init__(self, stale: object) -> None:
        self.stale = stale
        self.forget()

    def forget(self) -> None:
        """Read the whole history again next time."""
        self.messages: list[Message] = []
        self.generation: Any = self.stale
        self.position: int | None = None

    async def history(
        self,
        limit: int | None,
        offset: int,
        include_archived: bool,
        read_since: ReadSince,
        read_newest: ReadNewest,
    ) -> list[Message]:
        """`get_history`: through the cache, or, for a `limit` before any read, just those rows."""
        check_window(limit, offset)
        if include_archived:
            archived, live = await self._refresh(read_since, with_archive=True)
            return window(archived + live, limit, offset)
        if limit is not None and self.generation == self.stale:
            return await read_newest(limit, offset)
        _, live = await self._refresh(read_since, with_archive=False)
        return window(live, limit, offset)

    async def _refresh(
        self, read_since: ReadSince, *, with_archive: bool
    ) -> tuple[list[Message], list[Message]]:
        while True:
            generation, position = self.generation, self.position
            read = await read_since(generation, position, with_archive)
            if (self.generation, self.position) != (generation, position):
                continue  # a concurrent read moved the cache meanwhile: read on from there
            if read.reset:
                self.messages = read.messages
                self.position = read.last_position
            elif read.messages:
                self.messages.extend(read.messages)
                self.position = read.last_position
            self.generation = read.generation
            return read.archived, self.messages


# ----------------------------------------------------------------------------- connecting


class _Closeable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closeable)


class ClosesOnExit:
    """`async with obj:` gives `obj`, and awaits `obj.close()` at the end."""

    __slots__ = ()

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


class Connecting(Coroutine[Any, Any, C], Generic[C]):
    """What `connect()` / `connect_postgres()` return: a coroutine giving the connection.

    `conn = await connect(...)`, `asyncio.run(connect(...))` and
    `async with connect(...) as conn:` (which closes it at the end) all work.
    """

    __slots__ = ("_conn", "_coro")

    def __init__(self, coro: Coroutine[Any, Any, C]) -> None:
        self._coro = coro
        self._conn: C | None = None

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, C]:
        return self._coro.__await__()

    async def __aenter__(self) -> C:
        self._conn = await self._coro
        return self._conn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._conn is not None:
            await self._conn.close()
