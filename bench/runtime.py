"""The runtime: the agent loop, hooks, generators, routing, queue/pool, saving, branching."""

from __future__ import annotations

import asyncio
import copy
from collections import OrderedDict, deque
from typing import Any

import orjson

from bench.harness import Result, compare
from pygents_ctx import (
    Agent,
    AgentHook,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    HookRegistry,
    ToolRegistry,
    Turn,
    TurnHook,
    hook,
    tool,
)


async def plain(x: int) -> int:
    return x


async def plain_values(x: int) -> Any:
    for i in range(10):
        yield i


async def noop(*args: Any) -> None:
    return None


def _reset() -> None:
    ToolRegistry.clear()
    AgentRegistry.clear()
    HookRegistry.clear()


def _turn_loop(agent: Agent, make_turn: Any) -> tuple[Any, Any]:
    async def prepare(n: int) -> None:
        agent._turns.extend(make_turn(i) for i in range(n))

    async def ours(n: int) -> None:
        async for _ in agent.run():
            pass

    return prepare, ours


async def agent_loop(turns: int) -> list[Result]:
    _reset()
    echo = tool(plain)
    agent = Agent("bench", "agent loop", [echo])
    prepare, ours = _turn_loop(agent, lambda i: Turn(echo, args=[i]))

    async def floor(n: int) -> None:
        for i in range(n):
            await plain(i)

    # The bound on a trivial turn (the per-turn ratio targets are retired, #35).
    results = [
        await compare(
            "agent loop, coroutine tool", ours, floor, turns, None, prepare, bound_ns=10_000
        )
    ]

    for kind in (AgentHook.BEFORE_TURN, AgentHook.AFTER_TURN, TurnHook.BEFORE_RUN):
        hook(kind)(_fresh_noop(kind.value))

    async def floor_hooks(n: int) -> None:
        for i in range(n):
            await noop()
            await noop()
            await plain(i)
            await noop()

    results.append(
        await compare("agent loop + 3 no-op hooks", ours, floor_hooks, turns, None, prepare)
    )
    return results


async def checked_int(x: int) -> int:
    return x


async def unchecked_int(x: int) -> int:
    return x


async def checked_search(
    query: str, limit: int = 10, exact: bool = False, tags: list[str] | None = None
) -> str:
    return query


async def unchecked_search(
    query: str, limit: int = 10, exact: bool = False, tags: list[str] | None = None
) -> str:
    return query


async def checked_untyped(x, y=None):  # type: ignore[no-untyped-def]
    return x


async def unchecked_untyped(x, y=None):  # type: ignore[no-untyped-def]
    return x


async def argument_checks(turns: int) -> list[Result]:
    """What checking a tool call's arguments costs: the agent loop with it, against without.

    Ours runs tools made with `@tool` (checked); the floor runs the same
    functions made with `@tool(validate=False)`. Both put their turns on the
    queue inside the timed step, so the difference is the check alone.
    """
    results = []
    cases = (
        ("argument check: one int", checked_int, unchecked_int, _one_int),
        ("argument check: 3 kwargs, one a list", checked_search, unchecked_search, _search),
        ("argument check: untyped", checked_untyped, unchecked_untyped, _one_int),
    )
    for name, checked_fn, unchecked_fn, arguments in cases:
        _reset()
        checked, unchecked = tool(checked_fn), tool(validate=False)(unchecked_fn)
        ours = _queue_and_run(Agent("checked", "argument checks", [checked]), arguments)
        floor = _queue_and_run(Agent("unchecked", "argument checks", [unchecked]), arguments)
        results.append(await compare(name, ours, floor, turns, None))
    return results


def _queue_and_run(agent: Agent, arguments: Any) -> Any:
    """A step that queues `n` turns of the agent's tool, then runs them all."""
    [made] = agent.tools

    async def step(n: int) -> None:
        agent._turns.extend(Turn(made, *arguments(i)) for i in range(n))
        async for _ in agent.run():
            pass

    return step


def _one_int(i: int) -> tuple[list[int], None]:
    return [i], None


def _search(i: int) -> tuple[None, dict[str, Any]]:
    return None, {"query": "tides", "limit": i, "tags": ["sea", "moon"]}


