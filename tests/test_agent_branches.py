"""Branches for sub-tasks: unique names, release, merge back, and their own transcript."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentRegistry,
    AgentScope,
    BranchMerge,
    ContextConfig,
    ContextItem,
    ContextPool,
    HistoryRetention,
    MemoryContextStore,
    Message,
    ModelLoop,
    PostgresContextStore,
    SafeExecutionError,
    SQLiteContextStore,
    Turn,
    UnregisteredAgentError,
    Usage,
    connect,
    connect_postgres,
    tool,
)
from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.testing import ScriptedModel, assistant, tool_call


@pytest.fixture
def note() -> Any:
    @tool
    async def note(text: str) -> ContextItem[str]:
        return ContextItem(content=text)

    return note


@pytest.fixture
def keep() -> Any:
    @tool
    async def keep(key: str, text: str) -> ContextItem[str]:
        return ContextItem(content=text, description=f"about {key}", id=key)

    return keep


async def drain(agent: Agent) -> list[Any]:
    return [value async for _, value in agent.run()]


# -- names and release ---------------------------------------------------------------------


def test_a_branch_without_a_name_is_numbered_under_its_parent() -> None:
    parent = Agent("lead", "d", [])
    first, second = parent.branch(), parent.branch()
    grandchild = first.branch()

    assert [first.name, second.name, grandchild.name] == ["lead/1", "lead/2", "lead/1/1"]
    assert AgentRegistry.get("lead/2") is second


def test_numbering_skips_names_already_taken() -> None:
    parent = Agent("lead", "d", [])
    squatter = Agent("lead/1", "took the name first", [])

    child = parent.branch()

    assert child.name == "lead/2"
    assert AgentRegistry.get("lead/1") is squatter


def test_a_branch_nobody_references_gives_its_name_up() -> None:
    parent = Agent("lead", "d", [])
    parent.branch("scout")
    gc.collect()

    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("scout")
    assert parent.branch("scout").name == "scout"  # free again


async def test_async_with_releases_the_branch_name_on_exit(note: Any) -> None:
    parent = Agent("lead", "d", [note])

    async with parent.branch() as sub:
        assert AgentRegistry.get("lead/1") is sub
        await sub.put(Turn(note, kwargs={"text": "x"}))
        await drain(sub)

    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("lead/1")
    assert [item.content for item in sub.context_queue] == ["x"]  # still usable


async def test_async_with_releases_the_name_when_the_block_raises() -> None:
    parent = Agent("lead", "d", [])
    with pytest.raises(RuntimeError, match="boom"):
        async with parent.branch("sub"):
            raise RuntimeError("boom")

    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("sub")


async def test_a_colliding_branch_name_is_refused_and_nothing_changes(note: Any) -> None:
    parent = Agent("lead", "d", [note])
    taken = Agent("taken", "d", [])
    await parent.put(Turn(note, kwargs={"text": "queued"}))

    with pytest.raises(ValueError, match="'taken' already registered"):
        parent.branch("taken")

    assert AgentRegistry.get("taken") is taken
    assert [t.kwargs for t in parent.turns] == [{"text": "queued"}]
    assert parent.branch().name == "lead/1"  # no number was used up


def test_branches_of_a_scoped_agent_are_the_scope_s() -> None:
    with AgentScope():
        parent = Agent("lead", "d", [])
        child = parent.branch()
        assert AgentRegistry.get("lead/1") is child
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("lead/1")


# -- merge ---------------------------------------------------------------------------------


async def test_merge_brings_back_new_pool_and_queue_items_with_the_parent_hooks_firing(
    note: Any, keep: Any
) -> None:
    parent = Agent("lead", "d", [note, keep])
    await parent.put(Turn(keep, kwargs={"key": "old", "text": "before"}))
    await parent.put(Turn(note, kwargs={"text": "brief"}))
    await drain(parent)
    events: list[tuple[str, Any]] = []

    @parent.context_pool.after_add
    async def added(pool: ContextPool[Any], item: ContextItem[Any]) -> None:
        events.append(("add", item.id))

    @parent.context_queue.after_append
    async def appended(items: list[Any], current: list[Any]) -> None:
        events.append(("append", [item.content for item in items]))

    async with parent.branch(hooks=None) as sub:
        sub.context_pool.hooks = []
        sub.context_queue.hooks = []
        for turn in (
            Turn(keep, kwargs={"key": "new", "text": "found"}),
            Turn(keep, kwargs={"key": "old", "text": "revised"}),
            Turn(note, kwargs={"text": "step 1"}),
            Turn(note, kwargs={"text": "step 2"}),
        ):
            await sub.put(turn)
        await drain(sub)
        assert events == []  # the branch's work did not reach the parent
        merged = await parent.merge(sub)

    assert merged == BranchMerge(
        pool_ids=("old", "new"), queue_items=tuple(merged.queue_items), usage=(), kept=()
    )
    assert [item.content for item in merged.queue_items] == ["step 1", "step 2"]
    assert {item.id: item.content for item in parent.context_pool} == {
        "old": "revised",
        "new": "found",
    }
    assert [item.content for item in parent.context_queue] == ["brief", "step 1", "step 2"]
    assert events == [("add", "old"), ("add", "new"), ("append", ["step 1", "step 2"])]


async def test_merge_leaves_out_what_the_branch_did_not_change(keep: Any) -> None:
    parent = Agent("lead", "d", [keep])
    await parent.put(Turn(keep, kwargs={"key": "a", "text": "1"}))
    await drain(parent)
    sub = parent.branch()

    merged = await parent.merge(sub)

    assert merged == BranchMerge()
    assert len(parent.context_pool) == 1


async def _conflicting(keep: Any) -> tuple[Agent, Agent]:
    parent = Agent("lead", "d", [keep])
    sub = parent.branch()
    await sub.put(Turn(keep, kwargs={"key": "plan", "text": "the branch's"}))
    await sub.put(Turn(keep, kwargs={"key": "extra", "text": "only the branch's"}))
    await drain(sub)
    await parent.put(Turn(keep, kwargs={"key": "plan", "text": "the parent's"}))
    await drain(parent)
    return parent, sub


async def test_an_id_both_sides_set_refuses_the_merge_and_nothing_changes(keep: Any) -> None:
    parent, sub = await _conflicting(keep)

    with pytest.raises(ValueError, match=r"\['plan'\].*on_conflict='branch'"):
        await parent.merge(sub)

    assert {item.id: item.content for item in parent.context_pool} == {"plan": "the parent's"}
    assert (await parent.merge(sub, on_conflict="parent")).kept == ("plan",)  # not merged yet


async def test_on_conflict_branch_takes_the_branch_items(keep: Any) -> None:
    parent, sub = await _conflicting(keep)

    merged = await parent.merge(sub, on_conflict="branch")

    assert merged.pool_ids == ("plan", "extra")
    assert parent.context_pool.get("plan").content == "the branch's"


async def test_on_conflict_parent_keeps_the_parent_items(keep: Any) -> None:
    parent, sub = await _conflicting(keep)

    merged = await parent.merge(sub, on_conflict="parent")

    assert merged.pool_ids == ("extra",)
    assert merged.kept == ("plan",)
    assert parent.context_pool.get("plan").content == "the parent's"
    assert parent.context_pool.get("extra").content == "only the branch's"


async def test_bad_merges_are_refused_and_change_nothing(note: Any) -> None:
    parent = Agent("lead", "d", [note])
    other = Agent("other", "d", [note])
    stranger = Agent("stranger", "d", [note])
    cousin = other.branch()
    sub = parent.branch()
    await sub.put(Turn(note, kwargs={"text": "x"}))
    await drain(sub)

    with pytest.raises(ValueError, match=r"not a branch of agent 'lead'.*not made by lead.branch"):
        await parent.merge(stranger)
    with pytest.raises(ValueError, match="branch of another agent"):
        await parent.merge(cousin)
    with pytest.raises(ValueError, match="on_conflict must be one of"):
        await parent.merge(sub, on_conflict="newest")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a branch"):
        await parent.merge("lead/1")  # type: ignore[arg-type]
    assert len(parent.context_queue) == 0

    await parent.merge(sub)
    with pytest.raises(ValueError, match="merged into agent 'lead' already"):
        await parent.merge(sub)
    assert [item.content for item in parent.context_queue] == ["x"]


async def test_a_running_branch_cannot_be_merged() -> None:
    gate = asyncio.Event()

    @tool
    async def wait() -> str:
        await gate.wait()
        return "done"

    parent = Agent("lead", "d", [wait])
    sub = parent.branch()
    await sub.put(Turn(wait))
    runner = asyncio.create_task(drain(sub))
    await asyncio.sleep(0.01)

    with pytest.raises(SafeExecutionError, match="is running"):
        await parent.merge(sub)
    gate.set()
    assert await runner == ["done"]
    await parent.merge(sub)


# -- a branch's own transcript ---------------------------------------------------------------


async def _talked(context: ContextConfig) -> Agent:
    parent = Agent("lead", "leads", [], context=context)
    loop = ModelLoop(parent, ScriptedModel(["Hello."]))
    await loop.run("Hi")
    return parent


async def test_a_model_loop_runs_on_a_branch_in_one_step() -> None:
    parent = await _talked(ContextConfig(MemoryContextStore()))
    assert parent.context is not None
    parent_store = parent.context.store

    sub = parent.branch()
    finished = await ModelLoop(sub, ScriptedModel(["Sub answer."])).run("Sub task")

    assert finished.text == "Sub answer."
    assert sub.context is not None
    assert [m.text for m in await sub.context.store.get_history()] == [
        "Hi",
        "Hello.",
        "Sub task",
        "Sub answer.",
    ]
    assert [m.text for m in await parent_store.get_history()] == ["Hi", "Hello."]

    merged = await parent.merge(sub)

    # The branch's call is reported and stays counted in its own session, as its messages.
    assert len(merged.usage) == 1
    assert len(await parent_store.get_usage()) == 1
    assert await sub.context.store.get_usage() == list(merged.usage)
    assert merged.queue_items == ()
    assert [m.text for m in await parent_store.get_history()] == ["Hi", "Hello."]


@pytest.fixture(params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A connection to a real database of each backend (PostgreSQL: the test server's)."""
    if request.param == "sqlite":
        async with connect(tmp_path / "db.sqlite") as conn:
            yield conn
    else:
        server = request.getfixturevalue("postgres")
        async with connect_postgres(server.dsn) as conn:
            await conn.run(lambda db: db.execute("DELETE FROM pygents_sessions"))
            yield conn


