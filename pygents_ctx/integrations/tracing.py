"""OpenTelemetry spans of `ModelLoop` runs, model calls and tool calls (GenAI conventions).

Off until `instrument()` is called, and free while off: the loop tests one
empty list. Needs `opentelemetry-api` (the `otel` extra), imported by
`instrument()`; to see spans, configure an OpenTelemetry SDK and an exporter
(`opentelemetry-sdk`, `opentelemetry-exporter-otlp`) as for any library.

The spans follow the OpenTelemetry semantic conventions for generative AI:

- `invoke_agent {agent}` for each run (`run()` or `stream()`): the agent's
  name and description, the provider and model, the conversation (the
  store's session id), and when it ends the run's total tokens, steps and
  stop reason (`pygents_ctx.loop.*`).
- `chat {model}` for each model call (a retried call is one span per
  attempt), a child of the run: provider, request and response model,
  finish reasons, input, output and cached tokens.
- `execute_tool {tool}` for each tool call, a child of the run: the tool's
  name, description and call id. The exception a tool raised is recorded on
  it with an error status (the model still reads it as the call's result);
  a call that failed without running (an unknown tool, malformed or refused
  arguments) has an error status and `error.type`.

Parallel tool calls are sibling spans; a sub-agent's run inside a tool
nests under that tool's span. Message content (the model's input and output
messages, a tool call's arguments and result) is recorded only with
`capture_content=True`: it may hold personal data.

Example:
    ```python
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from pygents_ctx.integrations.tracing import instrument

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    instrument(provider)
    ```
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import orjson

from pygents_ctx import __version__
from pygents_ctx.context.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.model._observers import OBSERVERS
from pygents_ctx.model.base import ModelResponse, ModelSettings

if TYPE_CHECKING:
    from pygents_ctx.context.config import PromptWindow
    from pygents_ctx.model.events import LoopFinished

__all__ = ["instrument", "is_instrumented", "uninstrument"]

_SCOPE: Final = "pygents_ctx"


def _require_otel() -> tuple[Any, Any]:
    """The `opentelemetry.trace` and `opentelemetry.context` modules."""
    try:
        from opentelemetry import context, trace
    except ImportError as exc:
        raise ImportError(
            "Tracing needs opentelemetry-api: pip install opentelemetry-api (the otel extra) "
            "(and an SDK and exporter to send spans: opentelemetry-sdk, "
            "opentelemetry-exporter-otlp)"
        ) from exc
    return trace, context


def instrument(tracer_provider: Any = None, *, capture_content: bool = False) -> None:
    """Emit OpenTelemetry spans for every `ModelLoop` from now on (see the module docstring).

    Calling it again replaces the earlier setup.

    Args:
        tracer_provider: The `TracerProvider` to use; None: the global one
            (`opentelemetry.trace.set_tracer_provider`), looked up per span.
        capture_content: Also record message content: the model's input and
            output messages (`gen_ai.input.messages`, `gen_ai.output.messages`)
            and each tool call's arguments and result.

    Raises:
        ImportError: `opentelemetry-api` is not installed.

    Examples:
        >>> from pygents_ctx.integrations.tracing import instrument, uninstrument
        >>> instrument()  # the global tracer provider: no spans until an SDK is set up
        >>> uninstrument()
    """
    trace, context = _require_otel()
    uninstrument()
    if tracer_provider is None:
        tracer = trace.get_tracer(_SCOPE, __version__)
    else:
        tracer = tracer_provider.get_tracer(_SCOPE, __version__)
    OBSERVERS.append(_SpanObserver(_Otel(trace, context), tracer, capture_content))


def uninstrument() -> None:
    """Stop emitting spans (a no-op when `instrument()` was not called)."""
    OBSERVERS[:] = [o for o in OBSERVERS if not isinstance(o, _SpanObserver)]


def is_instrumented() -> bool:
    """Whether `instrument()` is in effect."""
    return any(isinstance(o, _SpanObserver) for o in OBSERVERS)


# -- what the spans say ---------------------------------------------------------------


def _provider(model: Any) -> str:
    """The provider's name as the conventions spell it (`openai`, `anthropic`, `gcp.gemini`)."""
    kind = type(model).__name__.lower()
    for known in ("openai", "anthropic"):
        if known in kind:
            return known
    if "gemini" in kind:
        return "gcp.gemini"
    models = getattr(model, "models", None)  # a FallbackModel: its first model's provider
    if isinstance(models, list | tuple) and models:
        return _provider(models[0])
    return kind.removesuffix("model") or "unknown"


