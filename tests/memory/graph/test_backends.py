"""What the database graph stores add to the contract: many graphs, restarts, schema versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pygents_ctx import StoreClosedError, StoreSchemaError
from pygents_ctx.context.stores import SQLiteConnection, connect, connect_postgres
from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.memory import Entity, PostgresGraphStore, Relationship, SQLiteGraphStore
from tests import postgres_server


async def fill(graph: SQLiteGraphStore | PostgresGraphStore, prefix: str) -> None:
    await graph.upsert_entities([Entity("x", "node", {"in": prefix}), Entity("y", "node")])
    await graph.upsert_relationships([Relationship("x", "y", prefix)])


async def test_sqlite_graphs_in_one_file_are_apart_and_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    async with connect(path) as conn:
        await fill(SQLiteGraphStore(conn, graph="one"), "one")
        await fill(SQLiteGraphStore(conn, graph="two"), "two")
        assert await SQLiteGraphStore(conn, graph="one").delete_entity("y")

    async with connect(path) as conn:
        one, two = SQLiteGraphStore(conn, graph="one"), SQLiteGraphStore(conn, graph="two")
        assert await one.relationships() == []
        assert [r.type for r in await two.relationships()] == ["two"]
        assert await two.get_entity("x") == Entity("x", "node", {"in": "two"})
        assert repr(one) == f"SQLiteGraphStore({str(path)!r}, graph='one')"
        assert one.graph == "one"


async def test_postgres_graphs_in_one_database_are_apart(pg_conn: PostgresConnection) -> None:
    await fill(PostgresGraphStore(pg_conn, graph="one"), "one")
    await fill(PostgresGraphStore(pg_conn, graph="two"), "two")
    one = PostgresGraphStore(pg_conn, graph="one")
    assert await one.delete_entity("y")

    assert await one.relationships() == []
    two = PostgresGraphStore(pg_conn, graph="two")
    assert [r.type for r in await two.relationships()] == ["two"]
    assert one.graph == "one"
    assert repr(one).startswith("PostgresGraphStore('postgres@")


async def test_postgres_graph_survives_reconnecting(
    postgres: postgres_server.PostgresServer, pg_conn: PostgresConnection
) -> None:
    await fill(PostgresGraphStore(pg_conn), "kept")

    async with connect_postgres(postgres.dsn) as again:
        found = await PostgresGraphStore(again).neighbors("y")

    assert found.entity_ids() == ["y", "x"]


def test_the_stores_need_their_own_kind_of_connection(
    sqlite_conn: SQLiteConnection, pg_conn: PostgresConnection
) -> None:
    with pytest.raises(TypeError, match=r"await connect\(path\)"):
        SQLiteGraphStore(pg_conn)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"await connect_postgres\(dsn\)"):
        PostgresGraphStore(sqlite_conn)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="graph must not be empty"):
        SQLiteGraphStore(sqlite_conn, graph="")


async def test_a_closed_connection_gives_a_clear_error(tmp_path: Path) -> None:
    conn = await connect(tmp_path / "kb.db")
    graph = SQLiteGraphStore(conn)
    await conn.close()

    with pytest.raises(StoreClosedError, match="closed"):
        await graph.neighbors("x")


async def test_a_graph_schema_newer_than_this_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    async with connect(path) as conn:
        await fill(SQLiteGraphStore(conn), "x")
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE pygents_graph_schema SET version = 99")
    db.close()

    async with connect(path) as conn:
        graph = SQLiteGraphStore(conn)
        with pytest.raises(StoreSchemaError, match="graph store schema is version 99"):
            await graph.entities()
        with pytest.raises(StoreSchemaError):  # still refused: nothing was marked ready
            await graph.entities()


async def test_the_graph_tables_are_made_once_and_beside_the_context_tables(
    sqlite_conn: SQLiteConnection,
) -> None:
    await fill(SQLiteGraphStore(sqlite_conn), "x")
    await SQLiteGraphStore(sqlite_conn, graph="other").entities()

    tables = await sqlite_conn.run(
        lambda db: [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    )
    assert {"pygents_sessions", "pygents_graph_entities", "pygents_graph_schema"} <= set(tables)
    version = await sqlite_conn.run(
        lambda db: db.execute("SELECT version FROM pygents_graph_schema").fetchall()
    )
    assert version == [(1,)]
