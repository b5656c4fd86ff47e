"""The blob store contract: named binary artifacts with a content type, read whole or streamed.

A blob is bytes under a name (any non-empty text up to 1,024 characters, such
as `"reports/2024/q1.pdf"`; a `/` has no special meaning, but `list(prefix=)`
makes it a handy folder), with its content type, size, SHA-256 checksum and
when it was first and last written. Writing a name again replaces the blob
whole: a reader sees the old content or the new, never a mix.

`stream()` reads a large blob in chunks without holding it in memory; a
stream yields one version's content, and a stream whose blob is replaced or
deleted before it ends either finishes with the version it started on (the
in-memory and directory stores) or raises `BlobNotFoundError` (the database
stores, which free the old content at once). `put_stream()` writes from an
iterable or async iterable of chunks; nothing is stored unless it ends.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Final, Protocol, runtime_checkable

from pygents_ctx._checks import whole_number
from pygents_ctx._resources import injectable
from pygents_ctx.errors import BlobNotFoundError
from pygents_ctx.memory._shared import check_key

__all__ = ["Blob", "BlobInfo", "BlobStore"]

DEFAULT_CONTENT_TYPE: Final = "application/octet-stream"
CHUNK_SIZE: Final = 1 << 20  # what stream() yields at a time unless told otherwise
_SPOOL: Final = 8 << 20  # what put_stream keeps in memory before it spools to a file

# type "/" subtype, then optional "; parameter=value" parts (RFC 9110 tokens).
_TOKEN: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_PARAMETER: Final = rf"\s*;\s*{_TOKEN}=(\"[^\"\x00-\x1f]*\"|{_TOKEN})"
_CONTENT_TYPE: Final = re.compile(rf"{_TOKEN}/{_TOKEN}({_PARAMETER})*")


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """What a store knows about a blob, besides its bytes.

    Attributes:
        name: Its name in the store.
        size: Its length in bytes.
        content_type: Its media type, e.g. `"application/pdf"`.
        sha256: The SHA-256 of its bytes, in hex.
        created_at: When the name was first written (UTC); kept on replace.
        updated_at: When it was last written (UTC).
    """

    name: str
    size: int
    content_type: str
    sha256: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Blob:
    """A blob read whole: its `info` and its `data`."""

    info: BlobInfo
    data: bytes


@injectable
@runtime_checkable
class BlobStore(Protocol):
    """Named binary artifacts: put, get, stream, list and delete.

    Implemented by `InMemoryBlobStore`, `DirectoryBlobStore`,
    `SQLiteBlobStore` and `PostgresBlobStore`, which behave alike. A tool
    reaches the store of the agent that runs it by annotating a parameter
    `BlobStore`, when the agent was given `resources={BlobStore: store}`.
    """

    async def put(
        self, name: str, data: bytes, *, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> BlobInfo:
        """Store `data` under `name`, replacing any blob there; its info.

        Raises:
            TypeError: `data` is not bytes-like (encode text first).
            ValueError: `name` or `content_type` is malformed.
        """
        ...

    async def put_stream(
        self,
        name: str,
        chunks: AsyncIterable[bytes] | Iterable[bytes],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
    ) -> BlobInfo:
        """Store the concatenated `chunks` under `name`; nothing is stored unless they end.

        Raises:
            TypeError: A chunk is not bytes-like.
            ValueError: `name` or `content_type` is malformed.
        """
        ...

    async def get(self, name: str) -> Blob:
        """The blob under `name`, read whole.

        Raises:
            BlobNotFoundError: There is none.
        """
        ...

    async def info(self, name: str) -> BlobInfo:
        """What the store knows about the blob under `name`, without its bytes.

        Raises:
            BlobNotFoundError: There is none.
        """
        ...

    def stream(self, name: str, *, chunk_size: int = CHUNK_SIZE) -> AsyncIterator[bytes]:
        """The blob's bytes in chunks of `chunk_size` (the last may be shorter).

        Raises:
            BlobNotFoundError: (on the first iteration) There is none; or (later)
                a database store's blob was replaced or deleted meanwhile.
            TypeError: `chunk_size` is not an int.
            ValueError: `chunk_size` is below 1.
        """
        ...

    async def list(self, prefix: str = "") -> list[BlobInfo]:
        """The info of every blob whose name starts with `prefix`, sorted by name."""
        ...

    async def delete(self, name: str) -> bool:
        """Remove the blob under `name`; whether there was one."""
        ...


class BlobStoreBase:
    """What every backend of `BlobStore` shares: the checks, before one call of its own.

    A backend implements the `_`-methods, which get checked arguments (and
    chunks already checked); `_put_stream` by default gathers the chunks in a
    temporary file (in memory up to 8 MiB) and hands it to `_put_spooled`.
    """

    __slots__ = ()

    async def _put(self, name: str, content_type: str, data: bytes, sha256: str) -> BlobInfo:
        raise NotImplementedError

    async def _put_stream(
        self, name: str, content_type: str, chunks: AsyncIterator[bytes]
    ) -> BlobInfo:
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as spool:
            digest, size = hashlib.sha256(), 0
            async for chunk in chunks:
                spool.write(chunk)
                digest.update(chunk)
                size += len(chunk)
            return await self._put_spooled(name, content_type, digest.hexdigest(), size, spool)

    async def _put_spooled(
        self, name: str, content_type: str, sha256: str, size: int, spool: IO[bytes]
    ) -> BlobInfo:
        raise NotImplementedError

    async def _get(self, name: str) -> Blob:
        raise NotImplementedError

    async def _info(self, name: str) -> BlobInfo:
        raise NotImplementedError

    def _stream(self, name: str, chunk_size: int) -> AsyncIterator[bytes]:
        raise NotImplementedError

    async def _list(self, prefix: str) -> list[BlobInfo]:
        raise NotImplementedError

    async def _delete(self, name: str) -> bool:
        raise NotImplementedError

    async def put(
        self, name: str, data: bytes, *, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> BlobInfo:
        """Store `data` under `name`, replacing any blob there (see `BlobStore.put`)."""
        key, kind, content = check_name(name), check_content_type(content_type), check_data(data)
        return await self._put(key, kind, content, hashlib.sha256(content).hexdigest())

    async def put_stream(
        self,
        name: str,
        chunks: AsyncIterable[bytes] | Iterable[bytes],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
    ) -> BlobInfo:
        """Store the concatenated `chunks` under `name` (see `BlobStore.put_stream`)."""
        key, kind = check_name(name), check_content_type(content_type)
        return await self._put_stream(key, kind, chunks_of(chunks))

    async def get(self, name: str) -> Blob:
        """The blob under `name`, read whole (see `BlobStore.get`)."""
        return await self._get(check_name(name))

    async def info(self, name: str) -> BlobInfo:
        """The info of the blob under `name`, without its bytes (see `BlobStore.info`)."""
        return await self._info(check_name(name))

    async def stream(self, name: str, *, chunk_size: int = CHUNK_SIZE) -> AsyncIterator[bytes]:
        """The blob's bytes in chunks of `chunk_size` (see `BlobStore.stream`)."""
        size, key = check_chunk_size(chunk_size), check_name(name)
        async for chunk in self._stream(key, size):
            yield chunk

    async def list(self, prefix: str = "") -> list[BlobInfo]:
        """The info of every blob whose name starts with `prefix`, sorted by name."""
        return await self._list(check_prefix(prefix))

    async def delete(self, name: str) -> bool:
        """Remove the blob under `name`; whether there was one."""
        return await self._delete(check_name(name))


