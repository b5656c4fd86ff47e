"""`InMemoryBlobStore`: blobs in a dict, for tests and short-lived agents."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterable, AsyncIterator, Iterable

from pygents_ctx.memory._shared import utc_now
from pygents_ctx.memory.blobs.base import (
    CHUNK_SIZE,
    DEFAULT_CONTENT_TYPE,
    Blob,
    BlobInfo,
    check_chunk_size,
    check_content_type,
    check_data,
    check_name,
    check_prefix,
    chunks_of,
    missing_blob,
)

__all__ = ["InMemoryBlobStore"]


class InMemoryBlobStore:
    """A `BlobStore` in the process: each blob's bytes and info in a dict.

    The bytes are immutable, so a `stream()` keeps reading the version it
    started on even if the blob is replaced meanwhile.

    Examples:
        >>> import asyncio
        >>> async def main():
        ...     blobs = InMemoryBlobStore()
        ...     await blobs.put("notes/today.txt", b"tides", content_type="text/plain")
        ...     blob = await blobs.get("notes/today.txt")
        ...     return blob.data, blob.info.size, [i.name for i in await blobs.list("notes/")]
        >>> asyncio.run(main())
        (b'tides', 5, ['notes/today.txt'])
    """

    __slots__ = ("_blobs",)

    def __init__(self) -> None:
        self._blobs: dict[str, Blob] = {}

    def __repr__(self) -> str:
        return f"<InMemoryBlobStore {len(self._blobs)} blobs>"

    async def put(
        self, name: str, data: bytes, *, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> BlobInfo:
        """Store `data` under `name`, replacing any blob there (see `BlobStore.put`)."""
        key, kind, content = check_name(name), check_content_type(content_type), check_data(data)
        return self._store(key, kind, content, hashlib.sha256(content).hexdigest())

    async def put_stream(
        self,
        name: str,
        chunks: AsyncIterable[bytes] | Iterable[bytes],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
    ) -> BlobInfo:
        """Store the concatenated `chunks` under `name` (see `BlobStore.put_stream`)."""
        key, kind = check_name(name), check_content_type(content_type)
        digest, parts = hashlib.sha256(), []
        async for chunk in chunks_of(chunks):
            digest.update(chunk)
            parts.append(chunk)
        return self._store(key, kind, b"".join(parts), digest.hexdigest())

    def _store(self, name: str, content_type: str, data: bytes, sha256: str) -> BlobInfo:
        now = utc_now()
        old = self._blobs.get(name)
        created = now if old is None else old.info.created_at
        info = BlobInfo(name, len(data), content_type, sha256, created, now)
        self._blobs[name] = Blob(info, data)
        return info

    async def get(self, name: str) -> Blob:
        """The blob under `name`, read whole (see `BlobStore.get`)."""
        return self._find(check_name(name))

    async def info(self, name: str) -> BlobInfo:
        """The info of the blob under `name` (see `BlobStore.info`)."""
        return self._find(check_name(name)).info

    async def stream(self, name: str, *, chunk_size: int = CHUNK_SIZE) -> AsyncIterator[bytes]:
        """The blob's bytes in chunks of `chunk_size` (see `BlobStore.stream`)."""
        size, key = check_chunk_size(chunk_size), check_name(name)
        data = memoryview(self._find(key).data)
        for start in range(0, len(data), size):
            yield bytes(data[start : start + size])

    async def list(self, prefix: str = "") -> list[BlobInfo]:
        """The info of every blob whose name starts with `prefix`, sorted by name."""
        start = check_prefix(prefix)
        return [blob.info for name, blob in sorted(self._blobs.items()) if name.startswith(start)]

    async def delete(self, name: str) -> bool:
        """Remove the blob under `name`; whether there was one."""
        return self._blobs.pop(check_name(name), None) is not None

    def _find(self, name: str) -> Blob:
        found = self._blobs.get(name)
        if found is None:
            raise missing_blob(name)
        return found
