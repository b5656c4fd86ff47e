"""History and vectors side by side with what a user would pick instead, on the same data.

`python -m bench --peers` runs this module inside `bench/.peers` (Python
3.12 with the peers installed, made on first use: see `bench/peers_env.py`),
in one process, and prints each row with the ratio (ours / theirs: below 1
is faster). `--quick` runs smaller sizes; `--markdown` prints the latest run.

History rows (messages of 4 KB, alternating user and assistant):

- append one message to a session that holds 20,000: `SQLiteContextStore`
  against the OpenAI Agents SDK's `SQLiteSession`, axio-context-sqlite and
  langgraph-checkpoint-sqlite;
- cold load of a 2,000-message history (a new store object, so nothing is
  cached): SQLite against `SQLiteSession` and langgraph-checkpoint-sqlite,
  and PostgreSQL against the Agents SDK's `SQLAlchemySession` on asyncpg,
  on a throwaway server (`tests/postgres_server.py`);
- the same two through `ContextStoreSession`, the OpenAI Agents SDK `Session`
  over `SQLiteContextStore` (`add_items` of one item, a cold `get_items`),
  against `SQLiteSession`;
- a pydantic-ai conversation through `ContextStoreHistory` against
  pydantic-ai's documented way of storing one (`pydantic_ai_rows`);
- the storage step of compaction, 1,000 messages to a summary and the last
  100: `replace_prefix(900, [summary], expected=...)` (atomic, the 900 kept
  in the archive) against `SQLiteSession.clear_session()` + `add_items`
  (two transactions, nothing kept).

langgraph-checkpoint-sqlite holds a conversation the way a langgraph app
does: an `AsyncSqliteSaver` checkpoint per turn whose channel values hold
the whole message list (langchain-core `HumanMessage`/`AIMessage`, the
default reducer channel; the opt-in `DeltaChannel` is not measured), put
with `aput` and read with `aget_tuple` (the latest checkpoint). Each append
therefore rewrites every stored message, so 20,000 turns would take hours
to store; the thread is instead given the state those turns reach in one
checkpoint (a real thread also keeps the earlier checkpoints, which only
makes its file bigger), and the row times 3 runs of `LANGGRAPH_OPS` turns
(ours: 3 runs of 50 appends), still at 20,000 stored: about 0.6 s and 80 MB
written per turn, some 5 s for the row. The cold load reads a thread made
the same way: one checkpoint holding the 2,000 messages.

Our LangGraph checkpointer, `ContextStoreSaver` (pygents_ctx.integrations.langgraph),
against langgraph-checkpoint-sqlite on the same thread and the same calls
(`aput` of a checkpoint per turn, `aget_tuple` by a new saver): a turn at
20,000 stored (ours: 3 runs of 50 turns, each storing its one new message),
the bytes the database grows by per turn over those turns (its pages, the
WAL included), and the cold load of a 2,000-message checkpoint.

Our LangGraph long-term memory store, `ContextStoreMemory`, against
LangGraph's own on the same items (`langgraph_stores`): `STORE_ITEMS` items
in 100 namespaces `("users", "u<n>", "memories")`, each `{"text", "n"}`,
embedded by one function of `STORE_DIMS` seeded random numbers per text
(both stores call it alike). In memory, both with an index: a put, a get, a
search by meaning in one user's namespace and in all, a filtered search.
On SQLite against langgraph-checkpoint-sqlite's `AsyncSqliteStore` without
an index (its index needs sqlite-vec to load into this Python's sqlite3): a
put, a get, a filtered search; and our SQLite store's search by meaning
against `InMemoryStore`'s, or against `AsyncSqliteStore`'s where sqlite-vec
loads.

Vector rows: `bench/scale.py`'s, against numpy and sqlite-vec's `vec0`
where this Python's sqlite3 loads extensions.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.scale import Versus, in_memory_rows, sqlite_rows
from pygents_ctx import Message
from pygents_ctx.context.stores import (
    PostgresContextStore,
    SQLiteContextStore,
    connect,
    connect_postgres,
)
from pygents_ctx.integrations.openai_agents import ContextStoreSession
from pygents_ctx.integrations.pydantic_ai import ContextStoreHistory

__all__ = ["collect"]

MESSAGE_BYTES = 4_096
REPEATS = 7
LANGGRAPH_OPS = 2  # appends per timed run: each rewrites the whole history (docstring)
LANGGRAPH = "langgraph-checkpoint-sqlite (a checkpoint per turn)"
STORE_DIMS = 256
STORE_OPS = 20  # calls per timed run of the store rows


def _text(index: int) -> str:
    return (f"message {index} " + "lorem ipsum dolor " * (MESSAGE_BYTES // 18))[:MESSAGE_BYTES]


def _ours(index: int) -> Message:
    return Message("user" if index % 2 == 0 else "assistant", _text(index))


def _item(index: int) -> dict[str, Any]:
    return {"role": "user" if index % 2 == 0 else "assistant", "content": _text(index)}


async def _median_pair(
    ours: Callable[[], Awaitable[Any]],
    theirs: Callable[[], Awaitable[Any]],
    prepare_ours: Callable[[], Awaitable[Any]] | None = None,
    prepare_theirs: Callable[[], Awaitable[Any]] | None = None,
    repeats: int = REPEATS,
) -> tuple[float, float]:
    """Medians in seconds of one call each, timed turn about after untimed preparations."""
    mine, other = [], []
    for _ in range(repeats):
        if prepare_theirs is not None:
            await prepare_theirs()
        start = time.perf_counter()
        await theirs()
        other.append(time.perf_counter() - start)
        if prepare_ours is not None:
            await prepare_ours()
        start = time.perf_counter()
        await ours()
        mine.append(time.perf_counter() - start)
    return statistics.median(mine), statistics.median(other)


def _row(name: str, ours: float, theirs: float, peer: str, goal: str = "<= 1x") -> Versus:
    return Versus(name, ours, theirs, peer, "s", goal, ours <= theirs if goal == "<= 1x" else None)


async def appends(stored: int, tmp: Path) -> list[Versus]:
    """One append to a session already holding `stored` messages."""
    from agents import SQLiteSession  # type: ignore[import-not-found]

    rows = []
    ops = 50
    async with connect(tmp / "ours-append.db") as conn:
        store = SQLiteContextStore(conn, session_id="s")
        for start in range(0, stored, 1_000):
            await store.append_many([_ours(i) for i in range(start, start + 1_000)])
        session = SQLiteSession("s", str(tmp / "sdk-append.db"))
        for start in range(0, stored, 1_000):
            await session.add_items([_item(i) for i in range(start, start + 1_000)])
        counter = iter(range(stored, 10**9))

        async def ours() -> None:
            for _ in range(ops):
                await store.append(_ours(next(counter)))

        async def theirs() -> None:
            for _ in range(ops):
                await session.add_items([_item(next(counter))])

        mine, other = await _median_pair(ours, theirs)
        rows.append(
            _row(f"append, {stored:,} stored (SQLite)", mine / ops, other / ops, "SQLiteSession")
        )
        adapter = ContextStoreSession(store)

        async def ours_as_session() -> None:
            for _ in range(ops):
                await adapter.add_items([_item(next(counter))])

        mine, other = await _median_pair(ours_as_session, theirs)
        name = f"Session.add_items, {stored:,} stored (SQLite)"
        rows.append(
            _row(name, mine / ops, other / ops, "SQLiteSession (ours: ContextStoreSession)")
        )
        session.close()
        axio = await _axio_appends(stored, tmp, ops, ours)
        if axio is not None:
            rows.append(axio)
        langgraph = await _langgraph_appends(stored, tmp, ops, ours)
        if langgraph is not None:
            rows.append(langgraph)
    return rows


async def _axio_appends(
    stored: int, tmp: Path, ops: int, ours: Callable[[], Awaitable[None]]
) -> Versus | None:
    try:
        from axio.blocks import TextBlock  # type: ignore[import-not-found]
        from axio.messages import Message as AxioMessage  # type: ignore[import-not-found]
        from axio_context_sqlite import SQLiteContextStore as AxioStore  # type: ignore
        from axio_context_sqlite import connect as axio_connect
    except ImportError:
        return None

    def message(index: int) -> Any:
        item = _item(index)
        return AxioMessage(role=item["role"], content=[TextBlock(text=item["content"])])

    db = await axio_connect(tmp / "axio.db")
    try:
        store = AxioStore(db, session_id="s")
        for index in range(stored):
            await store.append(message(index))
        counter = iter(range(stored, 10**9))

        async def theirs() -> None:
            for _ in range(ops):
                await store.append(message(next(counter)))

        mine, other = await _median_pair(ours, theirs, repeats=3)
    finally:
        await db.close()
    return _row(
        f"append, {stored:,} stored (SQLite)", mine / ops, other / ops, "axio-context-sqlite"
    )


class _LangGraphThread:
    """One langgraph thread in an `AsyncSqliteSaver`: each turn puts a checkpoint
    whose `messages` channel holds the whole conversation, as a langgraph app's does."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        self.saver = saver
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ""}
        }
        self.messages: list[Any] = []
        self.checkpoint: Any = None
        self.version: Any = None
        self.step = -1

    @staticmethod
    def message(index: int) -> Any:
        from langchain_core.messages import (  # type: ignore[import-not-found]
            AIMessage,
            HumanMessage,
        )

        kind = HumanMessage if index % 2 == 0 else AIMessage
        return kind(content=_text(index), id=f"message-{index}")

    async def turn(self, messages: list[Any]) -> None:
        """Put the next checkpoint, the conversation grown by `messages`."""
        from langgraph.checkpoint.base import (  # type: ignore[import-not-found]
            create_checkpoint,
            empty_checkpoint,
        )

        self.step += 1
        self.messages = [*self.messages, *messages]
        self.version = self.saver.get_next_version(self.version, None)
        previous = self.checkpoint if self.checkpoint is not None else empty_checkpoint()
        checkpoint = create_checkpoint(previous, None, self.step)
        checkpoint["channel_values"] = {"messages": self.messages}
        checkpoint["channel_versions"] = {"messages": self.version}
        self.config = await self.saver.aput(
            self.config,
            checkpoint,
            {"source": "loop", "step": self.step},
            {"messages": self.version},
        )
        self.checkpoint = checkpoint


