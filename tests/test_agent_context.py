"""An agent's conversation store: `Agent(context=ContextConfig(...))`.

Messages its tools produce go to the queue and the store, `prompt_window()`
builds the model's view of the stored history, the retention decides what
outlives a run, and a saved agent continues with its store after a restart.
Every store test runs on `MemoryContextStore` and on `SQLiteContextStore`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    ContextItem,
    ContextQueue,
    ContextStore,
    HistoryRetention,
    MemoryContextStore,
    Message,
    PinnedWindow,
    PromptWindow,
    SlidingWindow,
    SQLiteContextStore,
    StableWindow,
    Summarize,
    Tool,
    Turn,
    UnregisteredAgentError,
    connect,
    count_tokens,
    is_summary,
    summary_text,
    tool,
)
from pygents_ctx.context.messages import Role
from pygents_ctx.testing import FixedTokenCounter, ScriptedModel, ScriptedSummarizer
from tests.context.stores.helpers import ListStore

NAME = "scribe"
SESSION = "chat"

# -- helpers ---------------------------------------------------------------------


def msg(role: Role, text: str) -> ContextItem[Message]:
    """A message for the conversation, as a tool hands it to the agent."""
    return ContextItem(content=Message(role, text))


def talk(count: int, prefix: str = "turn") -> list[ContextItem[Message]]:
    """`count` messages, user and assistant in turn, starting with the user."""
    return [msg("user" if i % 2 == 0 else "assistant", f"{prefix} {i}") for i in range(count)]


def long_talk(count: int, prefix: str) -> list[ContextItem[Message]]:
    """`talk` with about 15 tokens per message."""
    return [msg(m.content.role, f"{m.content.text} {'x' * 40}") for m in talk(count, prefix)]


def texts(messages: list[Message] | tuple[Message, ...]) -> list[str]:
    return [message.text for message in messages]


async def stored(store: ContextStore) -> list[str]:
    return texts(await store.get_history())


def queued(agent: Agent) -> list[Any]:
    """The queue's contents: message texts, other contents as they are."""
    return [
        item.content.text if isinstance(item.content, Message) else item.content
        for item in agent.context_queue
    ]


async def drain(agent: Agent) -> list[Any]:
    """Run `agent` to its end; the values it yields."""
    return [value async for _, value in agent.run()]


def scribe(tools: list[Tool[..., Any]], context: ContextConfig | None) -> Agent:
    """The agent under test, with a queue large enough to hold every message."""
    return Agent(
        NAME, "keeps a conversation", tools, context_queue=ContextQueue(limit=100), context=context
    )


class Stores:
    """Stores of one backend. `open(session)` gives a new store object for the session.

    For SQLite each `open` uses a new connection to the same file, as a restarted
    process would; a memory store *is* its session, so `open` returns it again.
    """

    def __init__(self, backend: str, path: Path, exits: AsyncExitStack) -> None:
        self.backend = backend
        self.path = path
        self._exits = exits
        self._memory: dict[str, MemoryContextStore] = {}

    async def open(self, session_id: str = SESSION) -> ContextStore:
        if self.backend == "memory":
            return self._memory.setdefault(session_id, MemoryContextStore(session_id=session_id))
        conn = await self._exits.enter_async_context(connect(self.path))
        return SQLiteContextStore(conn, session_id=session_id)