def _model_name(model: Any) -> str:
    name = getattr(model, "model", None)
    if isinstance(name, str):
        return name
    models = getattr(model, "models", None)
    if isinstance(models, list | tuple) and models:
        return _model_name(models[0])
    return type(model).__name__


def _model_attributes(model: Any) -> dict[str, Any]:
    """Who serves the model, and the model asked for (a run's span and a call's say both)."""
    provider = _provider(model)
    return {
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": _model_name(model),
    }


def _part(block: Any) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "content": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.input}
    if isinstance(block, ToolResultBlock):
        return {"type": "tool_call_response", "id": block.tool_use_id, "response": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "blob", "modality": "image", "mime_type": block.media_type}
    return {"type": getattr(block, "type", type(block).__name__)}


# The conventions' finish reasons for the providers' own words; others are kept as they are.
_FINISH_REASONS: Final = {
    "tool_calls": "tool_call",  # OpenAI Chat Completions
    "function_call": "tool_call",
    "tool_use": "tool_call",  # Anthropic
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "refusal": "content_filter",
    "safety": "content_filter",  # Gemini
    "recitation": "content_filter",
    "prohibited_content": "content_filter",
    "blocklist": "content_filter",
    "spii": "content_filter",
}


def _messages(messages: list[Message], finish_reason: str | None = None) -> str:
    """Messages in the conventions' JSON form: role and parts (and, for output, finish_reason)."""
    shown: list[dict[str, Any]] = []
    for message in messages:
        parts = [_part(block) for block in message.content]
        shown.append({"role": message.role, "parts": parts})
    if finish_reason is not None:
        for output in shown:  # the output schema requires it on each message
            output["finish_reason"] = _FINISH_REASONS.get(finish_reason, finish_reason)
    return orjson.dumps(shown, default=str).decode()


def _usage_attributes(usage: Any) -> dict[str, int]:
    attributes = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cached_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
    if usage.cache_write_tokens:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    return attributes


def _effective_settings(model: Any, loop: Any) -> Any:
    """What the call is sent with: the model's own settings, the loop's replacing them."""
    given = getattr(loop, "_call_settings", None)
    defaults = getattr(model, "settings", None)
    return defaults.merged(given) if isinstance(defaults, ModelSettings) else given


