"""A ModelLoop as a tool of another loop's model: sub-agents on branches, several at once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pygents_ctx import (
    Agent,
    AgentScope,
    ContextConfig,
    ContextItem,
    ContextPool,
    LeaseLostError,
    LeasePolicy,
    LoopLimits,
    LoopStop,
    MemoryContextStore,
    ModelLoop,
    ModelResponse,
    PostgresContextStore,
    SQLiteContextStore,
    SubagentError,
    Tool,
    ToolCallFinished,
    ToolRegistry,
    Usage,
    connect,
    connect_postgres,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call
from tests import postgres_server


@contextmanager
def fresh_database(server: postgres_server.PostgresServer) -> Iterator[str]:
    """A new, empty database on the test server (its DSN), dropped afterwards."""
    name = f"subagents_{uuid.uuid4().hex}"
    with psycopg.connect(server.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield server.dsn_for(name)
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


class SlowScriptedModel(ScriptedModel):
    """A scripted model that takes a moment per call, so calls at once overlap."""

    def __init__(self, script: list[Any], delay: float) -> None:
        super().__init__(script)
        self.delay = delay
        self.running = 0
        self.most_at_once = 0

    async def complete(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await asyncio.sleep(self.delay)
            return await super().complete(*args, **kwargs)
        finally:
            self.running -= 1


@pytest.fixture(autouse=True)
def note() -> Tool[..., Any]:
    """The researcher's tool, registered afresh for each test (the registries are cleared)."""

    async def note(id: str, text: str) -> ContextItem[str]:
        """Keep a note in the pool.

        Args:
            id: The note's id.
            text: The note.
        """
        return ContextItem(content=text, id=id, description=f"note {id}")

    return tool(note)


def researcher(model: Any, **options: Any) -> ModelLoop:
    agent = Agent(
        "researcher",
        "Finds one fact",
        [ToolRegistry.get("note")],
        context=ContextConfig(MemoryContextStore()),
        context_pool=ContextPool(limit=10),
    )
    return ModelLoop(agent, model, **options)


def lead(model: Any, *tools: Any) -> ModelLoop:
    agent = Agent("lead", "Plans", [], context=ContextConfig(MemoryContextStore()))
    return ModelLoop(agent, model, tools=tools)


async def test_two_calls_of_one_reply_run_two_sub_agents_at_once_and_merge_back() -> None:
    sub_model = SlowScriptedModel(
        [
            assistant(tool_call("note", id="tides", text="the Moon pulls")),
            assistant(tool_call("note", id="power", text="turbines")),
            "Tides: the Moon.",
            "Power: turbines.",
        ],
        delay=0.05,
    )
    sub = researcher(sub_model)
    research = sub.as_tool("research", "Find out one fact, in a sentence")
    calls = [tool_call("research", task="why tides?"), tool_call("research", task="power?")]
    main = lead(ScriptedModel([assistant(*calls), "Both found."]), research)

    events = [event async for event in main.stream("Tell me about tides")]

    finished = events[-1]
    assert finished.reason is LoopStop.ANSWER
    assert finished.text == "Both found."
    results = [e.result for e in events if isinstance(e, ToolCallFinished)]
    assert sorted(r.text for r in results) == ["Power: turbines.", "Tides: the Moon."]
    assert not any(r.is_error for r in results)
    assert sub_model.most_at_once == 2  # the two sub-agents ran at once
    # What the branches produced came back to the researcher; its transcript is untouched.
    assert sorted(item.id for item in sub.agent.context_pool.items) == ["power", "tides"]
    assert await sub.agent.context.history() == []
    # The sub-agents' model calls are counted once, in the caller's session, linked to the calls.
    assert await sub.agent.context.store.get_usage() == []
    usage = await main.agent.context.store.get_usage()
    assert len(usage) == 2 + 4
    asked = {call.id for call in calls}
    linked = [record for record in usage if record.call_id is not None]
    assert sorted(r.call_id for r in linked) == sorted([*asked, *asked])
    assert {r.parent_session for r in linked} == {main.agent.context.session_id}