def check_name(name: object) -> str:
    """Return `name` if it can name a blob in every backend.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty, too long, or holds a NUL or a lone surrogate.
    """
    return check_key("blob name", name)


def check_prefix(prefix: object) -> str:
    """Return `prefix` if it is a str (possibly empty) every store can hold.

    Raises:
        TypeError: It is not a str.
        ValueError: It holds a NUL or a lone surrogate.
    """
    return "" if prefix == "" else check_key("prefix", prefix)


def check_content_type(content_type: object) -> str:
    """Return `content_type` if it looks like a media type (`"type/subtype; k=v"`).

    Raises:
        TypeError: It is not a str.
        ValueError: It is not `type/subtype` with optional parameters.
    """
    if not isinstance(content_type, str):
        raise TypeError(f"content_type must be a str, not {type(content_type).__name__}")
    if len(content_type) > 255 or not _CONTENT_TYPE.fullmatch(content_type):
        raise ValueError(
            f"content_type {content_type!r} is not a media type such as "
            "'application/pdf' or 'text/plain; charset=utf-8'"
        )
    return content_type


def check_data(data: object, what: str = "data") -> bytes:
    """`data` as bytes, if it is bytes-like.

    Raises:
        TypeError: It is not bytes, bytearray or memoryview.
    """
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    hint = "; encode text first, e.g. text.encode()" if isinstance(data, str) else ""
    raise TypeError(f"{what} must be bytes, not {type(data).__name__}{hint}")


def check_chunk_size(chunk_size: object) -> int:
    """Return `chunk_size` if it is a positive int.

    Raises:
        TypeError: It is not an int.
        ValueError: It is not positive.
    """
    return whole_number(chunk_size, "chunk_size", least=1, fix="a number of bytes")


async def chunks_of(chunks: AsyncIterable[bytes] | Iterable[bytes]) -> AsyncIterator[bytes]:
    """The chunks of a sync or async iterable, each checked and as bytes.

    Raises:
        TypeError: `chunks` is not iterable (or is bytes itself), or a chunk is not bytes-like.
    """
    if isinstance(chunks, bytes | bytearray | memoryview | str):
        raise TypeError(
            "put_stream takes an iterable of byte chunks, not a single bytes or str; "
            "use put() for bytes you already hold"
        )
    index = 0
    if isinstance(chunks, AsyncIterable):
        async for chunk in chunks:
            yield check_data(chunk, f"chunk {index}")
            index += 1
    elif isinstance(chunks, Iterable):
        for chunk in chunks:
            yield check_data(chunk, f"chunk {index}")
            index += 1
    else:
        raise TypeError(
            f"put_stream takes an iterable or async iterable of bytes, not {type(chunks).__name__}"
        )


def names_after(prefix: str) -> str | None:
    """The first string after every string that starts with `prefix`; None if there is none.

    `prefix <= name < names_after(prefix)` is "name starts with prefix", as a
    range a database can answer from its index (in code point order).
    """
    stem = prefix.rstrip(chr(0x10FFFF))
    if not stem:
        return None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are not text: skip to the next character
        following = 0xE000
    return stem[:-1] + chr(following)


def missing_blob(name: str) -> BlobNotFoundError:
    """The error for a name the store has no blob under."""
    return BlobNotFoundError(f"no blob named {name!r} in the store")


def changed_while_read(name: str) -> BlobNotFoundError:
    """The error for a stream whose blob was replaced or deleted before it ended."""
    return BlobNotFoundError(
        f"blob {name!r} was replaced or deleted while it was being streamed; "
        "read it again for its current content"
    )
