"""OpenAIResponsesModel through the official SDK, against the strict local Responses server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    ContextConfig,
    ImageBlock,
    LoopFinished,
    MemoryContextStore,
    Message,
    ModelAPIError,
    ModelLoop,
    ModelResponse,
    ModelResponseError,
    ModelSettings,
    OpenAIResponsesModel,
    OutputSchema,
    ReasoningBlock,
    SQLiteContextStore,
    TextBlock,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    connect,
    to_anthropic,
    to_openai,
    tool,
)
from pygents_ctx.model._sdk import RAW_ARGUMENTS

from .fake_api import Reply, json_reply, sse_reply
from .fake_responses import (
    FakeResponsesAPI,
    RawReply,
    call_item,
    error_event,
    failed_events,
    message_item,
    reasoning_item,
    response,
    response_events,
    responses_error,
    responses_problems,
    sealed,
)

QUESTION = [Message("system", "Be brief."), Message("user", "Tides?")]


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeResponsesAPI]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = await FakeResponsesAPI().start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
def model(api: FakeResponsesAPI) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-test", base_url=f"{api.url}/v1", api_key="test-key", timeout=5)


@pytest.fixture
def search() -> Any:
    @tool
    async def search(query: str, limit: int = 3) -> str:
        """Search the library."""
        return f"{limit} documents about {query}"

    return search


async def collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


async def answer(model: OpenAIResponsesModel, streaming: bool) -> ModelResponse:
    """The reply, through `stream()` (its last event) or `complete()`."""
    if not streaming:
        return await model.complete(QUESTION)
    *_, final = await collect(model.stream(QUESTION))
    assert isinstance(final, ModelResponse)
    return final


# -- requests ---------------------------------------------------------------------------------


async def test_a_reply_with_text_parallel_calls_and_cached_usage(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, search: Any
) -> None:
    api.script(
        json_reply(
            response(
                reasoning_item(),
                message_item("Searching."),
                call_item("call_1", "search", '{"query": "tides"}'),
                call_item("call_2", "search", '{"query": "moon"}'),
                usage=(120, 30, 100),
            )
        )
    )

    reply = await model.complete(QUESTION, [search], settings=ModelSettings(max_tokens=50))

    assert reply.message == Message(
        "assistant",
        [
            ReasoningBlock("rs_1", ["Thinking it over."], model="gpt-test"),
            TextBlock("Searching."),
            ToolUseBlock("call_1", "search", {"query": "tides"}),
            ToolUseBlock("call_2", "search", {"query": "moon"}),
        ],
    )
    assert reply.usage == Usage(120, 30, cached_tokens=100)
    assert (reply.model, reply.finish_reason) == ("gpt-test", "tool_calls")
    [request] = api.requests
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == "Bearer test-key"
    body = request.body
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"type": "message", "role": "user", "content": "Tides?"}]
    assert body["store"] is False  # stateless: our store is the truth
    assert body["include"] == ["reasoning.encrypted_content"]  # so reasoning can go back
    assert body["max_output_tokens"] == 50
    [definition] = body["tools"]
    assert (definition["type"], definition["name"]) == ("function", "search")
    assert definition["strict"] is False  # said out loud: the API's default is strict
    assert definition["parameters"]["required"] == ["query"]


async def test_the_whole_conversation_goes_back_as_items(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    window = [
        Message("system", "Be brief."),
        Message("user", [TextBlock("What is this?"), ImageBlock("image/png", b"\x89PNG")]),
        Message(
            "assistant",
            [
                TextBlock("Let me look."),
                TextBlock(""),  # empty text is never sent
                ToolUseBlock("call_1", "zoom", {"factor": 2}),
                ToolUseBlock("call_2", "zoom", {RAW_ARGUMENTS: '{"factor": '}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultBlock("call_1", "a lighthouse"),
                ToolResultBlock("call_2", "not JSON", is_error=True),
            ],
        ),
        Message("assistant", [TextBlock("")]),  # nothing in it: left out
        Message("system", "Answer in French."),
        Message("user", "So?"),
    ]
    api.script(json_reply(response(message_item("Un phare."))))

    reply = await model.complete(window)

    assert reply.message.text == "Un phare."
    assert api.requests[0].body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBORw==",
                    "detail": "auto",
                },
            ],
        },
        {"type": "message", "role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "call_1", "name": "zoom", "arguments": '{"factor":2}'},
        {
            "type": "function_call",
            "call_id": "call_2",
            "name": "zoom",
            "arguments": json.dumps({RAW_ARGUMENTS: '{"factor": '}, separators=(",", ":")),
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "a lighthouse"},
        {"type": "function_call_output", "call_id": "call_2", "output": "Error: not JSON"},
        {"type": "message", "role": "system", "content": "Answer in French."},
        {"type": "message", "role": "user", "content": "So?"},
    ]


async def test_settings_in_the_responses_apis_own_words(api: FakeResponsesAPI, search: Any) -> None:
    model = OpenAIResponsesModel(
        "gpt-test",
        base_url=f"{api.url}/v1",
        api_key="k",
        settings=ModelSettings(max_tokens=64, temperature=0.2),
        strict_tools=True,
    )
    api.script(json_reply(response(message_item("ok"))))

    await model.complete(
        QUESTION,
        [search],
        settings=ModelSettings(
            tool_choice="search",
            parallel_tool_calls=False,
            top_p=0.9,
            extra_body={"seed": 7},
            extra_headers={"x-trace": "abc"},
        ),
    )

    request = api.requests[0]
    body = request.body
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.2, 0.9, 7)
    assert body["max_output_tokens"] == 64
    assert body["tool_choice"] == {"type": "function", "name": "search"}
    assert body["parallel_tool_calls"] is False
    assert body["tools"][0]["strict"] is True
    assert body["tools"][0]["parameters"]["additionalProperties"] is False
    assert request.headers["x-trace"] == "abc"


async def test_structured_output_is_a_json_schema_text_format(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    api.script(json_reply(response(message_item('{"city": "Lyon", "days": 3}'))))

    reply = await model.complete(
        QUESTION,
        settings=ModelSettings(output_schema=OutputSchema("forecast", schema, "The forecast.")),
    )

    assert json.loads(reply.message.text) == {"city": "Lyon", "days": 3}
    assert api.requests[0].body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "forecast",
            "schema": schema,
            "strict": True,
            "description": "The forecast.",
        }
    }


def test_what_the_responses_api_cannot_take_is_refused_before_sending(search: Any) -> None:
    model = OpenAIResponsesModel("gpt-test", api_key="k")
    with pytest.raises(ValueError, match=r"ModelSettings\.stop.*no stop sequences"):
        model.request(QUESTION, settings=ModelSettings(stop=("END",)))
    with pytest.raises(ValueError, match="window is empty"):
        model.request([])
    with pytest.raises(ValueError, match=r"messages\[1\]\.content\[0\] is ImageBlock"):
        model.request(
            [Message("user", "Hi"), Message("assistant", [ImageBlock("image/png", b"x")])]
        )
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[0\] is ImageBlock.*system"):
        model.request([Message("system", [ImageBlock("image/png", b"x")]), Message("user", "Hi")])
    # Only instructions: they become the input the API needs.
    request = model.request([Message("system", "Write a haiku.")])
    assert "instructions" not in request
    assert request["input"] == [{"type": "message", "role": "system", "content": "Write a haiku."}]


def test_a_synchronous_client_is_refused_at_construction() -> None:
    import openai

    with pytest.raises(TypeError, match="AsyncOpenAI"):
        OpenAIResponsesModel("gpt-test", client=openai.OpenAI(api_key="k"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model name"):
        OpenAIResponsesModel("", api_key="k")


def test_the_strict_server_refuses_what_the_real_api_refuses() -> None:
    good = {"model": "m", "input": [{"type": "message", "role": "user", "content": "hi"}]}
    assert responses_problems(good) == []
    assert responses_problems({**good, "input": []})
    orphan = {"type": "function_call_output", "call_id": "call_9", "output": "x"}
    assert any("call_9" in p for p in responses_problems({**good, "input": [orphan]}))
    unanswered = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    assert any("No tool output" in p for p in responses_problems({**good, "input": [unanswered]}))
    assert responses_problems({**good, "input": [{"type": "web_search_call"}]})
    assert responses_problems({**good, "text": {"format": {"type": "json_schema"}}})
    assert responses_problems({**good, "stop": ["x"]})
    chat_tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    assert responses_problems({**good, "tools": [chat_tool]})


async def test_a_request_the_api_refuses_is_a_non_transient_error(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    api.script(json_reply(response(message_item("Fine."))))

    with pytest.raises(ModelAPIError, match="max_output_tokens") as refused:
        # The API's least max_output_tokens is 16.
        await model.complete(QUESTION, settings=ModelSettings(max_tokens=8))

    assert (refused.value.status_code, refused.value.transient) == (400, False)
    assert len(api.refused) == 1
    assert (await model.complete(QUESTION)).message.text == "Fine."  # the reply was not used up


# -- streaming --------------------------------------------------------------------------------


async def test_a_stream_yields_pieces_then_the_whole_reply(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, search: Any
) -> None:
    api.script(
        sse_reply(
            response_events(
                ("reasoning", "Hmm."),
                ("text", ["Let me ", "look."]),
                ("call", ("call_1", "search", ['{"query"', ': "tides"}'])),
                ("call", ("call_2", "search", ['{"query": "moon"}'])),
                usage=(40, 12, 32),
            )
        )
    )

    events = await collect(model.stream(QUESTION, [search]))

    assert events[:-1] == [
        ThinkingDelta("Hm"),  # the reasoning's summary, as it streams
        ThinkingDelta("m."),
        TextDelta("Let me "),
        TextDelta("look."),
        ToolCallDelta(0, "call_1", "search", ""),
        ToolCallDelta(0, None, None, '{"query"'),
        ToolCallDelta(0, None, None, ': "tides"}'),
        ToolCallDelta(1, "call_2", "search", ""),
        ToolCallDelta(1, None, None, '{"query": "moon"}'),
    ]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message == Message(
        "assistant",
        [
            ReasoningBlock("rs_1", ["Hmm."], model="gpt-test"),
            TextBlock("Let me look."),
            ToolUseBlock("call_1", "search", {"query": "tides"}),
            ToolUseBlock("call_2", "search", {"query": "moon"}),
        ],
    )
    assert (final.usage, final.finish_reason) == (Usage(40, 12, cached_tokens=32), "tool_calls")
    assert api.requests[0].body["stream"] is True


async def test_a_stream_whose_final_response_lists_no_output_is_built_from_its_events(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    api.script(sse_reply(response_events(("text", ["Tides ", "rise."]), final_output=False)))

    *_, final = await collect(model.stream(QUESTION))

    assert final.message == Message("assistant", "Tides rise.")


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_reply_cut_by_max_output_tokens_is_a_length_stop(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, streaming: bool
) -> None:
    if streaming:
        reply = sse_reply(
            response_events(
                ("text", ["The tides are"]),
                status="incomplete",
                incomplete_reason="max_output_tokens",
            )
        )
    else:
        reply = json_reply(
            response(
                message_item("The tides are"),
                status="incomplete",
                incomplete_reason="max_output_tokens",
            )
        )
    api.script(reply)

    final = await answer(model, streaming)

    assert (final.message.text, final.finish_reason) == ("The tides are", "length")


async def test_an_incomplete_reply_with_nothing_written_is_still_a_length_stop(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    # A reasoning model can spend all of max_output_tokens thinking.
    api.script(
        json_reply(
            response(reasoning_item(), status="incomplete", incomplete_reason="max_output_tokens")
        )
    )

    final = await model.complete(QUESTION)

    # The thinking is kept (it is shown and saved); with nothing after it, it is never sent back.
    reasoning = ReasoningBlock("rs_1", ["Thinking it over."], model="gpt-test")
    assert (final.message.content, final.finish_reason) == ((reasoning,), "length")
    request = model.request([*QUESTION, final.message, Message("user", "Go on.")])
    assert [item["type"] for item in request["input"]] == ["message", "message"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_reply_with_nothing_in_it_is_a_response_error(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, streaming: bool
) -> None:
    api.script(
        sse_reply(response_events(("text", [""]), ("reasoning", "Hmm.")))
        if streaming
        else json_reply(response(message_item(""), reasoning_item()))
    )

    with pytest.raises(ModelResponseError, match="no text and no tool call"):
        await answer(model, streaming)


async def test_a_cut_stream_is_a_transient_error(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    events = response_events(("text", ["The tides ", "come from"]))
    api.script(
        sse_reply(events, cut_after=len(events) - 1),  # ends cleanly, without response.completed
        sse_reply(events, cut_after=6),  # in the middle of the text
    )

    seen: list[Any] = []

    async def read() -> None:
        async for event in model.stream(QUESTION):
            seen.append(event)

    with pytest.raises(ModelAPIError, match="cut") as cut:
        await read()
    assert cut.value.transient
    assert TextDelta("The tides ") in seen  # what came was shown, but no ModelResponse
    assert not any(isinstance(event, ModelResponse) for event in seen)

    with pytest.raises(ModelAPIError) as second:
        await collect(model.stream(QUESTION))
    assert second.value.transient


async def test_a_dropped_connection_and_a_malformed_body_are_transient(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    api.script(Reply(drop=True))
    with pytest.raises(ModelAPIError, match="connect") as dropped:
        await model.complete(QUESTION)
    assert dropped.value.transient

    api.script(sse_reply([("response.created", "{not json")]))
    with pytest.raises(ModelAPIError, match="not valid JSON") as garbled:
        await collect(model.stream(QUESTION))
    assert garbled.value.transient

    api.script(RawReply(raw=b'{"id": "resp_1", "output": ['))  # a 200 cut short
    with pytest.raises(ModelAPIError, match="not valid JSON") as truncated:
        await model.complete(QUESTION)
    assert truncated.value.transient


async def test_a_proxy_error_page_is_transient(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    page = "<html><body>502 Bad Gateway</body></html>"
    api.script(Reply(raw=page, headers={"Content-Type": "text/html"}))

    with pytest.raises(
        ModelAPIError, match=r"sent an HTML page.*502 Bad Gateway.*base_url"
    ) as caught:
        await model.complete(QUESTION)

    assert caught.value.transient


@pytest.mark.parametrize(("code", "transient"), [("server_error", True), ("invalid_prompt", False)])
async def test_an_error_event_mid_stream_says_whether_to_retry(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, code: str, transient: bool
) -> None:
    events = response_events(("text", ["Half"]))
    api.script(sse_reply([*events[:5], error_event(code, "went wrong")]))

    with pytest.raises(ModelAPIError, match=f"{code}.*went wrong") as failed:
        await collect(model.stream(QUESTION))
    assert failed.value.transient is transient


async def test_an_error_event_with_a_nested_error_object_is_read_too(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    # Some servers nest the error: {"type": "error", "error": {"type": ..., "message": ...}}.
    nested = {"type": "error", "error": {"type": "server_error", "message": "overloaded"}}
    api.script(sse_reply([*response_events(("text", ["Half"]))[:5], ("error", json.dumps(nested))]))

    with pytest.raises(ModelAPIError, match="overloaded") as failed:
        await collect(model.stream(QUESTION))
    assert failed.value.transient


@pytest.mark.parametrize(
    ("code", "transient"), [("rate_limit_exceeded", True), ("invalid_image", False)]
)
async def test_a_failed_response_is_an_api_error(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, code: str, transient: bool
) -> None:
    api.script(
        sse_reply(failed_events(code)),
        json_reply(response(usage=None, status="failed", error={"code": code, "message": "no"})),
    )

    with pytest.raises(ModelAPIError, match=code) as streamed:
        await collect(model.stream(QUESTION))
    with pytest.raises(ModelAPIError, match=code) as returned:
        await model.complete(QUESTION)
    assert streamed.value.transient is returned.value.transient is transient


async def test_http_errors_say_whether_to_retry(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    api.script(
        responses_error(429, "slow down", "rate_limit_exceeded", retry_after="2"),
        responses_error(404, "The model 'gpt-test' does not exist", "invalid_request_error"),
    )

    with pytest.raises(ModelAPIError) as limited:
        await model.complete(QUESTION)
    with pytest.raises(ModelAPIError, match="does not exist") as missing:
        await model.complete(QUESTION)

    assert (limited.value.status_code, limited.value.transient, limited.value.retry_after) == (
        429,
        True,
        2.0,
    )
    assert (missing.value.status_code, missing.value.transient) == (404, False)


async def test_an_output_item_a_message_cannot_carry_is_a_response_error(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    api.script(json_reply(response({"type": "web_search_call", "id": "ws_1", "status": "done"})))

    with pytest.raises(ModelResponseError, match="web_search_call"):
        await model.complete(QUESTION)


# -- the loop ---------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_model_loop_runs_a_tool_call_through_the_responses_api(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, search: Any, streaming: bool
) -> None:
    if streaming:
        api.script(
            sse_reply(
                response_events(
                    ("call", ("call_1", "search", ['{"query": "tides"}'])), usage=(50, 9)
                )
            ),
            sse_reply(
                response_events(("text", ["Tides come ", "from the Moon."]), usage=(80, 7, 48))
            ),
        )
    else:
        api.script(
            json_reply(
                response(call_item("call_1", "search", '{"query": "tides"}'), usage=(50, 9))
            ),
            json_reply(response(message_item("Tides come from the Moon."), usage=(80, 7, 48))),
        )
    agent = Agent("researcher", "Researches", [search], context=ContextConfig(MemoryContextStore()))
    loop = ModelLoop(agent, model, instructions="Cite the library.")

    if streaming:
        events = await collect(loop.stream("What causes tides?"))
        finished = events[-1]
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
            "Tides come from the Moon."
        )
    else:
        finished = await loop.run("What causes tides?")

    assert isinstance(finished, LoopFinished)
    assert finished.text == "Tides come from the Moon."
    assert (finished.steps, finished.usage) == (2, Usage(130, 16, cached_tokens=48))
    second = api.requests[1].body
    assert second["instructions"] == "Cite the library."
    assert second["input"][-2:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "search",
            "arguments": '{"query":"tides"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "3 documents about tides"},
    ]
    assert api.refused == []


# -- any conversation ---------------------------------------------------------------------------

_texts = st.sampled_from(["", "Hi", "tides?", "é 🌊"])


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Windows as a loop stores them: each assistant's calls answered by the next message."""
    window = [Message("system", draw(_texts))] if draw(st.booleans()) else []
    window.append(Message("user", draw(st.sampled_from(["Hi", "tides?"]))))
    for turn in range(draw(st.integers(0, 4))):
        texts = [TextBlock(text) for text in draw(st.lists(_texts, max_size=2))]
        calls = [
            ToolUseBlock(f"call_{turn}_{n}", "search", {"query": draw(_texts)})
            for n in range(draw(st.integers(0, 3)))
        ]
        # Reasoning: this model's (sealed or not), another model's, before anything or alone.
        thoughts = [
            ReasoningBlock(
                f"rs_{turn}_{n}",
                [draw(_texts)],
                sealed(made_by, f"rs_{turn}_{n}") if draw(st.booleans()) else None,
                model=made_by,
            )
            for n, made_by in enumerate(draw(st.lists(st.sampled_from(["gpt-test", "o3"]))))
        ]
        window.append(Message("assistant", draw(st.permutations([*thoughts, *texts])) + calls))
        if calls:
            answered = draw(st.permutations(calls))
            results = [
                ToolResultBlock(c.id, draw(_texts), is_error=draw(st.booleans())) for c in answered
            ]
            window.append(Message("user", results))
        if draw(st.booleans()):
            blocks: list[TextBlock | ImageBlock] = [TextBlock(draw(_texts))]
            if draw(st.booleans()):
                blocks.append(ImageBlock("image/png", b"\x89PNG"))
            window.append(Message("user", blocks))
    return window


