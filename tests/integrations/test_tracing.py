"""OpenTelemetry spans of a ModelLoop: the SDK's in-memory exporter, the local model API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from pygents_ctx import (
    Agent,
    ContextConfig,
    MemoryContextStore,
    ModelError,
    ModelLoop,
    ModelSettings,
    OpenAIModel,
    tool,
)
from pygents_ctx.integrations.tracing import instrument, is_instrumented, uninstrument
from pygents_ctx.model._observers import OBSERVERS
from pygents_ctx.testing import ScriptedModel, assistant, tool_call
from tests.model.fake_api import FakeAPI, chat_completion, json_reply, openai_error


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(provider)
    try:
        yield exporter
    finally:
        uninstrument()
        provider.shutdown()


def agent_with(tools: list[Any], name: str = "researcher") -> Agent:
    return Agent(name, "Looks things up", tools, context=ContextConfig(MemoryContextStore()))


def named(finished: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name.startswith(prefix)]


@pytest.fixture
def library() -> list[Any]:
    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        await asyncio.sleep(0.2)
        return a + b

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        await asyncio.sleep(0.2)
        raise LookupError(f"no entry {key!r}")

    return [add, lookup]


async def test_a_run_with_parallel_tool_calls_is_one_tree_of_spans(
    api: FakeAPI, openai_model: OpenAIModel, library: list[Any], spans: InMemorySpanExporter
) -> None:
    calls = [
        ("call_1", "add", '{"a": 2, "b": 3}'),
        ("call_2", "lookup", '{"key": "tides"}'),
        ("call_3", "summon", "{}"),
    ]
    api.script(
        json_reply(chat_completion(None, calls, usage=(50, 9), model="gpt-test-0601")),
        json_reply(chat_completion("Five.", usage=(80, 7, 48), model="gpt-test-0601")),
    )
    loop = ModelLoop(agent_with(library), openai_model)

    finished = await loop.run("Add 2 and 3, and look up tides.")

    assert finished.text == "Five."
    done = spans.get_finished_spans()
    [run] = named(done, "invoke_agent")
    chats = named(done, "chat")
    tools = {span.attributes["gen_ai.tool.call.id"]: span for span in named(done, "execute_tool")}
    assert run.name == "invoke_agent researcher"
    assert [c.name for c in chats] == ["chat gpt-test", "chat gpt-test"]
    assert sorted(span.name for span in tools.values()) == [
        "execute_tool add",
        "execute_tool lookup",
        "execute_tool summon",
    ]
    # One trace; the model calls and the tool calls are children of the run.
    assert {span.context.trace_id for span in done} == {run.context.trace_id}
    assert run.parent is None
    assert all(span.parent.span_id == run.context.span_id for span in [*chats, *tools.values()])
    # The two tools that ran did so at the same time.
    add, lookup = tools["call_1"], tools["call_2"]
    assert add.start_time < lookup.end_time
    assert lookup.start_time < add.end_time

    assert run.kind is SpanKind.INTERNAL
    assert dict(run.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "researcher",
        "gen_ai.agent.description": "Looks things up",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.conversation.id": loop.agent.context.store.session_id,
        "gen_ai.usage.input_tokens": 130,
        "gen_ai.usage.output_tokens": 16,
        "gen_ai.usage.cache_read.input_tokens": 48,
        "pygents_ctx.loop.steps": 2,
        "pygents_ctx.loop.stop_reason": "answer",
    }
    first, second = chats
    assert first.kind is SpanKind.CLIENT
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.model"] == "gpt-test"
    assert first.attributes["gen_ai.response.model"] == "gpt-test-0601"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert (
        first.attributes["gen_ai.usage.input_tokens"],
        first.attributes["gen_ai.usage.output_tokens"],
    ) == (50, 9)
    assert second.attributes["gen_ai.usage.cache_read.input_tokens"] == 48
    assert "gen_ai.usage.cache_read.input_tokens" not in first.attributes
    assert first.end_time <= add.start_time
    assert lookup.end_time <= second.start_time

    assert add.attributes["gen_ai.tool.name"] == "add"
    assert add.attributes["gen_ai.tool.description"] == "Add two numbers."
    assert add.status.status_code is StatusCode.UNSET
    assert lookup.status.status_code is StatusCode.ERROR
    assert lookup.attributes["error.type"] == "LookupError"
    [event] = lookup.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "LookupError"
    assert "tides" in event.attributes["exception.message"]
    summon = tools["call_3"]
    assert summon.status.status_code is StatusCode.ERROR
    assert summon.attributes["error.type"] == "tool_call_refused"
    assert "there is no tool 'summon'" in (summon.status.description or "")
    # No content unless asked for.
    for span in done:
        assert not any(
            key in span.attributes
            for key in (
                "gen_ai.input.messages",
                "gen_ai.output.messages",
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
            )
        )


async def test_content_is_recorded_when_the_user_opts_in(
    api: FakeAPI, openai_model: OpenAIModel, library: list[Any], spans: InMemorySpanExporter
) -> None:
    instrument(spans_provider(spans), capture_content=True)
    api.script(
        json_reply(chat_completion(None, [("call_1", "add", '{"a": 1, "b": 1}')])),
        json_reply(chat_completion("Two.")),
    )

    await ModelLoop(agent_with(library), openai_model, instructions="Be brief.").run("1+1?")

    done = spans.get_finished_spans()
    first, second = named(done, "chat")
    assert json.loads(first.attributes["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "1+1?"}]},
    ]
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_1", "name": "add", "arguments": {"a": 1, "b": 1}}
            ],
            "finish_reason": "tool_call",  # required by the conventions' output schema
        }
    ]
    assert json.loads(second.attributes["gen_ai.output.messages"])[0]["finish_reason"] == "stop"
    assert json.loads(second.attributes["gen_ai.input.messages"])[-1] == {
        "role": "user",
        "parts": [{"type": "tool_call_response", "id": "call_1", "response": "2"}],
    }
    [add] = named(done, "execute_tool")
    assert json.loads(add.attributes["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 1}
    assert add.attributes["gen_ai.tool.call.result"] == "2"


def spans_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


async def test_a_sub_agents_run_nests_under_the_tool_that_runs_it(
    spans: InMemorySpanExporter,
) -> None:
    helper = ModelLoop(agent_with([], name="helper"), ScriptedModel(["The helper's answer."]))

    @tool
    async def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        return (await helper.run(question)).text

    outer = ModelLoop(
        agent_with([ask_helper], name="lead"),
        ScriptedModel([assistant(tool_call("ask_helper", question="why?")), "Done."]),
    )

    await outer.run("Go.")

    done = spans.get_finished_spans()
    runs = {span.attributes["gen_ai.agent.name"]: span for span in named(done, "invoke_agent")}
    [asked] = named(done, "execute_tool")
    assert runs["lead"].parent is None
    assert asked.parent.span_id == runs["lead"].context.span_id
    assert runs["helper"].parent.span_id == asked.context.span_id
    [helper_chat] = [
        s for s in named(done, "chat") if s.parent.span_id == runs["helper"].context.span_id
    ]
    assert helper_chat.attributes["gen_ai.provider.name"] == "scripted"


async def test_a_failed_model_call_marks_the_call_and_the_run(
    api: FakeAPI, openai_model: OpenAIModel, spans: InMemorySpanExporter
) -> None:
    api.script(openai_error(400, "bad request", "invalid_request_error"))

    with pytest.raises(ModelError):
        await ModelLoop(agent_with([]), openai_model).run("Hello?")

    done = spans.get_finished_spans()
    [chat] = named(done, "chat")
    [run] = named(done, "invoke_agent")
    assert chat.status.status_code is StatusCode.ERROR
    assert run.status.status_code is StatusCode.ERROR
    assert chat.attributes["error.type"] == run.attributes["error.type"]


async def test_leaving_a_stream_early_ends_the_spans_without_an_error(
    api: FakeAPI, openai_model: OpenAIModel, spans: InMemorySpanExporter
) -> None:
    api.script(json_reply(chat_completion("Hello there.")))
    loop = ModelLoop(agent_with([]), openai_model)

    async with aclosing(loop.stream("Hi")) as events:
        async for _ in events:
            break

    [run] = named(spans.get_finished_spans(), "invoke_agent")
    assert run.status.status_code is StatusCode.UNSET


async def test_off_by_default_and_after_uninstrument(
    api: FakeAPI, openai_model: OpenAIModel, spans: InMemorySpanExporter
) -> None:
    assert is_instrumented()
    uninstrument()
    assert not is_instrumented()
    assert OBSERVERS == []
    api.script(json_reply(chat_completion("Hi.")))

    await ModelLoop(agent_with([]), openai_model).run("Hello?")

    assert spans.get_finished_spans() == ()


class Recorder:
    """A second observer beside the tracer: what it was told, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def run(self, loop: Any) -> Any:
        return Watch(self.seen, "run")

    def model_call(self, loop: Any, step: int, window: Any) -> Any:
        return Watch(self.seen, f"model {step}")

    def tool_call(self, call: Any, tool: Any) -> Any:
        return Watch(self.seen, f"tool {call.name}")


