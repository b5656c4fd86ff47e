"""Selection in an agent: tools reach `pool.select` by injection; the pool stays below memory."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

import pygents_ctx
from pygents_ctx import (
    Agent,
    ContextItem,
    ContextPool,
    SemanticSelector,
    Turn,
    tool,
)
from pygents_ctx.context import selection

PACKAGE = Path(pygents_ctx.__file__).parent
# Everything below the memory layer (see the layer rule in the contributing notes).
LOWER_LAYERS = [
    "pygents_ctx.errors",
    "pygents_ctx.hooks",
    "pygents_ctx.registry",
    "pygents_ctx.hooks._dispatch",
    "pygents_ctx.hooks._calls",
    "pygents_ctx.tools",
    "pygents_ctx.turns",
    "pygents_ctx.agent",
] + [
    info.name for info in pkgutil.walk_packages([str(PACKAGE / "context")], "pygents_ctx.context.")
]


def _imported_modules(module: str) -> set[str]:
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = path.with_suffix("") / "__init__.py"
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_pool_and_everything_below_it_never_import_the_memory_layer() -> None:
    offenders = {
        module: sorted(n for n in _imported_modules(module) if n.startswith("pygents_ctx.memory"))
        for module in LOWER_LAYERS
    }

    assert {m: n for m, n in offenders.items() if n} == {}
    assert "pygents_ctx.context.pool" in LOWER_LAYERS


async def test_a_tool_gets_the_relevant_pool_items_by_injection() -> None:
    @tool
    async def read(doc_id: str, text: str) -> ContextItem[str]:
        return ContextItem(content=text, description=text, id=doc_id)

    @tool
    async def answer(question: str, pool: ContextPool) -> list[str]:
        return [item.id for item in await pool.select(question, k=2) if item.id]

    agent = Agent("reader", "Reads, then answers", [read, answer])
    for doc_id, text in [
        ("tides", "The Moon raises the tides twice a day"),
        ("sun", "The Sun adds smaller tides too"),
        ("hiring", "Hiring plan for the next quarter"),
    ]:
        await agent.put(Turn(read, kwargs={"doc_id": doc_id, "text": text}))
    await agent.put(Turn(answer, kwargs={"question": "what raises the tides?"}))

    values = [value async for _, value in agent.run()]

    assert values == [["tides", "sun"]]


async def test_an_agent_branch_selects_from_its_own_pool() -> None:
    pool: ContextPool[str] = ContextPool(selector=SemanticSelector())
    agent = Agent("reader", "Reads", [], context_pool=pool)
    await pool.add(ContextItem("...", description="tides and the moon", id="a"))
    assert [i.id for i in await pool.select("moon")] == ["a"]

    twin = agent.branch("twin")
    await twin.context_pool.add(ContextItem("...", description="moon landing", id="b"))

    assert isinstance(twin.context_pool.selector, SemanticSelector)
    assert [i.id for i in await twin.context_pool.select("moon", k=5)] == ["b", "a"]
    assert [i.id for i in await pool.select("moon", k=5)] == ["a"]


async def test_without_a_registered_default_a_pool_asks_for_a_selector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(selection, "_default_factory", None)
    pool: ContextPool[str] = ContextPool()
    await pool.add(ContextItem("...", description="tides", id="a"))

    with pytest.raises(RuntimeError, match="no selector and none is registered"):
        await pool.select("tides")
    pool.selector = SemanticSelector()
    assert [i.id for i in await pool.select("tides")] == ["a"]
