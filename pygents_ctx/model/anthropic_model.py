"""`AnthropicModel`: the Messages API through the official `anthropic` SDK.

Install the `anthropic` extra (`pip install -e '.[anthropic]'` from a checkout).

Prompt caching: with `cache=True` (the default) the request marks cache
breakpoints (`cache_control`) where the next request will start the same, at
most `MAX_BREAKPOINTS` (4, the most the API takes), in this order of value:
the end of the window, which caches everything up to it; when the window comes
from a `StableWindow` or a `PinnedWindow`, the end of its stable part (the
previous window, or the pinned part), where the previous request's cache ends
however many messages came since; the system prompt; and the last tool
definition. A mark on a prefix shorter than the model's minimum (1,024 tokens
for most models, more for some) costs nothing and caches nothing. Marks of your
own (`TextBlock(..., cache_control=...)`) are sent as they are and count toward
the four: a system block's replaces the system prompt's, and when any message
carries one, the window's marks by position are left to you; more than four of
your own is a `ValueError` before anything is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar, Final

import orjson

from pygents_ctx.context.messages import (
    ContentBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from pygents_ctx.context.usage import Usage
from pygents_ctx.context.wire import to_anthropic
from pygents_ctx.errors import ModelResponseError
from pygents_ctx.model._sdk import (
    SDKModel,
    StreamedReply,
    check_model_name,
    cut_stream,
    import_sdk,
    parse_arguments,
    refuse_sync_client,
    sdk_object,
)
from pygents_ctx.model.base import (
    ModelResponse,
    ModelSettings,
    OutputSchema,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    window_parts,
)
from pygents_ctx.model.definitions import strict_schema, to_anthropic_tools

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import ContentBlock as AnthropicBlock
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types import (
        MessageDeltaUsage,
        RawContentBlockDelta,
        RawMessageStreamEvent,
        RefusalStopDetails,
    )
    from anthropic.types import Usage as AnthropicUsage

    from pygents_ctx.model.base import ModelStreamEvent, Tools, Window

__all__ = ["MAX_BREAKPOINTS", "AnthropicModel"]

MAX_BREAKPOINTS: Final = 4
"""The most `cache_control` marks the Messages API takes in one request."""
DEFAULT_MAX_TOKENS: Final = 4096
_EPHEMERAL: Final = {"type": "ephemeral"}
_CHOICES: Final = {"auto": "auto", "required": "any", "none": "none"}
_FINAL_TOOL_DESCRIPTION: Final = "Give the final answer: call this tool with it, in this shape."


class AnthropicModel(SDKModel):
    """A `Model` served by Anthropic's Messages API.

    The SDK's own retries are switched off (`max_retries=0`): a `ModelLoop`
    retries with its `RetryPolicy`, so there is one policy (a `client` you
    pass keeps its own settings).

    What a reply becomes: text blocks, `TextBlock`s (a blank one, which the
    API would refuse back, is left out); `tool_use` blocks, `ToolUseBlock`s;
    extended thinking (`thinking` with its signature, `redacted_thinking`),
    `ThinkingBlock` and `RedactedThinkingBlock`, kept in place and sent back
    unchanged, as the API requires (streamed thinking arrives as
    `ThinkingDelta`s). Other blocks (server tool results) are a
    `ModelResponseError`. A stream that ends without `message_stop`, a body
    that is not JSON and a connection that breaks mid-stream are transient
    `ModelAPIError`s. A reply stopped with `stop_reason: "refusal"` (the API's
    safety classifiers ended it, perhaps midway) keeps what it held, and its
    `ModelResponse.refusal` is the API's explanation (`stop_details`) or a
    sentence saying the reply was declined; a `ModelLoop` run then ends with
    `LoopStop.REFUSAL`.

    With `settings.output_schema`, the model is offered one more tool, named
    by the schema, whose input is the answer, and made to call a tool
    (`tool_choice` names it when there are no other tools, and is `any` when
    there are; `auto` when extended thinking is on, which forbids forcing).
    Its call comes back as the reply's text, the JSON document, not as a tool
    call. Called beside other tools, those calls stay calls (the loop runs
    them and asks again) and the JSON stays as text before them.

    Args:
        model: The model's name, e.g. `"claude-sonnet-4-5"`.
        base_url: The server (default: Anthropic's, or `ANTHROPIC_BASE_URL`).
        api_key: The key (default: `ANTHROPIC_API_KEY`).
        client: An `AsyncAnthropic` to use instead of making one.
        settings: Default settings for every call; `max_tokens` is 4096 unless set.
        strict_tools: Offer tools with strict schemas (see `to_anthropic_tools`).
        cache: Place prompt-cache breakpoints (see the module docstring).
        timeout: Seconds a request may take.

    Raises:
        ImportError: The `anthropic` package is not installed.
        ValueError: `model` is empty.
        TypeError: `client` is a synchronous client; pass an `AsyncAnthropic`.
    """

    provider: ClassVar[str] = "Anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncAnthropic | None = None,
        settings: ModelSettings | None = None,
        strict_tools: bool = False,
        cache: bool = True,
        timeout: float = 600.0,
    ) -> None:
        check_model_name(model, "AnthropicModel")
        self._sdk = import_sdk("anthropic", "AnthropicModel")
        refuse_sync_client(client, self._sdk, "AnthropicModel", "AsyncAnthropic")
        if client is None:
            client = self._sdk.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout
            )
        self.client: AsyncAnthropic = client
        self.model = model
        self.settings = ModelSettings(max_tokens=DEFAULT_MAX_TOKENS).merged(settings)
        self.strict_tools = strict_tools
        self.cache = cache

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, base_url={str(self.client.base_url)!r})"

    def request(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> dict[str, Any]:
        """The keyword arguments `complete` passes to `client.messages.create`.

        Raises:
            ValueError: A message the Messages format cannot carry (see
                `to_anthropic`), a tool definition it refuses, or an output
                schema named like one of the tools.
        """
        messages, stable_prefix = window_parts(window)
        chosen = self.settings.merged(settings)
        system, wire = to_anthropic(messages)
        request: dict[str, Any] = {"model": self.model, "max_tokens": chosen.max_tokens}
        definitions = to_anthropic_tools(tools, strict=self.strict_tools) if tools else []
        output = chosen.output_schema
        if output is not None:
            definitions.append(_final_tool(output, definitions))
        if definitions:
            request["tools"] = definitions
        lead = 0  # the leading system messages, now in `system`
        while lead < len(messages) and messages[lead].role == "system":
            lead += 1
        own_system = _marks(system) if isinstance(system, list) else 0
        own = own_system + sum(_marks(m["content"]) for m in wire if isinstance(m["content"], list))
        if own > MAX_BREAKPOINTS:
            raise ValueError(
                f"the messages carry {own} cache_control marks; the Anthropic API takes at "
                f"most {MAX_BREAKPOINTS} in a request: remove some of your marks"
            )
        if self.cache:
            # Breakpoints by position: only for a window that promises to grow by appending
            # (a plain list promises nothing: a mark there would be a cache write the next
            # request may not read), with one wire message per message (none left out), and
            # left to you when your messages carry marks of their own.
            by_position = stable_prefix is not None and own == own_system
            whole = by_position and bool(wire) and len(wire) == len(messages) - lead
            ends = [len(wire)] if whole else []
            if whole and stable_prefix is not None and 1 <= stable_prefix - lead < len(wire):
                ends.append(stable_prefix - lead)
            slots = MAX_BREAKPOINTS - own
            for end in ends[:slots]:
                _mark(wire[end - 1])
            slots -= min(slots, len(ends))
            if system is not None and not own_system and slots:
                blocks: list[dict[str, Any]] = (
                    [{"type": "text", "text": system}] if isinstance(system, str) else system
                )
                blocks[-1]["cache_control"] = dict(_EPHEMERAL)
                system, slots = blocks, slots - 1
            if definitions and slots:
                definitions[-1]["cache_control"] = dict(_EPHEMERAL)
        if system is not None:
            request["system"] = system
        request["messages"] = wire
        choice = _tool_choice(chosen, bool(tools))
        if choice is not None and definitions:
            request["tool_choice"] = choice
        if chosen.stop is not None:
            request["stop_sequences"] = list(chosen.stop)
        # Sampling settings travel in the body: newer SDKs no longer name them as
        # arguments, and the API still reads them where a model takes them.
        body = {
            name: getattr(chosen, name)
            for name in ("temperature", "top_p")
            if getattr(chosen, name) is not None
        }
        body.update(chosen.extra_body or {})
        if body:
            request["extra_body"] = body
        if chosen.extra_headers:
            request["extra_headers"] = dict(chosen.extra_headers)
        return request

    def _create(self, request: dict[str, Any]) -> Awaitable[Any]:
        return self.client.messages.create(**request)

    def _read(self, reply: object, settings: ModelSettings) -> ModelResponse:
        message = sdk_object(reply, self._sdk.types.Message, self.provider)
        return _read_message(message, _final_name(settings), self.model)

    def _streamed(self, settings: ModelSettings) -> _StreamedReply:
        return _StreamedReply(self.model, _final_name(settings), self._sdk.BaseModel)


def _read_message(message: AnthropicMessage, final: str | None, model: str) -> ModelResponse:
    """The reply; a call of the output schema's tool `final` is its text, the answer."""
    blocks: list[ContentBlock] = []
    for index, block in enumerate(message.content or []):
        if block.type == "text":
            text = block.text or ""
            if text.strip():
                blocks.append(TextBlock(text))
        elif block.type == "tool_use":
            tool_input = dict(block.input) if isinstance(block.input, dict) else {}
            if block.name == final:
                blocks.append(TextBlock(orjson.dumps(tool_input).decode()))
                continue
            blocks.append(ToolUseBlock(block.id, block.name, tool_input))
        elif block.type == "thinking":
            blocks.append(ThinkingBlock(block.thinking or "", block.signature))
        elif block.type == "redacted_thinking":
            blocks.append(RedactedThinkingBlock(block.data or ""))
        else:
            raise _unsupported(block.type, index)
    # The SDK builds its objects unchecked: a field the server left out is None.
    usage: AnthropicUsage | None = message.usage
    return ModelResponse(
        Message("assistant", blocks),
        Usage() if usage is None else _usage(_Counts().add(usage)),
        message.model or model,
        message.stop_reason,
        _refusal(message.stop_reason, message.stop_details),
    )


def _refusal(stop_reason: object, details: RefusalStopDetails | None) -> str | None:
    """The refusal's text for a reply stopped by `stop_reason` (None: it was not refused)."""
    if stop_reason != "refusal":
        return None
    explanation = details.explanation if details is not None else None
    if isinstance(explanation, str) and explanation.strip():
        return explanation
    category = details.category if details is not None else None
    about = f" (category {category!r})" if isinstance(category, str) and category else ""
    return f"Anthropic declined this request{about}: the reply was stopped for safety."


def _final_name(settings: ModelSettings) -> str | None:
    return None if settings.output_schema is None else settings.output_schema.name


def _final_tool(output: OutputSchema, definitions: list[dict[str, Any]]) -> dict[str, Any]:
    """The tool the model calls with its answer, when an output schema is asked for."""
    if any(definition["name"] == output.name for definition in definitions):
        raise ValueError(
            f"the output schema {output.name!r} is named like one of the tools; "
            "give OutputSchema another name"
        )
    schema = dict(output.schema)
    if output.strict:
        schema = strict_schema(schema, f"output schema {output.name!r}", all_required=False)
    final: dict[str, Any] = {
        "name": output.name,
        "description": output.description or _FINAL_TOOL_DESCRIPTION,
        "input_schema": schema,
    }
    if output.strict:
        final["strict"] = True
    return final


def _marks(blocks: list[dict[str, Any]]) -> int:
    """The number of blocks with a `cache_control` mark."""
    return sum(1 for block in blocks if "cache_control" in block)


def _mark(message: dict[str, Any]) -> None:
    """Put a cache breakpoint on the last block of a wire message."""
    content = message["content"]
    if isinstance(content, str):
        content = message["content"] = [{"type": "text", "text": content}]
    content[-1]["cache_control"] = dict(_EPHEMERAL)


def _thinking_on(settings: ModelSettings) -> bool:
    thinking = (settings.extra_body or {}).get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _tool_choice(settings: ModelSettings, tools: bool) -> dict[str, Any] | None:
    choice: dict[str, Any] | None = None
    output = settings.output_schema
    if output is not None:
        # The model must answer through the final tool; with other tools it may call
        # those first. Extended thinking refuses a forced choice: then it is asked.
        if _thinking_on(settings):
            choice = {"type": "auto"}
        else:
            choice = {"type": "any"} if tools else {"type": "tool", "name": output.name}
    elif settings.tool_choice is not None:
        kind = _CHOICES.get(settings.tool_choice)
        choice = (
            {"type": kind} if kind is not None else {"type": "tool", "name": settings.tool_choice}
        )
    if settings.parallel_tool_calls is False:
        choice = choice or {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    return choice


def _unsupported(kind: object, index: int) -> ModelResponseError:
    return ModelResponseError(
        f"Anthropic: reply block {index} is {kind!r}, which a Message cannot carry; "
        "only text, tool_use and thinking are read (turn off server tools)"
    )


class _Counts:
    """A reply's token counts, as they come (`message_delta`'s are cumulative: the latest wins)."""

    def __init__(self) -> None:
        self.fresh = self.output = self.read = self.written = 0

    def add(self, usage: AnthropicUsage | MessageDeltaUsage) -> _Counts:
        if usage.input_tokens is not None:
            self.fresh = int(usage.input_tokens)
        if usage.output_tokens is not None:
            self.output = int(usage.output_tokens)
        if usage.cache_read_input_tokens is not None:
            self.read = int(usage.cache_read_input_tokens)
        if usage.cache_creation_input_tokens is not None:
            self.written = int(usage.cache_creation_input_tokens)
        return self


class _StreamedReply(StreamedReply):
    """The reply, gathered from a stream's events."""

    def __init__(self, model: str, final: str | None, event_type: Any) -> None:
        self.model = model
        self.final = final  # the output schema's tool, whose input is the answer's text
        self.event_type = event_type  # the SDK's BaseModel: every kind of event is one
        # block index -> [kind, ...]: ["text", pieces], ["tool_use", id, name, pieces],
        # ["answer", pieces], ["thinking", pieces, signature], ["redacted_thinking", data]
        self.blocks: dict[int, list[Any]] = {}
        self.calls: dict[int, int] = {}  # block index -> call number
        self.counts = _Counts()
        self.stop_reason: str | None = None
        self.stop_details: RefusalStopDetails | None = None
        self.stopped = False  # message_stop came: the reply is whole

    def read(self, chunk: object) -> list[ModelStreamEvent]:
        event: RawMessageStreamEvent = sdk_object(chunk, self.event_type, "Anthropic")
        if event.type == "message_start":
            message = event.message
            self.model = message.model or self.model
            self._count(message.usage)
        elif event.type == "content_block_start":
            return self._start(event.index, event.content_block)
        elif event.type == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif event.type == "message_delta":
            delta = event.delta
            self.stop_reason = delta.stop_reason or self.stop_reason
            self.stop_details = delta.stop_details or self.stop_details
            self._count(event.usage)
        elif event.type == "message_stop":
            self.stopped = True
        return []

    def _count(self, usage: AnthropicUsage | MessageDeltaUsage | None) -> None:
        # The SDK builds its objects unchecked: a field the server left out is None.
        if usage is not None:
            self.counts.add(usage)

    def _start(self, index: int, block: AnthropicBlock) -> list[ModelStreamEvent]:
        if block.type == "text":
            text = block.text or ""
            self.blocks[index] = ["text", [text]]
            return [TextDelta(text)] if text else []
        if block.type == "tool_use" and block.name == self.final:
            self.blocks[index] = ["answer", []]
            return []
        if block.type == "tool_use":
            number = self.calls[index] = len(self.calls)
            self.blocks[index] = ["tool_use", block.id, block.name, []]
            return [ToolCallDelta(number, block.id, block.name, "")]
        if block.type == "thinking":
            thinking = block.thinking or ""
            self.blocks[index] = ["thinking", [thinking], block.signature or None]
            return [ThinkingDelta(thinking)] if thinking else []
        if block.type == "redacted_thinking":
            self.blocks[index] = ["redacted_thinking", block.data or ""]
            return []
        raise _unsupported(block.type, index)

    def _delta(self, index: int, delta: RawContentBlockDelta) -> list[ModelStreamEvent]:
        block = self.blocks.get(index)
        if block is None:
            raise ModelResponseError(f"Anthropic: a delta for block {index}, which never started")
        if delta.type == "text_delta":
            block[1].append(delta.text)
            return [TextDelta(delta.text)]
        if delta.type == "input_json_delta":
            piece = delta.partial_json or ""
            block[-1].append(piece)
            if block[0] == "answer":  # the answer's JSON, written as text
                return [TextDelta(piece)] if piece else []
            return [ToolCallDelta(self.calls[index], None, None, piece)]
        if delta.type == "thinking_delta":
            block[1].append(delta.thinking)
            return [ThinkingDelta(delta.thinking)]
        if delta.type == "signature_delta":
            block[2] = delta.signature or None
        return []  # citations: nothing a Message keeps

    def response(self) -> ModelResponse:
        if not self.stopped:
            raise cut_stream("Anthropic", "message_stop")
        blocks: list[ContentBlock] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block[0] in ("text", "answer"):
                text = "".join(block[1])
                if block[0] == "answer" and not text.strip():
                    text = "{}"  # the API's way of writing an empty input
                if text.strip():
                    blocks.append(TextBlock(text))
            elif block[0] == "thinking":
                blocks.append(ThinkingBlock("".join(block[1]), block[2]))
            elif block[0] == "redacted_thinking":
                blocks.append(RedactedThinkingBlock(block[1]))
            else:
                blocks.append(ToolUseBlock(block[1], block[2], parse_arguments("".join(block[3]))))
        return ModelResponse(
            Message("assistant", blocks),
            _usage(self.counts),
            self.model,
            self.stop_reason,
            _refusal(self.stop_reason, self.stop_details),
        )


def _usage(counts: _Counts) -> Usage:
    """Anthropic's input count leaves out what the cache read and wrote; `Usage`'s holds both."""
    return Usage(
        counts.fresh + counts.read + counts.written, counts.output, counts.read, counts.written
    )
