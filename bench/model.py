"""What `ModelLoop` adds to each model call, on a scripted model.

A step of ours is one model call whose reply calls one tool, and that call:
`model_think` (the window from a `MemoryContextStore` through
`SlidingWindow(20)`, the model call, the reply and its usage record stored,
the events) and `model_act` (the tool call as a `Turn`, its result stored).
The floor is the bare model call on a window of the same size: what a
hand-written loop cannot avoid. The scripted model answers without waiting, so
the ratio shows the loop's own cost; against a real model, whose call takes
hundreds of milliseconds, it is noise.
"""

from __future__ import annotations

import itertools
from typing import Any

from bench.harness import Result, compare
from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    MemoryContextStore,
    Message,
    ModelLoop,
    SlidingWindow,
    Tool,
    ToolRegistry,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

WINDOW = 20
_names = itertools.count()


async def bench_noop(n: int) -> int:
    """Return n."""
    return n


def _noop_tool() -> Tool[..., Any]:
    """The no-op tool, registered afresh: the scenarios before this one clear the registries."""
    ToolRegistry.clear()
    AgentRegistry.clear()
    return tool(bench_noop)


def _script(steps: int) -> list[Any]:
    calls = [assistant(tool_call("bench_noop", n=n)) for n in range(steps - 1)]
    return [*calls, "done"]


class _Loops:
    """A fresh agent and loop for each timed run (a script is used up by one)."""

    def __init__(self, streaming: bool, noop: Tool[..., Any]) -> None:
        self.streaming = streaming
        self.noop = noop
        self.loop: ModelLoop | None = None

    async def prepare(self, steps: int) -> None:
        if self.loop is not None:
            AgentRegistry.unregister(self.loop.agent.name)
        agent = Agent(
            f"bench-model-{next(_names)}",
            "Calls a no-op tool",
            [self.noop],
            context=ContextConfig(MemoryContextStore(), SlidingWindow(WINDOW)),
        )
        self.loop = ModelLoop(agent, ScriptedModel(_script(steps)), max_steps=steps)

    async def run(self, steps: int) -> None:
        assert self.loop is not None
        if self.streaming:
            async for _ in self.loop.stream("go"):
                pass
        else:
            finished = await self.loop.run("go")
            assert finished.steps == steps


def _window() -> list[Message]:
    call = tool_call("bench_noop", n=1)
    window = [Message("user", "go")]
    while len(window) < WINDOW:
        window += [assistant(call), Message("user", "1")]
    return window[:WINDOW]


async def model_loop(steps: int) -> list[Result]:
    """The loop per step, against the bare call, with `run()` and with `stream()`."""
    window = _window()
    noop = _noop_tool()
    rows = []
    for streaming in (False, True):
        loops = _Loops(streaming, noop)
        bare = ScriptedModel(_script(steps) * 20)  # enough replies for every repeat

        async def floor(ops: int, bare: ScriptedModel = bare, streaming: bool = streaming) -> None:
            if streaming:
                for _ in range(ops):
                    async for _event in bare.stream(window, [noop]):
                        pass
            else:
                for _ in range(ops):
                    await bare.complete(window, [noop])

        name = f"model loop per step, {'stream()' if streaming else 'run()'}"
        rows.append(await compare(name, loops.run, floor, steps, None, prepare=loops.prepare))
    return rows
