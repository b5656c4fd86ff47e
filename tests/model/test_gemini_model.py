"""GeminiModel through the official `google-genai` SDK, against the strict local Gemini server."""

from __future__ import annotations

import base64
import itertools
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    ContextConfig,
    FallbackModel,
    GeminiModel,
    ImageBlock,
    LoopFinished,
    LoopStop,
    MemoryContextStore,
    Message,
    ModelAPIError,
    ModelLoop,
    ModelResponse,
    ModelResponseError,
    ModelRetry,
    ModelSettings,
    OutputSchema,
    RetryPolicy,
    SQLiteContextStore,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    connect,
    from_dict,
    to_dict,
    to_gemini,
    to_gemini_tools,
    tool,
)
from pygents_ctx.context.wire._gemini import GEMINI_MADE_ID

from .fake_api import Reply, Request, json_reply, sse_reply
from .fake_gemini import (
    FakeGemini,
    blocked_response,
    call,
    candidate_response,
    chunk,
    gemini_error,
    signed_call,
    stream_chunks,
    text,
    usage,
)

QUESTION = [Message("system", "Be brief."), Message("user", "Tides?")]
FAST = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.01, jitter=0.0)


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeGemini]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = await FakeGemini().start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
def model(api: FakeGemini) -> GeminiModel:
    return GeminiModel("gemini-test", base_url=api.url, api_key="test-key", timeout=5)


@pytest.fixture
def search() -> Any:
    @tool
    async def search(query: str, limit: int = 3) -> str:
        """Search the library."""
        return f"{limit} documents about {query}"

    return search


@pytest.fixture
def weather() -> Any:
    @tool
    async def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return weather


async def collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


async def reply_of(
    model: GeminiModel,
    streaming: bool,
    window: list[Message] = QUESTION,
    tools: list[Any] = (),  # type: ignore[assignment]
    **options: Any,
) -> tuple[ModelResponse, list[Any]]:
    """The reply, through `stream()` (its last event, and the deltas) or `complete()`."""
    if not streaming:
        return await model.complete(window, tools, **options), []
    *deltas, final = await collect(model.stream(window, tools, **options))
    assert isinstance(final, ModelResponse)
    return final, deltas


def scripted(streaming: bool, *bodies: dict[str, Any]) -> Reply:
    """The reply `bodies` as one JSON body (the last) or as a stream of chunks (all)."""
    return sse_reply(stream_chunks(*bodies)) if streaming else json_reply(bodies[-1])


def loop_for(model: Any, tools: list[Any] = (), **options: Any) -> ModelLoop:  # type: ignore[assignment]
    agent = Agent("helper", "Helps", list(tools), context=ContextConfig(MemoryContextStore()))
    options.setdefault("retry", FAST)
    return ModelLoop(agent, model, **options)


async def run(loop: ModelLoop, streaming: bool, prompt: str | None) -> LoopFinished:
    if not streaming:
        return await loop.run(prompt)
    events = await collect(loop.stream(prompt))
    assert isinstance(events[-1], LoopFinished)
    return events[-1]


BOTH = pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])


# -- what is sent -------------------------------------------------------------------------------