async def test_the_sub_agent_sees_only_its_task_and_the_schema_asks_for_it() -> None:
    sub_model = ScriptedModel(["42"])
    research = researcher(sub_model).as_tool("research", "Answer one question")
    assert research.metadata.name == "research"
    assert research.metadata.description == "Answer one question"
    assert research.metadata.input_schema["required"] == ["task"]
    assert (
        "sees nothing else" in research.metadata.input_schema["properties"]["task"]["description"]
    )
    main = lead(ScriptedModel([assistant(tool_call("research", task="6 x 7?")), "42."]), research)

    await main.run("What is 6 x 7? Ask the researcher.")

    (call,) = sub_model.calls
    assert [m.text for m in call.messages if m.role == "user"] == ["6 x 7?"]


async def test_a_sub_agent_that_stops_without_an_answer_is_an_error_result() -> None:
    looping = ScriptedModel([assistant(tool_call("note", id="a", text="x"))] * 3)
    research = researcher(looping, limits=LoopLimits(max_steps=1)).as_tool(
        "research", "Find out one fact"
    )
    main = lead(ScriptedModel([assistant(tool_call("research", task="?")), "Sorry."]), research)

    events = [event async for event in main.stream("Find it")]

    (result,) = [e.result for e in events if isinstance(e, ToolCallFinished)]
    assert result.is_error
    assert result.text.startswith("SubagentError: the sub-agent 'research' stopped without")
    assert "max_steps" in result.text
    assert events[-1].text == "Sorry."


async def test_called_directly_a_failed_sub_agent_raises() -> None:
    research = researcher(
        ScriptedModel([assistant(tool_call("note", id="a", text="x"))]),
        limits=LoopLimits(max_steps=1),
    )
    with pytest.raises(SubagentError, match="max_steps"):
        await research.as_tool("research", "Find out one fact")(task="?")


@dataclass
class Fact:
    subject: str
    fact: str


async def test_with_an_output_type_the_sub_agent_answers_with_it() -> None:
    sub_model = ScriptedModel(['{"subject": "tides", "fact": "the Moon pulls"}'])
    research = researcher(sub_model, output_type=Fact).as_tool("research", "One fact")

    fact = await research(task="tides")

    assert fact == Fact("tides", "the Moon pulls")


async def test_without_merge_nothing_comes_back() -> None:
    sub_model = ScriptedModel([assistant(tool_call("note", id="n", text="kept?")), "Done."])
    sub = researcher(sub_model)

    assert await sub.as_tool("research", "One fact", merge=False)(task="x") == "Done."

    assert sub.agent.context_pool.items == []
    assert await sub.agent.context.store.get_usage() == []


async def test_sub_agents_fork_a_sqlite_transcript_and_leave_the_parents_alone(
    tmp_path: Any,
) -> None:
    async with connect(tmp_path / "s.db") as connection:
        store = SQLiteContextStore(connection, session_id="research")
        sub_model = ScriptedModel(["A.", "B."])
        agent = Agent("researcher", "Finds facts", [], context=ContextConfig(store))
        research = ModelLoop(agent, sub_model).as_tool("research", "One fact")
        calls = [tool_call("research", task="a"), tool_call("research", task="b")]
        main = lead(ScriptedModel([assistant(*calls), "Done."]), research)

        assert (await main.run("go")).text == "Done."

        assert await store.get_history() == []
        assert await store.get_usage() == []
        usage = await main.agent.context.store.get_usage()
        assert sum((record.usage for record in usage), Usage()).output_tokens > 0
        assert len(usage) == 2 + 2  # the lead's calls, and one per sub-agent
        kept = {record.subagent_session for record in usage if record.call_id is not None}
        sessions = {info.session_id for info in await store.list_sessions()}
        assert sessions == kept
        assert len(kept) == 2
        for session in kept:
            history = await SQLiteContextStore(connection, session_id=session).get_history()
            assert [m.text for m in history][-1] in ("A.", "B.")