@contextlib.asynccontextmanager
async def _langgraph_saver(path: Path) -> AsyncIterator[Any]:
    """An `AsyncSqliteSaver` on `path`, set up (as an app does once), or None without one."""
    try:
        import aiosqlite  # type: ignore[import-not-found]
        from langgraph.checkpoint.sqlite.aio import (  # type: ignore[import-not-found]
            AsyncSqliteSaver,
        )
    except ImportError:
        yield None
        return
    conn = await aiosqlite.connect(path)
    try:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        yield saver
    finally:
        await conn.close()


async def _langgraph_appends(
    stored: int, tmp: Path, ops: int, ours: Callable[[], Awaitable[None]]
) -> Versus | None:
    """One turn's checkpoint on a thread already holding `stored` messages (docstring)."""
    async with _langgraph_saver(tmp / "langgraph-append.db") as saver:
        if saver is None:
            return None
        thread = _LangGraphThread(saver, "s")
        await thread.turn([thread.message(i) for i in range(stored)])
        counter = iter(range(stored, 10**9))

        async def theirs() -> None:
            for _ in range(LANGGRAPH_OPS):
                await thread.turn([thread.message(next(counter))])

        mine, other = await _median_pair(ours, theirs, repeats=3)
        assert len(thread.messages) == stored + 3 * LANGGRAPH_OPS
    return _row(f"append, {stored:,} stored (SQLite)", mine / ops, other / LANGGRAPH_OPS, LANGGRAPH)


