"""Invariant: an agent, a queue and a pool save their contents as each part saves itself.

An agent writes its queue of turns, and a queue or a pool its items, all at
once, taking short paths for the common case (turns that never ran, items with
plain content). Whatever the mix, what they write must equal each part's own
`to_dict()`, hold containers of its own, and load back to equal parts.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    HookRegistry,
    Message,
    ToolRegistry,
    Turn,
    TurnHook,
    hook,
    tool,
)

SETTINGS = settings(max_examples=100, deadline=None)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=5,
)
TURN_KINDS = ["plain", "tagged", "hooked", "ran", "dynamic", "timed"]
ITEM_KINDS = ["plain", "message", "no description"]


def _define() -> None:
    ToolRegistry.clear()
    AgentRegistry.clear()
    HookRegistry.clear()

    @tool
    async def work(*args: Any, **kwargs: Any) -> Any:
        return [list(args), kwargs]  # as JSON gives it back

    @hook(TurnHook.ON_COMPLETE)
    async def saved_on_complete(*args: Any) -> None:
        return None


def _turn(kind: str, args: list[Any], kwargs: dict[str, Any]) -> Turn:
    if kind == "dynamic":  # evaluated when saved
        return Turn("work", [*args, lambda: "evaluated"], kwargs)
    if kind == "timed":
        return Turn("work", args, kwargs, timeout=5)
    turn = Turn("work", args, kwargs)
    if kind == "tagged":
        turn.tags = {"b", "a"}
    elif kind == "hooked":
        turn.hooks.append(HookRegistry.get("saved_on_complete"))
    elif kind == "ran":
        asyncio.run(turn.returning())
    return turn


@SETTINGS
@given(
    turns=st.lists(
        st.tuples(
            st.sampled_from(TURN_KINDS),
            st.lists(json_values, max_size=2),
            st.dictionaries(st.text(max_size=3), json_values, max_size=2),
        ),
        max_size=6,
    )
)
def test_an_agent_saves_its_queue_as_each_turn_saves(
    turns: list[tuple[str, list[Any], dict[str, Any]]],
) -> None:
    _define()
    agent = Agent("saver", "d", [ToolRegistry.get("work")])
    queued = [_turn(kind, args, kwargs) for kind, args, kwargs in turns]

    async def put_all() -> None:
        for turn in queued:
            await agent.put(turn)

    asyncio.run(put_all())

    saved = agent.to_dict()["queue"]

    assert saved == [turn.to_dict() for turn in queued]
    assert orjson.loads(agent.to_json())["queue"] == saved
    for data, turn in zip(saved, queued, strict=True):  # containers of its own
        data["kwargs"]["added"] = data["metadata"]["start_time"] = 1
        data["args"].append("added")
        assert "added" not in turn.kwargs
        assert "added" not in turn.args
    assert agent.to_dict()["queue"] == [turn.to_dict() for turn in queued]
    AgentRegistry.unregister("saver")
    loaded = Agent.from_json(agent.to_json())
    assert [turn.to_dict() for turn in loaded.queue] == [turn.to_dict() for turn in queued]


def _item(kind: str, n: int, content: Any) -> ContextItem[Any]:
    if kind == "message":
        return ContextItem(content=Message("user", f"m{n}"), description="d", id=f"i{n}")
    if kind == "no description":
        return ContextItem(content=content, id=f"i{n}")
    return ContextItem(content=content, description=f"d{n}", id=f"i{n}")


@SETTINGS
@given(
    items=st.lists(st.tuples(st.sampled_from(ITEM_KINDS), json_values), max_size=6),
    via_json=st.booleans(),
)
def test_a_queue_and_a_pool_save_their_items_as_each_item_saves(
    items: list[tuple[str, Any]], via_json: bool
) -> None:
    built = [_item(kind, n, content) for n, (kind, content) in enumerate(items)]
    queue: ContextQueue[Any] = ContextQueue(limit=10)
    pool: ContextPool[Any] = ContextPool(limit=10)
    asyncio.run(queue.append(*built))
    described = [item for item in built if item.description is not None]
    for item in described:
        asyncio.run(pool.add(item))

    assert queue.to_dict()["items"] == [item.to_dict() for item in built]
    assert pool.to_dict()["items"] == [item.to_dict() for item in described]
    for store, held in ((queue, built), (pool, described)):
        kind: Any = type(store)
        loaded = kind.from_json(store.to_json()) if via_json else kind.from_dict(store.to_dict())
        assert loaded.items == held
        assert loaded.to_dict() == store.to_dict()


@given(content=json_values, description=st.none() | st.text(max_size=3))
def test_an_item_copies_and_pickles_as_the_frozen_value_it_is(
    content: Any, description: str | None
) -> None:
    item = ContextItem(content=content, description=description, id="i")
    loaded = ContextItem.from_dict(orjson.loads(orjson.dumps(item.to_dict())))

    for twin in (copy.copy(item), copy.deepcopy(item), pickle.loads(pickle.dumps(item)), loaded):
        assert twin == item
        assert twin.to_dict() == item.to_dict()
        assert not hasattr(twin, "__dict__")  # slotted, however it was made
