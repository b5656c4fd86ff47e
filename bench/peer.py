"""Head to head with pygents 0.7.0: the same public calls on both, in one process.

`python -m bench --peer` runs this module inside a Python 3.12 virtualenv that
holds both packages (`bench/.peer/`, made on first use, see `bench/peer_env.py`).
Each scenario is written once against the names both packages export, so the
two sides do exactly the same work through their public API; they are timed
interleaved (pygents, then ours, repeat) so that machine noise hits both alike.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import orjson

from bench.harness import REPEATS, per_op

Step = Callable[[int], Awaitable[None]]

TURNS = 1_000  # queued turns per timed run of the agent scenarios
HELD = 1_000  # items in the full queue and pool of the state scenarios


@dataclass(frozen=True)
class Scenario:
    """What to time on one package: `run(ops)` after an untimed `prepare(ops)`."""

    run: Step
    ops: int
    prepare: Step | None = None
    per: int = 1  # operations per counted op (a generator turn yields `per` values)


@dataclass(frozen=True)
class Row:
    """One scenario's µs per operation on each side."""

    name: str
    peer_us: float
    ours_us: float

    @property
    def speedup(self) -> float:
        return self.peer_us / self.ours_us


def reset(m: ModuleType) -> None:
    m.ToolRegistry.clear()
    m.AgentRegistry.clear()
    m.HookRegistry.clear()


async def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _hook_fn(name: str) -> Callable[..., Awaitable[None]]:
    async def fn(*args: Any, **kwargs: Any) -> None:
        return None

    fn.__name__ = name  # hooks register under their function's name
    return fn


def _drain(agent: Any, make_turn: Callable[[int], Any]) -> tuple[Step, Step]:
    async def prepare(n: int) -> None:
        for i in range(n):
            await agent.put(make_turn(i))

    async def run(n: int) -> None:
        async for _ in agent.run():
            pass

    return prepare, run


async def agent_loop(m: ModuleType) -> Scenario:
    reset(m)

    async def echo(x: int) -> int:
        return x

    work = m.tool(echo)
    prepare, run = _drain(m.Agent("loop", "agent loop", [work]), lambda i: m.Turn(work, args=[i]))
    return Scenario(run, TURNS, prepare)


async def agent_loop_hooks(m: ModuleType) -> Scenario:
    scenario = await agent_loop(m)
    m.hook(m.AgentHook.BEFORE_TURN)(_hook_fn("before_turn_noop"))
    m.hook(m.AgentHook.AFTER_TURN)(_hook_fn("after_turn_noop"))
    m.hook(m.TurnHook.BEFORE_RUN)(_hook_fn("before_run_noop"))
    return scenario