OFFLINE = OpenAIResponsesModel("gpt-test", api_key="k")  # request() makes no call


@given(window=conversations())
def test_any_stored_conversation_is_a_request_the_api_accepts(window: list[Message]) -> None:
    request = OFFLINE.request(window)

    assert responses_problems(request) == []
    items = request["input"]
    sent_calls = [i["call_id"] for i in items if i["type"] == "function_call"]
    sent_results = [i["call_id"] for i in items if i["type"] == "function_call_output"]
    assert sent_calls == [c.id for m in window for c in m.tool_uses]  # none lost, in order
    assert sent_results == [r.tool_use_id for m in window for r in m.tool_results]
    contents = [i["content"] for i in items if i["type"] == "message"]
    assert all(content for content in contents)  # no empty text, no empty message
    sent = [i["id"] for i in items if i["type"] == "reasoning"]
    mine = [
        b.id
        for m in window
        for b in m.content
        if isinstance(b, ReasoningBlock) and b.model == "gpt-test" and b.encrypted_content
    ]
    assert set(sent) <= set(mine)  # only this model's sealed reasoning, each once
    assert len(sent) == len(set(sent))


# -- reasoning round trip ---------------------------------------------------------------------


def thinking_then_call(streaming: bool, model: str = "gpt-test") -> Reply:
    """A reasoning model's first reply: encrypted reasoning, then a call it led to."""
    reasoning = reasoning_item("Tides: ask the library.", "rs_7", sealed_for=model)
    call = ("call_1", "search", ['{"query": "tides"}'])
    if streaming:
        return sse_reply(
            response_events(("reasoning", reasoning), ("call", call), usage=(50, 40, 0, 31))
        )
    return json_reply(response(reasoning, call_item(*call[:2], call[2][0]), usage=(50, 40, 0, 31)))


