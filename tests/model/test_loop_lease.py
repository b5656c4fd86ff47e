"""ModelLoop holds its session's lease for each run: one run per session at a time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from pygents_ctx import (
    Agent,
    ContextConfig,
    LeaseLostError,
    LeasePolicy,
    Message,
    ModelLoop,
    SessionBusyError,
    tool,
)
from pygents_ctx.context.stores import SQLiteConnection, SQLiteContextStore, connect
from pygents_ctx.context.stores._lease_sql import LeaseState
from pygents_ctx.testing import ScriptedModel, assistant, tool_call


@pytest.fixture
async def conn() -> AsyncIterator[SQLiteConnection]:
    async with connect(":memory:") as conn:
        yield conn


def loop_on(
    conn: SQLiteConnection,
    name: str,
    model: ScriptedModel,
    session: str = "chat",
    **options: object,
) -> ModelLoop:
    """A loop for a new agent on `session`: as a second request handler would make one."""
    store = SQLiteContextStore(conn, session_id=session)
    agent = Agent(name, "answers", [], context=ContextConfig(store))
    return ModelLoop(agent, model, **options)  # type: ignore[arg-type]


class Gate:
    """A model reply that waits until the test opens the gate."""

    def __init__(self, text: str) -> None:
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()
        self.text = text

    async def __call__(self, messages: list[Message]) -> str:
        self.entered.set()
        await self.opened.wait()
        return self.text


async def history(conn: SQLiteConnection, session: str = "chat") -> list[str]:
    return [m.text for m in await SQLiteContextStore(conn, session_id=session).get_history()]


async def test_a_double_submit_is_refused_at_once_and_changes_nothing(
    conn: SQLiteConnection,
) -> None:
    gate = Gate("first answer")
    first = loop_on(conn, "first", ScriptedModel([gate]))
    second = loop_on(conn, "second", ScriptedModel(["second answer"]))
    running = asyncio.create_task(first.run("first question"))
    await gate.entered.wait()

    with pytest.raises(SessionBusyError) as caught:
        await second.run("second question")
    assert caught.value.session_id == "chat"
    assert "ModelLoop(lease=LeasePolicy(wait=seconds))" in str(caught.value)
    assert not second.agent.queue  # nothing was queued for the refused run
    assert await history(conn) == ["first question"]

    gate.opened.set()
    assert (await running).text == "first answer"
    assert (await second.run("second question")).text == "second answer"  # free again
    assert await history(conn) == [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ]


async def test_with_a_lease_wait_the_second_run_waits_its_turn(conn: SQLiteConnection) -> None:
    gate = Gate("first answer")
    first = loop_on(conn, "first", ScriptedModel([gate]))
    second = loop_on(conn, "second", ScriptedModel(["second answer"]), lease=LeasePolicy(wait=10))
    running = asyncio.create_task(first.run("first question"))
    await gate.entered.wait()
    waiting = asyncio.create_task(second.run("second question"))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    gate.opened.set()
    await running
    assert (await asyncio.wait_for(waiting, 5)).text == "second answer"
    assert await history(conn) == [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ]


async def test_a_loop_on_a_new_session_id_creates_the_session(conn: SQLiteConnection) -> None:
    loop = loop_on(conn, "fresh", ScriptedModel(["hello"]), session="never-seen")
    assert (await loop.run("hi")).text == "hello"
    assert await history(conn, "never-seen") == ["hi", "hello"]


async def test_the_lease_is_given_back_however_the_run_ends(conn: SQLiteConnection) -> None:
    store = SQLiteContextStore(conn, session_id="chat")

    async def free() -> bool:
        try:
            await store.lease().release()
            await (await store.lease().acquire()).release()
        except SessionBusyError:
            return False
        return True

    failing = loop_on(conn, "failing", ScriptedModel([ValueError("the model broke")]))
    with pytest.raises(ValueError, match="the model broke"):
        await failing.run("hi")
    assert await free()

    streamed = loop_on(conn, "streamed", ScriptedModel(["a long answer"], chunk_delay=0.01))
    async with contextlib.aclosing(streamed.stream("tell me")) as events:
        async for _ in events:
            break  # the reader stops early
    assert await free()

    gate = Gate("never")
    cancelled = loop_on(conn, "cancelled", ScriptedModel([gate]))
    task = asyncio.create_task(cancelled.run("and now?"))
    await gate.entered.wait()
    assert not await free()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await free()


async def test_lease_false_lets_runs_overlap_as_before(conn: SQLiteConnection) -> None:
    gate = Gate("first answer")
    first = loop_on(conn, "first", ScriptedModel([gate]), lease=None)
    second = loop_on(conn, "second", ScriptedModel(["second answer"]), lease=None)
    running = asyncio.create_task(first.run("first question"))
    await gate.entered.wait()
    assert (await second.run("second question")).text == "second answer"
    gate.opened.set()
    await running


async def test_a_run_that_loses_its_lease_stops_before_its_next_step(
    conn: SQLiteConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[int] = []

    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        ran.append(a + b)
        return a + b

    async def slow_call(messages: list[Message]) -> Message:
        await asyncio.sleep(0.5)  # longer than the lease lasts without renewal
        return assistant(tool_call("add", a=2, b=3))

    store = SQLiteContextStore(conn, session_id="chat")
    agent = Agent("stalled", "adds", [add], context=ContextConfig(store))
    loop = ModelLoop(agent, ScriptedModel([slow_call, "5"]), lease=LeasePolicy(ttl=0.2))

    async def unreachable(owner: str, token: int, ttl: float) -> None:
        raise ConnectionError("the database is unreachable")

    monkeypatch.setattr(store, "_renew_lease", unreachable)
    with pytest.raises(LeaseLostError, match="could not be renewed"):
        await loop.run("what is 2 + 3?")
    assert ran == []  # the tool call after the loss never ran


async def test_a_run_whose_lease_is_taken_over_mid_tool_writes_nothing_more(
    conn: SQLiteConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker stalled in a tool past the ttl: its result would land in the new holder's run."""
    in_tool, wake = asyncio.Event(), asyncio.Event()

    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        in_tool.set()
        await wake.wait()
        return a + b

    store = SQLiteContextStore(conn, session_id="chat")
    agent = Agent("stalled-in-tool", "adds", [add], context=ContextConfig(store))
    model = ScriptedModel([assistant(tool_call("add", a=2, b=3)), "5"])
    loop = ModelLoop(agent, model, lease=LeasePolicy(ttl=0.2))
    stalled = asyncio.Event()
    renew = store._renew_lease

    async def stalled_renewal(owner: str, token: int, ttl: float) -> LeaseState | None:
        await stalled.wait()  # as a frozen process: no renewal reaches the store
        return await renew(owner, token, ttl)

    monkeypatch.setattr(store, "_renew_lease", stalled_renewal)
    running = asyncio.create_task(loop.run("what is 2 + 3?"))
    await in_tool.wait()
    await asyncio.sleep(0.3)  # the lease runs out
    successor = loop_on(conn, "successor", ScriptedModel(["a new answer"]))
    assert (await successor.run("hello again")).text == "a new answer"
    taken_over = await history(conn)
    stalled.set()  # the process wakes: its renewal, and the tool, go on
    wake.set()

    with pytest.raises(LeaseLostError, match="took"):
        await running
    assert await history(conn) == taken_over
    assert taken_over[-2:] == ["hello again", "a new answer"]


@pytest.mark.parametrize(
    ("options", "error", "field"),
    [
        ({"ttl": 0}, ValueError, "LeasePolicy.ttl"),
        ({"ttl": "30"}, TypeError, "LeasePolicy.ttl"),
        ({"wait": -1}, ValueError, "LeasePolicy.wait"),
        ({"wait": True}, ValueError, "LeasePolicy.wait"),
    ],
)
def test_bad_lease_options_are_refused_naming_the_field(
    options: dict[str, object], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field):
        LeasePolicy(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize("lease", ["yes", True, False])
def test_a_lease_that_is_not_a_policy_is_refused_with_the_fix(lease: object) -> None:
    agent = Agent("checked", "answers", [], context=ContextConfig.default())
    with pytest.raises(TypeError, match=r"lease must be a LeasePolicy .*or None"):
        ModelLoop(agent, ScriptedModel([]), lease=lease)  # type: ignore[arg-type]
    assert LeasePolicy(wait=False).wait == 0.0  # False waits not at all, as for the store
