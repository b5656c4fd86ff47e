"""What every memory store shares, whatever it remembers: how it is opened and what it is."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import pytest

from pygents_ctx import Agent, Turn, tool
from pygents_ctx.context.stores import SQLiteConnection
from pygents_ctx.memory import (
    BlobStore,
    DirectoryBlobStore,
    Entity,
    GraphStore,
    HashingEmbedder,
    InMemoryBlobStore,
    InMemoryGraphStore,
    InMemoryTaskStore,
    InMemoryVectorStore,
    PostgresBlobStore,
    PostgresGraphStore,
    PostgresTaskStore,
    PostgresVectorStore,
    SQLiteBlobStore,
    SQLiteGraphStore,
    SQLiteTaskStore,
    SQLiteVectorStore,
    TaskBoard,
    TaskStore,
    VectorDocument,
    VectorStore,
)

# Each database store, with the fixture of its kind of connection and how that is opened.
DATABASE_STORES: list[tuple[Callable[[Any], Any], str, str]] = [
    (SQLiteVectorStore, "sqlite_conn", "connect"),
    (SQLiteGraphStore, "sqlite_conn", "connect"),
    (SQLiteBlobStore, "sqlite_conn", "connect"),
    (SQLiteTaskStore, "sqlite_conn", "connect"),
    (PostgresVectorStore, "pg_conn", "connect_postgres"),
    (PostgresGraphStore, "pg_conn", "connect_postgres"),
    (PostgresBlobStore, "pg_conn", "connect_postgres"),
    (PostgresTaskStore, "pg_conn", "connect_postgres"),
]
OTHER_KIND = {"sqlite_conn": "pg_conn", "pg_conn": "sqlite_conn"}


def _name(store: Callable[[Any], Any]) -> str:
    return getattr(store, "__name__", "")


@pytest.mark.parametrize(
    ("make", "fixture", "opener"), DATABASE_STORES, ids=[_name(s[0]) for s in DATABASE_STORES]
)
def test_a_database_store_runs_on_the_connection_it_was_given(
    make: Callable[[Any], Any], fixture: str, opener: str, request: pytest.FixtureRequest
) -> None:
    conn = request.getfixturevalue(fixture)

    assert make(conn).connection is conn


@pytest.mark.parametrize(
    ("make", "fixture", "opener"), DATABASE_STORES, ids=[_name(s[0]) for s in DATABASE_STORES]
)
def test_a_database_store_refuses_the_other_kind_of_connection_and_names_its_opener(
    make: Callable[[Any], Any], fixture: str, opener: str, request: pytest.FixtureRequest
) -> None:
    wrong = request.getfixturevalue(OTHER_KIND[fixture])

    with pytest.raises(
        TypeError, match=rf"{_name(make)} needs the connection from `await {opener}\("
    ):
        make(wrong)


def test_every_backend_is_an_instance_of_its_protocol(sqlite_conn: SQLiteConnection) -> None:
    with tempfile.TemporaryDirectory() as folder:
        backends: dict[type, list[object]] = {
            VectorStore: [InMemoryVectorStore(), SQLiteVectorStore(sqlite_conn)],
            GraphStore: [InMemoryGraphStore(), SQLiteGraphStore(sqlite_conn)],
            BlobStore: [
                InMemoryBlobStore(),
                DirectoryBlobStore(folder),
                SQLiteBlobStore(sqlite_conn),
            ],
            TaskStore: [InMemoryTaskStore(), SQLiteTaskStore(sqlite_conn)],
        }
    protocols = list(backends)
    for protocol, stores in backends.items():
        for store in stores:
            # Each store is its own protocol's, and no other's: the method names do not overlap
            # by accident, so a store handed to the wrong slot is caught by isinstance.
            assert [p for p in protocols if isinstance(store, p)] == [protocol], store


async def test_a_tool_reaches_its_agents_memory_stores_by_their_protocols(
    sqlite_conn: SQLiteConnection,
) -> None:
    @tool
    async def remember(
        text: str,
        vectors: VectorStore,
        graph: GraphStore,
        blobs: BlobStore,
        board: TaskBoard,
    ) -> str:
        await vectors.upsert("notes", [VectorDocument("n1", text)])
        await graph.upsert_entities([Entity("n1", "note")])
        await blobs.put("notes/n1.txt", text.encode())
        [task] = await board.add_tasks([f"file {text}"])
        return f"{board.agent} filed task {task.id}"

    vectors = SQLiteVectorStore(sqlite_conn, embedder=HashingEmbedder(8))
    await vectors.create_collection("notes", 8)
    graph, blobs, tasks = (
        SQLiteGraphStore(sqlite_conn),
        SQLiteBlobStore(sqlite_conn),
        InMemoryTaskStore(),
    )
    agent = Agent(
        "archivist",
        "files notes",
        [remember],
        resources={VectorStore: vectors, GraphStore: graph, BlobStore: blobs, TaskBoard: tasks},
    )
    await agent.put(Turn(remember, kwargs={"text": "tides"}))

    assert [value async for _, value in agent.run()] == ["archivist filed task 1"]
    assert [hit.id for hit in await vectors.search("notes", "tides", k=1)] == ["n1"]
    assert await graph.get_entity("n1") == Entity("n1", "note")
    assert (await blobs.get("notes/n1.txt")).data == b"tides"
    assert list(remember.metadata.input_schema["properties"]) == ["text"]


def test_a_store_given_for_the_wrong_protocol_is_refused() -> None:
    with pytest.raises(TypeError, match=r"resources\[VectorStore\] must be a VectorStore"):
        Agent("archivist", "files notes", [], resources={VectorStore: InMemoryGraphStore()})