def final_answer(streaming: bool) -> Reply:
    if streaming:
        return sse_reply(response_events(("text", ["From the Moon."]), usage=(90, 7, 48, 2)))
    return json_reply(response(message_item("From the Moon."), usage=(90, 7, 48, 2)))


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_tool_round_sends_the_encrypted_reasoning_back_before_its_call(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, search: Any, streaming: bool
) -> None:
    api.script(thinking_then_call(streaming), final_answer(streaming))
    agent = Agent("researcher", "Researches", [search], context=ContextConfig(MemoryContextStore()))
    loop = ModelLoop(agent, model)

    if streaming:
        events = await collect(loop.stream("What causes tides?"))
        finished = events[-1]
        thought = "".join(e.thinking for e in events if isinstance(e, ThinkingDelta))
        assert thought == "Tides: ask the library."
    else:
        finished = await loop.run("What causes tides?")

    assert isinstance(finished, LoopFinished)
    assert finished.text == "From the Moon."
    # Reasoning tokens are counted, as a part of the output tokens.
    assert finished.usage == Usage(140, 47, cached_tokens=48, reasoning_tokens=33)
    assert api.refused == []
    first, second = (request.body for request in api.requests)
    assert first["include"] == second["include"] == ["reasoning.encrypted_content"]
    assert second["input"][1:] == [
        {
            "type": "reasoning",
            "id": "rs_7",
            "summary": [{"type": "summary_text", "text": "Tides: ask the library."}],
            "encrypted_content": sealed("gpt-test", "rs_7"),
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "search",
            "arguments": '{"query":"tides"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "3 documents about tides"},
    ]
    store = agent.context.store
    assert store is not None
    stored = await store.get_history()
    assert stored[1].content[0] == ReasoningBlock(
        "rs_7",
        ["Tides: ask the library."],
        sealed("gpt-test", "rs_7"),
        model="gpt-test",
    )


async def test_reasoning_survives_a_saved_session_and_goes_back_in_place(
    api: FakeResponsesAPI, model: OpenAIResponsesModel, search: Any, tmp_path: Any
) -> None:
    api.script(
        thinking_then_call(False),
        final_answer(False),
        json_reply(response(message_item("You're welcome."))),
    )
    path = tmp_path / "s.db"
    async with connect(path) as conn:
        context = ContextConfig(SQLiteContextStore(conn, session_id="s"))
        agent = Agent("first", "Researches", [search], context=context)
        assert (await ModelLoop(agent, model).run("Tides?")).text == "From the Moon."
    async with connect(path) as conn:  # a new process, say: the transcript comes from disk
        context = ContextConfig(SQLiteContextStore(conn, session_id="s"))
        agent = Agent("later", "Researches", [search], context=context)
        later = await ModelLoop(agent, model).run("Thanks!")

    assert later.text == "You're welcome."
    assert api.refused == []
    kinds = [item["type"] for item in api.requests[2].body["input"]]
    assert kinds == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert api.requests[2].body["input"][1]["encrypted_content"] == sealed("gpt-test", "rs_7")


def test_reasoning_from_another_model_is_left_out_so_the_request_stays_valid() -> None:
    # A transcript restored from a session run with o3: its reasoning is sealed for o3.
    theirs = ReasoningBlock("rs_o3", ["Plan."], sealed("o3", "rs_o3"), model="o3")
    mine = ReasoningBlock("rs_me", [], sealed("gpt-test", "rs_me"), model="gpt-test")
    call = ToolUseBlock("call_1", "search", {"query": "tides"})
    later = ToolUseBlock("call_2", "search", {"query": "moon"})
    window = [
        Message("user", "Tides?"),
        Message("assistant", [theirs, call]),
        Message("user", [ToolResultBlock("call_1", "3 documents")]),
        Message("assistant", [mine, later]),
        Message("user", [ToolResultBlock("call_2", "2 documents")]),
    ]

    request = OFFLINE.request(window)

    assert responses_problems(request) == []
    kinds = [(item["type"], item.get("id")) for item in request["input"]]
    assert kinds == [
        ("message", None),
        ("function_call", None),
        ("function_call_output", None),
        ("reasoning", "rs_me"),
        ("function_call", None),
        ("function_call_output", None),
    ]
    # The same rule the other way: o3 gets its own reasoning back, and not gpt-test's.
    as_o3 = OpenAIResponsesModel("o3", api_key="k").request(window)
    assert responses_problems(as_o3) == []
    assert [i["id"] for i in as_o3["input"] if i["type"] == "reasoning"] == ["rs_o3"]
    # Sent to gpt-test, o3's encrypted reasoning is what the API refuses.
    relabelled = ReasoningBlock(
        theirs.id, theirs.summary, theirs.encrypted_content, model="gpt-test"
    )
    forged = [window[0], Message("assistant", [relabelled, call]), *window[2:]]
    assert any("could not be verified" in p for p in responses_problems(OFFLINE.request(forged)))


def test_reasoning_is_not_sent_to_chat_completions_anthropic_or_gemini() -> None:
    sealed_block = ReasoningBlock("rs_1", ["Plan."], sealed("gpt-test", "rs_1"), model="gpt-test")
    turn = Message("assistant", [sealed_block, TextBlock("Hi.")])
    window = [Message("user", "Hi"), turn, Message("user", "And?")]

    assert to_openai(window)[1] == {"role": "assistant", "content": "Hi."}
    assert to_anthropic(window)[1][1] == {"role": "assistant", "content": "Hi."}
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\] is a reasoning item"):
        to_openai([Message("user", [sealed_block])])