@pytest.fixture(params=["memory", "sqlite"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    async with AsyncExitStack() as exits:
        yield Stores(str(request.param), tmp_path / "ctx.db", exits)


@pytest.fixture
def emit() -> Tool[..., Any]:
    """A generator tool yielding `values` in order.

    An exception in `values` is raised. An `asyncio.Event` not yet set is set,
    then the tool waits forever (until cancelled); one already set is skipped,
    so a cancelled turn that runs again goes on.
    """

    @tool
    async def emit(values: list[Any]) -> AsyncIterator[Any]:
        for value in values:
            if isinstance(value, BaseException):
                raise value
            if isinstance(value, asyncio.Event):
                if not value.is_set():
                    value.set()
                    await asyncio.Event().wait()
                continue
            yield value

    return emit


@pytest.fixture
def say() -> Tool[..., Any]:
    """A tool returning one message."""

    @tool
    async def say(role: Role, text: str) -> ContextItem[Message]:
        return msg(role, text)

    return say


async def run_emitting(agent: Agent, emit: Tool[..., Any], *values: Any) -> list[Any]:
    await agent.put(Turn(emit, kwargs={"values": list(values)}))
    return await drain(agent)


# -- messages go to the queue and the store ------------------------------------------


async def test_a_returned_message_goes_to_the_queue_and_the_store_tagged_with_the_run(
    stores: Stores, say: Tool[..., Any]
) -> None:
    store = await stores.open()
    runs: list[str | None] = []

    @tool
    async def say_and_note_run(text: str) -> ContextItem[Message]:
        runs.append(AgentRegistry.get(NAME).run_id)
        return msg("user", text)

    agent = scribe([say, say_and_note_run], ContextConfig(store))
    await agent.put(Turn(say_and_note_run, kwargs={"text": "hello"}))
    assert await drain(agent) == []

    assert queued(agent) == ["hello"]
    assert await stored(store) == ["hello"]
    # Tagged with the run's id: clearing another run keeps it, clearing that run removes it.
    [run_id] = runs
    assert run_id is not None
    await store.clear_run("some other run")
    assert await stored(store) == ["hello"]
    await store.clear_run(run_id)
    assert await stored(store) == []
    assert queued(agent) == ["hello"]  # the store is a copy: the queue keeps its item


async def test_only_messages_without_an_id_are_written_to_the_store(
    stores: Stores, emit: Tool[..., Any]
) -> None:
    store = await stores.open()
    agent = scribe([emit], ContextConfig(store))
    document = Message("user", "a fetched document")

    yielded = await run_emitting(
        agent,
        emit,
        msg("user", "question"),
        ContextItem(content="a note"),
        ContextItem(content=document, id="doc-1", description="a document"),
        ContextItem(content={"key": "value"}),
        msg("assistant", "answer"),
        "shown to the caller",
    )

    assert await stored(store) == ["question", "answer"]
    assert queued(agent) == ["question", "a note", {"key": "value"}, "answer"]
    assert agent.context_pool.get("doc-1").content == document
    assert yielded == ["shown to the caller"]


async def test_messages_are_stored_in_the_order_they_are_produced(
    stores: Stores, say: Tool[..., Any], emit: Tool[..., Any]
) -> None:
    store = await stores.open()
    # A small queue: it forgets the oldest, the store keeps everything.
    agent = Agent(
        NAME,
        "keeps a conversation",
        [say, emit],
        context_queue=ContextQueue(limit=2),
        context=ContextConfig(store),
    )
    await agent.put(Turn(say, kwargs={"role": "user", "text": "m0"}))
    await agent.put(Turn(emit, kwargs={"values": [msg("assistant", "m1"), msg("user", "m2"), "x"]}))
    await agent.put(Turn(say, kwargs={"role": "assistant", "text": "m3"}))
    # A turn produced by a turn runs in the same run, after the ones queued.
    later = Turn(say, kwargs={"role": "user", "text": "m5"})
    await agent.put(Turn(emit, kwargs={"values": [later, msg("user", "m4")]}))

    assert await drain(agent) == ["x"]

    assert await stored(store) == ["m0", "m1", "m2", "m3", "m4", "m5"]
    assert queued(agent) == ["m4", "m5"]


async def test_an_agent_without_context_keeps_no_conversation(
    say: Tool[..., Any],
) -> None:
    agent = scribe([say], None)
    await agent.put(Turn(say, kwargs={"role": "user", "text": "hello"}))
    await drain(agent)

    assert queued(agent) == ["hello"]
    assert agent.context is None
    assert "context" not in agent.to_dict()
    with pytest.raises(ValueError, match=rf"{NAME!r} has no context store.*context=ContextConfig"):
        await agent.prompt_window()


def test_an_agent_context_must_be_a_context_config(say: Tool[..., Any]) -> None:
    with pytest.raises(TypeError, match="context must be a ContextConfig"):
        scribe([say], MemoryContextStore())  # type: ignore[arg-type]
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get(NAME)


async def test_each_run_has_a_fresh_id_and_none_when_idle(emit: Tool[..., Any]) -> None:
    seen: list[str | None] = []

    @tool
    async def note_run() -> None:
        seen.append(AgentRegistry.get(NAME).run_id)

    agent = scribe([note_run, emit], ContextConfig.default())
    assert agent.run_id is None

    for _ in range(2):
        await agent.put(Turn(note_run))
        await agent.put(Turn(note_run))
        await drain(agent)
        assert agent.run_id is None
    with pytest.raises(RuntimeError):
        await run_emitting(agent, emit, RuntimeError("failed"))
    assert agent.run_id is None

    first, same_run, second, _ = seen
    assert isinstance(first, str)
    assert first
    assert same_run == first  # one id for the whole run
    assert second != first


# Anything a tool can produce: messages for the conversation, other queue items,
# pool items (also holding messages), and values for the caller.
produced = st.one_of(
    st.builds(msg, st.sampled_from(["user", "assistant"]), st.text(max_size=20)),
    st.builds(lambda note: ContextItem(content=note), st.text(max_size=5)),
    st.builds(
        lambda key, text: ContextItem(content=Message("user", text), id=key, description="doc"),
        st.sampled_from(["a", "b"]),
        st.text(max_size=5),
    ),
    st.integers(),
)


def test_the_store_and_window_hold_exactly_the_messages_without_an_id_in_order() -> None:
    @tool
    async def emit(values: list[Any]) -> AsyncIterator[Any]:
        for value in values:
            yield value

    @settings(max_examples=60, deadline=None)
    @given(
        turns=st.lists(st.lists(produced, max_size=6), max_size=4),
        retention=st.sampled_from(list(HistoryRetention)),
    )
    def check(turns: list[list[Any]], retention: HistoryRetention) -> None:
        AgentRegistry.clear()
        store = MemoryContextStore()
        agent = scribe([emit], ContextConfig(store, SlidingWindow(1000), retention=retention))

        async def run() -> tuple[list[Any], PromptWindow]:
            for values in turns:
                await agent.put(Turn(emit, kwargs={"values": values}))
            return await drain(agent), await agent.prompt_window()

        yielded, window = asyncio.run(run())

        flat = [value for values in turns for value in values]
        messages = [
            value.content
            for value in flat
            if isinstance(value, ContextItem)
            and value.id is None
            and isinstance(value.content, Message)
        ]
        kept = {
            HistoryRetention.PERMANENT: messages,
            HistoryRetention.RUN: [],
            HistoryRetention.NONE: [],
        }[retention]
        assert asyncio.run(store.get_history()) == kept
        assert window.messages == (kept if retention is HistoryRetention.RUN else messages)
        assert window.tokens == count_tokens(window.messages)
        assert yielded == [value for value in flat if isinstance(value, int)]

    check()


# -- the prompt window -------------------------------------------------------------------


async def test_the_window_is_the_strategy_view_of_the_stored_history(
    stores: Stores, emit: Tool[..., Any]
) -> None:
    store = await stores.open()
    earlier = [m.content for m in talk(6, "earlier")]
    await store.append_many(earlier)
    strategy = SlidingWindow(max_messages=4)
    agent = scribe([emit], ContextConfig(store, strategy))

    await run_emitting(agent, emit, *talk(4))

    history = await store.get_history()
    window = await agent.prompt_window()
    assert isinstance(window, PromptWindow)
    assert window.messages == await SlidingWindow(max_messages=4).compact(history)
    assert texts(window.messages) == ["earlier 0", "turn 2", "turn 3"]  # the task, a round
    assert window.tokens == count_tokens(window.messages)
    assert len(history) == 10  # the store keeps what the window leaves out


async def test_the_default_strategy_is_a_stable_window_of_64k_tokens(
    stores: Stores, emit: Tool[..., Any]
) -> None:
    store = await stores.open()
    context = ContextConfig(store)
    agent = scribe([emit], context)

    await run_emitting(agent, emit, *talk(130))

    window = await agent.prompt_window()
    assert isinstance(context.strategy, StableWindow)
    assert (context.strategy.max_tokens, context.strategy.low_water) == (24_000, 0.5)
    # 130 short messages fit 64k tokens: all of them are shown (a window of 100 messages
    # would have dropped the oldest), and all of this window opens the next one.
    assert texts(window.messages) == [f"turn {i}" for i in range(130)]
    assert window.tokens == count_tokens(window.messages)
    await run_emitting(agent, emit, *talk(2, "more"))
    later = await agent.prompt_window()
    assert later.stable_prefix == 130
    assert later.messages[:130] == window.messages


async def test_an_empty_history_gives_an_empty_window(stores: Stores) -> None:
    agent = scribe([], ContextConfig(await stores.open()))

    assert await agent.prompt_window() == PromptWindow([], 0, 0)


async def test_a_pinned_window_reports_its_own_token_count(
    stores: Stores, emit: Tool[..., Any]
) -> None:
    def pinned() -> PinnedWindow:
        return PinnedWindow(SlidingWindow(), max_tokens=10_000, counter=FixedTokenCounter(1))

    store = await stores.open()
    agent = scribe([emit], ContextConfig(store, pinned()))
    await run_emitting(agent, emit, *talk(3))

    window = await agent.prompt_window()

    expected = await pinned().build(await store.get_history())
    assert window == PromptWindow(expected.messages, expected.tokens, expected.stable_prefix)
    assert window.stable_prefix == 3  # the whole pinned window stays the prefix of the next
    assert window.tokens == 3 * (1 + 4)  # one token of text and 4 of overhead per message
    assert window.tokens != count_tokens(window.messages)

    # The builder is kept between calls: the next window starts with this one.
    await run_emitting(agent, emit, msg("user", "more"))
    later = await agent.prompt_window()
    assert later.messages[:3] == window.messages
    assert later.tokens == window.tokens + 5


async def test_the_window_is_what_a_model_is_shown(stores: Stores) -> None:
    model = ScriptedModel(["Hi! How can I help?"])
    windows: list[PromptWindow] = []

    @tool
    async def think() -> ContextItem[Message]:
        windows.append(await AgentRegistry.get(NAME).prompt_window())
        return ContextItem(content=await model(windows[-1].messages))

    store = await stores.open()
    await store.append(Message("user", "Hello"))
    agent = scribe([think], ContextConfig(store))
    await agent.put(Turn(think))
    await drain(agent)

    [call] = model.calls
    assert texts(call.messages) == ["Hello"]
    assert call.input_tokens == windows[0].tokens
    assert await stored(store) == ["Hello", "Hi! How can I help?"]
    assert texts((await agent.prompt_window()).messages) == ["Hello", "Hi! How can I help?"]


async def test_a_summarizing_strategy_shows_one_summary_while_the_store_keeps_everything(
    stores: Stores, emit: Tool[..., Any]
) -> None:
    summarizer = ScriptedSummarizer()
    strategy = Summarize(summarizer, keep_recent_tokens=40, min_old_tokens=0)
    store = await stores.open()
    agent = scribe([emit], ContextConfig(store, strategy))
    first = long_talk(10, "first")

    await run_emitting(agent, emit, *first)
    window = await agent.prompt_window()

    assert [summary_text(m) for m in window.messages if is_summary(m)] == ["summary 1"]
    assert window.messages[0] == first[0].content  # the task stays first
    assert window.messages[-1] == first[-1].content  # the newest stay verbatim
    assert window.tokens == count_tokens(window.messages) < await store.token_count()
    assert await store.get_history() == [item.content for item in first]

    # More conversation updates the one summary instead of adding another.
    later = long_talk(10, "later")
    await run_emitting(agent, emit, *later)
    window = await agent.prompt_window()
    assert [summary_text(m) for m in window.messages if is_summary(m)] == ["summary 2"]
    assert summarizer.calls[1].previous_summary == "summary 1"
    assert await store.get_history() == [item.content for item in first + later]


# -- retention ----------------------------------------------------------------------------


async def test_permanent_retention_keeps_every_run(stores: Stores, emit: Tool[..., Any]) -> None:
    store = await stores.open()
    agent = scribe([emit], ContextConfig(store, retention=HistoryRetention.PERMANENT))

    await run_emitting(agent, emit, msg("user", "first run"))
    await run_emitting(agent, emit, msg("user", "second run"))

    assert await stored(store) == ["first run", "second run"]
    assert texts((await agent.prompt_window()).messages) == ["first run", "second run"]


async def test_run_retention_removes_the_run_at_its_end_and_keeps_earlier_runs(
    stores: Stores,
) -> None:
    store = await stores.open()
    await store.append(Message("user", "untagged"))
    await store.append(Message("assistant", "earlier run"), run_id="earlier")
    seen_in_run: list[list[str]] = []

    @tool
    async def ask(text: str) -> AsyncIterator[Any]:
        yield msg("user", text)
        seen_in_run.append(texts((await AgentRegistry.get(NAME).prompt_window()).messages))

    agent = scribe([ask], ContextConfig(store, retention=HistoryRetention.RUN))
    await agent.put(Turn(ask, kwargs={"text": "this run"}))
    await drain(agent)

    assert seen_in_run == [["untagged", "earlier run", "this run"]]
    assert await stored(store) == ["untagged", "earlier run"]
    assert texts((await agent.prompt_window()).messages) == ["untagged", "earlier run"]
    assert queued(agent) == ["this run"]  # the retention is about the store only


async def _end_by_raising(agent: Agent, emit: Tool[..., Any]) -> None:
    with pytest.raises(RuntimeError, match="tool failed"):
        await run_emitting(agent, emit, msg("user", "kept"), RuntimeError("tool failed"))


async def _end_by_breaking_out(agent: Agent, emit: Tool[..., Any]) -> None:
    await agent.put(Turn(emit, kwargs={"values": [msg("user", "kept"), "value", "more"]}))
    async for _ in agent.run():
        break
    # The abandoned run is closed by the event loop's async generator finalizer.
    for _ in range(100):
        if not agent.is_running:
            break
        await asyncio.sleep(0)


async def _end_by_closing(agent: Agent, emit: Tool[..., Any]) -> None:
    await agent.put(Turn(emit, kwargs={"values": [msg("user", "kept"), "value", "more"]}))
    run: Any = agent.run()  # an async generator: it has aclose()
    async for _ in run:
        break
    await run.aclose()


async def _end_by_cancelling(agent: Agent, emit: Tool[..., Any]) -> None:
    reached = asyncio.Event()
    await agent.put(Turn(emit, kwargs={"values": [msg("user", "kept"), reached]}))
    task = asyncio.create_task(drain(agent))
    await reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize(
    "end_run",
    [_end_by_raising, _end_by_breaking_out, _end_by_closing, _end_by_cancelling],
    ids=["raises", "consumer-breaks-out", "closed-early", "task-cancelled"],
)
async def test_run_retention_keeps_the_messages_of_a_run_that_did_not_end_normally(
    stores: Stores,
    emit: Tool[..., Any],
    end_run: Callable[[Agent, Tool[..., Any]], Awaitable[None]],
) -> None:
    store = await stores.open()
    agent = scribe([emit], ContextConfig(store, retention=HistoryRetention.RUN))

    await end_run(agent, emit)

    assert not agent.is_running
    assert agent.run_id is None
    assert await stored(store) == ["kept"]  # nothing lost on a crash
    # The next run that ends normally removes its own messages only.
    await agent.put(Turn(emit, kwargs={"values": [msg("assistant", "this run")]}))
    await drain(agent)
    assert await stored(store) == ["kept"]


async def test_none_retention_never_writes_and_the_window_still_sees_the_messages(
    stores: Stores, emit: Tool[..., Any]
) -> None:
    store = await stores.open()
    agent = scribe([emit], ContextConfig(store, retention=HistoryRetention.NONE))

    await run_emitting(agent, emit, msg("user", "hello"), msg("assistant", "hi"))
    await run_emitting(agent, emit, msg("user", "again"))

    assert await store.count() == 0
    assert await (await stores.open()).count() == 0  # also as another connection sees it
    window = await agent.prompt_window()
    assert texts(window.messages) == ["hello", "hi", "again"]
    assert window.tokens == count_tokens(window.messages)


# -- ContextConfig ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ({"store": [Message("user", "hi")]}, "ContextConfig store must be a ContextStore"),
        ({"store": MemoryContextStore}, "ContextConfig store must be a ContextStore"),
        ({"strategy": object()}, r"ContextConfig strategy must have an async compact\(messages\)"),
        ({"strategy": SimpleNamespace(compact=3)}, "ContextConfig strategy must have"),
        ({"strategy": SlidingWindow}, r"not the class SlidingWindow; write SlidingWindow\(...\)"),
        ({"retention": "run"}, r"retention must be a HistoryRetention.*HistoryRetention\.RUN"),
        ({"retention": None}, "ContextConfig retention must be a HistoryRetention"),
    ],
    ids=[
        "store-list",
        "store-class",
        "strategy-object",
        "compact-not-callable",
        "strategy-class",
        "retention-str",
        "retention-none",
    ],
)
def test_context_config_rejects_bad_arguments(arguments: dict[str, Any], match: str) -> None:
    store = arguments.pop("store", MemoryContextStore())
    with pytest.raises(TypeError, match=match):
        ContextConfig(store, **arguments)


