"""ModelLoop when providers misbehave: empty, cut and malformed replies, length stops, reasoning.

Through the official SDKs against the strict local server, which refuses
(400) every request a real API would refuse: a loop that stored something
it should not have would be refused on its next call.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AnthropicModel,
    ContextConfig,
    LoopStop,
    MemoryContextStore,
    Message,
    Model,
    ModelAPIError,
    ModelLoop,
    ModelRetry,
    OpenAIModel,
    RetryPolicy,
    TextBlock,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallFinished,
    ToolPolicy,
    ToolResultBlock,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

from .fake_api import (
    FakeAPI,
    Reply,
    chat_chunks,
    chat_completion,
    json_reply,
    message,
    message_events,
    sse_reply,
    text_block,
    thinking_block,
    tool_use_block,
)

PROVIDERS = ["openai", "anthropic"]
BOTH_WAYS = [(p, s) for p in PROVIDERS for s in (False, True)]
IDS = [f"{p}-{'stream' if s else 'json'}" for p, s in BOTH_WAYS]
QUICK_RETRIES = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=0.0)


@pytest.fixture
def model(
    request: pytest.FixtureRequest, openai_model: OpenAIModel, anthropic_model: AnthropicModel
) -> Any:
    return openai_model if request.param == "openai" else anthropic_model


@pytest.fixture
def search() -> Any:
    @tool
    async def search(query: str) -> str:
        """Search the library."""
        return f"2 documents about {query}"

    return search


def loop_for(model: Model, tools: list[Any], **options: Any) -> ModelLoop:
    agent = Agent("researcher", "Researches", tools, context=ContextConfig(MemoryContextStore()))
    return ModelLoop(agent, model, retry=QUICK_RETRIES, **options)


async def run(loop: ModelLoop, streaming: bool, prompt: str | None) -> tuple[Any, list[Any]]:
    """The run's `LoopFinished`, and every event (streaming) or none."""
    if not streaming:
        return await loop.run(prompt), []
    events = [event async for event in loop.stream(prompt)]
    return events[-1], events


async def history(loop: ModelLoop) -> list[Message]:
    assert loop.agent.context is not None
    return await loop.agent.context.history()


def provider_of(model: Any) -> str:
    return "openai" if isinstance(model, OpenAIModel) else "anthropic"


def text_reply(provider: str, streaming: bool, text: str) -> Reply:
    if provider == "openai":
        if streaming:
            return sse_reply(chat_chunks([text] if text else []))
        return json_reply(chat_completion(text or None))
    if streaming:
        return sse_reply(message_events(*([("text", [text])] if text else [])))
    return json_reply(message(*([text_block(text)] if text else [])))


# -- empty replies ---------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "streaming"), BOTH_WAYS, ids=IDS, indirect=["model"])
async def test_an_empty_reply_is_retried_and_never_stored(
    api: FakeAPI, model: Any, streaming: bool
) -> None:
    provider = provider_of(model)
    api.script(text_reply(provider, streaming, ""), text_reply(provider, streaming, "The Moon."))
    loop = loop_for(model, [])

    finished, events = await run(loop, streaming, "What causes tides?")

    assert (finished.reason, finished.text) == (LoopStop.ANSWER, "The Moon.")
    assert await history(loop) == [
        Message("user", "What causes tides?"),
        Message("assistant", "The Moon."),
    ]
    assert len(api.requests) == 2
    if streaming:
        [retry] = [event for event in events if isinstance(event, ModelRetry)]
        assert "no text and no tool calls" in str(retry.error)


@pytest.mark.parametrize(("model", "streaming"), BOTH_WAYS, ids=IDS, indirect=["model"])
async def test_empty_replies_past_the_retries_raise_and_the_conversation_goes_on(
    api: FakeAPI, model: Any, streaming: bool
) -> None:
    provider = provider_of(model)
    api.script(*[text_reply(provider, streaming, "") for _ in range(3)])
    loop = loop_for(model, [])

    with pytest.raises(ModelAPIError, match="no text and no tool calls"):
        await run(loop, streaming, "What causes tides?")

    assert await history(loop) == [Message("user", "What causes tides?")]
    api.script(text_reply(provider, streaming, "The Moon."))
    finished, _ = await run(loop, streaming, None)
    assert finished.text == "The Moon."
    assert api.refused == []


