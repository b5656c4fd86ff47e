"""`messages_after` and `messages_with_ids`: a session's messages by id, where `search`
says they are, on the memory, SQLite and PostgreSQL stores alike."""

from __future__ import annotations

import pytest

from pygents_ctx import Message
from pygents_ctx.context.stores import AutoCompactStore, ContextStore, HistoryHit

from .conftest import MakeStore


async def summarize(messages: list[Message]) -> str:
    return "summary"


def located(hits: list[HistoryHit]) -> list[tuple[int | None, bool, int, str]]:
    return [(hit.id, hit.archived, hit.position, hit.message.text) for hit in hits]


async def test_pages_by_id_through_archive_and_live_history_as_search_locates(
    make_store: MakeStore,
) -> None:
    store = await make_store(*(Message("user", f"note {i} kiwi{i}") for i in range(6)))
    await store.replace_prefix(3, [Message("assistant", "summary kiwisum")], run_id="r1")
    everything = await store.messages_after(0, limit=100)
    assert [hit.message.text for hit in everything] == [
        *(f"note {i} kiwi{i}" for i in range(6)),
        "summary kiwisum",
    ]
    ids = [hit.id for hit in everything]
    assert ids == sorted(ids)
    assert [hit.archived for hit in everything] == [True] * 3 + [False] * 4
    assert everything[-1].run_id == "r1"
    for hit in everything:  # ids and places are those search gives
        (found,) = await store.search(hit.message.text.split()[-1])
        assert located([found]) == located([hit])
    paged: list[HistoryHit] = []
    after = 0
    while page := await store.messages_after(after, limit=2):
        paged += page
        after = page[-1].id or 0
    assert located(paged) == located(everything)
    wanted = [ids[5], ids[1], 10**9]
    assert located(await store.messages_with_ids(wanted)) == located([everything[1], everything[5]])
    assert await store.messages_with_ids([]) == []


async def test_a_fork_lists_what_it_reads_of_its_source_and_not_what_came_after(
    make_store: MakeStore,
) -> None:
    source = await make_store(*(Message("user", f"m{i}") for i in range(4)))
    await source.replace_prefix(1, [])
    inherited = await source.messages_after(0)
    fork = await source.fork(at=2)
    await fork.append(Message("user", "fork's"))
    await source.append(Message("user", "source's"))
    texts = [hit.message.text for hit in await fork.messages_after(0)]
    assert texts == ["m0", "m1", "m2", "fork's"]
    assert located(await fork.messages_with_ids(h.id for h in inherited if h.id is not None)) == (
        located(inherited[:3])
    )


async def test_removed_messages_are_not_listed(make_store: MakeStore) -> None:
    store = await make_store(*(Message("user", f"m{i}") for i in range(4)))
    before = await store.messages_after(0)
    await store.rewind(2)
    assert await store.messages_with_ids(h.id for h in before if h.id is not None) == before[:2]
    await store.clear()
    assert await store.messages_after(0) == []


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda s: s.messages_after("1"), TypeError, "messages_after starts after must be an int"),
        (lambda s: s.messages_after(0, limit=0), ValueError, "limit must be between 1 and"),
        (lambda s: s.messages_with_ids("12"), TypeError, "iterable of message ids"),
        (
            lambda s: s.messages_with_ids([1, "2"]),
            TypeError,
            "a message id must be an int, not str",
        ),
        # Past what a database holds: no message has such an id, on any store.
        (lambda s: s.messages_after(2**63), ValueError, "after must be between"),
        (lambda s: s.messages_after(0, limit=2**64), ValueError, r"limit must be between 1 and"),
        (lambda s: s.messages_with_ids([1, -(2**63) - 1]), ValueError, "a message id must be"),
        (lambda s: s.messages_with_ids([[1]]), TypeError, "a message id must be an int"),
    ],
)
async def test_bad_arguments_are_refused(
    make_store: MakeStore, call: object, error: type, words: str
) -> None:
    store = await make_store(Message("user", "m"))
    with pytest.raises(error, match=words):
        await call(store)  # type: ignore[operator]


async def test_a_store_without_ids_says_which_stores_have_them() -> None:
    class ListStore(ContextStore):
        async def append(self, message: Message, *, run_id: str | None = None) -> None: ...

        async def get_history(
            self, *, limit: int | None = None, offset: int = 0, include_archived: bool = False
        ) -> list[Message]:
            return []

    with pytest.raises(NotImplementedError, match="SQLiteContextStore"):
        await ListStore().messages_after(0)
    with pytest.raises(NotImplementedError, match="keeps no message ids"):
        await ListStore().messages_with_ids([1])
    assert await ListStore().shared_from() == []


async def test_a_fork_names_the_sessions_it_shares_ids_with_and_the_newest_it_shares(
    make_store: MakeStore,
) -> None:
    source = await make_store(*(Message("user", f"m{i}") for i in range(6)))
    assert await source.shared_from() == []
    await source.replace_prefix(2, [Message("assistant", "summary")])
    before = {hit.id: hit.message for hit in await source.messages_after(0)}
    fork = await source.fork(at=3)  # the summary, m2 and m3; the archive
    await fork.append(Message("user", "fork's"))
    deeper = await fork.fork()
    await deeper.append(Message("user", "deeper's"))
    await source.append(Message("user", "source's"))
    kept = {hit.id: hit.message for hit in await fork.messages_after(0)}
    ((name, through),) = await fork.shared_from()
    assert name == source.session_id
    assert through == max(i for i, m in kept.items() if m.text != "fork's")
    # Each message up to it is the source's message of that id; the fork's own come after.
    assert all(before[i] == m for i, m in kept.items() if (i or 0) <= through)
    assert all((i or 0) > through for i, m in kept.items() if m.text == "fork's")
    assert [name for name, _ in await deeper.shared_from()] == [
        source.session_id,
        fork.session_id,
    ]
    wrapped = AutoCompactStore(deeper, summarize, max_tokens=10**6)
    assert await wrapped.shared_from() == await deeper.shared_from()
    # What copies the shared messages (a compaction of the source) ends the sharing on
    # the database stores; ids that stay named keep naming the source's messages.
    await source.replace_prefix(1, [])
    for name, through in await fork.shared_from():
        assert name == source.session_id
        assert all(
            before[hit.id] == hit.message
            for hit in await fork.messages_after(0)
            if (hit.id or 0) <= through
        )
