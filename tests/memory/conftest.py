"""Connections for the memory stores' tests: a SQLite file per test, and the shared server.

Every PostgreSQL test starts with the memory stores' tables empty (those that
exist: a store makes its tables on first use).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import AsyncConnection

from pygents_ctx.context.stores import SQLiteConnection, connect
from pygents_ctx.context.stores.postgres import PostgresConnection, connect_postgres
from tests import postgres_server

MEMORY_TABLES = (
    "pygents_graph_relationships",
    "pygents_graph_entities",
    "pygents_blobs",
    "pygents_blob_chunks",
    "pygents_blob_contents",
    "pygents_tasks",
    "pygents_task_boards",
)


@pytest.fixture
async def sqlite_conn(tmp_path: Path) -> AsyncIterator[SQLiteConnection]:
    async with connect(tmp_path / "memory.db") as conn:
        yield conn


@pytest.fixture
async def pg_conn(postgres: postgres_server.PostgresServer) -> AsyncIterator[PostgresConnection]:
    async with connect_postgres(postgres.dsn) as conn:

        async def empty(db: AsyncConnection[Any]) -> None:
            for table in MEMORY_TABLES:
                cursor = await db.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
                row = await cursor.fetchone()
                if row is not None and row[0]:
                    await db.execute(f"TRUNCATE {table} CASCADE")

        await conn.run(empty)
        yield conn


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