# -- cut and malformed replies ---------------------------------------------------------------


@pytest.mark.parametrize("model", PROVIDERS, indirect=True)
@pytest.mark.parametrize("cut", ["end", "drop"])
async def test_a_cut_stream_is_retried_and_only_the_whole_reply_kept(
    api: FakeAPI, model: Any, cut: str
) -> None:
    if isinstance(model, OpenAIModel):
        events = chat_chunks(["The tides ", "come from the Moon."])
        keep = len(events) - 3  # before the finish reason
    else:
        events = message_events(("text", ["The tides ", "come from the Moon."]))
        keep = len(events) - 2  # before message_delta and message_stop
    api.script(sse_reply(events, cut_after=keep, cut=cut), sse_reply(events))  # type: ignore[arg-type]
    loop = loop_for(model, [])

    finished, seen = await run(loop, True, "What causes tides?")

    assert finished.reason is LoopStop.ANSWER
    assert [e.attempt for e in seen if isinstance(e, ModelRetry)] == [1]
    assert (await history(loop))[1:] == [Message("assistant", "The tides come from the Moon.")]


@pytest.mark.parametrize("model", PROVIDERS, indirect=True)
async def test_a_malformed_body_is_retried(api: FakeAPI, model: Any) -> None:
    api.script(
        Reply(raw="<html>502 Bad Gateway</html"), text_reply(provider_of(model), False, "ok")
    )
    loop = loop_for(model, [])

    finished = await loop.run("hi")

    assert finished.text == "ok"
    assert len(api.requests) == 2


# -- length stops ----------------------------------------------------------------------------


def cut_by_length(provider: str, streaming: bool) -> Reply:
    """Text, then a call whose arguments the token limit cut."""
    if provider == "openai":
        if streaming:
            chunks = chat_chunks(
                ["Let me look."], [("call_1", "search", ['{"que'])], finish_reason="length"
            )
            return sse_reply(chunks)
        body = chat_completion(
            "Let me look.", [("call_1", "search", '{"que')], finish_reason="length"
        )
        return json_reply(body)
    if streaming:
        events = message_events(
            ("text", ["Let me look."]),
            ("tool_use", ("toolu_1", "search", ['{"que'])),
            stop_reason="max_tokens",
        )
        return sse_reply(events)
    cut = message(
        text_block("Let me look."),
        tool_use_block("toolu_1", "search", {}),
        stop_reason="max_tokens",
    )
    return json_reply(cut)


@pytest.mark.parametrize(("model", "streaming"), BOTH_WAYS, ids=IDS, indirect=["model"])
async def test_a_reply_cut_by_its_token_limit_ends_the_run_with_its_text_kept(
    api: FakeAPI, model: Any, streaming: bool, search: Any
) -> None:
    provider = provider_of(model)
    api.script(cut_by_length(provider, streaming), text_reply(provider, streaming, "Tides: Moon."))
    loop = loop_for(model, [search])

    finished, _ = await run(loop, streaming, "What causes tides?")

    assert finished.reason is LoopStop.LENGTH
    assert finished.message == Message("assistant", "Let me look.")
    assert (await history(loop))[-1] == Message("assistant", "Let me look.")  # no call stored
    assert len(api.requests) == 1  # the cut call did not run, and the model was not asked again
    again, _ = await run(loop, streaming, "Go on, briefly.")
    assert again.text == "Tides: Moon."
    assert api.refused == []


@pytest.mark.parametrize("model", PROVIDERS, indirect=True)
async def test_a_reply_cut_before_any_text_stores_nothing(api: FakeAPI, model: Any) -> None:
    if isinstance(model, OpenAIModel):
        api.script(json_reply(chat_completion(None, finish_reason="length")))
    else:
        api.script(json_reply(message(stop_reason="max_tokens")))
    loop = loop_for(model, [])

    finished = await loop.run("What causes tides?")

    assert (finished.reason, finished.message) == (LoopStop.LENGTH, None)
    assert await history(loop) == [Message("user", "What causes tides?")]


