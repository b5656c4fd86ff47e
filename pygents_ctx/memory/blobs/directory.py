"""`DirectoryBlobStore`: blobs as files in a directory, each written atomically.

Layout: the blob named `name` is the file `root/<h[:2]>/<h>`, where `h` is the
SHA-256 of the name in hex. Names never become paths, so no name can reach
outside `root` (`..`, `/`, a drive letter or a device name are just text), and
names that a file system would fold together (`A` and `a` on a
case-insensitive disk) stay apart. The two-letter folders keep any one
directory small.

A blob file holds the blob's bytes, then its info as JSON (the name, content
type, checksum and times), then that JSON's length (8 bytes, big-endian) and
the marker `PGBLOB01`. One file per blob means the bytes and the info are
replaced together.

Every write goes to a temporary file (`.tmp-...`) in the blob's folder, is
flushed and `fsync`ed, then `os.replace`d over the blob's file, and the folder
is synced: a crash leaves the old blob or the new one, never a torn file (at
worst a stray `.tmp-` file, which `list()` ignores). A stream reads from the
file it opened, so it finishes with the version it started on. The file work
runs in worker threads (`asyncio.to_thread`), keeping the event loop free.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import struct
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Final

import orjson

from pygents_ctx.memory._shared import utc_now
from pygents_ctx.memory.blobs.base import Blob, BlobInfo, BlobStoreBase, missing_blob

__all__ = ["DirectoryBlobStore"]

_MARKER: Final = b"PGBLOB01"
_TAIL: Final = struct.Struct(">Q8s")  # the info's length, then the marker
_TEMP_PREFIX: Final = ".tmp-"


class DirectoryBlobStore(BlobStoreBase):
    """A `BlobStore` in a directory on disk: survives restarts, safe for many processes.

    Writers in any number of processes may share the directory: each write is
    an atomic rename, so readers see whole blobs, and the last write of a name
    wins.

    Args:
        root: The directory (created, with its parents, if missing).

    Raises:
        TypeError: `root` is not a str or path.
        NotADirectoryError: `root` exists and is not a directory.

    Examples:
        >>> import asyncio, tempfile
        >>> async def main(folder):
        ...     blobs = DirectoryBlobStore(folder)
        ...     await blobs.put("report.md", b"# Findings", content_type="text/markdown")
        ...     again = DirectoryBlobStore(folder)  # as after a restart
        ...     return (await again.get("report.md")).data
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     asyncio.run(main(folder))
        b'# Findings'
    """

    __slots__ = ("_root",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        if not isinstance(root, str | os.PathLike):
            raise TypeError(f"root must be a str or os.PathLike, not {type(root).__name__}")
        self._root = Path(root)
        self._root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"DirectoryBlobStore({str(self._root)!r})"

    @property
    def root(self) -> Path:
        """The directory the blobs are kept in."""
        return self._root

    def _path(self, name: str) -> Path:
        digest = hashlib.sha256(name.encode()).hexdigest()
        return self._root / digest[:2] / digest

    async def _put(self, name: str, content_type: str, data: bytes, sha256: str) -> BlobInfo:
        # A new file, synced, then renamed over the old one.
        return await asyncio.to_thread(self._write_all, name, content_type, data)

    def _write_all(self, name: str, content_type: str, data: bytes) -> BlobInfo:
        temp, path = self._temporary(name)
        try:
            temp.write(data)
            return _finish(temp, path, name, content_type, len(data), hashlib.sha256(data))
        finally:
            _discard(temp)

    async def _put_stream(
        self, name: str, content_type: str, chunks: AsyncIterator[bytes]
    ) -> BlobInfo:
        # Written to disk as the chunks come.
        temp, path = await asyncio.to_thread(self._temporary, name)
        try:
            digest, size = hashlib.sha256(), 0
            async for chunk in chunks:
                await asyncio.to_thread(temp.write, chunk)
                digest.update(chunk)
                size += len(chunk)
            return await asyncio.to_thread(_finish, temp, path, name, content_type, size, digest)
        finally:
            # A cancelled or failed write leaves nothing behind (a shielded thread hop
            # would outlive a cancellation; this is quick local work).
            _discard(temp)

    def _temporary(self, name: str) -> tuple[IO[bytes], Path]:
        """A new temporary file beside the blob's file, and that file's path."""
        path = self._path(name)
        path.parent.mkdir(exist_ok=True)
        temp = open(path.parent / f"{_TEMP_PREFIX}{uuid.uuid4().hex}", "xb")  # noqa: SIM115
        return temp, path

    async def _get(self, name: str) -> Blob:
        return await asyncio.to_thread(self._read_all, name)

    def _read_all(self, name: str) -> Blob:
        with self._open(name) as file:
            info = _read_info(file, name)
            file.seek(0)
            return Blob(info, file.read(info.size))

    async def _info(self, name: str) -> BlobInfo:
        return await asyncio.to_thread(self._read_info, name)

    def _read_info(self, name: str) -> BlobInfo:
        with self._open(name) as file:
            return _read_info(file, name)

    def _open(self, name: str) -> IO[bytes]:
        try:
            return open(self._path(name), "rb")
        except FileNotFoundError:
            raise missing_blob(name) from None

    async def _stream(self, name: str, chunk_size: int) -> AsyncIterator[bytes]:
        # From the file as it was when the stream began: a rename does not change it.
        file = await asyncio.to_thread(self._open, name)
        try:
            info = await asyncio.to_thread(_read_info, file, name)
            await asyncio.to_thread(file.seek, 0)
            left = info.size
            while left:
                chunk = await asyncio.to_thread(file.read, min(chunk_size, left))
                left -= len(chunk)
                yield chunk
        finally:
            file.close()

    async def _list(self, prefix: str) -> list[BlobInfo]:
        # Reads the end of every blob file in the directory.
        return await asyncio.to_thread(_list_blobs, self._root, prefix)

    async def _delete(self, name: str) -> bool:
        return await asyncio.to_thread(self._unlink, name)

    def _unlink(self, name: str) -> bool:
        path = self._path(name)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        _sync_folder(path.parent)
        return True


def _list_blobs(root: Path, prefix: str) -> list[BlobInfo]:
    """The info of the blobs under `root` whose names start with `prefix`, by name."""
    found = []
    for folder in root.iterdir():
        if not folder.is_dir() or len(folder.name) != 2:
            continue
        for path in folder.iterdir():
            if path.name.startswith(_TEMP_PREFIX):
                continue
            try:
                with open(path, "rb") as file:
                    info = _read_info(file, path.name)
            except FileNotFoundError:
                continue  # deleted while we looked
            if info.name.startswith(prefix):
                found.append(info)
    return sorted(found, key=lambda info: info.name)


def _finish(
    temp: IO[bytes],
    path: Path,
    name: str,
    content_type: str,
    size: int,
    digest: Any,
) -> BlobInfo:
    """Append the info to the temporary file, sync it, and rename it over the blob's."""
    now = utc_now()
    created = now
    with contextlib.suppress(FileNotFoundError, ValueError), open(path, "rb") as old:
        created = _read_info(old, name).created_at  # replacing: the name keeps its first time
    info = BlobInfo(name, size, content_type, digest.hexdigest(), created, now)
    trailer = orjson.dumps(
        {
            "name": name,
            "size": size,
            "content_type": content_type,
            "sha256": info.sha256,
            "created_at": created.isoformat(),
            "updated_at": now.isoformat(),
        }
    )
    temp.write(trailer)
    temp.write(_TAIL.pack(len(trailer), _MARKER))
    temp.flush()
    os.fsync(temp.fileno())
    temp.close()
    os.replace(temp.name, path)
    _sync_folder(path.parent)
    return info