async def cold_loads_sqlite(count: int, tmp: Path) -> list[Versus]:
    """A new store reads a `count`-message history (nothing cached)."""
    from agents import SQLiteSession

    path = tmp / "ours-history.db"
    async with connect(path) as conn:
        await SQLiteContextStore(conn, session_id="s").append_many([_ours(i) for i in range(count)])
        writer = SQLiteSession("s", str(tmp / "sdk-history.db"))
        await writer.add_items([_item(i) for i in range(count)])
        writer.close()
        fresh: dict[str, Any] = {}

        async def new_ours() -> None:
            fresh["ours"] = SQLiteContextStore(conn, session_id="s")

        async def new_theirs() -> None:
            fresh["theirs"] = SQLiteSession("s", str(tmp / "sdk-history.db"))

        async def ours() -> None:
            assert len(await fresh["ours"].get_history()) == count

        async def theirs() -> None:
            assert len(await fresh["theirs"].get_items()) == count
            fresh["theirs"].close()

        mine, other = await _median_pair(ours, theirs, new_ours, new_theirs)
        name = f"history cold load, {count:,} x 4 KB (SQLite)"
        rows = [_row(name, mine, other, "SQLiteSession")]

        async def ours_as_session() -> None:
            assert len(await ContextStoreSession(fresh["ours"]).get_items()) == count

        mine, other = await _median_pair(ours_as_session, theirs, new_ours, new_theirs)
        name = f"Session.get_items cold, {count:,} x 4 KB (SQLite)"
        rows.append(_row(name, mine, other, "SQLiteSession (ours: ContextStoreSession)"))
        langgraph = await _langgraph_cold_load(count, tmp, new_ours, ours)
        if langgraph is not None:
            rows.append(_row(name, *langgraph, LANGGRAPH))
    return rows


