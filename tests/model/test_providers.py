"""What real providers do, through the official SDKs against the strict local server.

Empty and cut replies, malformed bodies, broken connections, length stops,
extended thinking and reasoning text, structured output: each through both
SDKs, as JSON and as a stream. The server refuses (400) what the real APIs
refuse, so every request a test makes is one a real API would take.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    AnthropicModel,
    Message,
    ModelAPIError,
    ModelResponse,
    ModelResponseError,
    ModelSettings,
    OpenAIModel,
    OutputSchema,
    RedactedThinkingBlock,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolResultBlock,
    ToolUseBlock,
    to_anthropic,
    to_openai,
    tool,
)

from .fake_api import (
    FakeAPI,
    Reply,
    anthropic_problems,
    chat_chunks,
    chat_completion,
    json_reply,
    message,
    message_events,
    openai_problems,
    redacted_thinking_block,
    sse_reply,
    text_block,
    thinking_block,
    tool_use_block,
)

QUESTION = [Message("system", "Be brief."), Message("user", "Tides?")]
PROVIDERS = ["openai", "anthropic"]
BOTH_WAYS = [(p, s) for p in PROVIDERS for s in (False, True)]
IDS = [f"{p}-{'stream' if s else 'json'}" for p, s in BOTH_WAYS]


@pytest.fixture
def model(
    request: pytest.FixtureRequest, openai_model: OpenAIModel, anthropic_model: AnthropicModel
) -> Any:
    return openai_model if request.param == "openai" else anthropic_model


async def reply_of(model: Any, streaming: bool, *args: Any, **kwargs: Any) -> ModelResponse:
    if not streaming:
        response: ModelResponse = await model.complete(*args, **kwargs)
        return response
    events = [event async for event in model.stream(*args, **kwargs)]
    assert isinstance(events[-1], ModelResponse)
    return events[-1]


async def events_of(model: Any, *args: Any, **kwargs: Any) -> list[Any]:
    return [event async for event in model.stream(*args, **kwargs)]


def text_reply(provider: str, streaming: bool, text: str, **options: Any) -> Reply:
    if provider == "openai":
        if streaming:
            return sse_reply(chat_chunks([text] if text else []), **options)
        return json_reply(chat_completion(text), **options)
    if streaming:
        return sse_reply(message_events(("text", [text] if text else [])), **options)
    return json_reply(message(text_block(text)), **options)


def call_reply(provider: str, streaming: bool, text: str, call: tuple[str, str, str]) -> Reply:
    """A reply of `text` (maybe empty) and one tool call (id, name, JSON arguments)."""
    call_id, name, arguments = call
    if provider == "openai":
        if streaming:
            return sse_reply(chat_chunks([text] if text else [], [(call_id, name, [arguments])]))
        return json_reply(chat_completion(text, [call]))
    if streaming:
        text_part = ("text", [text] if text else [])
        return sse_reply(message_events(text_part, ("tool_use", (call_id, name, [arguments]))))
    return json_reply(
        message(text_block(text), tool_use_block(call_id, name, json.loads(arguments)))
    )


@pytest.fixture
def search() -> Any:
    @tool
    async def search(query: str) -> str:
        """Search the library."""
        return query

    return search


# -- the strict server refuses what the real APIs refuse -------------------------------------


OPENAI_REFUSED: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "empty assistant",
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}],
        "needs 'content' or 'tool_calls'",
    ),
    (
        "empty assistant text",
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}],
        "needs 'content' or 'tool_calls'",
    ),
    (
        "orphan tool result",
        [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c9", "content": "x"}],
        "must be a response to a preceding message with 'tool_calls'",
    ),
    (
        "call left without its result",
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "user", "content": "and?"},
        ],
        "did not have response messages: c1",
    ),
    (
        "reasoning sent back",
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "reasoning_content": "greet"},
        ],
        "'reasoning_content'",
    ),
]

ANTHROPIC_REFUSED: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "empty text block",
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": ""},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
        ],
        "text content blocks must be non-empty",
    ),
    (
        "empty assistant",
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": []},
            {"role": "user", "content": "and?"},
        ],
        "must have non-empty content",
    ),
    (
        "starts with the assistant",
        [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "hi"}],
        "first message must use the user role",
    ),
    (
        "orphan tool result",
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]}],
        "unexpected `tool_use_id`",
    ),
    (
        "call left without its result",
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {"role": "user", "content": "and?"},
        ],
        "without `tool_result` blocks immediately after: t1",
    ),
    (
        "unsigned thinking",
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}]},
        ],
        "signature: Field required",
    ),
]


@pytest.mark.parametrize(
    ("messages", "why"), [c[1:] for c in OPENAI_REFUSED], ids=[c[0] for c in OPENAI_REFUSED]
)
async def test_the_server_refuses_what_openai_refuses(
    api: FakeAPI, openai_model: OpenAIModel, messages: list[dict[str, Any]], why: str
) -> None:
    api.script(json_reply(chat_completion("never sent")))

    with pytest.raises(openai_model._sdk.BadRequestError, match="400"):
        await openai_model.client.chat.completions.create(model="gpt-test", messages=messages)  # type: ignore[arg-type]

    [(_, problems)] = api.refused
    assert any(why in problem for problem in problems), problems
    assert api.replies  # a refused request does not use up the scripted reply


@pytest.mark.parametrize(
    ("messages", "why"), [c[1:] for c in ANTHROPIC_REFUSED], ids=[c[0] for c in ANTHROPIC_REFUSED]
)
async def test_the_server_refuses_what_anthropic_refuses(
    api: FakeAPI, anthropic_model: AnthropicModel, messages: list[dict[str, Any]], why: str
) -> None:
    sdk_error = anthropic_model._sdk.BadRequestError

    with pytest.raises(sdk_error, match="invalid_request_error"):
        await anthropic_model.client.messages.create(
            model="claude-test",
            max_tokens=10,
            messages=messages,  # type: ignore[arg-type]
        )

    [(_, problems)] = api.refused
    assert any(why in problem for problem in problems), problems


def test_the_rules_take_what_the_apis_take() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert not openai_problems(
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": ""},
                {"role": "assistant", "content": "done"},
            ]
        }
    )
    assert not anthropic_problems(
        {
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [
                        thinking_block("hmm", "sig"),
                        redacted_thinking_block("xyz"),
                        tool_use_block("t1", "f", {}),
                    ],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
                {"role": "assistant", "content": ""},  # an empty prefill may end the list
            ],
        }
    )


# -- empty text ------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "streaming"), BOTH_WAYS, ids=IDS, indirect=["model"])
async def test_an_empty_text_block_before_a_call_is_dropped_and_never_sent(
    api: FakeAPI, model: Any, streaming: bool, search: Any
) -> None:
    provider = "openai" if isinstance(model, OpenAIModel) else "anthropic"
    api.script(
        call_reply(provider, streaming, "", ("call_1", "search", '{"query": "tides"}')),
        text_reply(provider, streaming, "The Moon."),
    )

    first = await reply_of(model, streaming, QUESTION, [search])
    results = Message("user", [ToolResultBlock("call_1", "2 hits")])
    second = await reply_of(model, streaming, [*QUESTION, first.message, results], [search])

    assert first.message.content == (ToolUseBlock("call_1", "search", {"query": "tides"}),)
    assert second.message.text == "The Moon."
    assert api.refused == []


@pytest.mark.parametrize(("model", "streaming"), BOTH_WAYS, ids=IDS, indirect=["model"])
async def test_an_empty_reply_holds_no_blocks(api: FakeAPI, model: Any, streaming: bool) -> None:
    provider = "openai" if isinstance(model, OpenAIModel) else "anthropic"
    api.script(text_reply(provider, streaming, ""))

    response = await reply_of(model, streaming, QUESTION)

    assert response.message == Message("assistant", [])


# -- cut streams, malformed bodies, broken connections ---------------------------------------


def cut_events(provider: str) -> list[tuple[str | None, str]]:
    if provider == "openai":
        return chat_chunks(["The tides ", "come from"])
    return message_events(("text", ["The tides ", "come from"]))


@pytest.mark.parametrize("model", PROVIDERS, indirect=True)
@pytest.mark.parametrize("cut", ["end", "drop"])
async def test_a_stream_cut_before_its_final_event_is_transient(
    api: FakeAPI, model: Any, cut: str
) -> None:
    provider = "openai" if isinstance(model, OpenAIModel) else "anthropic"
    events = cut_events(provider)
    # OpenAI: before the finish reason; Anthropic: before message_delta and message_stop.
    keep = len(events) - (3 if provider == "openai" else 2)
    api.script(sse_reply(events, cut_after=keep, cut=cut))  # type: ignore[arg-type]

    seen: list[Any] = []

    async def read() -> None:
        async for event in model.stream(QUESTION):
            seen.append(event)

    with pytest.raises(ModelAPIError) as caught:
        await read()

    assert caught.value.transient
    assert "incomplete" in str(caught.value) or "connection" in str(caught.value)
    assert not any(isinstance(event, ModelResponse) for event in seen)


@pytest.mark.parametrize("model", PROVIDERS, indirect=True)
async def test_a_stream_without_only_its_closing_marker_is_whole(api: FakeAPI, model: Any) -> None:
    """OpenAI: the finish reason and usage came, `[DONE]` did not: nothing is missing."""
    provider = "openai" if isinstance(model, OpenAIModel) else "anthropic"
    events = cut_events(provider)
    api.script(sse_reply(events, cut_after=len(events) - 1))

    if provider == "openai":
        assert (await reply_of(model, True, QUESTION)).message.text == "The tides come from"
    else:  # message_stop is Anthropic's own mark of a whole reply
        with pytest.raises(ModelAPIError, match="message_stop") as caught:
            await reply_of(model, True, QUESTION)
        assert caught.value.transient


@pytest.mark.parametrize(("model", "streaming"), BOTH_WAYS, ids=IDS, indirect=["model"])
async def test_a_malformed_body_is_transient(api: FakeAPI, model: Any, streaming: bool) -> None:
    if streaming:
        api.script(sse_reply([("message_start", "{not json"), (None, "{not json")]))
    else:
        api.script(Reply(raw='{"id": "chatcmpl-1", "choices": [', status=200))

    with pytest.raises(ModelAPIError, match="not valid JSON") as caught:
        await reply_of(model, streaming, QUESTION)

    assert caught.value.transient


@pytest.mark.parametrize("model", PROVIDERS, indirect=True)
async def test_a_proxy_error_page_is_transient(api: FakeAPI, model: Any) -> None:
    page = "<html><body>502 Bad Gateway</body></html>"
    api.script(Reply(raw=page, headers={"Content-Type": "text/html"}))

    with pytest.raises(
        ModelAPIError, match=r"sent an HTML page.*502 Bad Gateway.*base_url"
    ) as caught:
        await model.complete(QUESTION)

    assert caught.value.transient


@pytest.mark.parametrize("model", PROVIDERS, indirect=True)
@pytest.mark.parametrize("body", ["[1, 2]", "42", "null"])
async def test_json_that_is_no_object_is_refused_not_read_as_an_empty_reply(
    api: FakeAPI, model: Any, body: str
) -> None:
    api.script(Reply(raw=body, headers={"Content-Type": "application/json"}))

    with pytest.raises(ModelResponseError, match="not the API's JSON object"):
        await model.complete(QUESTION)


@pytest.mark.parametrize(
    ("owner", "sync_name", "wanted"),
    [("OpenAIModel", "OpenAI", "AsyncOpenAI"), ("AnthropicModel", "Anthropic", "AsyncAnthropic")],
)
def test_a_synchronous_client_is_refused_at_construction(
    owner: str, sync_name: str, wanted: str
) -> None:
    sdk = __import__("openai" if owner == "OpenAIModel" else "anthropic")
    client = getattr(sdk, sync_name)(api_key="k", base_url="http://127.0.0.1:9")
    model_class = OpenAIModel if owner == "OpenAIModel" else AnthropicModel

    with pytest.raises(TypeError, match=rf"client={wanted}\(\.\.\.\)"):
        model_class("any", client=client)


# -- length stops ----------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "streaming"), BOTH_WAYS, ids=IDS, indirect=["model"])
async def test_a_length_stop_is_reported(api: FakeAPI, model: Any, streaming: bool) -> None:
    if isinstance(model, OpenAIModel):
        reply = (
            sse_reply(chat_chunks(["The tides"], finish_reason="length"))
            if streaming
            else json_reply(chat_completion("The tides", finish_reason="length"))
        )
    elif streaming:
        reply = sse_reply(message_events(("text", ["The tides"]), stop_reason="max_tokens"))
    else:
        reply = json_reply(message(text_block("The tides"), stop_reason="max_tokens"))
    api.script(
        reply,
        text_reply("openai" if isinstance(model, OpenAIModel) else "anthropic", streaming, "whole"),
    )

    cut = await reply_of(model, streaming, QUESTION)
    whole = await reply_of(model, streaming, QUESTION)

    assert (cut.hit_length_limit, cut.message.text) == (True, "The tides")
    assert not whole.hit_length_limit


# -- reasoning -------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
async def test_anthropic_thinking_is_kept_and_goes_back_signed_before_the_call(
    api: FakeAPI, anthropic_model: AnthropicModel, search: Any, streaming: bool
) -> None:
    if streaming:
        first = sse_reply(
            message_events(
                ("thinking", (["Search ", "first."], "sig-1")),
                ("redacted_thinking", "ENCRYPTED"),
                ("text", []),
                ("tool_use", ("toolu_1", "search", ['{"query": "tides"}'])),
            )
        )
    else:
        first = json_reply(
            message(
                thinking_block("Search first.", "sig-1"),
                redacted_thinking_block("ENCRYPTED"),
                text_block(""),
                tool_use_block("toolu_1", "search", {"query": "tides"}),
            )
        )
    api.script(first, json_reply(message(text_block("The Moon."))))

    events = await events_of(anthropic_model, QUESTION, [search]) if streaming else []
    response = events[-1] if streaming else await anthropic_model.complete(QUESTION, [search])
    results = Message("user", [ToolResultBlock("toolu_1", "2 hits")])
    await anthropic_model.complete([*QUESTION, response.message, results], [search])

    assert response.message.content == (
        ThinkingBlock("Search first.", signature="sig-1"),
        RedactedThinkingBlock("ENCRYPTED"),
        ToolUseBlock("toolu_1", "search", {"query": "tides"}),
    )
    if streaming:
        assert [e.thinking for e in events if isinstance(e, ThinkingDelta)] == ["Search ", "first."]
    assert api.requests[1].body["messages"][1]["content"] == [
        thinking_block("Search first.", "sig-1"),
        redacted_thinking_block("ENCRYPTED"),
        tool_use_block("toolu_1", "search", {"query": "tides"}),
    ]
    assert api.refused == []


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
async def test_reasoning_text_of_compatible_servers_is_kept_and_never_sent(
    api: FakeAPI, openai_model: OpenAIModel, streaming: bool, field: str
) -> None:
    if streaming:
        first = sse_reply(chat_chunks(["4"], reasoning=["Two and ", "two."], reasoning_field=field))
    else:
        first = json_reply(chat_completion("4", reasoning="Two and two.", reasoning_field=field))
    api.script(first, json_reply(chat_completion("8")))

    events = await events_of(openai_model, QUESTION) if streaming else []
    response = events[-1] if streaming else await openai_model.complete(QUESTION)
    await openai_model.complete([*QUESTION, response.message, Message("user", "Doubled?")])

    assert response.message.content == (ThinkingBlock("Two and two."), TextBlock("4"))
    if streaming:
        assert [e.thinking for e in events if isinstance(e, ThinkingDelta)] == ["Two and ", "two."]
    assert api.requests[1].body["messages"][2] == {"role": "assistant", "content": "4"}
    assert api.refused == []


async def test_openai_reasoning_never_reaches_anthropic_unsigned(
    api: FakeAPI, anthropic_model: AnthropicModel
) -> None:
    window = [
        Message("user", "2 + 2?"),
        Message("assistant", [ThinkingBlock("Two and two."), TextBlock("4")]),
        Message("user", "Doubled?"),
    ]
    api.script(json_reply(message(text_block("8"))))

    await anthropic_model.complete(window)

    assert api.requests[0].body["messages"][1] == {"role": "assistant", "content": "4"}
    assert api.refused == []


# -- structured output -----------------------------------------------------------------------

CITY = OutputSchema(
    "city",
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["name"],
    },
    description="A city and its population.",
)
SHAPED = ModelSettings(output_schema=CITY)


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
async def test_openai_asks_for_a_strict_json_schema(
    api: FakeAPI, openai_model: OpenAIModel, streaming: bool
) -> None:
    answer = '{"name": "Oslo", "population": null}'
    api.script(
        sse_reply(chat_chunks([answer[:10], answer[10:]]))
        if streaming
        else json_reply(chat_completion(answer))
    )

    response = await reply_of(openai_model, streaming, QUESTION, settings=SHAPED)

    sent = api.requests[0].body["response_format"]
    assert sent["type"] == "json_schema"
    assert (sent["json_schema"]["name"], sent["json_schema"]["strict"]) == ("city", True)
    assert sent["json_schema"]["description"] == "A city and its population."
    schema = sent["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == ["name", "population"]  # strict: all required
    assert json.loads(response.message.text) == {"name": "Oslo", "population": None}
    assert api.refused == []


async def test_openai_sends_a_loose_schema_as_it_is(
    api: FakeAPI, openai_model: OpenAIModel
) -> None:
    loose = OutputSchema("city", CITY.schema, strict=False)
    api.script(json_reply(chat_completion('{"name": "Oslo"}')))

    await openai_model.complete(QUESTION, settings=ModelSettings(output_schema=loose))

    sent = api.requests[0].body["response_format"]["json_schema"]
    assert (sent["strict"], sent["schema"]) == (False, dict(CITY.schema))


def anthropic_answer(streaming: bool, tool_input: dict[str, Any], *more: Any) -> Reply:
    if streaming:
        text = json.dumps(tool_input)
        calls = [("tool_use", (i, n, [json.dumps(a)])) for i, n, a in more]
        return sse_reply(
            message_events(("tool_use", ("toolu_9", "city", [text[:8], text[8:]])), *calls)
        )
    blocks = [tool_use_block(i, n, a) for i, n, a in more]
    return json_reply(message(tool_use_block("toolu_9", "city", tool_input), *blocks))


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
async def test_anthropic_answers_through_a_final_tool_whose_input_is_the_text(
    api: FakeAPI, anthropic_model: AnthropicModel, streaming: bool
) -> None:
    api.script(anthropic_answer(streaming, {"name": "Oslo", "population": 700000}))

    events = await events_of(anthropic_model, QUESTION, settings=SHAPED) if streaming else []
    response = (
        events[-1] if streaming else await anthropic_model.complete(QUESTION, settings=SHAPED)
    )

    body = api.requests[0].body
    [final] = body["tools"]
    assert (final["name"], final["description"]) == ("city", "A city and its population.")
    assert final["input_schema"]["additionalProperties"] is False
    assert body["tool_choice"] == {"type": "tool", "name": "city"}
    assert response.message.tool_uses == ()
    assert json.loads(response.message.text) == {"name": "Oslo", "population": 700000}
    if streaming:  # the JSON is written as text, piece by piece
        pieces = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert pieces == response.message.text
        assert not any(isinstance(e, ToolCallDelta) for e in events)
    assert api.refused == []


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
async def test_beside_real_tools_the_final_tool_is_offered_and_real_calls_stay_calls(
    api: FakeAPI, anthropic_model: AnthropicModel, search: Any, streaming: bool
) -> None:
    api.script(
        anthropic_answer(streaming, {"name": "Oslo"}, ("toolu_1", "search", {"query": "Oslo"}))
    )

    response = await reply_of(anthropic_model, streaming, QUESTION, [search], settings=SHAPED)

    body = api.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["search", "city"]
    assert body["tool_choice"] == {"type": "any"}
    assert response.message.tool_uses == (ToolUseBlock("toolu_1", "search", {"query": "Oslo"}),)
    assert json.loads(response.message.text) == {"name": "Oslo"}  # kept, as text before the call


async def test_extended_thinking_is_asked_not_forced_to_answer(
    api: FakeAPI, anthropic_model: AnthropicModel
) -> None:
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    api.script(anthropic_answer(False, {"name": "Oslo"}))

    await anthropic_model.complete(
        QUESTION, settings=ModelSettings(output_schema=CITY, extra_body=thinking)
    )

    assert api.requests[0].body["tool_choice"] == {"type": "auto"}
    assert api.refused == []


async def test_an_output_schema_named_like_a_tool_is_refused(
    anthropic_model: AnthropicModel, search: Any
) -> None:
    clash = OutputSchema("search", {"type": "object", "properties": {}})

    with pytest.raises(ValueError, match="named like one of the tools"):
        anthropic_model.request(QUESTION, [search], settings=ModelSettings(output_schema=clash))


def test_the_rules_check_structured_output_and_forced_choices() -> None:
    loose_object = {"type": "object", "properties": {"name": {"type": "string"}}}
    format_ = {
        "type": "json_schema",
        "json_schema": {"name": "x", "strict": True, "schema": loose_object},
    }
    asked = {"messages": [{"role": "user", "content": "hi"}], "response_format": format_}
    forced = {
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "x", "input_schema": loose_object}],
        "tool_choice": {"type": "tool", "name": "x"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }

    assert any("additionalProperties" in problem for problem in openai_problems(asked))
    assert any("'required' must list" in problem for problem in openai_problems(asked))
    assert anthropic_problems(forced) == [
        "Thinking may not be enabled when tool_choice forces tool use."
    ]


# -- what is sent is always what the APIs take ---------------------------------------------

_TEXTS = st.sampled_from(["", " ", "\n\n", "Let me look.", "The Moon."])
_BLOCKS = st.one_of(
    _TEXTS.map(TextBlock),
    st.builds(ThinkingBlock, st.text(max_size=5), st.sampled_from([None, "sig-1"])),
    st.just(RedactedThinkingBlock("ENCRYPTED")),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """User turns and assistant replies of any blocks, each call answered in the next message."""
    messages = [Message("user", draw(_TEXTS.filter(str.strip)))]
    for turn in range(draw(st.integers(1, 4))):
        blocks: list[Any] = draw(st.lists(_BLOCKS, max_size=4))
        calls = [
            ToolUseBlock(f"call_{turn}_{n}", "search", {}) for n in range(draw(st.integers(0, 2)))
        ]
        messages.append(Message("assistant", [*blocks, *calls]))
        if calls:
            messages.append(Message("user", [ToolResultBlock(c.id, draw(_TEXTS)) for c in calls]))
        else:
            messages.append(Message("user", [TextBlock(draw(_TEXTS))]))
    return messages


@given(conversations())
@settings(max_examples=200, deadline=None)
def test_whatever_a_conversation_holds_the_wire_sends_only_what_the_apis_take(
    messages: list[Message],
) -> None:
    _, anthropic = to_anthropic(messages)
    openai = to_openai(messages)

    assert anthropic_problems({"max_tokens": 10, "messages": anthropic}) == []
    assert openai_problems({"messages": openai}) == []
