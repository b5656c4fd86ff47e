"""ContextStoreSaver: LangGraph's conformance suite, a real graph, storage per turn, bad input.

The conformance suite (langgraph-checkpoint-conformance) runs in full on
SQLite and on the session's PostgreSQL server, each run in a new database.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from pygents_ctx.context.stores import SQLiteConnection, connect, connect_postgres
from pygents_ctx.integrations.langgraph import ContextStoreSaver


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the saver under test keeps its checkpoints: a SQLite path or a PostgreSQL DSN."""
    if request.param == "sqlite":
        return str(tmp_path / "graph.db")
    return str(request.getfixturevalue("pg_dsn"))


def _connect(database: str) -> Any:
    return connect(database) if database.endswith(".db") else connect_postgres(database)


async def _rows(conn: Any, table: str) -> int:
    statement = f"SELECT count(*) FROM {table}"
    if isinstance(conn, SQLiteConnection):
        return int(await conn.run(lambda db: db.execute(statement).fetchone()[0]))

    async def count(db: Any) -> int:
        return int((await (await db.execute(statement)).fetchone())[0])

    return int(await conn.run(count))


# -- the conformance suite --------------------------------------------------------


async def test_the_conformance_suite_passes_in_full(database: str) -> None:
    @checkpointer_test(name="ContextStoreSaver")
    async def saver() -> AsyncIterator[ContextStoreSaver]:
        async with _connect(database) as conn:
            yield ContextStoreSaver(conn)

    report = await validate(saver)
    failures = {name: result.failures for name, result in report.results.items()}
    assert all(result.passed for result in report.results.values()), failures
    assert sum(result.tests_passed for result in report.results.values()) == 81
    assert all(result.detected for result in report.results.values())


# -- a real graph -----------------------------------------------------------------


def _graph(replies: list[str], saver: ContextStoreSaver) -> Any:
    model = GenericFakeChatModel(messages=iter([AIMessage(reply) for reply in replies]))

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    return builder.compile(checkpointer=saver)


async def test_a_graph_keeps_its_conversation_across_a_restart(database: str) -> None:
    config: Any = {"configurable": {"thread_id": "user-42"}}
    async with _connect(database) as conn:
        graph = _graph(["Hello!", "Paris.", "About 2 million."], ContextStoreSaver(conn))
        for question in ("Hi", "Capital of France?", "How many people live there?"):
            await graph.ainvoke({"messages": [HumanMessage(question)]}, config)
    async with _connect(database) as conn:  # a new process: nothing in memory
        saver = ContextStoreSaver(conn)
        graph = _graph(["You're welcome."], saver)
        state = await graph.aget_state(config)
        assert [m.content for m in state.values["messages"]] == [
            "Hi", "Hello!", "Capital of France?", "Paris.",
            "How many people live there?", "About 2 million.",
        ]  # fmt: skip
        result = await graph.ainvoke({"messages": [HumanMessage("Thanks")]}, config)
        assert [m.content for m in result["messages"][-2:]] == ["Thanks", "You're welcome."]
        history = [snapshot async for snapshot in graph.aget_state_history(config)]
        assert len(history) == 4 * 3  # each turn: its input, START, and the chat node
        assert await _rows(conn, "pygents_lg_messages") == 8  # each message stored once
        assert len(history[0].values["messages"]) == 8
        assert not history[-1].values.get("messages")  # the first turn's input


