"""Agents' checkpoints: what one costs to save, and a rewind that restores one.

`python -m bench --checkpoints` runs it on memory, SQLite and a throwaway
PostgreSQL server (`tests/postgres_server.py`) and writes
bench/out/checkpoints.json (`--quick`: fewer repetitions; `--markdown`: the
latest run's table).

An agent whose queue holds 10 messages (the default `ContextQueue`) or 1,000
messages of 200 characters, and whose pool holds 20 items, in a session of as
many messages. Per size and store, medians of 30:

- the bytes of one checkpoint's state;
- `agent.checkpoint()` after a new message (a state not stored yet), and the
  same state again (its bytes are stored once: one small row more);
- `agent.rewind(to)` to a checkpoint one message back: the checkpoint read,
  checked and built, the store rewound, the queue and pool refilled.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.postgres_scale import Measured, run_and_save
from pygents_ctx import (
    Agent,
    AgentScope,
    ContextConfig,
    ContextItem,
    ContextPool,
    ContextQueue,
    Message,
    connect_postgres,
)
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    PostgresContextStore,
    SQLiteContextStore,
    connect,
)

OUT = Path(__file__).parent / "out" / "checkpoints.json"
SIZES = (10, 1_000)


def _message(index: int) -> Message:
    role = "user" if index % 2 == 0 else "assistant"
    return Message(role, (f"message {index} " + "lorem ipsum " * 17)[:200])


async def _agent(store: ContextStore, turns: int) -> Agent:
    agent = Agent(
        "bench",
        "keeps a long queue",
        [],
        context_queue=ContextQueue(limit=turns),
        context_pool=ContextPool(limit=20),
        context=ContextConfig(store),
    )
    await store.append_many(_message(i) for i in range(turns))
    await agent.context_queue.append(*(ContextItem(_message(i)) for i in range(turns)))
    for i in range(20):
        await agent.context_pool.add(ContextItem(f"fact {i} " * 20, f"fact {i}", id=f"f{i}"))
    return agent


async def _timed(step: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await step()
    return time.perf_counter() - start


async def _measure(backend: str, make: Callable[[], ContextStore], repeat: int) -> list[Measured]:
    rows = []
    for turns in SIZES:
        store = make()
        with AgentScope():
            agent = await _agent(store, turns)
            changed, same = [], []
            for i in range(repeat):
                await store.append(_message(turns + i))
                await agent.context_queue.append(ContextItem(_message(turns + i)))
                changed.append(await _timed(agent.checkpoint))
                same.append(await _timed(agent.checkpoint))
            size = len(await store.get_checkpoint("bench", await store.count()) or b"")
            count = await store.count()
            rewinds = []
            for i in range(min(repeat, 10)):
                rewinds.append(await _timed(partial(agent.rewind, count - 1 - i)))
        where = f"{backend}, a queue of {turns:,}"
        rows += [
            Measured(f"checkpoint state ({where})", f"{size / 1024:.1f} KB", "", None, "", None),
            Measured(
                f"agent.checkpoint() ({where})",
                f"{statistics.median(changed) * 1e3:.2f} ms",
                f"same state again {statistics.median(same) * 1e3:.2f} ms",
                None,
                "",
                None,
            ),
            Measured(
                f"agent.rewind(to) with a restore ({where})",
                f"{statistics.median(rewinds) * 1e3:.2f} ms",
                "",
                None,
                "",
                None,
            ),
        ]
    return rows


async def sqlite(repeat: int) -> list[Measured]:
    with tempfile.TemporaryDirectory() as tmp:
        async with connect(Path(tmp) / "checkpoints.db") as conn:
            return await _measure("SQLite", lambda: SQLiteContextStore(conn), repeat)


async def postgres(repeat: int) -> list[Measured]:
    from tests import postgres_server

    server = postgres_server.start()
    try:
        async with connect_postgres(server.dsn) as conn:
            return await _measure("PostgreSQL", lambda: PostgresContextStore(conn), repeat)
    finally:
        server.stop()


async def collect(quick: bool) -> list[Measured]:
    repeat = 5 if quick else 30
    memory = await _measure("memory", MemoryContextStore, repeat)
    return [*memory, *await sqlite(repeat), *await postgres(repeat)]


def run(about: dict[str, str]) -> None:
    run_and_save(about, collect, OUT)
