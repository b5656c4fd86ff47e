"""Invariant: an agent loads its queued turns as `Turn.from_dict` loads each one.

Random saved queues, most of them plain and some broken in one field, must
load to the same turns, or fail with the same error (and register nothing), as
`Turn.from_dict` of each saved turn, from a dict or from JSON.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    HeuristicTokenCounter,
    HookRegistry,
    ToolRegistry,
    Turn,
    TurnHook,
    UnregisteredAgentError,
    hook,
    tool,
)

SETTINGS = settings(max_examples=200, deadline=None)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
FIELDS = ["tool_name", "args", "kwargs", "timeout", "metadata", "output", "hooks", "tags"]

plain_turns = st.fixed_dictionaries(
    {
        "tool_name": st.sampled_from(["work", "other"]),
        "args": st.lists(json_values, max_size=2),
        "kwargs": st.dictionaries(st.text(max_size=3), json_values, max_size=2),
        "timeout": st.integers(min_value=1, max_value=100),
        "metadata": st.just({"start_time": None, "end_time": None, "stop_reason": None}),
        "output": json_values,
        "hooks": st.just({}),
        "tags": st.just([]),
    }
)
_PLAIN = {
    "tool_name": "work",
    "args": [1],
    "kwargs": {"a": 2},
    "timeout": 60,
    "metadata": {"start_time": None, "end_time": None, "stop_reason": None},
    "output": None,
    "hooks": {},
    "tags": [],
}
_MISSING = object()  # the field is left out
_RUN = {"start_time": "2024-01-02T03:04:05+00:00", "end_time": None, "stop_reason": "error"}
# Values worth trying in each field, right or wrong, JSON or not.
INTERESTING: dict[str, list[Any]] = {
    "tool_name": ["work", "missing", 7, None],
    "args": [[], [1], (1, 2), None, "a", {"a": 1}],
    "kwargs": [{}, {"a": 1}, {1: "int key"}, None, [("a", 1)], "a"],
    "timeout": [1, 60, 0, -3, 1.5, True, "60", None, float("inf")],
    "metadata": [None, {}, _RUN, {"start_time": "yesterday"}, {"stop_reason": "?"}, []],
    "output": [None, 1, {"a": [1]}],
    "hooks": [{}, None, [], {"on_complete": ["saved_on_complete"]}, {"on_complete": ["nope"]}],
    "tags": [[], ["tag"], [1], "tag", None, ()],
}


@st.composite
def saved_queues(draw: st.DrawFn) -> list[Any]:
    turns: list[Any] = draw(st.lists(plain_turns, max_size=5))
    if turns and draw(st.booleans()):  # change one field of one turn
        at = draw(st.integers(min_value=0, max_value=len(turns) - 1))
        field = draw(st.sampled_from(FIELDS))
        value = draw(st.sampled_from([*INTERESTING[field], _MISSING]) | json_values)
        if value is _MISSING:
            del turns[at][field]
        else:
            turns[at][field] = value
    if turns and draw(st.integers(min_value=0, max_value=9)) == 0:
        turns[0] = draw(json_values)  # not even a dict
    return turns


def _outcome(load: Callable[[], list[Turn]]) -> tuple[str, Any]:
    """What loading gives: the turns as they look to a user, or the error."""
    try:
        turns = load()
    except Exception as exc:  # the comparison is the point: whatever is raised
        return "raised", (type(exc), str(exc))
    return "loaded", [
        (t.tool, t.args, t.kwargs, t.timeout, t.tags, t.hooks, t.output, t.metadata) for t in turns
    ]


def _define() -> None:
    ToolRegistry.clear()
    AgentRegistry.clear()
    HookRegistry.clear()

    @tool
    async def work(*args: Any, **kwargs: Any) -> Any:
        return args, kwargs

    @tool
    async def other(*args: Any, **kwargs: Any) -> Any:
        return None

    @hook(TurnHook.ON_COMPLETE)
    async def saved_on_complete(*args: Any) -> None:
        return None


def _agent_loads(queue: list[Any], parsed: bool) -> Callable[[], list[Turn]]:
    saved = {"name": "loaded", "description": "d", "tool_names": ["work", "other"], "queue": queue}

    def load() -> list[Turn]:
        agent = Agent.from_json(orjson.dumps(saved)) if parsed else Agent.from_dict(saved)
        try:
            return agent.queue
        finally:
            AgentRegistry.unregister("loaded")

    return load


@SETTINGS
@given(queue=saved_queues())
@example(queue=[{**_PLAIN, "kwargs": {1: "int key"}}])
@example(queue=[{**_PLAIN, "tags": ["tag"]}, _PLAIN])
@example(queue=[_PLAIN, {**_PLAIN, "metadata": _RUN}])
def test_an_agent_loads_its_queue_as_each_turn_loads(queue: list[Any]) -> None:
    _define()
    expected = _outcome(lambda: [Turn.from_dict(data) for data in queue])
    assert _outcome(_agent_loads(queue, parsed=False)) == expected
    with pytest.raises(UnregisteredAgentError):  # loaded and let go, or never registered
        AgentRegistry.get("loaded")


@SETTINGS
@given(queue=saved_queues())
def test_an_agent_loads_its_queue_from_json_as_each_turn_loads(queue: list[Any]) -> None:
    _define()
    try:
        text = orjson.dumps(queue)
    except TypeError:  # not JSON (a tuple reads back as a list, a non-str key fails)
        return
    as_json = orjson.loads(text)
    expected = _outcome(lambda: [Turn.from_json(orjson.dumps(data)) for data in as_json])
    assert _outcome(_agent_loads(as_json, parsed=True)) == expected


def test_turns_loaded_from_a_dict_keep_no_link_to_it() -> None:
    _define()
    saved: dict[str, Any] = {
        "name": "loaded",
        "description": "d",
        "tool_names": ["work"],
        "queue": [Turn("work", [[1]], {"k": [2]}).to_dict()],
    }
    agent = Agent.from_dict(saved)
    saved["queue"][0]["args"].append("later")
    saved["queue"][0]["kwargs"]["k2"] = "later"

    (turn,) = agent.queue
    assert turn.args == [[1]]
    assert turn.kwargs == {"k": [2]}


def test_a_function_among_loaded_arguments_is_called_when_the_turn_runs() -> None:
    """A dict (unlike JSON) can hold a function: it stays a dynamic argument."""
    _define()
    calls: list[str] = []

    def now() -> str:
        calls.append("called")
        return "evaluated"

    saved = {
        "name": "loaded",
        "description": "d",
        "tool_names": ["work"],
        "queue": [{"tool_name": "work", "args": [now], "kwargs": {"at": now}}],
    }
    full = {**saved, "queue": [{**Turn("work").to_dict(), "args": [now], "kwargs": {"at": now}}]}
    for document in (saved, full):
        agent = Agent.from_dict(document)
        outputs = asyncio.run(_values(agent))
        AgentRegistry.unregister("loaded")
        assert outputs == [(("evaluated",), {"at": "evaluated"})]
    assert calls == ["called"] * 4


async def _values(agent: Agent) -> list[Any]:
    return [value async for _, value in agent.run()]


@pytest.mark.parametrize("names", [["missing", "work"], ["work", "missing", "gone"]])
def test_the_first_missing_tool_is_the_one_named(names: list[str]) -> None:
    _define()
    queue = [Turn("work").to_dict() | {"tool_name": name} for name in names]
    expected = _outcome(lambda: [Turn.from_dict(data) for data in queue])

    assert expected[0] == "raised"
    assert _outcome(_agent_loads(queue, parsed=False)) == expected


# -- context queues and pools: checked when loaded, their items built on first use ------

FIRST_USES: list[tuple[str, Callable[[Any], Any]]] = [
    ("len", len),
    ("bool", bool),
    ("iter", lambda store: [item.content for item in store]),
    ("items", lambda store: store.items),
    ("repr", repr),
    ("to_dict", lambda store: store.to_dict()),
    ("branch", lambda store: store.branch().items),
    ("tokens", lambda store: store.tokens if isinstance(store, ContextQueue) else len(store)),
    ("clear", lambda store: (asyncio.run(store.clear()), store.items)),
    ("hooks", lambda store: store.hooks),
]


@pytest.mark.parametrize("kind", ["queue", "pool"])
@pytest.mark.parametrize(("use", "first_use"), FIRST_USES, ids=[u for u, _ in FIRST_USES])
@pytest.mark.parametrize("via_json", [False, True])
def test_a_loaded_queue_or_pool_behaves_as_the_one_it_was_saved_from(
    kind: str, use: str, first_use: Callable[[Any], Any], via_json: bool
) -> None:
    _define()
    original: Any = (
        ContextQueue(limit=5, counter=HeuristicTokenCounter())
        if kind == "queue"
        else ContextPool(5)
    )
    for i in range(4):
        item = ContextItem(content={"n": i}, description=f"d{i}", id=f"i{i}")
        asyncio.run(original.append(item) if kind == "queue" else original.add(item))
    kind_type = type(original)
    loaded = (
        kind_type.from_json(original.to_json())
        if via_json
        else kind_type.from_dict(original.to_dict())
    )

    assert first_use(loaded) == first_use(original)
    assert loaded.items == original.items
    more = ContextItem(content="more", description="d", id="more")
    asyncio.run(loaded.append(more) if kind == "queue" else loaded.add(more))
    assert loaded.items[-1] == more
    assert loaded.to_dict()["items"][-1] == more.to_dict()


@pytest.mark.parametrize("kind", [ContextQueue, ContextPool])
def test_a_missing_attribute_is_an_attribute_error_before_and_after_the_items_are_built(
    kind: Any,
) -> None:
    saved = kind(3).to_dict() | {"items": [{"id": "a", "description": "d", "content": 1}]}
    loaded = kind.from_dict(saved)

    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        loaded.colour  # the lookup is the point
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        loaded.colour
    assert [item.content for item in loaded] == [1]


def test_a_loaded_agent_checks_new_tools_against_its_turns_before_building_them() -> None:
    _define()
    saved = {
        "name": "loaded",
        "description": "d",
        "tool_names": ["work", "other"],
        "queue": [Turn("work", [1]).to_dict()],
    }
    agent = Agent.from_dict(saved)

    with pytest.raises(ValueError, match="'work'"):
        agent.tools = [ToolRegistry.get("other")]
    agent.tools = [ToolRegistry.get("work")]

    assert [turn.args for turn in agent.queue] == [[1]]


def test_a_branch_of_a_loaded_agent_gets_fresh_copies_of_its_turns() -> None:
    _define()
    saved = {
        "name": "loaded",
        "description": "d",
        "tool_names": ["work"],
        "queue": [Turn("work", [1]).to_dict() | {"output": "from before"}],
    }
    agent = Agent.from_dict(saved)
    child = agent.branch("child")

    (original,) = agent.queue
    (copy,) = child.queue
    assert copy is not original
    assert (copy.args, copy.output, original.output) == ([1], None, "from before")