def test_run_retention_needs_a_store_that_can_clear_a_run() -> None:
    # Refused up front, not at the end of the first run after its messages were stored.
    with pytest.raises(ValueError, match=r"retention RUN needs a store with clear_run\(\)"):
        ContextConfig(ListStore(), retention=HistoryRetention.RUN)


@pytest.mark.parametrize("retention", [HistoryRetention.PERMANENT, HistoryRetention.NONE])
async def test_other_retentions_work_with_an_append_only_store(
    say: Tool[..., Any], retention: HistoryRetention
) -> None:
    agent = scribe([say], ContextConfig(ListStore(), retention=retention))
    await agent.put(Turn(say, kwargs={"role": "user", "text": "hello"}))
    await drain(agent)

    assert texts((await agent.prompt_window()).messages) == ["hello"]


def test_context_config_defaults() -> None:
    store = MemoryContextStore()
    config = ContextConfig(store)

    assert config.store is store
    assert isinstance(config.strategy, StableWindow)
    assert config.strategy.max_tokens == 24_000
    assert config.retention is HistoryRetention.PERMANENT


def test_context_config_default_is_a_fresh_memory_store_with_a_stable_window() -> None:
    first, second = ContextConfig.default(), ContextConfig.default()

    assert isinstance(first.store, MemoryContextStore)
    assert isinstance(first.strategy, StableWindow)
    assert first.strategy is not second.strategy  # each builder follows one conversation
    assert first.retention is HistoryRetention.PERMANENT
    assert first.store is not second.store
    assert first.store.session_id != second.store.session_id


