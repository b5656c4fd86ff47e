"""`PostgresVectorStore(index="hnsw")`: an HNSW index per collection, searched through it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from pygents_ctx import PostgresVectorStore, connect_postgres
from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.memory.vectors.postgres import _hnsw_prefix
from tests import postgres_server


@pytest.fixture
async def conn(postgres: postgres_server.PostgresServer) -> AsyncIterator[PostgresConnection]:
    async with connect_postgres(postgres.dsn) as connection:
        store = PostgresVectorStore(connection)
        for collection in await store.list_collections():
            await store.delete_collection(collection.name)  # and its indexes
        yield connection


async def _plan(store: PostgresVectorStore, query: list[float], **filters: Any) -> str:
    """EXPLAIN of the statement the store runs for this search (captured, then explained)."""
    seen: list[tuple[Any, Any]] = []

    async def capture(db: Any) -> None:
        original = db.execute

        async def execute(statement: Any, params: Any = None, **kwargs: Any) -> Any:
            if "ORDER BY" in str(getattr(statement, "as_string", lambda _: statement)(db)):
                seen.append((statement, params))
            return await original(statement, params, **kwargs)

        db.execute = execute

    async def release(db: Any) -> None:
        del db.execute

    await store._run(capture)
    try:
        await store.search("c", query, k=5, filter=filters or None)
    finally:
        await store._run(release)
    statement, params = seen[-1]

    async def explain(db: Any) -> str:
        from psycopg import sql

        cursor = await db.execute(sql.SQL("EXPLAIN ") + statement, params)
        return "\n".join(row[0] for row in await cursor.fetchall())

    return await store._run(explain)


def _clustered(count: int, dimension: int, seed: int = 4) -> Any:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((20, dimension))
    return centers[rng.integers(0, 20, count)] + 0.3 * rng.standard_normal((count, dimension))


async def test_an_hnsw_search_finds_what_the_exact_search_finds(conn: PostgresConnection) -> None:
    hnsw = PostgresVectorStore(conn, index="hnsw", ef_search=100)
    exact = PostgresVectorStore(conn)
    assert (hnsw.index, exact.index) == ("hnsw", "exact")
    await hnsw.create_collection("c", 16)
    matrix = _clustered(600, 16)
    ids = [f"d{i:03}" for i in range(600)]
    await hnsw.add_many("c", ids, matrix, metadata=[{"even": i % 2 == 0} for i in range(600)])

    found = exact_found = 0
    for query in _clustered(20, 16, seed=9).tolist():
        approximate = [r.id for r in await hnsw.search("c", query, k=10)]
        truth = [r.id for r in await exact.search("c", query, k=10)]
        found += len(set(approximate) & set(truth))
        exact_found += len(truth)
        scores = [r.score for r in await hnsw.search("c", query, k=10)]
        assert scores == sorted(scores, reverse=True)
    assert found / exact_found >= 0.9

    filtered = await hnsw.search("c", matrix[3].tolist(), k=5, filter={"even": False})
    assert len(filtered) == 5
    assert all(hit.metadata == {"even": False} for hit in filtered)
    assert filtered[0].id == "d003"


async def test_the_search_walks_the_collections_own_index(conn: PostgresConnection) -> None:
    store = PostgresVectorStore(conn, index="hnsw")
    await store.create_collection("c", 8)
    await store.create_collection("other", 8)
    await store.add_many("c", [f"d{i}" for i in range(2_000)], _clustered(2_000, 8))
    await store._run(lambda db: db.execute("ANALYZE pygents_vectors"))

    plan = await _plan(store, [1.0] * 8)
    assert "Index Scan using pygents_hnsw_" in plan
    assert plan.count("pygents_hnsw_") == 1
    assert "Seq Scan" not in plan
    assert "pygents_hnsw_" in await _plan(store, [1.0] * 8, tag="x")


async def test_a_collection_made_again_with_another_dimension_is_written_and_indexed(
    conn: PostgresConnection,
) -> None:
    store = PostgresVectorStore(conn, index="hnsw")
    await store.create_collection("c", 4)
    await store.add_many("c", ["a"], [[1, 0, 0, 0]])
    other = PostgresVectorStore(conn)  # an exact store drops it: the index goes too
    await other.delete_collection("c")
    await other.create_collection("c", 3)
    await other.add_many("c", ["b"], [[0, 1, 0]])

    assert [r.id for r in await store.search("c", [0, 1, 0])] == ["b"]

    async def indexes(db: Any) -> list[str]:
        cursor = await db.execute(
            "SELECT indexname FROM pg_indexes WHERE starts_with(indexname, %s)",
            (_hnsw_prefix("c"),),
        )
        return [row[0] for row in await cursor.fetchall()]

    names = await store._run(indexes)
    assert len(names) == 1
    assert names[0].endswith("_3")


@pytest.mark.parametrize(
    ("settings", "error", "match"),
    [
        ({"index": "ivfflat"}, ValueError, 'index must be "exact" or "hnsw"'),
        ({"m": 1}, ValueError, "m must be between 2 and 100"),
        ({"m": 16, "ef_construction": 20}, ValueError, "ef_construction must be between 32"),
        ({"ef_search": 0}, ValueError, "ef_search must be between 1 and 1000"),
        ({"ef_search": 4.0}, TypeError, "ef_search must be an int"),
    ],
)
async def test_bad_index_settings_are_refused(
    conn: PostgresConnection, settings: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        PostgresVectorStore(conn, **settings)