async def _langgraph_cold_load(
    count: int,
    tmp: Path,
    new_ours: Callable[[], Awaitable[None]],
    ours: Callable[[], Awaitable[None]],
) -> tuple[float, float] | None:
    """`aget_tuple` of the latest checkpoint, holding `count` messages, by a new saver."""
    path = tmp / "langgraph-history.db"
    async with _langgraph_saver(path) as writer:
        if writer is None:
            return None
        thread = _LangGraphThread(writer, "s")
        await thread.turn([thread.message(i) for i in range(count)])
    async with _langgraph_saver(path) as saver:
        assert saver is not None
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        fresh: dict[str, Any] = {}

        async def new_theirs() -> None:
            fresh["theirs"] = AsyncSqliteSaver(saver.conn)
            await fresh["theirs"].setup()

        async def theirs() -> None:
            latest = await fresh["theirs"].aget_tuple({"configurable": {"thread_id": "s"}})
            assert len(latest.checkpoint["channel_values"]["messages"]) == count

        return await _median_pair(ours, theirs, new_ours, new_theirs)


async def _page_bytes(saver: Any) -> int:
    """The logical size of the database a saver writes to: its pages, WAL included."""
    if isinstance(saver, _ours_saver_class()):

        def size(db: Any) -> int:
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            return int(pages * db.execute("PRAGMA page_size").fetchone()[0])

        return int(await saver.conn.run(size))
    pages = await (await saver.conn.execute("PRAGMA page_count")).fetchone()
    page_size = await (await saver.conn.execute("PRAGMA page_size")).fetchone()
    return int(pages[0] * page_size[0])


def _ours_saver_class() -> Any:
    from pygents_ctx.integrations.langgraph import ContextStoreSaver

    return ContextStoreSaver


