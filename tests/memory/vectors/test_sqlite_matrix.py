"""`SQLiteVectorStore`'s in-memory matrix: the same answers as SQL, in step with every writer."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pygents_ctx import SQLiteVectorStore, VectorDocument, connect
from pygents_ctx.memory import _table
from pygents_ctx.memory.vectors import _sqlite_matrix
from pygents_ctx.memory.vectors.sqlite import MIGRATIONS

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The collections whose matrix was read from the table, in order."""
    seen: list[str] = []
    original = _sqlite_matrix._read

    def counting(db: sqlite3.Connection, name: str, dimension: int) -> Any:
        seen.append(name)
        return original(db, name, dimension)

    monkeypatch.setattr(_sqlite_matrix, "_read", counting)
    return seen


@pytest.fixture
async def two(tmp_path: Path) -> AsyncIterator[tuple[SQLiteVectorStore, SQLiteVectorStore]]:
    """Two stores on two connections to one file, as two processes would have."""
    async with connect(tmp_path / "v.db") as first, connect(tmp_path / "v.db") as second:
        yield SQLiteVectorStore(first), SQLiteVectorStore(second)


def hits(results: list[Any]) -> list[tuple[str, str, dict[str, Any], float]]:
    return [(r.id, r.text, r.metadata, r.score) for r in results]


async def test_it_answers_as_the_sql_search_does(tmp_path: Path) -> None:
    async with connect(tmp_path / "v.db") as conn:
        fast, plain = SQLiteVectorStore(conn), SQLiteVectorStore(conn, matrix=False)
        assert fast.uses_matrix
        assert not plain.uses_matrix
        await fast.create_collection("c", 6)
        rng = np.random.default_rng(5)
        ids = [f"d{i:03}" for i in range(300)]
        matrix = rng.integers(-2, 3, size=(300, 6))  # small integers: many equal scores
        matrix[matrix.sum(axis=1) == 0, 0] = 1
        matrix[~matrix.any(axis=1), 0] = 1
        metadata = [{"n": i % 5, "even": i % 2 == 0} for i in range(300)]
        await fast.add_many(
            "c", ids, matrix, texts=[f"t{i}" for i in range(300)], metadata=metadata
        )
        await fast.delete("c", ids[::7])
        for query in rng.integers(-2, 3, size=(20, 6)).tolist():
            if not any(query):
                continue
            for condition in (None, {"n": 3}, {"even": True, "n": 2}, {"n": "3"}):
                found = await fast.search("c", query, k=9, filter=condition)
                assert hits(found) == hits(await plain.search("c", query, k=9, filter=condition))


async def test_it_reads_the_table_once_and_follows_its_own_writes(
    tmp_path: Path, reads: list[str]
) -> None:
    async with connect(tmp_path / "v.db") as conn:
        store = SQLiteVectorStore(conn)
        await store.create_collection("c", 2)
        await store.add_many("c", ["a", "b"], [[1, 0], [0, 1]])
        assert [r.id for r in await store.search("c", [1, 0.1], k=1)] == ["a"]
        assert reads == ["c"]

        await store.add("c", [VectorDocument("e", "", {}, [1, 0.2])])
        await store.upsert("c", [VectorDocument("a", "moved", {}, [-1, 0])])
        await store.add_many("c", ["f", "a"], [[0.5, 0.5], [1, 1]])  # "a" stays as it is
        await store.delete("c", ["b", "nope"])
        found = await store.search("c", [1, 0.1], k=5)
        assert [(r.id, r.text) for r in found] == [("e", ""), ("f", ""), ("a", "moved")]
        assert reads == ["c"]  # every change above was applied in memory


@pytest.mark.parametrize(
    "change",
    [
        "add_many",
        "upsert",
        "delete",
        "recreate",
    ],
)
async def test_a_write_through_another_connection_is_seen_by_the_next_search(
    two: tuple[SQLiteVectorStore, SQLiteVectorStore], change: str, reads: list[str]
) -> None:
    reader, writer = two
    await reader.create_collection("c", 2)
    await reader.add_many("c", ["a", "b"], [[1, 0], [0, 1]])
    assert [r.id for r in await reader.search("c", [1, 0], k=1)] == ["a"]

    if change == "add_many":
        await writer.add_many("c", ["z"], [[1, 0.01]], texts=["new"])
        expected = ["a", "z", "b"]
    elif change == "upsert":
        await writer.upsert("c", [VectorDocument("a", "", {}, [-1, 0])])
        expected = ["b", "a"]
    elif change == "delete":
        await writer.delete("c", ["a"])
        expected = ["b"]
    else:  # the same name, other documents
        await writer.delete_collection("c")
        await writer.create_collection("c", 2)
        await writer.add_many("c", ["q"], [[0, 1]])
        expected = ["q"]
    assert [r.id for r in await reader.search("c", [1, 0], k=5)] == expected
    assert reads == ["c", "c"]


