"""The context store contract: the durable, ordered transcript of one conversation.

A store holds one *session* (a conversation, `session_id`) of `Message`s, in the
order they were appended. Each message may carry the `run_id` of the agent run
that wrote it, so one run's messages can be dropped (`clear_run`) while the rest
of the session stays. Beside the messages, a store keeps the token usage its
provider reported (`set_context_tokens` / `add_context_tokens`), a record of
each model call's usage (`record_usage` / `get_usage`), and a token count of
every stored message, so `token_count()` never re-tokenizes.

Messages taken out of the live history by `replace_prefix` (what compaction
uses) are not deleted: they move to the session's *archive*, readable with
`get_history(include_archived=True)`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Self

from pygents_ctx.context.stores._common import (
    ClosesOnExit,
    check_count,
    check_messages,
    check_tokens,
    check_usage_record,
    new_session_id,
    preview_of,
    require_run_id,
)
from pygents_ctx.context.tokens import count_tokens
from pygents_ctx.context.usage import UsageRecord

if TYPE_CHECKING:
    from pygents_ctx.context.messages import Message

__all__ = ["ContextStore", "HistoryRetention", "SessionInfo"]


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


class ContextStore(ClosesOnExit, ABC):
    """Where a conversation is kept. Subclass it to store sessions anywhere.

    Only `append` and `get_history` are abstract. Every other method has a
    default built on those two (and on `clear` where it must remove messages),
    correct but not tuned: the built-in backends override them with atomic,
    O(1) versions. No `__init__` is required: `session_id` is generated on first
    use, and token usage is kept on the instance.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> class ListStore(ContextStore):
        ...     def __init__(self) -> None:
        ...         self.messages: list[Message] = []
        ...     async def append(self, message, *, run_id=None):
        ...         self.messages.append(message)
        ...     async def get_history(self, *, limit=None, offset=0, include_archived=False):
        ...         return list(self.messages)
        >>> async def main():
        ...     store = ListStore()
        ...     await store.append(Message("user", "hello"))
        ...     await store.add_context_tokens(12, 3)
        ...     return await store.count(), await store.get_context_tokens()
        >>> asyncio.run(main())
        (1, (12, 3))
    """

    _session_id: str | None = None
    _input_tokens: int = 0
    _output_tokens: int = 0
    _usage_records: list[UsageRecord] | None = None

    @property
    def session_id(self) -> str:
        """The session's id; a random uuid hex, made on first use, when none was given."""
        if self._session_id is None:
            self._session_id = new_session_id()
        return self._session_id

    # -- messages -----------------------------------------------------------

    @abstractmethod
    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        """Add `message` at the end of the history, tagged with `run_id` when given."""

    async def append_many(self, messages: Iterable[Message], *, run_id: str | None = None) -> None:
        """Add `messages` at the end, in order: one transaction where the backend has them.

        Raises:
            TypeError: Something in `messages` is not a `Message` (nothing is added).
        """
        for message in check_messages(messages):
            # Without a run, call append(message) alone: stores written for the seed API
            # take no run_id.
            if run_id is None:
                await self.append(message)
            else:
                await self.append(message, run_id=run_id)

    @abstractmethod
    async def get_history(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        include_archived: bool = False,
    ) -> list[Message]:
        """The history, oldest first, as a new list.

        Args:
            limit: Return only the newest `limit` messages (all when None).
            offset: Skip the newest `offset` messages first: `limit=10, offset=10`
                is the ten before the last ten.
            include_archived: Put the archive (messages `replace_prefix` took
                out, oldest first) before the live history; `limit` and
                `offset` then count in that whole list.

        Raises:
            TypeError: `limit` or `offset` is not an int.
            ValueError: `limit` or `offset` is negative.
        """

    async def count(self) -> int:
        """The number of messages in the live history."""
        return len(await self.get_history())

    async def token_count(self) -> int:
        """The total token count of the live history, with the default counter.

        The built-in backends keep a running sum of the counts stored beside
        each message. This default sums `count_message_tokens` over
        `get_history()`, which reuses counts cached on the message objects.
        """
        return count_tokens(await self.get_history())

    async def clear(self) -> None:
        """Remove every message of the session, live and archived, in one transaction.

        The session and its token usage stay; `set_context_tokens(0, 0)` resets those.

        Raises:
            NotImplementedError: The store does not implement it (this default).
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not support clear(); override clear() to remove messages"
        )

    async def clear_run(self, run_id: str) -> None:
        """Remove the messages appended with `run_id` (live and archived), in one transaction.

        Raises:
            NotImplementedError: The store does not implement it (this default).
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not support clear_run(); override clear_run() "
            "to remove one run's messages"
        )

    async def replace_prefix(
        self, count: int, messages: Sequence[Message], *, run_id: str | None = None
    ) -> None:
        """Replace the oldest `count` live messages with `messages`, atomically.

        The storage step of compaction: the replaced messages move to the
        archive (see `get_history(include_archived=True)`), `messages` take
        their place at the front, and every message appended after them,
        including those appended while a summarizer was running, stays after,
        in order. `count=0` inserts `messages` at the front; empty `messages`
        just archives the oldest `count`.

        This default reads the history, then calls `clear()` and `append_many()`:
        it is not atomic, keeps no archive and drops run ids. The built-in
        backends do it in one transaction.

        Args:
            count: How many of the oldest live messages to replace.
            messages: What goes in their place, oldest first.
            run_id: The run to tag the new messages with.

        Raises:
            TypeError: `count` is not an int, or `messages` holds a non-`Message`.
            ValueError: `count` is negative or exceeds the live message count.
        """
        count = check_count(count)
        batch = check_messages(messages)
        history = await self.get_history()
        if count > len(history):
            raise ValueError(
                f"count {count} exceeds the {len(history)} messages in the live history"
            )
        await self.clear()
        await self.append_many([*batch, *history[count:]], run_id=run_id)

    async def fork(self, *, session_id: str | None = None) -> ContextStore:
        """A new session holding an independent copy of this one: history, archive, tokens.

        This default copies into a `MemoryContextStore`.

        Args:
            session_id: The new session's id (a random one when None).
        """
        from pygents_ctx.context.stores.memory import MemoryContextStore

        return await MemoryContextStore.from_context(self, session_id=session_id)

    async def close(self) -> None:
        """Release what the store holds. This default does nothing."""

    # -- token usage --------------------------------------------------------

    async def set_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Overwrite the token usage recorded for the session.

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
        """
        self._input_tokens, self._output_tokens = check_tokens(input_tokens, output_tokens)

    async def get_context_tokens(self) -> tuple[int, int]:
        """The token usage recorded for the session: `(input_tokens, output_tokens)`."""
        return self._input_tokens, self._output_tokens

    async def add_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Add to the recorded token usage (atomically in the persistent backends).

        This default reads with `get_context_tokens()` and writes with `set_context_tokens()`.

        Raises:
            TypeError: An amount is not an int.
            ValueError: An amount is negative.
        """
        add_in, add_out = check_tokens(input_tokens, output_tokens)
        current_in, current_out = await self.get_context_tokens()
        await self.set_context_tokens(current_in + add_in, current_out + add_out)

    async def record_usage(self, record: UsageRecord) -> None:
        """Keep one model call's usage, and add its tokens to the session's usage.

        The record is kept in order, and `record.usage.input_tokens` and
        `output_tokens` are added as `add_context_tokens` adds them (the built-in
        backends do both in one transaction). Records stay through `clear()` and
        `clear_run()`: they count what was spent, not what is kept.

        This default keeps the records on the instance and calls `add_context_tokens`.

        Raises:
            TypeError: `record` is not a `UsageRecord`.
        """
        record = check_usage_record(record)
        if self._usage_records is None:
            self._usage_records = []
        self._usage_records.append(record)
        await self.add_context_tokens(record.usage.input_tokens, record.usage.output_tokens)

    async def get_usage(self, *, run_id: str | None = None) -> list[UsageRecord]:
        """The usage records of the session, oldest first; only run `run_id`'s when given.

        Add them up with `sum((r.usage for r in records), Usage())`.

        Raises:
            TypeError: `run_id` is not a str.
        """
        target = None if run_id is None else require_run_id(run_id)
        return [
            record
            for record in self._usage_records or ()
            if target is None or record.run_id == target
        ]

    # -- sessions -----------------------------------------------------------

    async def list_sessions(self) -> list[SessionInfo]:
        """The sessions this store can see, newest first. This default: this session only."""
        history = await self.get_history()
        preview = next((p for p in map(preview_of, history) if p is not None), "")
        input_tokens, output_tokens = await self.get_context_tokens()
        return [
            SessionInfo(
                self.session_id, await self.count(), preview, "", input_tokens, output_tokens
            )
        ]

    @classmethod
    async def from_history(cls, messages: Iterable[Message], /, **kwargs: Any) -> Self:
        """A new store of this class holding `messages`.

        `kwargs` go to the constructor: `SQLiteContextStore.from_history(messages,
        conn=conn)`, optionally with `session_id=...`.

        Raises:
            TypeError: Something in `messages` is not a `Message`.
            ValueError: The session named by `session_id` already holds messages.
        """
        batch = check_messages(messages)
        store = cls(**kwargs)
        if await store.count():
            raise ValueError(
                f"session {store.session_id!r} already holds messages; "
                "from_history needs a new session (leave session_id unset)"
            )
        await store.append_many(batch)
        return store

    @classmethod
    async def from_context(cls, store: ContextStore, /, **kwargs: Any) -> Self:
        """A new store of this class holding a copy of `store`: history, archive, token usage.

        Usage records are copied as they are. Run ids of messages are not
        copied (use `fork()` within one backend to keep them).
        `kwargs` go to the constructor, as for `from_history`.
        """
        if not isinstance(store, ContextStore):
            raise TypeError(f"from_context needs a ContextStore, not {type(store).__name__}")
        if _has_archive(store):
            everything = await store.get_history(include_archived=True)
            archived = len(everything) - await store.count()
        else:
            everything, archived = await store.get_history(), 0
        clone = await cls.from_history(everything, **kwargs)
        if archived > 0:
            await clone.replace_prefix(archived, ())
        for record in await store.get_usage():
            await clone.record_usage(record)
        # After the records, which add their tokens: the copy's totals are the source's.
        await clone.set_context_tokens(*await store.get_context_tokens())
        return clone


def _has_archive(store: ContextStore) -> bool:
    # A store written for the seed API has `get_history(self)`: no archive to copy.
    parameters = inspect.signature(store.get_history).parameters.values()
    return any(p.name == "include_archived" or p.kind is p.VAR_KEYWORD for p in parameters)
