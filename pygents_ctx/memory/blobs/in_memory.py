"""`InMemoryBlobStore`: blobs in a dict, for tests and short-lived agents."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

from pygents_ctx.memory._shared import utc_now
from pygents_ctx.memory.blobs.base import Blob, BlobInfo, BlobStoreBase, missing_blob

__all__ = ["InMemoryBlobStore"]


class InMemoryBlobStore(BlobStoreBase):
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

    async def _put(self, name: str, content_type: str, data: bytes, sha256: str) -> BlobInfo:
        return self._store(name, content_type, data, sha256)

    async def _put_stream(
        self, name: str, content_type: str, chunks: AsyncIterator[bytes]
    ) -> BlobInfo:
        digest, parts = hashlib.sha256(), []
        async for chunk in chunks:
            digest.update(chunk)
            parts.append(chunk)
        return self._store(name, content_type, b"".join(parts), digest.hexdigest())

    def _store(self, name: str, content_type: str, data: bytes, sha256: str) -> BlobInfo:
        now = utc_now()
        old = self._blobs.get(name)
        created = now if old is None else old.info.created_at
        info = BlobInfo(name, len(data), content_type, sha256, created, now)
        self._blobs[name] = Blob(info, data)
        return info

    async def _get(self, name: str) -> Blob:
        return self._find(name)

    async def _info(self, name: str) -> BlobInfo:
        return self._find(name).info

    async def _stream(self, name: str, chunk_size: int) -> AsyncIterator[bytes]:
        data = memoryview(self._find(name).data)  # immutable: a snapshot
        for start in range(0, len(data), chunk_size):
            yield bytes(data[start : start + chunk_size])

    async def _list(self, prefix: str) -> list[BlobInfo]:
        return [blob.info for name, blob in sorted(self._blobs.items()) if name.startswith(prefix)]

    async def _delete(self, name: str) -> bool:
        return self._blobs.pop(name, None) is not None

    def _find(self, name: str) -> Blob:
        found = self._blobs.get(name)
        if found is None:
            raise missing_blob(name)
        return found
