"""The context benchmark (`python -m bench context`): its conversation, its measures, its
prompt-cache simulator (against the documented rules and against what a server reports
through the official OpenAI SDK), its prices, and recording and replaying a run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import context, prices
from bench.cache_sim import (
    AnthropicPromptCache,
    OpenAIPromptCache,
    Segment,
    Served,
    anthropic_min_tokens,
    anthropic_segments,
    openai_segments,
)
from bench.conversation import Conversation, from_fixture, generate
from bench.fake_openai import FakeOpenAI, message_tokens
from pygents_ctx import (
    Agent,
    AnthropicModel,
    ContextConfig,
    FitTokens,
    MemoryContextStore,
    Message,
    ModelLoop,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    OpenAIModel,
    PinnedWindow,
    PromptWindow,
    StepStarted,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    tool,
)
from tests.model.fake_api import message, text_block, tool_use_block
from tests.postgres_server import PostgresServer

PRICES = prices.DEFAULT_PRICES


def _segments(*tokens: int, marks: tuple[int, ...] = (), tag: str = "") -> list[Segment]:
    return [
        Segment(hashlib.sha256(f"{tag}{i}".encode()).digest(), n, i in marks)
        for i, n in enumerate(tokens)
    ]


# -- the conversation ---------------------------------------------------------------------


def test_the_same_seed_gives_the_same_conversation_and_another_seed_another() -> None:
    first, again, other = generate(7, 80, 10), generate(7, 80, 10), generate(8, 80, 10)
    assert first == again
    assert first.steps != other.steps
    assert len(first.steps) == 80
    assert len(first.facts) == 10
    # Every fact is in the inputs of its step, and the last step opens the questions.
    for fact in first.facts:
        inputs = "\n".join(context._text(m) for m in first.steps[fact.step].inputs)
        assert fact.sentence in inputs
        assert fact.answer in fact.sentence
    assert "questions" in context._text(first.steps[-1].inputs[-1])


def test_every_tool_call_is_answered_in_the_next_step() -> None:
    conversation = generate(3, 200, 5)
    history = [m for step in conversation.steps for m in (*step.inputs, step.reply)]
    assert context.orphans(history[:-1]) == 0  # the last reply is never answered


@pytest.mark.parametrize(("steps", "facts"), [(1, 0), (10, 10), (10, -1)])
def test_a_conversation_too_short_for_its_facts_is_refused(steps: int, facts: int) -> None:
    with pytest.raises(ValueError, match=r"--steps|--facts"):
        generate(1, steps, facts)


# -- orphans ----------------------------------------------------------------------------


def test_the_integrity_count_finds_a_deliberately_orphaned_window() -> None:
    call = Message("assistant", [TextBlock("Reading."), ToolUseBlock("c1", "read_file", {})])
    result = Message("user", [ToolResultBlock("c1", "text")])
    other = Message("user", [ToolResultBlock("c9", "text")])
    assert context.orphans([Message("user", "hi"), call, result]) == 0
    assert context.orphans([Message("user", "hi"), call]) == 1  # a call without its result
    assert context.orphans([Message("user", "hi"), result]) == 1  # a result without its call
    assert context.orphans([call, other]) == 2  # both


# -- the OpenAI rule ----------------------------------------------------------------------


def test_openai_caches_nothing_below_1024_tokens() -> None:
    cache = OpenAIPromptCache()
    prompt = _segments(500, 500)
    cache.serve(prompt, 0)
    assert cache.serve(prompt, 1) == Served(1_000, 0)


def test_openai_reads_a_shared_prefix_in_128_token_steps() -> None:
    cache = OpenAIPromptCache()
    first = _segments(1_100, 200)
    assert cache.serve(first, 0) == Served(1_300, 0)  # nothing cached yet
    # The same first 1,300 tokens, then new ones: 1,024 + 2 x 128 = 1,280 are read.
    assert cache.serve([*first, *_segments(400, tag="new")], 1).cached_tokens == 1_280
    # A prompt that differs in its first segment reads nothing.
    assert cache.serve(_segments(1_100, 200, tag="other"), 2).cached_tokens == 0


@given(st.lists(st.integers(1, 3_000), min_size=1, max_size=8), st.integers(0, 8))
def test_openai_cached_tokens_follow_the_rule_for_any_prompt(sizes: list[int], keep: int) -> None:
    cache = OpenAIPromptCache()
    first = _segments(*sizes)
    cache.serve(first, 0)
    second = first[:keep] + _segments(100, tag="new")
    shared = sum(sizes[:keep])
    cached = cache.serve(second, 1).cached_tokens
    if sum(sizes) < 1_024 or shared < 1_024 or shared + 100 < 1_024:
        assert cached == 0
    else:
        assert cached % 128 == 0
        assert shared - 128 < cached <= shared


def test_openai_entries_expire_five_minutes_after_their_last_use() -> None:
    cache = OpenAIPromptCache()
    prompt = _segments(2_000)
    cache.serve(prompt, 0)
    assert cache.serve(prompt, 299).cached_tokens == 1_920  # used again: lives on
    assert cache.serve(prompt, 598).cached_tokens == 1_920
    assert cache.serve(prompt, 898.5).cached_tokens == 0  # 300.5 s unused: gone
    with pytest.raises(ValueError, match="time order"):
        cache.serve(prompt, 10)


# -- the Anthropic rule -------------------------------------------------------------------


def test_anthropic_writes_at_breakpoints_then_reads_them() -> None:
    cache = AnthropicPromptCache()
    first = _segments(800, 600, 300, marks=(1,))
    assert cache.serve(first, 0) == Served(1_700, 0, 1_400)  # the prefix to the mark
    again = _segments(800, 600, 300, 50, marks=(1, 3))
    # Reads the 1,400 cached, writes the rest up to its last mark.
    assert cache.serve(again, 1) == Served(1_750, 1_400, 350)


def test_anthropic_does_not_cache_below_the_models_minimum() -> None:
    assert anthropic_min_tokens("claude-haiku-4-5-20251001") == 4_096
    assert anthropic_min_tokens("claude-3-5-haiku-latest") == 2_048
    assert anthropic_min_tokens("claude-sonnet-4-5") == 1_024
    cache = AnthropicPromptCache(min_tokens=2_048)
    prompt = _segments(1_500, 100, marks=(0,))
    assert cache.serve(prompt, 0) == Served(1_600, 0, 0)
    assert cache.serve(prompt, 1) == Served(1_600, 0, 0)


def test_anthropic_refuses_more_than_four_breakpoints() -> None:
    cache = AnthropicPromptCache()
    cache.serve(_segments(*[300] * 6, marks=(0, 1, 2, 3)), 0)  # four: taken
    with pytest.raises(ValueError, match="5 cache breakpoints; the API takes at most 4"):
        cache.serve(_segments(*[300] * 6, marks=(0, 1, 2, 3, 4)), 1)


def test_anthropic_looks_back_at_most_20_blocks_from_a_breakpoint() -> None:
    cache = AnthropicPromptCache()
    cache.serve(_segments(*[100] * 30, marks=(10,)), 0)  # writes the 1,100 tokens to block 10
    # Block 29 and the 19 before it reach block 10; block 30 and its 19 do not.
    assert cache.serve(_segments(*[100] * 30, marks=(29,)), 1).cached_tokens == 1_100
    far = AnthropicPromptCache()
    far.serve(_segments(*[100] * 30, marks=(10,)), 0)
    assert far.serve(_segments(*[100] * 31, marks=(30,)), 1).cached_tokens == 0


@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 5), st.integers(1, 900), st.booleans()), max_size=12),
        min_size=1,
        max_size=6,
    )
)
def test_anthropic_never_reads_and_writes_more_than_the_prompt(
    prompts: list[list[tuple[int, int, bool]]],
) -> None:
    cache = AnthropicPromptCache()
    for at, prompt in enumerate(prompts):
        marks = [i for i, (_, _, marked) in enumerate(prompt) if marked][:4]
        segments = [
            Segment(bytes([tag]), tokens, i in marks) for i, (tag, tokens, _) in enumerate(prompt)
        ]
        served = cache.serve(segments, at * 60)
        assert served.input_tokens == sum(tokens for _, tokens, _ in prompt)
        assert served.cached_tokens + served.cache_write_tokens <= served.input_tokens
        last = max(marks, default=-1)
        assert served.cached_tokens + served.cache_write_tokens <= sum(
            s.tokens for s in segments[: last + 1]
        )  # nothing after the last breakpoint is cached or written


def test_anthropic_entries_live_five_minutes_after_their_last_read() -> None:
    cache = AnthropicPromptCache()
    prompt = _segments(2_000, marks=(0,))
    cache.serve(prompt, 0)
    assert cache.serve(prompt, 250).cached_tokens == 2_000
    assert cache.serve(prompt, 500).cached_tokens == 2_000  # renewed at 250
    assert cache.serve(prompt, 801) == Served(2_000, 0, 2_000)  # expired: written anew


async def test_anthropic_breakpoints_are_read_from_the_models_own_request() -> None:
    model = AnthropicModel("claude-sonnet-4-5", api_key="unused")
    history = [Message("system", "Be brief.")] + [
        Message("user" if i % 2 == 0 else "assistant", f"message {i} " * 200) for i in range(9)
    ]
    config = ContextConfig(MemoryContextStore(history), PinnedWindow(FitTokens(3_000), 6_000))
    window = await config.prompt_window()
    segments = anthropic_segments(model.request(window, []), context._WireTokens())
    marks = [i for i, segment in enumerate(segments) if segment.breakpoint]
    # The model marks the system prompt and the window's end (and its pinned part's end).
    assert marks[0] == 0
    assert marks[-1] == len(segments) - 1
    unmarked = anthropic_segments(
        AnthropicModel("claude-sonnet-4-5", api_key="unused", cache=False).request(window, []),
        context._WireTokens(),
    )
    assert not any(s.breakpoint for s in unmarked)
    assert [s.key for s in unmarked] == [s.key for s in segments]  # a mark is not content


# -- the simulator against a server, through the official SDK -----------------------------


async def test_the_simulator_agrees_with_the_cached_tokens_the_usage_records_report() -> None:
    """ModelLoop + OpenAIModel (openai SDK) against bench/fake_openai.py, which reports
    `cached_tokens` by OpenAI's rule: the simulator, fed the requests the library builds
    for the windows the loop built, predicts every usage record's `cached_tokens`."""
    server = await FakeOpenAI(clock=lambda: 0.0).start()
    try:

        @tool
        async def lookup(query: str) -> str:
            """Look `query` up."""
            return f"found {len(query)} characters"

        model = OpenAIModel("fake", base_url=server.url, api_key="unused")
        config = ContextConfig(MemoryContextStore(), PinnedWindow(FitTokens(6_000), 9_000))
        agent = Agent("ctx-bench", "Answers", [lookup], context=config)
        loop = ModelLoop(agent, model)
        windows = []
        for n in range(6):
            prompt = f"question {n}: " + "please look this up carefully " * 60  # ~450 tokens
            async for event in loop.stream(prompt):
                if isinstance(event, StepStarted):
                    windows.append(event.window)
        records = await config.store.get_usage()
        simulator = OpenAIPromptCache()
        predicted = [
            simulator.serve(openai_segments(model.request(w, loop.tools), message_tokens), 0.0)
            for w in windows
        ]
        await model.client.close()
    finally:
        await server.close()
    reported = [(r.usage.input_tokens, r.usage.cached_tokens) for r in records]
    assert reported == [(p.input_tokens, p.cached_tokens) for p in predicted]
    assert len(records) == 12
    assert sum(c for _, c in reported) > 0


