"""Context stores: where a conversation is kept, in memory, SQLite or PostgreSQL.

`ContextStore` is the contract: the store protocols `TranscriptStore`,
`UsageStore`, `JournalStore`, `LeaseStore` and `SessionCatalog` together.
`MemoryContextStore` keeps a session in lists, `SQLiteContextStore` in a SQLite
file opened with `connect()`, `PostgresContextStore` in PostgreSQL.
`AutoCompactStore` and `compact_context` summarize the old part of a stored history.
"""

from pygents_ctx.context.stores._common import MAX_MESSAGE_BYTES
from pygents_ctx.context.stores.base import (
    ApprovalDecision,
    CheckpointInfo,
    ContextStore,
    HistoryRetention,
    SessionInfo,
    SessionSnapshot,
    StoredCheckpoint,
    StoredMessage,
)
from pygents_ctx.context.stores.compaction import AutoCompactStore, compact_context
from pygents_ctx.context.stores.lease import SessionLease
from pygents_ctx.context.stores.memory import MemoryContextStore
from pygents_ctx.context.stores.postgres import (
    PostgresConnection,
    PostgresContextStore,
    connect_postgres,
)
from pygents_ctx.context.stores.protocols import (
    JournalStore,
    LeaseStore,
    SessionCatalog,
    TranscriptStore,
    UsageStore,
)
from pygents_ctx.context.stores.recall import HistoryRecall
from pygents_ctx.context.stores.search import (
    MAX_SEARCH_LIMIT,
    MAX_SEARCH_QUERY,
    HistoryHit,
    search_text,
)
from pygents_ctx.context.stores.sqlite import SQLiteConnection, SQLiteContextStore, connect
from pygents_ctx.errors import (
    ConcurrentModificationError,
    LeaseLostError,
    SessionBusyError,
    SessionNotFoundError,
    StoreClosedError,
    StoreSchemaError,
)

__all__ = [
    "MAX_MESSAGE_BYTES",
    "MAX_SEARCH_LIMIT",
    "MAX_SEARCH_QUERY",
    "ApprovalDecision",
    "AutoCompactStore",
    "CheckpointInfo",
    "ConcurrentModificationError",
    "ContextStore",
    "HistoryHit",
    "HistoryRecall",
    "HistoryRetention",
    "JournalStore",
    "LeaseLostError",
    "LeaseStore",
    "MemoryContextStore",
    "PostgresConnection",
    "PostgresContextStore",
    "SQLiteConnection",
    "SQLiteContextStore",
    "SessionBusyError",
    "SessionCatalog",
    "SessionInfo",
    "SessionLease",
    "SessionNotFoundError",
    "SessionSnapshot",
    "StoreClosedError",
    "StoreSchemaError",
    "StoredCheckpoint",
    "StoredMessage",
    "TranscriptStore",
    "UsageStore",
    "compact_context",
    "connect",
    "connect_postgres",
    "search_text",
]
