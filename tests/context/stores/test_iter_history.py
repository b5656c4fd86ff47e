"""`iter_history`: the history a page at a time, the same on every backend."""

from __future__ import annotations

import pytest

from pygents_ctx import Message
from tests.context.stores.conftest import MakeStore


def texts(messages: list[Message]) -> list[str]:
    return [message.text for message in messages]


@pytest.mark.parametrize("batch", [1, 2, 3, 7, 1000])
async def test_pages_give_the_history_in_order(make_store: MakeStore, batch: int) -> None:
    store = await make_store(*(Message("user", f"m{i}") for i in range(7)))
    # A compaction puts its summary at a position before the kept messages.
    await store.replace_prefix(3, [Message("user", "summary")])

    live = [m async for m in store.iter_history(batch=batch)]
    everything = [m async for m in store.iter_history(batch=batch, include_archived=True)]

    assert live == await store.get_history()
    assert texts(live) == ["summary", "m3", "m4", "m5", "m6"]
    assert everything == await store.get_history(include_archived=True)
    assert texts(everything)[:3] == ["m0", "m1", "m2"]


async def test_messages_appended_while_iterating_are_read(make_store: MakeStore) -> None:
    store = await make_store(*(Message("user", f"m{i}") for i in range(4)))
    seen = []
    async for message in store.iter_history(batch=2):
        seen.append(message.text)
        if message.text == "m1":
            await store.append(Message("user", "late"))

    assert seen == ["m0", "m1", "m2", "m3", "late"]


async def test_an_empty_session_gives_nothing(make_store: MakeStore) -> None:
    store = await make_store()

    assert [m async for m in store.iter_history()] == []
    assert [m async for m in store.iter_history(include_archived=True)] == []


@pytest.mark.parametrize(
    ("batch", "error"), [(0, ValueError), (-1, ValueError), (2**63, ValueError), (1.5, TypeError)]
)
async def test_a_bad_batch_is_refused(make_store: MakeStore, batch: object, error: type) -> None:
    store = await make_store(Message("user", "m"))

    with pytest.raises(error, match="batch must be"):
        async for _ in store.iter_history(batch=batch):  # type: ignore[arg-type]
            pass