def test_context_config_repr_names_store_session_strategy_and_retention() -> None:
    config = ContextConfig(
        MemoryContextStore(session_id="s1"), SlidingWindow(8), retention=HistoryRetention.RUN
    )

    assert repr(config) == (
        "ContextConfig(MemoryContextStore(session_id='s1'), "
        "SlidingWindow(max_messages=8), retention=RUN)"
    )


# -- saving and restoring ----------------------------------------------------------------------


@pytest.mark.parametrize("retention", list(HistoryRetention))
def test_to_dict_saves_the_session_and_retention(
    say: Tool[..., Any], retention: HistoryRetention
) -> None:
    store = MemoryContextStore(session_id=SESSION)
    agent = scribe([say], ContextConfig(store, retention=retention))

    assert agent.to_dict()["context"] == {"session_id": SESSION, "retention": retention.value}
    assert json.loads(agent.to_json())["context"] == {
        "session_id": SESSION,
        "retention": retention.value,
    }


async def _restore_from_dict(agent: Agent, context: ContextConfig | None) -> Agent:
    data = agent.to_dict()
    AgentRegistry.clear()  # as in a new process: the tools stay registered
    return Agent.from_dict(data, context=context)


async def _restore_from_json(agent: Agent, context: ContextConfig | None) -> Agent:
    data = agent.to_json()
    AgentRegistry.clear()
    return Agent.from_json(data, context=context)


