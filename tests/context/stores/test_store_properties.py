"""Model-based: any sequence of operations gives the same results in memory and in SQLite.

The memory store is the model. The SQLite session is driven through two store
objects on two connections (as two processes would), chosen at random per
operation, so every cached history must notice the other's changes. After
every step each message's data is pointed at by exactly one live or archive row.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import Message, TextBlock, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SQLiteConnection,
    SQLiteContextStore,
    connect,
)

from .helpers import unaccounted

json_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8)
texts = st.text(max_size=12)
runs = st.sampled_from([None, "r1", "r2"])

messages = st.one_of(
    st.builds(Message, st.sampled_from(["user", "assistant", "system"]), texts),
    st.builds(
        lambda text, name, args: Message(
            "assistant", [TextBlock(text), ToolUseBlock("call", name, args)]
        ),
        texts,
        st.text(min_size=1, max_size=6),
        st.dictionaries(st.text(max_size=4), json_scalars, max_size=3),
    ),
    st.builds(
        lambda text, error: Message("user", [ToolResultBlock("call", text, is_error=error)]),
        texts,
        st.booleans(),
    ),
)
via = st.integers(0, 1)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), messages, runs, via),
        st.tuples(st.just("append_many"), st.lists(messages, max_size=4), runs, via),
        st.tuples(
            st.just("replace_prefix"),
            st.integers(0, 8),
            st.lists(messages, max_size=3),
            runs,
            via,
        ),
        st.tuples(
            st.just("compare_and_swap"),
            st.integers(0, 8),
            st.lists(messages, max_size=3),
            runs,
            via,
        ),
        st.tuples(st.just("clear"), via),
        st.tuples(st.just("clear_run"), st.sampled_from(["r1", "r2"]), via),
        st.tuples(st.just("add_tokens"), st.integers(0, 500), st.integers(0, 500), via),
        st.tuples(st.just("set_tokens"), st.integers(0, 500), st.integers(0, 500), via),
        st.tuples(st.just("fork"), via),
        st.tuples(
            st.just("read"), st.none() | st.integers(0, 6), st.integers(0, 4), st.booleans(), via
        ),
    ),
    max_size=25,
)


async def apply(store: ContextStore, op: tuple[Any, ...]) -> Any:
    """Run one operation; return what it returned, or the type of error it raised."""
    name, *args = op[:-1]
    try:
        if name == "append":
            return await store.append(args[0], run_id=args[1])
        if name == "append_many":
            return await store.append_many(args[0], run_id=args[1])
        if name == "replace_prefix":
            return await store.replace_prefix(args[0], args[1], run_id=args[2])
        if name == "compare_and_swap":  # the oldest `count` as this store reads them
            expected = (await store.get_history())[: args[0]]
            return await store.replace_prefix(args[0], args[1], run_id=args[2], expected=expected)
        if name == "clear":
            return await store.clear()
        if name == "clear_run":
            return await store.clear_run(args[0])
        if name == "add_tokens":
            return await store.add_context_tokens(*args)
        if name == "set_tokens":
            return await store.set_context_tokens(*args)
        limit, offset, archived = args
        return await store.get_history(limit=limit, offset=offset, include_archived=archived)
    except ValueError as exc:
        return type(exc)


async def observe(store: ContextStore) -> tuple[Any, ...]:
    [info] = [i for i in await store.list_sessions() if i.session_id == store.session_id]
    return (
        await store.get_history(),
        await store.get_history(include_archived=True),
        await store.count(),
        await store.token_count(),
        await store.get_context_tokens(),
        (info.message_count, info.preview, info.input_tokens, info.output_tokens),
    )


async def run_program(
    program: list[tuple[Any, ...]], first: SQLiteConnection, second: SQLiteConnection
) -> None:
    session_id = uuid.uuid4().hex
    model: ContextStore = MemoryContextStore(session_id=session_id)
    handles = [SQLiteContextStore(conn, session_id=session_id) for conn in (first, second)]
    await handles[0].set_context_tokens(0, 0)  # both sessions exist, for list_sessions
    for step, op in enumerate(program):
        handle = handles[op[-1]]
        if op[0] == "fork":
            model = await model.fork()
            fork = await handle.fork(session_id=model.session_id)
            handles = [
                SQLiteContextStore(conn, session_id=fork.session_id) for conn in (first, second)
            ]
        else:
            assert await apply(handle, op) == await apply(model, op), (step, op)
        for reader in handles:
            assert await observe(reader) == await observe(model), (step, op)
        assert await first.run(unaccounted) == (0, 0, 0), (step, op)


@pytest.fixture(scope="module")
def connections() -> Iterator[list[SQLiteConnection]]:
    """Two connections to one file, kept for all examples (each uses new session ids)."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "props.db"
        conns = asyncio.run(_open_two(path))
        yield conns
        for conn in conns:
            asyncio.run(conn.close())


async def _open_two(path: Path) -> list[SQLiteConnection]:
    return [await connect(path), await connect(path)]


@settings(max_examples=60, deadline=None)
@given(program=operations)
def test_memory_and_sqlite_agree_on_every_program(
    connections: list[SQLiteConnection], program: list[tuple[Any, ...]]
) -> None:
    asyncio.run(run_program(program, *connections))
