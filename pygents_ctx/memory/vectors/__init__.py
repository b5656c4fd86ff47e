"""Vector stores: the `VectorStore` protocol and its in-memory, SQLite and PostgreSQL backends."""

from pygents_ctx.memory.vectors.base import (
    BaseVectorStore,
    CollectionInfo,
    SearchResult,
    VectorDocument,
    VectorStore,
)
from pygents_ctx.memory.vectors.memory import InMemoryVectorStore
from pygents_ctx.memory.vectors.postgres import PostgresVectorStore
from pygents_ctx.memory.vectors.sqlite import SQLiteVectorStore

__all__ = [
    "BaseVectorStore",
    "CollectionInfo",
    "InMemoryVectorStore",
    "PostgresVectorStore",
    "SQLiteVectorStore",
    "SearchResult",
    "VectorDocument",
    "VectorStore",
]