Restore = Callable[[Agent, ContextConfig | None], Awaitable[Agent]]
RESTORES = pytest.mark.parametrize(
    "restore", [_restore_from_dict, _restore_from_json], ids=["from_dict", "from_json"]
)


@RESTORES
async def test_a_restored_agent_continues_where_it_stopped(
    stores: Stores, say: Tool[..., Any], restore: Restore
) -> None:
    agent = scribe([say], ContextConfig(await stores.open()))
    await agent.put(Turn(say, kwargs={"role": "user", "text": "question"}))
    await agent.put(Turn(say, kwargs={"role": "assistant", "text": "answer"}))
    await drain(agent)
    await agent.put(Turn(say, kwargs={"role": "user", "text": "follow-up"}))  # not run yet

    reopened = await stores.open()
    restored = await restore(agent, ContextConfig(reopened))

    assert AgentRegistry.get(NAME) is restored
    assert restored.context is not None
    assert restored.context.store is reopened
    assert texts((await restored.prompt_window()).messages) == ["question", "answer"]
    assert queued(restored) == ["question", "answer"]
    await drain(restored)  # the queued turn runs, its message appends after the stored ones
    await restored.put(Turn(say, kwargs={"role": "assistant", "text": "more"}))
    await drain(restored)
    assert await stored(reopened) == ["question", "answer", "follow-up", "more"]
    assert texts((await restored.prompt_window()).messages) == await stored(reopened)
    assert queued(restored) == ["question", "answer", "follow-up", "more"]


