"""`OpenAIModel`: the Chat Completions API through the official `openai` SDK.

Any server that speaks the Chat Completions API works (vLLM, llama.cpp's
server, Ollama, ...): give its `base_url`. Install with
`pip install 'pygents-ctx[openai]'`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pygents_ctx.context.config import PromptWindow
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
    add_sampling_and_extras,
    cut_stream,
    field,
    import_sdk,
    parse_arguments,
    provider_errors,
    read_body,
    refuse_sync_client,
)
from pygents_ctx.model.base import (
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    window_parts,
)
from pygents_ctx.model.definitions import output_json_schema, to_openai_tools

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from pygents_ctx.tools import Tool

__all__ = ["OpenAIModel"]

_CHOICES = ("auto", "required", "none")
# Where OpenAI-compatible reasoning servers put the model's reasoning text
# (vLLM and DeepSeek: `reasoning_content`; others: `reasoning`).
_REASONING_FIELDS = ("reasoning_content", "reasoning")


class OpenAIModel:
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
        if not isinstance(model, str) or not model:
            raise ValueError(f"OpenAIModel needs a model name, not {model!r}")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                "OpenAIModel max_tokens_field must be 'max_tokens' or 'max_completion_tokens', "
                f"not {max_tokens_field!r}"
            )
        self._sdk = import_sdk("openai", "OpenAIModel")
        refuse_sync_client(client, self._sdk, "OpenAIModel", "AsyncOpenAI")
        if client is None:
            try:
                client = self._sdk.AsyncOpenAI(
                    api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout
                )
            except self._sdk.OpenAIError as exc:
                raise ValueError(
                    f"OpenAIModel could not make a client ({exc}); pass api_key=... or set "
                    "OPENAI_API_KEY (any string for a local server that needs no key)"
                ) from None
        self.client: AsyncOpenAI = client
        self.model = model
        self.settings = ModelSettings() if settings is None else settings
        self.strict_tools = strict_tools
        self.stream_usage = stream_usage
        self.max_tokens_field = max_tokens_field

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={str(self.client.base_url)!r})"

    def request(
        self,
        window: PromptWindow | Sequence[Message],
        tools: Sequence[Tool[..., Any]] = (),
        *,
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments `complete` passes to `client.chat.completions.create`.

        Raises:
            ValueError: A message the Chat Completions format cannot carry (see
                `to_openai`), or a tool definition it refuses.
        """
        messages, _ = window_parts(window)
        chosen = self.settings.merged(settings)
        request: dict[str, Any] = {"model": self.model, "messages": to_openai(messages)}
        if tools:
            request["tools"] = to_openai_tools(tools, strict=self.strict_tools)
            if chosen.parallel_tool_calls is not None:
                request["parallel_tool_calls"] = chosen.parallel_tool_calls
        if chosen.tool_choice is not None:
            request["tool_choice"] = (
                chosen.tool_choice
                if chosen.tool_choice in _CHOICES
                else {"type": "function", "function": {"name": chosen.tool_choice}}
            )
        if chosen.max_tokens is not None:
            request[self.max_tokens_field] = chosen.max_tokens
        if chosen.stop is not None:
            request["stop"] = list(chosen.stop)
        if chosen.output_schema is not None:
            spec = output_json_schema(chosen.output_schema)
            request["response_format"] = {"type": "json_schema", "json_schema": spec}
        add_sampling_and_extras(request, chosen)
        return request

    async def complete(
        self,
        window: PromptWindow | Sequence[Message],
        tools: Sequence[Tool[..., Any]] = (),
        *,
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """The model's reply to `window`, offered `tools` (see `Model.complete`).

        Raises:
            ModelAPIError: The server refused the call or could not be reached.
            ModelResponseError: The reply has no choice, or does not match the API.
            ValueError: As for `request`.
        """
        request = self.request(window, tools, settings=settings)
        with provider_errors(self._sdk, "OpenAI"):
            response = await self.client.chat.completions.create(**request)
        response = read_body(response, "OpenAI")
        choices = field(response, "choices") or []
        if not choices:
            raise ModelResponseError("OpenAI: the reply has no choices; nothing to read")
        choice = choices[0]
        reply = field(choice, "message")
        blocks: list[ContentBlock] = []
        reasoning = "".join(_reasoning(reply))
        if reasoning:
            blocks.append(ThinkingBlock(reasoning))
        refusal = field(reply, "refusal") or None
        text = "".join(part for part in (field(reply, "content"), refusal) if part)
        if text.strip():
            blocks.append(TextBlock(text))
        for call in field(reply, "tool_calls") or []:
            function = field(call, "function")
            blocks.append(
                ToolUseBlock(
                    field(call, "id"),
                    field(function, "name"),
                    parse_arguments(field(function, "arguments") or ""),
                )
            )
        return ModelResponse(
            Message("assistant", blocks),
            _usage(field(response, "usage")),
            field(response, "model") or self.model,
            field(choice, "finish_reason"),
            refusal,
        )

    async def stream(
        self,
        window: PromptWindow | Sequence[Message],
        tools: Sequence[Tool[..., Any]] = (),
        *,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        """The reply as the server writes it, then the whole `ModelResponse` (see `Model.stream`).

        Raises:
            ModelAPIError: The server refused the call, could not be reached, or
                the stream broke off.
            ValueError: As for `request`.
        """
        request = self.request(window, tools, settings=settings)
        request["stream"] = True
        if self.stream_usage:
            request["stream_options"] = {"include_usage": True}
        reply = _StreamedReply(self.model)
        with provider_errors(self._sdk, "OpenAI"):
            chunks = await self.client.chat.completions.create(**request)
            try:
                async for chunk in chunks:
                    for event in reply.read(chunk):
                        yield event
            finally:
                await chunks.close()
        # The SDK hides `[DONE]`; the finish reason is the mark of a reply that ended.
        if reply.finish_reason is None:
            raise cut_stream("OpenAI", "the reply's finish reason")
        yield reply.response()


def _reasoning(value: Any) -> list[str]:
    """The reasoning text a compatible server put on a message or a delta."""
    return [
        piece
        for name in _REASONING_FIELDS
        if isinstance(piece := field(value, name), str) and piece
    ]


class _StreamedReply:
    """The reply, gathered from a stream's chunks."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # index -> [id, name, argument pieces]
        self.usage = Usage()
        self.finish_reason: str | None = None

    def read(self, chunk: Any) -> list[ModelStreamEvent]:
        events: list[ModelStreamEvent] = []
        self.model = field(chunk, "model") or self.model
        if field(chunk, "usage") is not None:
            self.usage = _usage(field(chunk, "usage"))
        for choice in field(chunk, "choices") or []:
            if field(choice, "index", 0) != 0:
                continue
            self.finish_reason = field(choice, "finish_reason") or self.finish_reason
            delta = field(choice, "delta")
            if delta is None:
                continue
            for piece in _reasoning(delta):
                self.reasoning.append(piece)
                events.append(ThinkingDelta(piece))
            content, refusal = field(delta, "content"), field(delta, "refusal")
            if refusal:
                self.refusal.append(refusal)
            for piece in (content, refusal):
                if piece:
                    self.text.append(piece)
                    events.append(TextDelta(piece))
            for call in field(delta, "tool_calls") or []:
                events.append(self._call_piece(call))
        return events

    def _call_piece(self, call: Any) -> ToolCallDelta:
        index = field(call, "index", 0)
        function = field(call, "function")
        call_id, name = field(call, "id"), field(function, "name")
        arguments = field(function, "arguments") or ""
        known = self.calls.get(index)
        if known is None:
            known = self.calls[index] = [call_id or "", name or "", []]
        else:
            known[0] = known[0] or call_id or ""
            known[1] = known[1] or name or ""
        known[2].append(arguments)
        return ToolCallDelta(index, call_id, name, arguments)

    def response(self) -> ModelResponse:
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


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    prompt = int(field(usage, "prompt_tokens") or 0)
    details = field(usage, "prompt_tokens_details")
    cached = int(field(details, "cached_tokens") or 0) if details is not None else 0
    return Usage(prompt, int(field(usage, "completion_tokens") or 0), min(cached, prompt))
