"""Saving and restoring agents: `to_dict` / `from_dict`, `to_json` / `from_json`."""

from __future__ import annotations

import asyncio
import enum
import json
import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentHook,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    Hook,
    HookRegistry,
    StopReason,
    Tool,
    Turn,
    UnregisteredAgentError,
    UnregisteredHookError,
    UnregisteredToolError,
    tool,
)

AGENT_KEYS = [
    "name",
    "description",
    "tool_names",
    "queue",
    "current_turn",
    "hooks",
    "turn_hooks",
    "context_pool",
    "is_paused",
    "context_queue",
    "tags",
]


async def module_level_hook(agent: Agent, turn: Turn) -> None:
    """A module attribute that is never registered as a hook."""


async def drain(agent: Agent) -> list[Any]:
    return [value async for _, value in agent.run()]


def assert_unregistered(name: str) -> None:
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get(name)


@pytest.fixture
def events() -> list[str]:
    return []


@pytest.fixture
def echo() -> Tool[..., Any]:
    @tool
    async def echo(value: Any) -> Any:
        return value

    @echo.subtool
    async def loud(value: str) -> str:
        return value.upper()

    return echo


@pytest.fixture
async def agent(echo: Tool[..., Any], events: list[str]) -> Agent:
    """An agent with something in every saved field, hooks at every level."""
    queue: ContextQueue[Any] = ContextQueue(limit=4, tags=["q"])
    pool: ContextPool[Any] = ContextPool(limit=3, tags=["p"])
    agent = Agent(
        "saver", "saves itself", [echo], context_queue=queue, context_pool=pool, tags=["b", "a"]
    )

    @agent.after_turn
    async def record_after_turn(agent: Agent, turn: Turn) -> None:
        events.append(f"after_turn {turn.tool_name}")

    @agent.on_complete
    async def record_complete(turn: Turn, reason: StopReason) -> None:
        events.append(f"on_complete {reason.value}")

    @queue.after_append
    async def record_append(appended: list[Any], current: list[Any]) -> None:
        events.append(f"appended {[i.content for i in appended]}")

    @pool.after_add
    async def record_add(pool: ContextPool, item: ContextItem[Any]) -> None:
        events.append(f"added {item.id}")

    first = Turn(echo, kwargs={"value": "later"}, timeout=5)

    @first.after_run
    async def record_turn_output(turn: Turn, output: Any) -> None:
        events.append(f"turn output {output}")

    await agent.put(first)
    await agent.put(Turn("echo.loud", args=["shout"], tags=["x"]))
    await queue.append(ContextItem(content={"text": "hi"}), ContextItem(content=[1, 2]))
    await pool.add(ContextItem(content="body", description="a document", id="doc"))
    events.clear()
    return agent


def restore(saved: dict[str, Any]) -> Agent:
    """Forget the saved agent's name, then restore it."""
    AgentRegistry.unregister(saved["name"])
    return Agent.from_dict(saved)


# -- shape -------------------------------------------------------------------------------------


async def test_to_dict_keys_are_in_the_documented_order(agent: Agent) -> None:
    assert list(agent.to_dict()) == AGENT_KEYS


async def test_to_dict_content(agent: Agent) -> None:
    saved = agent.to_dict()

    assert saved["name"] == "saver"
    assert saved["description"] == "saves itself"
    assert saved["tool_names"] == ["echo"]
    assert [t["tool_name"] for t in saved["queue"]] == ["echo", "echo.loud"]
    assert saved["current_turn"] is None
    assert saved["hooks"] == {"after_turn": ["record_after_turn"]}
    assert saved["turn_hooks"] == {"on_complete": ["record_complete"]}
    assert saved["context_queue"]["items"][0] == {
        "id": None,
        "description": None,
        "content": {"text": "hi"},
    }
    assert saved["context_queue"]["hooks"] == {"after_append": ["record_append"]}
    assert saved["context_pool"]["hooks"] == {"after_add": ["record_add"]}
    assert saved["is_paused"] is False
    assert saved["tags"] == ["a", "b"]
    json.dumps(saved)  # plain data all the way down


# -- round trips ---------------------------------------------------------------------------------


def _via_dict(agent: Agent) -> Agent:
    return restore(agent.to_dict())


def _via_json_bytes(agent: Agent) -> Agent:
    data = agent.to_json()
    assert isinstance(data, bytes)
    AgentRegistry.unregister(agent.name)
    return Agent.from_json(data)