async def generator_values(m: ModuleType) -> Scenario:
    reset(m)

    async def count(x: int) -> Any:
        for i in range(10):
            yield i

    values = m.tool(count)
    agent = m.Agent("gen", "generator", [values])
    prepare, run = _drain(agent, lambda i: m.Turn(values, args=[i]))
    return Scenario(run, TURNS // 10, prepare, per=10)


async def routing_queue(m: ModuleType) -> Scenario:
    reset(m)

    async def note(i: int) -> Any:
        return m.ContextItem(content=i)

    made = m.tool(note)
    agent = m.Agent("route", "routing", [made], context_queue=m.ContextQueue(limit=HELD))
    prepare, run = _drain(agent, lambda i: m.Turn(made, args=[i]))
    return Scenario(run, TURNS, prepare)


async def routing_pool(m: ModuleType) -> Scenario:
    reset(m)

    async def document(i: int) -> Any:
        return m.ContextItem(content=i, description="d", id=str(i))

    made = m.tool(document)
    agent = m.Agent("route", "routing", [made], context_pool=m.ContextPool(limit=HELD))
    prepare, run = _drain(agent, lambda i: m.Turn(made, args=[i]))
    return Scenario(run, TURNS, prepare)


async def _full_queue(m: ModuleType) -> Any:
    queue = m.ContextQueue(limit=HELD)
    for i in range(HELD):
        await queue.append(m.ContextItem(content=i))
    return queue


async def queue_append(m: ModuleType, hooked: bool = False) -> Scenario:
    reset(m)
    queue = await _full_queue(m)
    if hooked:
        queue.after_append(_hook_fn("after_append_noop"))
    items = [m.ContextItem(content=i) for i in range(TURNS)]

    async def run(n: int) -> None:
        for item in items[:n]:
            await queue.append(item)

    return Scenario(run, TURNS)


async def queue_append_hooked(m: ModuleType) -> Scenario:
    return await queue_append(m, hooked=True)


async def pool_add(m: ModuleType) -> Scenario:
    reset(m)
    pool = m.ContextPool(limit=HELD)
    for i in range(HELD):
        await pool.add(m.ContextItem(content=i, description="d", id=f"old{i}"))
    docs = [m.ContextItem(content=i, description="d", id=str(i)) for i in range(TURNS)]

    async def run(n: int) -> None:
        for doc in docs[:n]:
            await pool.add(doc)

    return Scenario(run, TURNS)


async def loaded_agent(m: ModuleType, size: int = TURNS) -> Any:
    """An agent with `size` (1,000) queued turns and a full queue and pool of `size` items."""
    reset(m)

    async def work(i: int, label: str) -> int:
        return i

    made = m.tool(work)
    agent = m.Agent(
        "loaded",
        "saving and branching",
        [made],
        context_queue=m.ContextQueue(limit=size),
        context_pool=m.ContextPool(limit=size),
    )
    for i in range(size):
        await agent.put(m.Turn(made, kwargs={"i": i, "label": f"turn {i}"}))
        await agent.context_queue.append(m.ContextItem(content={"text": f"note {i}", "n": i}))
        await agent.context_pool.add(
            m.ContextItem(content={"text": f"doc {i}"}, description=f"document {i}", id=f"d{i}")
        )
    return agent


async def save_load(m: ModuleType) -> Scenario:
    agent = await loaded_agent(m)
    registry = m.AgentRegistry

    async def run(n: int) -> None:
        for _ in range(n):
            data = orjson.loads(orjson.dumps(agent.to_dict()))
            registry.unregister("loaded")
            m.Agent.from_dict(data)

    return Scenario(run, 5)


async def save_load_read(m: ModuleType) -> Scenario:
    """As `save_load`, then the loaded agent is used: every item of its queue and pool read."""
    agent = await loaded_agent(m)
    registry = m.AgentRegistry

    async def run(n: int) -> None:
        for _ in range(n):
            data = orjson.loads(orjson.dumps(agent.to_dict()))
            registry.unregister("loaded")
            loaded = m.Agent.from_dict(data)
            for item in loaded.context_queue.items:
                _ = item.content
            for item in loaded.context_pool.items:
                _ = item.content, item.id

    return Scenario(run, 5)


async def branch(m: ModuleType) -> Scenario:
    agent = await loaded_agent(m)
    registry = m.AgentRegistry
    names = [f"child{i}" for i in range(50)]

    async def prepare(n: int) -> None:
        for name in names[:n]:
            with contextlib.suppress(Exception):  # not registered before the first run
                registry.unregister(name)

    async def run(n: int) -> None:
        for name in names[:n]:
            agent.branch(name)

    return Scenario(run, len(names), prepare)


SCENARIOS: list[tuple[str, Callable[[ModuleType], Awaitable[Scenario]]]] = [
    ("agent loop, coroutine tool", agent_loop),
    ("agent loop + 3 hooks", agent_loop_hooks),
    ("generator tool, per value", generator_values),
    ("routing into the queue", routing_queue),
    ("routing into the pool", routing_pool),
    ("ContextQueue.append", queue_append),
    ("ContextQueue.append, one hook", queue_append_hooked),
    ("ContextPool.add, evicting", pool_add),
    ("to_dict -> orjson -> from_dict, loaded agent", save_load),
    ("to_dict -> orjson -> from_dict, loaded agent, then its queue and pool read", save_load_read),
    ("branch(), loaded agent", branch),
]


async def head_to_head(peer: ModuleType, ours: ModuleType) -> list[Row]:
    """Every scenario on both packages, interleaved, as µs per operation."""
    rows = []
    for name, make in SCENARIOS:
        theirs, mine = await make(peer), await make(ours)
        peer_samples, our_samples = [], []
        for _ in range(REPEATS):
            peer_samples.append(await _time(theirs))
            our_samples.append(await _time(mine))
        rows.append(Row(name, statistics.median(peer_samples), statistics.median(our_samples)))
        reset(peer)
        reset(ours)
    return rows


async def _time(scenario: Scenario) -> float:
    ns = await per_op(scenario.run, scenario.ops, scenario.prepare, repeats=1)
    return ns / scenario.per / 1_000


def geometric_mean(rows: list[Row]) -> float:
    return math.exp(statistics.fmean(math.log(r.speedup) for r in rows))
