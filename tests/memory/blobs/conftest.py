"""A blob store of each backend, for the contract tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from pygents_ctx.memory import (
    BlobStore,
    DirectoryBlobStore,
    InMemoryBlobStore,
    PostgresBlobStore,
    SQLiteBlobStore,
)


@pytest.fixture(params=["memory", "directory", "sqlite", "postgres"])
def blob_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def blobs(blob_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    """An empty blob store of the backend under test."""
    if blob_backend == "directory":
        return DirectoryBlobStore(tmp_path / "blobs")
    if blob_backend == "sqlite":
        return SQLiteBlobStore(request.getfixturevalue("sqlite_conn"))
    if blob_backend == "postgres":
        return PostgresBlobStore(request.getfixturevalue("pg_conn"))
    return InMemoryBlobStore()