async def test_the_request_has_the_system_instruction_tools_and_generation_config(
    api: FakeGemini, model: GeminiModel, search: Any
) -> None:
    api.script(json_reply(candidate_response(text("Moon."))))
    chosen = ModelSettings(max_tokens=64, temperature=0.5, top_p=0.9, stop=("END",))

    await model.complete(QUESTION, [search], settings=chosen)

    [request] = api.requests
    assert request.path == "/v1/models/gemini-test:generateContent"
    assert request.headers["x-goog-api-key"] == "test-key"
    body = request.body
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Tides?"}]}]
    [declaration] = body["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "search"
    assert declaration["description"] == "Search the library."
    assert declaration["parametersJsonSchema"]["required"] == ["query"]
    assert body["generationConfig"] == {
        "maxOutputTokens": 64,
        "temperature": 0.5,
        "topP": 0.9,
        "stopSequences": ["END"],
    }
    assert "toolConfig" not in body
    assert api.refused == []


@pytest.mark.parametrize(
    ("choice", "calling"),
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        ("none", {"mode": "NONE"}),
        ("weather", {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
    ],
)
async def test_tool_choice_becomes_the_function_calling_config(
    api: FakeGemini,
    model: GeminiModel,
    choice: str,
    calling: dict[str, Any],
    search: Any,
    weather: Any,
) -> None:
    api.script(json_reply(candidate_response(text("ok"))))

    await model.complete(QUESTION, [search, weather], settings=ModelSettings(tool_choice=choice))

    assert api.requests[0].body["toolConfig"] == {"functionCallingConfig": calling}
    assert api.refused == []


async def test_a_tool_choice_naming_no_offered_tool_is_refused_before_any_call(
    api: FakeGemini, model: GeminiModel, search: Any
) -> None:
    with pytest.raises(ValueError, match=r"tool_choice names 'lookup'.*\(search\)"):
        await model.complete(QUESTION, [search], settings=ModelSettings(tool_choice="lookup"))
    assert api.requests == []


async def test_extra_body_is_merged_into_the_request_and_extra_headers_are_sent(
    api: FakeGemini, model: GeminiModel
) -> None:
    api.script(json_reply(candidate_response(text("ok"))))
    thinking = {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    chosen = ModelSettings(max_tokens=20, extra_body=thinking, extra_headers={"x-trace": "t1"})

    await model.complete(QUESTION, settings=chosen)

    request = api.requests[0]
    assert request.body["generationConfig"] == {
        "maxOutputTokens": 20,
        "thinkingConfig": {"includeThoughts": True},
    }
    assert request.headers["x-trace"] == "t1"


async def test_the_models_own_settings_are_defaults_a_call_overrides(api: FakeGemini) -> None:
    model = GeminiModel(
        "gemini-test",
        base_url=api.url,
        api_key="k",
        settings=ModelSettings(max_tokens=100, temperature=0.1),
    )
    api.script(json_reply(candidate_response(text("ok"))))

    await model.complete(QUESTION, settings=ModelSettings(temperature=0.7))

    assert api.requests[0].body["generationConfig"] == {"maxOutputTokens": 100, "temperature": 0.7}


async def test_images_go_as_inline_data_and_blank_text_is_left_out(
    api: FakeGemini, model: GeminiModel
) -> None:
    api.script(json_reply(candidate_response(text("A cat."))))
    window = [
        Message(
            "user", [TextBlock("What is this?"), TextBlock("  "), ImageBlock("image/png", b"png")]
        )
    ]

    await model.complete(window)

    assert api.requests[0].body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is this?"},
                {
                    "inlineData": {
                        "mimeType": "image/png",
                        "data": base64.b64encode(b"png").decode(),
                    }
                },
            ],
        }
    ]
    assert api.refused == []


async def test_messages_of_one_role_in_a_row_become_one_content(
    api: FakeGemini, model: GeminiModel
) -> None:
    api.script(json_reply(candidate_response(text("ok"))))
    window = [Message("user", "First."), Message("user", "Second."), Message("assistant", [])]

    await model.complete([*window, Message("user", "Third.")])

    assert api.requests[0].body["contents"] == [
        {"role": "user", "parts": [{"text": "First."}, {"text": "Second."}, {"text": "Third."}]}
    ]


