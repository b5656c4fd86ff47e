"""A store for the viewer's tests: real runs of a ModelLoop written through a real store.

`fill(store)` writes the session `trip` (two ModelLoop runs with tool calls,
an image, two compactions, usage rows from the loop), a session `xss` whose
messages hold markup, and `empty`; `fill_memory(conn)` adds a graph, blobs and
a task board and a vector collection beside them. `calls_two_sub_agents(make)`
writes a session `chat` whose model called two sub-agents, one kept.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    ContextItem,
    Message,
    ReasoningBlock,
    RedactedThinkingBlock,
    ThinkingBlock,
    ToolRegistry,
    tool,
)
from pygents_ctx.context.messages import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores import AutoCompactStore, ContextStore, MemoryContextStore
from pygents_ctx.context.usage import Usage, UsageRecord
from pygents_ctx.memory import Entity, Relationship, VectorDocument
from pygents_ctx.model import ModelLoop
from pygents_ctx.testing import ScriptedModel, ScriptedSummarizer, assistant, tool_call


def _png(width: int, height: int) -> bytes:
    """A small RGB PNG: a map-like gradient, with blue water on the left."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00"
        + b"".join(
            bytes((40, 110, 200) if x < width // 3 else (90 + x, 160 + y // 2, 90))
            for x in range(width)
        )
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = _png(120, 80)
XSS = "<script>alert('owned')</script>"


async def weather(city: str) -> str:
    """The weather in a city."""
    if city == "Lima":
        raise ValueError("the Lima station is offline")
    return f"{city}: 21°C, light wind " + "and a long forecast " * 20


async def _run(
    store: ContextStore, prompt: str, script: list[Any], *, checkpoints: bool = False
) -> None:
    # Registered for the run only: the tests' registries are emptied around each test.
    weather_tool = tool(weather)
    context = ContextConfig(store, checkpoints=checkpoints)
    agent = Agent("planner", "Plans trips", [weather_tool], context=context)
    try:
        await ModelLoop(agent, ScriptedModel(script), instructions="You plan trips.").run(prompt)
    finally:
        AgentRegistry.unregister(agent.name)
        ToolRegistry.unregister(weather_tool.key)


async def fill_trip(store: ContextStore) -> None:
    """Two runs, with tool calls and an error result, an image, and two compactions; then a
    third run taking checkpoints."""
    await store.append(Message("system", "You plan trips."))
    await store.append(
        Message("user", [TextBlock("Here is the map."), ImageBlock("image/png", PNG)])
    )
    await store.append(Message("assistant", "Nice map."))
    for round_number in range(2):
        await _run(
            store,
            f"Round {round_number}: weather in Oslo and Lima?",
            [
                assistant("Checking Oslo.", tool_call("weather", city="Oslo")),
                assistant(tool_call("weather", city="Lima")),
                f"Oslo is mild; Lima could not be checked (round {round_number}).",
            ],
        )
        summarizer = ScriptedSummarizer([f"Summary {round_number}: the user asked about weather."])
        assert await AutoCompactStore(store, summarizer, keep_recent=4).compact()
    await _run(  # checkpoints before the prompt and before each model call
        store,
        "And Pune?",
        [assistant(tool_call("weather", city="Pune")), "Pune is warm."],
        checkpoints=True,
    )
    # A call another model made, its prompt mostly served from the provider's cache.
    await store.record_usage(
        UsageRecord(
            Usage(2_000, 50, cached_tokens=1_500), model="gpt-4o", estimated_input_tokens=1_900
        )
    )


async def fill(make: Any) -> None:
    """`make(session_id)` gives a store of that session; fill three sessions."""
    await fill_trip(make("trip"))
    xss = make("xss")
    await xss.append(Message("user", XSS))
    thinking = [
        ThinkingBlock(XSS, signature="sig"),
        RedactedThinkingBlock("c2VjcmV0"),
        ReasoningBlock("rs_<1>", [XSS], "gAAAA-sealed", model="o<3>"),
    ]
    await xss.append(Message("assistant", [*thinking, ToolUseBlock("c<1>", "t<b>", {"html": XSS})]))
    await xss.append(Message("user", [ToolResultBlock("c<1>", XSS)]))
    await make("empty").set_context_tokens(0, 0)


async def fill_memory(conn: Any, graph: Any, blobs: Any, tasks: Any, vectors: Any = None) -> None:
    """A graph, blobs (text and image), a task board, and a vector collection when given."""
    store = graph(conn, graph="trips")
    await store.upsert_entities(
        [Entity("oslo", "city", {"country": "NO"}), Entity("lima", "city", {"note": XSS})]
    )
    await store.upsert_relationships([Relationship("oslo", "lima", "flight", {"hours": 14})])
    blob_store = blobs(conn)
    await blob_store.put(
        "notes.txt", b"pack an umbrella\n" + XSS.encode(), content_type="text/plain"
    )
    await blob_store.put("pixel.png", PNG, content_type="image/png")
    board = tasks(conn).board("trip", "planner")
    first, second = await board.add_tasks(["book flights", "pack"], max_attempts=2)
    await board.update_status(first.id, "succeeded")
    await board.update_status(second.id, "failed", note="no umbrella")
    if vectors is not None:
        vector_store = vectors(conn)
        await vector_store.create_collection("notes", 2)
        await vector_store.add(
            "notes",
            [
                VectorDocument("n1", "Oslo in May", embedding=[0, 1], metadata={"city": "Oslo"}),
                VectorDocument("n2", XSS, embedding=[1, 0]),
            ],
        )


async def saved_agent() -> bytes:
    """An agent's saved JSON (session `trip`), its pool holding a note and a message."""
    agent = Agent(
        "pool-keeper",
        "Keeps notes",
        [],
        context=ContextConfig(MemoryContextStore(session_id="trip")),
    )
    try:
        await agent.context_pool.add(
            ContextItem("Oslo is mild in May. " + XSS, description="note", id="n1")
        )
        await agent.context_pool.add(
            ContextItem(Message("user", [TextBlock("Pack light.")]), description="advice", id="m1")
        )
        return agent.to_json()
    finally:
        AgentRegistry.unregister(agent.name)


async def calls_two_sub_agents(make: Any) -> list[str]:
    """Session `chat`: the lead asks a kept and a dropped sub-agent; the two call ids."""
    researcher = Agent("researcher", "Finds", [], context=ContextConfig(make("research")))
    kept = ModelLoop(researcher, ScriptedModel(["The Moon pulls."])).as_tool("research", "Find")
    quick = Agent("quick", "Guesses", [], context=ContextConfig(make("quick")))
    dropped = ModelLoop(quick, ScriptedModel(["A guess."])).as_tool("guess", "Guess", keep="none")
    calls = [tool_call("research", task="Why tides?"), tool_call("guess", task="How high?")]
    lead = ModelLoop(
        Agent("lead", "Plans", [], context=ContextConfig(make("chat"))),
        ScriptedModel([assistant(*calls), "Tides follow the Moon."]),
        tools=[kept, dropped],
    )
    await lead.run("Explain tides")
    return [call.id for call in calls]
