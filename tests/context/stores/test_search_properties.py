"""Nothing is lost to compaction: every message ever appended stays live or is found by search.

For any history and any sequence of compactions (summaries of any length
through `replace_prefix`, or `AutoCompactStore.compact`), each message ever
appended is in the live history, or `search` returns it for its own
distinctive word, even when that word is only in the whole text of an
offloaded tool result (the stub does not show it). On the memory, SQLite and
PostgreSQL stores alike.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import Message, OffloadedResult, TextBlock, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores import (
    AutoCompactStore,
    ContextStore,
    MemoryContextStore,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.context.stores.search import offloaded_words
from pygents_ctx.testing import ScriptedSummarizer
from tests import postgres_server

filler = st.lists(st.sampled_from(["the", "a", "note", "data", "ok", "Fine.", "(x)"]), max_size=6)
kinds = st.sampled_from(["text", "tool_use", "tool_result", "offloaded"])
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.tuples(kinds, filler), min_size=1, max_size=5)),
        st.tuples(st.just("replace_prefix"), st.integers(0, 12), st.integers(0, 2)),
        st.tuples(st.just("compact"), st.integers(0, 6)),
    ),
    max_size=14,
)


def planted(number: int, kind: str, words: list[str]) -> Message:
    """A message holding the distinctive word `tok<number>`, in a block of `kind`."""
    token = f"tok{number}"
    text = " ".join([*words[:3], token, *words[3:]])
    if kind == "tool_use":
        return Message("assistant", [ToolUseBlock(f"c{number}", "lookup", {"q": text})])
    if kind == "tool_result":
        return Message("user", [ToolResultBlock(f"c{number}", [TextBlock(text)])])
    if kind == "offloaded":  # the word is in the blob only: the stub keeps its words
        whole = "log line\n" * 50 + text
        stub = OffloadedResult(
            f"tool-results/{number}",
            chars=len(whole),
            tokens=len(whole) // 4,
            head="log line",
            tail="",
            words=offloaded_words(whole),
        )
        return Message("user", [ToolResultBlock(f"c{number}", stub.stub_text(), offloaded=stub)])
    return Message("user" if number % 2 else "assistant", text)


async def run(store: ContextStore, program: list[tuple[Any, ...]]) -> None:
    compacting = AutoCompactStore(store, ScriptedSummarizer(lambda m, p: "A summary."))
    appended: list[tuple[str, Message]] = []
    for step in program:
        if step[0] == "append":
            batch = [
                planted(len(appended) + i, kind, words) for i, (kind, words) in enumerate(step[1])
            ]
            appended += [(f"tok{len(appended) + i}", m) for i, m in enumerate(batch)]
            await store.append_many(batch)
        elif step[0] == "replace_prefix":
            count = min(step[1], await store.count())
            await store.replace_prefix(count, [Message("user", "Earlier: talk.")] * step[2])
        else:
            compacting.keep_recent = step[1]
            await compacting.compact()
    live = await store.get_history()
    for token, message in appended:
        if message in live:
            continue
        hits = await store.search(token)
        assert [hit.message for hit in hits] == [message], token
        assert hits[0].archived


@asynccontextmanager
async def opened(backend: str, directory: str, dsn: str) -> AsyncIterator[ContextStore]:
    session_id = uuid.uuid4().hex
    if backend == "memory":
        yield MemoryContextStore(session_id=session_id)
    elif backend == "sqlite":
        async with connect(Path(directory) / "props.db") as conn:
            yield SQLiteContextStore(conn, session_id=session_id)
    else:
        async with connect_postgres(dsn) as pg:
            yield PostgresContextStore(pg, session_id=session_id)


async def check(backend: str, directory: str, dsn: str, program: list[tuple[Any, ...]]) -> None:
    async with opened(backend, directory, dsn) as store:
        await run(store, program)


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
@settings(max_examples=40, deadline=None)
@given(program=steps)
def test_every_message_ever_appended_is_live_or_found_by_search(
    postgres: postgres_server.PostgresServer, backend: str, program: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(check(backend, directory, postgres.dsn, program))
