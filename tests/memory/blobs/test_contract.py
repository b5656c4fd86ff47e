"""The `BlobStore` contract, run against every backend."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC

import pytest

from pygents_ctx import BlobNotFoundError, PygentsError
from pygents_ctx.memory import BlobInfo, BlobStore

MIB = 1 << 20


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def read_stream(blobs: BlobStore, name: str, chunk_size: int) -> list[bytes]:
    return [chunk async for chunk in blobs.stream(name, chunk_size=chunk_size)]


async def test_a_blob_is_stored_with_its_info_and_read_back(blobs: BlobStore) -> None:
    info = await blobs.put("papers/tides.pdf", b"%PDF-1.7 ...", content_type="application/pdf")

    assert (info.name, info.size, info.content_type) == ("papers/tides.pdf", 12, "application/pdf")
    assert info.sha256 == sha(b"%PDF-1.7 ...")
    assert info.created_at == info.updated_at
    assert info.created_at.utcoffset() == UTC.utcoffset(None)
    blob = await blobs.get("papers/tides.pdf")
    assert blob.data == b"%PDF-1.7 ..."
    assert blob.info == info
    assert await blobs.info("papers/tides.pdf") == info


async def test_the_default_content_type_is_octet_stream(blobs: BlobStore) -> None:
    info = await blobs.put("raw", bytearray(b"\x00\x01"))

    assert info.content_type == "application/octet-stream"
    assert (await blobs.get("raw")).data == b"\x00\x01"


async def test_writing_a_name_again_replaces_the_blob_but_keeps_its_first_time(
    blobs: BlobStore,
) -> None:
    first = await blobs.put("notes.txt", b"draft", content_type="text/plain")
    await asyncio.sleep(0.002)

    second = await blobs.put("notes.txt", b"final version", content_type="text/markdown")

    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    blob = await blobs.get("notes.txt")
    assert (blob.data, blob.info) == (b"final version", second)
    assert [i.name for i in await blobs.list()] == ["notes.txt"]


async def test_a_missing_blob_is_a_clear_error(blobs: BlobStore) -> None:
    for read in (blobs.get, blobs.info):
        with pytest.raises(BlobNotFoundError, match="no blob named 'ghost'") as info:
            await read("ghost")
        assert isinstance(info.value, KeyError)
        assert isinstance(info.value, PygentsError)
    with pytest.raises(BlobNotFoundError, match="ghost"):
        await read_stream(blobs, "ghost", 10)


async def test_delete_removes_a_blob_once(blobs: BlobStore) -> None:
    await blobs.put("a", b"1")
    await blobs.put("b", b"2")

    assert await blobs.delete("a") is True
    assert await blobs.delete("a") is False

    with pytest.raises(BlobNotFoundError):
        await blobs.get("a")
    assert [i.name for i in await blobs.list()] == ["b"]


async def test_list_is_sorted_and_filters_by_prefix(blobs: BlobStore) -> None:
    names = ["b/2", "a", "a/1", "a/1/x", "a%_", "ab", "é/note", "a/\U0010ffff", "Z"]
    for index, name in enumerate(names):
        await blobs.put(name, bytes([index]))

    assert [i.name for i in await blobs.list()] == sorted(names)
    assert [i.name for i in await blobs.list("a/")] == ["a/1", "a/1/x", "a/\U0010ffff"]
    assert [i.name for i in await blobs.list("a%")] == ["a%_"]
    assert [i.name for i in await blobs.list("a/\U0010ffff")] == ["a/\U0010ffff"]
    assert [i.name for i in await blobs.list("é")] == ["é/note"]
    assert await blobs.list("nothing") == []
    [info] = await blobs.list("Z")
    assert isinstance(info, BlobInfo)
    assert info.size == 1


async def test_an_empty_blob_is_still_a_blob(blobs: BlobStore) -> None:
    await blobs.put("empty", b"")
    await blobs.put_stream("also empty", [])

    assert (await blobs.get("empty")).data == b""
    assert await read_stream(blobs, "empty", 4) == []
    assert (await blobs.info("also empty")).sha256 == sha(b"")


async def test_streams_yield_chunks_of_the_size_asked_for(blobs: BlobStore) -> None:
    await blobs.put("ten", b"0123456789")

    assert await read_stream(blobs, "ten", 3) == [b"012", b"345", b"678", b"9"]
    assert await read_stream(blobs, "ten", 10) == [b"0123456789"]
    assert [c async for c in blobs.stream("ten")] == [b"0123456789"]


async def test_a_large_blob_streams_in_pieces(blobs: BlobStore) -> None:
    data = bytes(range(256)) * (3 * MIB // 256 + 77)  # a little over 3 MiB
    await blobs.put("big.bin", data)

    chunks = await read_stream(blobs, "big.bin", 700_000)

    assert b"".join(chunks) == data
    assert {len(c) for c in chunks[:-1]} == {700_000}
    assert (await blobs.get("big.bin")).data == data


async def test_put_stream_writes_sync_and_async_chunks(blobs: BlobStore) -> None:
    pieces = [b"alpha ", bytearray(b"beta "), memoryview(b"gamma")]

    async def arriving() -> AsyncIterator[bytes]:
        for piece in pieces:
            await asyncio.sleep(0)
            yield bytes(piece)

    sync = await blobs.put_stream("sync", iter(pieces), content_type="text/plain")
    later = await blobs.put_stream("async", arriving())

    for name, info in (("sync", sync), ("async", later)):
        blob = await blobs.get(name)
        assert blob.data == b"alpha beta gamma"
        assert blob.info == info
        assert info.sha256 == sha(b"alpha beta gamma")
        assert info.size == 16


async def test_a_stream_that_fails_stores_nothing(blobs: BlobStore) -> None:
    await blobs.put("report", b"the old report")

    def broken() -> Iterator[bytes]:
        yield b"the new"
        raise ConnectionError("upload dropped")

    with pytest.raises(ConnectionError, match="upload dropped"):
        await blobs.put_stream("report", broken())
    with pytest.raises(TypeError, match="chunk 1 must be bytes"):
        await blobs.put_stream("report", [b"ok", "not bytes"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="chunk 0 must be bytes"):
        await blobs.put_stream("other", [1, 2])  # type: ignore[list-item]

    assert (await blobs.get("report")).data == b"the old report"
    assert [i.name for i in await blobs.list()] == ["report"]


async def test_bad_input_is_refused_before_anything_is_stored(blobs: BlobStore) -> None:
    with pytest.raises(TypeError, match=r"encode text first, e\.g\. text\.encode\(\)"):
        await blobs.put("t", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data must be bytes, not int"):
        await blobs.put("t", 5)  # type: ignore[arg-type]
    for bad_type in ("pdf", "text/", "a b/c", "text/plain; charset", "x/y\n"):
        with pytest.raises(ValueError, match="is not a media type"):
            await blobs.put("t", b"x", content_type=bad_type)
    with pytest.raises(TypeError, match="content_type must be a str"):
        await blobs.put("t", b"x", content_type=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="blob name must not be empty"):
        await blobs.put("", b"x")
    with pytest.raises(ValueError, match="NUL"):
        await blobs.put("a\x00b", b"x")
    with pytest.raises(TypeError, match="blob name must be a str"):
        await blobs.get(b"t")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a single bytes or str"):
        await blobs.put_stream("t", b"bytes")
    with pytest.raises(TypeError, match="iterable or async iterable"):
        await blobs.put_stream("t", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        await read_stream(blobs, "t", 0)
    with pytest.raises(TypeError, match="prefix must be a str"):
        await blobs.list(None)  # type: ignore[arg-type]

    assert await blobs.list() == []


async def test_content_types_with_parameters_are_kept(blobs: BlobStore) -> None:
    kind = 'text/plain; charset=utf-8; format="flowed text"'

    assert (await blobs.put("t", b"x", content_type=kind)).content_type == kind
    assert (await blobs.info("t")).content_type == kind


async def test_names_are_only_names_whatever_they_look_like(blobs: BlobStore) -> None:
    names = ["../../etc/passwd", "/abs/path", "C:\\Windows\\x", "CON", "a/./b", "A", "a"]
    for index, name in enumerate(names):
        await blobs.put(name, str(index).encode())

    for index, name in enumerate(names):
        assert (await blobs.get(name)).data == str(index).encode()
    assert [i.name for i in await blobs.list()] == sorted(names)


async def test_concurrent_writes_of_one_name_leave_one_whole_blob(blobs: BlobStore) -> None:
    versions = [bytes([i]) * (1000 + i) for i in range(8)]

    await asyncio.gather(*(blobs.put("shared", data) for data in versions))

    blob = await blobs.get("shared")
    assert blob.data in versions
    assert blob.info.sha256 == sha(blob.data)
    assert blob.info.size == len(blob.data)
    assert [i.name for i in await blobs.list()] == ["shared"]


async def test_a_stream_never_mixes_two_versions(blobs: BlobStore, blob_backend: str) -> None:
    old, new = b"o" * 3 * MIB, b"n" * 3 * MIB
    await blobs.put("doc", old)
    stream = blobs.stream("doc", chunk_size=MIB // 2)
    first = await anext(stream)

    await blobs.put("doc", new)

    if blob_backend in ("memory", "directory"):  # the version it started on, to its end
        assert first + b"".join([chunk async for chunk in stream]) == old
    else:  # the old content is gone at once: the stream says so
        with pytest.raises(BlobNotFoundError, match="replaced or deleted while it was being"):
            async for _ in stream:
                pass
    assert (await blobs.get("doc")).data == new


async def test_prefixes_next_to_surrogates_and_the_last_character(blobs: BlobStore) -> None:
    # The range a database scans ends after the prefix's last character: one
    # before the surrogates skips them, and the very last character has no after.
    for name in ("x\ud7ff1", "x\ue000", "\U0010ffff\U0010ffff", "\U0010ffffa"):
        await blobs.put(name, b"")

    assert [i.name for i in await blobs.list("x\ud7ff")] == ["x\ud7ff1"]
    assert [i.name for i in await blobs.list("\U0010ffff")] == [
        "\U0010ffffa",
        "\U0010ffff\U0010ffff",
    ]


async def test_chunk_size_must_be_an_int(blobs: BlobStore) -> None:
    await blobs.put("x", b"abc")

    with pytest.raises(TypeError, match="chunk_size must be an int"):
        await read_stream(blobs, "x", "2")  # type: ignore[arg-type]
