"""Every code example of seed 000 (messages, context stores, compaction), with our names.

The seed imports from `axio`; here it is `pygents_ctx`. Where the seed passes
a model transport to compaction, a `ScriptedSummarizer` takes its place (our
compaction takes a `Summarizer`), and where it reads the context window from
`transport.model.context_window`, we pass `context_window=`. The seed's
`agent.run(..., store)` is replaced by the loop an agent runs: append the
turn's messages, then report the model call's usage with `add_context_tokens`.
Where the seed's code calls `asyncio.run(main())`, the test awaits `main()`.
Each test asserts what the seed says happens.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import tempfile

import pytest

from pygents_ctx import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    from_dict,
    to_dict,
)
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SessionInfo,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores.compaction import AutoCompactStore, compact_context
from pygents_ctx.context.strategies.summarize import is_bridge, is_summary, summary_text
from pygents_ctx.testing import ScriptedSummarizer

PNG = b"\x89PNG\r\n\x1a\n" + bytes(16)
BLOCKS = [
    TextBlock(text="hello"),
    ImageBlock(media_type="image/png", data=PNG),
    ToolUseBlock(id="call-1", name="search", input={"q": "tides"}),
    ToolResultBlock(tool_use_id="call-1", content="2 results", is_error=False),
    ToolResultBlock(
        tool_use_id="call-1", content=[TextBlock("chart:"), ImageBlock("image/png", PNG)]
    ),
]


# -- content blocks and messages -----------------------------------------------------


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b.type}")
def test_content_blocks_are_frozen_dataclasses_that_round_trip_through_dicts(
    block: object,
) -> None:
    assert dataclasses.is_dataclass(block)
    field = dataclasses.fields(block)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(block, field, "changed")
    assert from_dict(to_dict(block)) == block  # type: ignore[arg-type]


def test_block_serialization_example() -> None:
    d = to_dict(TextBlock(text="hello"))
    assert d == {"type": "text", "text": "hello"}
    block = from_dict(d)
    assert block == TextBlock(text="hello")


def test_message_pairs_a_role_with_content_blocks() -> None:
    question = Message(role="user", content=[TextBlock(text="Search the tides")])
    call = Message(
        role="assistant",
        content=[TextBlock(text="Searching."), ToolUseBlock("c1", "search", {"q": "tides"})],
    )
    results = Message(role="user", content=[ToolResultBlock("c1", "high tide at 6")])
    system = Message(role="system", content=[TextBlock(text="Be brief.")])

    assert Message(role="assistant").content == ()  # content defaults to empty
    assert [m.role for m in (question, call, results, system)] == [
        "user", "assistant", "user", "system",
    ]  # fmt: skip
    assert [use.name for use in call.tool_uses] == ["search"]
    assert [r.tool_use_id for r in results.tool_results] == ["c1"]
    with pytest.raises(ValueError, match="role"):
        Message(role="tool", content=[])  # type: ignore[arg-type]


# -- ContextStore ---------------------------------------------------------------------


class MyContextStore(ContextStore):
    """The seed's custom store, as written: only the two abstract methods."""

    def __init__(self) -> None:
        self._messages: list[Message] = []

    async def append(self, message: Message) -> None:  # type: ignore[override]
        self._messages.append(message)

    async def get_history(self) -> list[Message]:  # type: ignore[override]
        return list(self._messages)


async def test_custom_store_example_gets_every_other_method_from_the_base() -> None:
    store = MyContextStore()
    assert re.fullmatch(r"[0-9a-f]{32}", store.session_id)  # auto-generated UUID hex
    assert store.session_id == store.session_id  # made once, then kept
    await store.append(Message(role="user", content=[TextBlock(text="Hello")]))

    fork = await store.fork()  # a copy in a MemoryContextStore
    await fork.append(Message("assistant", "Hi!"))
    assert isinstance(fork, MemoryContextStore)
    assert (await store.count(), await fork.count()) == (1, 2)

    with pytest.raises(NotImplementedError, match="clear"):
        await store.clear()
    await store.close()  # a no-op

    # The seed's base class drops token usage; ours keeps it on the instance.
    await store.add_context_tokens(100, 50)
    await store.add_context_tokens(20, 5)
    assert await store.get_context_tokens() == (120, 55)
    assert await store.list_sessions() == [SessionInfo(store.session_id, 1, "Hello", "", 120, 55)]


