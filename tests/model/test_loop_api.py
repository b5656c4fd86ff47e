"""ModelLoop through the official SDKs against the scripted local server: the whole path."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AnthropicModel,
    ContextConfig,
    FitTokens,
    LoopFinished,
    LoopLimits,
    MemoryContextStore,
    Message,
    Model,
    ModelAPIError,
    ModelLoop,
    ModelRetry,
    OpenAIModel,
    RetryPolicy,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    count_tokens,
    tool,
)

from .fake_api import (
    FakeAPI,
    Reply,
    anthropic_error,
    chat_chunks,
    chat_completion,
    json_reply,
    message,
    message_events,
    openai_error,
    sse_reply,
    text_block,
    tool_use_block,
)


@pytest.fixture
def library() -> list[Any]:
    @tool
    async def search(query: str) -> str:
        """Search the library."""
        return f"2 documents about {query}"

    @tool
    async def fetch(doc_id: str) -> str:
        """Fetch a document."""
        if doc_id == "missing":
            raise KeyError(doc_id)
        return f"the text of {doc_id}"

    return [search, fetch]


def loop_for(model: Model, tools: list[Any], **options: Any) -> ModelLoop:
    agent = Agent(
        "researcher",
        "Researches",
        tools,
        context=ContextConfig(MemoryContextStore(), options.pop("strategy", None)),
    )
    return ModelLoop(agent, model, **options)


def tool_messages(api: FakeAPI, request: int) -> list[dict[str, Any]]:
    return [m for m in api.requests[request].body["messages"] if m["role"] == "tool"]


async def test_openai_single_call_then_answer(
    api: FakeAPI, openai_model: OpenAIModel, library: list[Any]
) -> None:
    api.script(
        json_reply(
            chat_completion(None, [("call_1", "search", '{"query": "tides"}')], usage=(50, 9))
        ),
        json_reply(chat_completion("Tides come from the Moon.", usage=(80, 7, 48))),
    )
    loop = loop_for(openai_model, library, instructions="Cite the library.")

    finished = await loop.run("What causes tides?")

    assert finished.text == "Tides come from the Moon."
    assert (finished.steps, finished.usage.input_tokens, finished.usage.cached_tokens) == (
        2,
        130,
        48,
    )
    second = api.requests[1].body["messages"]
    assert second[0] == {"role": "system", "content": "Cite the library."}
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "2 documents about tides",
    }
    assert [t["function"]["name"] for t in api.requests[0].body["tools"]] == ["search", "fetch"]


async def test_openai_parallel_calls_malformed_arguments_and_failures(
    api: FakeAPI, openai_model: OpenAIModel, library: list[Any]
) -> None:
    calls = [
        ("call_1", "fetch", '{"doc_id": "a"}'),
        ("call_2", "fetch", '{"doc_id": "missing"}'),
        ("call_3", "fetch", '{"doc_id": '),
        ("call_4", "summon", "{}"),
    ]
    api.script(json_reply(chat_completion(None, calls)), json_reply(chat_completion("Done.")))
    loop = loop_for(openai_model, library)

    await loop.run("Fetch them.")

    answers = {m["tool_call_id"]: m["content"] for m in tool_messages(api, 1)}
    assert list(answers) == ["call_1", "call_2", "call_3", "call_4"]  # the calls' order
    assert answers["call_1"] == "the text of a"
    assert answers["call_2"] == "Error: KeyError: 'missing'"
    assert answers["call_3"].startswith("Error: the arguments are not a JSON object")
    assert answers["call_4"] == "Error: there is no tool 'summon'; the tools are: fetch, search"
    # The malformed call goes back to the API as the text the model wrote.
    sent_back = api.requests[1].body["messages"][1]["tool_calls"][2]["function"]["arguments"]
    assert json.loads(sent_back) == {"_raw_arguments": '{"doc_id": '}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_streaming_events_through_each_sdk(
    api: FakeAPI,
    openai_model: OpenAIModel,
    anthropic_model: AnthropicModel,
    library: list[Any],
    provider: str,
) -> None:
    if provider == "openai":
        model: Model = openai_model
        api.script(
            sse_reply(
                chat_chunks(["Let me ", "search."], [("c1", "search", ['{"query"', ': "x"}'])])
            ),
            sse_reply(chat_chunks(["Found ", "two."])),
        )
    else:
        model = anthropic_model
        api.script(
            sse_reply(
                message_events(
                    ("text", ["Let me ", "search."]),
                    ("tool_use", ("c1", "search", ['{"query"', ': "x"}'])),
                )
            ),
            sse_reply(message_events(("text", ["Found ", "two."]))),
        )
    loop = loop_for(model, library)

    events = [event async for event in loop.stream("Search x")]

    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["Let me ", "search.", "Found ", "two."]
    [finished_call] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished_call.result.content == "2 documents about x"
    assert isinstance(events[-1], LoopFinished)
    assert events[-1].text == "Found two."
    assert all(request.body["stream"] is True for request in api.requests)


async def test_a_429_is_retried_after_the_wait_it_asked_for(
    api: FakeAPI, openai_model: OpenAIModel, library: list[Any]
) -> None:
    api.script(
        openai_error(429, "slow down", "rate_limit_exceeded", retry_after_ms="150"),
        sse_reply(chat_chunks(["Fine."])),
    )
    loop = loop_for(openai_model, library)

    began = time.monotonic()
    events = [event async for event in loop.stream("hi")]
    waited = time.monotonic() - began

    [retry] = [e for e in events if isinstance(e, ModelRetry)]
    assert (retry.attempt, retry.delay, retry.error.status_code) == (1, 0.15, 429)
    assert waited >= 0.15
    assert isinstance(events[-1], LoopFinished)
    assert events[-1].text == "Fine."
    assert len(api.requests) == 2


async def test_a_retry_after_in_seconds_is_honoured(
    api: FakeAPI, anthropic_model: AnthropicModel, library: list[Any]
) -> None:
    api.script(
        anthropic_error(429, "rate_limit_error", retry_after="1"),
        json_reply(message(text_block("Fine."))),
    )
    loop = loop_for(anthropic_model, library)

    began = time.monotonic()
    finished = await loop.run("hi")

    assert finished.text == "Fine."
    assert time.monotonic() - began >= 1.0


async def test_server_errors_and_timeouts_are_retried_with_backoff(
    api: FakeAPI, library: list[Any]
) -> None:
    model = OpenAIModel("gpt-test", base_url=f"{api.url}/v1", api_key="k", timeout=0.3)
    api.script(
        openai_error(500, "internal"),
        Reply(delay=2.0, body=chat_completion("too late")),
        Reply(drop=True),
        sse_reply(chat_chunks(["Made it."])),
    )
    policy = RetryPolicy(max_attempts=4, initial_delay=0.01, jitter=0.5)
    loop = loop_for(model, library, retry=policy)

    events = [event async for event in loop.stream("hi")]

    retries = [e for e in events if isinstance(e, ModelRetry)]
    assert [r.attempt for r in retries] == [1, 2, 3]
    assert [r.error.status_code for r in retries] == [500, None, None]
    assert all(0.005 <= r.delay <= 0.01 * 2 ** (r.attempt - 1) for r in retries)
    assert isinstance(events[-1], LoopFinished)
    assert events[-1].text == "Made it."


async def test_a_refused_request_is_not_retried(
    api: FakeAPI, anthropic_model: AnthropicModel, library: list[Any]
) -> None:
    api.script(anthropic_error(400, "invalid_request_error", "messages: bad"))
    loop = loop_for(anthropic_model, library)

    with pytest.raises(ModelAPIError) as refused:
        await loop.run("hi")

    assert len(api.requests) == 1
    # One "HTTP 400", then the API's own message: not the SDK's "Error code: 400 - {...}".
    assert str(refused.value) == "Anthropic: HTTP 400: messages: bad"


async def test_cancelled_while_the_server_thinks_then_resumed(
    api: FakeAPI, openai_model: OpenAIModel, library: list[Any]
) -> None:
    held = asyncio.Event()
    api.script(
        Reply(hold=held, body=chat_completion("never sent")), json_reply(chat_completion("Now."))
    )
    loop = loop_for(openai_model, library)

    task = asyncio.create_task(loop.run("hi"))
    await api.received.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    held.set()

    assert loop.agent.context is not None
    assert await loop.agent.context.history() == [Message("user", "hi")]
    assert (await loop.run()).text == "Now."


async def test_cancelled_mid_stream_keeps_no_half_reply(
    api: FakeAPI, anthropic_model: AnthropicModel, library: list[Any]
) -> None:
    api.script(
        sse_reply(message_events(("text", ["one ", "two ", "three"])), gap=0.2),
        json_reply(message(text_block("Complete."))),
    )
    loop = loop_for(anthropic_model, library)
    first_piece = asyncio.Event()

    async def read() -> None:
        async for event in loop.stream("count"):
            if isinstance(event, TextDelta):
                first_piece.set()

    task = asyncio.create_task(read())
    await first_piece.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert loop.agent.context is not None
    assert await loop.agent.context.history() == [Message("user", "count")]
    assert (await loop.run()).text == "Complete."


async def test_fifty_steps_with_the_window_under_budget(
    api: FakeAPI, openai_model: OpenAIModel, library: list[Any]
) -> None:
    budget = 300
    for step in range(49):
        arguments = json.dumps({"query": f"topic {step} " + "detail " * 10})
        call = (f"call_{step}", "search", [arguments])
        api.script(sse_reply(chat_chunks([f"Step {step}."], [call])))
    api.script(sse_reply(chat_chunks(["All fifty steps done."])))
    loop = loop_for(
        openai_model, library, strategy=FitTokens(budget), limits=LoopLimits(max_steps=50)
    )

    events = [event async for event in loop.stream("Research fifty topics.")]

    windows = [e.window for e in events if isinstance(e, StepStarted)]
    assert len(windows) == len(api.requests) == 50
    assert all(w.tokens <= budget for w in windows)
    assert all(count_tokens(w.messages) <= budget for w in windows)
    assert max(len(w.messages) for w in windows) < 20  # older rounds left out
    assert windows[-1].messages[0] == Message("user", "Research fifty topics.")  # kept first
    assert isinstance(events[-1], LoopFinished)
    assert events[-1].text == "All fifty steps done."
    assert loop.agent.context is not None
    assert len(await loop.agent.context.history()) == 1 + 49 * 2 + 1  # the store keeps it all


async def test_anthropic_tool_round_trip_with_usage_records(
    api: FakeAPI, anthropic_model: AnthropicModel, library: list[Any]
) -> None:
    api.script(
        json_reply(
            message(
                tool_use_block("toolu_1", "fetch", {"doc_id": "a"}),
                usage={
                    "input_tokens": 30,
                    "cache_creation_input_tokens": 1_200,
                    "output_tokens": 20,
                },
            )
        ),
        json_reply(
            message(
                text_block("It says a."),
                usage={"input_tokens": 60, "cache_read_input_tokens": 1_200, "output_tokens": 5},
            )
        ),
    )
    loop = loop_for(anthropic_model, library)

    await loop.run("Read a.")

    assert loop.agent.context is not None
    records = await loop.agent.context.store.get_usage()
    assert [
        (r.usage.input_tokens, r.usage.cached_tokens, r.usage.cache_write_tokens) for r in records
    ] == [
        (1_230, 0, 1_200),
        (1_260, 1_200, 0),
    ]
    assert all(r.estimated_input_tokens and r.model == "claude-test" for r in records)
    result = api.requests[1].body["messages"][-1]["content"][0]
    assert (result["type"], result["tool_use_id"], result["content"]) == (
        "tool_result",
        "toolu_1",
        "the text of a",
    )
