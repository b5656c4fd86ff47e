"""Blob stores: named binary artifacts with a content type, read whole or streamed.

`BlobStore` is the contract; `InMemoryBlobStore` keeps blobs in a dict,
`DirectoryBlobStore` in files written atomically, `SQLiteBlobStore` and
`PostgresBlobStore` in a database beside the conversations.
"""

from pygents_ctx.errors import BlobNotFoundError
from pygents_ctx.memory.blobs.base import Blob, BlobInfo, BlobStore
from pygents_ctx.memory.blobs.directory import DirectoryBlobStore
from pygents_ctx.memory.blobs.in_memory import InMemoryBlobStore
from pygents_ctx.memory.blobs.postgres import PostgresBlobStore
from pygents_ctx.memory.blobs.sqlite import SQLiteBlobStore

__all__ = [
    "Blob",
    "BlobInfo",
    "BlobNotFoundError",
    "BlobStore",
    "DirectoryBlobStore",
    "InMemoryBlobStore",
    "PostgresBlobStore",
    "SQLiteBlobStore",
]
