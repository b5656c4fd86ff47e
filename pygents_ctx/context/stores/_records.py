"""What a context store keeps and hands back: sessions, stored messages, snapshots, decisions.

The values the store protocols (`pygents_ctx.context.stores.protocols`) take
and return, with the checks every store makes of them. Import them from
`pygents_ctx.context.stores` (or `.base`, where they were first defined).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores._common import (
    check_run_id,
    check_session_id,
    check_text,
    check_tokens,
    check_usage_record,
)
from pygents_ctx.context.usage import UsageRecord

__all__ = [
    "ApprovalDecision",
    "HistoryRetention",
    "SessionInfo",
    "SessionSnapshot",
    "StoredMessage",
    "check_call_id",
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
    if not isinstance(call_id, str):
        raise TypeError(f"a tool call id is a str (ToolUseBlock.id), not {call_id!r}")
    if not call_id:
        raise ValueError("a tool call id is a non-empty str (ToolUseBlock.id), not ''")
    check_text("tool call id", call_id)
    return call_id


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
        check_text("rejection reason", decision.reason)
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

    Raises:
        TypeError: A field has the wrong type.
        ValueError: `session_id` is empty, or a token count is negative.

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

    def __init__(
        self,
        session_id: str,
        messages: Iterable[StoredMessage | Message] = (),
        archived: Iterable[StoredMessage | Message] = (),
        input_tokens: int = 0,
        output_tokens: int = 0,
        *,
        usage: Iterable[UsageRecord] = (),
    ) -> None:
        tokens = check_tokens(input_tokens, output_tokens)
        records = tuple(map(check_usage_record, usage))
        object.__setattr__(self, "session_id", check_session_id(session_id))
        object.__setattr__(self, "messages", _stored(messages, "messages"))
        object.__setattr__(self, "archived", _stored(archived, "archived"))
        object.__setattr__(self, "input_tokens", tokens[0])
        object.__setattr__(self, "output_tokens", tokens[1])
        object.__setattr__(self, "usage", records)


def check_snapshot(snapshot: object) -> SessionSnapshot:
    """Return `snapshot` if it is a `SessionSnapshot` (what every `restore` checks first).

    Raises:
        TypeError: It is not.
    """
    if not isinstance(snapshot, SessionSnapshot):
        raise TypeError(f"restore needs a SessionSnapshot, not {type(snapshot).__name__}")
    return snapshot
