"""Agent memory beyond the transcript: relevance selection for the pool, and vector stores.

- Selection: `BM25Selector` (lexical) and `SemanticSelector` (embeddings) rank
  a `ContextPool`'s items for `await pool.select(query, k)`.
- Embeddings: the `Embedder` protocol and `HashingEmbedder`, its dependency-free
  default.
- Vector stores: the `VectorStore` protocol with `InMemoryVectorStore`,
  `SQLiteVectorStore` and `PostgresVectorStore` (pgvector).
"""

from pygents_ctx.memory.embedders import Embedder, HashingEmbedder
from pygents_ctx.memory.selection import BM25Selector, SemanticSelector
from pygents_ctx.memory.vectors import (
    BaseVectorStore,
    CollectionInfo,
    InMemoryVectorStore,
    PostgresVectorStore,
    SearchResult,
    SQLiteVectorStore,
    VectorDocument,
    VectorStore,
)

__all__ = [
    "BM25Selector",
    "BaseVectorStore",
    "CollectionInfo",
    "Embedder",
    "HashingEmbedder",
    "InMemoryVectorStore",
    "PostgresVectorStore",
    "SQLiteVectorStore",
    "SearchResult",
    "SemanticSelector",
    "VectorDocument",
    "VectorStore",
]
