"""A model that refuses: the run ends at once with `LoopStop.REFUSAL`, on all three APIs.

Through the official SDKs against the strict local server (Chat Completions,
the Responses API and the Messages API on one port), which refuses (400)
every request a real API would refuse: a refusal stored in a form the API
does not take back, or a tool call left without its result, would fail the
next request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AnthropicModel,
    ContextConfig,
    LoopFinished,
    LoopStop,
    MemoryContextStore,
    Message,
    ModelLoop,
    ModelReplied,
    ModelResponse,
    OpenAIModel,
    OpenAIResponsesModel,
    RetryPolicy,
    SubagentError,
    TextDelta,
    ToolCallFinished,
    Usage,
    tool,
)
from pygents_ctx.context.stores import SQLiteContextStore, connect
from pygents_ctx.testing import ScriptedModel

from .fake_api import (
    Reply,
    chat_chunks,
    chat_completion,
    json_reply,
    message,
    message_events,
    refusal_details,
    sse_reply,
    text_block,
    tool_use_block,
)
from .fake_responses import (
    FakeResponsesAPI,
    call_item,
    message_item,
    refusal_item,
    response,
    response_events,
)

PROVIDERS = ("chat", "responses", "anthropic")
WAYS = [(p, s) for p in PROVIDERS for s in (False, True)]
IDS = [f"{p}-{'stream' if s else 'json'}" for p, s in WAYS]
NO_RETRIES = RetryPolicy(max_attempts=1)
SORRY = ["I'm sorry, ", "I can't help with that."]
EXPLANATION = "This request was declined because it could enable cyber harm."


@dataclass
class Forecast:
    city: str
    rain: bool


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeResponsesAPI]:
    """One strict server for the three APIs (Chat Completions, Responses, Messages)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = await FakeResponsesAPI().start()
    try:
        yield server
    finally:
        await server.close()


def model_for(provider: str, api: FakeResponsesAPI) -> Any:
    if provider == "chat":
        return OpenAIModel("gpt-test", base_url=f"{api.url}/v1", api_key="k", timeout=5)
    if provider == "responses":
        return OpenAIResponsesModel("gpt-test", base_url=f"{api.url}/v1", api_key="k", timeout=5)
    return AnthropicModel("claude-test", base_url=api.url, api_key="k", timeout=5)


def refused(provider: str, streaming: bool, *, call: bool = False) -> Reply:
    """A reply that refuses (with a tool call beside the refusal when `call`), usage (12, 3)."""
    arguments = '{"query": "locks"}'
    if provider == "chat":
        calls = [("call_1", "search", arguments)] if call else []
        if streaming:
            pieces = [("call_1", "search", [arguments])] if call else []
            return sse_reply(
                chat_chunks(calls=pieces, refusal=SORRY, usage=(12, 3), finish_reason="stop")
            )
        body = chat_completion(None, calls, refusal="".join(SORRY), usage=(12, 3))
        return json_reply(body)
    if provider == "responses":
        if streaming:
            items: list[Any] = [("refusal", SORRY)]
            items += [("call", ("call_1", "search", [arguments]))] if call else []
            return sse_reply(response_events(*items, usage=(12, 3)))
        output = [refusal_item("".join(SORRY))]
        output += [call_item("call_1", "search", arguments)] if call else []
        return json_reply(response(*output, usage=(12, 3)))
    # Anthropic: the classifier stops the reply midway; no refusal text of the model's own.
    details = refusal_details(EXPLANATION)
    usage = {"input_tokens": 12, "output_tokens": 3}
    if streaming:
        blocks: list[Any] = [("text", ["Here is how"])]
        blocks += [("tool_use", ("call_1", "search", [arguments]))] if call else []
        return sse_reply(
            message_events(*blocks, usage=usage, stop_reason="refusal", stop_details=details)
        )
    content = [text_block("Here is how")]
    content += [tool_use_block("call_1", "search", {"query": "locks"})] if call else []
    return json_reply(message(*content, usage=usage, stop_reason="refusal", stop_details=details))


