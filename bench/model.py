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
import json
import time
from typing import Any

from bench.harness import Result, compare
from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    LoopFinished,
    LoopLimits,
    MemoryContextStore,
    Message,
    ModelLoop,
    OpenAIModel,
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
        self.loop = ModelLoop(
            agent, ScriptedModel(_script(steps)), limits=LoopLimits(max_steps=steps)
        )

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


# -- against a model server, through the official SDK ------------------------------------

SDK_TURNS = 10  # user messages per conversation: each is two model calls


async def lookup(question: str) -> str:
    """Look the question up."""
    return f"found: {question[:20]}"


class _SDKLoops:
    """A fresh agent and loop on a memory store per timed run, all on one SDK client."""

    def __init__(self, client: Any, tool: Tool[..., Any]) -> None:
        self.client = client
        self.tool = tool
        self.loop: ModelLoop | None = None

    async def prepare(self, calls: int) -> None:
        if self.loop is not None:
            AgentRegistry.unregister(self.loop.agent.name)
        agent = Agent(
            f"bench-sdk-{next(_names)}",
            "Looks things up",
            [self.tool],
            context=ContextConfig(MemoryContextStore()),
        )
        self.loop = ModelLoop(agent, OpenAIModel("fake", client=self.client))

    async def run(self, calls: int) -> None:
        assert self.loop is not None
        for turn in range(calls // 2):
            finished = await self.loop.run(f"question {turn}")
            assert finished.text.startswith("answer to question")

    async def stream(self, calls: int) -> None:
        assert self.loop is not None
        for turn in range(calls // 2):
            async for event in self.loop.stream(f"question {turn}"):
                finished = event
            assert isinstance(finished, LoopFinished)
            assert finished.text.startswith("answer to question")


_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look the question up.",
            "parameters": {
                "type": "object",
                "properties": {"question": {"type": "string"}},
                "required": ["question"],
            },
        },
    }
]


async def _hand_written(client: Any, calls: int) -> None:
    """What a user writes without a library: a list of messages, the SDK, the tool called."""
    messages: list[dict[str, Any]] = []
    for turn in range(calls // 2):
        messages.append({"role": "user", "content": f"question {turn}"})
        while True:
            reply = await client.chat.completions.create(
                model="fake", messages=messages, tools=_TOOLS
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                result = await lookup(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


async def _hand_streamed(client: Any, calls: int) -> None:
    """The same by hand with `stream=True`: text and calls put together from the chunks."""
    messages: list[dict[str, Any]] = []
    for turn in range(calls // 2):
        messages.append({"role": "user", "content": f"question {turn}"})
        while True:
            chunks = await client.chat.completions.create(
                model="fake",
                messages=messages,
                tools=_TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
            text: list[str] = []
            calls_by_index: dict[int, dict[str, Any]] = {}
            async for chunk in chunks:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    text.append(delta.content)
                for part in delta.tool_calls or []:
                    call = calls_by_index.setdefault(
                        part.index,
                        {
                            "id": part.id,
                            "type": "function",
                            "function": {"name": "", "arguments": ""},
                        },
                    )
                    if part.function and part.function.name:
                        call["function"]["name"] += part.function.name
                    if part.function and part.function.arguments:
                        call["function"]["arguments"] += part.function.arguments
            message: dict[str, Any] = {"role": "assistant"}
            if text:
                message["content"] = "".join(text)
            if calls_by_index:
                message["tool_calls"] = list(calls_by_index.values())
            messages.append(message)
            if not calls_by_index:
                break
            for call in calls_by_index.values():
                result = await lookup(**json.loads(call["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


async def model_loop_sdk(calls: int) -> list[Result]:
    """`ModelLoop` with `OpenAIModel` against a local server, and a hand-written loop.

    Both use one `AsyncOpenAI` client on the same local Chat Completions server
    (bench/fake_openai.py, answering at once): each user message is a tool
    call, the tool's run, then the answer. The floor is the hand-written loop;
    what ours adds per model call (`ours - floor`) is the loop's own cost: the
    window, the store, the usage record, the tool's turn, the events. The
    server runs in this process, so this row counts the process's CPU time
    (the same server work on both sides), which a busy machine disturbs far
    less than wall time.
    """
    from openai import AsyncOpenAI

    from bench.fake_openai import FakeOpenAI

    ToolRegistry.clear()
    AgentRegistry.clear()
    server = await FakeOpenAI().start()
    client = AsyncOpenAI(base_url=server.url, api_key="-", max_retries=0)
    try:
        loops = _SDKLoops(client, tool(lookup))

        async def floor(ops: int) -> None:
            await _hand_written(client, ops)

        async def floor_streamed(ops: int) -> None:
            await _hand_streamed(client, ops)

        rows = []
        for name, ours, hand in (
            ("model loop + OpenAI SDK, per call", loops.run, floor),
            ("model loop + OpenAI SDK, per streamed call", loops.stream, floor_streamed),
        ):
            rows.append(
                await compare(
                    name, ours, hand, calls, None, prepare=loops.prepare, clock=time.process_time_ns
                )
            )
        return rows
    finally:
        await client.close()
        await server.close()