@RESTORES
@pytest.mark.parametrize("given", ["missing", "other-session"])
async def test_restoring_without_the_session_store_fails_and_registers_nothing(
    stores: Stores, say: Tool[..., Any], restore: Restore, given: str
) -> None:
    agent = scribe([say], ContextConfig(await stores.open()))
    context = None if given == "missing" else ContextConfig(await stores.open("elsewhere"))

    with pytest.raises(ValueError, match=rf"session {SESSION!r}") as failure:
        await restore(agent, context)

    fix = "context=ContextConfig(store)" if given == "missing" else f"session_id={SESSION!r}"
    assert fix in str(failure.value)
    assert NAME in str(failure.value)
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get(NAME)


@RESTORES
async def test_restoring_with_a_store_instead_of_a_context_config_fails_and_registers_nothing(
    say: Tool[..., Any], restore: Restore
) -> None:
    store = MemoryContextStore(session_id=SESSION)
    agent = scribe([say], ContextConfig(store))

    with pytest.raises(TypeError, match="context must be a ContextConfig, not MemoryContextStore"):
        await restore(agent, store)  # type: ignore[arg-type]

    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get(NAME)


async def test_an_agent_saved_without_context_can_be_given_one(say: Tool[..., Any]) -> None:
    agent = scribe([say], None)
    store = MemoryContextStore([Message("user", "stored before")])

    restored = await _restore_from_json(agent, ContextConfig(store))
    await restored.put(Turn(say, kwargs={"role": "assistant", "text": "new"}))
    await drain(restored)

    assert await stored(store) == ["stored before", "new"]