def _fresh_noop(name: str) -> Any:
    async def hook_fn(*args: Any) -> None:
        return None

    hook_fn.__name__ = f"noop_{name}"
    return hook_fn


async def turn_costs(turns: int) -> list[Result]:
    """What a turn costs beyond the plain one, for the Performance docs (no targets).

    Run it after the other agent scenarios: once a tool reads its queue, every
    agent in the process sets the context variable around its turns.
    """
    results = []
    window: ContextQueue[Any] = ContextQueue(100)
    for name, make in (
        ("agent loop, tool with its own hook", _tool_with_hook),
        ("agent loop, tool with lock=True", lambda: tool(lock=True)(plain)),
        ("agent loop, tool that suspends", lambda: tool(suspends)),
        ("agent loop, tool reading its queue", lambda: tool(reads_queue)),
    ):
        _reset()
        made = make()
        agent = Agent("bench", "costs", [made], context_queue=window)
        prepare, ours = _turn_loop(agent, lambda i, made=made: Turn(made, args=[i]))

        async def floor(n: int, fn: Any = made.fn) -> None:
            for i in range(n):
                await (fn(i, window) if fn is reads_queue else fn(i))

        results.append(await compare(name, ours, floor, turns, None, prepare))
    return results


def _tool_with_hook() -> Any:
    made = tool(plain)
    made.after_invoke(noop)
    return made


async def reads_queue(x: int, queue: ContextQueue[Any]) -> int:
    return x


async def suspends(x: int) -> int:
    await asyncio.sleep(0)
    return x


async def generator_loop(turns: int) -> Result:
    _reset()
    values = tool(plain_values)
    agent = Agent("bench", "generator", [values])
    prepare, ours = _turn_loop(agent, lambda i: Turn(values, args=[i]))

    async def floor(n: int) -> None:
        for i in range(n):
            async for _ in plain_values(i):
                pass

    result = await compare("generator tool, per value", ours, floor, turns, None, prepare)
    return Result(result.name, result.ours_ns / 10, result.floor_ns / 10, result.target)


async def routing(turns: int) -> list[Result]:
    _reset()

    @tool
    async def note(i: int) -> ContextItem[int]:
        return ContextItem(content=i)

    @tool
    async def document(i: int) -> ContextItem[int]:
        return ContextItem(content=i, description="d", id=str(i))

    agent = Agent(
        "bench",
        "routing",
        [note, document],
        context_queue=ContextQueue(100),
        context_pool=ContextPool(1000),
    )
    window: deque[Any] = deque(maxlen=100)
    table: OrderedDict[str, Any] = OrderedDict()

    async def make(i: int) -> ContextItem[int]:
        return ContextItem(content=i)

    async def floor_queue(n: int) -> None:
        for i in range(n):
            window.append(await make(i))

    async def make_doc(i: int) -> ContextItem[int]:
        return ContextItem(content=i, description="d", id=str(i))

    async def floor_pool(n: int) -> None:
        for i in range(n):
            item = await make_doc(i)
            table[item.id] = item  # type: ignore[index]
            if len(table) > 1000:
                table.popitem(last=False)

    prepare_q, ours_q = _turn_loop(agent, lambda i: Turn(note, args=[i]))
    prepare_p, ours_p = _turn_loop(agent, lambda i: Turn(document, args=[i]))
    return [
        await compare("routing into the queue", ours_q, floor_queue, turns, None, prepare_q),
        await compare("routing into the pool", ours_p, floor_pool, turns, None, prepare_p),
    ]


