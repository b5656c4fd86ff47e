"""Every code example of seed 002 (the context primitives), run as written.

The seed imports from `pygents`; here it is `pygents_ctx`. `...` placeholders are
replaced by simple values, and each test asserts what the seed says happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pygents_ctx import Agent, AgentRegistry, ContextQueue, ContextQueueHook, Hook, Turn, tool
from pygents_ctx.context import ContextItem, ContextPool

# -- ContextItem ------------------------------------------------------------


def test_context_item_example() -> None:
    item = ContextItem(
        content={"text": "..."},
        description="Q3 earnings report — revenue, margins, guidance",
        id="doc-1",
    )

    assert item.content == {"text": "..."}
    assert item.description == "Q3 earnings report — revenue, margins, guidance"
    assert item.id == "doc-1"


# -- ContextQueue -----------------------------------------------------------


async def test_creating_a_context_queue_example() -> None:
    cq = ContextQueue(limit=10)
    await cq.append(ContextItem(content="user: hello"))
    await cq.append(ContextItem(content="assistant: hi there"))

    assert cq.limit == 10
    assert [i.content for i in cq.items] == ["user: hello", "assistant: hi there"]


async def test_generic_context_queue_example() -> None:
    cq: ContextQueue[str] = ContextQueue(limit=10)
    await cq.append(ContextItem(content="hello"))  # ok — ContextItem[str]
    await cq.append(ContextItem(content=42))  # type: ignore[arg-type]  # a type error only

    # Unparameterised works exactly as before (content type is Any)
    cq2: ContextQueue[Any] = ContextQueue(limit=10)

    assert [i.content for i in cq.items] == ["hello", 42]
    assert cq2.items == []


def test_context_queue_tags_example() -> None:
    cq = ContextQueue(limit=20, tags=["session", "monitored"])

    assert cq.tags == frozenset({"session", "monitored"})
    assert ContextQueue.from_dict(cq.to_dict()).tags == cq.tags
    assert cq.branch().tags == cq.tags


async def test_appending_example() -> None:
    cq = ContextQueue(limit=10)

    await cq.append(ContextItem(content="msg1"), ContextItem(content="msg2"))

    assert [i.content for i in cq.items] == ["msg1", "msg2"]


async def test_clearing_example() -> None:
    cq = ContextQueue(limit=10)
    await cq.append(ContextItem(content="msg1"), ContextItem(content="msg2"))

    await cq.clear()  # remove all items

    assert cq.items == []


async def test_reading_items_example() -> None:
    cq = ContextQueue(limit=10)
    await cq.append(ContextItem(content="msg1"), ContextItem(content="msg2"))

    items = cq.items  # list copy of current items
    assert len(cq) == 2  # number of items
    assert list(cq) == items  # iterable
    assert bool(cq)  # False when empty

    items.clear()  # mutating the copy does not affect the queue
    assert len(cq) == 2
    await cq.clear()
    assert not bool(cq)


async def test_queue_agent_integration_example(capsys: pytest.CaptureFixture[str]) -> None:
    @tool()
    async def summarize(text: str) -> ContextItem:
        result = f"summary of {text}"  # call an LLM, compute a summary, etc.
        return ContextItem(content=result)  # no id → goes to context_queue

    agent = Agent("summarizer", "Summarizes text", [summarize])
    await agent.put(Turn("summarize", kwargs={"text": "the report"}))

    yielded = [value async for _, value in agent.run()]

    print(agent.context_queue.items[0].content)
    assert capsys.readouterr().out == "summary of the report\n"
    assert yielded == []
    assert agent.context_queue.limit == 10  # the default queue
    assert agent.context_pool.items == []


async def test_preconfigured_queue_example() -> None:
    @tool()
    async def summarize(text: str) -> ContextItem:
        return ContextItem(content=f"summary of {text}")

    agent = Agent(
        "summarizer", "Summarizes text", [summarize], context_queue=ContextQueue(limit=20)
    )
    await agent.put(Turn("summarize", kwargs={"text": "x"}))
    async for _ in agent.run():
        pass

    assert agent.context_queue.limit == 20
    assert [i.content for i in agent.context_queue.items] == ["summary of x"]
    assert ContextQueue.from_dict(agent.to_dict()["context_queue"]).limit == 20
    assert agent.branch("child").context_queue.items == agent.context_queue.items


async def test_queue_branching_example() -> None:
    agent_cq = ContextQueue(limit=20)
    await agent_cq.append(
        ContextItem(content="system context"), ContextItem(content="user message")
    )

    turn_cq = agent_cq.branch()
    await turn_cq.append(ContextItem(content="tool call result"))

    tool_cq = turn_cq.branch(limit=5)
    await tool_cq.append(ContextItem(content="sub-step output"))

    # Parent is unaffected
    assert ContextItem(content="tool call result") not in agent_cq.items
    assert ContextItem(content="sub-step output") not in turn_cq.items
    # The child inherited the parent's state, then diverged.
    assert [i.content for i in tool_cq.items] == [
        "system context",
        "user message",
        "tool call result",
        "sub-step output",
    ]
    assert tool_cq.limit == 5


async def test_queue_branch_hooks_example() -> None:
    calls: list[str] = []
    cq = ContextQueue(limit=10)

    @cq.before_append
    async def my_before_append_hook(queue, incoming, current):  # type: ignore[no-untyped-def]
        calls.append("mine")

    async def other_before_append(queue, incoming, current):  # type: ignore[no-untyped-def]
        calls.append("other")

    other_hook = Hook(other_before_append, (ContextQueueHook.BEFORE_APPEND,))

    child = cq.branch(hooks=[])  # no hooks
    other = cq.branch(hooks=[other_hook])  # different hooks
    inheriting = cq.branch()  # by default, the child inherits the parent's hooks

    await child.append(ContextItem(content="a"))
    assert calls == []
    await other.append(ContextItem(content="b"))
    assert calls == ["other"]
    await inheriting.append(ContextItem(content="c"))
    assert calls == ["other", "mine"]


async def test_queue_hooks_example(capsys: pytest.CaptureFixture[str]) -> None:
    cq = ContextQueue(limit=20)

    @cq.before_append
    async def log_before(queue, incoming, current):  # type: ignore[no-untyped-def]
        print(f"Current count: {len(current)}")

    @cq.after_append
    async def log_after(appended_items, current):  # type: ignore[no-untyped-def]
        print(f"New count: {len(current)}")

    await cq.append(ContextItem(content="a"), ContextItem(content="b"), ContextItem(content="c"))

    assert capsys.readouterr().out == "Current count: 0\nNew count: 3\n"


async def test_queue_serialization_example() -> None:
    cq = ContextQueue(limit=10)
    await cq.append(ContextItem(content="msg1"), ContextItem(content="msg2"))

    @cq.on_evict
    async def named_evict_hook(queue, item):  # type: ignore[no-untyped-def]
        pass

    data = cq.to_dict()  # {"limit": 10, "items": [...], "hooks": {...}}
    restored = ContextQueue.from_dict(data)

    assert data["limit"] == 10
    assert data["items"] == [item.to_dict() for item in cq.items]
    assert data["hooks"] == {"on_evict": ["named_evict_hook"]}
    assert restored.items == cq.items
    assert restored.hooks == cq.hooks


# -- ContextPool ------------------------------------------------------------


async def test_creating_a_pool_example() -> None:
    pool = ContextPool(limit=50)  # evicts oldest when full
    assert pool.limit == 50
    pool = ContextPool()  # unbounded (limit=None)
    assert pool.limit is None
    pool = ContextPool(limit=50, tags=["documents"])  # with tag filtering
    assert pool.tags == frozenset({"documents"})

    await pool.add(ContextItem(id="a", description="First", content=1))
    await pool.add(ContextItem(id="b", description="Second", content=2))

    item = pool.get("a")  # lookup by id
    assert item == ContextItem(id="a", description="First", content=1)
    await pool.remove("a")  # remove by id
    assert [i.id for i in pool.items] == ["b"]
    await pool.clear()  # remove all
    assert pool.items == []


async def test_generic_pool_example() -> None:
    @dataclass
    class Report:
        text: str

    pool: ContextPool[Report] = ContextPool(limit=50)
    await pool.add(ContextItem(id="r1", description="Q3 report", content=Report(text="up")))  # ok
    await pool.add(ContextItem(id="r2", description="Q4 report", content="plain string"))  # type: ignore[arg-type]

    # Unparameterised works exactly as before (content type is Any)
    pool2: ContextPool[Any] = ContextPool()

    assert pool.get("r1").content == Report(text="up")
    assert pool.get("r2").content == "plain string"
    assert pool2.limit is None


async def test_reading_pool_items_example() -> None:
    pool = ContextPool(limit=5)
    await pool.add(ContextItem(id="a", description="First", content=1))
    await pool.add(ContextItem(id="b", description="Second", content=2))

    assert [i.id for i in pool.items] == ["a", "b"]  # list copy of all ContextItems
    assert len(pool) == 2  # number of items
    assert list(pool) == pool.items  # iterate
    assert bool(pool)  # False when empty
    assert pool.limit == 5  # the configured limit (or None)
    assert pool.catalogue() == "- [a] First\n- [b] Second"


async def test_pool_agent_integration_example(capsys: pytest.CaptureFixture[str]) -> None:
    @tool()
    async def fetch_doc(doc_id: str) -> ContextItem:
        content = {"doc": doc_id, "revenue": 42}  # fetch from API, DB, etc.
        return ContextItem(
            id=doc_id,
            description=f"Report {doc_id} — quarterly financials",
            content=content,
        )

    agent = Agent("reader", "Reads documents", [fetch_doc])
    await agent.put(Turn("fetch_doc", kwargs={"doc_id": "report-2024"}))

    yielded = []
    async for turn, value in agent.run():
        yielded.append((turn, value))  # agent stored the ContextItem automatically

    item = agent.context_pool.get("report-2024")
    print(item.content)

    assert capsys.readouterr().out == "{'doc': 'report-2024', 'revenue': 42}\n"
    assert yielded == []
    assert agent.context_queue.items == []
    assert agent.context_pool.limit is None  # the default pool is unbounded


async def test_preconfigured_pool_with_hook_example(capsys: pytest.CaptureFixture[str]) -> None:
    @tool()
    async def fetch_doc(doc_id: str) -> ContextItem:
        return ContextItem(
            id=doc_id, description=f"Report {doc_id} — quarterly financials", content=doc_id
        )

    pool = ContextPool()

    @pool.after_add
    async def on_item_added(pool, item):  # type: ignore[no-untyped-def]
        print(f"Added {item.id!r}: {item.description}")

    agent = Agent("reader", "Reads documents", [fetch_doc], context_pool=pool)
    await agent.put(Turn("fetch_doc", kwargs={"doc_id": "report-2024"}))
    async for _ in agent.run():
        pass

    assert agent.context_pool is pool
    assert (
        capsys.readouterr().out
        == "Added 'report-2024': Report report-2024 — quarterly financials\n"
    )
    child = agent.branch("reader-child")
    assert child.context_pool.items == pool.items
    assert child.context_pool is not pool


# -- Reading context from tools ---------------------------------------------


async def test_tools_declaring_queue_and_pool_receive_the_agents_instances() -> None:
    @tool()
    async def summarize(text: str, memory: ContextQueue) -> str:
        recent = [item.content for item in memory.items[-3:]]
        return f"{text}: {recent}"

    @tool()
    async def answer(question: str, pool: ContextPool) -> str:
        catalogue = pool.catalogue()
        return f"{question}\n{catalogue}"

    queue = ContextQueue(limit=10)
    await queue.append(*(ContextItem(content=n) for n in range(5)))
    pool = ContextPool()
    await pool.add(ContextItem(id="d1", description="Doc one", content="..."))
    agent = Agent("reader", "Reads", [summarize, answer], context_queue=queue, context_pool=pool)
    await agent.put(Turn("summarize", kwargs={"text": "recent"}))
    await agent.put(Turn("answer", kwargs={"question": "which?"}))

    values = [value async for _, value in agent.run()]

    assert values == ["recent: [2, 3, 4]", "which?\n- [d1] Doc one"]


async def test_optional_context_parameter_example_runs_inside_and_outside_an_agent() -> None:
    @tool()
    async def think(question: str, memory: ContextQueue | None = None) -> str:
        context = [item.content for item in memory.items] if memory else []
        return f"{question} {context}"

    assert await think("alone?") == "alone? []"

    agent = Agent("thinker", "Thinks", [think])
    await agent.context_queue.append(ContextItem(content="earlier"))
    await agent.put(Turn("think", kwargs={"question": "with memory?"}))
    values = [value async for _, value in agent.run()]

    assert values == ["with memory? ['earlier']"]


async def test_explicit_kwargs_win_over_injection_example() -> None:
    seen: list[Any] = []

    @tool()
    async def think(question: str, memory: ContextQueue | None = None) -> str:
        seen.append(memory)
        return question

    some_other_queue = ContextQueue(limit=3)
    agent = Agent("thinker", "Thinks", [think])
    await agent.put(Turn("think", kwargs={"question": "...", "memory": some_other_queue}))
    async for _ in agent.run():
        pass

    assert seen == [some_other_queue]
    assert seen[0] is not agent.context_queue


async def test_outside_an_agent_required_raises_and_optional_gets_none() -> None:
    received: list[Any] = []

    @tool()
    async def needs_memory(question: str, memory: ContextQueue) -> str:
        return question

    @tool()
    async def maybe_pool(question: str, pool: ContextPool | None = None) -> str:
        received.append(pool)
        return question

    with pytest.raises(TypeError, match="memory"):
        await needs_memory("q")
    assert await maybe_pool("q") == "q"
    assert received == [None]


# -- ContextPool: branching, hooks, serialization ---------------------------


async def test_pool_branching_example() -> None:
    parent = ContextPool(limit=20)
    await parent.add(ContextItem(id="x", description="Base", content=0))

    child = parent.branch()  # inherits limit, items snapshot, and hooks
    child2 = parent.branch(limit=5)  # override limit (oldest evicted if needed)

    assert child.limit == 20
    assert child2.limit == 5
    assert child.items == child2.items == parent.items
    await child.add(ContextItem(id="y", description="Child", content=1))
    await parent.remove("x")
    assert [i.id for i in child.items] == ["x", "y"]
    assert parent.items == []


async def test_pool_hooks_example(capsys: pytest.CaptureFixture[str]) -> None:
    pool = ContextPool(limit=10)

    @pool.before_add
    async def log_before(pool, item):  # type: ignore[no-untyped-def]
        print(f"About to add {item.id!r}, pool size: {len(pool)}")

    @pool.after_add
    async def log_after(pool, item):  # type: ignore[no-untyped-def]
        print(f"Added {item.id!r}, pool size: {len(pool)}")

    await pool.add(ContextItem(id="a", description="First", content=1))

    assert capsys.readouterr().out == "About to add 'a', pool size: 0\nAdded 'a', pool size: 1\n"
    child = pool.branch()  # hooks are inherited by children; none fire while copying
    assert capsys.readouterr().out == ""
    await child.add(ContextItem(id="b", description="Second", content=2))
    assert capsys.readouterr().out == "About to add 'b', pool size: 1\nAdded 'b', pool size: 2\n"


async def test_pool_serialization_example() -> None:
    pool = ContextPool(limit=10)
    await pool.add(ContextItem(id="a", description="First", content=1))

    @pool.on_evict
    async def named_pool_evict(pool, item):  # type: ignore[no-untyped-def]
        pass

    data = pool.to_dict()  # {"limit": ..., "items": [...], "hooks": {...}}
    restored = ContextPool.from_dict(data)

    assert data["limit"] == 10
    assert data["items"] == [{"id": "a", "description": "First", "content": 1}]
    assert data["hooks"] == {"on_evict": ["named_pool_evict"]}
    assert restored.items == pool.items
    assert restored.hooks == pool.hooks


async def test_agent_to_dict_and_from_dict_keep_queue_and_pool_with_their_hooks() -> None:
    @tool()
    async def fetch_doc(doc_id: str) -> ContextItem:
        return ContextItem(id=doc_id, description=f"Report {doc_id}", content=doc_id)

    pool = ContextPool()

    @pool.after_add
    async def pool_added(pool, item):  # type: ignore[no-untyped-def]
        pass

    agent = Agent("reader", "Reads documents", [fetch_doc], context_pool=pool)
    await agent.put(Turn("fetch_doc", kwargs={"doc_id": "r1"}))
    async for _ in agent.run():
        pass
    data = agent.to_dict()
    AgentRegistry.unregister(agent.name)

    restored = Agent.from_dict(data)

    assert restored.context_pool.items == pool.items
    assert restored.context_pool.hooks == pool.hooks
    assert restored.context_queue.to_dict() == agent.context_queue.to_dict()