async def test_a_branch_gets_its_own_fork_of_the_transcript(
    stores: Stores, say: Tool[..., Any]
) -> None:
    store = await stores.open()
    parent = scribe([say], ContextConfig(store))
    await parent.put(Turn(say, kwargs={"role": "user", "text": "shared"}))
    await drain(parent)

    child = parent.branch("child")
    assert child.context is not None
    assert child.context is not parent.context
    assert child.context.session_id != store.session_id
    await child.put(Turn(say, kwargs={"role": "assistant", "text": "child only"}))
    await drain(child)
    await parent.put(Turn(say, kwargs={"role": "assistant", "text": "parent only"}))
    await drain(parent)

    assert texts((await child.prompt_window()).messages) == ["shared", "child only"]
    assert await stored(store) == ["shared", "parent only"]
    assert type(child.context.store) is type(store)  # the fork is in the same backend
    assert child.to_dict()["context"]["session_id"] == child.context.store.session_id


# -- a real restart -------------------------------------------------------------------------------

RESTART_SCRIPT = """
import asyncio, json, sys
from pathlib import Path
from pygents_ctx import Agent, ContextConfig, ContextItem, Message, SQLiteContextStore, Turn
from pygents_ctx import connect, tool

@tool
async def say(role: str, text: str) -> ContextItem:
    return ContextItem(content=Message(role, text))

async def main(step, db, state):
    async with connect(db) as conn:
        context = ContextConfig(SQLiteContextStore(conn, session_id="restart"))
        if step == "first":
            agent = Agent("scribe", "keeps notes", [say], context=context)
            await agent.put(Turn(say, kwargs={"role": "user", "text": "first question"}))
            await agent.put(Turn(say, kwargs={"role": "assistant", "text": "first answer"}))
            async for _ in agent.run():
                pass
            # Left queued for the next process.
            await agent.put(Turn(say, kwargs={"role": "user", "text": "second question"}))
            Path(state).write_bytes(agent.to_json())
            return
        agent = Agent.from_json(Path(state).read_bytes(), context=context)
        before = [m.text for m in (await agent.prompt_window()).messages]
        await agent.put(Turn(say, kwargs={"role": "assistant", "text": "second answer"}))
        async for _ in agent.run():
            pass
        window = await agent.prompt_window()
        print(json.dumps({"before": before, "after": [m.text for m in window.messages]}))

asyncio.run(main(*sys.argv[1:]))
"""


def _run_step(script: Path, step: str, db: Path, state: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(  # with this checkout's pygents_ctx, not the installed one
        [sys.executable, str(script), step, str(db), str(state)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=script.parent,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_saved_agent_continues_its_sqlite_conversation_in_a_new_process(
    tmp_path: Path,
) -> None:
    script, db, state = tmp_path / "scribe.py", tmp_path / "ctx.db", tmp_path / "agent.json"
    script.write_text(RESTART_SCRIPT)

    _run_step(script, "first", db, state)
    assert json.loads(state.read_bytes())["context"] == {
        "session_id": "restart",
        "retention": "permanent",
    }
    report = json.loads(_run_step(script, "second", db, state))

    first = ["first question", "first answer"]
    assert report["before"] == first
    assert report["after"] == [*first, "second question", "second answer"]
    async with connect(db) as conn:
        history = await SQLiteContextStore(conn, session_id="restart").get_history()
    assert texts(history) == report["after"]