def _settings_attributes(settings: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for field, key in (
        ("max_tokens", "gen_ai.request.max_tokens"),
        ("temperature", "gen_ai.request.temperature"),
        ("top_p", "gen_ai.request.top_p"),
    ):
        value = getattr(settings, field, None)
        if value is not None:
            attributes[key] = value
    stop = getattr(settings, "stop", None)
    if stop:
        attributes["gen_ai.request.stop_sequences"] = list(stop)
    return attributes


# -- the observer ---------------------------------------------------------------------


class _Otel:
    """The two OpenTelemetry API modules the spans use, imported once by `instrument()`."""

    __slots__ = ("context", "trace")

    def __init__(self, trace: Any, context: Any) -> None:
        self.trace = trace
        self.context = context


class _SpanObserver:
    """Starts a span for each run, model call and tool call (see `model._observers`)."""

    __slots__ = ("_capture", "_otel", "_tracer")

    def __init__(self, otel: _Otel, tracer: Any, capture: bool) -> None:
        self._otel = otel
        self._tracer = tracer
        self._capture = capture

    def run(self, loop: Any) -> _RunSpan:
        agent, model = loop.agent, loop.model
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent.name,
            **_model_attributes(model),
        }
        if agent.description:
            attributes["gen_ai.agent.description"] = agent.description
        if agent.context is not None:
            attributes["gen_ai.conversation.id"] = agent.context.store.session_id
        span = self._tracer.start_span(
            f"invoke_agent {agent.name}",
            kind=self._otel.trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        return _RunSpan(self._otel, span)

    def model_call(self, loop: Any, step: int, window: PromptWindow) -> _ChatSpan:
        model = loop.model
        requested = _model_name(model)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            **_model_attributes(model),
            "pygents_ctx.loop.step": step,
            "pygents_ctx.window.tokens": window.tokens,
            **_settings_attributes(_effective_settings(model, loop)),
        }
        if self._capture:
            attributes["gen_ai.input.messages"] = _messages(window.messages)
        span = self._tracer.start_span(
            f"chat {requested}", kind=self._otel.trace.SpanKind.CLIENT, attributes=attributes
        )
        return _ChatSpan(self._otel, span, self._capture)

    def tool_call(self, call: ToolUseBlock, tool: Any) -> _ToolSpan:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        description = None if tool is None else tool.metadata.description
        if description:
            attributes["gen_ai.tool.description"] = description
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = orjson.dumps(
                call.input, default=str
            ).decode()
        span = self._tracer.start_span(
            f"execute_tool {call.name}",
            kind=self._otel.trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        return _ToolSpan(self._otel, span, self._capture)


def _fail(otel: _Otel, span: Any, error_type: str, description: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(otel.trace.Status(otel.trace.StatusCode.ERROR, description))


def _raised(otel: _Otel, span: Any, error: BaseException) -> None:
    span.record_exception(error)
    _fail(otel, span, type(error).__qualname__, f"{type(error).__name__}: {error}")


def _end(otel: _Otel, span: Any, error: BaseException | None) -> None:
    """End `span`, failed by `error` unless that is the caller stopping (a stream left early)."""
    if error is not None and not isinstance(error, GeneratorExit):
        _raised(otel, span, error)
    span.end()


class _RunSpan:
    """A run's span: current while its steps run, ended with the run."""

    __slots__ = ("_context", "_otel", "_span", "_tokens")

    def __init__(self, otel: _Otel, span: Any) -> None:
        self._otel = otel
        self._span = span
        self._context = otel.trace.set_span_in_context(span)
        self._tokens: list[Any] = []

    def resume(self) -> None:
        self._tokens.append(self._otel.context.attach(self._context))

    def pause(self) -> None:
        self._otel.context.detach(self._tokens.pop())

    def end(self, finished: LoopFinished | None, error: BaseException | None) -> None:
        span = self._span
        if finished is not None:
            span.set_attributes(
                {
                    **_usage_attributes(finished.usage),
                    "pygents_ctx.loop.steps": finished.steps,
                    "pygents_ctx.loop.stop_reason": finished.reason.value,
                }
            )
        _end(self._otel, span, error)


class _ChatSpan:
    __slots__ = ("_capture", "_otel", "_span")

    def __init__(self, otel: _Otel, span: Any, capture: bool) -> None:
        self._otel = otel
        self._span = span
        self._capture = capture

    def end(self, response: ModelResponse | None, error: BaseException | None) -> None:
        span = self._span
        if response is not None:
            span.set_attributes(_usage_attributes(response.usage))
            if response.model:
                span.set_attribute("gen_ai.response.model", response.model)
            if response.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
            if self._capture and response.message is not None:
                # A reply with no reason given still has one by the schema: it stopped.
                reason = response.finish_reason or "stop"
                span.set_attribute("gen_ai.output.messages", _messages([response.message], reason))
        _end(self._otel, span, error)


class _ToolSpan:
    """A tool call's span, current while the tool runs (what the tool does nests under it)."""

    __slots__ = ("_capture", "_failed", "_otel", "_span", "_token")

    def __init__(self, otel: _Otel, span: Any, capture: bool) -> None:
        self._otel = otel
        self._span = span
        self._capture = capture
        self._failed = False
        self._token = otel.context.attach(otel.trace.set_span_in_context(span))

    def failed(self, error: BaseException) -> None:
        self._failed = True
        _raised(self._otel, self._span, error)

    def end(self, result: ToolResultBlock | None, error: BaseException | None) -> None:
        self._otel.context.detach(self._token)
        span = self._span
        if result is not None:
            if self._capture:
                span.set_attribute("gen_ai.tool.call.result", result.text)
            if result.is_error and not self._failed:
                # It did not run (no such tool, arguments that are not JSON): nothing raised.
                _fail(self._otel, span, "tool_call_refused", result.text)
        _end(self._otel, span, error)
