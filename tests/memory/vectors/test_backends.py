"""What differs between the backends: connections, persistence, extensions, schema versions."""

from __future__ import annotations

import sqlite3
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import (
    HashingEmbedder,
    InMemoryVectorStore,
    MissingExtensionError,
    PostgresVectorStore,
    SQLiteVectorStore,
    StoreSchemaError,
    VectorDocument,
    connect,
    connect_postgres,
)
from pygents_ctx.memory.vectors import postgres as postgres_module
from pygents_ctx.memory.vectors import sqlite as sqlite_module
from tests import postgres_server
from tests.memory.vectors.conftest import SQLITE_VEC, open_store


async def test_a_sqlite_store_keeps_its_collections_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    async with connect(path) as conn:
        store = SQLiteVectorStore(conn)
        await store.create_collection("notes", 2)
        await store.add("notes", [VectorDocument("a", "north", {"n": 1}, [0.0, 1.0])])

    async with connect(path) as conn:
        store = SQLiteVectorStore(conn)
        assert await store.get("notes", "a") == VectorDocument("a", "north", {"n": 1}, (0.0, 1.0))
        assert [r.id for r in await store.search("notes", [0.1, 1.0])] == ["a"]


async def test_a_sqlite_store_shares_the_connection_and_file_with_context_stores(
    tmp_path: Path,
) -> None:
    from pygents_ctx import Message, SQLiteContextStore

    async with connect(tmp_path / "v.db") as conn:
        vectors = SQLiteVectorStore(conn, sqlite_vec=False)
        history = SQLiteContextStore(conn, session_id="s")
        await vectors.create_collection("notes", 2)
        await history.append(Message("user", "hi"))

        assert [m.text for m in await history.get_history()] == ["hi"]
        assert await vectors.count("notes") == 0
        assert vectors.connection is conn
        assert vectors.uses_sqlite_vec is False
        assert repr(vectors) == f"SQLiteVectorStore({str(tmp_path / 'v.db')!r})"


async def test_sqlite_vec_is_used_when_it_loads_and_asked_for(tmp_path: Path) -> None:
    async with connect(tmp_path / "v.db") as conn:
        auto = SQLiteVectorStore(conn)
        assert auto.uses_sqlite_vec is None  # decided at first use
        await auto.list_collections()
        assert auto.uses_sqlite_vec is SQLITE_VEC
        if SQLITE_VEC:
            required = SQLiteVectorStore(conn, sqlite_vec=True)
            await required.list_collections()
            assert required.uses_sqlite_vec is True
        else:
            with pytest.raises(MissingExtensionError, match="cannot load extensions"):
                await SQLiteVectorStore(conn, sqlite_vec=True).list_collections()


async def test_sqlite_vec_required_without_its_package_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)  # as if not installed
    async with connect(tmp_path / "v.db") as conn:
        with pytest.raises(
            MissingExtensionError, match=r"pip install -e '\.\[vec\]' from a checkout"
        ):
            await SQLiteVectorStore(conn, sqlite_vec=True).list_collections()
        fallback = SQLiteVectorStore(conn)
        await fallback.create_collection("notes", 2)
        assert fallback.uses_sqlite_vec is False


def test_loading_sqlite_vec_reports_a_failed_load() -> None:
    class Refusing(sqlite3.Connection):
        def enable_load_extension(self, enabled: bool, /) -> None:
            raise sqlite3.OperationalError("not authorized")

    db = sqlite3.connect(":memory:", factory=Refusing)
    with pytest.raises(MissingExtensionError, match="sqlite-vec failed to load: not authorized"):
        sqlite_module._load_sqlite_vec(db)
    db.close()


async def test_a_sqlite_file_with_a_newer_vector_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    async with connect(path) as conn:
        await SQLiteVectorStore(conn).list_collections()
    db = sqlite3.connect(path)
    db.execute("UPDATE pygents_vector_schema SET version = 99")
    db.commit()
    db.close()

    async with connect(path) as conn:
        with pytest.raises(StoreSchemaError, match="vector store schema is version 99"):
            await SQLiteVectorStore(conn).count("notes")


