"""A small research agent: tools chain turns, stream values, fill the queue and
pool, branch a fact-checker for a sub-task, and survive a save / restore.

Run it with `python examples/runtime_tour.py`. No network: the
"search engine" is a dict.
"""

from __future__ import annotations

import asyncio

from pygents_ctx import (
    Agent,
    AgentHook,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    Turn,
    hook,
    tool,
)

LIBRARY = {
    "tides": "Tides are caused mainly by the Moon's gravity, and partly by the Sun's.",
    "moon": "The Moon is about 384,400 km from Earth and drifts away ~3.8 cm a year.",
    "sun": "The Sun's tidal effect is a bit under half of the Moon's.",
}


@tool
async def search(topic: str):
    """Find documents on a topic: stream progress, put each document in the pool."""
    for doc_id, text in LIBRARY.items():
        if topic in text.lower() or topic == doc_id:
            yield f"found {doc_id!r}"
            yield ContextItem(id=doc_id, description=text[:40] + "...", content=text)
    yield Turn("take_notes", kwargs={"topic": topic})  # chain the next step


@tool
async def take_notes(topic: str, pool: ContextPool) -> ContextItem[str]:
    """Read the pooled documents and keep one note in the working memory."""
    facts = [item.content for item in pool.items]
    return ContextItem(content=f"{topic}: {len(facts)} sources, e.g. {facts[0]}")


@tool
async def verify(claim: str, pool: ContextPool) -> str:
    """Check a claim against the pooled documents."""
    backed = [i.id for i in pool.items if any(w in i.content for w in claim.split())]
    return f"claim {claim!r} is backed by {backed}"


@tool
async def record(verdict: str) -> ContextItem[str]:
    """Keep a fact-checker's verdict as a note."""
    return ContextItem(content=verdict)


@tool
async def answer(question: str, notes: ContextQueue) -> str:
    """Answer from the notes in the working memory."""
    lines = "\n     ".join(f"- {item.content}" for item in notes)
    return f"{question}\n     {lines}"


@hook(AgentHook.AFTER_TURN, tags=["demo"])
async def pause_after_notes(agent: Agent, turn: Turn) -> None:
    """Pause the researcher once its notes are taken, so we can save it."""
    if turn.tool_name == "take_notes":
        agent.pause()


async def main() -> None:
    tools = [search, take_notes, verify, record, answer]
    researcher = Agent("researcher", "Researches a topic", tools, tags=["demo"])
    await researcher.put(Turn("search", kwargs={"topic": "moon"}))

    print("== 1. run until the notes are taken (a hook pauses the agent)")
    await drain(researcher)
    print(f"   paused={researcher.is_paused}; pool catalogue:")
    for line in researcher.context_pool.catalogue().splitlines():
        print(f"     {line}")

    print("== 2. branch a fact-checker for a sub-task; it reports back with send()")
    checker = researcher.branch("fact-checker", tools=tools)
    await checker.put(Turn("verify", kwargs={"claim": "Moon gravity"}))
    async for _, verdict in checker.run():
        print(f"   fact-checker: {verdict}")
        await checker.send("researcher", Turn("record", kwargs={"verdict": verdict}))

    print("== 3. save the paused researcher as JSON, forget it, restore it")
    saved = researcher.to_json()
    print(f"   saved {len(saved)} bytes of JSON")
    AgentRegistry.unregister("researcher")
    restored = Agent.from_json(saved)
    print(
        f"   restored {restored.name!r}: paused={restored.is_paused}, "
        f"{len(restored.queue)} turns queued, {len(restored.context_queue)} notes"
    )

    print("== 4. resume and finish")
    await restored.put(Turn("answer", kwargs={"question": "Why are there tides?"}))
    restored.resume()
    await drain(restored)


async def drain(agent: Agent) -> None:
    async for turn, value in agent.run():
        print(f"   {agent.name} [{turn.tool_name}] {value}")


if __name__ == "__main__":
    asyncio.run(main())