async def langgraph_savers(stored: int, history: int, tmp: Path) -> list[Versus]:
    """Our LangGraph checkpointer against langgraph-checkpoint-sqlite, on the same thread.

    Each saver is given a thread whose latest checkpoint holds `stored`
    messages (one checkpoint, as in the rows above), then timed putting
    turns of one message, the checkpoint a graph puts per step; the bytes
    its database grows by per turn are measured over those turns. The cold
    load is `aget_tuple` of a `history`-message checkpoint by a new saver.
    """
    async with _langgraph_saver(tmp / "langgraph-saver.db") as theirs_saver:
        if theirs_saver is None:
            return []
        saver_class = _ours_saver_class()
        async with connect(tmp / "ours-saver.db") as conn:
            mine_thread = _LangGraphThread(saver_class(conn), "s")
            theirs_thread = _LangGraphThread(theirs_saver, "s")
            for thread in (mine_thread, theirs_thread):
                await thread.turn([thread.message(i) for i in range(stored)])
            counter = iter(range(stored, 10**9))
            ops = 50
            grown = {}
            before = {
                "ours": await _page_bytes(mine_thread.saver),
                "theirs": await _page_bytes(theirs_saver),
            }

            async def ours() -> None:
                for _ in range(ops):
                    await mine_thread.turn([mine_thread.message(next(counter))])

            async def theirs() -> None:
                for _ in range(LANGGRAPH_OPS):
                    await theirs_thread.turn([theirs_thread.message(next(counter))])

            mine, other = await _median_pair(ours, theirs, repeats=3)
            grown["ours"] = (await _page_bytes(mine_thread.saver) - before["ours"]) / (3 * ops)
            grown["theirs"] = (await _page_bytes(theirs_saver) - before["theirs"]) / (
                3 * LANGGRAPH_OPS
            )
            latest = await saver_class(conn).aget_tuple(mine_thread.config)
            assert latest.checkpoint["channel_values"]["messages"] == mine_thread.messages
    name = f"{stored:,} stored, a checkpoint per turn (SQLite)"
    rows = [
        _row(f"LangGraph turn, {name}", mine / ops, other / LANGGRAPH_OPS, LANGGRAPH),
        Versus(
            f"LangGraph bytes per turn, {name}",
            grown["ours"],
            grown["theirs"],
            LANGGRAPH,
            "B",
            "<= 1x",
            grown["ours"] <= grown["theirs"],
        ),
    ]
    rows.append(await _langgraph_saver_cold_load(history, tmp))
    return rows


async def _langgraph_saver_cold_load(count: int, tmp: Path) -> Versus:
    saver_class = _ours_saver_class()
    async with connect(tmp / "ours-saver-history.db") as conn:
        thread = _LangGraphThread(saver_class(conn), "s")
        await thread.turn([thread.message(i) for i in range(count)])
        fresh: dict[str, Any] = {}

        async def new_ours() -> None:
            fresh["ours"] = saver_class(conn)  # remembers nothing: reads every message

        async def ours() -> None:
            latest = await fresh["ours"].aget_tuple({"configurable": {"thread_id": "s"}})
            assert len(latest.checkpoint["channel_values"]["messages"]) == count

        timed = await _langgraph_cold_load(count, tmp, new_ours, ours)
        assert timed is not None
    return _row(f"LangGraph cold load, {count:,} x 4 KB (SQLite)", *timed, LANGGRAPH)


async def _store_embed(texts: list[str]) -> list[list[float]]:
    """The same vector for the same text, for every store: seeded by the text's CRC."""
    import zlib

    import numpy as np

    return [
        np.random.default_rng(zlib.crc32(text.encode())).standard_normal(STORE_DIMS).tolist()
        for text in texts
    ]


def _store_item(index: int) -> tuple[tuple[str, ...], str, dict[str, Any]]:
    value = {"text": f"memory {index}: topic {index % 37}, detail {index % 11}", "n": index}
    return ("users", f"u{index % 100}", "memories"), f"m{index}", value