def _via_json_str(agent: Agent) -> Agent:
    data = agent.to_json().decode()
    AgentRegistry.unregister(agent.name)
    return Agent.from_json(data)


ROUND_TRIPS = pytest.mark.parametrize(
    "round_trip",
    [_via_dict, _via_json_bytes, _via_json_str],
    ids=["dict", "json-bytes", "json-str"],
)


@ROUND_TRIPS
async def test_round_trip_reproduces_the_saved_state(
    agent: Agent, round_trip: Callable[[Agent], Agent]
) -> None:
    saved = agent.to_dict()

    restored = round_trip(agent)

    assert restored is not agent
    assert AgentRegistry.get("saver") is restored
    assert restored.to_dict() == saved
    assert [(t.tool_name, t.args, t.kwargs, t.timeout, t.tags) for t in restored.queue] == [
        ("echo", [], {"value": "later"}, 5, frozenset()),
        ("echo.loud", ["shout"], {}, 60, frozenset({"x"})),
    ]
    assert restored.context_queue.items == agent.context_queue.items
    assert restored.context_queue.limit == 4
    assert restored.context_queue.tags == frozenset({"q"})
    assert restored.context_pool.items == agent.context_pool.items
    assert restored.context_pool.limit == 3
    assert restored.tags == frozenset({"a", "b"})
    assert restored.hooks == agent.hooks
    assert restored.turn_hooks == agent.turn_hooks


@ROUND_TRIPS
async def test_restored_agent_runs_with_its_hooks(
    agent: Agent, round_trip: Callable[[Agent], Agent], events: list[str]
) -> None:
    restored = round_trip(agent)
    assert events == []  # nothing fired while restoring

    assert await drain(restored) == ["later", "SHOUT"]
    await restored.context_queue.append(ContextItem(content="x"))
    await restored.context_pool.add(ContextItem(content="y", description="y", id="y"))

    assert events == [
        "turn output later",
        "on_complete completed",
        "after_turn echo",
        "on_complete completed",
        "after_turn echo.loud",
        "appended ['x']",
        "added y",
    ]


@ROUND_TRIPS
async def test_restored_paused_agent_stays_paused_until_resumed(
    agent: Agent, round_trip: Callable[[Agent], Agent]
) -> None:
    agent.pause()

    restored = round_trip(agent)

    assert restored.is_paused
    assert restored.to_dict()["is_paused"] is True
    consumer = asyncio.create_task(drain(restored))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not consumer.done()  # waiting at the pause
    restored.resume()
    assert await consumer == ["later", "SHOUT"]


async def test_run_results_are_saved_with_the_turns(echo: Tool[..., Any]) -> None:
    agent = Agent("saver", "d", [echo])
    done = Turn(echo, kwargs={"value": 1})
    await done.returning()
    await agent.put(done)

    saved = agent.to_dict()["queue"][0]

    assert saved["output"] == 1
    assert saved["metadata"]["stop_reason"] == "completed"
    restored = restore(agent.to_dict()).queue[0]
    assert restored.output == 1
    assert restored.metadata == done.metadata


async def test_dynamic_turn_arguments_are_evaluated_when_saved(echo: Tool[..., Any]) -> None:
    agent = Agent("saver", "d", [echo])
    await agent.put(Turn(echo, kwargs={"value": lambda: "evaluated"}))

    assert agent.to_dict()["queue"][0]["kwargs"] == {"value": "evaluated"}


# -- a turn in flight --------------------------------------------------------------------------


