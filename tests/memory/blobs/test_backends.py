"""What each blob backend adds to the contract: files on disk, database rows, limits."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest
from psycopg import AsyncConnection

from pygents_ctx import BlobNotFoundError, connect_postgres
from pygents_ctx.context.stores import SQLiteConnection, connect
from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.memory import DirectoryBlobStore, PostgresBlobStore, SQLiteBlobStore
from tests import postgres_server


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# -- directory ---------------------------------------------------------------------------


async def test_directory_blobs_survive_a_restart_and_stay_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "store" / "blobs"
    await DirectoryBlobStore(root).put("../../escape.txt", b"caught", content_type="text/plain")

    again = DirectoryBlobStore(str(root))
    blob = await again.get("../../escape.txt")

    assert (blob.data, blob.info.content_type) == (b"caught", "text/plain")
    assert [p.parent.parent for p in files_under(tmp_path)] == [root]
    assert again.root == root
    assert repr(again) == f"DirectoryBlobStore({str(root)!r})"


async def test_a_blob_file_holds_the_bytes_then_the_info(tmp_path: Path) -> None:
    blobs = DirectoryBlobStore(tmp_path)
    await blobs.put("a.txt", b"plain bytes first")

    [path] = files_under(tmp_path)

    assert path.read_bytes().startswith(b"plain bytes first{")
    assert path.read_bytes().endswith(b"PGBLOB01")


async def test_a_write_that_fails_before_the_rename_leaves_the_old_blob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = DirectoryBlobStore(tmp_path)
    await blobs.put("doc", b"old")
    before = files_under(tmp_path)

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        await blobs.put("doc", b"new")
    with pytest.raises(OSError, match="disk full"):
        await blobs.put_stream("doc", [b"new"])
    monkeypatch.undo()

    assert (await blobs.get("doc")).data == b"old"
    assert files_under(tmp_path) == before  # no temporary file left behind


async def test_a_cancelled_stream_write_leaves_nothing(tmp_path: Path) -> None:
    blobs = DirectoryBlobStore(tmp_path)
    arrived = asyncio.Event()

    async def slow() -> object:
        yield b"part"
        arrived.set()
        await asyncio.sleep(60)
        yield b"never"

    task = asyncio.create_task(blobs.put_stream("upload", slow()))
    await arrived.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert files_under(tmp_path) == []
    with pytest.raises(BlobNotFoundError):
        await blobs.info("upload")


async def test_stray_temporary_files_are_not_blobs(tmp_path: Path) -> None:
    blobs = DirectoryBlobStore(tmp_path)
    await blobs.put("kept", b"x")
    [path] = files_under(tmp_path)
    (path.parent / ".tmp-left-by-a-crash").write_bytes(b"half a blob")
    (tmp_path / "README").write_text("not ours")

    assert [i.name for i in await blobs.list()] == ["kept"]


async def test_a_file_changed_by_hand_is_reported_not_misread(tmp_path: Path) -> None:
    blobs = DirectoryBlobStore(tmp_path)
    await blobs.put("doc", b"content")
    [path] = files_under(tmp_path)
    original = path.read_bytes()
    path.write_bytes(b"edited by hand")

    with pytest.raises(ValueError, match="not a blob file this store wrote"):
        await blobs.get("doc")
    with pytest.raises(ValueError, match="delete it or restore it"):
        await blobs.list()
    for damaged in (
        b"",  # shorter than the marker
        b"content{not json" + struct.pack(">Q8s", 9, b"PGBLOB01"),  # unreadable info
        b"{}" + struct.pack(">Q8s", 2, b"PGBLOB01"),  # info without its fields
        b"x" + struct.pack(">Q8s", 999, b"PGBLOB01"),  # info longer than the file
        b"xy" + original[7:],  # bytes that do not match the recorded size
    ):
        path.write_bytes(damaged)
        with pytest.raises(ValueError, match="not a blob file"):
            await blobs.info("doc")
    assert await blobs.delete("doc") is True


def test_the_root_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")

    with pytest.raises(FileExistsError):
        DirectoryBlobStore(tmp_path / "file")
    with pytest.raises(TypeError, match="root must be a str"):
        DirectoryBlobStore(3)  # type: ignore[arg-type]


# -- SQLite ----------------------------------------------------------------------------


async def content_rows(conn: SQLiteConnection) -> int:
    (count,) = await conn.run(
        lambda db: db.execute("SELECT count(*) FROM pygents_blob_contents").fetchone()
    )
    return int(count)


async def test_sqlite_replaced_and_deleted_content_is_freed(sqlite_conn: SQLiteConnection) -> None:
    blobs = SQLiteBlobStore(sqlite_conn)
    await blobs.put("a", b"1")
    await blobs.put("a", b"22")
    await blobs.put_stream("b", [b"3", b"33"])
    await blobs.put_stream("b", [b"4"])
    assert await content_rows(sqlite_conn) == 2

    await blobs.delete("a")

    assert await content_rows(sqlite_conn) == 1
    assert (await blobs.get("b")).data == b"4"


async def test_sqlite_refuses_a_blob_over_its_value_limit(sqlite_conn: SQLiteConnection) -> None:
    blobs = SQLiteBlobStore(sqlite_conn)
    await blobs.put("fits", b"x" * 100)
    await sqlite_conn.run(lambda db: db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1000))

    with pytest.raises(
        ValueError, match="at most 1,000 bytes in one value: use a DirectoryBlobStore"
    ):
        await blobs.put("too big", b"x" * 1001)
    with pytest.raises(ValueError, match="2,000 bytes"):
        await blobs.put_stream("fits", [b"x" * 1000, b"y" * 1000])

    assert [i.name for i in await blobs.list()] == ["fits"]
    assert (await blobs.get("fits")).data == b"x" * 100


async def test_sqlite_streamed_puts_larger_than_memory_spool(sqlite_conn: SQLiteConnection) -> None:
    blobs = SQLiteBlobStore(sqlite_conn)
    piece = os.urandom(1 << 20)

    info = await blobs.put_stream("large", (piece for _ in range(9)))

    assert info.size == 9 << 20
    streamed = [c async for c in blobs.stream("large", chunk_size=3 << 20)]
    assert [len(c) for c in streamed] == [3 << 20] * 3
    assert b"".join(streamed) == piece * 9


async def test_sqlite_blobs_are_shared_by_two_connections(tmp_path: Path) -> None:
    path = tmp_path / "blobs.db"
    async with connect(path) as one, connect(path) as two:
        await SQLiteBlobStore(one).put("x", b"from one")
        assert (await SQLiteBlobStore(two).get("x")).data == b"from one"
        assert repr(SQLiteBlobStore(two)) == f"SQLiteBlobStore({str(path)!r})"


async def test_a_sqlite_stream_whose_blob_is_deleted_says_so(sqlite_conn: SQLiteConnection) -> None:
    blobs = SQLiteBlobStore(sqlite_conn)
    await blobs.put("doc", b"abcdef")
    stream = blobs.stream("doc", chunk_size=2)
    assert await anext(stream) == b"ab"

    await blobs.delete("doc")

    with pytest.raises(BlobNotFoundError, match="'doc' was replaced or deleted"):
        await anext(stream)


# -- PostgreSQL ------------------------------------------------------------------------


async def test_postgres_replaced_content_is_freed_and_big_blobs_are_pieces(
    pg_conn: PostgresConnection,
) -> None:
    blobs = PostgresBlobStore(pg_conn)
    data = os.urandom((2 << 20) + 5)
    await blobs.put("big", data)
    await blobs.put_stream("big", [data[:100], data[100:]])
    await blobs.put("small", b"s")

    async def counts(db: AsyncConnection[Any]) -> tuple[Any, ...] | None:
        cursor = await db.execute(
            "SELECT (SELECT count(*) FROM pygents_blob_contents), "
            "(SELECT count(*) FROM pygents_blob_chunks)"
        )
        return await cursor.fetchone()

    assert await pg_conn.run(counts) == (2, 4)  # 3 pieces of "big", 1 of "small"
    assert (await blobs.get("big")).data == data
    await blobs.delete("big")
    assert await pg_conn.run(counts) == (1, 1)
    assert repr(blobs).startswith("PostgresBlobStore('postgres@")


async def test_postgres_writers_on_two_connections_leave_one_whole_blob(
    postgres: postgres_server.PostgresServer, pg_conn: PostgresConnection
) -> None:
    versions = [bytes([i]) * 5000 for i in range(6)]
    async with connect_postgres(postgres.dsn) as other:
        stores = [PostgresBlobStore(pg_conn), PostgresBlobStore(other)]
        await asyncio.gather(
            *(stores[i % 2].put("shared", data) for i, data in enumerate(versions))
        )

    blob = await PostgresBlobStore(pg_conn).get("shared")
    assert blob.data in versions

    async def contents(db: AsyncConnection[Any]) -> tuple[Any, ...] | None:
        cursor = await db.execute("SELECT count(*) FROM pygents_blob_contents")
        return await cursor.fetchone()

    assert await pg_conn.run(contents) == (1,)  # every replaced version was freed
