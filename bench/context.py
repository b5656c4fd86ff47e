"""`python -m bench context`: what each context strategy keeps, what it costs, and how fast.

One long conversation (bench/conversation.py: a seed, `--steps` model calls,
tool calls with small and large results, `--facts` facts planted at random
depths, questions about them at the end) is played through every built-in
strategy and the documented compositions, each in a fresh session of the
chosen store (`--store memory|sqlite|postgres`), the way a `ModelLoop` plays
it: the step's inputs are stored (tool results over the loop's default
`ToolResultOffload` budget offloaded to a stub, as a `ModelLoop` stores them),
the window is built from the stored history
(`ContextConfig.history()`, `window_of()`), a `ScriptedModel` replies with the
conversation's reply, which is stored with the call's usage record (where an
`AutoCompactStore` compacts).

Per strategy:

- facts: the share of the planted facts whose sentence is in the last
  window (the one the questions are asked from) in a message that is not a
  summary, and the share recoverable: in that window, or among the top 5
  hits of the store's archive search for the fact's question (where the store
  has `search`; without it, recoverable is in-window only; a hit whose tool
  result was offloaded counts by its whole text, which the model reads by its
  handle with `read_tool_result`);
- orphans: tool calls without their results and results without their calls,
  over every window built (a provider refuses such a window);
- window tokens per step, as the strategy counts them (mean and largest);
- cached: the share of input tokens a provider would serve from its prompt
  cache (bench/cache_sim.py), from the requests the library's `OpenAIModel`
  and `AnthropicModel` encode for each window, breakpoints included;
- cost of the conversation from a dated price table (bench/prices.json, or
  `--prices FILE`): input, cached input, cache writes, output, and the
  summarizer's calls (a scripted summarizer, priced as uncached model calls);
- build: the time `window_of` takes per step (mean and 99th percentile);
- summaries and compactions: the summarizer's calls from a `Summarize` stage
  and from an `AutoCompactStore`; start changed: the steps whose window is
  not the previous window plus new messages (each one misses a prefix cache).

`--record FILE` writes the conversation as a fixture, `--replay FILE` plays a
recorded one instead of generating it; `--quick` is a small run (300 steps,
20 facts); `--out DIR` is where context.json and context.md go (bench/out).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

import pygents_ctx
from bench.cache_sim import (
    AnthropicPromptCache,
    OpenAIPromptCache,
    Served,
    anthropic_min_tokens,
    anthropic_segments,
    openai_segments,
)
from bench.context_report import (
    SEARCH_TOP,
    STABLE_AT_B,
    Row,
    markdown_report,
    table,
    target_table,
    targets,
)
from bench.conversation import Conversation, from_fixture, generate
from bench.prices import DEFAULT_PRICES, PROVIDERS, Price, conversation_cost, load_prices
from pygents_ctx import (
    AutoCompactStore,
    ClearToolInputs,
    ClearToolResults,
    ContextConfig,
    ContextStore,
    ContextStrategy,
    DropToolRounds,
    FitTokens,
    MemoryContextStore,
    Message,
    MiddleOut,
    PinnedWindow,
    Pipeline,
    PostgresContextStore,
    SlidingWindow,
    SQLiteContextStore,
    Summarize,
    TextBlock,
    ToolResultBlock,
    ToolResultOffload,
    TrimRounds,
    Truncate,
    TruncateToolResults,
    UntilFits,
    UsageRecord,
    connect,
    connect_postgres,
    count_tokens,
    is_summary,
)
from pygents_ctx.model.offload import offloaded_handles, read_tool
from pygents_ctx.testing import ScriptedModel, ScriptedSummarizer
from pygents_ctx.tools import Tool

__all__ = ["Contender", "Row", "archive_search", "contenders", "main", "orphans", "run", "run_one"]

OUT: Final = Path(__file__).parent / "out"
RUN_ID: Final = "bench-context"


# ----------------------------------------------------------------------------- measures


def orphans(window: Sequence[Message]) -> int:
    """Tool calls not answered in the next message, and results not answering the one before."""
    count = 0
    for index, message in enumerate(window):
        if message.has_tool_uses:
            after = window[index + 1] if index + 1 < len(window) else None
            answered = {r.tool_use_id for r in after.tool_results} if after else set()
            count += sum(1 for call in message.tool_uses if call.id not in answered)
        if message.has_tool_results:
            before = window[index - 1] if index else None
            asked = {call.id for call in before.tool_uses} if before else set()
            count += sum(1 for result in message.tool_results if result.tool_use_id not in asked)
    return count


def _text(message: Message) -> str:
    """The message's text and its tool results' text."""
    return "\n".join(
        block.text for block in message.content if isinstance(block, TextBlock | ToolResultBlock)
    )


async def _readable(message: Message, offload: ToolResultOffload, store: ContextStore) -> str:
    """What a model finds in a search hit: its text, and its offloaded results' whole text
    (read by the handle, as the model does with `read_tool_result`)."""
    whole = [
        await offload.read(block.offloaded.handle, store)
        for block in message.content
        if isinstance(block, ToolResultBlock) and block.offloaded is not None
    ]
    return "\n".join([_text(message), *whole])


Search = Callable[[str], Awaitable[list[Message]]]


def archive_search(store: ContextStore) -> Search | None:
    """The store's search over its archive and live history, if it has one (else None).

    The one place that knows the search's shape: `store.search(query, limit=5)`
    returning hits that carry their `message`.
    """
    search = getattr(store, "search", None)
    if not callable(search):
        return None

    async def top(query: str) -> list[Message]:
        hits = await search(query, limit=SEARCH_TOP)
        return [hit if isinstance(hit, Message) else hit.message for hit in hits]

    return top


class _WireTokens:
    """Tokens of a part of an encoded request: the default count of its text, memoized."""

    def __init__(self) -> None:
        self._known: dict[bytes, int] = {}

    def __call__(self, part: Any) -> int:
        key = orjson.dumps(part)
        tokens = self._known.get(key)
        if tokens is None:
            strings: list[str] = []
            _strings(part, strings)
            tokens = count_tokens([Message("user", "\n".join(strings))])
            self._known[key] = tokens
        return tokens


def _strings(value: Any, into: list[str]) -> None:
    if isinstance(value, str):
        into.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, into)
    elif isinstance(value, list):
        for item in value:
            _strings(item, into)


# ----------------------------------------------------------------------------- strategies


async def _summarize(messages: list[Message], previous: str | None) -> str:
    """A scripted summary: what was covered, never the details (so only verbatim counts)."""
    words = previous.split() if previous else ["", "0", "", "", "", "0"]
    asked, calls = int(words[1]), int(words[5])
    asked += sum(1 for m in messages if m.role == "user" and not m.has_tool_results)
    calls += sum(len(m.tool_uses) for m in messages)
    return f"Covered {asked} user messages and {calls} tool calls; details are in the archive."


Make = Callable[
    [ContextStore, ScriptedSummarizer, int], tuple[ContextStore, ContextStrategy | None]
]


@dataclass(frozen=True, slots=True)
class Contender:
    """A strategy (or store wrapper) to measure: its name and how to make it for a session."""

    name: str
    make: Make


def _default_name() -> str:
    return f"default: {type(ContextConfig(MemoryContextStore()).strategy).__name__}()"


def contenders() -> list[Contender]:
    """Every built-in strategy and the documented compositions, at budget `B`."""

    def plain(strategy: Callable[[int], ContextStrategy | None]) -> Make:
        return lambda store, _summarizer, budget: (store, strategy(budget))

    def summarized(pinned: bool) -> Make:
        def make(
            store: ContextStore, summarizer: ScriptedSummarizer, budget: int
        ) -> tuple[ContextStore, ContextStrategy]:
            inner = int(budget * 0.6) if pinned else budget
            pipeline = Pipeline(
                [
                    # The guide's settings at a 4,000-token budget, scaled to this one,
                    # with the window's budget, as the strategies page says to give it.
                    Summarize(
                        summarizer,
                        keep_recent_tokens=budget // 4,
                        min_old_tokens=budget * 3 // 4,
                        max_tokens=inner,
                    ),
                    ClearToolResults(keep_recent=5),
                    FitTokens(inner),
                ]
            )
            return store, PinnedWindow(pipeline, budget) if pinned else pipeline

        return make

    def compacting(
        store: ContextStore, summarizer: ScriptedSummarizer, budget: int
    ) -> tuple[ContextStore, ContextStrategy]:
        wrapped = AutoCompactStore(store, summarizer, keep_recent=20, context_window=budget)
        return wrapped, FitTokens(budget)

    def edited(editor: Callable[[], ContextStrategy]) -> Make:
        return plain(lambda b: Pipeline([editor(), FitTokens(b)]))

    # The append-only default strategy, where this version of the library has it.
    stable: Callable[[int], ContextStrategy] | None = getattr(pygents_ctx, "StableWindow", None)
    budgeted_default = (
        []
        if stable is None
        else [
            Contender(STABLE_AT_B, plain(stable)),
            Contender(  # edits go after it (see the strategies page)
                f"{STABLE_AT_B} + ClearToolResults(5)",
                plain(lambda b: Pipeline([stable(b), ClearToolResults(5)])),
            ),
        ]
    )
    return [
        Contender(_default_name(), plain(lambda b: None)),
        *budgeted_default,
        Contender("SlidingWindow(100)", plain(lambda b: SlidingWindow(100))),
        Contender("TrimRounds(20)", plain(lambda b: TrimRounds(20))),
        Contender("Truncate(max_chars=4B)", plain(lambda b: Truncate(max_chars=4 * b))),
        Contender("FitTokens(B)", plain(FitTokens)),
        Contender("MiddleOut(B)", plain(MiddleOut)),
        Contender("ClearToolResults(5) + FitTokens(B)", edited(lambda: ClearToolResults(5))),
        Contender("ClearToolInputs(5) + FitTokens(B)", edited(lambda: ClearToolInputs(5))),
        Contender("TruncateToolResults(500) + FitTokens(B)", edited(TruncateToolResults)),
        Contender("DropToolRounds(5) + FitTokens(B)", edited(lambda: DropToolRounds(5))),
        Contender(
            "UntilFits(B, [ClearToolResults(5), DropToolRounds(5), FitTokens(B)])",
            plain(lambda b: UntilFits(b, [ClearToolResults(5), DropToolRounds(5), FitTokens(b)])),
        ),
        Contender(
            "PinnedWindow(FitTokens(0.6B), B)",
            plain(lambda b: PinnedWindow(FitTokens(int(b * 0.6)), b)),
        ),
        Contender(
            "PinnedWindow(ClearToolResults(5) + FitTokens(0.6B), B)",
            plain(
                lambda b: PinnedWindow(Pipeline([ClearToolResults(5), FitTokens(int(b * 0.6))]), b)
            ),
        ),
        Contender("Summarize + ClearToolResults(5) + FitTokens(B)", summarized(pinned=False)),
        Contender(
            "PinnedWindow(Summarize + ClearToolResults(5) + FitTokens(0.6B), B)",
            summarized(pinned=True),
        ),
        Contender("AutoCompactStore(0.75B) + FitTokens(B)", compacting),
    ]


# ----------------------------------------------------------------------------- stores


Opener = Callable[[str], ContextStore]


@contextlib.asynccontextmanager
async def _stores(kind: str, dsn: str | None = None) -> AsyncIterator[Opener]:
    """Sessions of the store `kind`, by name: one fresh session per strategy.

    SQLite uses a database in a temporary folder; PostgreSQL the server at
    `dsn`, or a throwaway one (tests/postgres_server.py) when None.
    """
    if kind == "memory":
        yield lambda name: MemoryContextStore(session_id=name)
    elif kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            async with connect(Path(folder) / "bench-context.db") as conn:
                yield lambda name: SQLiteContextStore(conn, session_id=name)
    elif kind == "postgres":
        async with contextlib.AsyncExitStack() as stack:
            if dsn is None:
                from tests import postgres_server

                server = postgres_server.start()
                stack.callback(server.stop)
                dsn = server.dsn
            pg = await stack.enter_async_context(connect_postgres(dsn))
            yield lambda name: PostgresContextStore(pg, session_id=name)
    else:
        raise ValueError(f"--store must be memory, sqlite or postgres, not {kind!r}")


# ----------------------------------------------------------------------------- the run


def _models() -> tuple[Any, Any]:
    """The library's own request builders, for the requests they would send."""
    from pygents_ctx import AnthropicModel, OpenAIModel

    return OpenAIModel("gpt-4.1", api_key="bench"), AnthropicModel(
        "claude-sonnet-4-5", api_key="bench"
    )