def _store(conn: Any, session_id: str) -> Any:
    if isinstance(conn, PostgresConnection):
        return PostgresContextStore(conn, session_id=session_id)
    return SQLiteContextStore(conn, session_id=session_id)


async def test_sub_agents_run_at_once_in_a_database_and_merge_their_results(
    database: Any,
) -> None:
    @tool
    async def report(topic: str, finding: str) -> ContextItem[str]:
        """Keep a finding."""
        return ContextItem(content=finding, description=f"finding on {topic}", id=topic)

    store = _store(database, "main")
    parent = Agent("lead", "leads", [report], context=ContextConfig(store))
    await ModelLoop(parent, ScriptedModel(["Ready."])).run("Compare suppliers")

    async def sub_task(topic: str) -> BranchMerge:
        async with parent.branch() as sub:
            model = ScriptedModel(
                [assistant(tool_call("report", topic=topic, finding=f"{topic} is fine")), "Done"]
            )
            await ModelLoop(sub, model).run(f"Look into {topic}")
            assert sub.context is not None
            assert type(sub.context.store) is type(store)  # a fork in the same database
            return await parent.merge(sub)

    merges = await asyncio.gather(*(sub_task(t) for t in ("acme", "globex", "initech")))

    assert sorted(item.id for item in parent.context_pool) == ["acme", "globex", "initech"]
    assert [len(m.usage) for m in merges] == [2, 2, 2]
    assert len(await store.get_usage()) == 1  # each call counts in the session that made it
    own = sum((r.usage for r in await store.get_usage()), Usage())
    assert await store.get_context_tokens() == (own.input_tokens, own.output_tokens)
    assert [m.text for m in await store.get_history()] == ["Compare suppliers", "Ready."]
    infos = await store.list_sessions()
    assert len(infos) == 4  # each sub-agent kept its own transcript
    # Adding up every session's spend counts each of the 7 calls once.
    spent = sum((r.usage for m in merges for r in m.usage), own)
    assert sum(info.input_tokens for info in infos) == spent.input_tokens
    assert sum(info.output_tokens for info in infos) == spent.output_tokens


