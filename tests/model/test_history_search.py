"""The `search_history` tool: a model loop gets back what compaction archived."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pygents_ctx import (
    SEARCH_HISTORY_LIMIT,
    Agent,
    AutoCompactStore,
    ContextConfig,
    HistoryRetention,
    MemoryContextStore,
    Message,
    ModelLoop,
    SlidingWindow,
    ToolPolicy,
    ToolRegistry,
    search_history,
    to_openai_tools,
    tool,
)
from pygents_ctx.testing import ScriptedModel, ScriptedSummarizer, assistant, tool_call


def found_texts(hits: list[Any]) -> list[str]:
    return [hit.message.text for hit in hits]


def chat(count: int) -> list[Message]:
    return [
        Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "small talk " * 10)
        for i in range(count)
    ]


def test_the_model_sees_query_and_limit_only() -> None:
    [definition] = to_openai_tools([search_history])
    function = definition["function"]

    assert function["name"] == "search_history"
    assert set(function["parameters"]["properties"]) == {"query", "limit"}
    assert function["parameters"]["required"] == ["query"]
    assert "earlier messages" in function["description"]


async def test_a_model_loop_finds_what_compaction_archived() -> None:
    history = chat(20)
    history[3] = Message("assistant", "The locker code is 5521-B. " + "small talk " * 10)
    store = AutoCompactStore(
        MemoryContextStore(history), ScriptedSummarizer(["We chatted."]), keep_recent=4
    )
    assert await store.compact() is True
    agent = Agent(
        "recaller", "Recalls", [search_history], context=ContextConfig(store, SlidingWindow(6))
    )
    model = ScriptedModel(
        [assistant(tool_call("search_history", query="locker code", limit=3)), "It is 5521-B."]
    )

    finished = await ModelLoop(agent, model).run("What was the locker code?")

    assert finished.text == "It is 5521-B."
    # The model read the tool's result: the archived message, with where it is.
    shown = model.calls[1].messages[-1].tool_results[0]
    hits = json.loads(shown.text)["search_history"]
    assert len(hits) == 2  # the question, and the fact
    [fact] = [hit for hit in hits if hit["text"].startswith("The locker code is 5521-B.")]
    assert fact["archived"] is True
    assert isinstance(fact["id"], int)
    assert set(fact) == {"id", "position", "archived", "role", "text"}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"query": "  "}, "empty"),
        ({"query": "x" * 1_001}, "MAX_SEARCH_QUERY"),
        ({"query": "code", "limit": 0}, "limit"),
        ({"query": "code", "limit": SEARCH_HISTORY_LIMIT + 1}, "limit"),
    ],
)
async def test_bad_arguments_come_back_to_the_model_as_an_error(
    arguments: dict[str, Any], problem: str
) -> None:
    store = MemoryContextStore([Message("user", "the code is 1")])
    agent = Agent("searcher", "Searches", [search_history], context=ContextConfig(store))
    model = ScriptedModel([assistant(tool_call("search_history", **arguments)), "ok"])

    await ModelLoop(agent, model).run("go")

    result = model.calls[1].messages[-1].tool_results[0]
    assert result.is_error
    assert problem in result.text


async def test_a_long_hit_is_cut_for_the_model() -> None:
    store = MemoryContextStore([Message("user", "needle " + "hay " * 2_000)])

    [hit] = (await search_history("needle", context=ContextConfig(store)))["search_history"]

    assert len(hit["text"]) == 2_000
    assert hit["truncated"] is True


async def test_the_model_s_own_searches_are_left_out_of_the_hits() -> None:
    store = MemoryContextStore([Message("user", "The locker code is 5521-B.")])
    agent = Agent("searcher", "Searches", [search_history], context=ContextConfig(store))
    model = ScriptedModel(
        [
            assistant(tool_call("search_history", query="locker code")),
            assistant(tool_call("search_history", query="locker code again")),
            "done",
        ]
    )
    await ModelLoop(agent, model).run("What is the locker code?")

    second = json.loads(model.calls[2].messages[-1].tool_results[0].text)["search_history"]
    assert sorted(hit["text"] for hit in second) == [
        "The locker code is 5521-B.",
        "What is the locker code?",
    ]
    # The store has them all: only the tool leaves them out.
    assert len(await store.search("locker")) == 5


async def test_without_a_context_store_it_says_how_to_give_one() -> None:
    with pytest.raises(ValueError, match="context=ContextConfig"):
        await search_history("anything")
    config = ContextConfig(MemoryContextStore(), retention=HistoryRetention.NONE)
    with pytest.raises(ValueError, match=r"HistoryRetention\.NONE"):
        await search_history("anything", context=config)


async def test_a_branch_searches_its_own_fork() -> None:
    store = MemoryContextStore([Message("user", "parent knows the pin 8080")])
    agent = Agent("parent", "Searches", [search_history], context=ContextConfig(store))
    async with agent.branch() as branch:
        await (await branch.context.ready()).append(Message("user", "branch pin 9090"))  # type: ignore[union-attr]
        model = ScriptedModel([assistant(tool_call("search_history", query="pin")), "ok"])
        await ModelLoop(branch, model).run("pins?")
        hits = json.loads(model.calls[1].messages[-1].tool_results[0].text)["search_history"]

    assert {"parent knows the pin 8080", "branch pin 9090"} <= {hit["text"] for hit in hits}
    assert found_texts(await store.search("pin")) == ["parent knows the pin 8080"]


async def test_a_tool_of_your_own_receives_the_agent_context() -> None:
    store = MemoryContextStore([Message("user", "hello")])
    config = ContextConfig(store)
    seen: list[ContextConfig | None] = []

    @tool
    async def count_messages(context: ContextConfig | None = None) -> int:
        """Count the conversation's messages."""
        seen.append(context)
        return 0 if context is None else await (await context.ready()).count()

    agent = Agent("counter", "Counts", [count_messages], context=config)
    model = ScriptedModel([assistant(tool_call("count_messages")), "done"])
    await ModelLoop(agent, model).run("how many?")

    assert seen == [config]
    assert ToolRegistry.get("search_history") is search_history