@pytest.mark.parametrize("saved_from", ["tool", "before_run", "paused-tool"])
async def test_turn_in_flight_is_restored_as_current_turn_and_runs_first(saved_from: str) -> None:
    snapshots: list[dict[str, Any]] = []
    agent: Agent

    @tool
    async def step(name: str) -> str:
        if name == "checkpoint" and saved_from != "before_run":
            if saved_from == "paused-tool":
                agent.pause()
            snapshots.append(agent.to_dict())
            agent.resume()
        return name

    agent = Agent("saver", "d", [step])

    @agent.before_run
    async def checkpoint(turn: Turn) -> None:
        if turn.kwargs["name"] == "checkpoint" and saved_from == "before_run":
            snapshots.append(agent.to_dict())

    for name in ("first", "checkpoint", "last"):
        await agent.put(Turn(step, kwargs={"name": name}))
    assert await drain(agent) == ["first", "checkpoint", "last"]

    (saved,) = snapshots
    assert saved["current_turn"]["kwargs"] == {"name": "checkpoint"}
    assert saved["current_turn"]["metadata"]["stop_reason"] is None
    assert [t["kwargs"] for t in saved["queue"]] == [{"name": "last"}]
    assert saved["is_paused"] is (saved_from == "paused-tool")

    AgentRegistry.unregister("saver")
    restored = Agent.from_json(json.dumps(saved))

    assert restored.current_turn is not None
    assert restored.current_turn.kwargs == {"name": "checkpoint"}
    assert [t.kwargs for t in restored.queue] == [{"name": "last"}]
    restored.resume()
    assert await drain(restored) == ["checkpoint", "last"]
    assert restored.current_turn is None


# -- optional keys ---------------------------------------------------------------------------------


async def test_from_dict_needs_only_name_description_and_tool_names(echo: Tool[..., Any]) -> None:
    restored = Agent.from_dict({"name": "minimal", "description": "d", "tool_names": ["echo"]})

    assert AgentRegistry.get("minimal") is restored
    assert restored.tools == [echo]
    assert restored.queue == []
    assert restored.current_turn is None
    assert restored.hooks == []
    assert restored.turn_hooks == []
    assert restored.context_queue.limit == 10
    assert restored.context_pool.limit is None
    assert not restored.is_paused
    assert restored.tags == frozenset()


@pytest.mark.parametrize("missing", AGENT_KEYS[3:])
async def test_from_dict_accepts_each_optional_key_missing(agent: Agent, missing: str) -> None:
    saved = agent.to_dict()
    del saved[missing]

    restored = restore(saved)

    assert AgentRegistry.get("saver") is restored
    kept = {k: v for k, v in restored.to_dict().items() if k != missing}
    assert kept == saved


@pytest.mark.parametrize("key", ["current_turn", "context_queue", "context_pool"])
async def test_from_dict_accepts_null_for_optional_objects(agent: Agent, key: str) -> None:
    saved = agent.to_dict()
    saved[key] = None

    restored = restore(saved)

    assert AgentRegistry.get("saver") is restored


# -- malformed input ----------------------------------------------------------------------


def _without(key: str) -> Callable[[dict[str, Any]], None]:
    def change(saved: dict[str, Any]) -> None:
        del saved[key]

    return change


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(saved: dict[str, Any]) -> None:
        saved[key] = value

    return change


