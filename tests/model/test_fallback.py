"""FallbackModel: scripted models, and the real adapters against the local servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AnthropicModel,
    ContextConfig,
    FallbackModel,
    MemoryContextStore,
    Message,
    ModelAPIError,
    ModelFallbackError,
    ModelLoop,
    ModelResponse,
    ModelResponseError,
    ModelRetry,
    ModelSettings,
    OpenAIModel,
    OpenAIResponsesModel,
    RetryPolicy,
    TextDelta,
    Usage,
    tool,
)
from pygents_ctx.testing import ScriptedModel

from .fake_api import anthropic_error, chat_chunks, json_reply, openai_error, sse_reply
from .fake_responses import (
    FakeResponsesAPI,
    error_event,
    message_item,
    response,
    response_events,
)

QUESTION = [Message("user", "Tides?")]


def answer(text: str, model: str) -> ModelResponse:
    return ModelResponse(Message("assistant", text), Usage(10, 2), model, "stop")


def missing(name: str = "gpt-missing") -> ModelAPIError:
    return ModelAPIError(f"HTTP 404: the model {name!r} does not exist", status_code=404)


def down(wait: float | None = None) -> ModelAPIError:
    return ModelAPIError("HTTP 503: overloaded", status_code=503, transient=True, retry_after=wait)


async def collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


# -- scripted models --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [missing(), down(), ModelResponseError("the reply has no choices")],
    ids=["model missing", "provider down", "unreadable reply"],
)
async def test_a_failing_model_hands_the_call_to_the_next(failure: Exception) -> None:
    first, second = ScriptedModel([failure]), ScriptedModel([answer("Moon.", "backup-1")])
    model = FallbackModel(first, second)

    reply = await model.complete(QUESTION, settings=ModelSettings(max_tokens=20))

    assert (reply.message.text, reply.model) == ("Moon.", "backup-1")  # who answered
    assert model.last_used is second
    assert len(first.calls) == len(second.calls) == 1
    assert second.calls[0].messages == tuple(QUESTION)  # the same window
    assert second.calls[0].settings == ModelSettings(max_tokens=20)  # and settings


async def test_the_first_model_that_answers_answers() -> None:
    first, second = ScriptedModel(["Sun."]), ScriptedModel(["Moon."])
    model = FallbackModel(first, second)

    assert (await model.complete(QUESTION)).message.text == "Sun."
    assert (model.last_used, second.calls) == (first, [])


async def test_when_every_model_fails_the_error_lists_each() -> None:
    first, second = ScriptedModel([missing("a")]), ScriptedModel([missing("b")])
    model = FallbackModel(first, second)

    with pytest.raises(ModelFallbackError, match=r"1\. ScriptedModel.*'a'.*; 2\. .*'b'") as failed:
        await model.complete(QUESTION)

    error = failed.value
    assert [m for m, _ in error.failures] == [first, second]
    assert [str(e) for _, e in error.failures] == [str(missing("a")), str(missing("b"))]
    assert not error.transient  # a missing model does not come back by waiting
    assert isinstance(error.__cause__, ExceptionGroup)
    assert len(error.__cause__.exceptions) == 2
    assert model.last_used is None


async def test_when_every_failure_is_transient_the_loop_retries_the_models() -> None:
    all_down = FallbackModel(ScriptedModel([down(3.0)]), ScriptedModel([down(1.5)]))
    with pytest.raises(ModelFallbackError) as failed:
        await all_down.complete(QUESTION)
    assert (failed.value.transient, failed.value.retry_after) == (True, 1.5)  # the shortest wait

    first = ScriptedModel([down(), answer("Sun.", "primary")])
    second = ScriptedModel([down()])
    agent = Agent("helper", "Helps", [], context=ContextConfig(MemoryContextStore()))
    loop = ModelLoop(
        agent, FallbackModel(first, second), retry=RetryPolicy(initial_delay=0.01, jitter=0)
    )

    events = await collect(loop.stream("Weather?"))

    [retry] = [e for e in events if isinstance(e, ModelRetry)]
    assert isinstance(retry.error, ModelFallbackError)
    assert events[-1].text == "Sun."  # the first model, back, answers first
    assert (len(first.calls), len(second.calls)) == (2, 1)


async def test_falling_back_only_on_lasting_failures_leaves_transient_ones_to_the_loop() -> None:
    first, second = ScriptedModel([down(), missing()]), ScriptedModel(["Moon."])
    model = FallbackModel(
        first, second, fall_back_on=lambda error: not getattr(error, "transient", False)
    )

    with pytest.raises(ModelAPIError, match="503") as raised:
        await model.complete(QUESTION)
    assert not isinstance(raised.value, ModelFallbackError)
    assert second.calls == []  # a transient failure is the loop's to retry

    assert (await model.complete(QUESTION)).message.text == "Moon."  # a lasting one moves on


async def test_errors_that_are_not_the_models_are_raised_at_once() -> None:
    second = ScriptedModel(["Moon."])
    model = FallbackModel(ScriptedModel([ValueError("a bug in the request")]), second)

    with pytest.raises(ValueError, match="a bug"):
        await model.complete(QUESTION)
    assert second.calls == []


async def test_a_stream_falls_back_before_its_first_event() -> None:
    first, second = ScriptedModel([missing()]), ScriptedModel([answer("The Moon.", "backup")])
    model = FallbackModel(first, second)

    events = await collect(model.stream(QUESTION))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The Moon."
    assert (events[-1].model, model.last_used) == ("backup", second)


def test_the_models_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="at least one model"):
        FallbackModel()
    with pytest.raises(TypeError, match=r"models\[1\] must be a Model.*str"):
        FallbackModel(ScriptedModel([]), "gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fall_back_on must be a function"):
        FallbackModel(ScriptedModel([]), fall_back_on=True)  # type: ignore[arg-type]
    nested = FallbackModel(FallbackModel(ScriptedModel([])), ScriptedModel([]))
    assert repr(nested).startswith("FallbackModel(FallbackModel(ScriptedModel(")


# -- real adapters against the local servers ----------------------------------------------------


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeResponsesAPI]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = await FakeResponsesAPI().start()
    try:
        yield server
    finally:
        await server.close()


def adapters(api: FakeResponsesAPI) -> tuple[OpenAIModel, AnthropicModel, OpenAIResponsesModel]:
    return (
        OpenAIModel("gpt-missing", base_url=f"{api.url}/v1", api_key="k", timeout=5),
        AnthropicModel("claude-test", base_url=api.url, api_key="k", timeout=5),
        OpenAIResponsesModel("gpt-test", base_url=f"{api.url}/v1", api_key="k", timeout=5),
    )


async def test_real_adapters_fall_back_on_a_missing_model_and_a_refused_key(
    api: FakeResponsesAPI,
) -> None:
    chat, claude, responses = adapters(api)
    api.script(
        openai_error(404, "The model `gpt-missing` does not exist", "invalid_request_error"),
        anthropic_error(401, "authentication_error", "invalid x-api-key"),
        json_reply(response(message_item("The Moon."), model="gpt-test-2025")),
    )
    model = FallbackModel(chat, claude, responses)

    reply = await model.complete(QUESTION)

    assert (reply.message.text, reply.model, model.last_used) == (
        "The Moon.",
        "gpt-test-2025",
        responses,
    )
    assert [r.path for r in api.requests] == [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/responses",
    ]


async def test_a_real_stream_falls_back_before_its_first_event_and_not_after(
    api: FakeResponsesAPI,
) -> None:
    chat, _, responses = adapters(api)
    model = FallbackModel(responses, chat)

    # Before the first event: the 400 moves the call to the next model.
    api.script(
        openai_error(400, "Invalid 'input'", "invalid_request_error"),
        sse_reply(chat_chunks(["Hi"], model="gpt-4o")),
    )
    events = await collect(model.stream(QUESTION))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hi"]
    assert model.last_used is chat

    # After the first event: the failure is raised, and the next model is not asked.
    asked = len(api.requests)
    events = response_events(("text", ["Half an ", "answer"]))
    api.script(sse_reply([*events[:5], error_event("server_error")]))
    seen: list[Any] = []

    async def read() -> None:
        async for event in model.stream(QUESTION):
            seen.append(event)

    with pytest.raises(ModelAPIError, match="server_error") as failed:
        await read()
    assert failed.value.transient
    assert not isinstance(failed.value, ModelFallbackError)
    assert seen == [TextDelta("Half an ")]
    assert len(api.requests) == asked + 1


async def test_a_model_loop_on_a_fallback_through_the_real_sdks(api: FakeResponsesAPI) -> None:
    chat, _, responses = adapters(api)

    @tool
    async def tide_table(port: str) -> str:
        """The tide table of a port."""
        return f"{port}: high water 06:12"

    api.script(
        openai_error(404, "The model `gpt-missing` does not exist", "invalid_request_error"),
        json_reply(
            response(
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "tide_table",
                    "arguments": '{"port": "Brest"}',
                    "status": "completed",
                }
            )
        ),
        openai_error(404, "The model `gpt-missing` does not exist", "invalid_request_error"),
        json_reply(response(message_item("High water at 06:12."))),
    )
    agent = Agent("sailor", "Sails", [tide_table], context=ContextConfig(MemoryContextStore()))

    finished = await ModelLoop(agent, FallbackModel(chat, responses)).run("Tide in Brest?")

    assert finished.text == "High water at 06:12."
    assert [r.path.rsplit("/", 1)[-1] for r in api.requests] == [
        "completions",
        "responses",
        "completions",
        "responses",
    ]
    assert api.requests[3].body["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "Brest: high water 06:12",
    }
