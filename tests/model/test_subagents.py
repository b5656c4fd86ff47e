"""A ModelLoop as a tool of another loop's model: sub-agents on branches, several at once."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentScope,
    ContextConfig,
    ContextItem,
    ContextPool,
    LoopStop,
    MemoryContextStore,
    ModelLoop,
    ModelResponse,
    SQLiteContextStore,
    SubagentError,
    Tool,
    ToolCallFinished,
    ToolRegistry,
    Usage,
    connect,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call


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
    usage = await sub.agent.context.store.get_usage()
    assert len(usage) == 4  # two model calls per sub-agent, merged back


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
    research = researcher(looping, max_steps=1).as_tool("research", "Find out one fact")
    main = lead(ScriptedModel([assistant(tool_call("research", task="?")), "Sorry."]), research)

    events = [event async for event in main.stream("Find it")]

    (result,) = [e.result for e in events if isinstance(e, ToolCallFinished)]
    assert result.is_error
    assert result.text.startswith("SubagentError: the sub-agent 'research' stopped without")
    assert "max_steps" in result.text
    assert events[-1].text == "Sorry."


async def test_called_directly_a_failed_sub_agent_raises() -> None:
    research = researcher(
        ScriptedModel([assistant(tool_call("note", id="a", text="x"))]), max_steps=1
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
        usage = await store.get_usage()
        assert sum((record.usage for record in usage), Usage()).output_tokens > 0
        assert len(usage) == 2


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