def _set_in(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(saved: dict[str, Any]) -> None:
        target = saved
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


MALFORMED: list[tuple[str, Callable[[dict[str, Any]], None], type[Exception]]] = [
    ("missing-name", _without("name"), ValueError),
    ("missing-description", _without("description"), ValueError),
    ("missing-tool-names", _without("tool_names"), ValueError),
    ("unknown-key", _set("colour", "blue"), ValueError),
    ("name-not-str", _set("name", 7), ValueError),
    ("description-not-str", _set("description", 7), ValueError),
    ("tool-names-not-list", _set("tool_names", "echo"), ValueError),
    ("tool-names-not-str", _set("tool_names", [1]), ValueError),
    ("queue-not-list", _set("queue", {"tool_name": "echo"}), ValueError),
    ("queued-turn-not-dict", _set("queue", ["echo"]), ValueError),
    ("queued-turn-bad-timeout", _set_in(("queue", 0, "timeout"), -1), ValueError),
    ("current-turn-not-dict", _set("current_turn", ["echo"]), ValueError),
    ("is-paused-not-bool", _set("is_paused", "yes"), ValueError),
    ("tags-not-list", _set("tags", "a"), ValueError),
    ("tags-not-str", _set("tags", [1]), ValueError),
    ("hooks-not-dict", _set("hooks", ["record_after_turn"]), ValueError),
    ("hook-unknown-kind", _set("hooks", {"before_lunch": ["record_after_turn"]}), ValueError),
    ("hook-wrong-kind", _set("hooks", {"before_put": ["record_after_turn"]}), ValueError),
    ("turn-hooks-not-dict", _set("turn_hooks", "record_complete"), ValueError),
    ("context-queue-not-dict", _set("context_queue", [1]), ValueError),
    ("context-queue-over-limit", _set_in(("context_queue", "limit"), 1), ValueError),
    ("context-queue-bad-limit", _set_in(("context_queue", "limit"), "4"), ValueError),
    ("context-pool-not-dict", _set("context_pool", "pool"), ValueError),
    ("context-pool-item-without-id", _set_in(("context_pool", "items", 0, "id"), None), ValueError),
    ("context-item-without-content", _set_in(("context_queue", "items", 0), {}), ValueError),
    ("unknown-tool", _set("tool_names", ["echo", "os.system"]), UnregisteredToolError),
    ("unknown-turn-tool", _set_in(("queue", 0, "tool_name"), "missing"), UnregisteredToolError),
    ("unknown-agent-hook", _set("hooks", {"after_turn": ["nope"]}), UnregisteredHookError),
    ("unknown-turn-hook", _set("turn_hooks", {"on_complete": ["nope"]}), UnregisteredHookError),
    (
        "unknown-hook-of-a-queued-turn",
        _set_in(("queue", 0, "hooks"), {"after_run": ["nope"]}),
        UnregisteredHookError,
    ),
    (
        "unknown-queue-hook",
        _set_in(("context_queue", "hooks"), {"after_append": ["nope"]}),
        UnregisteredHookError,
    ),
    (
        "unknown-pool-hook",
        _set_in(("context_pool", "hooks"), {"after_add": ["nope"]}),
        UnregisteredHookError,
    ),
    (
        "module-attribute-hook",
        _set("hooks", {"after_turn": ["module_level_hook"]}),
        UnregisteredHookError,
    ),
    (
        "dotted-module-attribute-hook",
        _set("hooks", {"after_turn": [f"{__name__}.module_level_hook"]}),
        UnregisteredHookError,
    ),
]


@pytest.mark.parametrize(
    ("change", "error"), [(c, e) for _, c, e in MALFORMED], ids=[i for i, _, _ in MALFORMED]
)
async def test_malformed_saved_agent_raises_and_registers_nothing(
    agent: Agent, change: Callable[[dict[str, Any]], None], error: type[Exception]
) -> None:
    saved = agent.to_dict()
    AgentRegistry.unregister("saver")
    change(saved)

    with pytest.raises(error):
        Agent.from_dict(saved)

    assert_unregistered("saver")


@pytest.mark.parametrize("where", ["queue", "current_turn"])
async def test_saved_turn_for_a_tool_outside_tool_names_raises(agent: Agent, where: str) -> None:
    @tool
    async def stranger() -> None:
        return None

    saved = agent.to_dict()
    AgentRegistry.unregister("saver")
    stray = Turn(stranger).to_dict()
    if where == "queue":
        saved["queue"].append(stray)
    else:
        saved["current_turn"] = stray

    with pytest.raises(ValueError, match="stranger"):
        Agent.from_dict(saved)

    assert_unregistered("saver")


async def test_from_dict_under_a_taken_name_raises_and_keeps_the_live_agent(agent: Agent) -> None:
    with pytest.raises(ValueError, match="saver"):
        Agent.from_dict(agent.to_dict())

    assert AgentRegistry.get("saver") is agent


@pytest.mark.parametrize("data", ["not json", b"{", "[1, 2]", "null"])
def test_from_json_of_invalid_or_non_object_json_raises_value_error(data: str | bytes) -> None:
    with pytest.raises(ValueError, match=r"JSON|dict"):
        Agent.from_json(data)


def test_saved_hook_name_resolves_only_through_the_hook_registry(echo: Tool[..., Any]) -> None:
    saved = {
        "name": "loader",
        "description": "d",
        "tool_names": ["echo"],
        "hooks": {"after_turn": ["module_level_hook"]},
    }
    with pytest.raises(UnregisteredHookError, match="module_level_hook"):
        Agent.from_dict(saved)
    assert_unregistered("loader")

    HookRegistry.register(Hook(module_level_hook, (AgentHook.AFTER_TURN,)))
    restored = Agent.from_dict(saved)

    assert [h.fn for h in restored.hooks] == [module_level_hook]


# -- JSON ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (object(), r"context_queue\.items\[0\]\.content"),
        ({"when": datetime(2024, 1, 1, tzinfo=UTC)}, r"context_queue\.items\[0\]\.content\.when"),
        ({"nested": [1, {2, 3}]}, r"context_queue\.items\[0\]\.content\.nested\[1\]"),
    ],
    ids=["object", "datetime", "set-in-list"],
)
async def test_to_json_of_unjsonable_context_names_the_field(
    echo: Tool[..., Any], content: Any, field: str
) -> None:
    agent = Agent("saver", "d", [echo])
    await agent.context_queue.append(ContextItem(content=content))

    with pytest.raises(TypeError, match=field):
        agent.to_json()


