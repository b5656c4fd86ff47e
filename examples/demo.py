"""A research assistant that keeps its conversation in SQLite.

A scripted model (no network) answers a research question over several steps:
it searches, fetches documents into the agent's pool, takes notes into its
queue, and answers. Every message goes to a SQLite file in the working
directory, and before each model call the window is rebuilt from it by a
strategy pipeline under a token budget.

Run it twice: the second run continues the same session with a follow-up
question. `--fresh` starts over, `--db PATH` picks the file.

    python examples/demo.py [--fresh] [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pygents_ctx import (
    Agent,
    ClearToolResults,
    ContextConfig,
    ContextItem,
    ContextQueue,
    FitTokens,
    Message,
    Pipeline,
    SQLiteContextStore,
    ToolResultBlock,
    Turn,
    connect,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

SESSION = "research-demo"
BUDGET = 250  # tokens the model may be shown
LIBRARY = {
    "tides-101": (
        "Tides",
        "Tides are caused mainly by the Moon's gravity and partly by the Sun's. Two high "
        "tides a day come from the bulge on the side facing the Moon and the one opposite. " * 3,
    ),
    "tidal-power": (
        "Tidal power",
        "Tidal stream turbines work like underwater wind turbines; barrages hold water "
        "back at high tide and release it through turbines. Output is predictable years "
        "ahead, unlike wind or sunshine. " * 3,
    ),
    "wind-vs-tide": (
        "Wind and tide compared",
        "Offshore wind is cheaper per megawatt-hour today, but tidal output can be "
        "forecast to the minute, which makes it valuable for grid balancing. " * 3,
    ),
}


# -- tools the model can call -------------------------------------------------


@tool
async def search(query: str) -> str:
    """Search the library; returns matching document ids and titles."""
    words = query.lower().split()
    hits = [
        f"{doc_id}: {title}"
        for doc_id, (title, text) in LIBRARY.items()
        if any(word in text.lower() or word in title.lower() for word in words)
    ]
    return "\n".join(hits) or "no results"


@tool
async def fetch(doc_id: str) -> ContextItem[str]:
    """Fetch a document: an item with an id, which the agent routes into its pool."""
    title, text = LIBRARY[doc_id]
    return ContextItem(content=text, description=title, id=doc_id)


@tool
async def take_notes(note: str) -> str:
    """Keep a note in the agent's working memory."""
    return f"noted: {note}"


# -- the model loop, built from turns -----------------------------------------


class Research:
    """The agent, its model, and how each step is shown."""

    def __init__(self, model: ScriptedModel, display: Display) -> None:
        self.model, self.display = model, display
        self.agent: Agent | None = None  # set once the agent exists
        self.step = 0

    async def think(self) -> AsyncIterator[Any]:
        """One model call: build the window, ask the model, route its reply."""
        agent = self.agent
        assert agent is not None
        assert agent.context is not None
        window = await agent.prompt_window()
        reply = await self.model(window.messages)
        self.step += 1
        calls = ", ".join(f"{c.name}({_args(c.input)})" for c in reply.tool_uses)
        stored = await agent.context.store.count()
        self.display.step(
            self.step, window.tokens, len(window.messages), stored, calls or reply.text
        )
        yield ContextItem(content=reply)  # -> the queue and the SQLite store
        await agent.context.store.add_context_tokens(window.tokens, len(reply.text) // 4)
        if reply.tool_uses:
            yield Turn("act", kwargs={"calls": [_call(c) for c in reply.tool_uses]})
        else:
            yield reply.text  # the answer: yielded to the caller

    async def act(self, calls: list[dict[str, Any]]) -> AsyncIterator[Any]:
        """Run the model's tool calls; their results go back as one user message."""
        results = []
        for call in calls:
            output = await TOOLS[call["name"]](**call["input"])
            if isinstance(output, ContextItem):  # a document: to the pool, its text to the model
                yield output
                output = f"{output.description}: {output.content}"
            elif call["name"] == "take_notes":
                yield ContextItem(content=call["input"]["note"])  # a note, no id: the queue
            results.append(ToolResultBlock(call["id"], output))
        yield ContextItem(content=Message("user", results))
        yield Turn("think")


TOOLS = {t.metadata.name: t for t in (search, fetch, take_notes)}


def _call(block: Any) -> dict[str, Any]:
    return {"id": block.id, "name": block.name, "input": block.input}


def _args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())


