"""Vector stores: documents in named collections, searched by cosine similarity.

`VectorStore` is the contract; `InMemoryVectorStore` keeps collections in
the process, `SQLiteVectorStore` and `PostgresVectorStore` in a database
beside the conversations.
"""

from pygents_ctx.errors import CollectionNotFoundError
from pygents_ctx.memory.vectors.base import (
    CollectionInfo,
    SearchResult,
    VectorDocument,
    VectorStore,
)
from pygents_ctx.memory.vectors.in_memory import InMemoryVectorStore
from pygents_ctx.memory.vectors.postgres import PostgresVectorStore
from pygents_ctx.memory.vectors.sqlite import SQLiteVectorStore

__all__ = [
    "CollectionInfo",
    "CollectionNotFoundError",
    "InMemoryVectorStore",
    "PostgresVectorStore",
    "SQLiteVectorStore",
    "SearchResult",
    "VectorDocument",
    "VectorStore",
]