async def test_an_interrupt_in_a_subgraph_is_resumed_after_a_restart(database: str) -> None:
    def approve(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("deploy to production?")
        return {"messages": [AIMessage(f"deploying: {answer}")]}

    inner = StateGraph(MessagesState)
    inner.add_node("approve", approve)
    inner.add_edge(START, "approve")
    outer = StateGraph(MessagesState)
    outer.add_node("review", inner.compile())
    outer.add_edge(START, "review")
    config: Any = {"configurable": {"thread_id": "t"}}
    async with _connect(database) as conn:
        graph = outer.compile(checkpointer=ContextStoreSaver(conn))
        paused = await graph.ainvoke({"messages": [HumanMessage("ship it")]}, config)
        assert [i.value for i in paused["__interrupt__"]] == ["deploy to production?"]
    async with _connect(database) as conn:
        graph = outer.compile(checkpointer=ContextStoreSaver(conn))
        state = await graph.aget_state(config, subgraphs=True)
        assert state.next == ("review",)
        assert state.tasks[0].state.config["configurable"]["checkpoint_ns"].startswith("review:")
        done = await graph.ainvoke(Command(resume="yes"), config)
        assert [m.content for m in done["messages"]] == ["ship it", "deploying: yes"]


async def test_a_subgraph_with_the_parents_messages_stores_each_message_once(
    database: str,
) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(f"answer {i}") for i in range(6)]))

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    inner = StateGraph(MessagesState)
    inner.add_node("chat", chat)
    inner.add_edge(START, "chat")
    outer = StateGraph(MessagesState)
    outer.add_node("agent", inner.compile())  # runs in a namespace of its own each turn
    outer.add_edge(START, "agent")
    config: Any = {"configurable": {"thread_id": "t"}}
    async with _connect(database) as conn:
        saver = ContextStoreSaver(conn)
        graph = outer.compile(checkpointer=saver)
        for turn in range(6):
            result = await graph.ainvoke({"messages": [HumanMessage(f"question {turn}")]}, config)
        assert len(result["messages"]) == 12
        assert await _rows(conn, "pygents_lg_messages") == 12
        fresh = outer.compile(checkpointer=ContextStoreSaver(conn))
        assert (await fresh.aget_state(config)).values["messages"] == result["messages"]


@pytest.mark.parametrize("seed", range(5))
async def test_the_subgraphs_messages_are_stored_once_however_the_puts_interleave(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LangGraph puts the subgraph's checkpoints beside its parent's, both with the
    # new answer; writes that take a random while let either finish first.
    model = GenericFakeChatModel(messages=iter([AIMessage(f"answer {i}") for i in range(6)]))
    inner = StateGraph(MessagesState)
    inner.add_node("chat", lambda state: {"messages": [model.invoke(state["messages"])]})
    inner.add_edge(START, "chat")
    outer = StateGraph(MessagesState)
    outer.add_node("agent", inner.compile())
    outer.add_edge(START, "agent")
    config: Any = {"configurable": {"thread_id": "t"}}
    delays = random.Random(seed)
    async with connect(tmp_path / "graph.db") as conn:
        saver = ContextStoreSaver(conn)
        write = saver._db.write

        async def slow_write(steps: Any) -> None:
            await asyncio.sleep(delays.random() * 0.003)
            await write(steps)

        monkeypatch.setattr(saver._db, "write", slow_write)
        graph = outer.compile(checkpointer=saver)
        for turn in range(6):
            result = await graph.ainvoke({"messages": [HumanMessage(f"question {turn}")]}, config)
        assert await _rows(conn, "pygents_lg_messages") == len(result["messages"]) == 12


async def test_the_sync_api_works_from_another_thread(tmp_path: Path) -> None:
    config: Any = {"configurable": {"thread_id": "t"}}
    async with connect(tmp_path / "graph.db") as conn:
        saver = ContextStoreSaver(conn)
        graph = _graph(["One.", "Two."], saver)
        await asyncio.to_thread(graph.invoke, {"messages": [HumanMessage("1?")]}, config)
        result = await asyncio.to_thread(graph.invoke, {"messages": [HumanMessage("2?")]}, config)
        assert [m.content for m in result["messages"]] == ["1?", "One.", "2?", "Two."]
        assert len(await asyncio.to_thread(lambda: list(saver.list(config)))) == 6
        with pytest.raises(RuntimeError, match="to_thread"):
            saver.get_tuple(config)  # on the loop's own thread it would wait on itself


async def test_a_fork_from_an_old_checkpoint_leaves_the_thread_as_it_was(tmp_path: Path) -> None:
    config: Any = {"configurable": {"thread_id": "t"}}
    async with connect(tmp_path / "graph.db") as conn:
        graph = _graph(["A1", "A2", "B2"], ContextStoreSaver(conn))
        await graph.ainvoke({"messages": [HumanMessage("Q1")]}, config)
        after_one = (await graph.aget_state(config)).config
        await graph.ainvoke({"messages": [HumanMessage("Q2")]}, config)
        forked = await graph.ainvoke({"messages": [HumanMessage("Q2b")]}, after_one)
        assert [m.content for m in forked["messages"]] == ["Q1", "A1", "Q2b", "B2"]
        main_line = [m.content for m in (await graph.aget_state(config)).values["messages"]]
        assert main_line == ["Q1", "A1", "Q2b", "B2"]  # the latest checkpoint is the fork's
        old = (await graph.aget_state(after_one)).values["messages"]
        assert [m.content for m in old] == ["Q1", "A1"]


# -- storage per turn, pruning ----------------------------------------------------


def _used_bytes(conn: SQLiteConnection) -> Any:
    def used(db: Any) -> int:
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    return conn.run(used)


class _Thread:
    """A message-list thread as a graph writes it: a checkpoint per turn, the list grown."""

    def __init__(self, saver: ContextStoreSaver, thread_id: str = "t", namespace: str = "") -> None:
        self.saver = saver
        self.config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}}
        self.checkpoint = empty_checkpoint()
        self.messages: list[Any] = []
        self.version: str | None = None
        self.step = 0

    async def turn(self, *messages: Any) -> None:
        self.messages = [*self.messages, *messages]
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint = create_checkpoint(self.checkpoint, None, self.step)
        checkpoint["channel_values"] = {"messages": self.messages}
        checkpoint["channel_versions"] = {"messages": self.version}
        self.config = await self.saver.aput(
            self.config, checkpoint, {"source": "loop", "step": self.step},
            {"messages": self.version},
        )  # fmt: skip
        self.checkpoint = checkpoint
        self.step += 1