# -- offered by the loop while the window leaves something out ---------------------------


async def test_the_loop_offers_it_once_the_window_leaves_messages_out() -> None:
    history = chat(4)
    history[1] = Message("assistant", "The locker code is 5521-B.")
    agent = Agent(
        "helper", "Helps", [], context=ContextConfig(MemoryContextStore(history), SlidingWindow(6))
    )
    model = ScriptedModel(
        [
            "Hello again.",  # 5 messages then: the whole conversation fits
            assistant(tool_call("search_history", query="locker code")),  # 7: one left out
            "It is 5521-B.",
        ]
    )
    loop = ModelLoop(agent, model)

    await loop.run("Hi")
    finished = await loop.run("What was the locker code?")

    assert finished.text == "It is 5521-B."
    assert [call.tools for call in model.calls] == [(), ("search_history",), ("search_history",)]
    result = model.calls[2].messages[-1].tool_results[0].text
    assert "The locker code is 5521-B." in result  # found, though the window no longer held it


@pytest.mark.parametrize(
    ("policy", "offered"),
    [(None, ("search_history",)), (ToolPolicy(search_history=False), ())],
)
async def test_after_a_compaction_it_is_offered_unless_the_policy_says_never(
    policy: ToolPolicy | None, offered: tuple[str, ...]
) -> None:
    store = AutoCompactStore(
        MemoryContextStore(chat(12)), ScriptedSummarizer(["We chatted."]), keep_recent=4
    )
    assert await store.compact() is True  # the live history fits; the archive holds the rest
    model = ScriptedModel(["Sure."])
    agent = Agent("helper", "Helps", [], context=ContextConfig(store))

    await ModelLoop(agent, model, tool_policy=policy).run("Go on")

    assert model.calls[0].tools == offered


async def test_not_offered_without_a_kept_history_nor_twice() -> None:
    store = MemoryContextStore(chat(12))
    unsaved = ContextConfig(store, SlidingWindow(4), retention=HistoryRetention.NONE)
    model = ScriptedModel(["Sure."])
    await ModelLoop(Agent("unsaved", "Helps", [], context=unsaved), model).run("Go on")
    assert model.calls[0].tools == ()  # nothing kept to search

    own = Agent("own", "Helps", [search_history], context=ContextConfig(store, SlidingWindow(4)))
    model = ScriptedModel(["Sure."])
    await ModelLoop(own, model).run("Go on")
    assert model.calls[0].tools == ("search_history",)  # the agent's own, listed once


def test_the_search_history_policy_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match=r"ToolPolicy.search_history must be a bool"):
        ToolPolicy(search_history="yes")  # type: ignore[arg-type]
