"""MemoryContextStore: what only the memory backend does."""

from __future__ import annotations

from datetime import datetime

import pytest

from pygents_ctx import Message
from pygents_ctx.context.stores import MemoryContextStore

from .helpers import numbered, texts


async def test_initial_messages_are_copied() -> None:
    messages = numbered(2)
    store = MemoryContextStore(messages, session_id="s")

    messages.append(Message("user", "added later"))

    assert texts(await store.get_history()) == ["m0", "m1"]
    assert store.session_id == "s"


def test_initial_messages_must_be_messages() -> None:
    with pytest.raises(TypeError, match=r"messages\[0\] must be a Message"):
        MemoryContextStore(["hello"])  # type: ignore[list-item]


async def test_list_sessions_reports_this_session_with_its_creation_time() -> None:
    before = datetime.now().astimezone()
    store = MemoryContextStore(numbered(3))

    [info] = await store.list_sessions()

    assert (info.session_id, info.message_count, info.preview) == (store.session_id, 3, "m0")
    assert datetime.fromisoformat(info.created_at) >= before


async def test_fork_is_a_memory_store() -> None:
    fork = await MemoryContextStore(numbered(1)).fork()

    assert isinstance(fork, MemoryContextStore)
    assert texts(await fork.get_history()) == ["m0"]


def test_repr_names_the_session_and_size() -> None:
    store = MemoryContextStore(numbered(2), session_id="abc")

    assert repr(store) == "MemoryContextStore(session_id='abc', messages=2)"