async def queue_and_pool(ops: int) -> list[Result]:
    _reset()
    item = ContextItem(content=1)
    queue: ContextQueue[int] = ContextQueue(100)
    window: deque[Any] = deque(maxlen=100)

    async def ours(n: int) -> None:
        for _ in range(n):
            await queue.append(item)

    async def floor(n: int) -> None:
        for _ in range(n):
            window.append(item)

    results = [await compare("ContextQueue.append, no hooks", ours, floor, ops, 20)]

    hooked: ContextQueue[int] = ContextQueue(100)
    hooked.after_append(noop)

    async def ours_hooked(n: int) -> None:
        for _ in range(n):
            await hooked.append(item)

    async def floor_hooked(n: int) -> None:
        for _ in range(n):
            window.append(item)
            await noop()

    results.append(
        await compare("ContextQueue.append, one hook", ours_hooked, floor_hooked, ops, 4)
    )

    docs = [ContextItem(content=i, description="d", id=str(i)) for i in range(ops)]
    pool: ContextPool[int] = ContextPool(1000)
    table: OrderedDict[str, Any] = OrderedDict()

    async def ours_pool(n: int) -> None:
        for doc in docs[:n]:
            await pool.add(doc)

    async def floor_pool(n: int) -> None:
        for doc in docs[:n]:
            table[doc.id] = doc  # type: ignore[index]
            if len(table) > 1000:
                table.popitem(last=False)

    results.append(await compare("ContextPool.add, evicting", ours_pool, floor_pool, ops, 1.5))
    return results


async def _loaded_agent() -> Agent:
    _reset()

    @tool
    async def work(i: int, label: str) -> int:
        return i

    agent = Agent(
        "loaded",
        "serialization",
        [work],
        context_queue=ContextQueue(1000),
        context_pool=ContextPool(1000),
    )
    for i in range(1000):
        await agent.put(Turn(work, kwargs={"i": i, "label": f"turn {i}"}))
        await agent.context_queue.append(ContextItem(content={"text": f"note {i}", "n": i}))
        await agent.context_pool.add(
            ContextItem(content={"text": f"doc {i}"}, description=f"document {i}", id=f"d{i}")
        )
    return agent


async def saving_and_branching(ops: int) -> list[Result]:
    agent = await _loaded_agent()
    plain_data = agent.to_dict()

    async def ours(n: int) -> None:
        for _ in range(n):
            data = agent.to_json()
            AgentRegistry.unregister("loaded")
            Agent.from_json(data)

    async def floor(n: int) -> None:
        for _ in range(n):
            orjson.loads(orjson.dumps(plain_data))

    results = [await compare("to_json + from_json, loaded agent", ours, floor, ops, 3)]
    agent = AgentRegistry.get("loaded")
    turns, notes, docs = agent.queue, agent.context_queue.items, agent.context_pool.items

    async def ours_branch(n: int) -> None:
        for _ in range(n):
            agent.branch("child")  # unreferenced, it gives its name up at once

    async def floor_branch(n: int) -> None:
        for _ in range(n):
            [copy.copy(t) for t in turns]
            list(notes)
            {d.id: d for d in docs}

    results.append(await compare("branch(), loaded agent", ours_branch, floor_branch, ops, 5))
    results += await _first_uses(agent, plain_data, ops)
    return results


async def _first_uses(agent: Agent, plain_data: dict[str, Any], ops: int) -> list[Result]:
    """A branch and a loaded agent, then used: every turn, item and document read.

    Nothing is deferred (a branch copies its queued turns when it is made, and
    a loaded agent builds its turns and its queue's and pool's items while
    loading), so these rows show what reading them all adds. The floors are
    those of the branch and load rows above: copying each turn, and orjson's
    round trip of the saved data.
    """
    turns = agent.queue
    data = orjson.dumps(plain_data)

    def use(target: Agent) -> None:
        for turn in target.queue:  # every turn, item and document is built by now
            turn.kwargs  # noqa: B018 (reading is the point)
        list(target.context_queue)
        list(target.context_pool)

    async def ours_branch(n: int) -> None:
        for _ in range(n):
            use(agent.branch("child"))  # then unreferenced: it gives its name up

    async def floor_branch(n: int) -> None:
        for _ in range(n):
            [copy.copy(t) for t in turns]

    async def ours_load(n: int) -> None:
        for _ in range(n):
            AgentRegistry.unregister("loaded")
            use(Agent.from_json(data))

    async def floor_load(n: int) -> None:
        for _ in range(n):
            orjson.loads(orjson.dumps(plain_data))

    return [
        await compare("branch(), then its queue and items", ours_branch, floor_branch, ops, None),
        await compare("from_json, then its queue and items", ours_load, floor_load, ops, None),
    ]
