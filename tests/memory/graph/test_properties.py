"""`neighbors()` on random graphs against a brute-force breadth-first oracle, on every backend."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx.context.stores import SQLiteConnection, connect, connect_postgres
from pygents_ctx.memory import (
    Entity,
    GraphStore,
    InMemoryGraphStore,
    PostgresGraphStore,
    Relationship,
    SQLiteGraphStore,
)
from tests import postgres_server

NODES = [f"n{i}" for i in range(10)]
TYPES = ["a", "b", "c"]

edges = st.lists(
    st.tuples(st.sampled_from(NODES), st.sampled_from(NODES), st.sampled_from(TYPES)).filter(
        lambda e: e[0] != e[1]
    ),
    max_size=30,
    unique=True,
)
queries = st.tuples(
    st.sampled_from(NODES),
    st.integers(min_value=0, max_value=5),
    st.none() | st.sets(st.sampled_from(TYPES)),
)
Edge = tuple[str, str, str]


def oracle(
    edges: list[Edge], start: str, depth: int, types: set[str] | None
) -> tuple[dict[str, int], set[Edge]]:
    """Distances by repeated full passes over the edge list; no adjacency, no cleverness."""
    usable = [e for e in edges if types is None or e[2] in types]
    distances = {start: 0}
    for hop in range(1, depth + 1):
        for source, target, _ in usable:
            for here, there in ((source, target), (target, source)):
                if distances.get(here) == hop - 1 and there not in distances:
                    distances[there] = hop
    walked = {
        e for e in usable if min(distances.get(e[0], depth), distances.get(e[1], depth)) < depth
    }
    return distances, walked


async def check(graph: GraphStore, edge_list: list[Edge], query_list: list[tuple]) -> None:
    await graph.upsert_entities(Entity(node, "node", {"i": i}) for i, node in enumerate(NODES))
    await graph.upsert_relationships(Relationship(s, t, kind) for s, t, kind in edge_list)
    for start, depth, types in query_list:
        found = await graph.neighbors(start, depth, types)
        distances, walked = oracle(edge_list, start, depth, types)
        assert found.distances == distances
        assert found.entity_ids() == sorted(distances, key=lambda n: (distances[n], n))
        assert [r.key for r in found.relationships] == sorted(walked)
        assert all(r.source in distances and r.target in distances for r in found.relationships)


@settings(max_examples=150, deadline=None)
@given(edge_list=edges, query_list=st.lists(queries, min_size=1, max_size=4))
def test_in_memory_neighbors_match_the_oracle(edge_list: list[Edge], query_list: list) -> None:
    asyncio.run(check(InMemoryGraphStore(), edge_list, query_list))


@pytest.fixture(scope="module")
def sqlite_connection() -> Iterator[SQLiteConnection]:
    """One connection for all examples; each example works on a graph of its own."""
    with tempfile.TemporaryDirectory() as directory:
        conn = asyncio.run(connect(Path(directory) / "graphs.db"))
        yield conn
        asyncio.run(conn.close())


@settings(max_examples=60, deadline=None)
@given(edge_list=edges, query_list=st.lists(queries, min_size=1, max_size=4))
def test_sqlite_neighbors_match_the_oracle(
    sqlite_connection: SQLiteConnection, edge_list: list[Edge], query_list: list
) -> None:
    graph = SQLiteGraphStore(sqlite_connection, graph=uuid.uuid4().hex)
    asyncio.run(check(graph, edge_list, query_list))


@settings(max_examples=30, deadline=None)
@given(edge_list=edges, query_list=st.lists(queries, min_size=1, max_size=4))
def test_postgres_neighbors_match_the_oracle(
    postgres: postgres_server.PostgresServer, edge_list: list[Edge], query_list: list
) -> None:
    async def run() -> None:
        async with connect_postgres(postgres.dsn) as conn:
            await check(PostgresGraphStore(conn, graph=uuid.uuid4().hex), edge_list, query_list)

    asyncio.run(run())
