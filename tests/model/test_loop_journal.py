"""The step journal: a resumed run never repeats a finished tool call, and labels a started one.

A call the journal holds as finished is answered with its kept result, one it
holds as started (and not finished) with `INTERRUPTED`; only a call that never
started runs again (a resumed run) or is answered `NOT_RUN` (a new message).
Each call's tool can ask for an `IdempotencyKey`: the session id and the call id.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    ContextConfig,
    HookRegistry,
    IdempotencyKey,
    MemoryContextStore,
    Message,
    ModelLoop,
    ToolResultBlock,
    TurnHook,
    hook,
    tool,
)
from pygents_ctx.context.stores import ContextStore, SQLiteContextStore, connect
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.model._tool_calls import INTERRUPTED, NOT_RUN
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

RAN: list[str] = []


@pytest.fixture
def charge() -> Any:
    """The tool (made in each test: the registries are reset for each)."""

    @tool
    async def charge(order: str, key: IdempotencyKey) -> str:
        """Charge an order."""
        RAN.append(key)
        return f"charged {order}"

    return charge


def loop_on(store: ContextStore, script: list[Any], charge: Any) -> ModelLoop:
    agent = Agent("journal", "charges", [charge], context=ContextConfig(store), replace=True)
    return ModelLoop(agent, ScriptedModel(script))


async def results_of(store: ContextStore) -> dict[str, ToolResultBlock]:
    return {r.tool_use_id: r for m in await store.get_history() for r in m.tool_results}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[ContextStore]:
    if request.param == "memory":
        yield MemoryContextStore()
    elif request.param == "sqlite":
        async with connect(tmp_path / "journal.db") as conn:
            yield SQLiteContextStore(conn)
    else:
        async with connect_postgres(request.getfixturevalue("postgres").dsn) as pg:
            yield PostgresContextStore(pg)


async def test_the_journal_keeps_the_first_start_and_the_first_result(store: ContextStore) -> None:
    await store.journal_start("a")
    await store.journal_start("a")
    await store.journal_finish("b", ToolResultBlock("b", "first"))
    await store.journal_finish("b", ToolResultBlock("b", "second"))
    await store.journal_start("b")
    assert await store.get_journal(["a", "b", "c"]) == {
        "a": None,
        "b": ToolResultBlock("b", "first"),
    }


async def test_bad_journal_input_is_refused_before_anything_is_written(store: ContextStore) -> None:
    with pytest.raises(TypeError, match="tool call id must be a str"):
        await store.journal_start(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="call id must not be empty"):
        await store.journal_start("")
    with pytest.raises(TypeError, match="ToolResultBlock"):
        await store.journal_finish("a", "done")  # type: ignore[arg-type]
    assert await store.get_journal(["a"]) == {}
    # Reading checks the ids too: one str is not a list of them, and no store holds these.
    with pytest.raises(TypeError, match="call_ids must be a collection of strings"):
        await store.get_journal("a")
    with pytest.raises(ValueError, match="call id must not be empty"):
        await store.get_journal(["a", ""])
    with pytest.raises(ValueError, match=r"call id .* holds a lone surrogate"):
        await store.get_journal(["a\ud800"])


async def crashed_reply(store: ContextStore, states: list[str]) -> list[str]:
    """A stored reply of calls, journaled as a crashed run left them: their ids."""
    calls = [tool_call("charge", order=f"o{i}") for i in range(len(states))]
    await store.append(Message("user", "charge them"))
    await store.append(assistant(*calls))
    for call, state in zip(calls, states, strict=True):
        if state in ("started", "finished"):
            await store.journal_start(call.id)
        if state == "finished":
            await store.journal_finish(call.id, ToolResultBlock(call.id, f"kept {call.id}"))
    return [call.id for call in calls]


async def test_a_resumed_run_labels_started_calls_and_runs_only_the_others(
    store: ContextStore, charge: Any
) -> None:
    ids = await crashed_reply(store, ["started", "finished", "never"])
    RAN.clear()
    await loop_on(store, ["done"], charge).run()
    results = await results_of(store)
    assert results[ids[0]] == ToolResultBlock(ids[0], INTERRUPTED, is_error=True)
    assert results[ids[1]].content == f"kept {ids[1]}"
    assert results[ids[2]].content == "charged o2"
    assert [f"{store.session_id}:{ids[2]}"] == RAN  # the key: session id and call id
    journal = await store.get_journal(ids)
    assert journal[ids[2]] == results[ids[2]]  # recorded as it ran


async def test_a_new_message_says_not_run_only_for_calls_that_never_started(
    store: ContextStore, charge: Any
) -> None:
    ids = await crashed_reply(store, ["started", "finished", "never"])
    RAN.clear()
    await loop_on(store, ["ok"], charge).run("never mind")
    results = await results_of(store)
    assert results[ids[0]].content == INTERRUPTED
    assert results[ids[1]].content == f"kept {ids[1]}"
    assert results[ids[2]].content == NOT_RUN
    assert RAN == []


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    states=st.lists(st.sampled_from(["never", "started", "finished"]), min_size=1, max_size=5),
    prompt=st.booleans(),
)
def test_each_call_runs_at_most_once_and_is_labelled_by_what_it_did(
    states: list[str], prompt: bool, charge: Any
) -> None:
    async def scenario() -> None:
        store = MemoryContextStore()
        ids = await crashed_reply(store, states)
        RAN.clear()
        loop = loop_on(store, ["ok"], charge)
        await (loop.run("something else") if prompt else loop.run())
        results = await results_of(store)
        for call_id, state in zip(ids, states, strict=True):
            expected = {
                "started": INTERRUPTED,
                "finished": f"kept {call_id}",
                "never": NOT_RUN if prompt else "charged",
            }[state]
            assert str(results[call_id].content).startswith(expected)
        ran = [f"{store.session_id}:{i}" for i, s in zip(ids, states, strict=True) if s == "never"]
        assert ([] if prompt else ran) == RAN

    asyncio.run(scenario())


async def test_a_run_records_each_call_started_and_finished(charge: Any) -> None:
    store = MemoryContextStore()
    call = tool_call("charge", order="o1")
    await loop_on(store, [assistant(call), "charged"], charge).run("charge o1")
    assert await store.get_journal([call.id]) == {call.id: ToolResultBlock(call.id, "charged o1")}


def test_the_key_is_left_out_of_the_tool_schema(charge: Any) -> None:
    assert charge.metadata.input_schema["required"] == ["order"]
    assert "key" not in charge.metadata.input_schema["properties"]


async def test_a_tool_called_outside_a_model_loop_needs_its_key(charge: Any) -> None:
    with pytest.raises(TypeError, match=r"needs an IdempotencyKey for parameter 'key'.*key=\.\.\."):
        await charge(order="o1")
    assert await charge(order="o1", key=IdempotencyKey("mine")) == "charged o1"

    @tool
    async def maybe(key: IdempotencyKey | None = None) -> str:
        """Tell the key."""
        return repr(key)

    assert await maybe() == "None"


def test_an_idempotency_key_on_a_hook_is_refused_naming_the_fix() -> None:
    with pytest.raises(TypeError, match=r"hook 'audit'.*'key'.*only a tool.*@tool"):

        @hook(TurnHook.BEFORE_RUN)
        async def audit(key: IdempotencyKey) -> None:
            """Audit."""

    with pytest.raises(KeyError):  # refused before it was registered
        HookRegistry.get("audit")
