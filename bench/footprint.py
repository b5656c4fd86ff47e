"""Peak memory (tracemalloc): a long agent run, and branches that never run.

- A `steps`-step agent run: each step is a generator turn that yields an
  assistant tool call and the user message with its ~2 KB result (both routed
  into a token-bounded `ContextQueue` and recorded in a SQLite store, a file in
  a temporary directory) and then the next step's turn. Measured without and
  with `prompt_window()` (`FitTokens(8000)`) before each step, as a model loop
  would call it: the store keeps the history it has read in memory, so that
  run grows with the conversation, by design; the rest must not.
- Branches of a loaded agent (queued turns and a full queue and pool of the
  same size) kept alive and never run: the memory per branch, for two sizes of
  the parent's state and two numbers of branches. Flat means it depends on
  neither: a branch shares its parent's items until it needs its own (it copies the
  queued turns, so their number shows).
- Requests served in an `AgentScope` (two agents of fixed names, a closure
  hook, a branch merged back): the memory still held after 1,000 and after
  10,000 of them. Flat means zero: nothing of a request outlives it.

- `pygents-ctx import` and `export` of a session file of a million messages
  (a hundred thousand with `--quick`): the peak RSS of each command's whole
  process (see `bench/transfer.py`), beside a process that only imports the
  command line. Flat means bounded: it does not grow with the file.

Other peaks are of the Python heap only (SQLite's own cache is not traced).
"""

from __future__ import annotations

import gc
import tempfile
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygents_ctx
from bench import peer
from bench.strategies import OUTPUT
from bench.transfer import transfer_rows
from pygents_ctx import (
    Agent,
    AgentRegistry,
    AgentScope,
    ContextConfig,
    ContextItem,
    ContextQueue,
    FitTokens,
    HookRegistry,
    Message,
    ToolRegistry,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    tool,
)
from pygents_ctx.context.stores import SQLiteContextStore, connect

STATE_SIZES = (100, 1_000)  # queued turns, and items in the queue and in the pool
BRANCH_COUNTS = (10, 100)


@dataclass(frozen=True)
class Memory:
    """One measurement, in bytes."""

    name: str
    bytes: float


def _reset() -> None:
    ToolRegistry.clear()
    AgentRegistry.clear()
    HookRegistry.clear()


async def _traced(work: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    """The peak of the memory `work` allocates on top of what is held before it, and its result."""
    gc.collect()
    tracemalloc.start()
    try:
        result = await work()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def _step_messages(i: int) -> list[Message]:
    call_id = f"call-{i:05d}"
    return [
        Message("assistant", [ToolUseBlock(call_id, "run_tests", {"module": f"module_{i}.py"})]),
        Message("user", [ToolResultBlock(call_id, f"module {i}\n{OUTPUT}")]),
    ]


async def agent_run(steps: int, windows: bool) -> int:
    """Peak bytes of a `steps`-step run (see the module); `windows`: with prompt_window()."""
    _reset()
    with tempfile.TemporaryDirectory() as folder:
        async with connect(Path(folder) / "run.db") as conn:

            @tool
            async def work(i: int) -> AsyncIterator[Any]:
                for message in _step_messages(i):
                    yield ContextItem(content=message)
                if i + 1 < steps:
                    yield Turn(work, args=[i + 1])

            agent = Agent(
                "runner",
                "a long run",
                [work],
                context_queue=ContextQueue(limit=10_000, max_tokens=8_000),
                context=ContextConfig(SQLiteContextStore(conn), FitTokens(8_000)),
            )
            if windows:

                @agent.before_turn
                async def build_window(agent: Agent) -> None:
                    await agent.prompt_window()

            await agent.put(Turn(work, args=[0]))

            async def run() -> None:
                async for _ in agent.run():
                    pass

            peak, _ = await _traced(run)
    return peak


async def branch_memory(size: int, branches: int) -> float:
    """Bytes per branch held by `branches` branches of a loaded agent of `size`."""
    agent = await peer.loaded_agent(pygents_ctx, size)  # the head-to-head's, at this size
    kept: list[Agent] = []

    async def branch_all() -> None:
        kept.extend(agent.branch(f"child{i}") for i in range(branches))

    gc.collect()
    tracemalloc.start()
    try:
        await branch_all()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    _reset()
    return held / branches


async def scoped_requests(requests: int) -> float:
    """Bytes still held after `requests` requests, each in an `AgentScope`, have ended."""

    @tool
    async def keep(key: str) -> ContextItem[str]:
        return ContextItem(content=key, description=f"about {key}", id=key)

    async def request() -> None:
        async with AgentScope():
            agent = Agent("support", "d", [keep])
            Agent("archivist", "d", [])

            @agent.after_turn
            async def checkpoint(a: Agent, turn: Turn) -> None:
                pass

            async with agent.branch() as sub:
                await sub.put(Turn(keep, kwargs={"key": "k"}))
                async for _ in sub.run():
                    pass
                await agent.merge(sub)

    await request()  # warm up
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(requests):
            await request()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    _reset()
    return float(held)


async def memory(steps: int) -> list[Memory]:
    """Every memory measurement (the agent runs at `steps` and at a tenth of it)."""
    rows = []
    for windows in (False, True):
        label = "agent run + prompt_window()" if windows else "agent run"
        for n in (steps // 10, steps):
            peak = await agent_run(n, windows)
            rows.append(Memory(f"{label}, {n:,} steps: peak", peak))
    for size in STATE_SIZES:
        for count in BRANCH_COUNTS:
            rows.append(
                Memory(
                    f"branch of a {size:,}-turn/{size:,}-item agent, x{count}: per branch",
                    await branch_memory(size, count),
                )
            )
    for count in (1_000, 10_000):
        held = await scoped_requests(count)
        rows.append(Memory(f"{count:,} requests in an AgentScope: held after", held))
    # Whole-process peak RSS, in child processes: 1,000,000 messages at the full size.
    rows += [Memory(name, size) for name, size in transfer_rows(steps * 1_000 // 3)]
    return rows