async def test_memory_context_store_example() -> None:
    async def main() -> None:
        # empty store, or pre-populate with existing messages:
        # ctx = MemoryContextStore([existing_message, ...])
        ctx = MemoryContextStore()
        await ctx.append(Message(role="user", content=[TextBlock(text="Hello")]))
        await ctx.append(Message(role="assistant", content=[TextBlock(text="Hi!")]))
        history = await ctx.get_history()
        assert len(history) == 2
        assert history[0].role == "user"
        # fork() creates an independent deep copy - useful for branching
        fork = await ctx.fork()
        await fork.append(Message(role="user", content=[TextBlock(text="(branch)")]))
        assert len(await ctx.get_history()) == 2  # original unchanged
        assert len(await fork.get_history()) == 3
        await ctx.close()

    await main()


async def test_memory_context_store_can_be_pre_populated() -> None:
    existing = [Message("user", "Hello"), Message("assistant", "Hi!")]

    ctx = MemoryContextStore(existing)

    assert await ctx.get_history() == existing


async def test_sqlite_context_store_example() -> None:
    async def main() -> None:
        with tempfile.TemporaryDirectory() as directory:
            tmp = pathlib.Path(directory) / "ctx.db"
            conn = await connect(tmp)
            try:
                store = SQLiteContextStore(conn, session_id="my-session")
                await store.append(Message(role="user", content=[TextBlock(text="Hello")]))
                history = await store.get_history()
                assert len(history) == 1
                # fork() copies messages into a new session
                forked = await store.fork()
                assert len(await forked.get_history()) == 1
                assert forked.session_id != store.session_id
            finally:
                await conn.close()

    await main()


async def test_sqlite_sessions_survive_a_restart_and_are_listed_newest_first(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "ctx.db"
    async with connect(path) as conn:
        await SQLiteContextStore(conn, session_id="first").append(Message("user", "Hello"))
        await SQLiteContextStore(conn, session_id="second").append(
            Message("user", "What is the capital of France? " * 5)
        )

    async with connect(path) as conn:  # "survives process restarts"
        sessions = await SQLiteContextStore(conn).list_sessions()

    assert [s.session_id for s in sessions] == ["second", "first"]
    assert sessions[0].preview == ("What is the capital of France? " * 5)[:80]  # up to 80
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}", s.created_at) for s in sessions)


async def test_factory_methods_example() -> None:
    async def main() -> None:
        messages = [Message(role="user", content=[TextBlock(text="hello")])]
        # Create from existing messages
        ctx = await MemoryContextStore.from_history(messages)
        # Clone another context store
        ctx2 = await MemoryContextStore.from_context(ctx)
        assert await ctx2.get_history() == messages
        assert ctx2.session_id != ctx.session_id

    await main()


async def test_token_tracking_example() -> None:
    async def main() -> None:
        ctx = MemoryContextStore()
        await ctx.add_context_tokens(100, 50)
        await ctx.add_context_tokens(200, 80)
        in_tok, out_tok = await ctx.get_context_tokens()
        assert in_tok == 300
        assert out_tok == 130

    await main()


async def test_set_context_tokens_overwrites() -> None:
    ctx = MemoryContextStore()
    await ctx.add_context_tokens(100, 50)

    await ctx.set_context_tokens(7, 3)

    assert await ctx.get_context_tokens() == (7, 3)


def test_session_info_example() -> None:
    info = SessionInfo(
        session_id="abc123",
        message_count=10,
        preview="What is the capital of France?",
        created_at="2024-01-15 10:30:00",
        input_tokens=1500,
        output_tokens=300,
    )
    assert info.session_id == "abc123"
    assert info.message_count == 10
    assert SessionInfo("abc123", 10, "", "").input_tokens == 0  # defaults to 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.message_count = 11  # type: ignore[misc]


# -- compaction -----------------------------------------------------------------------


def turn(number: int) -> list[Message]:
    """One exchange of a long conversation."""
    return [
        Message("user", f"Question {number}: " + "how does the rate limiter behave? " * 3),
        Message("assistant", f"Answer {number}: " + "it refills tokens at a fixed rate. " * 3),
    ]


async def test_auto_compact_store_example_keeps_a_long_conversation_under_the_window() -> None:
    summarizer = ScriptedSummarizer(lambda messages, previous: f"{len(messages)} messages so far")
    store = AutoCompactStore(
        MemoryContextStore(),
        summarizer,  # the seed passes the agent's transport
        keep_recent=6,  # keep this many messages verbatim
        threshold=0.75,  # compact at 75 % of context_window (default)
        context_window=2_000,  # the seed reads transport.model.context_window
    )
    written: list[Message] = []
    reported = 0
    for number in range(40):  # what `agent.run("Build a rate limiter", store)` does
        await store.append_many(turn(number))
        written += turn(number)
        input_tokens = await store.token_count()  # the context size sent to the model
        reported += input_tokens
        await store.add_context_tokens(input_tokens, 40)

    live = await store.get_history()
    assert store.limit == 1_500
    assert summarizer.calls  # it compacted ...
    assert await store.token_count() <= 1_500 + 2 * 60  # ... and stays near the threshold
    assert [is_summary(m) for m in live].count(True) == 1
    assert live[-6:] == written[-6:]  # the recent messages, verbatim
    archive = await store.get_history(include_archived=True)
    assert [m for m in archive if not is_summary(m) and not is_bridge(m)] == written
    assert await store.get_context_tokens() == (reported, 40 * 40)  # cumulative counts kept


