"""A research assistant whose model loop runs as turns, its conversation kept in SQLite.

A model answers a research question over several steps: it searches, fetches
documents into the agent's pool, takes notes into its queue, and answers.
`ModelLoop` runs each step as a turn; every message goes to a SQLite file in
the working directory, and before each model call the window is rebuilt from
it by a strategy pipeline under a token budget. The run is streamed: each
event is shown as it happens (in a terminal, the replies' text as it is
written).

Offline, a scripted model plays the researcher. `--base-url` and `--model` run
the same agent against any OpenAI-compatible server (OpenAI, vLLM, llama.cpp,
Ollama), with the key from the environment variable `--api-key-env` names.

Run it twice: the second run continues the same session with a follow-up
question. `--fresh` starts over, `--db PATH` picks the file: by default the
file the command line reads, `./pygents_ctx.db` (or `$PYGENTS_CTX_DB`), so
`pygents-ctx sessions` shows the session right after a run. The agent's own
state (its pool of documents, its notes, its queued turns) is saved beside
it, as `pygents_ctx.agent.json`.

    python examples/demo.py [--fresh] [--db PATH] [--base-url URL --model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from pygents_ctx import (
    Agent,
    ClearToolResults,
    ContextConfig,
    ContextItem,
    ContextQueue,
    FitTokens,
    LoopFinished,
    LoopLimits,
    Model,
    ModelLoop,
    ModelReplied,
    ModelRetry,
    OpenAIModel,
    Pipeline,
    SQLiteContextStore,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    connect,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

SESSION = "research-demo"
# The command line's default database (`pygents-ctx --help` says so), and its variable.
DEFAULT_DB = "pygents_ctx.db"
DB_ENV = "PYGENTS_CTX_DB"
BUDGET = 250  # tokens the model may be shown
INSTRUCTIONS = (
    "You answer research questions from a small library. Search it, fetch the documents "
    "you need, note what matters, then answer in two sentences."
)
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
    """Fetch a document by its id: the agent keeps it in its pool."""
    title, text = LIBRARY[doc_id]
    return ContextItem(content=f"{title}: {text}", description=title, id=doc_id)


@tool
async def take_notes(note: str) -> ContextItem[str]:
    """Keep a short note in the agent's working memory."""
    return ContextItem(content=note)


# -- the scripts the offline model follows ---------------------------------------

FIRST_QUESTION = "What causes tides, and can we make electricity from them?"
FOLLOW_UP = "How does tidal power compare with offshore wind?"


