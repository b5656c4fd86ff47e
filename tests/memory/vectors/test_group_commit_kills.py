"""A process upserting vectors concurrently, killed with SIGKILL at random moments: every
upsert that returned is stored, whole, and nothing is stored half (SQLite).

The child upserts bursts of documents concurrently (`asyncio.gather`, so they
are committed in batches) and prints each document's id once its own upsert
returned. The parent kills it at a random moment, then reads the file back.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pygents_ctx import SQLiteVectorStore, connect

pytestmark = pytest.mark.timeout(300)

TRIALS = 8
CHILD = """
import asyncio, sys
from pygents_ctx import SQLiteVectorStore, VectorDocument, connect

def vector(n):
    return [1.0 + n % 7, float(n % 5), 0.5, float(n % 3)]

async def main(path, trial):
    async with connect(path) as conn:
        store = SQLiteVectorStore(conn)
        await store.create_collection("c", 4)
        print("ready", flush=True)
        for burst in range(10_000):
            async def upsert(i):
                name = f"{trial}-{burst}-{i}"
                n = burst * 100 + i
                await store.upsert("c", [VectorDocument(name, name, {"n": n}, vector(n))])
                print(name, flush=True)
            await asyncio.gather(*(upsert(i) for i in range(40)))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def _vector(n: int) -> tuple[float, ...]:
    return (1.0 + n % 7, float(n % 5), 0.5, float(n % 3))


def kill_one(path: Path, trial: int, rng: random.Random) -> set[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(trial)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdout is not None
    acknowledged: list[str] = []
    assert child.stdout.readline().strip() == "ready"
    for _ in range(rng.randrange(0, 400)):
        acknowledged.append(child.stdout.readline().strip())
    os.kill(child.pid, signal.SIGKILL)
    out, _ = child.communicate(timeout=10)
    assert child.returncode == -signal.SIGKILL
    return {line for line in [*acknowledged, *out.split()] if line}


def test_concurrent_upserts_killed_at_random_lose_nothing_acknowledged(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    path = tmp_path / "vectors.db"
    acknowledged: set[str] = set()
    for trial in range(TRIALS):
        acknowledged |= kill_one(path, trial, rng)
    assert len(acknowledged) > 200, "the children barely wrote"

    async def stored() -> dict[str, tuple[str, dict[str, int], tuple[float, ...]]]:
        async with connect(path) as conn:
            store = SQLiteVectorStore(conn)
            found = {}
            for name in {*acknowledged}:
                document = await store.get("c", name)
                assert document is not None, f"{name} was acknowledged but is lost (seed {seed})"
                assert document.embedding is not None
                found[name] = (document.text, document.metadata, document.embedding)
            return found

    for name, (text, metadata, embedding) in asyncio.run(stored()).items():
        assert text == name
        assert embedding == _vector(metadata["n"])
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT id, text, metadata FROM pygents_vectors").fetchall()
        assert all(item_id == text for item_id, text, _ in rows)  # no half-written row
        indexed = db.execute("SELECT count(*) FROM pygents_vector_metadata").fetchone()[0]
        assert indexed == len(rows)  # each document's one metadata value, in its transaction
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        db.close()
