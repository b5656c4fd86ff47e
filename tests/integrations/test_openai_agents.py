"""`ContextStoreSession` against the OpenAI Agents SDK's own `SQLiteSession`, and under `Runner`.

The same operations run on the SDK's session and on ours (over each of our
stores) and must give the same results; then the real `Runner` keeps a
conversation in ours against the strict local Responses API server.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIResponsesModel, Runner, function_tool
from agents.memory import SQLiteSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import Message
from pygents_ctx.context.messages import ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores import MemoryContextStore, SQLiteContextStore, connect
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.context.strategies import FitTokens
from pygents_ctx.integrations.openai_agents import (
    ContextStoreSession,
    item_message,
    message_items,
)
from tests import postgres_server
from tests.model.fake_api import json_reply
from tests.model.fake_responses import FakeResponsesAPI, call_item, message_item, response

# Items as the SDK stores them: every kind a run produces, with the fields the API sends.
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "developer", "content": "Answer in one sentence."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and Rome?"}]},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "this one"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "low",
            },
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Look the weather up."}],
        "encrypted_content": "gAAAAB...",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "18 C and sunny"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is 18 C and sunny.", "annotations": []}],
    },
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "rome"},
    },
    {"type": "custom_tool_call", "call_id": "call_2", "name": "patch", "input": "*** Begin Patch"},
    {"type": "custom_tool_call_output", "call_id": "call_2", "output": "applied"},
    {"type": "item_reference", "id": "msg_0"},
    {"role": "assistant", "content": "Anything else?"},
]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def ours(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[str], ContextStoreSession]]:
    """`ours(session_id)`: a `ContextStoreSession` over the backend under test."""
    if request.param == "memory":
        yield lambda session_id: ContextStoreSession(MemoryContextStore(session_id=session_id))
    elif request.param == "sqlite":
        async with connect(tmp_path / "ours.db") as conn:
            yield lambda session_id: ContextStoreSession(
                SQLiteContextStore(conn, session_id=session_id)
            )
    else:
        server: postgres_server.PostgresServer = request.getfixturevalue("postgres")
        async with connect_postgres(server.dsn) as conn:
            await conn.run(lambda db: db.execute("DELETE FROM pygents_sessions"))
            yield lambda session_id: ContextStoreSession(
                PostgresContextStore(conn, session_id=session_id)
            )


def theirs(tmp_path: Path, session_id: str = "s") -> SQLiteSession:
    return SQLiteSession(session_id, tmp_path / "theirs.db")


async def both(sessions: list[Any], operation: Callable[[Any], Any]) -> list[Any]:
    return [await operation(session) for session in sessions]


def test_every_item_kind_comes_back_exactly_through_its_message() -> None:
    for item in ITEMS:
        message = item_message(copy.deepcopy(item))
        assert message_items(message) == [item]


def test_items_become_the_messages_a_model_reads() -> None:
    call, output = (item_message(item) for item in ITEMS[5:7])
    assert call.role == "assistant"
    assert call.content == (ToolUseBlock("call_1", "weather", {"city": "Paris"}),)
    assert output.role == "user"
    assert output.content == (ToolResultBlock("call_1", "18 C and sunny"),)
    assert item_message(ITEMS[1]).role == "system"  # developer
    assert item_message(ITEMS[4]).content[0].thinking == "Look the weather up."  # type: ignore[union-attr]
    # Only what the message cannot say is kept beside it.
    assert item_message(ITEMS[0]).metadata is None
    assert item_message(ITEMS[6]).metadata is None
    assert item_message(ITEMS[5]).metadata == {"openai_agents_item": ITEMS[5]}


async def test_the_same_operations_give_the_same_results_as_sqlite_session(
    ours: Callable[[str], ContextStoreSession], tmp_path: Path
) -> None:
    sessions = [theirs(tmp_path), ours("s")]
    results: list[list[Any]] = [[], []]

    async def record(operation: Callable[[Any], Any]) -> None:
        for index, value in enumerate(await both(sessions, operation)):
            results[index].append(value)

    await record(lambda s: s.get_items())
    await record(lambda s: s.pop_item())
    await record(lambda s: s.add_items(copy.deepcopy(ITEMS)))
    for limit in (None, 0, 1, 3, len(ITEMS), 100):
        await record(lambda s, limit=limit: s.get_items(limit))
    await record(lambda s: s.pop_item())
    await record(lambda s: s.pop_item())
    await record(lambda s: s.get_items(2))
    await record(lambda s: s.add_items([]))
    await record(lambda s: s.add_items(copy.deepcopy(ITEMS[:2])))
    await record(lambda s: s.get_items())
    await record(lambda s: s.clear_session())
    await record(lambda s: s.get_items())
    await record(lambda s: s.pop_item())
    await record(lambda s: s.add_items([{"role": "user", "content": "again"}]))
    await record(lambda s: s.get_items())
    assert results[1] == results[0]
    sessions[0].close()


async def test_sessions_are_kept_apart_and_settings_give_the_limit(
    ours: Callable[[str], ContextStoreSession],
) -> None:
    first, second = ours("a"), ours("b")
    await first.add_items(copy.deepcopy(ITEMS[:3]))
    await second.add_items(copy.deepcopy(ITEMS[3:4]))
    assert await first.get_items() == ITEMS[:3]
    assert await second.get_items() == ITEMS[3:4]
    limited = ContextStoreSession(first.store, session_settings={"limit": 2})
    assert await limited.get_items() == ITEMS[1:3]
    assert await limited.get_items(limit=1) == ITEMS[2:3]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.lists(st.sampled_from(range(len(ITEMS))), max_size=4)),
            st.tuples(st.just("get"), st.one_of(st.none(), st.integers(0, 8))),
            st.tuples(st.just("pop"), st.none()),
            st.tuples(st.just("clear"), st.none()),
        ),
        max_size=15,
    )
)
async def test_any_sequence_of_operations_agrees_with_sqlite_session(
    tmp_path: Path, operations: list[tuple[str, Any]]
) -> None:
    path = tmp_path / f"theirs-{id(operations)}.db"
    reference = SQLiteSession("s", path)
    session = ContextStoreSession(MemoryContextStore(session_id="s"))
    try:
        for kind, argument in operations:
            for target in (reference, session):
                if kind == "add":
                    await target.add_items([copy.deepcopy(ITEMS[i]) for i in argument])
            if kind == "get":
                assert await session.get_items(argument) == await reference.get_items(argument)
            elif kind == "pop":
                assert await session.pop_item() == await reference.pop_item()
            elif kind == "clear":
                await session.clear_session()
                await reference.clear_session()
        assert await session.get_items() == await reference.get_items()
    finally:
        reference.close()
        path.unlink(missing_ok=True)


async def test_bad_input_is_refused_and_adds_nothing() -> None:
    session = ContextStoreSession(MemoryContextStore(session_id="s"))
    await session.add_items([{"role": "user", "content": "kept"}])
    bad: list[tuple[Any, type[Exception], str]] = [
        ({"role": "user", "content": "hi"}, TypeError, "list of items"),
        ([{"role": "user", "content": "ok"}, "text"], TypeError, r"items\[1\] must be a dict"),
        ([{"role": "tool", "content": "x"}], ValueError, "role 'tool'"),
        ([{"content": "x"}], ValueError, "role None"),
        ([{"type": "function_call_output", "output": "x"}], ValueError, "call_id"),
        ([{"role": "user", "content": {1, 2}}], TypeError, "JSON cannot hold"),
    ]
    for items, error, message in bad:
        with pytest.raises(error, match=message):
            await session.add_items(items)
    assert await session.get_items() == [{"role": "user", "content": "kept"}]
    with pytest.raises(ValueError, match="at least 0"):
        await session.get_items(-1)
    with pytest.raises(TypeError, match="ContextStore"):
        ContextStoreSession("chat.db")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="context strategy"):
        ContextStoreSession(session.store, window=16_000)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"window must be a strategy instance.*FitTokens\(\.\.\.\)"):
        ContextStoreSession(session.store, window=FitTokens)  # type: ignore[arg-type]


async def test_a_window_is_pair_safe_and_the_store_keeps_everything() -> None:
    store = MemoryContextStore(session_id="s")
    session = ContextStoreSession(store, window=FitTokens(200))
    long = "word " * 60
    for turn in range(6):
        await session.add_items(
            [
                {"role": "user", "content": f"question {turn} {long}"},
                {"type": "function_call", "call_id": f"c{turn}", "name": "look", "arguments": "{}"},
                {"type": "function_call_output", "call_id": f"c{turn}", "output": long},
                {"role": "assistant", "content": f"answer {turn}"},
            ]
        )
    items = await session.get_items()
    assert items[-1] == {"role": "assistant", "content": "answer 5"}
    assert 0 < len(items) < 24
    calls = {item["call_id"] for item in items if item.get("type") == "function_call"}
    outputs = {item["call_id"] for item in items if item.get("type") == "function_call_output"}
    assert calls == outputs
    assert await store.count() == 24


async def test_messages_of_other_writers_are_given_as_responses_items() -> None:
    store = MemoryContextStore(session_id="s")
    await store.append_many(
        [
            Message("system", "Summary of the earlier conversation: the user lives in Paris."),
            Message("assistant", [ToolUseBlock("c1", "weather", {"city": "Paris"})]),
            Message("user", [ToolResultBlock("c1", "sunny")]),
        ]
    )
    assert await ContextStoreSession(store).get_items() == [
        {
            "role": "system",
            "content": "Summary of the earlier conversation: the user lives in Paris.",
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]


async def test_runner_keeps_a_conversation_in_our_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openai import AsyncOpenAI

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    api = await FakeResponsesAPI().start()

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"18 C in {city}"

    client = AsyncOpenAI(base_url=api.url, api_key="test", max_retries=0)
    agent = Agent(
        name="Assistant",
        instructions="Be brief.",
        tools=[weather],
        model=OpenAIResponsesModel(model="gpt-test", openai_client=client),
    )
    api.script(
        json_reply(response(call_item("call_1", "weather", '{"city": "Paris"}'))),
        json_reply(response(message_item("18 C in Paris.", "msg_1"))),
        json_reply(response(message_item("You asked about Paris.", "msg_2"))),
    )
    try:
        async with connect(tmp_path / "chat.db") as conn:
            session = ContextStoreSession(SQLiteContextStore(conn, session_id="user-42"))
            first = await Runner.run(agent, "Weather in Paris?", session=session)
            assert first.final_output == "18 C in Paris."
            # A new process would make a new store: the transcript is in the database.
            again = ContextStoreSession(SQLiteContextStore(conn, session_id="user-42"))
            second = await Runner.run(agent, "What did I ask?", session=again)
            assert second.final_output == "You asked about Paris."
            history = await again.store.get_history()
    finally:
        await api.close()
    assert not api.refused
    sent = api.requests[-1].body["input"]
    kinds = [item.get("type", item.get("role")) for item in sent]
    assert kinds == ["user", "function_call", "function_call_output", "message", "user"]
    assert [item.get("call_id") for item in sent[1:3]] == ["call_1", "call_1"]
    # Ours, typed: the viewer, the strategies and the search read these.
    assert [message.role for message in history] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert history[1].content == (ToolUseBlock("call_1", "weather", {"city": "Paris"}),)
    assert history[2].content == (ToolResultBlock("call_1", "18 C in Paris"),)