async def test_per_request_scopes_keep_each_requests_sub_agents_apart() -> None:
    async def request(n: int) -> str:
        async with AgentScope():
            research = researcher(ScriptedModel([f"fact {n}"])).as_tool("research", "One")
            model = ScriptedModel([assistant(tool_call("research", task="x")), f"answer {n}"])
            return (await lead(model, research).run("go")).text

    assert await asyncio.gather(*(request(n) for n in range(5))) == [
        f"answer {n}" for n in range(5)
    ]


@pytest.mark.parametrize(
    ("name", "description", "merge", "error"),
    [
        ("no spaces", "One fact", True, ValueError),
        ("", "One fact", True, ValueError),
        ("x" * 65, "One fact", True, ValueError),
        ("research", "  ", True, ValueError),
        ("research", "One fact", "yes", TypeError),
    ],
)
def test_bad_options_are_refused(name: str, description: str, merge: Any, error: type) -> None:
    loop = researcher(ScriptedModel(["-"]))
    with pytest.raises(error, match="as_tool"):
        loop.as_tool(name, description, merge=merge)


@pytest.mark.parametrize("keep", ["all", None, "Transcript"])
def test_an_unknown_keep_is_refused_naming_the_choices(keep: Any) -> None:
    with pytest.raises(ValueError, match=r"keep must be 'transcript' .* or 'none'"):
        researcher(ScriptedModel(["-"])).as_tool("research", "One fact", keep=keep)


async def test_keep_none_makes_no_session_and_the_sub_agent_still_sees_only_its_task(
    tmp_path: Any,
) -> None:
    async with connect(tmp_path / "s.db") as connection:
        store = SQLiteContextStore(connection, session_id="research")
        sub_model = ScriptedModel([assistant(tool_call("note", id="n", text="x")), "Done."])
        agent = Agent(
            "researcher", "Finds", [ToolRegistry.get("note")], context=ContextConfig(store)
        )
        research = ModelLoop(agent, sub_model).as_tool("research", "One fact", keep="none")
        chat = SQLiteContextStore(connection, session_id="chat")
        main = ModelLoop(
            Agent("lead", "Plans", [], context=ContextConfig(chat)),
            ScriptedModel([assistant(tool_call("research", task="tides?")), "Done."]),
            tools=[research],
        )

        await main.run("go")

        assert [info.session_id for info in await store.list_sessions()] == ["chat"]
        assert [m.text for m in sub_model.calls[0].messages] == ["tides?"]
        assert [r.subagent_session for r in await chat.get_usage()] == [None, None, None, None]
        assert [r.call_id is None for r in await chat.get_usage()] == [True, False, False, True]
        assert agent.context_pool.get("n").content == "x"  # merged back all the same


# -- usage counted once, linked to the call ---------------------------------------------

LEAD_REPLIES, CALLS_PER_REPLY = 4, 5  # 5 lead calls, 20 sub-agent runs of 2 calls: 45


def sub_reply(messages: list[Any]) -> Any:
    """A note first, then the answer: two model calls per sub-agent run, in any order."""
    last = messages[-1]
    if last.has_tool_results:
        return "Noted."
    task = last.text
    return assistant(tool_call("note", id=task, text=f"about {task}"))


def forty_five_calls(research: Tool[..., Any]) -> tuple[ScriptedModel, ScriptedModel]:
    """The lead's model (5 calls, 20 sub-agent calls) and the researcher's (40 calls)."""
    replies: list[Any] = [
        assistant(*(tool_call("research", task=f"topic {r}-{c}") for c in range(CALLS_PER_REPLY)))
        for r in range(LEAD_REPLIES)
    ]
    return ScriptedModel([*replies, "All found."]), ScriptedModel([sub_reply] * 40)


