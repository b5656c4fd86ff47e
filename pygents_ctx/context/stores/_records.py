"""What a context store keeps and hands back: sessions, stored messages, snapshots, decisions.

The values the store protocols (`pygents_ctx.context.stores.protocols`) take
and return, with the checks every store makes of them. Import them from
`pygents_ctx.context.stores` (or `.base`, where they were first defined).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import NamedTuple

from pygents_ctx._checks import storable_text, strings, whole_number
from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores._checkpoint_sql import check_agent, check_state
from pygents_ctx.context.stores._common import (
    check_run_id,
    check_session_id,
    check_tokens,
    check_usage_record,
)
from pygents_ctx.context.usage import UsageRecord

__all__ = [
    "ApprovalDecision",
    "CheckpointInfo",
    "HistoryRetention",
    "SessionInfo",
    "SessionSnapshot",
    "StoredCheckpoint",
    "StoredMessage",
    "check_call_id",
    "check_call_ids",
    "check_created_at",
    "check_decision",
    "check_snapshot",
]


class ApprovalDecision(NamedTuple):
    """A person's decision on a tool call that waited for approval (`ContextStore.record_decision`).

    Attributes:
        approved: True: the call runs. False: it does not, and the model
            reads `reason` as its error result.
        reason: Why it was rejected (None for an approval, or no reason given).
    """

    approved: bool
    reason: str | None = None


def check_call_id(call_id: object) -> str:
    """`call_id` if a store can key a tool call's decision or journal row by it.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty, or holds a NUL character or a lone surrogate.
    """
    return storable_text(call_id, "a tool call id", fix="the call's ToolUseBlock.id")


def check_call_ids(call_ids: object) -> list[str]:
    """The ids of `call_ids`, a collection of tool call ids, each checked as `check_call_id` does.

    Raises:
        TypeError: It is one str (not a collection of them), or holds a non-str.
        ValueError: An id is empty, or holds a NUL or a lone surrogate.
    """
    return [check_call_id(c) for c in strings(call_ids, "call_ids", fix="a list of call ids")]


def check_decision(call_id: object, decision: object) -> tuple[str, ApprovalDecision]:
    """`call_id` and `decision` if a store can keep them (see `ContextStore.record_decision`).

    Raises:
        TypeError, ValueError: As `record_decision` says.
    """
    call_id = check_call_id(call_id)
    if not (
        isinstance(decision, ApprovalDecision)
        and isinstance(decision.approved, bool)
        and (decision.reason is None or isinstance(decision.reason, str))
    ):
        raise TypeError(
            "record_decision needs ApprovalDecision(approved: bool, reason: str | None), "
            f"not {decision!r}"
        )
    if decision.reason is not None:
        storable_text(decision.reason, "rejection reason", empty=True)
    return call_id, decision


class HistoryRetention(Enum):
    """How long an agent keeps the messages of a run in its store.

    - `PERMANENT`: kept; the next run continues the conversation.
    - `RUN`: written during the run (tagged with its `run_id`) and removed with
      `store.clear_run(run_id)` when the run ends; earlier runs' messages stay.
    - `NONE`: never written; the conversation lives only in the agent's window.

    Examples:
        >>> HistoryRetention("run") is HistoryRetention.RUN
        True
    """

    PERMANENT = "permanent"
    RUN = "run"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A summary of one stored session, as `list_sessions()` reports it.

    Attributes:
        session_id: The session's id.
        message_count: Messages in the live history (the archive not included).
        preview: The text of the first user message that has text, at most 80
            characters; `""` when there is none.
        created_at: When the session was created: ISO 8601 in UTC with
            microseconds (`"2025-01-15T10:30:00.123456+00:00"`), or `""` for a
            store that does not record it.
        input_tokens: Input tokens the provider reported for the session.
        output_tokens: Output tokens the provider reported for the session.
        owner: The user or tenant id the session belongs to (set by the store
            that made it, see `SQLiteContextStore`), or None.

    Examples:
        >>> info = SessionInfo("abc123", 10, "What is the capital of France?", "")
        >>> (info.message_count, info.input_tokens)
        (10, 0)
    """

    session_id: str
    message_count: int
    preview: str
    created_at: str
    input_tokens: int = 0
    output_tokens: int = 0
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as a store keeps it: the message, and the run that appended it.

    Attributes:
        message: The message.
        run_id: The `run_id` it was appended with, or None.

    Raises:
        TypeError: `message` is not a `Message`, or `run_id` is not a str or None.
        ValueError: `run_id` is empty.

    Examples:
        >>> from pygents_ctx import Message
        >>> StoredMessage(Message("user", "hi"), "run-1").run_id
        'run-1'
    """

    message: Message
    run_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.message, Message):
            raise TypeError(
                f"StoredMessage.message must be a Message, not {type(self.message).__name__}"
            )
        check_run_id(self.run_id)


def _stored(messages: Iterable[StoredMessage | Message], owner: str) -> tuple[StoredMessage, ...]:
    if isinstance(messages, Message | StoredMessage) or not isinstance(messages, Iterable):
        raise TypeError(
            f"SessionSnapshot.{owner} must be an iterable of StoredMessage, "
            f"not {type(messages).__name__}"
        )
    batch = []
    for index, item in enumerate(messages):
        if isinstance(item, Message):
            item = StoredMessage(item)
        elif not isinstance(item, StoredMessage):
            raise TypeError(
                f"SessionSnapshot.{owner}[{index}] must be a StoredMessage or a Message, "
                f"not {type(item).__name__}"
            )
        batch.append(item)
    return tuple(batch)


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """An agent's checkpoint as a store lists it (`ContextStore.list_checkpoints()`).

    Attributes:
        agent: The name of the agent whose state it is.
        at: The live message it was taken at, as in `rewind(to=...)`: the
            agent's state while the history was `history[:at]`.
        created_at: When it was taken: ISO 8601 in UTC with microseconds
            (`"2025-01-15T10:30:00.123456+00:00"`).
        size: The saved state's length in bytes.

    Examples:
        >>> info = CheckpointInfo("helper", 4, "2025-01-15T10:30:00.123456+00:00", 812)
        >>> info.agent, info.at
        ('helper', 4)
    """

    agent: str
    at: int
    created_at: str
    size: int


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """An agent's checkpoint as a `SessionSnapshot` carries it: where, when, and the state.

    Attributes:
        agent: The name of the agent whose state it is.
        at: The live message it was taken at (0 to the snapshot's message count).
        created_at: When it was taken: ISO 8601 with a time zone.
        state: The saved state, as `Agent.checkpoint()` wrote it (opaque bytes
            to the store).

    Raises:
        TypeError: A field has the wrong type.
        ValueError: `agent` or `state` is empty, `at` is negative, or
            `created_at` is not an ISO 8601 time with a time zone.

    Examples:
        >>> saved = StoredCheckpoint("helper", 0, "2025-01-15T10:30:00+00:00", b"{}")
        >>> saved.at, saved.state
        (0, b'{}')
    """

    agent: str
    at: int
    created_at: str
    state: bytes

    def __post_init__(self) -> None:
        check_agent(self.agent)
        check_state(self.state)
        whole_number(
            self.at, "StoredCheckpoint.at", fix="the number of the message it was taken at"
        )
        check_created_at(self.created_at, "StoredCheckpoint.created_at")


def check_created_at(value: object, field: str) -> str:
    """Return `value` if it is an ISO 8601 time with a time zone.

    Raises:
        TypeError: It is not a str.
        ValueError: It is not such a time; the message names `field`.
    """
    if not isinstance(value, str):
        raise TypeError(f"{field} must be an ISO 8601 str, not {type(value).__name__}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ValueError(
            f"{field} must be an ISO 8601 time with a time zone "
            f'("2025-01-15T10:30:00.123456+00:00"), not {value!r}'
        )
    return value


def _checkpoints(
    checkpoints: Iterable[StoredCheckpoint], count: int
) -> tuple[StoredCheckpoint, ...]:
    if not isinstance(checkpoints, Iterable) or isinstance(checkpoints, StoredCheckpoint):
        raise TypeError(
            "SessionSnapshot.checkpoints must be an iterable of StoredCheckpoint, "
            f"not {type(checkpoints).__name__}"
        )
    seen: set[tuple[str, int]] = set()
    kept = []
    for index, item in enumerate(checkpoints):
        where = f"SessionSnapshot.checkpoints[{index}]"
        if not isinstance(item, StoredCheckpoint):
            raise TypeError(f"{where} must be a StoredCheckpoint, not {type(item).__name__}")
        if item.at > count:
            raise ValueError(
                f"{where} is at message {item.at}, past the {count} live messages; "
                f"a checkpoint is at a message from 0 to {count}"
            )
        if (item.agent, item.at) in seen:
            raise ValueError(
                f"{where}: agent {item.agent!r} has two checkpoints at message {item.at}; "
                "keep one (a store keeps one per agent and message)"
            )
        seen.add((item.agent, item.at))
        kept.append(item)
    return tuple(sorted(kept, key=lambda item: (item.at, item.agent)))


@dataclass(frozen=True, slots=True, init=False)
class SessionSnapshot:
    """Everything a session holds, read at one moment: what `snapshot()` reads, `restore()` writes.

    `messages` and `archived` accept any iterable of `StoredMessage` (a plain
    `Message` is taken as one with no run id) and are stored as tuples.

    Attributes:
        session_id: The session it was read from.
        messages: The live history, oldest first.
        archived: The archive (what `replace_prefix` took out), oldest first.
        input_tokens: Input tokens the provider reported for the session.
        output_tokens: Output tokens the provider reported for the session.
        usage: The usage records (`record_usage`), oldest first.
        checkpoints: The agents' checkpoints (`Agent.checkpoint()`), in
            order of message, then agent; one per agent and message.

    Raises:
        TypeError: A field has the wrong type.
        ValueError: `session_id` is empty, a token count is negative, or a
            checkpoint is past the live messages or a second one of its
            agent at its message.

    Examples:
        >>> from pygents_ctx import Message
        >>> snapshot = SessionSnapshot("chat", [StoredMessage(Message("user", "hi"), "run-1")])
        >>> snapshot.messages[0].run_id, snapshot.archived, snapshot.input_tokens
        ('run-1', (), 0)
    """

    session_id: str
    messages: tuple[StoredMessage, ...]
    archived: tuple[StoredMessage, ...]
    input_tokens: int
    output_tokens: int
    usage: tuple[UsageRecord, ...]
    checkpoints: tuple[StoredCheckpoint, ...]

    def __init__(
        self,
        session_id: str,
        messages: Iterable[StoredMessage | Message] = (),
        archived: Iterable[StoredMessage | Message] = (),
        input_tokens: int = 0,
        output_tokens: int = 0,
        *,
        usage: Iterable[UsageRecord] = (),
        checkpoints: Iterable[StoredCheckpoint] = (),
    ) -> None:
        tokens = check_tokens(input_tokens, output_tokens)
        records = tuple(map(check_usage_record, usage))
        live = _stored(messages, "messages")
        object.__setattr__(self, "session_id", check_session_id(session_id))
        object.__setattr__(self, "messages", live)
        object.__setattr__(self, "archived", _stored(archived, "archived"))
        object.__setattr__(self, "input_tokens", tokens[0])
        object.__setattr__(self, "output_tokens", tokens[1])
        object.__setattr__(self, "usage", records)
        object.__setattr__(self, "checkpoints", _checkpoints(checkpoints, len(live)))


def check_snapshot(snapshot: object) -> SessionSnapshot:
    """Return `snapshot` if it is a `SessionSnapshot` (what every `restore` checks first).

    Raises:
        TypeError: It is not.
    """
    if not isinstance(snapshot, SessionSnapshot):
        raise TypeError(f"restore needs a SessionSnapshot, not {type(snapshot).__name__}")
    return snapshot