async def read_file(query: str, path: str) -> str:
    """Read a file of the project, or the part of it that matches `query`."""
    return path


async def run_command(query: str, path: str) -> str:
    """Run a shell command (`query`) in the directory `path`."""
    return path


async def search_code(query: str, path: str) -> str:
    """Search the code under `path` for `query`."""
    return path


def _tools() -> list[Tool[..., Any]]:
    """The conversation's tools, for their definitions in the requests (not registered)."""
    return [Tool(read_file), Tool(run_command), Tool(search_code)]


async def _offloaded(message: Message, offload: ToolResultOffload, store: ContextStore) -> Message:
    """`message` with its tool results offloaded as a `ModelLoop` stores them."""
    if not message.has_tool_results:
        return message
    blocks = [
        await offload.apply(block, store) if isinstance(block, ToolResultBlock) else block
        for block in message.content
    ]
    return Message(message.role, blocks)


def _read_tool(offload: ToolResultOffload) -> Tool[..., Any]:
    """The `read_tool_result` tool a `ModelLoop` offers while a window shows a stub."""

    async def never(handle: str, offset: int, length: int) -> str:
        raise AssertionError("the scripted conversation never reads an offloaded result")

    return read_tool(never, offload.page_chars)


async def run_one(
    conversation: Conversation,
    contender: Contender,
    store: ContextStore,
    budget: int,
    prices: dict[str, Price],
    per: int,
) -> Row:
    """Play `conversation` through one contender in `store` (a fresh session)."""
    summarizer = ScriptedSummarizer(_summarize)
    kept, strategy = contender.make(store, summarizer, budget)
    config = ContextConfig(kept, strategy)
    model = ScriptedModel([step.reply for step in conversation.steps])
    openai_model, anthropic_model = _models()
    tools = _tools()
    offload = ToolResultOffload()  # what a ModelLoop does by default
    read_tool = _read_tool(offload)
    caches = {
        "openai": OpenAIPromptCache(),
        "anthropic": AnthropicPromptCache(
            min_tokens=anthropic_min_tokens(prices["anthropic"].model)
        ),
    }
    served = {name: Served(0) for name in PROVIDERS}
    wire_tokens = _WireTokens()
    tokens, spans = [], []
    broken = output = while_fitting = compactions = breaks = 0
    await config.record(conversation.system, RUN_ID)
    window_messages: list[Message] = []
    for step in conversation.steps:
        for message in step.inputs:
            await config.record(await _offloaded(message, offload, kept), RUN_ID)
        history = await config.history()
        summaries_before = len(summarizer.calls)
        start = time.perf_counter_ns()
        window = await config.window_of(history)
        spans.append(time.perf_counter_ns() - start)
        if len(summarizer.calls) > summaries_before and count_tokens(history) <= budget:
            while_fitting += 1
        if window.messages[: len(window_messages)] != window_messages:
            breaks += 1  # not the previous window plus new messages: a compaction of some kind
        window_messages = window.messages
        tokens.append(window.tokens)
        broken += orphans(window.messages)
        offered = [*tools, read_tool] if offloaded_handles(window.messages) else tools
        requests = {
            "openai": openai_segments(openai_model.request(window, offered), wire_tokens),
            "anthropic": anthropic_segments(anthropic_model.request(window, offered), wire_tokens),
        }
        for name in PROVIDERS:
            this = caches[name].serve(requests[name], step.at)
            total = served[name]
            served[name] = Served(
                total.input_tokens + this.input_tokens,
                total.cached_tokens + this.cached_tokens,
                total.cache_write_tokens + this.cache_write_tokens,
            )
        response = await model.complete(window, offered)
        output += response.usage.output_tokens
        await config.record(response.message, RUN_ID)
        compacting_before = len(summarizer.calls)
        record = UsageRecord(response.usage, run_id=RUN_ID, estimated_input_tokens=window.tokens)
        await kept.record_usage(record)
        compactions += len(summarizer.calls) - compacting_before
    # The summarizer's own calls: model calls too, priced uncached.
    summary_in = sum(count_tokens(call.messages) for call in summarizer.calls)
    summary_out = 0
    for call in summarizer.calls:
        reply = await _summarize(list(call.messages), call.previous_summary)
        summary_out += count_tokens([Message("assistant", reply)])
    cost = {
        name: conversation_cost(served[name], output, prices[name], per)
        + conversation_cost(Served(summary_in), summary_out, prices[name], per)
        for name in PROVIDERS
    }
    shown = "\n".join(_text(m) for m in window_messages if not is_summary(m))
    search = archive_search(kept)
    in_window = recoverable = found = 0
    for fact in conversation.facts:
        seen = fact.sentence in shown
        hit = False
        if search is not None:
            hits = await search(fact.question)
            hit = any([fact.sentence in await _readable(m, offload, kept) for m in hits])
        in_window += seen
        recoverable += seen or hit
        found += hit
    micros = sorted(span / 1_000 for span in spans)
    return Row(
        strategy=contender.name,
        facts=len(conversation.facts),
        in_window=in_window,
        recoverable=recoverable,
        search_top5=found if search is not None else None,
        orphans=broken,
        window_tokens_mean=statistics.fmean(tokens),
        window_tokens_max=max(tokens),
        cached_share={
            name: served[name].cached_tokens / max(1, served[name].input_tokens)
            for name in PROVIDERS
        },
        cost=cost,
        build_us_mean=statistics.fmean(micros),
        build_us_p99=micros[min(len(micros) - 1, int(len(micros) * 0.99))],
        summaries=len(summarizer.calls) - compactions,
        summaries_while_fitting=while_fitting,
        compactions=compactions,
        prefix_breaks=breaks,
    )


