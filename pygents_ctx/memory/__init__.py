"""Agent memory beyond the transcript.

Each kind of memory is a protocol with an in-process backend and database
backends that share the context stores' connections (`connect()` for SQLite,
`connect_postgres()` for PostgreSQL):

- Selection: `BM25Selector` (lexical) and `SemanticSelector` (embeddings) rank
  a `ContextPool`'s items for `await pool.select(query, k)`.
- Embeddings: the `Embedder` protocol and `HashingEmbedder`, its dependency-free
  default.
- `VectorStore`: documents searched by embedding, with metadata filters.
- `SemanticRecall`: a conversation's search by meaning over a `VectorStore`,
  fused with the store's full-text search (`ContextConfig(recall=...)`).
- `GraphStore`: a knowledge graph of entities and relationships, with
  breadth-first `neighbors()`.
- `BlobStore`: named binary artifacts with a content type, streamed in chunks.
- `TaskStore` / `TaskBoard`: per-(conversation, agent) boards of tasks, which
  tools reach by annotating a `TaskBoard` parameter.

What they share: a database backend takes an open connection as its first
argument and exposes it as `.connection` (the stores hold nothing else, so
there is nothing to close but the connection); every method checks its input
before it changes anything; a name that is not there raises a `KeyError`
subclass (`CollectionNotFoundError`, `EntityNotFoundError`,
`BlobNotFoundError`, `TaskNotFoundError`).
"""

from pygents_ctx.errors import (
    BlobNotFoundError,
    CollectionNotFoundError,
    EntityNotFoundError,
    MissingExtensionError,
    RetryLimitError,
    TaskNotFoundError,
    TaskTransitionError,
)
from pygents_ctx.memory.blobs import (
    Blob,
    BlobInfo,
    BlobStore,
    DirectoryBlobStore,
    InMemoryBlobStore,
    PostgresBlobStore,
    SQLiteBlobStore,
)
from pygents_ctx.memory.embedders import Embedder, HashingEmbedder
from pygents_ctx.memory.graph import (
    Entity,
    GraphStore,
    InMemoryGraphStore,
    PostgresGraphStore,
    Relationship,
    SQLiteGraphStore,
    Subgraph,
)
from pygents_ctx.memory.recall import SemanticRecall
from pygents_ctx.memory.selection import BM25Selector, SemanticSelector
from pygents_ctx.memory.tasks import (
    InMemoryTaskStore,
    PostgresTaskStore,
    SQLiteTaskStore,
    Task,
    TaskBoard,
    TaskStatus,
    TaskStore,
)
from pygents_ctx.memory.vectors import (
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
    "Blob",
    "BlobInfo",
    "BlobNotFoundError",
    "BlobStore",
    "CollectionInfo",
    "CollectionNotFoundError",
    "DirectoryBlobStore",
    "Embedder",
    "Entity",
    "EntityNotFoundError",
    "GraphStore",
    "HashingEmbedder",
    "InMemoryBlobStore",
    "InMemoryGraphStore",
    "InMemoryTaskStore",
    "InMemoryVectorStore",
    "MissingExtensionError",
    "PostgresBlobStore",
    "PostgresGraphStore",
    "PostgresTaskStore",
    "PostgresVectorStore",
    "Relationship",
    "RetryLimitError",
    "SQLiteBlobStore",
    "SQLiteGraphStore",
    "SQLiteTaskStore",
    "SQLiteVectorStore",
    "SearchResult",
    "SemanticRecall",
    "SemanticSelector",
    "Subgraph",
    "Task",
    "TaskBoard",
    "TaskNotFoundError",
    "TaskStatus",
    "TaskStore",
    "TaskTransitionError",
    "VectorDocument",
    "VectorStore",
]
