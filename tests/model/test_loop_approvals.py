"""ModelLoop approvals: a call that needs a person's approval stops the run until decided."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from contextlib import AsyncExitStack, aclosing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pygents_ctx
from pygents_ctx import (
    Agent,
    AgentRegistry,
    AnthropicModel,
    ApprovalDecision,
    ApprovalError,
    ContextConfig,
    LeasePolicy,
    LoopFinished,
    LoopStop,
    MemoryContextStore,
    Message,
    ModelLoop,
    OpenAIModel,
    ToolApprovalRequired,
    ToolCallFinished,
    ToolCallStarted,
    ToolPolicy,
    ToolUseBlock,
    tool,
)
from pygents_ctx.context.stores import (
    PostgresContextStore,
    SQLiteContextStore,
    connect,
    connect_postgres,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

from .fake_api import (
    FakeAPI,
    chat_completion,
    json_reply,
    message,
    message_events,
    sse_reply,
    text_block,
)

WORKER = Path(__file__).with_name("approval_worker.py")


@pytest.fixture
def ran() -> list[str]:
    """Every tool call that ran, in order."""
    return []


@pytest.fixture
def tools(ran: list[str]) -> list[Any]:
    @tool(needs_approval=True)
    async def delete(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete {path}")
        return f"deleted {path}"

    @tool(needs_approval=lambda arguments: arguments.get("amount", 0) > 100)
    async def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    async def outside_the_sandbox(arguments: dict[str, Any]) -> bool:
        await asyncio.sleep(0)
        return not str(arguments["path"]).startswith("/sandbox/")

    @tool(needs_approval=outside_the_sandbox)
    async def write(path: str, text: str = "") -> str:
        """Write a file."""
        ran.append(f"write {path}")
        return f"wrote {path}"

    @tool
    async def look(path: str) -> str:
        """Look at a file."""
        ran.append(f"look {path}")
        return f"{path} is there"

    return [delete, pay, write, look]


def make_loop(tools: list[Any], script: list[Any], **options: Any) -> ModelLoop:
    store = options.pop("store", None) or MemoryContextStore()
    agent = Agent(options.pop("name", "janitor"), "Cleans", tools, context=ContextConfig(store))
    return ModelLoop(agent, ScriptedModel(script), **options)


async def history(loop: ModelLoop) -> list[Message]:
    assert loop.agent.context is not None
    return await loop.agent.context.history()


def results_of(message: Message) -> list[tuple[str, str, bool]]:
    return [(r.tool_use_id, str(r.content), r.is_error) for r in message.tool_results]


# -- stopping and continuing ------------------------------------------------------------


async def test_a_call_needing_approval_stops_the_run_before_any_call_runs(
    tools: list[Any], ran: list[str]
) -> None:
    delete, look = tool_call("delete", path="a.txt"), tool_call("look", path="b.txt")
    loop = make_loop(tools, [assistant("Cleaning.", delete, look), "Done."])

    finished = await loop.run("Clean up")

    assert finished.reason is LoopStop.APPROVAL
    assert finished.pending == (delete,)
    # The stop carries the reply the calls came in, with the text the model wrote beside them.
    assert finished.message is not None
    assert finished.message.tool_uses == (delete, look)
    assert (finished.text, finished.steps) == ("Cleaning.", 1)
    assert ran == []  # the call that needs no approval waits with the rest
    assert (await loop.pending_approvals()) == [delete]
    assert [turn.tool_name for turn in loop.agent.queue] == ["model_act"]
    assert len(await history(loop)) == 2  # the question and the reply; no result yet

    await loop.approve(delete.id)
    finished = await loop.run()

    assert (finished.reason, finished.text) == (LoopStop.ANSWER, "Done.")
    assert ran == ["delete a.txt", "look b.txt"]
    assert results_of((await history(loop))[2]) == [
        (delete.id, "deleted a.txt", False),
        (look.id, "b.txt is there", False),
    ]
    assert (await loop.pending_approvals()) == []
    assert loop.agent.queue == []


async def test_a_rejection_reaches_the_model_as_that_calls_error_result(
    tools: list[Any], ran: list[str]
) -> None:
    first, second = tool_call("delete", path="a.txt"), tool_call("delete", path="b.txt")
    look = tool_call("look", path="c.txt")
    loop = make_loop(tools, [assistant(first, look, second), "Kept b.txt."])
    await loop.run("Clean up")

    await loop.reject(second.id, "b.txt holds the tax records")
    assert (await loop.pending_approvals()) == [first]
    await loop.reject(first.id)
    finished = await loop.run()

    assert finished.text == "Kept b.txt."
    assert ran == ["look c.txt"]
    results = [
        (first.id, "rejected: a person did not approve this call", True),
        (look.id, "c.txt is there", False),
        (
            second.id,
            "rejected: a person did not approve this call: b.txt holds the tax records",
            True,
        ),
    ]
    assert results_of((await history(loop))[2]) == results
    model = loop.model
    assert isinstance(model, ScriptedModel)
    assert results_of(model.calls[1].messages[-1]) == results  # what the model was shown


async def test_running_before_every_call_is_decided_stops_again_without_a_model_call(
    tools: list[Any], ran: list[str]
) -> None:
    first, second = tool_call("delete", path="a.txt"), tool_call("delete", path="b.txt")
    loop = make_loop(tools, [assistant(first, second), "Done."])
    await loop.run("Clean up")
    await loop.approve(first.id)

    again = await loop.run()

    assert (again.reason, again.pending, again.steps) == (LoopStop.APPROVAL, (second,), 0)
    assert ran == []
    assert (await loop.pending_approvals()) == [second]
    await loop.approve(second.id)
    assert (await loop.run()).text == "Done."
    assert ran == ["delete a.txt", "delete b.txt"]


async def test_a_rule_over_the_arguments_decides_which_calls_wait(
    tools: list[Any], ran: list[str]
) -> None:
    small, large = tool_call("pay", amount=20), tool_call("pay", amount=5000)
    inside = tool_call("write", path="/sandbox/notes.txt")
    outside = tool_call("write", path="/etc/passwd")
    loop = make_loop(tools, [assistant(small, large, inside, outside), "Paid."])

    finished = await loop.run("Pay and write")

    assert finished.pending == (large, outside)  # the sync rule and the async one
    await loop.approve(large.id)
    await loop.reject(outside.id, "not there")
    await loop.run()
    assert ran == ["pay 20", "pay 5000", "write /sandbox/notes.txt"]


async def test_a_rule_sees_the_arguments_as_the_tool_gets_them(ran: list[str]) -> None:
    @tool(needs_approval=lambda arguments: "note" in arguments)
    async def send(to: str, note: str = "") -> str:
        """Send a letter, with a note if given."""
        ran.append(to)
        return "sent"

    plain = tool_call("send", to="ada", note=None)  # a strict model's null: the default applies
    noted = tool_call("send", to="bob", note="hello")
    loop = make_loop([send], [assistant(plain, noted), "Sent."])

    assert (await loop.run("Send them")).pending == (noted,)


async def test_a_rule_that_raises_asks_a_person(
    ran: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    @tool(needs_approval=lambda arguments: arguments["missing"])
    async def launch(target: str) -> str:
        """Launch."""
        ran.append(target)
        return "launched"

    call = tool_call("launch", target="moon")
    loop = make_loop([launch], [assistant(call), "Launched."])

    assert (await loop.run("Go")).pending == (call,)
    assert "needs_approval rule of tool 'launch' raised" in caplog.text
    await loop.approve(call.id)
    assert (await loop.run()).text == "Launched."
    assert ran == ["moon"]


async def test_calls_that_cannot_run_need_no_approval(tools: list[Any], ran: list[str]) -> None:
    unknown = tool_call("shred", path="a.txt")
    malformed = ToolUseBlock("call_bad", "delete", {"_raw_arguments": '{"path": '})
    loop = make_loop(tools, [assistant(unknown, malformed), "Sorry."])

    finished = await loop.run("Shred it")

    assert finished.text == "Sorry."
    assert all(r.is_error for r in (await history(loop))[2].tool_results)
    assert ran == []


async def test_a_new_prompt_drops_the_waiting_calls_as_not_run(
    tools: list[Any], ran: list[str]
) -> None:
    delete, look = tool_call("delete", path="a.txt"), tool_call("look", path="b.txt")
    loop = make_loop(tools, [assistant(delete, look), "Nothing deleted; what now?"])
    await loop.run("Clean up")
    await loop.approve(delete.id)  # decided, then overtaken by a new message

    finished = await loop.run("Stop, leave everything as it is")

    assert finished.text == "Nothing deleted; what now?"
    assert ran == []
    stored = await history(loop)
    assert [r.tool_use_id for r in stored[2].tool_results] == [delete.id, look.id]
    assert all(str(r.content).startswith("not run") for r in stored[2].tool_results)
    assert stored[3].text == "Stop, leave everything as it is"
    assert (await loop.pending_approvals()) == []
    assert loop.agent.queue == []


# -- events and streams ------------------------------------------------------------------


async def test_the_stream_reports_each_waiting_call_then_finishes(
    tools: list[Any], ran: list[str]
) -> None:
    first, look = tool_call("delete", path="a.txt"), tool_call("look", path="b.txt")
    second = tool_call("delete", path="c.txt")
    loop = make_loop(tools, [assistant(first, look, second), "Done."])

    events = [event async for event in loop.stream("Clean up")]

    waiting = [e for e in events if isinstance(e, ToolApprovalRequired)]
    assert [(e.step, e.call) for e in waiting] == [(1, first), (1, second)]
    assert isinstance(events[-1], LoopFinished)
    assert events[-1].pending == (first, second)
    assert not any(isinstance(e, ToolCallStarted | ToolCallFinished) for e in events)

    await loop.approve(first.id)
    await loop.approve(second.id)
    events = [event async for event in loop.stream()]
    started = [e.call.id for e in events if isinstance(e, ToolCallStarted)]
    assert sorted(started) == sorted([first.id, look.id, second.id])
    assert sorted(ran) == ["delete a.txt", "delete c.txt", "look b.txt"]


async def test_deciding_while_the_stream_reports_the_call(tools: list[Any], ran: list[str]) -> None:
    delete = tool_call("delete", path="a.txt")
    loop = make_loop(tools, [assistant(delete), "Done."])

    async for event in loop.stream("Clean up"):
        if isinstance(event, ToolApprovalRequired):
            await loop.reject(event.call.id, "no")

    assert (await loop.pending_approvals()) == []
    assert (await loop.run()).text == "Done."
    assert ran == []


async def test_leaving_the_stream_at_the_request_keeps_the_calls_waiting(
    tools: list[Any], ran: list[str]
) -> None:
    delete, look = tool_call("delete", path="a.txt"), tool_call("look", path="b.txt")
    loop = make_loop(tools, [assistant(delete, look), "Done."])

    async with aclosing(loop.stream("Clean up")) as events:
        async for event in events:
            if isinstance(event, ToolApprovalRequired):
                break

    assert (await loop.pending_approvals()) == [delete]
    assert len(await history(loop)) == 2  # nothing answered as cancelled
    await loop.approve(delete.id)
    assert (await loop.run()).text == "Done."
    assert ran == ["delete a.txt", "look b.txt"]


async def test_cancelled_while_approved_calls_run_keeps_the_rejections(ran: list[str]) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool(needs_approval=True)
    async def deploy(target: str) -> str:
        """Deploy."""
        started.set()
        await release.wait()
        ran.append(target)
        return f"deployed {target}"

    slow, refused = tool_call("deploy", target="staging"), tool_call("deploy", target="prod")
    loop = make_loop([deploy], [assistant(slow, refused), "Staging only."])
    await loop.run("Deploy everywhere")
    await loop.approve(slow.id)
    await loop.reject(refused.id, "not on a Friday")

    task = asyncio.create_task(loop.run())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    answers = {r.tool_use_id: r for m in await history(loop) for r in m.tool_results}
    assert str(answers[refused.id].content).endswith("not on a Friday")
    assert str(answers[slow.id].content).startswith("cancelled")
    assert (await loop.run()).text == "Staging only."
    assert ran == []
    assert (await loop.pending_approvals()) == []


async def test_leaving_the_stream_while_approved_calls_run_keeps_every_answer(
    ran: list[str],
) -> None:
    @tool(needs_approval=True)
    async def deploy(target: str) -> str:
        """Deploy."""
        if target == "staging":
            await asyncio.sleep(30)
        ran.append(target)
        return f"deployed {target}"

    calls = [tool_call("deploy", target=t) for t in ("docs", "staging", "prod")]
    loop = make_loop([deploy], [assistant(*calls), "Docs only."])
    await loop.run("Deploy everything")
    await loop.approve(calls[0].id)
    await loop.approve(calls[1].id)
    await loop.reject(calls[2].id, "not on a Friday")

    async with aclosing(loop.stream()) as events:
        async for event in events:
            if isinstance(event, ToolCallFinished):  # the quick one: leave while staging runs
                break

    answers = {r.tool_use_id: str(r.content) for m in await history(loop) for r in m.tool_results}
    assert answers == {
        calls[0].id: "deployed docs",
        calls[1].id: answers[calls[1].id],
        calls[2].id: "rejected: a person did not approve this call: not on a Friday",
    }
    assert answers[calls[1].id].startswith("cancelled")
    assert (await loop.run()).text == "Docs only."
    assert ran == ["docs"]


# -- bad decisions -----------------------------------------------------------------------


async def test_bad_decisions_are_refused_and_change_nothing(tools: list[Any]) -> None:
    store = MemoryContextStore()
    delete, look = tool_call("delete", path="a.txt"), tool_call("look", path="b.txt")
    loop = make_loop(tools, [assistant(delete, look), "Done."], store=store)

    with pytest.raises(ApprovalError, match="no call waits now; decide after a run ends"):
        await loop.approve("call_1")
    await loop.run("Clean up")

    with pytest.raises(
        ApprovalError, match=r"no tool call 'call_nope'.*'call_\w+' \(delete\)"
    ) as error:
        await loop.approve("call_nope")
    assert (error.value.call_id, error.value.pending) == ("call_nope", (delete.id,))
    with pytest.raises(ApprovalError, match=r"\(look\) needs no approval"):
        await loop.reject(look.id, "no")
    with pytest.raises(TypeError, match="call id must be a str"):
        await loop.approve(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reason must be a str"):
        await loop.reject(delete.id, 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NUL"):
        await loop.reject(delete.id, "no\x00")
    assert await store.get_decisions() == {}

    await loop.approve(delete.id)
    await loop.approve(delete.id)  # the same decision again: nothing to do
    with pytest.raises(ApprovalError, match="already approved, and a decision is final"):
        await loop.reject(delete.id, "changed my mind")
    assert await store.get_decisions() == {delete.id: ApprovalDecision(True)}


async def test_a_call_a_newer_message_answered_cannot_be_decided(
    tools: list[Any], ran: list[str]
) -> None:
    store = MemoryContextStore(session_id="s")
    delete = tool_call("delete", path="a.txt")
    loop = make_loop(tools, [assistant(delete), "Nothing deleted."], store=store, name="stale")
    await loop.run("Delete a.txt")
    saved = loop.agent.to_json()  # still holding the waiting step
    assert (await loop.run("Never mind")).text == "Nothing deleted."
    AgentRegistry.unregister("stale")
    stale = ModelLoop(Agent.from_json(saved, context=ContextConfig(store)), ScriptedModel([]))
    before = await store.get_history()

    for decide in (stale.approve(delete.id), loop.reject(delete.id, "no")):
        with pytest.raises(ApprovalError, match=r"no longer waits.*a newer message answered it"):
            await decide
    assert await stale.pending_approvals() == []
    assert (await store.get_history(), await store.get_decisions()) == (before, {})
    assert ran == []


async def test_a_loop_made_from_the_store_alone_lists_decides_and_continues(
    tools: list[Any], ran: list[str]
) -> None:
    store = MemoryContextStore(session_id="s")
    delete, look = tool_call("delete", path="a.txt"), tool_call("look", path="b.txt")
    first = make_loop(tools, [assistant("Deleting a.txt.", delete, look)], store=store, name="a")
    stopped = await first.run("Clean up")
    assert (stopped.reason, stopped.text) == (LoopStop.APPROVAL, "Deleting a.txt.")

    # Another request: a new agent and loop over the session, nothing else kept.
    second = make_loop(tools, ["Deleted a.txt."], store=store, name="b")
    assert await second.pending_approvals() == [delete]
    await second.approve(delete.id)
    finished = await second.run()

    assert (finished.reason, finished.text) == (LoopStop.ANSWER, "Deleted a.txt.")
    assert ran == ["delete a.txt", "look b.txt"]
    assert await first.pending_approvals() == []


async def test_two_people_deciding_a_call_at_once_one_decision_is_kept(
    tools: list[Any], ran: list[str], tmp_path: Path
) -> None:
    delete = tool_call("delete", path="a.txt")
    async with connect(tmp_path / "chat.db") as conn:
        first = make_loop(
            tools, [assistant(delete)], store=SQLiteContextStore(conn, session_id="s")
        )
        await first.run("Delete a.txt")
        loops = [
            make_loop(
                tools,
                ["Done."],
                store=SQLiteContextStore(conn, session_id="s"),
                name=name,
                # the second waits for the first's lease, then sees its decision
                lease=LeasePolicy(wait=10),
            )
            for name in ("alice", "bob")
        ]
        decided = await asyncio.gather(
            loops[0].approve(delete.id),
            loops[1].reject(delete.id, "keep it"),
            return_exceptions=True,
        )
        refused = [outcome for outcome in decided if isinstance(outcome, ApprovalError)]
        assert len(refused) == 1
        assert decided.count(None) == 1
        kept = await SQLiteContextStore(conn, session_id="s").get_decisions()
        assert kept[delete.id] == (
            ApprovalDecision(True) if decided[0] is None else ApprovalDecision(False, "keep it")
        )


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_a_store_keeps_the_first_decision_on_a_call(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with AsyncExitStack() as stack:
        if backend == "memory":
            store: Any = MemoryContextStore()
        elif backend == "sqlite":
            conn = await stack.enter_async_context(connect(tmp_path / "chat.db"))
            store = SQLiteContextStore(conn, session_id="s")
        else:
            dsn = request.getfixturevalue("postgres").dsn
            conn = await stack.enter_async_context(connect_postgres(dsn))
            store = PostgresContextStore(conn, session_id=f"decisions-{tmp_path.name}")
        assert await store.get_decisions() == {}
        no = ApprovalDecision(False, "keep it")
        assert await store.record_decision("call_a", no) == no
        assert await store.record_decision("call_a", ApprovalDecision(True)) == no  # first stays
        assert await store.record_decision("call_b", ApprovalDecision(True)) == (True, None)
        assert await store.get_decisions() == {"call_a": no, "call_b": ApprovalDecision(True)}
        with pytest.raises(TypeError, match="ApprovalDecision"):
            await store.record_decision("call_c", {"approved": True})
        with pytest.raises(ValueError, match="call id must not be empty"):
            await store.record_decision("", ApprovalDecision(True))
        assert len(await store.get_decisions()) == 2


def test_needs_approval_must_be_a_bool_or_a_function() -> None:
    with pytest.raises(TypeError, match="needs_approval must be True, False or a function"):

        @tool(needs_approval="yes")  # type: ignore[call-overload]
        async def shout() -> str:
            """Shout."""
            return "!"

    @tool
    async def files() -> None:
        """Files."""

    @files.subtool(needs_approval=True)
    async def remove(path: str) -> None:
        """Remove a file."""

    assert (remove.needs_approval, files.needs_approval) == (True, False)


# -- saved and loaded ---------------------------------------------------------------------


@pytest.mark.parametrize("decided_before_saving", [True, False])
async def test_the_waiting_calls_are_saved_with_the_agent(
    tools: list[Any], ran: list[str], decided_before_saving: bool
) -> None:
    store = MemoryContextStore(session_id="s")
    delete, look = tool_call("delete", path="a.txt"), tool_call("look", path="b.txt")
    loop = make_loop(tools, [assistant(delete, look)], store=store, name="saved")
    await loop.run("Clean up")
    if decided_before_saving:
        await loop.reject(delete.id, "keep it")
    saved = loop.agent.to_json()
    AgentRegistry.unregister("saved")

    restored = ModelLoop(
        Agent.from_json(saved, context=ContextConfig(store)), ScriptedModel(["Kept it."])
    )
    assert (await restored.pending_approvals()) == ([] if decided_before_saving else [delete])
    if not decided_before_saving:
        await restored.reject(delete.id, "keep it")
    finished = await restored.run()

    assert finished.text == "Kept it."
    assert ran == ["look b.txt"]
    stored = await store.get_history()
    assert results_of(stored[2])[0] == (
        delete.id,
        "rejected: a person did not approve this call: keep it",
        True,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the worker processes keep the session: a SQLite file, or the test PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'chat.db'}"
    return f"postgres:{request.getfixturevalue('postgres').dsn}"


def run_worker(database: str, tmp_path: Path, phase: str, *decisions: str) -> dict[str, Any]:
    root = Path(pygents_ctx.__file__).parents[1]  # the child imports the package the tests do
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    session = f"cleanup-{tmp_path.name}"  # one session per test in the shared PostgreSQL
    args = [database, session, str(tmp_path / "ran.txt"), phase, *decisions]
    done = subprocess.run(
        [sys.executable, str(WORKER), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


def ran_in(tmp_path: Path) -> list[str]:
    file = tmp_path / "ran.txt"
    return file.read_text().splitlines() if file.exists() else []


def test_decided_in_one_process_and_in_the_next_with_only_the_store(
    database: str, tmp_path: Path
) -> None:
    started = run_worker(database, tmp_path, "start", "approve:call_del_a")

    assert started["reason"] == "approval"
    assert started["text"] == "Cleaning up."  # what the model wrote beside its calls
    assert started["pending"] == ["call_del_a", "call_del_b"]
    assert started["listed"] == ["call_del_b"]  # call_del_a approved, kept in the store
    assert ran_in(tmp_path) == []

    finished = run_worker(database, tmp_path, "finish", "reject:call_del_b:b.txt is still needed")

    assert (finished["reason"], finished["text"]) == ("answer", "Deleted a.txt; b.txt was kept.")
    assert finished["listed"] == []
    assert ran_in(tmp_path) == ["delete a.txt", "list_files"]
    assert finished["shown"] == [
        {"id": "call_del_a", "content": "deleted a.txt", "is_error": False},
        {"id": "call_list", "content": "a.txt b.txt", "is_error": False},
        {
            "id": "call_del_b",
            "content": "rejected: a person did not approve this call: b.txt is still needed",
            "is_error": True,
        },
    ]


def test_a_new_process_lists_the_calls_and_runs_none_twice(database: str, tmp_path: Path) -> None:
    run_worker(database, tmp_path, "start")
    listed = run_worker(
        database, tmp_path, "finish"
    )  # no decision: it stops again, running nothing

    assert (listed["reason"], listed["listed"]) == ("approval", ["call_del_a", "call_del_b"])
    assert listed["text"] == "Cleaning up."
    assert ran_in(tmp_path) == []

    run_worker(database, tmp_path, "finish", "approve:call_del_a", "approve:call_del_b")
    assert ran_in(tmp_path) == ["delete a.txt", "list_files", "delete b.txt"]


@pytest.fixture
def guarded_tool(ran: list[str]) -> Any:
    @tool(needs_approval=lambda arguments: arguments["guarded"])
    async def act(n: int, guarded: bool) -> str:
        """Act."""
        ran.append(str(n))
        return f"done {n}"

    return act


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    plan=st.lists(
        st.tuples(st.booleans(), st.sampled_from(["approve", "reject"])), min_size=1, max_size=6
    ),
    parallel=st.integers(1, 3),
)
def test_every_call_is_answered_once_in_order_and_only_approved_ones_run(
    guarded_tool: Any, ran: list[str], plan: list[tuple[bool, str]], parallel: int
) -> None:
    ran.clear()
    calls = [tool_call("act", n=n, guarded=guarded) for n, (guarded, _) in enumerate(plan)]

    async def scenario() -> list[Message]:
        loop = make_loop(
            [guarded_tool], [assistant(*calls), "Done."], tool_policy=ToolPolicy(parallel=parallel)
        )
        AgentRegistry.unregister(loop.agent.name)  # each example makes its own
        first = await loop.run("Act")
        guarded = [call for call, (needs, _) in zip(calls, plan, strict=True) if needs]
        if guarded:
            assert first.pending == tuple(guarded)
            assert ran == []
        for call, (needs, decision) in zip(calls, plan, strict=True):
            if needs:
                (
                    await loop.approve(call.id)
                    if decision == "approve"
                    else await loop.reject(call.id)
                )
        assert (await loop.run()).text == "Done."
        return await history(loop)

    stored = asyncio.run(scenario())

    assert [r.tool_use_id for r in stored[2].tool_results] == [call.id for call in calls]
    should_run = [
        str(n) for n, (needs, decision) in enumerate(plan) if not needs or decision == "approve"
    ]
    assert sorted(ran) == should_run
    for result, (needs, decision) in zip(stored[2].tool_results, plan, strict=True):
        assert result.is_error == (needs and decision == "reject")
    assert len(stored) == 4


# -- through the official SDK ------------------------------------------------------------


async def test_openai_a_rejected_call_goes_back_as_its_tool_message(
    api: FakeAPI, openai_model: OpenAIModel, tools: list[Any], ran: list[str]
) -> None:
    api.script(
        json_reply(
            chat_completion(
                None,
                [
                    ("call_1", "delete", '{"path": "a.txt"}'),
                    ("call_2", "look", '{"path": "b.txt"}'),
                ],
            )
        ),
        json_reply(chat_completion("I left a.txt alone.")),
    )
    agent = Agent("janitor", "Cleans", tools, context=ContextConfig(MemoryContextStore()))
    loop = ModelLoop(agent, openai_model)

    first = await loop.run("Delete a.txt")
    assert [call.id for call in first.pending] == ["call_1"]
    assert len(api.requests) == 1

    await loop.reject("call_1", "a.txt is the only copy")
    finished = await loop.run()

    assert finished.text == "I left a.txt alone."
    assert ran == ["look b.txt"]
    sent = [m for m in api.requests[1].body["messages"] if m["role"] == "tool"]
    assert sent == [
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "Error: rejected: a person did not approve this call: "
            "a.txt is the only copy",
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "b.txt is there"},
    ]


async def test_anthropic_streamed_calls_wait_then_go_back_as_one_user_turn(
    api: FakeAPI, anthropic_model: AnthropicModel, tools: list[Any], ran: list[str]
) -> None:
    api.script(
        sse_reply(
            message_events(
                ("text", ["Paying ", "both."]),
                ("tool_use", ("toolu_1", "pay", ['{"amount": ', "9000}"])),
                ("tool_use", ("toolu_2", "pay", ['{"amount": 12}'])),
            )
        ),
        json_reply(message(text_block("Paid 9000 and 12."))),
    )
    agent = Agent("payer", "Pays", tools, context=ContextConfig(MemoryContextStore()))
    loop = ModelLoop(agent, anthropic_model)

    events = [event async for event in loop.stream("Pay the two bills")]
    assert [e.call.id for e in events if isinstance(e, ToolApprovalRequired)] == ["toolu_1"]
    assert ran == []

    await loop.approve("toolu_1")
    finished = await loop.run()

    assert finished.text == "Paid 9000 and 12."
    assert ran == ["pay 9000", "pay 12"]
    sent = api.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert [(r["tool_use_id"], r["content"]) for r in sent[2]["content"]] == [
        ("toolu_1", "paid 9000"),
        ("toolu_2", "paid 12"),
    ]