async def _store_rows(
    where: str, ours: Any, theirs: Any, peer: str, count: int, *, semantic: bool, kv: bool = True
) -> list[Versus]:
    """Each store filled with `count` items, then timed: put, get, searches (see the docstring)."""
    from langgraph.store.base import PutOp  # type: ignore[import-not-found]

    for store in (ours, theirs):
        for start in range(0, count, 500):
            ops = [PutOp(*_store_item(i)) for i in range(start, min(start + 500, count))]
            await store.abatch(ops)
    counter = iter(range(count, 10**9))
    rows: list[Versus] = []

    async def timed(name: str, call: Callable[[Any], Awaitable[Any]]) -> None:
        async def run_ours() -> None:
            for _ in range(STORE_OPS):
                await call(ours)

        async def run_theirs() -> None:
            for _ in range(STORE_OPS):
                await call(theirs)

        mine, other = await _median_pair(run_ours, run_theirs, repeats=5)
        label = f"LangGraph store {name}, {count:,} items ({where})"
        rows.append(_row(label, mine / STORE_OPS, other / STORE_OPS, peer))

    async def put(store: Any) -> None:
        await store.aput(*_store_item(next(counter)))

    async def get(store: Any) -> None:
        namespace, key, _ = _store_item(next(counter) % count)
        assert await store.aget(namespace, key) is not None

    async def in_one(store: Any) -> None:
        namespace, _, value = _store_item(next(counter) % count)
        assert len(await store.asearch(namespace, query=value["text"], limit=10)) == 10

    async def in_all(store: Any) -> None:
        _, _, value = _store_item(next(counter) % count)
        assert len(await store.asearch(("users",), query=value["text"], limit=10)) == 10

    async def filtered(store: Any) -> None:
        found = await store.asearch(("users",), filter={"n": {"$gte": count // 2}}, limit=10)
        assert len(found) == 10

    if kv:
        await timed("put", put)
        await timed("get", get)
        await timed("filtered search", filtered)
    if semantic:
        await timed("search by meaning in a namespace", in_one)
        await timed("search by meaning in all", in_all)
    return rows


async def langgraph_stores(count: int, tmp: Path) -> list[Versus]:
    """`ContextStoreMemory` against LangGraph's `InMemoryStore` and `AsyncSqliteStore`."""
    try:
        from langgraph.store.memory import InMemoryStore  # type: ignore[import-not-found]
        from langgraph.store.sqlite.aio import AsyncSqliteStore  # type: ignore[import-not-found]
    except ImportError:
        return []
    from pygents_ctx.integrations.langgraph import ContextStoreMemory
    from pygents_ctx.memory.vectors.sqlite import sqlite_vec_loads

    index: Any = {"dims": STORE_DIMS, "embed": _store_embed, "fields": ["text"]}
    rows = await _store_rows(
        "in memory",
        ContextStoreMemory(index=index),
        InMemoryStore(index=index),
        "InMemoryStore",
        count,
        semantic=True,
    )
    vec = sqlite_vec_loads()
    async with (
        connect(tmp / "ours-store.db") as conn,
        AsyncSqliteStore.from_conn_string(str(tmp / "langgraph-store.db")) as theirs,
    ):
        await theirs.setup()
        rows += await _store_rows(
            "SQLite",
            ContextStoreMemory(conn),
            theirs,
            "AsyncSqliteStore (no index)",
            count,
            semantic=False,
        )
    async with connect(tmp / "ours-store-index.db") as conn:
        ours = ContextStoreMemory(conn, index=index)
        if vec:
            async with AsyncSqliteStore.from_conn_string(
                str(tmp / "langgraph-store-index.db"), index=index
            ) as theirs:
                await theirs.setup()
                rows += await _store_rows(
                    "SQLite", ours, theirs, "AsyncSqliteStore", count, semantic=True, kv=False
                )
        else:
            rows += await _store_rows(
                "SQLite",
                ours,
                InMemoryStore(index=index),
                "InMemoryStore (sqlite-vec cannot load)",
                count,
                semantic=True,
                kv=False,
            )
    return rows


async def cold_loads_postgres(count: int, dsn: str, url: str) -> Versus:
    """As `cold_loads_sqlite`, on PostgreSQL against the SQLAlchemy session (asyncpg)."""
    from agents.extensions.memory import SQLAlchemySession  # type: ignore[import-not-found]
    from sqlalchemy.ext.asyncio import create_async_engine  # type: ignore[import-not-found]

    engine = create_async_engine(url)
    try:
        writer = SQLAlchemySession("s", engine=engine, create_tables=True)
        await writer.add_items([_item(i) for i in range(count)])
        async with connect_postgres(dsn) as conn:
            await PostgresContextStore(conn, session_id="s").append_many(
                [_ours(i) for i in range(count)]
            )
            fresh: dict[str, Any] = {}

            async def new_ours() -> None:
                fresh["ours"] = PostgresContextStore(conn, session_id="s")

            async def new_theirs() -> None:
                fresh["theirs"] = SQLAlchemySession("s", engine=engine)

            async def ours() -> None:
                assert len(await fresh["ours"].get_history()) == count

            async def theirs() -> None:
                assert len(await fresh["theirs"].get_items()) == count

            mine, other = await _median_pair(ours, theirs, new_ours, new_theirs)
    finally:
        await engine.dispose()
    return _row(
        f"history cold load, {count:,} x 4 KB (PostgreSQL)",
        mine,
        other,
        "SQLAlchemySession (asyncpg)",
    )


async def compaction(count: int, keep: int, tmp: Path) -> list[Versus]:
    """The storage step: `count` messages become a summary and the last `keep`."""
    from agents import SQLiteSession

    summary_text = "summary of the conversation so far " * 20
    rows = []
    async with connect(tmp / "ours-compact.db") as conn:
        session = SQLiteSession("s", str(tmp / "sdk-compact.db"))
        made = iter(range(10**9))
        state: dict[str, Any] = {}

        async def fill_ours() -> None:
            store = SQLiteContextStore(conn, session_id=f"s{next(made)}")
            await store.append_many([_ours(i) for i in range(count)])
            state["store"] = store
            state["expected"] = (await store.get_history())[: count - keep]

        async def fill_theirs() -> None:
            await session.clear_session()
            await session.add_items([_item(i) for i in range(count)])
            state["items"] = await session.get_items()

        async def theirs() -> None:
            kept = state["items"][-keep:]
            await session.clear_session()
            await session.add_items([{"role": "system", "content": summary_text}, *kept])

        for expected in (True, False):

            async def ours(expected: bool = expected) -> None:
                await state["store"].replace_prefix(
                    count - keep,
                    [Message("system", summary_text)],
                    expected=state["expected"] if expected else None,
                )

            mine, other = await _median_pair(ours, theirs, fill_ours, fill_theirs)
            how = "with expected=" if expected else "no expected="
            rows.append(
                _row(
                    f"compaction {count:,} -> summary + {keep} ({how})",
                    mine,
                    other,
                    "SQLiteSession clear + add (not atomic)",
                )
            )
        session.close()
    return rows


async def pydantic_ai_rows(stored: int, history: int, tmp: Path) -> list[Versus]:
    """pydantic-ai's messages: `ContextStoreHistory` against its documented way of storing them.

    pydantic-ai keeps no conversation; its chat example stores each run's
    `result.new_messages_json()` as a row and loads the conversation by reading
    every row and validating it (`ModelMessagesTypeAdapter`). The same done here
    on SQLite, against `ContextStoreHistory` over `SQLiteContextStore`: one turn
    (a request and its response) added at `stored` messages, and a cold `load()`
    of `history` messages. Its database gets our store's settings (WAL,
    `synchronous = NORMAL`), so both sync alike.
    """
    import sqlite3

    from pydantic_ai.messages import (  # type: ignore[import-not-found]
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )

    def turn(index: int) -> list[Any]:
        return [
            ModelRequest(parts=[UserPromptPart(_text(index))]),
            ModelResponse(parts=[TextPart(_text(index + 1))]),
        ]

    db = sqlite3.connect(tmp / "pydantic-ai.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")  # the settings our SQLite store uses
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, conversation TEXT, body BLOB)")
    db.execute("CREATE INDEX by_conversation ON messages (conversation, id)")

    async def add_theirs(conversation: str, messages: list[Any]) -> None:
        body = ModelMessagesTypeAdapter.dump_json(messages)
        db.execute("INSERT INTO messages (conversation, body) VALUES (?, ?)", (conversation, body))

    async def load_theirs(conversation: str) -> list[Any]:
        rows = db.execute(
            "SELECT body FROM messages WHERE conversation = ? ORDER BY id", (conversation,)
        )
        return [m for (body,) in rows for m in ModelMessagesTypeAdapter.validate_json(body)]

    rows = []
    ops = 20
    async with connect(tmp / "ours-pydantic-ai.db") as conn:
        ours_history = ContextStoreHistory(SQLiteContextStore(conn, session_id="s"))
        for start in range(0, stored, 2):
            batch = turn(start)
            await ours_history.add(batch)
            await add_theirs("s", batch)
        counter = iter(range(stored, 10**9, 2))

        async def ours() -> None:
            for _ in range(ops):
                await ours_history.add(turn(next(counter)))

        async def theirs() -> None:
            for _ in range(ops):
                await add_theirs("s", turn(next(counter)))

        mine, other = await _median_pair(ours, theirs, repeats=5)
        peer = "pydantic-ai's documented rows of new_messages_json()"
        rows.append(
            _row(f"pydantic-ai turn added, {stored:,} stored", mine / ops, other / ops, peer)
        )

        for start in range(0, history, 2):
            batch = turn(start)
            await ContextStoreHistory(SQLiteContextStore(conn, session_id="h")).add(batch)
            await add_theirs("h", batch)

        async def ours_load() -> None:
            fresh = ContextStoreHistory(SQLiteContextStore(conn, session_id="h"))
            assert len(await fresh.load()) == history

        async def theirs_load() -> None:
            assert len(await load_theirs("h")) == history

        mine, other = await _median_pair(ours_load, theirs_load, repeats=5)
        rows.append(_row(f"pydantic-ai cold load, {history:,} x 4 KB", mine, other, peer))
    db.close()
    return rows


@contextlib.asynccontextmanager
async def _postgres() -> AsyncIterator[tuple[str, str] | None]:
    """A throwaway server's libpq DSN and SQLAlchemy asyncpg URL, or None without one."""
    from tests import postgres_server

    try:
        server = postgres_server.start()
    except postgres_server.ServerUnavailableError as exc:
        print(f"PostgreSQL rows skipped: {exc}")
        yield None
        return
    try:
        url = f"postgresql+asyncpg://postgres@/postgres?host={server.directory}"
        yield server.dsn, url
    finally:
        server.stop()


async def collect(quick: bool) -> list[Versus]:
    stored, history, vectors = (2_000, 500, 10_000) if quick else (20_000, 2_000, 100_000)
    tmp = Path(tempfile.mkdtemp(prefix="pygents-peers-"))
    try:
        rows = [*await appends(stored, tmp), *await cold_loads_sqlite(history, tmp)]
        rows += await langgraph_savers(stored, history, tmp)
        rows += await langgraph_stores(1_000 if quick else 10_000, tmp)
        async with _postgres() as server:
            if server is not None:
                rows.append(await cold_loads_postgres(history, *server))
        rows += await compaction(1_000, 100, tmp)
        rows += await pydantic_ai_rows(stored, history, tmp)
        rows += await in_memory_rows(vectors)
        rows += await sqlite_rows(vectors)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows
