"""OpenAIModel and AnthropicModel through the official SDKs, against the scripted local server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    AnthropicModel,
    ClearToolResults,
    ContextConfig,
    FitTokens,
    MemoryContextStore,
    Message,
    ModelAPIError,
    ModelResponseError,
    ModelSettings,
    OpenAIModel,
    PinnedWindow,
    Pipeline,
    PromptWindow,
    StableWindow,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    tool,
)
from pygents_ctx.model._sdk import RAW_ARGUMENTS
from pygents_ctx.model.anthropic_model import MAX_BREAKPOINTS

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

QUESTION = [Message("system", "Be brief."), Message("user", "Tides?")]


@pytest.fixture
def search() -> Any:
    @tool
    async def search(query: str, limit: int = 3) -> str:
        """Search the library."""
        return query

    return search


async def collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


# -- OpenAI ---------------------------------------------------------------------------------


async def test_openai_reply_with_text_calls_and_usage(
    api: FakeAPI, openai_model: OpenAIModel, search: Any
) -> None:
    api.script(
        json_reply(
            chat_completion(
                "Searching.",
                [
                    ("call_1", "search", '{"query": "tides"}'),
                    ("call_2", "search", '{"query": "moon"}'),
                ],
                usage=(120, 30, 100),
            )
        )
    )

    response = await openai_model.complete(
        QUESTION, [search], settings=ModelSettings(max_tokens=50)
    )

    assert response.message == Message(
        "assistant",
        [
            TextBlock("Searching."),
            ToolUseBlock("call_1", "search", {"query": "tides"}),
            ToolUseBlock("call_2", "search", {"query": "moon"}),
        ],
    )
    assert response.usage == Usage(120, 30, cached_tokens=100)
    assert (response.model, response.finish_reason) == ("gpt-test", "tool_calls")
    [request] = api.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Tides?"},
    ]
    assert request.body["tools"][0]["function"]["name"] == "search"
    assert request.body["max_tokens"] == 50


async def test_openai_sends_the_settings_in_its_own_words(api: FakeAPI, search: Any) -> None:
    model = OpenAIModel(
        "gpt-test",
        base_url=f"{api.url}/v1",
        api_key="k",
        max_tokens_field="max_completion_tokens",
        settings=ModelSettings(max_tokens=64, temperature=0.2, stop=("END",)),
    )
    api.script(json_reply(chat_completion("ok")))

    await model.complete(
        QUESTION,
        [search],
        settings=ModelSettings(
            tool_choice="search", parallel_tool_calls=False, extra_body={"seed": 7}
        ),
    )

    body = api.requests[0].body
    assert (body["temperature"], body["stop"], body["seed"]) == (0.2, ["END"], 7)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    assert body["parallel_tool_calls"] is False
    assert body["max_completion_tokens"] == 64  # the field this model was told to use


async def test_openai_stream_yields_pieces_then_the_whole_reply(
    api: FakeAPI, openai_model: OpenAIModel, search: Any
) -> None:
    api.script(
        sse_reply(
            chat_chunks(
                ["Let me ", "look."],
                [("call_1", "search", ['{"que', 'ry": "tides"}']), ("call_2", "search", ["{}"])],
                usage=(80, 12, 64),
            )
        )
    )

    events = await collect(openai_model.stream(QUESTION, [search]))

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "look."]
    assert [
        (e.index, e.id, e.name, e.arguments) for e in events if isinstance(e, ToolCallDelta)
    ] == [
        (0, "call_1", "search", ""),
        (0, None, None, '{"que'),
        (0, None, None, 'ry": "tides"}'),
        (1, "call_2", "search", ""),
        (1, None, None, "{}"),
    ]
    final = events[-1]
    assert final.message.tool_uses == (
        ToolUseBlock("call_1", "search", {"query": "tides"}),
        ToolUseBlock("call_2", "search", {}),
    )
    assert final.message.text == "Let me look."
    assert final.usage == Usage(80, 12, cached_tokens=64)
    assert api.requests[0].body["stream"] is True
    assert api.requests[0].body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("arguments", ['{"query": "tid', "[1, 2]", '"text"'])
async def test_arguments_that_are_not_a_json_object_are_kept_raw(
    api: FakeAPI, openai_model: OpenAIModel, arguments: str
) -> None:
    api.script(json_reply(chat_completion(None, [("call_1", "search", arguments)])))

    response = await openai_model.complete(QUESTION)

    assert response.message.tool_uses[0].input == {RAW_ARGUMENTS: arguments}


@pytest.mark.parametrize(
    ("reply", "status", "transient", "retry_after"),
    [
        (openai_error(429, "slow down", "rate_limit_exceeded", retry_after="3"), 429, True, 3.0),
        (openai_error(500, "oops"), 500, True, None),
        (openai_error(503, "busy", retry_after_ms="250"), 503, True, 0.25),
        (openai_error(400, "bad request", "invalid_request_error"), 400, False, None),
        (openai_error(401, "no key", "authentication_error"), 401, False, None),
        (openai_error(500, "final", x_should_retry="false"), 500, False, None),
    ],
)
async def test_openai_errors_say_whether_to_retry(
    api: FakeAPI,
    openai_model: OpenAIModel,
    reply: Reply,
    status: int,
    transient: bool,
    retry_after: float | None,
) -> None:
    api.script(reply)

    with pytest.raises(ModelAPIError) as caught:
        await openai_model.complete(QUESTION)

    error = caught.value
    assert (error.status_code, error.transient, error.retry_after) == (
        status,
        transient,
        retry_after,
    )
    assert len(api.requests) == 1  # the SDK's own retries are off: one policy, the loop's
    message = reply.body["error"]["message"]
    assert str(error) == f"OpenAI: HTTP {status}: {message}"  # the API's words, said once


async def test_a_timeout_and_a_dropped_connection_are_transient(api: FakeAPI) -> None:
    model = OpenAIModel("gpt-test", base_url=f"{api.url}/v1", api_key="k", timeout=0.2)
    api.script(Reply(delay=2.0, body=chat_completion("late")), Reply(drop=True))

    with pytest.raises(ModelAPIError, match="timed out") as timed_out:
        await model.complete(QUESTION)
    with pytest.raises(ModelAPIError, match="connect") as dropped:
        await model.complete(QUESTION)

    assert (timed_out.value.transient, timed_out.value.status_code) == (True, None)
    assert dropped.value.transient


async def test_a_stream_that_breaks_off_is_a_transient_error(
    api: FakeAPI, openai_model: OpenAIModel
) -> None:
    api.script(
        sse_reply([(None, json.dumps({"error": {"message": "boom", "type": "server_error"}}))])
    )

    with pytest.raises(ModelAPIError, match="boom") as caught:
        await collect(openai_model.stream(QUESTION))

    assert caught.value.transient


async def test_a_reply_without_choices_is_a_response_error(
    api: FakeAPI, openai_model: OpenAIModel
) -> None:
    body = chat_completion("x")
    body["choices"] = []
    api.script(json_reply(body))

    with pytest.raises(ModelResponseError, match="no choices"):
        await openai_model.complete(QUESTION)


def test_openai_needs_a_key_and_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    with pytest.raises(ValueError, match="api_key"):
        OpenAIModel("gpt-test")
    with pytest.raises(ValueError, match="model name"):
        OpenAIModel("", api_key="k")
    with pytest.raises(ValueError, match="max_tokens_field"):
        OpenAIModel("gpt-test", api_key="k", max_tokens_field="tokens")  # type: ignore[arg-type]


@pytest.mark.parametrize("owner", ["OpenAIModel", "AnthropicModel"])
def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch, owner: str) -> None:
    import sys

    sdk = "openai" if owner == "OpenAIModel" else "anthropic"
    monkeypatch.setitem(sys.modules, sdk, None)  # as if it were not installed
    model_class = OpenAIModel if owner == "OpenAIModel" else AnthropicModel

    with pytest.raises(ImportError, match=rf"pip install -e '\.\[{sdk}\]' from a checkout"):
        model_class("any", api_key="k")


# -- Anthropic ------------------------------------------------------------------------------


async def test_anthropic_reply_with_text_calls_and_cache_usage(
    api: FakeAPI, anthropic_model: AnthropicModel, search: Any
) -> None:
    api.script(
        json_reply(
            message(
                text_block("Searching."),
                tool_use_block("toolu_1", "search", {"query": "tides"}),
                usage={
                    "input_tokens": 20,
                    "cache_read_input_tokens": 900,
                    "cache_creation_input_tokens": 80,
                    "output_tokens": 15,
                },
            )
        )
    )

    response = await anthropic_model.complete(QUESTION, [search])

    assert response.message == Message(
        "assistant",
        [TextBlock("Searching."), ToolUseBlock("toolu_1", "search", {"query": "tides"})],
    )
    # Anthropic's input_tokens leave out the cached part; a Usage counts the whole prompt.
    assert response.usage == Usage(1_000, 15, cached_tokens=900, cache_write_tokens=80)
    assert response.finish_reason == "tool_use"
    [request] = api.requests
    assert request.path == "/v1/messages"
    # The key travels as x-api-key or, in newer SDKs, a bearer token.
    assert "test-key" in request.headers.get("x-api-key", request.headers.get("authorization"))
    assert request.body["max_tokens"] == 4096
    assert request.body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert request.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert request.body["messages"] == [{"role": "user", "content": "Tides?"}]


async def test_anthropic_settings_in_its_own_words(
    api: FakeAPI, anthropic_model: AnthropicModel, search: Any
) -> None:
    api.script(json_reply(message(text_block("ok"))), json_reply(message(text_block("ok"))))

    await anthropic_model.complete(
        QUESTION,
        [search],
        settings=ModelSettings(
            max_tokens=100, stop=("END",), tool_choice="required", parallel_tool_calls=False
        ),
    )
    await anthropic_model.complete(QUESTION, [search], settings=ModelSettings(tool_choice="search"))

    first, second = (request.body for request in api.requests)
    assert (first["max_tokens"], first["stop_sequences"]) == (100, ["END"])
    assert first["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert second["tool_choice"] == {"type": "tool", "name": "search"}


async def test_anthropic_stream_yields_pieces_then_the_whole_reply(
    api: FakeAPI, anthropic_model: AnthropicModel, search: Any
) -> None:
    api.script(
        sse_reply(
            message_events(
                ("text", ["Let me ", "look."]),
                ("tool_use", ("toolu_1", "search", ['{"query":', ' "tides"}'])),
                ("tool_use", ("toolu_2", "search", [])),
                usage={"input_tokens": 5, "cache_read_input_tokens": 40, "output_tokens": 9},
            )
        )
    )

    events = await collect(anthropic_model.stream(QUESTION, [search]))

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "look."]
    assert [(e.index, e.id, e.arguments) for e in events if isinstance(e, ToolCallDelta)] == [
        (0, "toolu_1", ""),
        (0, None, '{"query":'),
        (0, None, ' "tides"}'),
        (1, "toolu_2", ""),
    ]
    final = events[-1]
    assert final.message == Message(
        "assistant",
        [
            TextBlock("Let me look."),
            ToolUseBlock("toolu_1", "search", {"query": "tides"}),
            ToolUseBlock("toolu_2", "search", {}),
        ],
    )
    assert final.usage == Usage(45, 9, cached_tokens=40)
    assert final.finish_reason == "tool_use"


@pytest.mark.parametrize(
    ("reply", "status", "transient", "retry_after"),
    [
        (anthropic_error(429, "rate_limit_error", retry_after="7"), 429, True, 7.0),
        (anthropic_error(529, "overloaded_error"), 529, True, None),
        (anthropic_error(500, "api_error"), 500, True, None),
        (anthropic_error(400, "invalid_request_error"), 400, False, None),
    ],
)
async def test_anthropic_errors_say_whether_to_retry(
    api: FakeAPI,
    anthropic_model: AnthropicModel,
    reply: Reply,
    status: int,
    transient: bool,
    retry_after: float | None,
) -> None:
    api.script(reply)

    with pytest.raises(ModelAPIError) as caught:
        await anthropic_model.complete(QUESTION)

    error = caught.value
    assert (error.status_code, error.transient, error.retry_after) == (
        status,
        transient,
        retry_after,
    )
    assert len(api.requests) == 1


async def test_an_overloaded_error_mid_stream_is_transient(
    api: FakeAPI, anthropic_model: AnthropicModel
) -> None:
    events = message_events(("text", ["Hel", "lo"]))[:4]
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    api.script(sse_reply([*events, ("error", json.dumps(error))]))

    seen: list[Any] = []

    async def read() -> None:
        async for event in anthropic_model.stream(QUESTION):
            seen.append(event)

    with pytest.raises(ModelAPIError, match="Overloaded") as caught:
        await read()

    assert caught.value.transient
    assert [e.text for e in seen] == ["Hel"]  # what came before the error


async def test_cache_breakpoints_follow_a_pinned_window(
    api: FakeAPI, anthropic_model: AnthropicModel, search: Any
) -> None:
    history = [Message("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(7)]
    builder = PinnedWindow(FitTokens(10_000), max_tokens=20_000)
    context = ContextConfig(MemoryContextStore(history[:5]), builder)
    pinned = await context.prompt_window()  # pins at five messages
    await context.store.append_many(history[5:])
    window = await context.prompt_window()
    api.script(json_reply(message(text_block("ok"))), json_reply(message(text_block("ok"))))

    await anthropic_model.complete(window, [search])
    await anthropic_model.complete(window.messages, [search])  # a plain list promises nothing

    marked, unmarked = (request.body["messages"] for request in api.requests)
    assert pinned.stable_prefix == window.stable_prefix == 5
    cached = [index for index, m in enumerate(marked) if isinstance(m["content"], list)]
    assert cached == [4, 6]  # the end of the pinned part, and the end of the window
    assert marked[4]["content"] == [
        {"type": "text", "text": "message 4", "cache_control": {"type": "ephemeral"}}
    ]
    assert all(isinstance(m["content"], str) for m in unmarked)


async def test_your_own_cache_marks_are_sent_and_the_window_marks_left_to_you(
    api: FakeAPI, anthropic_model: AnthropicModel, search: Any
) -> None:
    hour = {"type": "ephemeral", "ttl": "1h"}
    messages = [
        Message("system", [TextBlock("Be brief.", cache_control=hour)]),
        Message("user", [TextBlock("A long document", cache_control=hour)]),
        Message("assistant", "Read."),
        Message("user", "Summarize it."),
    ]
    api.script(json_reply(message(text_block("ok"))))

    await anthropic_model.complete(PromptWindow(messages, 10, stable_prefix=3), [search])

    body = api.requests[0].body
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": hour}]
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "A long document", "cache_control": hour}
    ]
    assert json.dumps(body["messages"]).count("cache_control") == 1  # no marks by position
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}


def _marks(request: dict[str, Any]) -> list[str]:
    """Where the request carries cache breakpoints: "tools", "system" or a message index."""
    where = [f"{i}" for i, m in enumerate(request["messages"]) if "cache_control" in json.dumps(m)]
    system = request.get("system")
    if isinstance(system, list) and any("cache_control" in block for block in system):
        where.insert(0, "system")
    if any("cache_control" in tool for tool in request.get("tools", [])):
        where.insert(0, "tools")
    return where


async def test_a_stable_window_gets_four_breakpoints_at_its_stable_prefix(
    anthropic_model: AnthropicModel, search: Any
) -> None:
    store = MemoryContextStore(
        [
            Message("system", "Be brief."),
            *(Message("user" if i % 2 else "assistant", f"m{i}") for i in range(1, 6)),
        ]
    )
    context = ContextConfig(store)  # the default: a StableWindow
    first = anthropic_model.request(await context.prompt_window(), [search])
    await store.append_many([Message("assistant", "m6"), Message("user", "m7")])
    window = await context.prompt_window()
    second = anthropic_model.request(window, [search])

    # The first request: tools, system, the head (the system prompt and the task,
    # which every window starts with) and the window's end. The next: where the first
    # one ended instead of the head, so all of it is read from the cache, however many
    # messages came since.
    assert _marks(first) == ["tools", "system", "0", "4"]
    assert window.stable_prefix == 6
    assert _marks(second) == ["tools", "system", "4", "6"]
    assert json.dumps(second).count("cache_control") == MAX_BREAKPOINTS


async def test_a_pipeline_after_a_stable_window_keeps_the_breakpoints(
    anthropic_model: AnthropicModel, search: Any
) -> None:
    def tool_round(n: int) -> list[Message]:
        return [
            Message("assistant", [ToolUseBlock(f"c{n}", "search", {"q": "x"})]),
            Message("user", [ToolResultBlock(f"c{n}", f"result {n} " * 50)]),
        ]

    store = MemoryContextStore(
        [
            Message("system", "Be brief."),
            Message("user", "the task"),
            *tool_round(0),
            *tool_round(1),
        ]
    )
    context = ContextConfig(store, Pipeline([StableWindow(), ClearToolResults(keep_recent=1)]))
    await context.prompt_window()
    await store.append_many(tool_round(2))  # c1's result is cleared now
    window = await context.prompt_window()
    request = anthropic_model.request(window, [search])

    # The window's end, and just before c1's result, where the last window first differs:
    # what the last request cached up to there is read again.
    assert window.stable_prefix == 5
    assert _marks(request) == ["tools", "system", "3", "6"]


@pytest.mark.parametrize(
    ("own", "expected"),
    [
        (0, ["tools", "system", "1", "3"]),
        (2, ["tools", "system", "0", "1"]),  # yours in the messages: no marks by position
        (3, ["system", "0", "1", "2"]),  # one slot left: the system prompt, which caches the tools
        (4, ["0", "1", "2", "3"]),
    ],
)
def test_your_own_marks_count_toward_the_four(
    anthropic_model: AnthropicModel, search: Any, own: int, expected: list[str]
) -> None:
    mark = {"type": "ephemeral"}
    messages = [Message("system", "Be brief.")] + [
        Message(
            "user" if i % 2 == 0 else "assistant",
            [TextBlock(f"m{i}", cache_control=mark if i < own else None)],
        )
        for i in range(4)
    ]

    request = anthropic_model.request(PromptWindow(messages, 10, stable_prefix=3), [search])

    assert _marks(request) == expected
    assert json.dumps(request).count("cache_control") <= MAX_BREAKPOINTS


def test_more_than_four_marks_of_your_own_are_refused_before_anything_is_sent(
    anthropic_model: AnthropicModel,
) -> None:
    mark = {"type": "ephemeral"}
    messages = [Message("user", [TextBlock(f"part {i}", cache_control=mark) for i in range(5)])]

    with pytest.raises(
        ValueError, match="carry 5 cache_control marks; the Anthropic API takes at most 4"
    ):
        anthropic_model.request(messages)


async def _lookup(query: str) -> str:
    """Look something up."""
    return query


_LOOKUP = tool(_lookup)


@settings(max_examples=60, deadline=None)
@given(
    own=st.lists(st.booleans(), min_size=1, max_size=8),
    system_marks=st.integers(0, 2),
    stable=st.none() | st.integers(0, 10),
    tools=st.booleans(),
)
def test_a_request_never_carries_more_than_four_breakpoints(
    own: list[bool], system_marks: int, stable: int | None, tools: bool
) -> None:
    """Whatever the window and your own marks (at most four), the request has at most four."""
    mark = {"type": "ephemeral"}
    if sum(own) + system_marks > MAX_BREAKPOINTS:
        return
    model = AnthropicModel("claude-test", base_url="http://127.0.0.1:9", api_key="k")
    system = [
        TextBlock(f"s{i}", cache_control=mark if i < system_marks else None) for i in range(2)
    ]
    messages = [Message("system", system)] + [
        Message(
            "user" if i % 2 == 0 else "assistant",
            [TextBlock(f"m{i}", cache_control=mark if flag else None)],
        )
        for i, flag in enumerate(own)
    ]

    offered = [_LOOKUP] if tools else []
    request = model.request(PromptWindow(messages, 10, stable_prefix=stable), offered)

    assert json.dumps(request).count("cache_control") <= MAX_BREAKPOINTS


async def test_caching_can_be_turned_off(api: FakeAPI, search: Any) -> None:
    model = AnthropicModel("claude-test", base_url=api.url, api_key="k", cache=False)
    api.script(json_reply(message(text_block("ok"))))

    await model.complete(PromptWindow(QUESTION, 10, stable_prefix=2), [search])

    body = api.requests[0].body
    assert body["system"] == "Be brief."
    assert "cache_control" not in json.dumps(body)


async def test_results_go_back_in_each_apis_shape(
    api: FakeAPI, openai_model: OpenAIModel, anthropic_model: AnthropicModel
) -> None:
    window = [
        Message("user", "Tides?"),
        Message("assistant", [ToolUseBlock("call_1", "search", {"query": "tides"})]),
        Message("user", [ToolResultBlock("call_1", "no results", is_error=True)]),
    ]
    api.script(json_reply(chat_completion("none")), json_reply(message(text_block("none"))))

    await openai_model.complete(window)
    await anthropic_model.complete(window)

    openai_body, anthropic_body = (request.body for request in api.requests)
    assert openai_body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Error: no results",
    }
    assert anthropic_body["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "no results", "is_error": True}
    ]


async def test_a_reader_may_stop_a_stream_early(api: FakeAPI, openai_model: OpenAIModel) -> None:
    api.script(
        sse_reply(chat_chunks(["a", "b", "c"]), gap=0.05), json_reply(chat_completion("next"))
    )

    stream = openai_model.stream(QUESTION)
    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]

    assert first == TextDelta("a")
    assert (await asyncio.wait_for(openai_model.complete(QUESTION), 5)).message.text == "next"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_extra_fields_and_headers_reach_the_server(
    api: FakeAPI, openai_model: OpenAIModel, anthropic_model: AnthropicModel, provider: str
) -> None:
    model: Any = openai_model if provider == "openai" else anthropic_model
    api.script(
        json_reply(chat_completion("ok") if provider == "openai" else message(text_block("ok")))
    )
    settings = ModelSettings(
        temperature=0.3,
        top_p=0.9,
        extra_body={"metadata": {"user": "u1"}},
        extra_headers={"x-trace": "t1"},
    )

    await model.complete(QUESTION, settings=settings)

    [request] = api.requests
    assert (request.body["temperature"], request.body["top_p"]) == (0.3, 0.9)
    assert request.body["metadata"] == {"user": "u1"}
    assert request.headers["x-trace"] == "t1"
    assert repr(model).startswith(f"{type(model).__name__}(")


def test_anthropic_needs_a_name() -> None:
    with pytest.raises(ValueError, match="model name"):
        AnthropicModel("", api_key="k")