def _exchange(index: int) -> tuple[HumanMessage, AIMessage]:
    text = f"message {index} " + "lorem ipsum " * 40
    return HumanMessage(text, id=f"h{index}"), AIMessage(text, id=f"a{index}")


async def test_bytes_per_turn_stay_flat_as_the_thread_grows(tmp_path: Path) -> None:
    async with connect(tmp_path / "graph.db") as conn:
        thread = _Thread(ContextStoreSaver(conn))
        growth = {}
        for turn in range(1, 1_051):
            if turn in (100, 1_000):
                start = await _used_bytes(conn)
            await thread.turn(*_exchange(turn))
            if turn in (150, 1_050):
                growth[turn - 50] = (await _used_bytes(conn) - start) / 50
        assert growth[1_000] < 1.5 * growth[100], growth
        assert growth[1_000] < 4 * 1_100, growth  # two ~520-byte messages and a checkpoint
        tup = await thread.saver.aget_tuple(thread.config)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["messages"] == thread.messages


async def test_keep_prunes_old_checkpoints_as_it_goes(database: str) -> None:
    async with _connect(database) as conn:
        saver = ContextStoreSaver(conn, keep=3)
        thread, other = _Thread(saver, "t"), _Thread(saver, "other")
        for index in range(10):
            await thread.turn(*_exchange(index))
            await other.turn(*_exchange(index))
        for name in ("t", "other"):
            listed = [tup async for tup in saver.alist({"configurable": {"thread_id": name}})]
            assert [tup.metadata["step"] for tup in listed] == [9, 8, 7]
            assert [len(tup.checkpoint["channel_values"]["messages"]) for tup in listed] == [
                20, 18, 16,
            ]  # fmt: skip
        fresh = ContextStoreSaver(conn)  # nothing remembered: every message read back
        latest = await fresh.aget_tuple(thread.config)
        assert latest is not None
        assert latest.checkpoint["channel_values"]["messages"] == thread.messages


