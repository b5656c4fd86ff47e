"""`append_many` streams: any number of messages in one transaction, in bounded memory."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import pytest

from pygents_ctx import Message
from pygents_ctx.context.messages import ToolUseBlock
from pygents_ctx.context.stores import ContextStore

from .conftest import MakeStore

MANY = 2_500  # more than two of the chunks a streamed append encodes at a time


def numbered(count: int, start: int = 0) -> Iterator[Message]:
    for index in range(start, start + count):
        yield Message("user" if index % 2 == 0 else "assistant", f"message {index}")


async def texts(store: ContextStore) -> list[str]:
    return [message.text for message in await store.get_history()]


async def test_a_generator_of_many_messages_is_stored_in_order_with_its_run(
    make_store: MakeStore,
) -> None:
    store = await make_store(Message("user", "first"))
    await store.append_many(numbered(MANY), run_id="bulk")
    assert await texts(store) == ["first", *(f"message {i}" for i in range(MANY))]
    snapshot = await store.snapshot()
    assert {stored.run_id for stored in snapshot.messages[1:]} == {"bulk"}
    assert await store.count() == MANY + 1


@pytest.mark.parametrize("where", [0, 1_500, MANY - 1])
async def test_a_non_message_anywhere_adds_nothing_and_names_its_index(
    make_store: MakeStore, where: int
) -> None:
    store = await make_store(Message("user", "first"))

    def with_a_bad_one() -> Iterator[object]:
        for index, message in enumerate(numbered(MANY)):
            yield "not a message" if index == where else message

    with pytest.raises(TypeError, match=rf"messages\[{where}\] must be a Message, not str"):
        await store.append_many(with_a_bad_one())  # type: ignore[arg-type]
    assert await texts(store) == ["first"]
    await store.append(Message("assistant", "still writable"))
    assert await texts(store) == ["first", "still writable"]


async def test_a_message_json_cannot_hold_late_in_the_stream_adds_nothing(
    make_store: MakeStore,
) -> None:
    store = await make_store(Message("user", "first"))
    bad = Message("assistant", [ToolUseBlock("c1", "t", {"values": {1, 2}})])

    def late() -> Iterator[Message]:
        yield from numbered(1_800)
        yield bad

    with pytest.raises(TypeError):
        await store.append_many(late())
    assert await texts(store) == ["first"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_memory_stays_bounded_however_many_messages_come(make_store: MakeStore) -> None:
    store = await make_store()
    body = "x" * 2_000
    count = 20_000  # 40 MB of text: held at once, the encoded rows alone would pass the bound

    def messages() -> Iterator[Message]:
        for index in range(count):
            yield Message("user", f"{index} {body}")

    tracemalloc.start()
    try:
        await store.append_many(messages())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40_000_000, f"peak {peak / 1e6:.1f} MB"
    assert await store.count() == count
