"""`OpenAIModel`: the Chat Completions API through the official `openai` SDK.

Any server that speaks the Chat Completions API works (vLLM, llama.cpp's
server, Ollama, ...): give its `base_url`. Install with
`pip install -e '.[openai]'` from a checkout.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pygents_ctx.context.messages import (
    ContentBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from pygents_ctx.context.usage import Usage
from pygents_ctx.context.wire import to_openai
from pygents_ctx.errors import ModelResponseError
from pygents_ctx.model._sdk import (
    SDKModel,
    StreamedReply,
    add_sampling_and_extras,
    add_tools,
    check_model_name,
    cut_stream,
    import_sdk,
    openai_client,
    parse_arguments,
    refuse_sync_client,
    sdk_object,
)
from pygents_ctx.model.base import (
    ModelResponse,
    ModelSettings,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    window_parts,
)
from pygents_ctx.model.definitions import output_json_schema, to_openai_tools

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import ChoiceDelta, ChoiceDeltaToolCall
    from openai.types.completion_usage import CompletionUsage

    from pygents_ctx.model.base import ModelStreamEvent, Tools, Window

__all__ = ["OpenAIModel"]

# Where OpenAI-compatible reasoning servers put the model's reasoning text
# (vLLM and DeepSeek: `reasoning_content`; others: `reasoning`).
_REASONING_FIELDS = ("reasoning_content", "reasoning")


class OpenAIModel(SDKModel):
    """A `Model` served by the Chat Completions API (OpenAI, or a compatible server).

    The SDK's own retries are switched off (`max_retries=0`): a `ModelLoop`
    retries with its `RetryPolicy`, so there is one policy. Calling
    `complete()` yourself, wrap it in your own retries, or pass a client with
    retries of its own (`client=AsyncOpenAI(max_retries=2)`, which the adapter
    then keeps).

    What a reply becomes: its text (the refusal text too), one `TextBlock`,
    left out when blank; its `refusal` (streamed as `delta.refusal`, shown as
    `TextDelta`s), also `ModelResponse.refusal`, which ends a `ModelLoop` run
    with `LoopStop.REFUSAL`; its tool calls, `ToolUseBlock`s; reasoning text a
    compatible server adds (`reasoning_content` or `reasoning`), a
    `ThinkingBlock` without signature before them, shown while streaming as
    `ThinkingDelta`s and never sent back. A stream that ends before the reply's
    finish reason is a transient `ModelAPIError` (the reply is incomplete), as
    is a body that is not JSON and a connection that breaks mid-stream.

    With `settings.output_schema`, the request asks for the answer in that
    shape (`response_format` of type `json_schema`); the reply's text is the
    JSON document. With `strict` (the default) the schema is sent in the form
    strict mode needs: objects closed, and every property required, an
    optional one as nullable (null then means "left out").

    Args:
        model: The model's name, e.g. `"gpt-4o"`, or the name a local server uses.
        base_url: The server, e.g. `"http://localhost:11434/v1"` (default:
            OpenAI, or `OPENAI_BASE_URL`).
        api_key: The key (default: `OPENAI_API_KEY`). A local server that
            needs none still needs a string here, any string.
        client: An `AsyncOpenAI` to use instead of making one (its retries
            are kept as they are).
        settings: Default settings for every call.
        strict_tools: Offer tools with strict schemas (see `to_openai_tools`).
        timeout: Seconds a request may take.
        stream_usage: Ask for usage at the end of a stream
            (`stream_options.include_usage`); turn off for a server that refuses it.
        max_tokens_field: The request field `settings.max_tokens` goes to:
            `"max_tokens"` (what compatible servers read) or
            `"max_completion_tokens"` (what OpenAI's reasoning models need).

    Raises:
        ImportError: The `openai` package is not installed.
        ValueError: `model` is empty.
        TypeError: `client` is the synchronous `OpenAI`; pass an `AsyncOpenAI`.
    """

    provider: ClassVar[str] = "OpenAI"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncOpenAI | None = None,
        settings: ModelSettings | None = None,
        strict_tools: bool = False,
        timeout: float = 600.0,
        stream_usage: bool = True,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    ) -> None:
        check_model_name(model, "OpenAIModel")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                "OpenAIModel max_tokens_field must be 'max_tokens' or 'max_completion_tokens', "
                f"not {max_tokens_field!r}"
            )
        self._sdk = import_sdk("openai", "OpenAIModel")
        refuse_sync_client(client, self._sdk, "OpenAIModel", "AsyncOpenAI")
        if client is None:
            client = openai_client(
                self._sdk, "OpenAIModel", api_key=api_key, base_url=base_url, timeout=timeout
            )
        self.client: AsyncOpenAI = client
        self.model = model
        self.settings = ModelSettings() if settings is None else settings
        self.strict_tools = strict_tools
        self.stream_usage = stream_usage
        self.max_tokens_field = max_tokens_field

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={str(self.client.base_url)!r})"

    def request(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> dict[str, Any]:
        """The keyword arguments `complete` passes to `client.chat.completions.create`.

        Raises:
            ValueError: A message the Chat Completions format cannot carry (see
                `to_openai`), or a tool definition it refuses.
        """
        messages, _ = window_parts(window)
        chosen = self.settings.merged(settings)
        request: dict[str, Any] = {"model": self.model, "messages": to_openai(messages)}
        add_tools(request, to_openai_tools(tools, strict=self.strict_tools), chosen, _forced)
        if chosen.max_tokens is not None:
            request[self.max_tokens_field] = chosen.max_tokens
        if chosen.stop is not None:
            request["stop"] = list(chosen.stop)
        if chosen.output_schema is not None:
            spec = output_json_schema(chosen.output_schema)
            request["response_format"] = {"type": "json_schema", "json_schema": spec}
        add_sampling_and_extras(request, chosen)
        return request

    def _create(self, request: dict[str, Any]) -> Awaitable[Any]:
        if request.get("stream") and self.stream_usage:
            request["stream_options"] = {"include_usage": True}
        return self.client.chat.completions.create(**request)

    def _read(self, reply: object, settings: ModelSettings) -> ModelResponse:
        completion = sdk_object(reply, self._sdk.types.chat.ChatCompletion, self.provider)
        return _read_completion(completion, self.model)

    def _streamed(self, settings: ModelSettings) -> _StreamedReply:
        return _StreamedReply(self.model, self._sdk.types.chat.ChatCompletionChunk)


def _forced(name: str) -> dict[str, Any]:
    """The Chat Completions `tool_choice` that makes the model call the tool `name`."""
    return {"type": "function", "function": {"name": name}}


def _read_completion(completion: ChatCompletion, model: str) -> ModelResponse:
    if not completion.choices:
        raise ModelResponseError("OpenAI: the reply has no choices; nothing to read")
    choice = completion.choices[0]
    reply = choice.message
    blocks: list[ContentBlock] = []
    reasoning = "".join(_reasoning(reply.model_extra))
    if reasoning:
        blocks.append(ThinkingBlock(reasoning))
    refusal = reply.refusal or None
    text = "".join(part for part in (reply.content, refusal) if part)
    if text.strip():
        blocks.append(TextBlock(text))
    for call in reply.tool_calls or []:
        if call.type == "custom":
            raise ModelResponseError(
                f"OpenAI: the reply calls the custom tool {call.custom.name!r}, which a Message "
                "cannot carry; offer function tools only"
            )
        function = call.function
        blocks.append(
            ToolUseBlock(call.id, function.name, parse_arguments(function.arguments or ""))
        )
    return ModelResponse(
        Message("assistant", blocks),
        _usage(completion.usage),
        completion.model or model,
        choice.finish_reason,
        refusal,
    )


def _reasoning(extra: dict[str, Any] | None) -> list[str]:
    """The reasoning text a compatible server put on a message or a delta (its extra fields)."""
    if not extra:
        return []
    return [
        piece for name in _REASONING_FIELDS if isinstance(piece := extra.get(name), str) and piece
    ]


class _StreamedReply(StreamedReply):
    """The reply, gathered from a stream's chunks."""

    def __init__(self, model: str, chunk_type: type[ChatCompletionChunk]) -> None:
        self.model = model
        self.chunk_type = chunk_type
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # index -> [id, name, argument pieces]
        self.usage = Usage()
        self.finish_reason: str | None = None

    def read(self, chunk: object) -> list[ModelStreamEvent]:
        read = sdk_object(chunk, self.chunk_type, "OpenAI")
        events: list[ModelStreamEvent] = []
        self.model = read.model or self.model
        if read.usage is not None:
            self.usage = _usage(read.usage)
        for choice in read.choices or []:
            if choice.index != 0:
                continue
            self.finish_reason = choice.finish_reason or self.finish_reason
            # The SDK builds its objects unchecked: a field the server left out is None.
            delta: ChoiceDelta | None = choice.delta
            if delta is None:
                continue
            for thought in _reasoning(delta.model_extra):
                self.reasoning.append(thought)
                events.append(ThinkingDelta(thought))
            if delta.refusal:
                self.refusal.append(delta.refusal)
            for piece in (delta.content, delta.refusal):
                if piece:
                    self.text.append(piece)
                    events.append(TextDelta(piece))
            for call in delta.tool_calls or []:
                events.append(self._call_piece(call))
        return events

    def _call_piece(self, call: ChoiceDeltaToolCall) -> ToolCallDelta:
        function = call.function
        call_id = call.id
        name = function.name if function is not None else None
        arguments = (function.arguments if function is not None else None) or ""
        known = self.calls.get(call.index)
        if known is None:
            known = self.calls[call.index] = [call_id or "", name or "", []]
        else:
            known[0] = known[0] or call_id or ""
            known[1] = known[1] or name or ""
        known[2].append(arguments)
        return ToolCallDelta(call.index, call_id, name, arguments)

    def response(self) -> ModelResponse:
        # The SDK hides `[DONE]`; the finish reason is the mark of a reply that ended.
        if self.finish_reason is None:
            raise cut_stream("OpenAI", "the reply's finish reason")
        blocks: list[ContentBlock] = []
        if self.reasoning:
            blocks.append(ThinkingBlock("".join(self.reasoning)))
        text = "".join(self.text)
        if text.strip():
            blocks.append(TextBlock(text))
        for index in sorted(self.calls):
            call_id, name, pieces = self.calls[index]
            if not call_id or not name:
                raise ModelResponseError(
                    f"OpenAI: streamed tool call {index} has no {'id' if not call_id else 'name'}"
                )
            blocks.append(ToolUseBlock(call_id, name, parse_arguments("".join(pieces))))
        return ModelResponse(
            Message("assistant", blocks),
            self.usage,
            self.model,
            self.finish_reason,
            "".join(self.refusal) or None,
        )


def _usage(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage()
    prompt = int(usage.prompt_tokens or 0)
    details = usage.prompt_tokens_details
    cached = int(details.cached_tokens or 0) if details is not None else 0
    return Usage(prompt, int(usage.completion_tokens or 0), min(cached, prompt))
