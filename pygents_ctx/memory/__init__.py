"""Agent memory beyond the transcript: graphs, blobs and task boards.

Each kind of memory is a protocol with an in-process backend and database
backends that share the context stores' connections (`connect()` for
SQLite, `connect_postgres()` for PostgreSQL):

- `GraphStore`: a knowledge graph of entities and relationships, with
  breadth-first `neighbors()`.
- `BlobStore`: named binary artifacts with a content type, streamed in chunks.
- `TaskStore` / `TaskBoard`: per-(conversation, agent) boards of tasks, which
  tools reach by annotating a `TaskBoard` parameter.
"""

from pygents_ctx.memory.blobs import (
    Blob,
    BlobInfo,
    BlobStore,
    DirectoryBlobStore,
    InMemoryBlobStore,
    PostgresBlobStore,
    SQLiteBlobStore,
)
from pygents_ctx.memory.graph import (
    Entity,
    GraphStore,
    InMemoryGraphStore,
    PostgresGraphStore,
    Relationship,
    SQLiteGraphStore,
    Subgraph,
)
from pygents_ctx.memory.tasks import (
    InMemoryTaskStore,
    PostgresTaskStore,
    SQLiteTaskStore,
    Task,
    TaskBoard,
    TaskStatus,
    TaskStore,
)

__all__ = [
    "Blob",
    "BlobInfo",
    "BlobStore",
    "DirectoryBlobStore",
    "Entity",
    "GraphStore",
    "InMemoryBlobStore",
    "InMemoryGraphStore",
    "InMemoryTaskStore",
    "PostgresBlobStore",
    "PostgresGraphStore",
    "PostgresTaskStore",
    "Relationship",
    "SQLiteBlobStore",
    "SQLiteGraphStore",
    "SQLiteTaskStore",
    "Subgraph",
    "Task",
    "TaskBoard",
    "TaskStatus",
    "TaskStore",
]