@pytest.mark.parametrize(
    ("window", "error"),
    [
        (
            [Message("user", "Hi"), Message("system", "Be terse.")],
            r"messages\[1\] is a system message after the conversation started",
        ),
        (
            [Message("user", [ToolResultBlock("call_9", "42")])],
            r"messages\[0\]\.content\[0\]\.tool_use_id 'call_9' answers no earlier tool call",
        ),
        (
            [
                Message("user", "Draw"),
                Message("assistant", [ToolUseBlock("c1", "draw", {})]),
                Message("user", [ToolResultBlock("c1", [ImageBlock("image/png", b"x")])]),
            ],
            r"messages\[2\]\.content\[0\]\.content holds an image",
        ),
        (
            [Message("user", [ToolUseBlock("c1", "draw", {})])],
            r"messages\[0\]\.content\[0\] is a tool call .* a Gemini user turn cannot carry",
        ),
    ],
    ids=["late-system", "orphan-result", "image-result", "call-in-user"],
)
async def test_a_window_gemini_cannot_carry_is_refused_naming_the_field(
    api: FakeGemini, model: GeminiModel, window: list[Message], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        await model.complete(window)
    assert api.requests == []


# -- what comes back ----------------------------------------------------------------------------


@BOTH
async def test_a_text_reply(api: FakeGemini, model: GeminiModel, streaming: bool) -> None:
    api.script(
        scripted(streaming, chunk(text("Tides come ")), candidate_response(text("from the Moon.")))
        if streaming
        else json_reply(candidate_response(text("Tides come from the Moon.")))
    )

    reply, deltas = await reply_of(model, streaming)

    assert reply.message == Message("assistant", [TextBlock("Tides come from the Moon.")])
    assert (reply.finish_reason, reply.refusal, reply.model) == ("stop", None, "gemini-test-001")
    assert reply.usage == Usage(10, 5)
    if streaming:
        assert deltas == [TextDelta("Tides come "), TextDelta("from the Moon.")]
        assert api.requests[0].path == "/v1/models/gemini-test:streamGenerateContent?alt=sse"


@BOTH
async def test_a_function_call_with_an_id_keeps_it(
    api: FakeGemini, model: GeminiModel, streaming: bool, search: Any
) -> None:
    api.script(scripted(streaming, candidate_response(call("search", {"query": "tides"}, "fc_1"))))

    reply, deltas = await reply_of(model, streaming, tools=[search])

    assert reply.message.content == (ToolUseBlock("fc_1", "search", {"query": "tides"}),)
    if streaming:
        assert deltas == [ToolCallDelta(0, "fc_1", "search", '{"query":"tides"}')]


@BOTH
async def test_parallel_calls_without_ids_get_distinct_ids_of_their_own(
    api: FakeGemini, model: GeminiModel, streaming: bool, search: Any
) -> None:
    api.script(
        scripted(
            streaming,
            chunk(call("search", {"query": "tides"})),
            candidate_response(call("search", {"query": "moon"})),
        )
        if streaming
        else json_reply(
            candidate_response(
                call("search", {"query": "tides"}), call("search", {"query": "moon"})
            )
        )
    )

    reply, deltas = await reply_of(model, streaming, tools=[search])

    first, second = reply.message.tool_uses
    assert (first.input, second.input) == ({"query": "tides"}, {"query": "moon"})
    assert first.id != second.id
    assert first.id.startswith(GEMINI_MADE_ID)
    assert second.id.startswith(GEMINI_MADE_ID)
    if streaming:
        assert [(d.index, d.id) for d in deltas] == [(0, first.id), (1, second.id)]


async def test_results_of_calls_without_ids_pair_by_order_and_carry_no_id(
    api: FakeGemini, model: GeminiModel, search: Any, weather: Any
) -> None:
    api.script(
        json_reply(
            candidate_response(
                call("search", {"query": "tides"}), call("weather", {"city": "Oslo"})
            )
        ),
        json_reply(candidate_response(text("Done."))),
    )
    reply = await model.complete(QUESTION, [search, weather])
    first, second = reply.message.tool_uses
    results = Message(
        "user",
        [ToolResultBlock(first.id, "3 docs"), ToolResultBlock(second.id, "no", is_error=True)],
    )

    await model.complete([*QUESTION, reply.message, results], [search, weather])

    assert api.refused == []
    model_turn, answers = api.requests[1].body["contents"][1:]
    assert model_turn["parts"] == [
        {"functionCall": {"name": "search", "args": {"query": "tides"}}},
        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}},
    ]
    assert answers == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "search", "response": {"result": "3 docs"}}},
            {"functionResponse": {"name": "weather", "response": {"error": "no"}}},
        ],
    }


async def test_results_of_calls_with_ids_carry_their_ids(
    api: FakeGemini, model: GeminiModel, search: Any
) -> None:
    api.script(
        json_reply(
            candidate_response(
                call("search", {"query": "a"}, "fc_1"), call("search", {"query": "b"}, "fc_2")
            )
        ),
        json_reply(candidate_response(text("Done."))),
    )
    reply = await model.complete(QUESTION, [search])
    results = Message("user", [ToolResultBlock("fc_1", "A"), ToolResultBlock("fc_2", "B")])

    await model.complete([*QUESTION, reply.message, results], [search])

    assert api.refused == []
    answers = api.requests[1].body["contents"][-1]["parts"]
    assert [part["functionResponse"]["id"] for part in answers] == ["fc_1", "fc_2"]