def _discard(temp: IO[bytes]) -> None:
    """Close a temporary file and remove it, unless `_finish` renamed it into place."""
    temp.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp.name)


def _read_info(file: IO[bytes], name: str) -> BlobInfo:
    """The info at the end of an open blob file.

    Raises:
        ValueError: The file is not a blob file (it was changed by hand).
    """
    end = file.seek(0, os.SEEK_END)
    if end < _TAIL.size:
        raise _damaged(file, name)
    file.seek(end - _TAIL.size)
    length, marker = _TAIL.unpack(file.read(_TAIL.size))
    if marker != _MARKER or length > end - _TAIL.size:
        raise _damaged(file, name)
    file.seek(end - _TAIL.size - length)
    try:
        data = orjson.loads(file.read(length))
        info = BlobInfo(
            data["name"],
            data["size"],
            data["content_type"],
            data["sha256"],
            datetime.fromisoformat(data["created_at"]),
            datetime.fromisoformat(data["updated_at"]),
        )
    except (ValueError, KeyError, TypeError):
        raise _damaged(file, name) from None
    if info.size != end - _TAIL.size - length:
        raise _damaged(file, name)
    return info


def _damaged(file: IO[bytes], name: str) -> ValueError:
    return ValueError(
        f"the file {file.name!r} of blob {name!r} is not a blob file this store wrote "
        "(changed by hand?); delete it or restore it from a backup"
    )


def _sync_folder(folder: Path) -> None:
    """Make a rename or unlink in `folder` durable (where the platform allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open a directory
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