def answer(provider: str, text: str) -> Reply:
    if provider == "chat":
        return json_reply(chat_completion(text))
    if provider == "responses":
        return json_reply(response(message_item(text)))
    return json_reply(message(text_block(text)))


def refusal_text(provider: str) -> str:
    return EXPLANATION if provider == "anthropic" else "".join(SORRY)


def loop_for(model: Any, tools: list[Any] = (), **options: Any) -> ModelLoop:  # type: ignore[assignment]
    agent = Agent("helper", "Helps", list(tools), context=ContextConfig(MemoryContextStore()))
    return ModelLoop(agent, model, retry=NO_RETRIES, **options)


async def run(
    loop: ModelLoop, streaming: bool, prompt: str | None
) -> tuple[LoopFinished, list[Any]]:
    if not streaming:
        return await loop.run(prompt), []
    events = [event async for event in loop.stream(prompt)]
    assert isinstance(events[-1], LoopFinished)
    return events[-1], events


async def history(loop: ModelLoop) -> list[Message]:
    assert loop.agent.context is not None
    return await loop.agent.context.history()


# -- a refusal ends the run ------------------------------------------------------------------


@pytest.mark.parametrize("output_type", [Forecast, None], ids=["structured", "free-text"])
@pytest.mark.parametrize(("provider", "streaming"), WAYS, ids=IDS)
async def test_a_refusal_ends_the_run_after_one_call_and_the_next_prompt_works(
    api: FakeResponsesAPI, provider: str, streaming: bool, output_type: Any
) -> None:
    api.script(refused(provider, streaming), answer(provider, '{"city": "Oslo", "rain": true}'))
    loop = loop_for(model_for(provider, api), output_type=output_type)

    finished, _ = await run(loop, streaming, "How do I pick a lock?")

    assert finished.reason is LoopStop.REFUSAL
    assert finished.refusal == finished.text == refusal_text(provider)
    assert finished.output is None  # nothing pretends to be the answer
    assert (finished.steps, len(api.requests)) == (1, 1)  # never asked again
    assert finished.usage == Usage(12, 3)
    store = loop.agent.context.store  # type: ignore[union-attr]
    assert [record.usage for record in await store.get_usage()] == [Usage(12, 3)]
    stored = await history(loop)
    assert [(m.role, m.text) for m in stored] == [
        ("user", "How do I pick a lock?"),
        ("assistant", refusal_text(provider)),
    ]
    assert stored[-1].metadata == {"refusal": True}

    again = await loop.run("Then: will it rain in Oslo?")

    assert again.reason is LoopStop.ANSWER
    assert api.refused == []  # the stored refusal was a valid transcript for the API
    sent = str(api.requests[-1].body)
    assert refusal_text(provider) in sent
    assert "Here is how" not in sent
    if output_type is Forecast:
        assert again.output == Forecast("Oslo", True)