def test_reasoning_without_encrypted_content_or_a_following_item_is_not_sent() -> None:
    unsealed = ReasoningBlock("rs_1", ["Plan."], model="gpt-test")
    alone = ReasoningBlock("rs_2", [], sealed("gpt-test", "rs_2"), model="gpt-test")
    window = [
        Message("user", "Tides?"),
        Message("assistant", [unsealed, TextBlock("Maybe.")]),
        Message("user", "Go on."),
        Message("assistant", [alone]),  # a reply cut while thinking
        Message("user", "Well?"),
    ]

    request = OFFLINE.request(window)

    assert responses_problems(request) == []
    assert "reasoning" not in [item["type"] for item in request["input"]]
    # With store=true the server finds an item by its id, so it goes back unencrypted.
    stored = OFFLINE.request(window, settings=ModelSettings(extra_body={"store": True}))
    assert "include" not in stored
    assert [i["id"] for i in stored["input"] if i["type"] == "reasoning"] == ["rs_1"]


def test_a_caller_include_is_kept_beside_the_encrypted_reasoning() -> None:
    settings = ModelSettings(extra_body={"include": ["message.output_text.logprobs"]})

    request = OFFLINE.request(QUESTION, settings=settings)

    assert request["extra_body"]["include"] == [
        "message.output_text.logprobs",
        "reasoning.encrypted_content",
    ]


