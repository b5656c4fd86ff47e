"""A model loop whose context keeps checkpoints: rewinding its agent undoes a whole exchange."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    ContextConfig,
    ContextItem,
    MemoryContextStore,
    ModelLoop,
    Rewind,
    SQLiteContextStore,
    connect,
    tool,
)
from pygents_ctx.context.stores import ContextStore
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

SCRIPT = [
    assistant(tool_call("fetch", doc_id="d1")),
    "read d1",
    assistant(tool_call("fetch", doc_id="d2")),
    "read d2",
    "read nothing else",
]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ContextStore]:
    if request.param == "memory":
        yield MemoryContextStore()
        return
    async with connect(tmp_path / "ctx.db") as conn:
        yield SQLiteContextStore(conn)


def make_loop(store: ContextStore, *, checkpoints: bool) -> ModelLoop:
    @tool
    async def fetch(doc_id: str) -> ContextItem[str]:
        """Fetch a document."""
        return ContextItem(id=doc_id, description=f"doc {doc_id}", content=f"text of {doc_id}")

    agent = Agent("reader", "Reads", [fetch], context=ContextConfig(store, checkpoints=checkpoints))
    return ModelLoop(agent, ScriptedModel(SCRIPT))


def pool(loop: ModelLoop) -> list[Any]:
    return [item.id for item in loop.agent.context_pool]


async def test_rewinding_to_before_a_prompt_undoes_its_exchange(store: ContextStore) -> None:
    loop = make_loop(store, checkpoints=True)
    await loop.run("fetch d1")
    queue_after_first = [item.content for item in loop.agent.context_queue]
    await loop.run("fetch d2")
    assert pool(loop) == ["d1", "d2"]
    assert await store.count() == 8

    rewound = await loop.agent.rewind(4)  # before the second prompt

    assert rewound == Rewind(removed=4, restored=True)
    assert pool(loop) == ["d1"]
    assert [item.content for item in loop.agent.context_queue] == queue_after_first
    finished = await loop.run("never mind, anything else?")
    assert finished.message is not None
    assert finished.message.text == "read nothing else"
    assert [m.text for m in (await store.get_history())[4:]] == [
        "never mind, anything else?",
        "read nothing else",
    ]


async def test_a_model_call_can_be_retried_from_its_checkpoint(store: ContextStore) -> None:
    loop = make_loop(store, checkpoints=True)
    await loop.run("fetch d1")

    # Message 3: the tool's result is in, the second model call not made yet.
    assert (await loop.agent.rewind(3)).restored
    assert pool(loop) == ["d1"]
    assert [m.role for m in await store.get_history()] == ["user", "assistant", "user"]


async def test_without_checkpoints_a_rewind_says_the_agent_was_not_restored(
    store: ContextStore,
) -> None:
    loop = make_loop(store, checkpoints=False)
    await loop.run("fetch d1")
    await loop.run("fetch d2")

    assert await loop.agent.rewind(4) == Rewind(removed=4, restored=False)
    assert pool(loop) == ["d1", "d2"]  # kept as it was: there was nothing to restore from
    assert await store.get_checkpoint("reader", 4) is None


async def test_checkpoints_are_taken_before_each_prompt_and_model_call(
    store: ContextStore,
) -> None:
    loop = make_loop(store, checkpoints=True)
    await loop.run("fetch d1")
    await loop.run("fetch d2")

    taken = [at for at in range(9) if await store.get_checkpoint("reader", at) is not None]
    assert taken == [0, 1, 3, 4, 5, 7]
