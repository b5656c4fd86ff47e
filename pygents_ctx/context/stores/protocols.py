"""The context store contract, in the parts code really depends on.

`ContextStore` is all of them together, with a default for every method but
`append` and `get_history`. Code that needs only a part can say so in its
types, and a store of your own can be read against the part it provides:

- `TranscriptStore`: the session's messages, in order, with the archive,
  forks, rewinds, search, snapshots. What an agent's history is kept in.
- `UsageStore`: the token usage the provider reported, and a record of each
  model call's usage.
- `JournalStore`: what happened to the session's tool calls: the step journal
  (started, finished with a result) and people's approval decisions.
- `LeaseStore`: one writer per session (`lease()`), and the three atomic steps
  a lease is made of, which a store shared by processes overrides.
- `SessionCatalog`: the sessions of the store's database: listing and erasing.

Each method's full contract is on `ContextStore`'s method of the same name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pygents_ctx.context.stores.lease import LeaseBackend

if TYPE_CHECKING:
    from pygents_ctx.context.messages import Message, ToolResultBlock
    from pygents_ctx.context.stores._records import ApprovalDecision, SessionInfo, SessionSnapshot
    from pygents_ctx.context.stores.lease import Fence, SessionLease
    from pygents_ctx.context.stores.search import HistoryHit
    from pygents_ctx.context.usage import UsageRecord

__all__ = ["JournalStore", "LeaseStore", "SessionCatalog", "TranscriptStore", "UsageStore"]


@runtime_checkable
class TranscriptStore(Protocol):
    """A session's transcript: its messages in order, the archive, forks, rewinds and search.

    What an agent reads its history from and appends to; `ContextStore`
    implements it, with defaults built on `append` and `get_history`.
    """

    @property
    def session_id(self) -> str:
        """The session's id."""
        ...

    @property
    def owner(self) -> str | None:
        """The user or tenant id the session is made for, or None."""
        ...

    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        """Add `message` at the end of the history, tagged with `run_id` when given."""
        ...

    async def append_many(self, messages: Iterable[Message], *, run_id: str | None = None) -> None:
        """Add `messages` at the end, in order."""
        ...

    async def get_history(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        include_archived: bool = False,
    ) -> list[Message]:
        """The history, oldest first: the newest `limit` messages before the newest `offset`."""
        ...

    def iter_history(
        self, *, batch: int = 1000, include_archived: bool = False
    ) -> AsyncIterator[Message]:
        """The history, oldest first, a page of `batch` messages at a time."""
        ...

    async def search(self, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """The best matches for `query` in the archive and the live history."""
        ...

    async def count(self) -> int:
        """The number of messages in the live history."""
        ...

    async def token_count(self) -> int:
        """The total token count of the live history."""
        ...

    async def clear(self) -> None:
        """Remove every message, live and archived."""
        ...

    async def clear_run(self, run_id: str) -> None:
        """Remove the messages appended with `run_id`, live and archived."""
        ...

    async def replace_prefix(
        self,
        count: int,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expected: Sequence[Message] | None = None,
    ) -> None:
        """Replace the oldest `count` live messages with `messages`, archiving them."""
        ...

    async def fork(
        self, *, session_id: str | None = None, at: int | None = None
    ) -> TranscriptStore:
        """A new session holding this one's history (its oldest `at` messages when given)."""
        ...

    async def rewind(self, to: int) -> int:
        """Keep the oldest `to` live messages, remove the rest; how many went."""
        ...

    async def snapshot(self) -> SessionSnapshot:
        """Everything the session holds, read at one moment."""
        ...

    async def restore(self, snapshot: SessionSnapshot) -> None:
        """Write `snapshot` into this empty session."""
        ...

    async def close(self) -> None:
        """Release what the store holds (a shared connection stays open)."""
        ...


@runtime_checkable
class UsageStore(Protocol):
    """A session's token usage: the provider's running totals and one record per model call."""

    async def set_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Overwrite the session's recorded token usage."""
        ...

    async def add_context_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Add to the session's recorded token usage."""
        ...

    async def get_context_tokens(self) -> tuple[int, int]:
        """The session's recorded token usage: `(input_tokens, output_tokens)`."""
        ...

    async def record_usage(self, record: UsageRecord) -> None:
        """Keep one model call's usage and add its tokens to the session's."""
        ...

    async def get_usage(self, *, run_id: str | None = None) -> list[UsageRecord]:
        """The usage records, oldest first; only run `run_id`'s when given."""
        ...


@runtime_checkable
class JournalStore(Protocol):
    """What happened to a session's tool calls: the step journal and approval decisions.

    A durable run records a call as started before it runs and finished with
    its result after, so a resumed run neither loses nor repeats it; a call
    that waited for approval keeps the person's decision.
    """

    async def record_decision(self, call_id: str, decision: ApprovalDecision) -> ApprovalDecision:
        """Keep `decision` on tool call `call_id` unless it has one; the one kept."""
        ...

    async def get_decisions(self) -> dict[str, ApprovalDecision]:
        """Every decision recorded on the session's tool calls, by call id."""
        ...

    async def journal_start(self, call_id: str) -> None:
        """Record that tool call `call_id` starts."""
        ...

    async def journal_finish(self, call_id: str, result: ToolResultBlock) -> None:
        """Record that tool call `call_id` finished with `result`."""
        ...

    async def get_journal(self, call_ids: Iterable[str]) -> dict[str, ToolResultBlock | None]:
        """Each recorded call's result, None for one started and not finished."""
        ...


@runtime_checkable
class LeaseStore(LeaseBackend, Protocol):
    """One writer per session: `lease()`, and the steps a lease is made of.

    `lease()` hands out a `SessionLease`; while it is held, the writes the
    holder makes are fenced (`_fence`). `_lease_scope` names where the lease
    lives, and `_acquire_lease`, `_renew_lease` and `_release_lease` are its
    three atomic steps: `ContextStore` keeps them on the store object; a
    store whose sessions other processes share overrides all four.
    """

    def lease(
        self,
        *,
        ttl: float = 30.0,
        wait: float | bool = False,
        owner: str | None = None,
        create: bool = False,
        renew: bool = True,
    ) -> SessionLease:
        """A lease on the session: `async with store.lease() as lease:` holds it."""
        ...

    def _fence(self) -> Fence | None:
        """The lease the running code holds on this session, which its writes check."""
        ...


@runtime_checkable
class SessionCatalog(Protocol):
    """The sessions of a store's database: list them, erase them for good."""

    async def list_sessions(self, *, owner: str | None = None) -> list[SessionInfo]:
        """The sessions, newest first; only `owner`'s when given."""
        ...

    async def erase(
        self,
        *,
        owner: str | None = None,
        session: str | None = None,
        older_than: timedelta | None = None,
    ) -> int:
        """Remove the sessions named (by owner, id, age) and all that is theirs; how many."""
        ...