async def run(
    conversation: Conversation,
    *,
    budget: int,
    store: str,
    prices: dict[str, Price],
    per: int,
    only: Sequence[str] = (),
    dsn: str | None = None,
) -> list[Row]:
    """Every contender (or those whose names start with one of `only`) over `conversation`.

    Each plays in a session of its own, named for this run (a database shared
    with other runs keeps theirs apart).
    """
    rows = []
    run_name = uuid.uuid4().hex[:12]
    async with _stores(store, dsn) as open_session:
        for index, contender in enumerate(contenders()):
            if only and not any(contender.name.startswith(name) for name in only):
                continue
            started = time.perf_counter()
            session = open_session(f"bench-context-{run_name}-{index}")
            rows.append(await run_one(conversation, contender, session, budget, prices, per))
            seconds = time.perf_counter() - started
            print(f"  {contender.name}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return rows


# ----------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench context", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--seed", type=int, default=39, help="the conversation's seed (39)")
    parser.add_argument("--steps", type=int, default=3_000, help="model calls (3000)")
    parser.add_argument("--facts", type=int, default=200, help="planted facts (200)")
    parser.add_argument("--budget", type=int, default=16_000, help="window budget B (16000)")
    parser.add_argument(
        "--store",
        choices=("memory", "sqlite", "postgres"),
        default="memory",
        help="where each strategy's session is stored and read back from (memory)",
    )
    parser.add_argument(
        "--dsn", help="with --store postgres: the server to use (default: a throwaway one)"
    )
    parser.add_argument("--prices", type=Path, default=DEFAULT_PRICES, help="a price table (JSON)")
    parser.add_argument("--record", type=Path, help="write the conversation to this fixture file")
    parser.add_argument("--replay", type=Path, help="play this recorded fixture instead")
    parser.add_argument("--quick", action="store_true", help="a small run: 300 steps, 20 facts")
    parser.add_argument(
        "--only", action="append", default=[], help="strategies whose name starts so"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="folder for context.json and .md")
    parser.add_argument(
        "--markdown", action="store_true", help="print the latest run's report, run nothing"
    )
    return parser


def _about(options: argparse.Namespace, conversation: Conversation, date: str) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "seed": conversation.seed,
        "steps": len(conversation.steps),
        "facts": len(conversation.facts),
        "budget": options.budget,
        "store": options.store,
        "prices": f"{options.prices.name}, {date}",
        "replayed": str(options.replay) if options.replay else None,
    }