async def test_without_a_window_the_threshold_applies_to_128_000_tokens() -> None:
    store = AutoCompactStore(MemoryContextStore(), ScriptedSummarizer())

    assert store.limit == int(0.75 * 128_000)


async def test_max_tokens_example_overrides_the_threshold() -> None:
    inner_store = MemoryContextStore()
    summarizer = ScriptedSummarizer(["The user is building a rate limiter."])
    store = AutoCompactStore(inner_store, summarizer, max_tokens=60_000)
    for number in range(10):
        await store.append_many(turn(number))

    await store.add_context_tokens(60_000, 100)  # not over max_tokens
    assert summarizer.calls == []
    await store.add_context_tokens(60_001, 100)  # over it: compacts

    assert summary_text((await inner_store.get_history())[0]) == (
        "The user is building a rate limiter."
    )
    assert await store.get_context_tokens() == (120_001, 200)  # cumulative counts kept


async def test_auto_compact_store_works_with_every_store_and_forks_keep_the_settings(
    tmp_path: pathlib.Path,
) -> None:
    class ListStore(MyContextStore):
        async def clear(self) -> None:
            self._messages.clear()

    async with connect(tmp_path / "ctx.db") as conn:
        for inner in (MemoryContextStore(), SQLiteContextStore(conn), ListStore()):
            store = AutoCompactStore(inner, ScriptedSummarizer(), keep_recent=4, threshold=0.5)
            for number in range(5):
                await store.append_many(turn(number))

            fork = await store.fork()
            await fork.add_context_tokens(64_000, 0)  # 0.5 * 128,000: not over it
            assert await fork.count() == 10
            await fork.add_context_tokens(64_001, 0)  # over it

            assert isinstance(fork, AutoCompactStore)
            assert (fork.keep_recent, fork.threshold) == (4, 0.5)
            assert is_summary((await fork.get_history())[0])
            assert await store.count() == 10  # the original is not compacted


async def test_the_live_store_stays_writable_while_the_summarizer_runs() -> None:
    # The seed forks, summarizes the fork, then clears and refills the live store,
    # losing what was appended meanwhile. Here those messages are kept, after.
    late = Message("user", "A message written while the summary was being made.")
    store: AutoCompactStore

    async def summarize(messages: list[Message], previous: str | None) -> str:
        await store.append(late)
        return "Earlier turns, summarized."

    store = AutoCompactStore(MemoryContextStore(), ScriptedSummarizer(summarize), max_tokens=100)
    for number in range(5):
        await store.append_many(turn(number))
    await store.add_context_tokens(1_000, 10)

    live = await store.get_history()
    assert summary_text(live[0]) == "Earlier turns, summarized."
    assert live[-1] == late


async def test_compact_context_example() -> None:
    summarizer = ScriptedSummarizer()  # the seed passes a transport

    async def main() -> None:
        ctx = MemoryContextStore()
        for i in range(22):
            role = "user" if i % 2 == 0 else "assistant"
            await ctx.append(Message(role=role, content=[TextBlock(text=f"Message {i}")]))
        # compact: keep 4 recent messages verbatim, summarize the rest
        compacted = await compact_context(ctx, summarizer, keep_recent=4)
        assert compacted is not None
        # [summary_user, "Understood" assistant] + 4 recent messages
        assert len(compacted) == 6
        new_ctx = await MemoryContextStore.from_history(compacted)
        assert len(await new_ctx.get_history()) == 6

        assert (compacted[0].role, compacted[1].role) == ("user", "assistant")
        assert compacted[1].text.startswith("Understood")
        assert await ctx.count() == 22  # does not modify the store

    await main()
    assert [len(call.messages) for call in summarizer.calls] == [18]


@pytest.mark.parametrize("length", [0, 3, 4])
async def test_compact_context_returns_none_when_the_history_is_too_short(length: int) -> None:
    ctx = MemoryContextStore([Message("user", f"Message {i}") for i in range(length)])

    assert await compact_context(ctx, ScriptedSummarizer(), keep_recent=4) is None
