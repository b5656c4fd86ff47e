"""The database backends' cached history: reads reuse what they parsed, and see every change."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path

import pytest

from pygents_ctx import Message
from pygents_ctx.context.stores import (
    ContextStore,
    PostgresContextStore,
    SQLiteContextStore,
    connect,
    connect_postgres,
)

from .helpers import numbered, texts

MakeStore = Callable[..., ContextStore]


@pytest.fixture(params=["sqlite", "postgres"])
async def two_connections(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[MakeStore, MakeStore]]:
    """Store factories over two connections to one database, as two processes would have."""
    if request.param == "sqlite":
        path = tmp_path / "ctx.db"
        async with connect(path) as first, connect(path) as second:
            yield partial(SQLiteContextStore, first), partial(SQLiteContextStore, second)
        return
    server = request.getfixturevalue("postgres")
    async with connect_postgres(server.dsn) as first, connect_postgres(server.dsn) as second:
        # The messages and the archive reference the sessions: they go with them.
        await first.run(lambda db: db.execute("DELETE FROM pygents_sessions"))
        yield partial(PostgresContextStore, first), partial(PostgresContextStore, second)


async def test_repeated_reads_reuse_the_parsed_messages(
    two_connections: tuple[MakeStore, MakeStore],
) -> None:
    store = two_connections[0]()
    await store.append_many(numbered(3))
    first = await store.get_history()
    await store.append(Message("user", "new"))

    second = await store.get_history()

    assert texts(second) == ["m0", "m1", "m2", "new"]
    assert all(a is b for a, b in zip(first, second, strict=False))


@pytest.mark.parametrize("change", ["clear", "clear_run", "replace_prefix", "append"])
async def test_another_connections_changes_reach_a_cached_history(
    two_connections: tuple[MakeStore, MakeStore], change: str
) -> None:
    mine, theirs = two_connections
    reader = mine(session_id="shared")
    writer = theirs(session_id="shared")
    await writer.append_many(numbered(3), run_id="r")
    assert texts(await reader.get_history()) == ["m0", "m1", "m2"]

    if change == "clear":
        await writer.clear()
    elif change == "clear_run":
        await writer.clear_run("r")
    elif change == "replace_prefix":
        await writer.replace_prefix(2, [Message("user", "S")])
    await writer.append(Message("user", "after"))

    expected = {
        "clear": ["after"],
        "clear_run": ["after"],
        "replace_prefix": ["S", "m2", "after"],
        "append": ["m0", "m1", "m2", "after"],
    }[change]
    assert texts(await reader.get_history()) == expected
    assert texts(await reader.get_history(limit=2)) == expected[-2:]
    assert await reader.count() == len(expected)


@pytest.mark.parametrize("warm", [False, True], ids=["fresh store", "cached store"])
@pytest.mark.parametrize(("limit", "offset"), [(2, 0), (2, 3), (10, 0), (0, 0), (3, 9)])
async def test_limited_reads_agree_whether_or_not_the_store_has_read_before(
    two_connections: tuple[MakeStore, MakeStore], warm: bool, limit: int, offset: int
) -> None:
    make = two_connections[0]
    await make(session_id="s").append_many(numbered(6))
    store = make(session_id="s")
    if warm:
        await store.get_history()

    result = await store.get_history(limit=limit, offset=offset)

    assert texts(result) == texts(numbered(6)[max(6 - offset - limit, 0) : max(6 - offset, 0)])