def first_script() -> list[Any]:
    return [
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


def follow_up_script() -> list[Any]:
    return [
        assistant(tool_call("search", query="wind")),
        assistant(tool_call("fetch", doc_id="wind-vs-tide")),
        "Offshore wind is cheaper today; tidal power wins on predictability, which "
        "grids value for balancing.",
    ]


# -- output ---------------------------------------------------------------------


class Display:
    """One line per step and tool call; in a terminal, a budget gauge and live text."""

    def __init__(self, budget: int, terminal: bool) -> None:
        self.budget = budget
        self.terminal = terminal
        self.writing = False  # in the middle of a streamed reply's line

    def say(self, text: str) -> None:
        self.end_line()
        print(text, flush=True)

    def end_line(self) -> None:
        if self.writing:
            print(flush=True)
            self.writing = False

    def step(self, number: int, tokens: int, shown: int, stored: int) -> None:
        gauge = f"window {tokens:>3}/{self.budget} tokens, {shown:>2} of {stored:>2} messages"
        # (the instructions are in the window and its tokens, not in the store)
        if self.terminal:
            filled = min(20, round(20 * tokens / self.budget))
            gauge = f"[{'#' * filled}{'.' * (20 - filled)}] {gauge}"
        self.say(f"step {number:>2}  {gauge}")

    def text(self, piece: str) -> None:
        """A piece of a reply's text, written as it arrives (terminal only)."""
        if not self.terminal:
            return
        if not self.writing:
            print("        ", end="")
            self.writing = True
        print(piece, end="", flush=True)

    async def show(self, event: Any, store: SQLiteContextStore) -> None:
        if isinstance(event, StepStarted):
            window = event.window
            shown = sum(message.role != "system" for message in window.messages)
            self.step(event.step, window.tokens, shown, await store.count())
        elif isinstance(event, TextDelta):
            self.text(event.text)
        elif isinstance(event, ModelRetry):
            self.say(f"        (the model is busy: trying again in {event.delay:.1f}s)")
        elif isinstance(event, ModelReplied) and not event.message.tool_uses:
            self.end_line()
        elif isinstance(event, ToolCallStarted):
            arguments = ", ".join(f"{k}={v!r}" for k, v in event.call.input.items())
            self.say(f"        -> {event.call.name}({arguments})")
        elif isinstance(event, ToolCallFinished):
            result = event.result
            outcome = "error: " + result.text if result.is_error else f"{len(result.text)} chars"
            self.say(f"        <- {event.call.name}: {outcome[:70]}")
        elif isinstance(event, LoopFinished):
            self.say(f"answer: {event.text}" if event.message else f"stopped: {event.reason.value}")


# -- main -------------------------------------------------------------------------


async def main(options: argparse.Namespace, saved_agent: bytes | None) -> bytes:
    """Run one question; return the agent's saved state for the next run."""
    display = Display(BUDGET, sys.stdout.isatty())
    conn = await connect(options.db)
    try:
        store = SQLiteContextStore(conn, session_id=SESSION)
        if options.fresh:
            await store.clear()
            await store.set_context_tokens(0, 0)
        display.say(f"transcript: {options.db} (session {SESSION!r})")
        stored = await store.count()
        continuing = stored > 0  # the transcript decides, whatever state file there is
        question = FOLLOW_UP if continuing else FIRST_QUESTION
        model = choose_model(options, follow_up_script() if continuing else first_script())
        strategy = Pipeline([ClearToolResults(keep_recent=1), FitTokens(BUDGET)])
        context = ContextConfig(store, strategy)
        if continuing and saved_agent is not None:
            agent = Agent.from_json(saved_agent, context=context)
            display.say(
                f"continuing the stored session: {stored} messages, "
                f"{len(agent.context_pool)} documents in the pool"
            )
        else:
            agent = new_agent(context)
            if continuing:  # the transcript without the agent's state (a copied .db)
                display.say(
                    f"continuing the stored session: {stored} messages; no saved agent "
                    f"state ({state_file(options.db).name}), so its pool and notes start empty"
                )
            else:
                display.say("starting a new session")
        loop = ModelLoop(agent, model, instructions=INSTRUCTIONS, limits=LoopLimits(max_steps=8))
        display.say(f"question: {question}")
        async for event in loop.stream(question):
            await display.show(event, store)
        notes = [item.content for item in agent.context_queue if isinstance(item.content, str)]
        documents = [item.id for item in agent.context_pool.items]
        used_in, used_out = await store.get_context_tokens()
        display.say(
            f"done: {await store.count()} messages stored, documents {documents}, "
            f"notes {notes}; {used_in:,} input and {used_out:,} output tokens in this session"
        )
        display.say("run it again to continue the session, or with --fresh to start over")
        return agent.to_json()
    finally:
        await conn.close()


def new_agent(context: ContextConfig) -> Agent:
    return Agent(
        "researcher",
        "Answers from a small library",
        [search, fetch, take_notes],
        context_queue=ContextQueue(limit=50),
        context=context,
    )


def state_file(db: Path) -> Path:
    """Where the agent's own state is kept: beside the transcript, named after it."""
    return db.with_suffix(".agent.json")


def choose_model(options: argparse.Namespace, script: list[Any]) -> Model:
    """The server's model with `--base-url`, otherwise the scripted one."""
    if options.base_url is None:
        # In a terminal, a pause between words shows the replies being streamed.
        return ScriptedModel(script, chunk_delay=0.03 if sys.stdout.isatty() else 0.0)
    api_key = os.environ.get(options.api_key_env) or "unused"  # local servers need none
    return OpenAIModel(options.model, base_url=options.base_url, api_key=api_key)


def parse(arguments: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--db",
        type=Path,
        default=Path(os.environ.get(DB_ENV) or DEFAULT_DB),
        help=f"the transcript (default: ${DB_ENV}, else ./{DEFAULT_DB}, which pygents-ctx reads)",
    )
    parser.add_argument("--fresh", action="store_true", help="start a new session")
    parser.add_argument(
        "--base-url", help="an OpenAI-compatible server, e.g. http://localhost:11434/v1"
    )
    parser.add_argument("--model", default="gpt-4o-mini", help="the model's name on that server")
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="the variable holding the server's key"
    )
    options = parser.parse_args(arguments)
    options.db = options.db.resolve()
    return options


if __name__ == "__main__":
    options = parse()
    state = state_file(options.db)  # the agent's own state: queue, pool, turns
    saved = None if options.fresh or not state.exists() else state.read_bytes()
    state.write_bytes(asyncio.run(main(options, saved)))