async def test_prune_keeps_the_latest_and_frees_what_only_older_ones_held(tmp_path: Path) -> None:
    async with connect(tmp_path / "graph.db") as conn:
        saver = ContextStoreSaver(conn)
        thread = _Thread(saver)
        for index in range(5):
            await thread.turn(*_exchange(index))
        # The latest list drops the first exchange: its messages are held by older
        # checkpoints only, and go when they are pruned.
        thread.messages = thread.messages[2:]
        await thread.turn(*_exchange(5))
        count = "SELECT count(*) FROM pygents_lg_messages"
        before = await conn.run(lambda db: db.execute(count).fetchone()[0])
        await saver.aprune(["t"])
        listed = [tup async for tup in saver.alist({"configurable": {"thread_id": "t"}})]
        assert len(listed) == 1
        assert listed[0].checkpoint["channel_values"]["messages"] == thread.messages
        after = await conn.run(lambda db: db.execute(count).fetchone()[0])
        assert (before, after) == (12, 12)  # one segment, still in use: kept whole
        await saver.aprune(["t"], strategy="delete")
        assert await saver.aget_tuple(thread.config) is None
        assert await conn.run(lambda db: db.execute(count).fetchone()[0]) == 0


async def test_two_savers_on_one_thread_never_read_or_write_a_stale_list(database: str) -> None:
    async with _connect(database) as conn:
        first, second = _Thread(ContextStoreSaver(conn)), _Thread(ContextStoreSaver(conn))
        for index in range(3):
            await first.turn(*_exchange(index))
        latest = await second.saver.aget_tuple(first.config)
        assert latest is not None
        second.config, second.checkpoint = latest.config, latest.checkpoint
        second.messages = latest.checkpoint["channel_values"]["messages"]
        second.version, second.step = first.version, first.step
        await second.turn(*_exchange(10))  # goes on where the first one's list ended
        await first.turn(*_exchange(20))  # so must this one's, which it does not know
        await second.saver.aprune(["t"])  # and the first one's remembered segment may go
        await first.turn(*_exchange(30))
        for thread in (first, second, first):
            found = await thread.saver.aget_tuple(first.config)
            assert found is not None
            assert found.checkpoint["channel_values"]["messages"] == first.messages
        # Nothing written twice: the first segment (its first 6 still in use, and the
        # second saver's 2), and the first saver's two turns in a segment of their own,
        # begun when its append collided with the second's.
        assert await _rows(conn, "pygents_lg_messages") == 8 + 2 + 2


# -- message lists round-trip whatever happens to them ------------------------------