# -- reasoning -------------------------------------------------------------------------------


async def test_anthropic_thinking_streams_is_stored_and_goes_back_with_the_calls(
    api: FakeAPI, anthropic_model: AnthropicModel, search: Any
) -> None:
    api.script(
        sse_reply(
            message_events(
                ("thinking", (["Search ", "first."], "sig-1")),
                ("text", []),
                ("tool_use", ("toolu_1", "search", ['{"query": "tides"}'])),
            )
        ),
        sse_reply(message_events(("thinking", (["Done."], "sig-2")), ("text", ["The Moon."]))),
    )
    loop = loop_for(anthropic_model, [search])

    finished, events = await run(loop, True, "What causes tides?")

    assert finished.text == "The Moon."
    assert [e.thinking for e in events if isinstance(e, ThinkingDelta)] == [
        "Search ",
        "first.",
        "Done.",
    ]
    stored = await history(loop)
    assert stored[1].content[0] == ThinkingBlock("Search first.", signature="sig-1")
    sent = api.requests[1].body["messages"][1]["content"]
    assert [block["type"] for block in sent] == ["thinking", "tool_use"]
    assert sent[0] == thinking_block("Search first.", "sig-1")
    assert api.refused == []


async def test_reasoning_text_is_shown_and_stored_but_never_sent_to_openai(
    api: FakeAPI, openai_model: OpenAIModel, search: Any
) -> None:
    api.script(
        sse_reply(
            chat_chunks(
                [], [("call_1", "search", ['{"query": "tides"}'])], reasoning=["Look it up."]
            )
        ),
        sse_reply(chat_chunks(["The Moon."], reasoning=["Answer."])),
    )
    loop = loop_for(openai_model, [search])

    finished, events = await run(loop, True, "What causes tides?")

    assert finished.text == "The Moon."
    assert [e.thinking for e in events if isinstance(e, ThinkingDelta)] == [
        "Look it up.",
        "Answer.",
    ]
    assert (await history(loop))[-1].content == (ThinkingBlock("Answer."), TextBlock("The Moon."))
    assert "Look it up." not in str(api.requests[1].body)
    assert api.refused == []


# -- leaving a stream while tools run ------------------------------------------------------


@pytest.mark.parametrize("parallel", [1, 4], ids=["one-by-one", "at-once"])
async def test_leaving_the_stream_keeps_the_results_that_finished(parallel: int) -> None:
    gate = asyncio.Event()
    ran: list[str] = []

    @tool
    async def send_email(to: str) -> str:
        """Send an email (a side effect not to repeat)."""
        ran.append(to)
        return f"sent to {to}"

    @tool
    async def wait_for_reply() -> str:
        """Wait for the reply."""
        await gate.wait()
        return "replied"

    sent, waiting = tool_call("send_email", to="ada"), tool_call("wait_for_reply")
    agent = Agent(
        "mailer", "Mails", [send_email, wait_for_reply], context=ContextConfig(MemoryContextStore())
    )
    model = ScriptedModel([assistant(sent, waiting), "Sent; no reply yet."])
    loop = ModelLoop(agent, model, tool_policy=ToolPolicy(parallel=parallel))

    async with aclosing(loop.stream("Email Ada and wait")) as events:
        async for event in events:
            if isinstance(event, ToolCallFinished) and event.call.id == sent.id:
                break

    stored = await history(loop)
    results = {result.tool_use_id: result for result in stored[-1].tool_results}
    assert results[sent.id] == ToolResultBlock(sent.id, "sent to ada")  # kept, not "cancelled"
    assert results[waiting.id].is_error
    assert "cancelled" in str(results[waiting.id].content)
    assert (await loop.run()).text == "Sent; no reply yet."
    assert ran == ["ada"]  # the side effect happened once
    assert len(await history(loop)) == 4