class _Recording:
    """A model that keeps the windows, tools and settings of each call, then asks `model`."""

    def __init__(self, model: AnthropicModel) -> None:
        self.model = model
        self.calls: list[tuple[PromptWindow, list[Any], ModelSettings | None]] = []

    async def complete(
        self,
        window: PromptWindow,
        tools: Sequence[Any] = (),
        *,
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        self.calls.append((window, list(tools), settings))
        return await self.model.complete(window, tools, settings=settings)

    def stream(
        self,
        window: PromptWindow,
        tools: Sequence[Any] = (),
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        raise AssertionError("this test runs the loop without streaming")


def _json_tokens(part: Any) -> int:
    return len(json.dumps(part)) // 4


async def test_the_simulator_agrees_with_anthropic_usage_through_the_sdk() -> None:
    """AnthropicModel (anthropic SDK) in a ModelLoop, over an HTTP transport that bills each
    request by Anthropic's caching rules at the breakpoints the request carries: the
    simulator, fed the requests the model builds, predicts each usage record's cached and
    written tokens."""
    server_cache = AnthropicPromptCache()
    sent = 0

    def answer(request: httpx2.Request) -> httpx2.Response:
        nonlocal sent
        body = json.loads(request.content)
        served = server_cache.serve(anthropic_segments(body, _json_tokens), 0.0)
        sent += 1
        usage = {
            "input_tokens": served.input_tokens - served.cached_tokens - served.cache_write_tokens,
            "cache_read_input_tokens": served.cached_tokens,
            "cache_creation_input_tokens": served.cache_write_tokens,
            "output_tokens": 5,
        }
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            reply = message(text_block(f"answer {sent}"), usage=usage)
        else:
            reply = message(
                text_block("Looking."),
                tool_use_block(f"c{sent}", "lookup", {"query": "q"}),
                usage=usage,
            )
        return httpx2.Response(200, json=reply)

    @tool
    async def lookup(query: str) -> str:
        """Look `query` up."""
        return "found: " + "a long answer " * 150

    client = anthropic.AsyncAnthropic(
        api_key="unused", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    )
    model = AnthropicModel("claude-sonnet-4-5", client=client)
    recording = _Recording(model)
    config = ContextConfig(MemoryContextStore(), PinnedWindow(FitTokens(6_000), 9_000))
    agent = Agent("ctx-bench-anthropic", "Answers", [lookup], context=config)
    loop = ModelLoop(agent, recording, instructions="Be brief. " * 100)
    for n in range(4):
        await loop.run(f"question {n}: " + "please look this up " * 100)
    await client.close()
    simulator = AnthropicPromptCache()
    predicted = [
        simulator.serve(anthropic_segments(model.request(w, t, settings=s), _json_tokens), 0.0)
        for w, t, s in recording.calls
    ]
    records = await config.store.get_usage()
    reported = [
        (r.usage.input_tokens, r.usage.cached_tokens, r.usage.cache_write_tokens) for r in records
    ]
    assert reported == [(p.input_tokens, p.cached_tokens, p.cache_write_tokens) for p in predicted]
    assert len(records) == 8
    assert sum(r[1] for r in reported) > 0  # the cache was read


# -- prices and cost ----------------------------------------------------------------------


def test_cost_prices_each_kind_of_token() -> None:
    price = prices.Price("m", input=2.0, cached_input=0.5, cache_write=3.0, output=8.0)
    served = Served(10_000, cached_tokens=6_000, cache_write_tokens=1_000)
    # 3,000 fresh x 2 + 6,000 cached x 0.5 + 1,000 written x 3 + 500 out x 8, per million.
    assert prices.conversation_cost(served, 500, price, 1_000_000) == pytest.approx(0.016)


def test_the_shipped_price_table_is_dated_and_complete() -> None:
    date, per, priced = prices.load_prices(PRICES)
    assert date
    assert per == 1_000_000
    assert set(priced) == {"openai", "anthropic"}
    assert (
        priced["anthropic"].cache_write
        > priced["anthropic"].input
        > priced["anthropic"].cached_input
    )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"date": ""}, "`date`"),
        ({"per_tokens": 0}, "`per_tokens`"),
        ({"providers": {}}, "providers.openai"),
    ],
)
def test_a_bad_price_table_names_its_field(tmp_path: Path, change: dict, named: str) -> None:
    table = {**json.loads(PRICES.read_text()), **change}
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        prices.load_prices(path)


