"""Concurrent writes are committed together (one transaction a batch), each caller
returning only after its own documents are committed; a bad write fails alone, a
failed batch fails every caller in it and writes nothing of it."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import CollectionNotFoundError, SQLiteVectorStore, VectorDocument, connect
from tests.memory.vectors.conftest import BACKENDS, MakeStore

COUNT = 120


def doc(index: int, dimension: int = 4, text: str = "") -> VectorDocument:
    vector = [float(index + 1), 1.0, float(index % 3), 0.5][:dimension] + [1.0] * (dimension - 4)
    return VectorDocument(f"d{index}", text or f"note {index}", {"n": index}, vector)


async def test_concurrent_upserts_are_all_stored_once_and_visible_when_awaited(
    make_store: MakeStore, backend: str
) -> None:
    store = await make_store()
    # Its own connection, that sees only what is committed (in memory: the store itself).
    other = store if backend == "memory" else await make_store()
    await store.create_collection("c", 4)
    seen_after_await: list[bool] = []

    async def upsert(index: int) -> None:
        await store.upsert("c", [doc(index)])
        seen_after_await.append(await other.get("c", f"d{index}") is not None)

    await asyncio.gather(*(upsert(i) for i in range(COUNT)))
    assert seen_after_await == [True] * COUNT
    assert await store.count("c") == COUNT
    assert await other.count("c") == COUNT
    stored = await other.get("c", "d7")
    assert stored is not None
    assert (stored.text, stored.metadata) == ("note 7", {"n": 7})


async def test_concurrent_adds_keep_what_is_stored_and_report_only_what_they_wrote(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    await store.create_collection("c", 4)
    await store.upsert("c", [doc(0, text="first")])
    results = await asyncio.gather(
        store.add("c", [doc(0, text="second")]),
        store.add("c", [doc(1)]),
        store.add("c", [doc(1, text="again")]),
        store.add_many("c", ["d2", "d0"], [[1, 0, 0, 0], [0, 1, 0, 0]]),
    )
    assert results == [[], ["d1"], [], ["d2"]]
    assert (await store.get("c", "d0")).text == "first"  # type: ignore[union-attr]
    assert (await store.get("c", "d1")).text == "note 1"  # type: ignore[union-attr]


async def test_a_bad_write_fails_alone_and_the_others_are_stored(make_store: MakeStore) -> None:
    store = await make_store()
    await store.create_collection("c", 4)
    outcomes = await asyncio.gather(
        *(store.upsert("c", [doc(i)]) for i in range(10)),
        store.upsert("c", [doc(10, dimension=5)]),  # the wrong dimension
        store.upsert("c", ["not a document"]),  # type: ignore[list-item]
        store.add_many("c", ["z"], [[0.0, 0.0, 0.0, 0.0]]),  # a vector of zeros
        store.upsert("nowhere", [doc(11)]),
        *(store.upsert("c", [doc(i)]) for i in range(12, 20)),
        return_exceptions=True,
    )
    assert outcomes[:10] + outcomes[14:] == [None] * 18
    assert [type(outcome) for outcome in outcomes[10:14]] == [
        ValueError,
        TypeError,
        ValueError,
        CollectionNotFoundError,
    ]
    assert "dimension is 4" in str(outcomes[10])
    assert "'z' is all zeros" in str(outcomes[12])
    assert await store.count("c") == 18


# In-memory stores share nothing: no one else can re-create their collections.
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "memory"])
async def test_a_collection_recreated_elsewhere_fails_only_its_writes(
    make_store: MakeStore,
) -> None:
    store, elsewhere = await make_store(), await make_store()
    await store.create_collection("c", 4)
    await store.create_collection("d", 4)
    await store.upsert("c", [doc(0)])  # the store knows "c" has 4 numbers
    await elsewhere.delete_collection("c")
    await elsewhere.create_collection("c", 2)
    outcomes = await asyncio.gather(
        store.upsert("c", [doc(1)]), store.upsert("d", [doc(2)]), return_exceptions=True
    )
    assert isinstance(outcomes[0], ValueError)
    assert "re-created with dimension 2" in str(outcomes[0])
    assert outcomes[1] is None
    assert [await elsewhere.count("c"), await elsewhere.count("d")] == [0, 1]
    # The store reads the dimension again: documents of the new one are stored.
    await store.upsert("c", [VectorDocument("n", "new", embedding=[1.0, 0.0])])
    assert await elsewhere.count("c") == 1
    await elsewhere.delete_collection("c")
    with pytest.raises(CollectionNotFoundError):
        await store.upsert("c", [VectorDocument("n", "new", embedding=[1.0, 0.0])])


# Nothing can fail an in-memory write of checked documents.
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "memory"])
async def test_a_failed_batch_fails_every_caller_in_it_and_writes_none_of_them(
    make_store: MakeStore, backend: str
) -> None:
    store = await make_store()
    await store.create_collection("c", 4)
    await _refuse_id(store, backend, "d5")
    try:
        outcomes = await asyncio.gather(
            *(store.upsert("c", [doc(i)]) for i in range(COUNT)), return_exceptions=True
        )
    finally:  # the PostgreSQL database is the next tests' too
        on = "" if backend.startswith("sqlite") else " ON pygents_vectors"
        await _run(store, backend, f"DROP TRIGGER refuse{on}")
    failed = [i for i, outcome in enumerate(outcomes) if outcome is not None]
    assert 5 in failed
    for i in failed:
        assert "refused by the test" in str(outcomes[i])
        assert await store.get("c", f"d{i}") is None
    for i in set(range(COUNT)) - set(failed):
        assert await store.get("c", f"d{i}") is not None
    assert await store.count("c") == COUNT - len(failed)
    # The store goes on: the next writes are stored.
    await store.upsert("c", [doc(COUNT)])
    assert await store.count("c") == COUNT - len(failed) + 1


async def _run(store: Any, backend: str, sql: str) -> None:
    if backend.startswith("sqlite"):
        await store.connection.run(lambda db: db.execute(sql))
    else:

        async def run(db: Any) -> None:
            await db.execute(sql)

        await store.connection.run(run)


async def _refuse_id(store: Any, backend: str, refused: str) -> None:
    """Make the database refuse any write of document `refused` (a trigger)."""
    if backend.startswith("sqlite"):
        sql = (
            "CREATE TRIGGER refuse BEFORE INSERT ON pygents_vectors "
            f"WHEN new.id = '{refused}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )
        await store.connection.run(lambda db: db.execute(sql))
        return

    async def create(db: Any) -> None:
        await db.execute(
            "CREATE OR REPLACE FUNCTION refuse() RETURNS trigger AS $$ BEGIN "
            f"IF new.id = '{refused}' THEN RAISE EXCEPTION 'refused by the test'; END IF; "
            "RETURN new; END $$ LANGUAGE plpgsql"
        )
        await db.execute("DROP TRIGGER IF EXISTS refuse ON pygents_vectors")
        await db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON pygents_vectors "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )

    await store.connection.run(create)


async def test_concurrent_upserts_share_transactions_in_sqlite(tmp_path: Path) -> None:
    async with connect(tmp_path / "v.db") as conn:
        store = SQLiteVectorStore(conn)
        await store.create_collection("c", 4)

        def generation(db: sqlite3.Connection) -> int:
            return int(
                db.execute("SELECT generation FROM pygents_vector_collections").fetchone()[0]
            )

        before = await conn.run(generation)
        await asyncio.gather(*(store.upsert("c", [doc(i)]) for i in range(COUNT)))
        transactions = await conn.run(generation) - before  # every write moves it by one
        assert 1 <= transactions < COUNT // 10
        assert await store.count("c") == COUNT


# A write: (document number, which of three values it stores).
writes = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2)), min_size=1, max_size=30)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(made=writes)
def test_concurrent_writes_end_as_if_made_one_after_another(made: list[tuple[int, int]]) -> None:
    """Concurrent upserts of the same ids leave each id as its last write in call order."""

    async def run() -> dict[str, str]:
        with tempfile.TemporaryDirectory() as tmp:
            async with connect(Path(tmp) / "v.db") as conn:
                store = SQLiteVectorStore(conn)
                await store.create_collection("c", 4)
                await asyncio.gather(
                    *(
                        store.upsert(
                            "c", [VectorDocument(f"d{n}", f"v{v}", embedding=[1, v, 0, 1])]
                        )
                        for n, v in made
                    )
                )
                found = {}
                for n, _ in made:
                    stored = await store.get("c", f"d{n}")
                    assert stored is not None
                    found[stored.id] = stored.text
                return found

    expected = {f"d{n}": f"v{v}" for n, v in made}  # the last write of each id wins
    assert asyncio.run(run()) == expected