async def test_entering_the_branch_forks_the_transcript_then() -> None:
    parent = await _talked(ContextConfig(MemoryContextStore()))
    assert parent.context is not None

    async with parent.branch() as sub:
        await parent.context.record(Message("user", "after the fork"), "r")
        assert sub.context is not None
        assert [m.text for m in await sub.context.history()] == ["Hi", "Hello."]


def test_a_branch_store_is_unreadable_before_its_fork_and_says_how() -> None:
    parent = Agent("lead", "d", [], context=ContextConfig(MemoryContextStore()))
    sub = parent.branch()
    assert sub.context is not None

    with pytest.raises(RuntimeError, match=r"await context.ready\(\)"):
        _ = sub.context.store
    assert sub.to_dict()["context"]["session_id"] == sub.context.session_id


async def test_a_branch_of_a_branch_forks_through_its_parent() -> None:
    parent = await _talked(ContextConfig(MemoryContextStore()))
    child = parent.branch()
    grandchild = child.branch()

    await ModelLoop(grandchild, ScriptedModel(["Deep."])).run("Go deep")

    assert grandchild.context is not None
    assert child.context is not None
    assert [m.text for m in await grandchild.context.history()] == [
        "Hi",
        "Hello.",
        "Go deep",
        "Deep.",
    ]
    assert [m.text for m in await child.context.history()] == ["Hi", "Hello."]