def test_a_negative_price_names_its_field(tmp_path: Path) -> None:
    table = json.loads(PRICES.read_text())
    table["providers"]["anthropic"]["cache_write"] = -1
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    with pytest.raises(ValueError, match=r"providers\.anthropic\.cache_write"):
        prices.load_prices(path)


# -- whole runs ---------------------------------------------------------------------------


def _run(tmp_path: Path, *options: str) -> dict:
    out = tmp_path / "out"
    assert (
        context.main(
            ["--steps", "60", "--facts", "6", "--budget", "4000", "--out", str(out), *options]
        )
        == 0
    )
    return json.loads((out / "context.json").read_text())


def _measures(report: dict) -> list[dict]:
    timing = ("build_us_mean", "build_us_p99")
    return [{k: v for k, v in row.items() if k not in timing} for row in report["rows"]]


def test_a_quick_run_measures_every_strategy_and_writes_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _run(tmp_path)
    names = [row["strategy"] for row in report["rows"]]
    assert len(names) == len(context.contenders())
    assert names[0].startswith("default: ")
    for row in report["rows"]:
        assert row["orphans"] == 0, row["strategy"]
        assert 0 <= row["in_window"] <= row["recoverable"] <= row["facts"] == 6
        assert 0 <= row["cached_share"]["openai"] <= 1
        assert row["cost"]["anthropic"] > 0
    fit = next(r for r in report["rows"] if r["strategy"] == "FitTokens(B)")
    assert fit["window_tokens_mean"] <= 4_000  # one round alone may be larger
    markdown = (tmp_path / "out" / "context.md").read_text()
    assert "| FitTokens(B) |" in markdown
    assert "budget B = 4,000 tokens" in markdown
    assert {t["met"] for t in report["targets"]} <= {True, False, None}
    capsys.readouterr()
    assert context.main(["--markdown", "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip() == markdown.strip()  # the saved run, read back


def test_the_same_seed_measures_the_same_and_a_replay_measures_what_was_recorded(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "run.json"
    recorded = _run(tmp_path, "--record", str(fixture), "--only", "FitTokens", "--only", "Pinned")
    again = _run(tmp_path, "--only", "FitTokens", "--only", "Pinned")
    replayed = _run(tmp_path, "--replay", str(fixture), "--only", "FitTokens", "--only", "Pinned")
    assert _measures(recorded) == _measures(again) == _measures(replayed)
    loaded = from_fixture(json.loads(fixture.read_text()))
    assert isinstance(loaded, Conversation)
    assert loaded == generate(39, 60, 6)


class _DropsResults:
    """A broken strategy: it leaves out every tool result, orphaning the calls."""

    async def compact(self, messages: list[Message]) -> list[Message]:
        return [m for m in messages if not m.has_tool_results]


async def test_a_strategy_that_orphans_calls_is_caught_by_the_run() -> None:
    conversation = generate(5, 40, 3)
    broken = context.Contender("drops results", lambda store, _s, _b: (store, _DropsResults()))
    _, per, priced = prices.load_prices(PRICES)
    row = await context.run_one(conversation, broken, MemoryContextStore(), 4_000, priced, per)
    # The window before step k holds every call of the replies before it, and no result.
    calls = [len(step.reply.tool_uses) for step in conversation.steps]
    assert row.orphans == sum(sum(calls[:k]) for k in range(len(calls))) > 0


@dataclass(frozen=True)
class _Hit:
    message: Message


class _SearchingStore(MemoryContextStore):
    """A store whose search returns the messages that name the question's project."""

    async def search(self, query: str, *, limit: int = 5) -> list[_Hit]:
        project = query.split(" the ")[-1].removesuffix(" project?")
        found = [m for m in await self.get_history() if f" {project} " in context._text(m)]
        return [_Hit(m) for m in found[:limit]]


async def test_a_fact_the_archive_search_returns_counts_as_recoverable() -> None:
    conversation = generate(11, 120, 12)
    _, per, priced = prices.load_prices(PRICES)
    fit = next(c for c in context.contenders() if c.name == "FitTokens(B)")
    store = _SearchingStore()
    row = await context.run_one(conversation, fit, store, 2_000, priced, per)
    # What the history holds (a fact in an offloaded result is in its blob instead).
    stored = "\n".join(context._text(m) for m in await store.get_history())
    held = [fact for fact in conversation.facts if fact.sentence in stored]
    assert row.in_window < len(held) == row.search_top5 == row.recoverable


def test_sessions_stored_in_sqlite_and_postgres_measure_as_in_memory(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    chosen = ("--only", "FitTokens", "--only", "AutoCompactStore", "--only", "PinnedWindow(Summ")
    in_memory = _run(tmp_path, *chosen)
    in_sqlite = _run(tmp_path, *chosen, "--store", "sqlite")
    in_postgres = _run(tmp_path, *chosen, "--store", "postgres", "--dsn", postgres.dsn)
    assert (in_sqlite["store"], in_postgres["store"]) == ("sqlite", "postgres")
    assert _measures(in_sqlite) == _measures(in_memory) == _measures(in_postgres)


def test_a_file_that_is_not_a_fixture_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(SystemExit, match="not a context benchmark fixture"):
        context.main(["--replay", str(path)])