async def test_postgres_without_pgvector_is_a_clear_error(
    postgres: postgres_server.PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh database, and an extension name no server has, stand in for a
    # server without pgvector.
    database = f"novector_{uuid.uuid4().hex[:8]}"
    async with connect_postgres(postgres.dsn) as admin:
        await admin.run(lambda db: db.execute(f"CREATE DATABASE {database}"))
    first, *rest = postgres_module.MIGRATIONS[0]
    monkeypatch.setattr(
        postgres_module,
        "MIGRATIONS",
        (("CREATE EXTENSION IF NOT EXISTS pygents_no_such_extension", *rest),),
    )
    async with connect_postgres(postgres.dsn_for(database)) as conn:
        store = PostgresVectorStore(conn)
        with pytest.raises(MissingExtensionError, match="postgresql-<major>-pgvector"):
            await store.list_collections()
        assert first == "CREATE EXTENSION IF NOT EXISTS vector"


async def test_postgres_errors_other_than_a_missing_extension_pass_through(
    postgres: postgres_server.PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    database = f"broken_{uuid.uuid4().hex[:8]}"
    async with connect_postgres(postgres.dsn) as admin:
        await admin.run(lambda db: db.execute(f"CREATE DATABASE {database}"))
    monkeypatch.setattr(postgres_module, "MIGRATIONS", (("SELECT no_such_column",),))
    async with connect_postgres(postgres.dsn_for(database)) as conn:
        with pytest.raises(psycopg.errors.UndefinedColumn):
            await PostgresVectorStore(conn).list_collections()


async def test_postgres_store_shows_where_it_connects(
    postgres: postgres_server.PostgresServer,
) -> None:
    async with connect_postgres(postgres.dsn) as conn:
        store = PostgresVectorStore(conn)
        assert store.connection is conn
        assert repr(store) == f"PostgresVectorStore({conn.target!r})"


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: SQLiteVectorStore("v.db"), "connection from `await connect"),  # type: ignore[arg-type]
        (lambda: PostgresVectorStore("dsn"), "connection from `await connect_postgres"),  # type: ignore[arg-type]
        (lambda: InMemoryVectorStore(embedder=object()), "must have an async embed"),  # type: ignore[arg-type]
        (lambda: InMemoryVectorStore(batch_size=1.0), "batch_size must be an int"),  # type: ignore[arg-type]
    ],
)
def test_bad_store_arguments_are_type_errors(make: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        make()


async def test_bad_store_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        InMemoryVectorStore(batch_size=0)
    async with connect(tmp_path / "v.db") as conn:
        with pytest.raises(TypeError, match="sqlite_vec must be True, False or None"):
            SQLiteVectorStore(conn, sqlite_vec="yes")  # type: ignore[arg-type]


async def test_an_in_memory_store_shows_itself_and_its_embedder() -> None:
    embedder = HashingEmbedder(8)
    store = InMemoryVectorStore(embedder=embedder)
    await store.create_collection("notes", 8)

    assert store.embedder is embedder
    assert repr(store) == "<InMemoryVectorStore 1 collections>"


async def test_embeddings_are_requested_in_batches() -> None:
    calls: list[int] = []

    class Recording:
        async def embed(self, texts: Any) -> list[list[float]]:
            calls.append(len(texts))
            return [[1.0, float(n)] for n in range(len(texts))]

    store = InMemoryVectorStore(embedder=Recording(), batch_size=2)
    await store.create_collection("notes", 2)
    await store.add("notes", [VectorDocument(f"d{n}", "t") for n in range(5)])

    assert calls == [2, 2, 1]


async def test_postgres_scores_queries_of_any_length_and_refuses_rows_it_cannot_measure(
    postgres: postgres_server.PostgresServer,
) -> None:
    # pgvector sums squares in 32-bit floats: a query is scaled to length 1 first;
    # a stored vector too short (or long) for that is refused, and nothing is written.
    async with open_store("postgres", dsn=postgres.dsn) as store:
        await store.create_collection("c", 2)
        await store.add("c", [VectorDocument("a", "x", {}, [1.0, 0.0])])

        [hit] = await store.search("c", [1.2e-38, 0.0])
        assert (hit.id, hit.score) == ("a", pytest.approx(1.0))
        with pytest.raises(ValueError, match="too short or too long for PostgresVectorStore"):
            await store.add(
                "c",
                [
                    VectorDocument("b", "y", {}, [0.0, 1.0]),
                    VectorDocument("tiny", "z", {}, [1e-30, 0.0]),
                ],
            )
        assert await store.count("c") == 1
