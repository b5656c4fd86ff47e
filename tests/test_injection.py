"""Context injection: tools and hooks that declare a `ContextQueue` / `ContextPool` parameter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Optional

import pytest

from pygents_ctx import (
    Agent,
    AgentHook,
    ContextItem,
    ContextPool,
    ContextQueue,
    Tool,
    ToolHook,
    Turn,
    hook,
    tool,
)


async def drain(agent: Agent) -> list[Any]:
    """Run `agent` to the end and collect the yielded values."""
    return [value async for _, value in agent.run()]


def make_agent(name: str, *tools: Tool[..., Any]) -> Agent:
    """An agent with stores of its own, told apart by their tags."""
    return Agent(
        name,
        f"agent {name}",
        list(tools),
        context_queue=ContextQueue(limit=5, tags=[name]),
        context_pool=ContextPool(tags=[name]),
    )


# -- tools --------------------------------------------------------------------------------


def _context_tools() -> dict[str, Tool[..., Any]]:
    @tool
    async def queue_required(queue: ContextQueue) -> Any:
        return queue

    @tool
    async def queue_optional(queue: ContextQueue | None = None) -> Any:
        return queue

    @tool
    async def queue_typing_optional(queue: Optional[ContextQueue[str]] = None) -> Any:  # noqa: UP045
        return queue

    @tool
    async def queue_generic(queue: ContextQueue[str]) -> Any:
        return queue

    @tool
    async def pool_required(pool: ContextPool) -> Any:
        return pool

    @tool
    async def pool_optional(pool: ContextPool | None = None) -> Any:
        return pool

    @tool
    async def queue_keyword_only(*, memory: ContextQueue) -> Any:
        return memory

    @tool
    async def queue_from_generator(queue: ContextQueue) -> AsyncIterator[Any]:
        yield queue

    return {
        t.key: t
        for t in (
            queue_required,
            queue_optional,
            queue_typing_optional,
            queue_generic,
            pool_required,
            pool_optional,
            queue_keyword_only,
            queue_from_generator,
        )
    }


_EXPECTED_SLOT = {
    "queue_required": "context_queue",
    "queue_optional": "context_queue",
    "queue_typing_optional": "context_queue",
    "queue_generic": "context_queue",
    "pool_required": "context_pool",
    "pool_optional": "context_pool",
    "queue_keyword_only": "context_queue",
    "queue_from_generator": "context_queue",
}


@pytest.mark.parametrize("name", sorted(_EXPECTED_SLOT))
async def test_tool_context_parameter_receives_the_running_agents_store(name: str) -> None:
    tools = _context_tools()
    agent = make_agent("alpha", *tools.values())
    await agent.put(Turn(name))

    assert await drain(agent) == [getattr(agent, _EXPECTED_SLOT[name])]


@pytest.mark.parametrize(
    ("annotation", "slot"),
    [
        ("ContextQueue", "context_queue"),
        ("ContextPool[str] | None", "context_pool"),
        ("pygents_ctx.ContextQueue", "context_queue"),
    ],
)
async def test_an_annotation_left_as_text_still_receives_the_store(
    annotation: str, slot: str
) -> None:
    async def read(store: Any) -> Any:
        return store

    read.__annotations__["store"] = annotation  # as if it could not be resolved
    read.__annotations__["return"] = "Unresolvable"
    reader = tool(read)
    agent = make_agent("alpha", reader)
    await agent.put(Turn(reader))

    assert await drain(agent) == [getattr(agent, slot)]


async def test_tool_receives_both_stores_and_reads_them() -> None:
    @tool
    async def recall(question: str, memory: ContextQueue, docs: ContextPool) -> str:
        notes = [item.content for item in memory]
        return f"{question}: {notes} {docs.catalogue()}"

    agent = make_agent("alpha", recall)
    await agent.context_queue.append(ContextItem(content="n1"))
    await agent.context_pool.add(ContextItem(content="x", description="Q3 report", id="q3"))
    await agent.put(Turn(recall, kwargs={"question": "q"}))

    assert await drain(agent) == ["q: ['n1'] - [q3] Q3 report"]


@pytest.mark.parametrize("how", ["kwargs", "args"])
async def test_explicit_turn_argument_wins_over_injection(how: str) -> None:
    @tool
    async def look(queue: ContextQueue, pool: ContextPool | None = None) -> Any:
        return queue, pool

    other_queue: ContextQueue[Any] = ContextQueue(limit=1)
    other_pool: ContextPool[Any] = ContextPool()
    agent = make_agent("alpha", look)
    if how == "kwargs":
        turn = Turn(look, kwargs={"queue": other_queue, "pool": other_pool})
    else:
        turn = Turn(look, args=[other_queue, other_pool])
    await agent.put(turn)

    assert await drain(agent) == [(other_queue, other_pool)]


async def test_explicit_argument_for_one_parameter_leaves_the_other_injected() -> None:
    @tool
    async def look(queue: ContextQueue, pool: ContextPool) -> Any:
        return queue, pool

    other_queue: ContextQueue[Any] = ContextQueue(limit=1)
    agent = make_agent("alpha", look)
    await agent.put(Turn(look, kwargs={"queue": other_queue}))

    assert await drain(agent) == [(other_queue, agent.context_pool)]


# -- hooks ---------------------------------------------------------------------------------


async def test_hooks_receive_the_running_agents_stores() -> None:
    seen: dict[str, tuple[Any, Any]] = {}

    @tool
    async def work() -> str:
        return "done"

    agent = make_agent("alpha", work)

    @agent.before_turn
    async def agent_hook(agent: Agent, queue: ContextQueue, pool: ContextPool) -> None:
        seen["before_turn"] = (queue, pool)

    @agent.on_turn_value
    async def value_hook(
        agent: Agent, turn: Turn, value: Any, queue: ContextQueue, pool: ContextPool | None = None
    ) -> None:
        seen["on_turn_value"] = (queue, pool)

    @agent.before_run
    async def turn_hook(turn: Turn, queue: ContextQueue, pool: ContextPool) -> None:
        seen["before_run"] = (queue, pool)

    @work.before_invoke
    async def tool_hook(queue: ContextQueue, pool: ContextPool) -> None:
        seen["before_invoke"] = (queue, pool)

    @hook(AgentHook.AFTER_TURN)
    async def global_hook(agent: Agent, turn: Turn, queue: ContextQueue | None = None) -> None:
        seen["after_turn"] = (queue, None)

    await agent.put(Turn(work))
    assert await drain(agent) == ["done"]

    both = (agent.context_queue, agent.context_pool)
    assert seen == {
        "before_turn": both,
        "on_turn_value": both,
        "before_run": both,
        "before_invoke": both,
        "after_turn": (agent.context_queue, None),
    }


async def test_context_store_hooks_get_the_store_positionally_not_injected() -> None:
    seen: list[Any] = []

    @tool
    async def note() -> ContextItem[str]:
        return ContextItem(content="n")

    queue: ContextQueue[Any] = ContextQueue(limit=3)
    agent = Agent("alpha", "d", [note], context_queue=queue)

    @queue.before_append
    async def appending(queue: ContextQueue, incoming: list[Any], current: list[Any]) -> None:
        seen.append(queue)

    await agent.put(Turn(note))
    await drain(agent)

    assert seen == [queue]


# -- outside an agent -----------------------------------------------------------------------


async def test_required_context_parameter_outside_an_agent_raises_type_error() -> None:
    tools = _context_tools()

    with pytest.raises(TypeError, match="queue"):
        await tools["queue_required"]()
    with pytest.raises(TypeError, match="pool"):
        await Turn("pool_required").returning()
    with pytest.raises(TypeError, match="memory"):
        await tools["queue_keyword_only"]()
    with pytest.raises(TypeError, match="queue"):
        async for _ in tools["queue_from_generator"]():
            pass


@pytest.mark.parametrize("name", ["queue_optional", "queue_typing_optional", "pool_optional"])
async def test_optional_context_parameter_outside_an_agent_gets_none(name: str) -> None:
    tools = _context_tools()

    assert await tools[name]() is None
    assert await Turn(name).returning() is None


async def test_hook_context_parameters_outside_an_agent() -> None:
    @tool
    async def work() -> str:
        return "done"

    seen: list[Any] = []
    optional_turn = Turn(work)

    @optional_turn.before_run
    async def optional(turn: Turn, queue: ContextQueue | None = None) -> None:
        seen.append(queue)

    required_turn = Turn(work)

    @required_turn.before_run
    async def required(turn: Turn, pool: ContextPool) -> None:
        seen.append(pool)

    assert await optional_turn.returning() == "done"
    with pytest.raises(TypeError, match="pool"):
        await required_turn.returning()
    assert seen == [None]


async def test_global_tool_hook_outside_an_agent_gets_none() -> None:
    seen: list[Any] = []

    @hook(ToolHook.AFTER_INVOKE)
    async def after(result: Any, queue: ContextQueue | None = None) -> None:
        seen.append(queue)

    @tool
    async def work() -> str:
        return "done"

    await work()
    agent = make_agent("alpha", work)
    await agent.put(Turn(work))
    await drain(agent)

    assert seen == [None, agent.context_queue]


# -- isolation between agents ------------------------------------------------------------------


def _probe_tools(record: list[tuple[str, str]]) -> tuple[Tool[..., Any], Tool[..., Any]]:
    """A coroutine tool and a generator tool that report the queue they see, step by step."""

    @tool
    async def whoami(queue: ContextQueue) -> str:
        (tag,) = queue.tags
        return tag

    @tool
    async def probe(owner: str, steps: int = 4) -> str:
        for _ in range(steps):
            await asyncio.sleep(0)
            record.append((owner, await whoami()))
        return owner

    @tool
    async def probe_stream(owner: str, steps: int = 4) -> AsyncIterator[str]:
        for step in range(steps):
            await asyncio.sleep(0)
            record.append((owner, await whoami()))
            yield f"{owner}{step}"

    @probe.before_invoke
    async def seen_by_hook(owner: str, queue: ContextQueue, **kwargs: Any) -> None:
        record.append((owner, next(iter(queue.tags))))

    return probe, probe_stream


async def _queue_turns(agent: Agent, probe: Tool[..., Any], stream: Tool[..., Any]) -> None:
    for _ in range(3):
        await agent.put(Turn(probe, kwargs={"owner": agent.name}))
        await agent.put(Turn(stream, kwargs={"owner": agent.name}))


async def test_agents_running_concurrently_never_see_each_others_stores() -> None:
    record: list[tuple[str, str]] = []
    probe, stream = _probe_tools(record)
    agents = [make_agent(name, probe, stream) for name in "ab"]
    for agent in agents:
        await _queue_turns(agent, probe, stream)

    results = await asyncio.gather(*(drain(agent) for agent in agents))

    assert [r[:2] for r in results] == [["a", "a0"], ["b", "b0"]]
    owners = [owner for owner, _ in record]
    assert owners != sorted(owners)  # the two runs really interleaved
    assert all(owner == seen for owner, seen in record)


async def test_agent_runs_interleaved_in_one_task_never_see_each_others_stores() -> None:
    record: list[tuple[str, str]] = []
    probe, stream = _probe_tools(record)
    agents = [make_agent(name, probe, stream) for name in "ab"]
    for agent in agents:
        await _queue_turns(agent, probe, stream)
    runs = [agent.run() for agent in agents]
    produced: list[str] = []

    while runs:
        for run in list(runs):
            try:
                _, value = await anext(run)
            except StopAsyncIteration:
                runs.remove(run)
            else:
                produced.append(value)

    assert produced[:4] == ["a", "b", "a0", "b0"]
    assert len(produced) == 2 * 3 * 5
    assert all(owner == seen for owner, seen in record)


async def test_caller_code_between_yielded_values_runs_outside_the_agent() -> None:
    @tool
    async def needs_queue(queue: ContextQueue) -> str:
        return "had a queue"

    @tool
    async def maybe_queue(queue: ContextQueue | None = None) -> Any:
        return queue

    @tool
    async def stream() -> AsyncIterator[int]:
        for i in range(2):
            yield i

    agent = make_agent("alpha", stream)
    await agent.put(Turn(stream))
    outside: list[Any] = []

    async for _, _value in agent.run():
        with pytest.raises(TypeError, match="queue"):
            await needs_queue()
        outside.append(await maybe_queue())

    assert outside == [None, None]
    with pytest.raises(TypeError, match="queue"):
        await needs_queue()


async def test_tool_run_by_a_task_spawned_from_a_turn_keeps_that_agents_stores() -> None:
    @tool
    async def whoami(queue: ContextQueue) -> str:
        (tag,) = queue.tags
        return tag

    @tool
    async def spawn() -> str:
        return await asyncio.create_task(whoami())

    agent = make_agent("alpha", spawn)
    await agent.put(Turn(spawn))

    assert await drain(agent) == ["alpha"]