async def test_stores_sharing_a_connection_see_each_others_writes(tmp_path: Path) -> None:
    async with connect(tmp_path / "v.db") as conn:
        first, second = SQLiteVectorStore(conn), SQLiteVectorStore(conn)
        await first.create_collection("c", 2)
        await first.add_many("c", ["a"], [[1, 0]])
        assert [r.id for r in await second.search("c", [1, 0])] == ["a"]
        await first.add_many("c", ["b"], [[1, 0.001]])
        assert [r.id for r in await second.search("c", [1, 0])] == ["a", "b"]


async def test_a_search_is_not_confused_by_a_write_between_two_of_its_reads(
    two: tuple[SQLiteVectorStore, SQLiteVectorStore],
) -> None:
    """Searches and writes from two connections interleave freely; each search sees a state."""
    reader, writer = two
    await reader.create_collection("c", 2)
    await reader.add_many("c", ["base"], [[0, 1]])

    async def write() -> None:
        for i in range(40):
            await writer.add_many("c", [f"w{i:02}"], [[1, i / 100]])

    async def search() -> list[int]:
        counts = []
        for _ in range(40):
            counts.append(len(await reader.search("c", [1, 0], k=100)))
        return counts

    _, counts = await asyncio.gather(write(), search())
    assert counts == sorted(counts)  # never goes back
    assert len(await reader.search("c", [1, 0], k=100)) == 41


async def test_a_write_from_another_process_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    async with connect(path) as conn:
        store = SQLiteVectorStore(conn)
        await store.create_collection("c", 2)
        await store.add_many("c", ["a"], [[0, 1]])
        assert [r.id for r in await store.search("c", [1, 0])] == ["a"]
        script = textwrap.dedent(
            f"""
            import asyncio
            from pygents_ctx import SQLiteVectorStore, connect

            async def main():
                async with connect({str(path)!r}) as conn:
                    store = SQLiteVectorStore(conn)
                    await store.add_many("c", ["b"], [[1, 0]], texts=["from elsewhere"])
                    await store.delete("c", ["a"])

            asyncio.run(main())
            """
        )
        child = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=ROOT)
        assert await asyncio.wait_for(child.wait(), 60) == 0
        [hit] = await store.search("c", [1, 0])
        assert (hit.id, hit.text) == ("b", "from elsewhere")


async def test_without_numpy_or_with_matrix_false_it_searches_in_sql(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]
) -> None:
    async with connect(tmp_path / "v.db") as conn:
        store = SQLiteVectorStore(conn)
        await store.create_collection("c", 2)
        await store.add_many("c", ["a", "b"], [[1, 0], [0, 1]])
        monkeypatch.setattr(_table, "_numpy", None)
        assert not store.uses_matrix
        assert [r.id for r in await store.search("c", [1, 0.1])] == ["a", "b"]
        assert reads == []
    with pytest.raises(TypeError, match="matrix must be True or False"):
        SQLiteVectorStore(conn, matrix=1)  # type: ignore[arg-type]


async def test_a_file_of_the_first_vector_schema_is_brought_up_to_date(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    db = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        db.execute(statement)
    db.execute("CREATE TABLE pygents_vector_schema (id INTEGER PRIMARY KEY, version INTEGER)")
    db.execute("INSERT INTO pygents_vector_schema VALUES (1, 1)")
    db.execute("INSERT INTO pygents_vector_collections VALUES ('c', 2)")
    blob = np.array([0, 1], dtype="<f4").tobytes()
    db.execute("INSERT INTO pygents_vectors VALUES ('c', 'a', 'old', '{}', ?, 1.0)", (blob,))
    db.commit()
    db.close()
    async with connect(path) as conn:
        store = SQLiteVectorStore(conn)
        [hit] = await store.search("c", [0, 1])
        assert (hit.id, hit.text, hit.score) == ("a", "old", 1.0)
        await store.add_many("c", ["b"], [[0, 2]])
        assert [r.id for r in await store.search("c", [0, 1])] == ["a", "b"]