# -- the scripts the model follows ---------------------------------------------

FIRST_QUESTION = "What causes tides, and can we make electricity from them?"
FOLLOW_UP = "How does tidal power compare with offshore wind?"


def first_script() -> ScriptedModel:
    return ScriptedModel(
        [
            assistant("Let me search the library.", tool_call("search", query="tides power")),
            assistant(
                "Two documents look relevant; fetching both.",
                tool_call("fetch", doc_id="tides-101"),
                tool_call("fetch", doc_id="tidal-power"),
            ),
            assistant(tool_call("take_notes", note="tides: Moon + Sun; power: turbines")),
            "Tides come mostly from the Moon's gravity, with help from the Sun. Yes: tidal "
            "stream turbines and barrages turn them into electricity, predictably.",
        ]
    )


def follow_up_script() -> ScriptedModel:
    return ScriptedModel(
        [
            assistant(tool_call("search", query="wind")),
            assistant(tool_call("fetch", doc_id="wind-vs-tide")),
            "Offshore wind is cheaper today; tidal power wins on predictability, which "
            "grids value for balancing.",
        ]
    )


# -- output ---------------------------------------------------------------------


class Display:
    """Step lines; with a progress bar of the window against the budget in a terminal."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.terminal = sys.stdout.isatty()

    def say(self, text: str) -> None:
        print(text, flush=True)

    def step(self, number: int, tokens: int, shown: int, stored: int, what: str) -> None:
        gauge = f"window {tokens:>3}/{self.budget} tokens, {shown:>2} of {stored:>2} messages"
        if self.terminal:
            filled = min(20, round(20 * tokens / self.budget))
            gauge = f"[{'#' * filled}{'.' * (20 - filled)}] {gauge}"
        self.say(f"step {number:>2}  {gauge}  -> {what[:70]}")


# -- main -------------------------------------------------------------------------


async def main(db: Path, saved_agent: bytes | None, fresh: bool) -> bytes:
    """Run one question; return the agent's saved state for the next run."""
    display = Display(BUDGET)
    conn = await connect(db)
    try:
        store = SQLiteContextStore(conn, session_id=SESSION)
        if fresh:
            await store.clear()
            await store.set_context_tokens(0, 0)
        display.say(f"transcript: {db} (session {SESSION!r})")
        continuing = saved_agent is not None and await store.count() > 0
        script = follow_up_script if continuing else first_script
        question = FOLLOW_UP if continuing else FIRST_QUESTION
        research = Research(script(), display)
        tools = [record, tool(research.think), tool(research.act), search, fetch, take_notes]
        strategy = Pipeline([ClearToolResults(keep_recent=1), FitTokens(BUDGET)])
        context = ContextConfig(store, strategy)
        if saved_agent is not None and continuing:
            agent = Agent.from_json(saved_agent, context=context)
            display.say(
                f"continuing the stored session: {await store.count()} messages, "
                f"{len(agent.context_pool)} documents in the pool"
            )
        else:
            agent = Agent(
                "researcher",
                "Answers from a small library",
                tools,
                context_queue=ContextQueue(limit=50),
                context=context,
            )
            display.say("starting a new session")
        research.agent = agent
        display.say(f"question: {question}")
        await agent.put(Turn(record, kwargs={"text": question}))
        async for _, answer in agent.run():
            display.say(f"answer: {answer}")
        notes = [item.content for item in agent.context_queue if isinstance(item.content, str)]
        documents = [item.id for item in agent.context_pool.items]
        used_in, _ = await store.get_context_tokens()
        display.say(
            f"done: {await store.count()} messages stored, documents {documents}, "
            f"notes {notes}; {used_in:,} input tokens sent in this session"
        )
        display.say("run it again to continue the session, or with --fresh to start over")
        return agent.to_json()
    finally:
        await conn.close()


@tool
async def record(text: str) -> AsyncIterator[Any]:
    """The user's question: into the conversation, then the first model call."""
    yield ContextItem(content=Message("user", text))
    yield Turn("think")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=Path("pygents_demo.db"))
    parser.add_argument("--fresh", action="store_true", help="start a new session")
    options = parser.parse_args()
    db = options.db.resolve()
    state = db.with_suffix(".agent.json")  # the agent's own state: queue, pool, turns
    saved = None if options.fresh or not state.exists() else state.read_bytes()
    state.write_bytes(asyncio.run(main(db, saved, options.fresh)))
