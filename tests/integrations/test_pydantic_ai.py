"""pydantic-ai conversations in our stores, and our strategies as its history processor.

Runs the real pydantic-ai `Agent` with its own test models (`TestModel` calls
every tool; `FunctionModel` answers with a function that also records what
the model was sent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from pygents_ctx import Message
from pygents_ctx.context.messages import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.context.strategies import ClearToolResults, FitTokens
from pygents_ctx.integrations.pydantic_ai import ContextStoreHistory, history_window
from tests import postgres_server

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def weather(city: str) -> str:
    """The weather in a city."""
    return f"18 C in {city}"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ContextStore]:
    if request.param == "memory":
        yield MemoryContextStore(session_id="user-42")
    elif request.param == "sqlite":
        async with connect(tmp_path / "chat.db") as conn:
            yield SQLiteContextStore(conn, session_id="user-42")
    else:
        server: postgres_server.PostgresServer = request.getfixturevalue("postgres")
        async with connect_postgres(server.dsn) as conn:
            await conn.run(lambda db: db.execute("DELETE FROM pygents_sessions"))
            yield PostgresContextStore(conn, session_id="user-42")


async def test_a_conversation_round_trips_exactly_and_goes_on(store: ContextStore) -> None:
    agent = Agent(TestModel(), tools=[weather], instructions="Be brief.")
    history = ContextStoreHistory(store)
    first = await history.run(agent, "Weather in Paris?")
    assert await history.load() == first.all_messages()
    second = await history.run(agent, "And tomorrow?")
    assert await history.load() == second.all_messages()
    assert second.all_messages()[:4] == first.all_messages()
    assert len(second.new_messages()) >= 2
    # Typed for everything else that reads the store: a call and its return, paired.
    stored = await store.get_history()
    assert [message.role for message in stored[:4]] == ["user", "assistant", "user", "assistant"]
    (call,) = stored[1].content
    (result,) = stored[2].content
    assert isinstance(call, ToolUseBlock)
    assert call.name == "weather"
    assert isinstance(result, ToolResultBlock)
    assert result.tool_use_id == call.id
    assert result.text.startswith("18 C in")


async def test_every_kind_of_part_is_kept_exactly(store: ContextStore) -> None:
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                SystemPromptPart("You are terse."),
                UserPromptPart(["Look at this", BinaryContent(PNG, media_type="image/png")]),
            ]
        ),
        ModelResponse(
            parts=[
                ThinkingPart("The user wants the weather.", signature="sig-1"),
                TextPart("Checking."),
                ToolCallPart("weather", '{"city": "Paris"}', "call_1"),
            ],
            model_name="m",
        ),
        ModelRequest(parts=[ToolReturnPart("weather", {"c": 18, "sky": "clear"}, "call_1")]),
        ModelResponse(parts=[TextPart("18 C, clear.")]),
    ]
    history = ContextStoreHistory(store)
    await history.add(messages)
    # As lossless as pydantic-ai's own persistence (which reads an image back as a BinaryImage).
    own = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
    assert await history.load() == own
    assert own[1:] == messages[1:]
    stored = await store.get_history()
    assert stored[0].content[0] == TextBlock("You are terse.")
    assert isinstance(stored[0].content[2], ImageBlock)
    assert stored[1].content[2] == ToolUseBlock("call_1", "weather", {"city": "Paris"})
    assert stored[2].content == (ToolResultBlock("call_1", '{"c":18,"sky":"clear"}'),)


async def test_messages_of_other_writers_load_as_requests_and_responses() -> None:
    store = MemoryContextStore(session_id="s")
    await store.append_many(
        [
            Message("system", "Summary so far: the user lives in Paris."),
            Message("assistant", [ToolUseBlock("c1", "weather", {"city": "Paris"})]),
            Message("user", [ToolResultBlock("c1", "sunny")]),
            Message("assistant", "It is sunny."),
        ]
    )
    loaded = await ContextStoreHistory(store).load()
    assert [type(message).__name__ for message in loaded] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    assert isinstance(loaded[0].parts[0], SystemPromptPart)
    returned = loaded[2].parts[0]
    assert isinstance(returned, ToolReturnPart)
    assert (returned.tool_name, returned.tool_call_id, returned.content) == (
        "weather",
        "c1",
        "sunny",
    )
    agent = Agent(TestModel(custom_output_text="ok"))
    result = await agent.run("go on", message_history=loaded)
    assert result.output == "ok"


def recording_model(seen: list[list[ModelMessage]]) -> FunctionModel:
    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(answer)


def long_conversation(turns: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for turn in range(turns):
        messages += [
            ModelRequest(parts=[UserPromptPart(f"question {turn} " + "word " * 40)]),
            ModelResponse(parts=[ToolCallPart("look", {"turn": turn}, f"c{turn}")]),
            ModelRequest(parts=[ToolReturnPart("look", "result " * 60, f"c{turn}")]),
            ModelResponse(parts=[TextPart(f"answer {turn}")]),
        ]
    return messages


async def test_a_budget_window_is_pair_safe_and_keeps_the_store_whole() -> None:
    history = ContextStoreHistory(MemoryContextStore(session_id="s"))
    await history.add(long_conversation(10))
    seen: list[list[ModelMessage]] = []
    agent = Agent(
        recording_model(seen), capabilities=[ProcessHistory(history_window(FitTokens(400)))]
    )
    await history.run(agent, "last question")
    sent = seen[-1]
    assert len(sent) < 41
    assert isinstance(sent[-1], ModelRequest)
    assert sent[-1].parts[-1].content == "last question"  # type: ignore[union-attr]
    calls = {p.tool_call_id for m in sent for p in m.parts if isinstance(p, ToolCallPart)}
    returns = {p.tool_call_id for m in sent for p in m.parts if isinstance(p, ToolReturnPart)}
    assert calls == returns
    assert await history.store.count() == 42


async def test_cleared_tool_results_are_sent_with_the_rest_of_their_message() -> None:
    seen: list[list[ModelMessage]] = []
    window = history_window(ClearToolResults(keep_recent=1))
    agent = Agent(recording_model(seen), capabilities=[ProcessHistory(window)])
    await agent.run("next", message_history=long_conversation(3))
    sent = seen[-1]
    returns = [p for m in sent for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [p.tool_call_id for p in returns] == ["c0", "c1", "c2"]
    assert returns[0].content != "result " * 60
    assert returns[0].tool_name == "look"
    assert returns[-1].content == "result " * 60


async def test_fork_is_one_call_and_branches_go_their_own_way(store: ContextStore) -> None:
    agent = Agent(TestModel(custom_output_text="ok"))
    history = ContextStoreHistory(store)
    await history.run(agent, "start")
    branch = await history.fork(session_id="user-42-b")
    await branch.run(agent, "only on the branch")
    assert len(await history.load()) == 2
    assert len(await branch.load()) == 4


async def test_bad_input_is_refused_and_adds_nothing() -> None:
    history = ContextStoreHistory(MemoryContextStore(session_id="s"))
    await history.add([ModelRequest(parts=[UserPromptPart("kept")])])
    bad: list[Any] = [
        ModelRequest(parts=[UserPromptPart("one")]),
        [ModelRequest(parts=[UserPromptPart("ok")]), {"kind": "request"}],
    ]
    with pytest.raises(TypeError, match="list of pydantic-ai messages"):
        await history.add(bad[0])
    with pytest.raises(TypeError, match=r"messages\[1\] must be a pydantic-ai ModelRequest"):
        await history.add(bad[1])
    assert await history.store.count() == 1
    with pytest.raises(TypeError, match="ContextStore"):
        ContextStoreHistory("chat.db")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="context strategy"):
        history_window(16_000)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message_history"):
        await history.run(Agent(TestModel()), "x", message_history=[])