async def test_to_json_of_unjsonable_turn_argument_names_the_field(echo: Tool[..., Any]) -> None:
    agent = Agent("saver", "d", [echo])
    await agent.put(Turn(echo, kwargs={"value": object()}))

    with pytest.raises(TypeError, match=r"queue\[0\]\.kwargs\.value"):
        agent.to_json()


class Mode(enum.Enum):
    FAST = "fast"


UNFAITHFUL = pytest.mark.parametrize(
    "value",
    [math.nan, -math.inf, Mode.FAST, uuid.UUID(int=3)],
    ids=["nan", "infinity", "enum", "uuid"],
)


async def _set_turn_argument(agent: Agent, value: Any) -> None:
    await agent.put(Turn("echo", kwargs={"value": value}))


async def _set_turn_output(agent: Agent, value: Any) -> None:
    turn = Turn("echo", kwargs={"value": 1})
    turn.output = value
    await agent.put(turn)


async def _set_queue_content(agent: Agent, value: Any) -> None:
    await agent.context_queue.append(ContextItem(content={"nested": [value]}))


async def _set_pool_content(agent: Agent, value: Any) -> None:
    await agent.context_pool.add(ContextItem(content=value, description="d", id="x"))


async def _set_description(agent: Agent, value: Any) -> None:
    agent.description = value


async def _set_queue_tags(agent: Agent, value: Any) -> None:
    agent.context_queue.tags = [value]  # type: ignore[assignment]


async def _set_pool_tags(agent: Agent, value: Any) -> None:
    agent.context_pool.tags = [value]  # type: ignore[assignment]


PLACES = [
    (_set_turn_argument, r"queue\[\d+\]\.kwargs\.value"),
    (_set_turn_output, r"queue\[\d+\]\.output"),
    (_set_queue_content, r"context_queue\.items\[\d+\]\.content\.nested\[0\]"),
    (_set_pool_content, r"context_pool\.items\[\d+\]\.content"),
    (_set_description, r"Agent\.description"),
    (_set_queue_tags, r"context_queue\.tags\[0\]"),
    (_set_pool_tags, r"context_pool\.tags\[0\]"),
]


@UNFAITHFUL
@pytest.mark.parametrize(("place", "field"), PLACES, ids=[p.__name__[5:] for p, _ in PLACES])
@pytest.mark.parametrize("padding", [0, 40], ids=["small", "large"])
async def test_to_json_refuses_what_json_would_not_give_back_wherever_users_put_it(
    echo: Tool[..., Any], place: Any, field: str, value: Any, padding: int
) -> None:
    agent = Agent("saver", "d", [echo], context_pool=ContextPool())
    for i in range(padding):  # enough to make the JSON large
        await agent.context_pool.add(ContextItem(content=f"doc {i}", description="d", id=f"{i}"))
    await place(agent, value)

    with pytest.raises(TypeError, match=field):
        agent.to_json()


@UNFAITHFUL
async def test_to_json_refuses_it_in_the_turn_in_flight_too(
    echo: Tool[..., Any], value: Any
) -> None:
    @tool
    async def checkpoint(mode: Any) -> bytes:
        return agent.to_json()

    agent = Agent("saver", "d", [echo, checkpoint])
    await agent.put(Turn(checkpoint, kwargs={"mode": value}))

    with pytest.raises(TypeError, match=r"current_turn\.kwargs\.mode"):
        await drain(agent)


async def test_agent_loaded_from_json_keeps_no_link_to_what_it_saves(
    agent: Agent,
) -> None:
    restored = _via_json_bytes(agent)

    saved = restored.to_dict()
    saved["queue"][0]["kwargs"]["value"] = "changed"
    saved["context_queue"]["items"][0]["content"] = "changed"

    assert restored.queue[0].kwargs == {"value": "later"}
    assert restored.context_queue.items[0].content == {"text": "hi"}
    assert await drain(restored) == ["later", "SHOUT"]
