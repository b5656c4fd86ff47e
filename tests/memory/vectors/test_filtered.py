"""Filtered searches read the metadata index, and find exactly what filtering by hand finds.

Every backend keeps an index of the documents' top-level metadata values
(the in-memory store a dict, SQLite a table kept by triggers, PostgreSQL a
GIN index), so a filtered search scores only what the filter keeps. The
property test compares a filtered search with the same store's unfiltered
ranking, filtered by hand: the same results, in the same order, with the same
scores, after random upserts and deletes, on vectors long enough for the
numpy paths (gathering the kept rows, or masking the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    PostgresVectorStore,
    SQLiteConnection,
    SQLiteVectorStore,
    VectorDocument,
    connect,
    connect_postgres,
)
from pygents_ctx.memory.vectors import postgres as postgres_module
from pygents_ctx.memory.vectors.base import VectorStoreBase
from pygents_ctx.memory.vectors.sqlite import MIGRATIONS
from tests import postgres_server
from tests.context.stores.test_postgres import fresh_database
from tests.memory.vectors.conftest import BACKENDS, open_store
from tests.memory.vectors.test_ranking import matches

DIMENSION = 4_096  # 4 rows or more reach the numpy paths
VALUES = [None, True, False, 0, 1, 1.0, 2, "a", "b", "1", ["a"], {"a": 1}]
# Values common enough that a filter may keep most documents, or few, or none.
values = st.just("a") | st.just(1) | st.sampled_from(VALUES)
metadata = st.fixed_dictionaries(
    {"kind": st.sampled_from(["a", "a", "a", 1, None])}, optional={"label": values, "n": values}
)
batches = st.lists(
    st.tuples(st.integers(0, 59), metadata, st.integers(0, 2**32 - 1)), min_size=16, max_size=60
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), batches),
        st.tuples(st.just("delete"), st.lists(st.integers(0, 59), max_size=10)),
    ),
    min_size=1,
    max_size=4,
)
scalars = (
    st.just("a")
    | st.just(1)
    | st.sampled_from([v for v in VALUES if not isinstance(v, list | dict)])
)
filters = st.dictionaries(st.sampled_from(["label", "n", "kind"]), scalars, min_size=1, max_size=2)


def vector(seed: int, extreme: bool) -> list[float]:
    """Small integers (equal scores are common); some rows very long, where a backend keeps
    them (they are scored exactly, apart from the rest)."""
    row = np.random.default_rng(seed).integers(-1, 2, DIMENSION).astype(float)
    row[seed % DIMENSION] = 3.0  # never all zeros
    return (row * (1e31 if extreme and seed % 7 == 0 else 1.0)).tolist()


@contextlib.asynccontextmanager
async def store_of(backend: str, dsn: str) -> AsyncIterator[VectorStoreBase]:
    if backend != "sqlite-sql":
        async with open_store(backend, dsn=dsn, empty=False) as store:
            yield store
        return
    async with connect(":memory:") as conn:
        yield SQLiteVectorStore(conn, matrix=False, sqlite_vec=False)


async def sqlite_index_is_exact(store: SQLiteVectorStore) -> None:
    """The metadata index holds one entry per top-level scalar value of every document."""

    def read(db: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
        held = db.execute(
            "SELECT collection, key, kind, value, id FROM pygents_vector_metadata "
            "ORDER BY 1, 2, 3, 4, 5"
        )
        derived = db.execute(
            "SELECT v.collection, m.key, CASE WHEN m.type IN ('integer', 'real') "
            "THEN 'number' ELSE m.type END, CASE WHEN m.type IN ('integer', 'real', 'text') "
            "THEN m.value ELSE '' END, v.id FROM pygents_vectors AS v, json_each(v.metadata) "
            "AS m WHERE m.type NOT IN ('object', 'array') ORDER BY 1, 2, 3, 4, 5"
        )
        return held.fetchall(), derived.fetchall()

    held, derived = await store.connection.run(read)
    assert held == derived


@pytest.mark.parametrize("backend", [*BACKENDS, "sqlite-sql"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, query=st.integers(0, 2**32 - 1), k=st.integers(1, 12), conditions=filters)
def test_a_filtered_search_is_the_unfiltered_ranking_filtered(
    backend: str,
    postgres: postgres_server.PostgresServer,
    ops: list[tuple[str, Any]],
    query: int,
    k: int,
    conditions: dict[str, Any],
) -> None:
    extreme = backend in ("memory", "sqlite", "sqlite-sql")  # pgvector refuses such lengths

    async def run() -> None:
        async with store_of(backend, postgres.dsn) as store:
            name = f"filtered-{uuid.uuid4().hex}"
            await store.create_collection(name, DIMENSION)
            try:
                for op, arg in ops:
                    if op == "delete":
                        await store.delete(name, [f"d{i}" for i in arg])
                        continue
                    rows = {f"d{i}": (meta, seed) for i, meta, seed in arg}
                    await store.add_many(
                        name,
                        list(rows),
                        [vector(seed, extreme) for _, seed in rows.values()],
                        metadata=[meta for meta, _ in rows.values()],
                        replace=True,
                    )
                q = vector(query, False)
                found = await store.search(name, q, k=k, filter=conditions)
                everything = await store.search(name, q, k=max(1, await store.count(name)))
                expected = [hit for hit in everything if matches(hit.metadata, conditions)][:k]
                assert found == expected
                if isinstance(store, SQLiteVectorStore):
                    await sqlite_index_is_exact(store)
            finally:
                await store.delete_collection(name)
            if isinstance(store, SQLiteVectorStore):
                await sqlite_index_is_exact(store)  # nothing left of the collection

    asyncio.run(run())


async def test_a_sqlite_file_of_the_second_vector_schema_gets_its_metadata_indexed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v.db"
    db = sqlite3.connect(path)
    for step in MIGRATIONS[:2]:
        for statement in step:
            db.execute(statement)
    db.execute("CREATE TABLE pygents_vector_schema (id INTEGER PRIMARY KEY, version INTEGER)")
    db.execute("INSERT INTO pygents_vector_schema VALUES (1, 2)")
    db.execute("INSERT INTO pygents_vector_collections VALUES ('c', 2, 7)")
    for item_id, meta, row in [
        ("a", '{"tag": "x", "n": 1}', [0, 1]),
        ("b", '{"tag": "y", "n": 1.0, "list": [1]}', [1, 1]),
        ("c", '{"tag": "x", "n": true}', [1, 0]),
    ]:
        blob = np.array(row, dtype="<f4").tobytes()
        norm = float(np.linalg.norm(row))
        db.execute(
            "INSERT INTO pygents_vectors VALUES ('c', ?, 'old', ?, ?, ?)",
            (item_id, meta, blob, norm),
        )
    db.commit()
    db.close()

    async with connect(path) as conn:
        store = SQLiteVectorStore(conn)
        assert [r.id for r in await store.search("c", [0, 1], filter={"tag": "x"})] == ["a", "c"]
        assert [r.id for r in await store.search("c", [0, 1], filter={"n": 1})] == ["a", "b"]
        await sqlite_index_is_exact(store)
        await store.upsert("c", [VectorDocument("a", "new", {"tag": "y"}, [0, 1])])
        await store.delete("c", ["b"])
        assert [r.id for r in await store.search("c", [0, 1], filter={"tag": "y"})] == ["a"]
        assert [r.id for r in await store.search("c", [0, 1], filter={"tag": "x"})] == ["c"]
        await sqlite_index_is_exact(store)


async def test_a_sqlite_file_of_the_third_vector_schema_passes_sqlites_integrity_check(
    tmp_path: Path,
) -> None:
    """Version 3 declared the index's key columns last: SQLite 3.40's integrity_check
    reported NULLs in it (none were there). The fourth builds it again, entries kept."""
    path = tmp_path / "v.db"
    db = sqlite3.connect(path)
    for step in MIGRATIONS[:2]:
        for statement in step:
            db.execute(statement)
    db.execute(  # the third version's table, as it was
        "CREATE TABLE pygents_vector_metadata (collection TEXT NOT NULL, key TEXT NOT NULL, "
        "kind TEXT NOT NULL, value NOT NULL, id TEXT NOT NULL, "
        "PRIMARY KEY (collection, id, key)) WITHOUT ROWID"
    )
    for statement in MIGRATIONS[2][1:]:
        db.execute(statement)
    db.execute("CREATE TABLE pygents_vector_schema (id INTEGER PRIMARY KEY, version INTEGER)")
    db.execute("INSERT INTO pygents_vector_schema VALUES (1, 3)")
    db.execute("INSERT INTO pygents_vector_collections VALUES ('c', 2, 7)")
    for item_id, meta, row in [("a", '{"tag": "x"}', [0, 1]), ("b", '{"tag": "y"}', [1, 1])]:
        blob = np.array(row, dtype="<f4").tobytes()
        db.execute(
            "INSERT INTO pygents_vectors VALUES ('c', ?, 'old', ?, ?, ?)",
            (item_id, meta, blob, float(np.linalg.norm(row))),
        )
    db.commit()
    db.close()

    async with connect(path) as conn:
        store = SQLiteVectorStore(conn)
        assert [r.id for r in await store.search("c", [0, 1], filter={"tag": "x"})] == ["a"]
        await store.upsert("c", [VectorDocument("n", "new", {"tag": "x", "k": 2}, [1, 0])])
        await sqlite_index_is_exact(store)
        checked = await conn.run(lambda db: db.execute("PRAGMA integrity_check").fetchall())
        version = await conn.run(
            lambda db: db.execute("SELECT version FROM pygents_vector_schema").fetchone()
        )
    assert checked == [("ok",)]
    assert version == (len(MIGRATIONS),)


async def test_a_postgres_database_of_the_first_vector_schema_gets_the_metadata_index(
    postgres: postgres_server.PostgresServer,
) -> None:
    with fresh_database(postgres) as dsn:
        async with connect_postgres(dsn) as conn:

            async def first_schema(db: Any) -> None:
                for statement in postgres_module.MIGRATIONS[0]:
                    await db.execute(statement)
                await db.execute(
                    "CREATE TABLE pygents_vector_schema (id integer PRIMARY KEY, version integer)"
                )
                await db.execute("INSERT INTO pygents_vector_schema VALUES (1, 1)")
                await db.execute("INSERT INTO pygents_vector_collections VALUES ('c', 2)")
                await db.execute(
                    "INSERT INTO pygents_vectors VALUES "
                    "('c', 'a', 'old', '{\"tag\": \"x\"}', '[0,1]'), "
                    "('c', 'b', 'old', '{\"tag\": \"y\"}', '[1,1]')"
                )

            await conn.run(first_schema)
            store = PostgresVectorStore(conn)
            assert [r.id for r in await store.search("c", [0, 1], filter={"tag": "x"})] == ["a"]

            async def indexes(db: Any) -> list[str]:
                cursor = await db.execute(
                    "SELECT indexdef FROM pg_indexes WHERE tablename = 'pygents_vectors'"
                )
                return [row[0] for row in await cursor.fetchall()]

            assert any("gin (metadata jsonb_path_ops)" in d for d in await store._run(indexes))


async def file_bytes(conn: SQLiteConnection, path: Path) -> bytes:
    await conn.run(lambda db: db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


async def test_sqlite_deletes_leave_no_metadata_value_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    canaries = [f"{i:03d}canaryvf" for i in range(200)]
    async with connect(path, secure_delete=True) as conn:
        store = SQLiteVectorStore(conn)
        await store.create_collection("gone", 2)
        await store.create_collection("kept", 2)
        await store.add_many(
            "gone",
            [f"g{i}" for i in range(100)],
            [[1, i] for i in range(100)],
            metadata=[{"tag": c} for c in canaries[:100]],
        )
        await store.add_many(
            "kept",
            [f"k{i}" for i in range(100)],
            [[1, i] for i in range(100)],
            metadata=[{"tag": c} for c in canaries[100:]],
        )
        assert b"canaryvf" in await file_bytes(conn, path)  # the test can fail
        await store.upsert("kept", [VectorDocument("k0", "", {"tag": "plain"}, [1, 0])])
        await store.delete("kept", [f"k{i}" for i in range(1, 100)])
        await store.delete_collection("gone")
        assert b"canaryvf" not in await file_bytes(conn, path)
        assert [r.id for r in await store.search("kept", [1, 0], filter={"tag": "plain"})] == ["k0"]
        await sqlite_index_is_exact(store)