def test_the_strict_server_refuses_what_the_real_api_refuses_about_reasoning() -> None:
    good = {"model": "m", "store": False, "input": [{"role": "user", "content": "hi"}]}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": ""}
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    answer_ = {"type": "function_call_output", "call_id": "c", "output": "x"}

    def problems(item: dict[str, Any], *rest: dict[str, Any], model: str = "m") -> str:
        body = {**good, "model": model, "input": [*good["input"], item, *rest]}
        return " ".join(responses_problems(body))

    sealed_item = {**reasoning, "encrypted_content": sealed("m", "rs_1")}
    assert problems(sealed_item, call, answer_) == ""
    assert "without its required following item" in problems(sealed_item)
    assert "without its required following item" in problems(
        sealed_item, {"role": "user", "content": "x"}
    )
    assert "could not be verified" in problems(sealed_item, call, answer_, model="o3")
    assert "not found" in problems({**reasoning, "encrypted_content": None}, call, answer_)
    assert "Invalid value: 'reasoning.everything'" in " ".join(
        responses_problems({**good, "include": ["reasoning.everything"]})
    )


async def test_reasoning_tokens_are_read_from_the_usage_details(
    api: FakeResponsesAPI, model: OpenAIResponsesModel
) -> None:
    api.script(json_reply(response(message_item("Yes."), usage=(12, 30, 0, 26))))

    reply = await model.complete(QUESTION)

    assert reply.usage == Usage(12, 30, reasoning_tokens=26)