def main(arguments: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table and the targets; write context.json and .md."""
    options = _parser().parse_args(arguments)
    if options.markdown:  # the latest run's rows, with the targets as this version reads them
        saved = options.out / "context.json"
        if not saved.exists():
            raise SystemExit(f"no run in {options.out}: run `python -m bench context` first")
        about = json.loads(saved.read_text())
        rows = [Row(**row) for row in about.pop("rows")]
        found = targets(rows, about["steps"], about["budget"])
        print(markdown_report(about, rows, found))
        return 0
    if options.quick:
        options.steps, options.facts = min(options.steps, 300), min(options.facts, 20)
    if options.budget < 1_000:
        raise SystemExit(f"--budget must be at least 1000 tokens, not {options.budget}")
    if options.record and options.replay:
        raise SystemExit("--record and --replay: give one (a replay is already recorded)")
    try:
        date, per, prices = load_prices(options.prices)
        if options.replay:
            conversation = from_fixture(json.loads(options.replay.read_text()))
        else:
            conversation = generate(options.seed, options.steps, options.facts)
    except (OSError, ValueError) as exc:
        raise SystemExit(str(exc)) from exc
    if options.record:
        options.record.write_bytes(orjson.dumps(conversation.to_fixture()))
    rows = asyncio.run(
        run(
            conversation,
            budget=options.budget,
            store=options.store,
            prices=prices,
            per=per,
            only=options.only,
            dsn=options.dsn,
        )
    )
    found = targets(rows, len(conversation.steps), options.budget)
    print(table(rows))
    print()
    print(target_table(found))
    about = _about(options, conversation, date)
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "context.json").write_text(
        json.dumps(
            {**about, "rows": [asdict(r) for r in rows], "targets": [asdict(t) for t in found]},
            indent=2,
        )
    )
    (options.out / "context.md").write_text(markdown_report(about, rows, found) + "\n")
    return 0