@pytest.mark.parametrize(("provider", "streaming"), WAYS, ids=IDS)
async def test_a_refusal_beside_a_tool_call_runs_no_tool_and_stores_no_call(
    api: FakeResponsesAPI, provider: str, streaming: bool
) -> None:
    ran: list[str] = []

    @tool
    async def search(query: str) -> str:
        """Search the library."""
        ran.append(query)
        return "found"

    api.script(refused(provider, streaming, call=True), answer(provider, "Fine."))
    loop = loop_for(model_for(provider, api), [search])

    finished, events = await run(loop, streaming, "Find lock-picking guides")

    assert finished.reason is LoopStop.REFUSAL
    assert ran == []
    assert not any(isinstance(e, ToolCallFinished) for e in events)
    stored = await history(loop)
    assert not any(m.tool_uses for m in stored)
    assert loop.agent.queue == []  # no model_act left to run the call later

    assert (await loop.run("Something else, then")).text == "Fine."
    assert api.refused == []
    assert ran == []


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_streamed_refusal_is_shown_as_it_is_written_then_finishes(
    api: FakeResponsesAPI, provider: str
) -> None:
    api.script(refused(provider, streaming=True))
    loop = loop_for(model_for(provider, api), output_type=Forecast)

    finished, events = await run(loop, True, "How do I pick a lock?")

    written = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert written == ("Here is how" if provider == "anthropic" else "".join(SORRY))
    replied = [e for e in events if isinstance(e, ModelReplied)]
    assert len(replied) == 1
    assert replied[0].response.refusal == refusal_text(provider)
    assert events.index(replied[0]) < len(events) - 1
    assert (finished.reason, finished.refusal) == (LoopStop.REFUSAL, refusal_text(provider))


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
async def test_anthropic_without_an_explanation_still_says_it_refused(
    api: FakeResponsesAPI, streaming: bool
) -> None:
    details = refusal_details(None, category="bio")
    if streaming:
        api.script(sse_reply(message_events(stop_reason="refusal", stop_details=details)))
    else:
        api.script(json_reply(message(stop_reason="refusal", stop_details=details)))
    loop = loop_for(model_for("anthropic", api))

    finished, _ = await run(loop, streaming, "Grow this culture")

    assert finished.reason is LoopStop.REFUSAL
    assert finished.refusal is not None
    assert "declined" in finished.refusal
    assert "'bio'" in finished.refusal
    assert (await history(loop))[-1].text == finished.refusal


# -- after a refusal -------------------------------------------------------------------------


async def test_continuing_a_refused_conversation_without_a_prompt_calls_no_model() -> None:
    refusal = ModelResponse(Message("assistant", "I can't."), refusal="I can't.")
    model = ScriptedModel([refusal])
    loop = ModelLoop(
        Agent("a", "b", [], context=ContextConfig(MemoryContextStore())),
        model,
        output_type=Forecast,
    )
    await loop.run("Pick the lock")

    again = await loop.run()

    assert (again.reason, again.refusal, again.steps) == (LoopStop.REFUSAL, "I can't.", 0)
    assert len(model.calls) == 1


async def test_a_refusal_read_back_from_a_saved_session_is_still_one() -> None:
    async with connect(":memory:") as conn:
        first = ModelLoop(
            Agent("a", "b", [], context=ContextConfig(SQLiteContextStore(conn, session_id="s"))),
            ScriptedModel([ModelResponse(Message("assistant", "No."), refusal="No.")]),
        )
        await first.run("Pick the lock")
        model = ScriptedModel([])
        later = ModelLoop(
            Agent("c", "d", [], context=ContextConfig(SQLiteContextStore(conn, session_id="s"))),
            model,
        )

        finished = await later.run()

    assert (finished.reason, finished.refusal, len(model.calls)) == (LoopStop.REFUSAL, "No.", 0)


async def test_a_refusing_subagent_is_an_error_naming_the_refusal() -> None:
    inner = ModelLoop(
        Agent("helper", "Helps", [], context=ContextConfig(MemoryContextStore())),
        ScriptedModel([ModelResponse(Message("assistant", "Not that."), refusal="Not that.")]),
    )
    delegate = inner.as_tool("delegate", "Hand a task over")

    with pytest.raises(SubagentError, match=r"refused: Not that\."):
        await delegate(task="Pick the lock")


def test_a_refusal_must_be_text() -> None:
    with pytest.raises(TypeError, match=r"ModelResponse\.refusal must be the refusal's text"):
        ModelResponse(Message("assistant", "No."), refusal="")


async def test_a_responses_stream_whose_final_response_lists_no_output_still_refuses(
    api: FakeResponsesAPI,
) -> None:
    api.script(sse_reply(response_events(("refusal", SORRY), final_output=False)))
    model = model_for("responses", api)

    *deltas, reply = [event async for event in model.stream([Message("user", "Pick a lock")])]

    assert [d.text for d in deltas] == SORRY
    assert isinstance(reply, ModelResponse)
    assert (reply.refusal, reply.message.text) == ("".join(SORRY), "".join(SORRY))