class Watch:
    def __init__(self, seen: list[str], what: str) -> None:
        self.seen, self.what = seen, what
        seen.append(f"{what} started")

    def resume(self) -> None:
        pass

    def pause(self) -> None:
        pass

    def failed(self, error: BaseException) -> None:
        self.seen.append(f"{self.what} failed: {type(error).__name__}")

    def end(self, outcome: Any, error: BaseException | None) -> None:
        self.seen.append(f"{self.what} ended")


async def test_several_observers_each_see_every_run_and_call(
    library: list[Any], spans: InMemorySpanExporter
) -> None:
    recorder = Recorder()
    OBSERVERS.append(recorder)
    try:
        model = ScriptedModel([assistant(tool_call("lookup", key="x")), "No entry."])
        await ModelLoop(agent_with(library), model).run("Look x up.")
    finally:
        OBSERVERS.remove(recorder)

    assert recorder.seen == [
        "run started",
        "model 1 started",
        "model 1 ended",
        "tool lookup started",
        "tool lookup failed: LookupError",
        "tool lookup ended",
        "model 2 started",
        "model 2 ended",
        "run ended",
    ]
    assert len(spans.get_finished_spans()) == 4


async def test_the_chat_span_carries_the_models_own_settings_and_the_loops_over_them(
    api: FakeAPI, library: list[Any], spans: InMemorySpanExporter
) -> None:
    model = OpenAIModel(
        "gpt-test",
        base_url=f"{api.url}/v1",
        api_key="test-key",
        timeout=5,
        settings=ModelSettings(max_tokens=256, temperature=0.25),
    )
    api.script(json_reply(chat_completion("One.")), json_reply(chat_completion("Two.")))

    await ModelLoop(agent_with(library), model).run("first")
    await ModelLoop(
        agent_with(library, "other"), model, settings=ModelSettings(top_p=0.5, temperature=0.75)
    ).run("second")

    first, second = named(spans.get_finished_spans(), "chat")
    assert first.attributes["gen_ai.request.max_tokens"] == 256
    assert first.attributes["gen_ai.request.temperature"] == 0.25
    # The loop's settings replace the model's field by field, as in the request sent.
    assert second.attributes["gen_ai.request.max_tokens"] == 256
    assert second.attributes["gen_ai.request.temperature"] == 0.75
    assert second.attributes["gen_ai.request.top_p"] == 0.5
    sent = api.requests[-1].body
    assert (sent["max_tokens"], sent["temperature"], sent["top_p"]) == (256, 0.75, 0.5)
