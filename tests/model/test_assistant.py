"""`Assistant`: an agent defined once, run per session, on SQLite by default."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import (
    ApprovalError,
    Assistant,
    LoopFinished,
    LoopLimits,
    LoopStop,
    Message,
    SQLiteConnection,
    SQLiteContextStore,
    TextDelta,
    Tool,
    connect,
    connect_postgres,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call


@dataclasses.dataclass
class Verdict:
    """Whether the customer was satisfied."""

    satisfied: bool


@pytest.fixture
async def db() -> AsyncIterator[SQLiteConnection]:
    async with connect(":memory:") as connection:
        yield connection


def shop_tools(refunded: list[int]) -> list[Tool[..., Any]]:
    """The tools of a small shop (made per test: each test starts with empty registries)."""

    @tool
    async def lookup_order(order_id: int) -> str:
        """Where an order is."""
        return f"order {order_id} shipped"

    @tool(needs_approval=True)
    async def refund(order_id: int) -> str:
        """Refund an order; a person approves it first."""
        refunded.append(order_id)
        return f"order {order_id} refunded"

    return [lookup_order, refund]


def texts(history: list[Message]) -> list[str]:
    return [m.text for m in history]


async def test_run_keeps_the_session_and_the_next_call_goes_on_from_it(
    db: SQLiteConnection,
) -> None:
    model = ScriptedModel([assistant(tool_call("lookup_order", order_id=42)), "Shipped.", "Yes."])
    support = Assistant("support", model=model, instructions="Help.", tools=shop_tools([]))

    done = await support.run("Where is order 42?", session="alice", owner="acme", store=db)
    again = await support.run("Really?", session="alice", owner="acme", store=db)

    assert (done.reason, done.text, again.text) == (LoopStop.ANSWER, "Shipped.", "Yes.")
    assert model.calls[2].messages[0] == Message("system", "Help.")
    assert "Where is order 42?" in texts(model.calls[2].messages)  # the stored conversation
    store = SQLiteContextStore(db, session_id="alice")
    assert [m.role for m in await store.get_history()] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    [info] = await store.list_sessions(owner="acme")
    assert info.session_id == "alice"


async def test_a_session_of_another_owner_is_refused_before_the_model(
    db: SQLiteConnection,
) -> None:
    model = ScriptedModel(["Hi ann.", "never"])
    helper = Assistant("helper", model=model)
    await helper.run("Hi", session="s1", owner="ann", store=db)

    with pytest.raises(ValueError, match="owner"):
        await helper.run("Hi", session="s1", owner="bob", store=db)
    with pytest.raises(ValueError, match="not owner 'bob'"):
        await helper.ask(Verdict, "Happy?", session="s1", owner="bob", store=db)
    assert len(model.calls) == 1


async def test_another_owner_cannot_decide_a_sessions_approvals(db: SQLiteConnection) -> None:
    refunded: list[int] = []
    call = tool_call("refund", order_id=3)
    support = Assistant(
        "support", model=ScriptedModel([assistant(call)]), tools=shop_tools(refunded)
    )
    await support.run("Refund 3", session="s2", owner="ann", store=db)

    with pytest.raises(ValueError, match="owner"):
        await support.resume(session="s2", owner="bob", approve=[call.id], store=db)
    assert refunded == []
    still = await support.run(None, session="s2", owner="ann", store=db)
    assert [c.id for c in still.pending] == [call.id]  # undecided: bob's decision was not kept


async def test_erase_removes_one_users_sessions_from_the_assistants_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYGENTS_CTX_DB", raising=False)
    helper = Assistant("helper", model=ScriptedModel(["Hi ann.", "Hi bob.", "Hi again."]))
    await helper.run("Hi", session="a1", owner="ann")
    await helper.run("Hi", session="b1", owner="bob")
    await helper.run("Hi", session="a2", owner="ann")

    with pytest.raises(ValueError, match="older_than"):
        await helper.erase(owner="ann", older_than=timedelta(days=-1))  # refused: nothing goes
    assert await helper.erase(owner="ann") == 2  # the default database, as run() used

    async with connect(tmp_path / "pygents_ctx.db") as connection:
        left = await SQLiteContextStore(connection).list_sessions()
    assert [(info.session_id, info.owner) for info in left] == [("b1", "bob")]


async def test_the_default_store_is_the_command_lines_database_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYGENTS_CTX_DB", raising=False)
    helper = Assistant("helper", model=ScriptedModel(["Hello.", "Again."]))

    await helper.run("Hi", session="ann")
    async with connect(tmp_path / "pygents_ctx.db") as connection:
        stored = await SQLiteContextStore(connection, session_id="ann").get_history()
    assert texts(stored) == ["Hi", "Hello."]

    monkeypatch.setenv("PYGENTS_CTX_DB", str(tmp_path / "other.db"))
    await helper.run("Hi", session="ann")
    async with connect(tmp_path / "other.db") as connection:
        assert await SQLiteContextStore(connection, session_id="ann").count() == 2


async def test_stream_yields_the_text_as_written_then_the_finish(db: SQLiteConnection) -> None:
    helper = Assistant("helper", model=ScriptedModel(["Hello there."]))

    events = [e async for e in helper.stream("Hi", session="ann", store=db)]

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there."
    assert isinstance(events[-1], LoopFinished)
    assert events[-1].text == "Hello there."
    assert await SQLiteContextStore(db, session_id="ann").count() == 2


async def test_ask_answers_typed_about_the_conversation_and_leaves_it_unchanged(
    db: SQLiteConnection,
) -> None:
    model = ScriptedModel(["Glad it arrived!", '{"satisfied": true}'])
    support = Assistant("support", model=model, tools=shop_tools([]))
    await support.run("Thanks, the parcel arrived!", session="alice", store=db)
    store = SQLiteContextStore(db, session_id="alice")
    before = await store.get_history()

    verdict = await support.ask(Verdict, "Was the customer satisfied?", session="alice", store=db)

    assert verdict == Verdict(satisfied=True)
    asked = model.calls[1]
    assert texts(asked.messages)[-2:] == ["Glad it arrived!", "Was the customer satisfied?"]
    assert asked.tools == ()
    assert asked.settings.output_schema.name == "Verdict"
    assert await store.get_history() == before  # neither the question nor the answer kept
    assert len(await store.get_usage()) == 2  # its spend is the session's


async def test_ask_about_a_session_without_conversation_says_so(db: SQLiteConnection) -> None:
    model = ScriptedModel(['{"satisfied": true}'])
    with pytest.raises(ValueError, match="no conversation to ask about"):
        await Assistant("helper", model=model).ask(Verdict, "Happy?", session="nobody", store=db)
    assert model.calls == []


async def test_resume_approves_and_rejects_then_continues(db: SQLiteConnection) -> None:
    refunded: list[int] = []
    first, second = tool_call("refund", order_id=1), tool_call("refund", order_id=2)
    model = ScriptedModel([assistant(first, second), "Refunded order 1 only."])
    support = Assistant("support", model=model, tools=shop_tools(refunded))

    stopped = await support.run("Refund 1 and 2", session="alice", store=db)
    assert stopped.reason is LoopStop.APPROVAL
    assert [c.id for c in stopped.pending] == [
        first.id,
        second.id,
    ]

    done = await support.resume(
        session="alice", approve=[first.id], reject={second.id: "order 2 is a gift"}, store=db
    )

    assert (done.reason, done.text, refunded) == (LoopStop.ANSWER, "Refunded order 1 only.", [1])
    results = model.calls[1].messages[-1].tool_results
    assert results[0].text == "order 1 refunded"
    assert results[1].is_error
    assert "order 2 is a gift" in results[1].text


async def test_resume_with_a_call_that_does_not_wait_keeps_no_decision(
    db: SQLiteConnection,
) -> None:
    refunded: list[int] = []
    call = tool_call("refund", order_id=7)
    model = ScriptedModel([assistant(call), "Refunded."])
    support = Assistant("support", model=model, tools=shop_tools(refunded))
    await support.run("Refund 7", session="bob", store=db)

    with pytest.raises(ApprovalError):
        await support.resume(session="bob", approve=[call.id, "call_unknown"], store=db)
    with pytest.raises(ValueError, match="both approved and rejected"):
        await support.resume(session="bob", approve=[call.id], reject=[call.id], store=db)
    with pytest.raises(TypeError, match=r"approve=\['call_1'\]"):
        await support.resume(session="bob", approve=call.id, store=db)

    waiting = await support.run(None, session="bob", store=db)  # still waits: nothing kept
    assert waiting.reason is LoopStop.APPROVAL
    assert refunded == []
    assert (await support.resume(session="bob", approve=[call.id], store=db)).text == "Refunded."
    assert refunded == [7]


async def test_a_sub_agent_is_a_tool_each_call_on_its_own_branch_in_the_callers_database(
    db: SQLiteConnection,
) -> None:
    researcher_model = ScriptedModel(
        [lambda messages: f"fact about {messages[-1].text}" for _ in range(2)]
    )
    researcher = Assistant("researcher", model=researcher_model, instructions="One fact.")
    asks = [tool_call("research", task="tides"), tool_call("research", task="wind")]
    lead_model = ScriptedModel([assistant(*asks), "Both found."])
    lead = Assistant(
        "lead", model=lead_model, tools=[researcher.as_tool("research", "Research a question")]
    )

    done = await lead.run("Explain tides and wind", session="s-lead", owner="acme", store=db)

    assert done.text == "Both found."
    results = {r.text for r in lead_model.calls[1].messages[-1].tool_results}
    assert results == {"fact about tides", "fact about wind"}
    store = SQLiteContextStore(db, session_id="s-lead")
    usage = await store.get_usage()
    linked = [r for r in usage if r.call_id is not None]
    assert {r.call_id for r in linked} == {c.id for c in asks}
    kept = {r.subagent_session for r in linked}
    sessions = {info.session_id: info.owner for info in await store.list_sessions()}
    assert kept <= set(sessions)
    assert len(kept) == 2
    assert {sessions[s] for s in kept} == {"acme"}
    assert set(sessions) == {"s-lead", *kept}  # no empty session beside them
    for session in kept:
        transcript = await SQLiteContextStore(db, session_id=session).get_history()
        assert len(transcript) == 2
        assert transcript[0].text in {"tides", "wind"}


async def test_one_definition_serves_concurrent_sessions_without_mixing_them(
    db: SQLiteConnection,
) -> None:
    @tool
    async def remember(note: str) -> str:
        """Remember a note."""
        await asyncio.sleep(0.001)
        return f"noted {note}"

    def reply(messages: list[Message]) -> Message | str:
        last = messages[-1]
        if last.tool_results:
            return f"done: {last.tool_results[0].text}"
        return assistant(tool_call("remember", note=last.text))

    sessions = 12
    helper = Assistant(
        "helper",
        model=ScriptedModel([reply] * (2 * sessions)),
        tools=[remember],
        limits=LoopLimits(max_steps=4),
    )
    names = [f"user-{i}" for i in range(sessions)]

    done = await asyncio.gather(
        *(helper.run(f"note of {name}", session=name, store=db) for name in names)
    )

    assert [d.text for d in done] == [f"done: noted note of {name}" for name in names]
    for name in names:
        history = await SQLiteContextStore(db, session_id=name).get_history()
        assert texts(history)[0] == f"note of {name}"
        assert len(history) == 4
        assert all(name in m.text for m in history if m.text)


async def test_postgres_through_store(postgres: Any) -> None:
    refunded: list[int] = []
    call = tool_call("refund", order_id=5)
    model = ScriptedModel([assistant(call), "Refunded.", '{"satisfied": true}'])
    support = Assistant("support", model=model, tools=shop_tools(refunded))
    session = f"pg-{uuid.uuid4().hex}"
    async with connect_postgres(postgres.dsn) as connection:
        stopped = await support.run("Refund 5", session=session, owner="acme", store=connection)
        assert stopped.reason is LoopStop.APPROVAL
        done = await support.resume(session=session, approve=[call.id], store=connection)
        verdict = await support.ask(Verdict, "Happy?", session=session, store=connection)
    assert (done.text, refunded, verdict) == ("Refunded.", [5], Verdict(True))


# -- bad input: each refused before any model call, naming the fix -------------------


async def test_no_model_is_refused_before_anything_is_stored(db: SQLiteConnection) -> None:
    helper = Assistant("helper")

    with pytest.raises(ValueError, match=r"has no model: give one.*model="):
        await helper.run("Hi", session="ann", store=db)
    assert await SQLiteContextStore(db, session_id="ann").count() == 0
    with pytest.raises(ValueError, match="has no model"):
        helper.as_tool("help", "Helps")
    model = ScriptedModel(["Hello."])
    assert (await helper.run("Hi", session="ann", store=db, model=model)).text == "Hello."


@pytest.mark.parametrize(
    ("session", "error"), [(42, TypeError), (None, TypeError), ("", ValueError), (" ", ValueError)]
)
async def test_a_session_id_must_be_a_non_empty_str(
    db: SQLiteConnection, session: Any, error: type[Exception]
) -> None:
    model = ScriptedModel(["never"])
    helper = Assistant("helper", model=model)
    with pytest.raises(error, match=r"session='alice'"):
        await helper.run("Hi", session=session, store=db)
    with pytest.raises(error, match=r"session='alice'"):
        [e async for e in helper.stream("Hi", session=session, store=db)]
    with pytest.raises(error, match=r"session='alice'"):
        await helper.resume(session=session, store=db)
    assert model.calls == []


async def test_an_output_type_without_a_json_schema_is_refused(db: SQLiteConnection) -> None:
    model = ScriptedModel(["Hi.", "never"])
    with pytest.raises(TypeError, match="dataclass, a TypedDict or a pydantic model"):
        Assistant("helper", model=model, output_type=int)
    helper = Assistant("helper", model=model)
    await helper.run("Hi", session="ann", store=db)
    with pytest.raises(TypeError, match="wrap a single value in a dataclass"):
        await helper.ask(int, "How many?", session="ann", store=db)
    assert len(model.calls) == 1


def test_a_sub_agent_whose_name_collides_is_refused() -> None:
    researcher = Assistant("researcher", model=ScriptedModel([]))

    @tool
    async def research(task: str) -> str:
        """Look it up."""
        return task

    with pytest.raises(ValueError, match=r"two tools named 'research'; rename one"):
        Assistant(
            "lead",
            model=ScriptedModel([]),
            tools=[research, researcher.as_tool("research", "Research")],
        )


def test_a_definition_is_immutable_and_checked_when_made() -> None:
    helper = Assistant("helper", model=ScriptedModel([]))
    with pytest.raises(AttributeError, match="immutable"):
        helper.instructions = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match="LoopLimits"):
        Assistant("helper", model=ScriptedModel([]), limits=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="store must be"):
        Assistant("helper", model=ScriptedModel([]), store=42)  # type: ignore[arg-type]


async def test_a_stream_left_early_stops_its_run_and_the_session_goes_on(
    db: SQLiteConnection,
) -> None:
    model = ScriptedModel(["Hello there.", "Again."], chunk_delay=0.01)
    helper = Assistant("helper", model=model)

    async for event in helper.stream("Hi", session="ann", store=db):
        if isinstance(event, TextDelta):
            break  # the stream is closed when collected
    gc.collect()
    await asyncio.sleep(0.05)

    done = await helper.run("Still there?", session="ann", store=db)  # the lease was released
    assert done.text == "Again."
    assert texts(await SQLiteContextStore(db, session_id="ann").get_history()) == [
        "Hi",
        "Still there?",
        "Again.",
    ]