async def run_forty_five(
    make_store: Any, keep: Any = "transcript"
) -> tuple[ModelLoop, ModelLoop, list[Any]]:
    """The lead (leased) calls the researcher 20 times: 45 model calls in all."""
    sub = ModelLoop(
        Agent(
            "researcher",
            "Finds facts",
            [ToolRegistry.get("note")],
            context=ContextConfig(make_store("research")),
            context_pool=ContextPool(limit=100),
        ),
        ScriptedModel([]),
    )
    research = sub.as_tool("research", "Find out one fact", keep=keep)
    lead_model, sub.model = forty_five_calls(research)
    main = ModelLoop(
        Agent("lead", "Plans", [], context=ContextConfig(make_store("chat"))),
        lead_model,
        tools=[research],
        lease=LeasePolicy(),
    )
    events = [event async for event in main.stream("Look into 20 topics")]
    assert events[-1].text == "All found."
    results = [e.result for e in events if isinstance(e, ToolCallFinished)]
    assert len(results) == 20
    assert not any(r.is_error for r in results)
    assert len(lead_model.calls) + len(sub.model.calls) == 45
    return main, sub, results


async def check_counted_once(make_store: Any, main: ModelLoop, keep: str) -> None:
    """45 records across all sessions, each sub-agent's linked to its call and transcript."""
    sessions = await make_store("chat").list_sessions()
    by_session = {
        info.session_id: await make_store(info.session_id).get_usage() for info in sessions
    }
    records = [record for found in by_session.values() for record in found]
    assert len(records) == 45
    assert len(by_session["chat"]) == 45  # the caller's session holds them all
    lead_calls = [r for r in records if r.call_id is None]
    sub_calls = [r for r in records if r.call_id is not None]
    assert len(lead_calls) == 5
    assert len(sub_calls) == 40
    # Spend counted once: the session totals add up to the records, and to nothing more.
    total = sum((r.usage for r in records), Usage())
    assert sum(info.input_tokens for info in sessions) == total.input_tokens
    assert sum(info.output_tokens for info in sessions) == total.output_tokens
    # Each sub-agent run: two records, linked to one call of the lead's transcript.
    asked = {
        call.id for message in await main.agent.context.history() for call in message.tool_uses
    }
    assert {r.parent_session for r in sub_calls} == {"chat"}
    assert {r.call_id for r in sub_calls} == asked
    assert len(asked) == 20
    links = {(r.call_id, r.subagent_session) for r in sub_calls}
    assert len(links) == 20  # one transcript per call, the same for both of its records
    # No session without a conversation: the researcher's own was never made.
    assert all(info.message_count > 0 for info in sessions)
    if keep == "none":
        assert {info.session_id for info in sessions} == {"chat"}
        assert all(r.subagent_session is None for r in sub_calls)
        return
    assert {info.session_id for info in sessions} == {"chat"} | {s for _, s in links}
    for call_id, session in links:  # the linked transcript is that call's sub-agent's
        history = await make_store(session).get_history()
        (task,) = [m.text for m in history if m.role == "user" and not m.has_tool_results]
        assert history[-1].text == "Noted."
        assert task.startswith("topic ")
        assert by_session[session] == []  # its calls are counted in the caller's session
        assert any(r.call_id == call_id for r in by_session["chat"])


@pytest.mark.parametrize("keep", ["transcript", "none"])
async def test_forty_five_calls_through_sub_agents_leave_forty_five_records_sqlite(
    tmp_path: Any, keep: str
) -> None:
    async with connect(tmp_path / "s.db") as connection:

        def make_store(name: str) -> SQLiteContextStore:
            return SQLiteContextStore(connection, session_id=name)

        main, _sub, _ = await run_forty_five(make_store, keep)
        await check_counted_once(make_store, main, keep)


@pytest.mark.parametrize("keep", ["transcript", "none"])
async def test_forty_five_calls_through_sub_agents_leave_forty_five_records_postgres(
    postgres: postgres_server.PostgresServer, keep: str
) -> None:
    with fresh_database(postgres) as dsn:
        async with connect_postgres(dsn) as connection:

            def make_store(name: str) -> PostgresContextStore:
                return PostgresContextStore(connection, session_id=name)

            main, _sub, _ = await run_forty_five(make_store, keep)
            await check_counted_once(make_store, main, keep)