async def test_a_branch_of_an_unsaved_conversation_copies_it() -> None:
    parent = await _talked(ContextConfig(MemoryContextStore(), retention=HistoryRetention.NONE))
    sub = parent.branch()
    await ModelLoop(sub, ScriptedModel(["Sub."])).run("More")

    assert parent.context is not None
    assert sub.context is not None
    assert [m.text for m in await parent.context.history()] == ["Hi", "Hello."]
    assert [m.text for m in await sub.context.history()] == ["Hi", "Hello.", "More", "Sub."]


async def test_a_tool_of_a_running_loop_runs_sub_agents_on_branches_at_once() -> None:
    """The sub-agent pattern: the parent's model calls a tool twice in one reply; each call
    runs a ModelLoop on its own branch and merges its result back while the parent runs."""

    @tool
    async def report(topic: str, finding: str) -> ContextItem[str]:
        """Report a finding."""
        return ContextItem(content=finding, description=f"finding on {topic}", id=topic)

    @tool
    async def research(topic: str) -> str:
        """Research a topic with a sub-agent."""
        async with parent.branch(tools=[report]) as sub:
            model = ScriptedModel(
                [assistant(tool_call("report", topic=topic, finding=f"{topic} ok")), f"{topic}: ok"]
            )
            finished = await ModelLoop(sub, model).run(f"Research {topic}")
            merges.append(await parent.merge(sub))
            return finished.text

    merges: list[BranchMerge] = []
    parent = Agent("lead", "leads", [research], context=ContextConfig(MemoryContextStore()))
    model = ScriptedModel(
        [
            assistant(tool_call("research", topic="acme"), tool_call("research", topic="globex")),
            "Both are fine.",
        ]
    )
    finished = await ModelLoop(parent, model).run("Compare acme and globex")

    assert finished.text == "Both are fine."
    assert sorted(item.content for item in parent.context_pool) == ["acme ok", "globex ok"]
    assert parent.context is not None
    history = await parent.context.store.get_history()
    results = [block.content for m in history for block in m.tool_results]
    assert sorted(map(str, results)) == ["acme: ok", "globex: ok"]
    # Each call counts once, in the session that made it: the branches' in their forks.
    assert len(await parent.context.store.get_usage()) == 2
    assert [len(merged.usage) for merged in merges] == [2, 2]
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("lead/1")


async def test_a_branch_refused_for_its_tools_uses_no_number(note: Any) -> None:
    parent = Agent("lead", "d", [note])
    await parent.put(Turn(note, kwargs={"text": "queued"}))

    with pytest.raises(ValueError, match="pending turn for tool 'note'"):
        parent.branch(tools=[])

    assert parent.branch().name == "lead/1"


async def test_two_merges_of_one_branch_at_once_merge_it_once(note: Any, tmp_path: Path) -> None:
    async with connect(tmp_path / "db.sqlite") as conn:  # its reads really wait
        store = SQLiteContextStore(conn, session_id="main")
        parent = Agent("lead", "d", [note], context=ContextConfig(store))
        async with parent.branch() as sub:  # forked: a merge reads its usage
            await sub.put(Turn(note, kwargs={"text": "once"}))
            await drain(sub)

            outcomes = await asyncio.gather(
                parent.merge(sub), parent.merge(sub), return_exceptions=True
            )

    assert sum(isinstance(o, BranchMerge) for o in outcomes) == 1
    assert sum(isinstance(o, ValueError) for o in outcomes) == 1
    assert [item.content for item in parent.context_queue] == ["once"]