_EDITS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("drop_front"), st.integers(1, 3)),
        st.tuples(st.just("replace"), st.integers(0, 10)),
        st.tuples(st.just("copy"), st.integers(0, 10)),
        st.tuples(st.just("reword"), st.integers(0, 10)),
        st.tuples(st.just("branch"), st.integers(0, 10)),
        st.tuples(st.just("restart"), st.just(0)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(edits=_EDITS)
def test_every_checkpoint_reads_back_the_list_it_was_given(edits: list[tuple[str, int]]) -> None:
    async def run() -> None:
        async with connect(":memory:") as conn:
            saver = ContextStoreSaver(conn)
            thread = _Thread(saver)
            made = iter(range(10**6))
            written: list[tuple[Any, list[Any]]] = []
            for edit, amount in edits:
                if edit == "append":
                    thread.messages = [*thread.messages, *_exchange(next(made))[: amount % 2 + 1]]
                elif edit == "drop_front":
                    thread.messages = thread.messages[amount:]
                elif edit == "replace" and thread.messages:
                    at = amount % len(thread.messages)
                    replaced = list(thread.messages)
                    replaced[at] = HumanMessage(f"edited {next(made)}")
                    thread.messages = replaced
                elif edit in ("copy", "reword") and thread.messages:
                    at = amount % len(thread.messages)
                    changed = list(thread.messages)
                    content = {"content": f"reworded {next(made)}"} if edit == "reword" else {}
                    changed[at] = changed[at].model_copy(update=content)  # the same id
                    thread.messages = changed
                elif edit == "branch" and written:
                    config, messages = written[amount % len(written)]
                    thread.config, thread.messages = config, list(messages)
                elif edit == "restart":
                    saver = thread.saver = ContextStoreSaver(conn)  # forgets what it wrote
                await thread.turn(*_exchange(next(made))[:1])
                written.append((thread.config, list(thread.messages)))
            fresh = ContextStoreSaver(conn)
            for config, messages in written:
                found = await fresh.aget_tuple(config)
                assert found is not None
                assert found.checkpoint["channel_values"].get("messages", []) == messages

    asyncio.run(run())


# -- bad input ----------------------------------------------------------------------


async def test_bad_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    async with connect(tmp_path / "graph.db") as conn:
        saver = ContextStoreSaver(conn)
        thread = _Thread(saver)
        await thread.turn(*_exchange(0))
        with pytest.raises(TypeError, match="thread_id must be a str, not int"):
            await saver.aget_tuple({"configurable": {"thread_id": 42}})
        with pytest.raises(TypeError, match="thread_id must be a str"):
            await saver.aput(
                {"configurable": {"thread_id": 42, "checkpoint_ns": ""}},
                empty_checkpoint(), {}, {},
            )  # fmt: skip
        with pytest.raises(ValueError, match=r"thread_id .* holds a NUL character"):
            await saver.aget_tuple({"configurable": {"thread_id": "t\x00"}})
        with pytest.raises(ValueError, match=r"thread_id .* holds a lone surrogate"):
            await saver.aget_tuple({"configurable": {"thread_id": "t\ud800"}})
        with pytest.raises(TypeError, match="names no thread"):
            await saver.aget_tuple({"configurable": {}})
        with pytest.raises(TypeError, match="needs the checkpoint the writes belong to"):
            await saver.aput_writes({"configurable": {"thread_id": "t"}}, [("a", 1)], "task")
        with pytest.raises(ValueError, match="has no checkpoints to copy"):
            await saver.acopy_thread("nobody", "copy")
        with pytest.raises(ValueError, match="already has checkpoints"):
            await saver.acopy_thread("t", "t")
        with pytest.raises(TypeError, match="list of thread ids"):
            await saver.aprune("t")
        with pytest.raises(ValueError, match="strategy"):
            await saver.aprune(["t"], strategy="oldest")
        with pytest.raises(TypeError, match="connect"):
            ContextStoreSaver("graph.db")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least 1"):
            ContextStoreSaver(conn, keep=0)
        assert await saver.aget_tuple({"configurable": {"thread_id": "nobody"}}) is None
        assert [tup.config for tup in [tup async for tup in saver.alist(None)]] == [thread.config]
        assert (await saver.aget_tuple(thread.config)).pending_writes == []  # type: ignore[union-attr]


def test_sync_calls_once_the_saver_loop_has_ended_raise(tmp_path: Path) -> None:
    async def make() -> ContextStoreSaver:
        async with connect(tmp_path / "graph.db") as conn:
            return ContextStoreSaver(conn)

    saver = asyncio.run(make())
    with pytest.raises(RuntimeError, match="event loop is not running"):
        saver.get_tuple({"configurable": {"thread_id": "t"}})


async def test_the_saver_remembers_at_most_20_000_messages(tmp_path: Path) -> None:
    async with connect(tmp_path / "graph.db") as conn:
        saver = ContextStoreSaver(conn)
        first, second = _Thread(saver, "first"), _Thread(saver, "second")
        await first.turn(*[m for i in range(6_000) for m in _exchange(i)])
        await first.turn(*_exchange(-1))
        assert await _rows(conn, "pygents_lg_messages") == 12_002  # the turn: its 2 only
        await second.turn(*[m for i in range(5_000) for m in _exchange(i)])
        await second.turn(*_exchange(-2))  # remembered: its 2 only
        assert await _rows(conn, "pygents_lg_messages") == 12_002 + 10_002
        await first.turn(*_exchange(-3))  # forgotten for the second's: written whole
        assert await _rows(conn, "pygents_lg_messages") == 12_002 + 10_002 + 12_004
        for thread in (first, second):
            found = await ContextStoreSaver(conn).aget_tuple(thread.config)
            assert found is not None
            assert found.checkpoint["channel_values"]["messages"] == thread.messages


def test_importing_the_module_does_not_import_langgraph() -> None:
    code = (
        "import sys, pygents_ctx, pygents_ctx.integrations.langgraph; "
        "assert not any(m.startswith(('langgraph', 'langchain')) for m in sys.modules)"
    )
    import subprocess

    subprocess.run([sys.executable, "-c", code], check=True)