async def test_a_sub_agent_records_under_its_callers_lease_and_not_after_it_passed(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller stalls past its lease while a sub-agent works: its call is not recorded."""
    in_call, wake = asyncio.Event(), asyncio.Event()

    async def slow_answer(messages: list[Any]) -> str:
        in_call.set()
        await wake.wait()
        return "Found it."

    async with connect(tmp_path / "s.db") as connection:
        store = SQLiteContextStore(connection, session_id="chat")
        sub = researcher(ScriptedModel([slow_answer]))
        research = sub.as_tool("research", "Find out one fact")
        main = ModelLoop(
            Agent("lead", "Plans", [], context=ContextConfig(store)),
            ScriptedModel([assistant(tool_call("research", task="tides")), "Done."]),
            tools=[research],
            lease=LeasePolicy(ttl=0.2),
        )
        stalled = asyncio.Event()
        renew = store._renew_lease

        async def stalled_renewal(owner: str, token: int, ttl: float) -> Any:
            # Frozen once the sub-agent is in its call, as a process stopped there: no
            # renewal reaches the store. Before that (on a slow machine the lead's own
            # steps can outlast the 0.2 s ttl, and check() renews), renewals go through.
            if in_call.is_set():
                await stalled.wait()
            return await renew(owner, token, ttl)

        monkeypatch.setattr(store, "_renew_lease", stalled_renewal)
        running = asyncio.create_task(main.run("Why tides?"))
        await in_call.wait()
        await asyncio.sleep(0.3)  # the caller's lease runs out
        other = SQLiteContextStore(connection, session_id="chat")
        successor = ModelLoop(
            Agent("successor", "Answers", [], context=ContextConfig(other)),
            ScriptedModel(["a new answer"]),
        )
        assert (await successor.run("hello again")).text == "a new answer"
        stalled.set()
        wake.set()

        with pytest.raises(LeaseLostError):
            await running
        usage = await other.get_usage()
        assert [r.call_id for r in usage] == [None, None]  # the lead's first call, the successor's
        assert [m.text for m in await other.get_history()][-2:] == ["hello again", "a new answer"]


@pytest.mark.parametrize("keep", ["transcript", "none"])
async def test_a_sub_agents_sub_agent_is_counted_in_the_first_callers_session(keep: Any) -> None:
    inner = researcher(ScriptedModel(["Inner fact."]))
    middle = ModelLoop(
        Agent("middle", "Delegates", [], context=ContextConfig(MemoryContextStore())),
        ScriptedModel([assistant(tool_call("dig", task="deeper")), "Middle answer."]),
        tools=[inner.as_tool("dig", "Dig deeper")],
    )
    main = lead(
        ScriptedModel([assistant(tool_call("ask", task="what?")), "Top answer."]),
        middle.as_tool("ask", "Ask the middle", keep=keep),
    )

    assert (await main.run("go")).text == "Top answer."

    usage = await main.agent.context.store.get_usage()
    assert len(usage) == 2 + 2 + 1  # the lead's, the middle's and the inner sub-agent's calls
    assert await middle.agent.context.store.get_usage() == []
    assert await inner.agent.context.store.get_usage() == []
    (ask,) = [c for m in await main.agent.context.history() for c in m.tool_uses]
    linked = [r for r in usage if r.call_id is not None]
    assert len(linked) == 3
    # The middle's two calls are the ones in the order of its script: first and last.
    middle_records, (deep,) = [linked[0], linked[2]], [linked[1]]
    assert {r.call_id for r in middle_records} == {ask.id}
    (middle_session,) = {r.subagent_session for r in middle_records}
    assert {r.parent_session for r in middle_records} == {main.agent.context.session_id}
    assert deep.subagent_session is not None  # the inner sub-agent keeps its transcript
    if keep == "transcript":
        assert middle_session is not None
        assert deep.parent_session == middle_session  # its call is in the middle's transcript
        assert deep.call_id != ask.id
    else:  # the middle's transcript is gone: the inner call is credited to the call above
        assert middle_session is None
        assert (deep.parent_session, deep.call_id) == (main.agent.context.session_id, ask.id)