@BOTH
async def test_thought_summaries_become_thinking_blocks_and_thought_tokens_count(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    metadata = usage(40, 6, thoughts=25)
    api.script(
        scripted(
            streaming,
            chunk(text("Tides follow ", thought=True)),
            chunk(text("the Moon.", thought=True)),
            candidate_response(text("The Moon."), usage_metadata=metadata),
        )
        if streaming
        else json_reply(
            candidate_response(
                text("Tides follow the Moon.", thought=True),
                text("The Moon."),
                usage_metadata=metadata,
            )
        )
    )

    reply, deltas = await reply_of(model, streaming)

    assert reply.message.content == (
        ThinkingBlock("Tides follow the Moon."),
        TextBlock("The Moon."),
    )
    assert reply.usage == Usage(40, 31, reasoning_tokens=25)  # the thoughts are output too
    if streaming:
        assert deltas == [
            ThinkingDelta("Tides follow "),
            ThinkingDelta("the Moon."),
            TextDelta("The Moon."),
        ]


@BOTH
async def test_usage_counts_cached_and_tool_prompt_tokens(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    metadata = {**usage(1000, 20, cached=800), "toolUsePromptTokenCount": 50}
    api.script(scripted(streaming, candidate_response(text("ok"), usage_metadata=metadata)))

    reply, _ = await reply_of(model, streaming)

    assert reply.usage == Usage(1050, 20, cached_tokens=800)


# -- thought signatures -------------------------------------------------------------------------


@BOTH
async def test_a_call_signature_is_kept_on_its_block_and_sent_back_on_its_part(
    api: FakeGemini, model: GeminiModel, streaming: bool, search: Any
) -> None:
    first = signed_call(api, "search", {"query": "tides"})
    api.script(
        scripted(streaming, candidate_response(first, call("search", {"query": "moon"}))),
        json_reply(candidate_response(text("Done."))),
    )
    reply, _ = await reply_of(model, streaming, tools=[search])
    signed, unsigned = reply.message.tool_uses
    assert (signed.signature, unsigned.signature) == (first["thoughtSignature"], None)
    results = Message("user", [ToolResultBlock(c.id, "x") for c in reply.message.tool_uses])

    await model.complete([*QUESTION, reply.message, results], [search])

    assert api.refused == []
    parts = api.requests[1].body["contents"][1]["parts"]
    assert parts[0]["thoughtSignature"] == first["thoughtSignature"]
    assert "thoughtSignature" not in parts[1]


async def test_the_server_refuses_a_signed_call_sent_back_without_its_signature(
    api: FakeGemini, model: GeminiModel, search: Any
) -> None:
    first = signed_call(api, "search", {"query": "tides"})
    api.script(json_reply(candidate_response(first)))
    reply = await model.complete(QUESTION, [search])
    [made] = reply.message.tool_uses
    stripped = Message("assistant", [ToolUseBlock(made.id, made.name, made.input)])

    with pytest.raises(ModelAPIError, match="missing a `thought_signature`") as caught:
        await model.complete(
            [*QUESTION, stripped, Message("user", [ToolResultBlock(made.id, "x")])], [search]
        )

    assert (caught.value.status_code, caught.value.transient) == (400, False)


async def test_a_text_signature_in_the_last_stream_chunk_lands_on_the_text(
    api: FakeGemini, model: GeminiModel
) -> None:
    signature = api.sign()
    api.script(
        sse_reply(
            stream_chunks(
                chunk(text("Hel")), chunk(text("lo")), candidate_response(text("", signature))
            )
        )
    )

    reply, _ = await reply_of(model, True)

    [block] = reply.message.content
    assert (block.text, block.signature) == ("Hello", signature)
    api.script(json_reply(candidate_response(text("ok"))))
    await model.complete([*QUESTION, reply.message, Message("user", "More?")])
    assert api.refused == []
    assert api.requests[1].body["contents"][1] == {
        "role": "model",
        "parts": [{"text": "Hello", "thoughtSignature": signature}],
    }


async def test_a_signed_thought_is_sent_back_and_an_unsigned_one_is_not(
    api: FakeGemini, model: GeminiModel
) -> None:
    signature = api.sign()
    api.script(json_reply(candidate_response(text("ok"))))
    turn = Message(
        "assistant",
        [ThinkingBlock("mine", signature), ThinkingBlock("another provider's"), TextBlock("Hi")],
    )

    await model.complete([Message("user", "Hi"), turn, Message("user", "And?")])

    assert api.requests[0].body["contents"][1]["parts"] == [
        {"text": "mine", "thought": True, "thoughtSignature": signature},
        {"text": "Hi"},
    ]
    assert api.refused == []


async def test_signatures_survive_a_saved_session_and_go_back_in_place(
    api: FakeGemini, model: GeminiModel, tmp_path: Any, weather: Any
) -> None:
    first = signed_call(api, "weather", {"city": "Oslo"})
    note = api.sign()
    api.script(
        json_reply(candidate_response(text("Checking.", note), first)),
        json_reply(candidate_response(text("Sunny in Oslo."))),
        json_reply(candidate_response(text("You're welcome."))),
    )
    path = tmp_path / "s.db"
    async with connect(path) as conn:
        agent = Agent(
            "first", "b", [weather], context=ContextConfig(SQLiteContextStore(conn, session_id="s"))
        )
        assert (await ModelLoop(agent, model, retry=FAST).run("Oslo?")).text == "Sunny in Oslo."
    async with connect(path) as conn:
        agent = Agent(
            "a", "b", [weather], context=ContextConfig(SQLiteContextStore(conn, session_id="s"))
        )
        later = await ModelLoop(agent, model, retry=FAST).run("Thanks!")

    assert later.text == "You're welcome."
    assert api.refused == []
    sent = api.requests[2].body["contents"][1]["parts"]
    assert sent[0] == {"text": "Checking.", "thoughtSignature": note}
    assert sent[1]["thoughtSignature"] == first["thoughtSignature"]


def test_signatures_round_trip_through_the_dict_form() -> None:
    message = Message(
        "assistant",
        [
            TextBlock("Hi", signature="c2ln"),
            ToolUseBlock("c1", "f", {"a": 1}, signature="c2lnMg=="),
        ],
    )

    data = to_dict(message)

    assert data["content"][0]["signature"] == "c2ln"
    assert data["content"][1]["signature"] == "c2lnMg=="
    assert from_dict(data) == message
    assert "signature" not in to_dict(TextBlock("plain"))
    with pytest.raises(TypeError, match=r"ToolUseBlock\.signature must be str"):
        ToolUseBlock("c1", "f", {}, signature=b"raw")  # type: ignore[arg-type]


# -- how a reply ends ---------------------------------------------------------------------------


@BOTH
async def test_max_tokens_is_a_length_stop(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    api.script(
        scripted(streaming, candidate_response(text("Tides come from"), finish="MAX_TOKENS"))
    )

    reply, _ = await reply_of(model, streaming)

    assert (reply.finish_reason, reply.hit_length_limit, reply.refusal) == (
        "max_tokens",
        True,
        None,
    )
    assert reply.message.text == "Tides come from"


@pytest.mark.parametrize(
    "reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"]
)
@BOTH
async def test_a_reply_stopped_for_its_content_is_a_refusal_naming_the_reason(
    api: FakeGemini, model: GeminiModel, streaming: bool, reason: str
) -> None:
    ratings = [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
        {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
    ]
    api.script(
        scripted(
            streaming,
            candidate_response(finish=reason, ratings=ratings),
        )
    )

    reply, _ = await reply_of(model, streaming)

    assert reply.finish_reason == reason.lower()
    assert reply.refusal == (
        f"Gemini stopped the reply for {reason} (HARM_CATEGORY_DANGEROUS_CONTENT)"
    )
    assert reply.message.content == ()


@BOTH
async def test_a_blocked_prompt_is_a_refusal_with_the_block_reason(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    api.script(
        scripted(streaming, blocked_response("PROHIBITED_CONTENT", "The prompt was blocked."))
    )

    reply, _ = await reply_of(model, streaming)

    assert reply.message == Message("assistant", [])
    assert reply.finish_reason == "prohibited_content"
    assert reply.refusal == (
        "Gemini blocked the prompt (blockReason PROHIBITED_CONTENT): The prompt was blocked."
    )
    assert reply.usage == Usage(7, 0)


@BOTH
async def test_a_reply_with_no_candidates_and_no_block_reason_is_a_response_error(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    api.script(scripted(streaming, blocked_response(None)))

    with pytest.raises(ModelResponseError, match=r"no candidates and no promptFeedback\.block"):
        await reply_of(model, streaming)


@BOTH
async def test_a_malformed_function_call_is_transient(
    api: FakeGemini, model: GeminiModel, streaming: bool, search: Any
) -> None:
    api.script(
        scripted(
            streaming,
            candidate_response(finish="MALFORMED_FUNCTION_CALL"),
        )
    )

    with pytest.raises(
        ModelAPIError, match=r"finishReason MALFORMED_FUNCTION_CALL\); asking again"
    ) as caught:
        await reply_of(model, streaming, tools=[search])

    assert caught.value.transient


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "transient"), [(400, False), (403, False), (429, True), (500, True), (503, True)]
)
@BOTH
async def test_http_errors_are_translated_once_without_the_sdks_retries(
    api: FakeGemini, model: GeminiModel, streaming: bool, status: int, transient: bool
) -> None:
    api.script(gemini_error(status, "Quota exceeded for this minute.", retry_after="7"))

    with pytest.raises(ModelAPIError) as caught:
        await reply_of(model, streaming)

    error = caught.value
    assert (error.status_code, error.transient) == (status, transient)
    assert str(error).count(f"HTTP {status}") == 1
    assert "Quota exceeded for this minute." in str(error)
    assert len(api.requests) == 1  # the SDK did not try again on its own
    if status == 429:
        assert error.retry_after == 7.0


@pytest.mark.parametrize("cut", ["end", "drop"])
async def test_a_stream_cut_before_its_finish_reason_is_transient(
    api: FakeGemini, model: GeminiModel, cut: str
) -> None:
    events = stream_chunks(
        chunk(text("Tides ")), chunk(text("come")), candidate_response(text("."))
    )
    api.script(Reply(events=events, cut_after=2, cut=cut))  # type: ignore[arg-type]

    with pytest.raises(ModelAPIError) as caught:
        await collect(model.stream(QUESTION))

    assert caught.value.transient
    assert len(api.requests) == 1  # the SDK did not resume the stream on its own


async def test_an_error_inside_a_stream_is_a_model_api_error(
    api: FakeGemini, model: GeminiModel
) -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    api.script(sse_reply([*stream_chunks(chunk(text("Ti"))), (None, json.dumps(error))]))

    with pytest.raises(ModelAPIError, match="The model is overloaded") as caught:
        await collect(model.stream(QUESTION))

    assert caught.value.transient


async def test_a_dropped_connection_is_transient(api: FakeGemini, model: GeminiModel) -> None:
    api.script(Reply(drop=True))

    with pytest.raises(ModelAPIError) as caught:
        await model.complete(QUESTION)

    assert caught.value.transient


# -- the loop -----------------------------------------------------------------------------------


@BOTH
async def test_a_model_loop_runs_parallel_calls_and_the_next_request_is_valid(
    api: FakeGemini, model: GeminiModel, streaming: bool, search: Any, weather: Any
) -> None:
    first = signed_call(api, "search", {"query": "tides"})
    api.script(
        scripted(
            streaming,
            candidate_response(
                first, call("weather", {"city": "Oslo"}), usage_metadata=usage(50, 9)
            ),
        ),
        scripted(
            streaming,
            candidate_response(
                text("Tides come from the Moon."), usage_metadata=usage(80, 7, cached=48)
            ),
        ),
    )
    loop = loop_for(model, [search, weather], instructions="Cite the library.")

    finished = await run(loop, streaming, "What causes tides?")

    assert finished.reason is LoopStop.ANSWER
    assert finished.text == "Tides come from the Moon."
    assert (finished.steps, finished.usage) == (2, Usage(130, 16, cached_tokens=48))
    assert api.refused == []
    second = api.requests[1].body
    assert second["systemInstruction"] == {"parts": [{"text": "Cite the library."}]}
    answers = second["contents"][-1]
    assert answers["parts"] == [
        {"functionResponse": {"name": "search", "response": {"result": "3 documents about tides"}}},
        {"functionResponse": {"name": "weather", "response": {"result": "sunny in Oslo"}}},
    ]


@BOTH
async def test_a_model_loop_retries_429_and_500_through_its_policy(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    api.script(
        gemini_error(429, retry_after="0"),
        gemini_error(500),
        scripted(streaming, candidate_response(text("Fine."))),
    )
    loop = loop_for(model)

    if streaming:
        events = await collect(loop.stream("Hi"))
        retries = [e for e in events if isinstance(e, ModelRetry)]
        finished = events[-1]
    else:
        finished = await loop.run("Hi")
        retries = [None, None]

    assert finished.text == "Fine."
    assert len(retries) == 2
    assert len(api.requests) == 3


@BOTH
async def test_a_model_loop_gets_structured_output(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    from dataclasses import dataclass

    @dataclass
    class Forecast:
        city: str
        rain: bool

    api.script(scripted(streaming, candidate_response(text('{"city": "Oslo", "rain": true}'))))
    loop = loop_for(model, output_type=Forecast)

    finished = await run(loop, streaming, "Rain in Oslo?")

    assert finished.output == Forecast("Oslo", True)
    config = api.requests[0].body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["required"] == ["city", "rain"]


async def test_an_output_schema_is_sent_as_the_response_json_schema(
    api: FakeGemini, model: GeminiModel
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    api.script(json_reply(candidate_response(text('{"n": 3}'))))

    reply = await model.complete(
        QUESTION, settings=ModelSettings(output_schema=OutputSchema("count", schema))
    )

    assert reply.message.text == '{"n": 3}'
    assert api.requests[0].body["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


@BOTH
async def test_a_safety_stop_ends_the_run_and_the_next_prompt_is_valid(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    api.script(
        scripted(streaming, candidate_response(text("Here is how"), finish="SAFETY")),
        json_reply(candidate_response(text("Sure."))),
    )
    loop = loop_for(model)

    finished = await run(loop, streaming, "How do I pick a lock?")

    assert finished.reason is LoopStop.REFUSAL
    assert finished.refusal == "Gemini stopped the reply for SAFETY"
    assert len(api.requests) == 1
    again = await loop.run("Something else")
    assert again.text == "Sure."
    assert api.refused == []
    assert "Here is how" not in json.dumps(api.requests[1].body)


@BOTH
async def test_a_refusal_in_a_tool_calling_turn_leaves_no_call_without_its_result(
    api: FakeGemini, model: GeminiModel, streaming: bool, search: Any
) -> None:
    api.script(
        scripted(
            streaming, candidate_response(call("search", {"query": "locks"}), finish="SAFETY")
        ),
        json_reply(candidate_response(text("Sure."))),
    )
    loop = loop_for(model, [search])

    finished = await run(loop, streaming, "Find lock picking guides")

    assert finished.reason is LoopStop.REFUSAL
    assert (await loop.run("Something else")).text == "Sure."
    assert api.refused == []  # no call was sent back without its response


@BOTH
async def test_a_blocked_prompt_ends_the_run_and_the_next_prompt_is_valid(
    api: FakeGemini, model: GeminiModel, streaming: bool
) -> None:
    api.script(
        scripted(streaming, blocked_response("SAFETY")),
        json_reply(candidate_response(text("Hello."))),
    )
    loop = loop_for(model)

    finished = await run(loop, streaming, "Something blocked")

    assert (finished.reason, finished.refusal) == (
        LoopStop.REFUSAL,
        "Gemini blocked the prompt (blockReason SAFETY)",
    )
    assert (await loop.run("Hi")).text == "Hello."
    assert api.refused == []


async def test_a_fallback_model_moves_on_from_a_failing_gemini(api: FakeGemini) -> None:
    first = GeminiModel("gemini-a", base_url=api.url, api_key="k")
    second = GeminiModel("gemini-b", base_url=api.url, api_key="k")
    api.script(gemini_error(503), json_reply(candidate_response(text("From b."))))
    loop = loop_for(FallbackModel(first, second), retry=RetryPolicy(max_attempts=1))

    finished = await loop.run("Hi")

    assert finished.text == "From b."
    assert [r.path.split(":")[0] for r in api.requests] == [
        "/v1/models/gemini-a",
        "/v1/models/gemini-b",
    ]


# -- any conversation ---------------------------------------------------------------------------

_texts = st.sampled_from(["", "Hi", "tides?", "é 🌊", "  "])


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """A valid conversation to send: user and model turns, each call answered, a user turn last."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message("system", draw(st.sampled_from(["Be brief.", "Cite."]))))
    for turn in range(draw(st.integers(1, 4))):
        messages.append(Message("user", draw(st.sampled_from(["Go", "Why?", "é 🌊"]))))
        blocks: list[Any] = []
        if draw(st.booleans()):
            blocks.append(TextBlock(draw(_texts)))
        calls = draw(st.integers(0, 3))
        for number in range(calls):
            call_id = (
                f"fc_{turn}_{number}" if draw(st.booleans()) else f"{GEMINI_MADE_ID}{turn}{number}"
            )
            blocks.append(ToolUseBlock(call_id, "search", {"query": draw(_texts)}))
        messages.append(Message("assistant", blocks))
        if calls:
            results = [
                ToolResultBlock(b.id, draw(_texts), draw(st.booleans()))
                for b in blocks
                if isinstance(b, ToolUseBlock)
            ]
            messages.append(Message("user", results))
    messages.append(Message("user", "And now?"))
    return messages


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=conversations())
def test_any_valid_conversation_is_a_request_the_strict_server_takes(
    messages: list[Message], search: Any
) -> None:
    system, contents = to_gemini(messages)
    body: dict[str, Any] = {"contents": contents, "tools": to_gemini_tools([search])}
    if system is not None:
        body["systemInstruction"] = system
    request = Request("POST", "/v1beta/models/g:generateContent", {"x-goog-api-key": "k"}, body)

    problems = FakeGemini().problems(request)

    assert problems == []
    roles = [content["role"] for content in contents]
    assert all(a != b for a, b in itertools.pairwise(roles))  # turns alternate
    calls = sum(len(m.tool_uses) for m in messages)
    sent = [p for c in contents for p in c["parts"] if "functionCall" in p]
    assert len(sent) == calls  # every call sent, each in its place


# -- wiring -------------------------------------------------------------------------------------


def test_an_empty_model_name_is_refused() -> None:
    with pytest.raises(ValueError, match="GeminiModel needs a model name"):
        GeminiModel("", api_key="k")


@pytest.mark.parametrize("async_part", [False, True], ids=["client", "client.aio"])
async def test_a_client_of_your_own_is_used(api: FakeGemini, async_part: bool) -> None:
    from google import genai

    client = genai.Client(api_key="own-key", http_options={"base_url": api.url})
    model = GeminiModel("gemini-test", client=client.aio if async_part else client)
    api.script(json_reply(candidate_response(text("Mine."))))

    assert (await model.complete(QUESTION)).message.text == "Mine."
    assert api.requests[0].headers["x-goog-api-key"] == "own-key"


def test_a_client_that_is_not_a_gemini_client_is_refused() -> None:
    with pytest.raises(TypeError, match=r"needs a google\.genai\.Client .*not a dict"):
        GeminiModel("gemini-test", client={})


async def test_leaving_a_stream_early_closes_it(api: FakeGemini, model: GeminiModel) -> None:
    api.script(
        sse_reply(
            stream_chunks(
                chunk(text("One ")), chunk(text("two ")), candidate_response(text("three"))
            )
        ),
        json_reply(candidate_response(text("Next."))),
    )
    stream = model.stream(QUESTION)
    assert await anext(stream) == TextDelta("One ")
    await stream.aclose()

    assert (await model.complete(QUESTION)).message.text == "Next."


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google.genai", None)

    with pytest.raises(ImportError, match=r"pip install -e '\.\[gemini\]' from a checkout"):
        GeminiModel("gemini-test", api_key="k")


async def test_tracing_names_the_provider_gcp_gemini(api: FakeGemini, model: GeminiModel) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from pygents_ctx.integrations.tracing import instrument, uninstrument

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    instrument(provider)
    try:
        api.script(json_reply(candidate_response(finish="SAFETY")))
        await loop_for(model).run("Hi")
    finally:
        uninstrument()

    [chat] = [span for span in spans.get_finished_spans() if span.name.startswith("chat")]
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("safety",)
