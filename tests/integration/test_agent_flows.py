"""Whole flows a user builds with agents: chains, streams, sub-agents, save and resume."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from pygents_ctx import (
    Agent,
    AgentHook,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    StopReason,
    Turn,
    hook,
    tool,
)


async def drain(agent: Agent) -> list[tuple[str, Any]]:
    """Run `agent` to the end; collect `(tool key, value)` for each yielded value."""
    return [(turn.tool_name, value) async for turn, value in agent.run()]


async def test_tool_chain_where_each_tool_returns_the_next_turn() -> None:
    """fetch -> parse -> summarize: only the summary reaches the caller."""
    pages = {"https://example.org/q3": "revenue=10;margin=0.2;guidance=up"}
    completed: list[tuple[str, StopReason]] = []
    produced: list[str] = []

    @tool
    async def fetch(url: str) -> Turn:
        return Turn(parse, kwargs={"url": url, "text": pages[url]})

    @tool
    async def parse(url: str, text: str) -> Turn:
        fields = dict(pair.split("=") for pair in text.split(";"))
        return Turn(summarize, kwargs={"url": url, "fields": fields})

    @tool
    async def summarize(url: str, fields: dict[str, str]) -> str:
        return f"{url}: " + ", ".join(f"{k} {v}" for k, v in sorted(fields.items()))

    agent = Agent("analyst", "reads reports", [fetch, parse, summarize])

    @agent.on_complete
    async def track(turn: Turn, reason: StopReason) -> None:
        completed.append((turn.tool_name, reason))

    @agent.on_turn_value
    async def trace(agent: Agent, turn: Turn, value: Any) -> None:
        produced.append(type(value).__name__)

    await agent.put(Turn(fetch, kwargs={"url": "https://example.org/q3"}))
    results = await drain(agent)

    assert results == [
        ("summarize", "https://example.org/q3: guidance up, margin 0.2, revenue 10"),
    ]
    assert completed == [
        ("fetch", StopReason.COMPLETED),
        ("parse", StopReason.COMPLETED),
        ("summarize", StopReason.COMPLETED),
    ]
    assert produced == ["Turn", "Turn", "str"]
    assert agent.queue == []
    assert agent.current_turn is None


async def test_generator_tool_streams_progress_and_context_then_hands_off() -> None:
    """A research tool streams progress, files documents and notes, then queues the answer."""
    corpus = {
        "q3": ("Q3 report: revenue, margins", "revenue 10"),
        "q4": ("Q4 report: guidance", "guidance up"),
    }

    @tool
    async def research(topic: str) -> AsyncIterator[Any]:
        yield f"searching {topic}"
        for doc_id, (description, content) in corpus.items():
            yield ContextItem(content=content, description=description, id=doc_id)
            yield ContextItem(content=f"read {doc_id}")
            yield f"found {doc_id}"
        yield Turn(answer, kwargs={"question": f"what about {topic}?"})

    @tool
    async def answer(question: str, notes: ContextQueue, docs: ContextPool) -> str:
        read = [item.content for item in notes]
        facts = [docs.get(doc_id).content for doc_id in ("q3", "q4")]
        return f"{question} {'; '.join(facts)} (after {len(read)} reads)"

    agent = Agent("researcher", "researches", [research, answer])
    await agent.put(Turn(research, kwargs={"topic": "earnings"}))
    progress: list[str] = []
    pool_sizes: list[int] = []

    async for turn, value in agent.run():
        progress.append(f"{turn.tool_name}: {value}")
        pool_sizes.append(len(agent.context_pool))

    assert progress == [
        "research: searching earnings",
        "research: found q3",
        "research: found q4",
        "answer: what about earnings? revenue 10; guidance up (after 2 reads)",
    ]
    assert pool_sizes == [0, 1, 2, 2]  # each document was filed as soon as it was produced
    assert agent.context_pool.catalogue() == (
        "- [q3] Q3 report: revenue, margins\n- [q4] Q4 report: guidance"
    )
    assert [item.content for item in agent.context_queue] == ["read q3", "read q4"]


async def test_sub_agents_branch_for_sub_tasks_and_send_results_back() -> None:
    """A lead branches two sub-agents; they work concurrently and send findings back."""

    @tool
    async def investigate(topic: str, memory: ContextQueue) -> AsyncIterator[Any]:
        brief = [item.content for item in memory]
        await asyncio.sleep(0)
        yield ContextItem(content=f"looked into {topic}")
        yield f"{topic} checked against {brief}"

    @tool
    async def merge(topic: str, finding: str) -> ContextItem[str]:
        return ContextItem(content=finding, description=f"finding on {topic}", id=topic)

    @tool
    async def conclude(docs: ContextPool) -> str:
        return " | ".join(item.content for item in docs)

    lead = Agent("lead", "coordinates", [investigate, merge, conclude], tags=["team"])
    await lead.context_queue.append(ContextItem(content="brief: compare suppliers"))

    async def sub_task(topic: str) -> Agent:
        child = lead.branch(f"lead/{topic}", description=f"looks into {topic}")
        await child.put(Turn(investigate, kwargs={"topic": topic}))
        async for _, finding in child.run():
            await child.send("lead", Turn(merge, kwargs={"topic": topic, "finding": finding}))
        return child  # a branch nobody references gives its name up

    children = await asyncio.gather(sub_task("acme"), sub_task("globex"))
    await lead.put(Turn(conclude))
    results = await drain(lead)

    assert sorted(item.id for item in lead.context_pool) == ["acme", "globex"]
    assert results == [
        ("conclude", " | ".join(item.content for item in lead.context_pool)),
    ]
    assert "acme checked against ['brief: compare suppliers']" in results[0][1]
    assert "globex checked against ['brief: compare suppliers']" in results[0][1]
    # The children's notes stayed in their own windows.
    assert [item.content for item in lead.context_queue] == ["brief: compare suppliers"]
    for topic, child in zip(("acme", "globex"), children, strict=True):
        assert AgentRegistry.get(f"lead/{topic}") is child
        assert child.tags == frozenset({"team"})
        assert [item.content for item in child.context_queue] == [
            "brief: compare suppliers",
            f"looked into {topic}",
        ]
        assert len(child.context_pool) == 0


async def test_paused_agent_saved_to_json_resumes_elsewhere_with_the_same_result() -> None:
    """Pause mid-run, save, restore into a fresh agent registry, resume, finish."""

    @tool
    async def count(n: int, limit: int) -> AsyncIterator[Any]:
        yield ContextItem(content=n)
        if n < limit:
            yield Turn(count, kwargs={"n": n + 1, "limit": limit})
        else:
            yield Turn(total)

    @tool
    async def total(memory: ContextQueue) -> int:
        return sum(item.content for item in memory)

    @hook(AgentHook.AFTER_TURN, tags=["pausable"])
    async def pause_at_checkpoint(agent: Agent, turn: Turn) -> None:
        if turn.kwargs.get("n") == 3:
            agent.pause()

    async def start(name: str, tags: list[str]) -> Agent:
        agent = Agent(name, "counts", [count, total], context_queue=ContextQueue(20), tags=tags)
        await agent.put(Turn(count, kwargs={"n": 1, "limit": 6}))
        return agent

    # Without the tag the checkpoint hook does not fire: this run is never paused.
    expected = await drain(await start("uninterrupted", tags=[]))

    interrupted = await start("counter", tags=["pausable"])
    consumer = asyncio.create_task(drain(interrupted))
    for _ in range(1000):
        if interrupted.is_paused:
            break
        await asyncio.sleep(0)
    assert interrupted.is_paused
    saved = interrupted.to_json()
    consumer.cancel()
    await asyncio.gather(consumer, return_exceptions=True)
    AgentRegistry.clear()  # a fresh process: tools and hooks are defined again, agents are not

    restored = Agent.from_json(saved)
    assert restored.is_paused
    assert [item.content for item in restored.context_queue] == [1, 2, 3]
    assert [t.kwargs for t in restored.queue] == [{"n": 4, "limit": 6}]
    restored.resume()
    finished = await drain(restored)

    assert expected == [("total", 21)]
    assert finished == expected
    assert [item.content for item in restored.context_queue] == [1, 2, 3, 4, 5, 6]
    assert restored.tags == frozenset({"pausable"})
