"""`OpenAIResponsesModel`: OpenAI's Responses API through the official `openai` SDK.

The Responses API is OpenAI's newer interface beside Chat Completions. This
adapter uses it statelessly: every call sends the whole window with
`store=False`, and never refers to an earlier response by id, because the
conversation store is the truth (a window may be trimmed, summarised or
branched between calls). Install the `openai` extra (`pip install -e '.[openai]'` from a checkout).

How a window travels:

- leading system messages become `instructions`; a later system message is
  an input message of role `system`;
- user text and images become a user message (`input_text`, `input_image`
  with a base64 data URL); tool results become `function_call_output` items
  (an error result's text is prefixed `"Error: "`, as the API has no flag);
- an assistant message becomes an assistant message for its text and a
  `function_call` item per tool call, in block order;
- empty text is never sent, and a message left with nothing is left out;
  blocks of other providers' reasoning in an assistant message are not sent
  (the Responses API has no place for them).

Reasoning round trip. As nothing is stored on OpenAI's side, every request
asks for `include=["reasoning.encrypted_content"]` (unless `extra_body` sets
`store` true). A reasoning item of the reply becomes a `ReasoningBlock` in
place (its id, summaries, encrypted content, and the model the request
named), and goes back as a `reasoning` item in the same place, before the
function calls or message it led to, so a reasoning model does not think
again at every tool round. A `ReasoningBlock` is sent back only when:

- its `model` is this adapter's `model`: reasoning from another model (a
  transcript restored under another model or provider) is left out, as the
  API cannot read another model's encrypted reasoning;
- it has `encrypted_content`: without it the API would look the item up by
  id, and nothing is stored;
- an item follows it in its message (a function call or text): the API
  refuses a reasoning item without the item it led to (a reply cut by
  `max_output_tokens` may hold only reasoning).

Otherwise it stays in the transcript, shown and saved, and is not sent.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

from pygents_ctx._json import dumps
from pygents_ctx.context.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.context.usage import Usage
from pygents_ctx.errors import ModelAPIError, ModelResponseError
from pygents_ctx.model._sdk import (
    _TRANSIENT_KINDS,
    SDKModel,
    StreamedReply,
    add_sampling_and_extras,
    add_tools,
    check_model_name,
    import_sdk,
    openai_client,
    parse_arguments,
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
    from openai.types.responses import (
        Response,
        ResponseError,
        ResponseErrorEvent,
        ResponseOutputItem,
        ResponseOutputMessage,
        ResponseReasoningItem,
        ResponseStreamEvent,
        ResponseUsage,
    )
    from openai.types.responses.response import IncompleteDetails

    from pygents_ctx.model.base import ModelStreamEvent, Tools, Window

__all__ = ["OpenAIResponsesModel"]

_PROVIDER: Final = "OpenAI Responses"
# A tool result's text when it is an error: the API has no flag for it.
_ERROR_PREFIX: Final = "Error: "
# Why an incomplete response stopped, in the words the other adapters use.
_INCOMPLETE: Final = {"max_output_tokens": "length", "content_filter": "content_filter"}
_ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"


class OpenAIResponsesModel(SDKModel):
    """A `Model` served by OpenAI's Responses API (`client.responses.create`).

    Stateless: each call sends the whole window (`store=False`); nothing is
    kept on OpenAI's side between calls. The SDK's own retries are switched
    off (`max_retries=0`): a `ModelLoop` retries with its `RetryPolicy`.

    A reply's text is one `TextBlock` per output message, its function calls
    `ToolUseBlock`s (the call's `call_id` is the block's id). `finish_reason`
    is `"stop"`, `"tool_calls"` (the reply calls tools), `"length"` (the
    response is incomplete because it reached `max_tokens`) or
    `"content_filter"`. `ModelSettings.output_schema` is sent as
    `text.format` (a JSON schema); the reply's text is then the JSON document.
    A `refusal` content part (streamed as `response.refusal.delta` events,
    shown as `TextDelta`s) is the message's text and `ModelResponse.refusal`,
    which ends a `ModelLoop` run with `LoopStop.REFUSAL`.

    A reasoning item is a `ReasoningBlock` in place (its summaries streamed as
    `ThinkingDelta`s), sent back encrypted on the next request to the same
    model (see the module docstring for when it is left out); the reply's
    `output_tokens_details.reasoning_tokens` is `Usage.reasoning_tokens`.

    Args:
        model: The model's name, e.g. `"gpt-4.1"`.
        base_url: The server (default: OpenAI's, or `OPENAI_BASE_URL`).
        api_key: The key (default: `OPENAI_API_KEY`).
        client: An `AsyncOpenAI` client to use instead of making one
            (`base_url`, `api_key` and `timeout` are then ignored).
        settings: Default settings for every call.
        strict_tools: Send tool definitions in strict mode (see
            `to_openai_tools`). The Responses API makes a function strict
            unless told otherwise, so this adapter always says which.
        timeout: Seconds before a call times out (a transient error).

    Raises:
        ImportError: The `openai` package is not installed.
        ValueError: `model` is empty, or no client can be made (no key).
        TypeError: `client` is a synchronous `OpenAI` client (pass an `AsyncOpenAI`).

    Examples:
        >>> model = OpenAIResponsesModel("gpt-4.1", api_key="sk-test")
        >>> request = model.request([Message("system", "Be brief."), Message("user", "Hi")])
        >>> request["instructions"], request["input"], request["store"]
        ('Be brief.', [{'type': 'message', 'role': 'user', 'content': 'Hi'}], False)
    """

    provider: ClassVar[str] = _PROVIDER

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
    ) -> None:
        check_model_name(model, "OpenAIResponsesModel")
        if settings is not None and not isinstance(settings, ModelSettings):
            raise TypeError(
                f"OpenAIResponsesModel settings must be a ModelSettings, not {settings!r}"
            )
        self._sdk = import_sdk("openai", "OpenAIResponsesModel")
        if client is None:
            client = openai_client(
                self._sdk,
                "OpenAIResponsesModel",
                api_key=api_key,
                base_url=base_url,
                timeout=timeout,
            )
        elif isinstance(client, self._sdk.OpenAI) or not hasattr(client, "responses"):
            raise TypeError(
                f"OpenAIResponsesModel needs an openai.AsyncOpenAI client, not "
                f"{type(client).__name__}: its calls are awaited"
            )
        self.client: AsyncOpenAI = client
        self.model = model
        self.settings = ModelSettings() if settings is None else settings
        self.strict_tools = strict_tools

    def __repr__(self) -> str:
        return f"OpenAIResponsesModel({self.model!r}, base_url={str(self.client.base_url)!r})"

    def request(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> dict[str, Any]:
        """The keyword arguments `complete` passes to `client.responses.create`.

        Raises:
            ValueError: The window is empty, holds a block the Responses API
                cannot carry (an image in an assistant or system message),
                a tool definition the API refuses, or `settings.stop` (the
                Responses API has no stop sequences).
        """
        messages, _ = window_parts(window)
        chosen = self.settings.merged(settings)
        if chosen.stop is not None:
            raise ValueError(
                "ModelSettings.stop: the Responses API has no stop sequences; leave stop unset "
                "for OpenAIResponsesModel, or use OpenAIModel (Chat Completions)"
            )
        extra = dict(chosen.extra_body or {})
        stored = extra.get("store") is True
        instructions, items = to_responses_input(
            messages, model=self.model, encrypted_only=not stored
        )
        request: dict[str, Any] = {"model": self.model, "input": items, "store": False}
        if not stored:  # the reasoning comes back encrypted, to be sent again
            request["include"] = [_ENCRYPTED_REASONING]
        if instructions is not None:
            request["instructions"] = instructions
        definitions = [
            {"type": "function", **definition["function"], "strict": self.strict_tools}
            for definition in to_openai_tools(tools, strict=self.strict_tools)
        ]
        add_tools(request, definitions, chosen, _forced)
        if chosen.max_tokens is not None:
            request["max_output_tokens"] = chosen.max_tokens
        if chosen.output_schema is not None:
            spec = output_json_schema(chosen.output_schema)
            request["text"] = {"format": {"type": "json_schema", **spec}}
        add_sampling_and_extras(request, chosen)
        given = extra.get("include")
        if not stored and isinstance(given, list | tuple) and _ENCRYPTED_REASONING not in given:
            # extra_body's fields replace the request's: keep both lists.
            request["extra_body"]["include"] = [*given, _ENCRYPTED_REASONING]
        return request

    def _create(self, request: dict[str, Any]) -> Awaitable[Any]:
        return self.client.responses.create(**request)

    def _read(self, reply: object, settings: ModelSettings) -> ModelResponse:
        response = sdk_object(reply, self._sdk.types.responses.Response, self.provider)
        return _read_output(response, self.model)

    def _streamed(self, settings: ModelSettings) -> _StreamedReply:
        return _StreamedReply(self.model, self._sdk.BaseModel)


def _forced(name: str) -> dict[str, Any]:
    """The Responses API `tool_choice` that makes the model call the tool `name`."""
    return {"type": "function", "name": name}


# ----------------------------------------------------------------------------- the window


def to_responses_input(
    messages: Sequence[Message], *, model: str = "", encrypted_only: bool = True
) -> tuple[str | None, list[dict[str, Any]]]:
    """The `instructions` and `input` items for `messages` (see the module docstring).

    A `ReasoningBlock` is sent only when its `model` is `model`, it has
    encrypted content (or `encrypted_only` is False: the server stores
    items and finds one by its id), and an item follows it in its message.

    Raises:
        ValueError: `messages` is empty, or a block the Responses API cannot carry.
    """
    if not messages:
        raise ValueError("the window is empty; a model needs at least one message to answer")
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    reasoning = _Reasoning(model, encrypted_only)
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages[leading:], start=leading):
        items.extend(_items(message, f"messages[{index}]", reasoning))
    if not items:  # only instructions: send them as the input the API needs
        items = [
            item
            for index, message in enumerate(messages)
            for item in _items(message, f"messages[{index}]", reasoning)
        ]
        if not items:
            raise ValueError("the window has no text to send; a model needs something to answer")
        return None, items
    texts = [
        block.text
        for index, message in enumerate(messages[:leading])
        for block in _only_text(message, f"messages[{index}]")
        if block.text
    ]
    return ("\n\n".join(texts) or None), items


def _only_text(message: Message, path: str) -> list[TextBlock]:
    for index, block in enumerate(message.content):
        if not isinstance(block, TextBlock):
            raise ValueError(
                f"{path}.content[{index}] is {type(block).__name__}, which a system message "
                "cannot carry in the Responses API; send only text in system messages"
            )
    return [block for block in message.content if isinstance(block, TextBlock)]


@dataclass(frozen=True, slots=True)
class _Reasoning:
    """Which `ReasoningBlock`s a request may carry: the model's own, and how."""

    model: str
    encrypted_only: bool

    def item(self, block: ReasoningBlock) -> dict[str, Any] | None:
        """The block's `reasoning` item, or None when it is not to be sent."""
        if block.model != self.model:
            return None
        if block.encrypted_content is None and self.encrypted_only:
            return None
        item: dict[str, Any] = {
            "type": "reasoning",
            "id": block.id,
            "summary": [{"type": "summary_text", "text": text} for text in block.summary],
        }
        if block.encrypted_content is not None:
            item["encrypted_content"] = block.encrypted_content
        return item


def _items(message: Message, path: str, reasoning: _Reasoning) -> list[dict[str, Any]]:
    if message.role == "system":
        text = "\n\n".join(b.text for b in _only_text(message, path) if b.text)
        return [_message("system", text)] if text else []
    if message.role == "assistant":
        return _assistant_items(message, path, reasoning)
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        if isinstance(block, ToolResultBlock):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": block.tool_use_id,
                    "output": _output(block),
                }
            )
        elif isinstance(block, TextBlock | ImageBlock):
            if not isinstance(block, TextBlock) or block.text:
                parts.append(_input_part(block))
        else:
            what = "a tool call" if isinstance(block, ToolUseBlock) else type(block).__name__
            raise ValueError(
                f"{path}.content[{index}] is {what} in a {message.role} message; "
                "put tool calls and reasoning in an assistant message"
            )
    if parts:
        only_text = len(parts) == 1 and parts[0]["type"] == "input_text"
        items.append(_message("user", parts[0]["text"] if only_text else parts))
    return items


def _assistant_items(message: Message, path: str, reasoning: _Reasoning) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            content = texts[0] if len(texts) == 1 else [_output_text(t) for t in texts]
            items.append(_message("assistant", content))
            texts.clear()

    for index, block in enumerate(message.content):
        if isinstance(block, TextBlock):
            if block.text:
                texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            flush()
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": _arguments(block, f"{path}.content[{index}].input"),
                }
            )
        elif isinstance(block, ReasoningBlock):
            flush()
            item = reasoning.item(block)
            if item is not None:
                items.append(item)
        elif isinstance(block, ImageBlock | ToolResultBlock):
            raise ValueError(
                f"{path}.content[{index}] is {type(block).__name__}, which an assistant "
                "message cannot carry in the Responses API; put it in a user message"
            )
        # Any other block is another provider's reasoning: the Responses API has no place for it.
    flush()
    # The API refuses a reasoning item that is not followed by the item it led to.
    return [
        item
        for index, item in enumerate(items)
        if item["type"] != "reasoning"
        or (index + 1 < len(items) and items[index + 1]["type"] != "reasoning")
    ]


def _arguments(call: ToolUseBlock, path: str) -> str:
    try:
        return dumps(call.input, path).decode("utf-8")
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def _message(role: str, content: str | list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text}


def _input_part(block: TextBlock | ImageBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "input_text", "text": block.text}
    data = base64.b64encode(block.data).decode("ascii")
    return {
        "type": "input_image",
        "image_url": f"data:{block.media_type};base64,{data}",
        "detail": "auto",
    }


def _output(result: ToolResultBlock) -> str | list[dict[str, Any]]:
    if isinstance(result.content, str):
        return _ERROR_PREFIX + result.content if result.is_error else result.content
    parts = [_input_part(b) for b in result.content if not isinstance(b, TextBlock) or b.text]
    if result.is_error:
        parts.insert(0, {"type": "input_text", "text": _ERROR_PREFIX.strip()})
    if all(part["type"] == "input_text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


# ----------------------------------------------------------------------------- the reply


def _failure(error: ResponseError | ResponseErrorEvent | None, what: str) -> ModelAPIError:
    code: str | None = None
    message: str | None = None
    if error is not None:
        # The SDK builds its objects unchecked: a code the server left out is None.
        code, message = error.code, error.message
        code = code or error.type
    code = str(code or "")
    message = message or "no message"
    return ModelAPIError(
        f"{_PROVIDER}: {what} ({code or 'no code'}): {message}",
        transient=code in _TRANSIENT_KINDS,
    )


class _Output:
    """What a reply's output items become: blocks in order, and the refusals among them."""

    def __init__(self, model: str) -> None:
        self.model = model  # the model its ReasoningBlocks go back to
        self.blocks: list[ContentBlock] = []
        self.refusals: list[str] = []

    def message(self, pieces: Sequence[tuple[str, str]]) -> None:
        """A message item's parts, each `(part type, text)`."""
        self.refusals += [text for kind, text in pieces if kind == "refusal"]
        text = "".join(text for _, text in pieces)
        if text:
            self.blocks.append(TextBlock(text))

    def call(self, index: int, call_id: str | None, name: str | None, arguments: str) -> None:
        if not call_id or not name:
            raise ModelResponseError(
                f"{_PROVIDER}: output[{index}] is a function call with no "
                f"{'call_id' if not call_id else 'name'}"
            )
        self.blocks.append(ToolUseBlock(call_id, name, parse_arguments(arguments)))

    def reasoning(self, item: ResponseReasoningItem) -> None:
        """A reasoning item as a block; none for one with no id (it could never go back)."""
        if not item.id:
            return
        summary = [str(part.text or "") for part in item.summary or []]
        encrypted = item.encrypted_content
        self.blocks.append(
            ReasoningBlock(
                str(item.id),
                [text for text in summary if text],
                None if encrypted is None else str(encrypted),
                model=self.model,
            )
        )

    def item(self, index: int, item: ResponseOutputItem) -> None:
        if item.type == "message":
            self.message(_pieces(item))
        elif item.type == "function_call":
            self.call(index, item.call_id, item.name, item.arguments or "")
        elif item.type == "reasoning":
            self.reasoning(item)
        else:
            raise ModelResponseError(
                f"{_PROVIDER}: output[{index}] is a {item.type!r} item, which a Message cannot "
                "carry; only messages, function calls and reasoning are read"
            )


def _pieces(message: ResponseOutputMessage) -> list[tuple[str, str]]:
    """A message item's parts, each `(part type, text)`."""
    return [
        ("refusal", part.refusal or "")
        if part.type == "refusal"
        else ("output_text", part.text or "")
        for part in message.content or []
    ]


def _read_response(response: Response, output: _Output) -> ModelResponse:
    """The `ModelResponse` for a response object whose output items became `output`.

    `output.model` is the model the request named: the reply's model when
    the response names none.
    """
    status = response.status
    blocks = output.blocks
    # The SDK builds its objects unchecked: a field the server left out is None.
    details: IncompleteDetails | None = response.incomplete_details
    if status == "incomplete":
        reason = str((details.reason if details is not None else None) or "incomplete")
        finish = _INCOMPLETE.get(reason, reason)
    else:
        finish = "tool_calls" if any(isinstance(b, ToolUseBlock) for b in blocks) else "stop"
    if status != "incomplete" and not any(isinstance(b, TextBlock | ToolUseBlock) for b in blocks):
        raise ModelResponseError(
            f"{_PROVIDER}: the reply has no text and no tool call; nothing to keep"
        )
    return ModelResponse(
        message=Message("assistant", blocks),
        usage=_usage(response.usage),
        model=response.model or output.model,
        finish_reason=finish,
        refusal="".join(output.refusals) or None,
    )


def _read_output(response: Response, model: str) -> ModelResponse:
    """The `ModelResponse` for a response object and the output items it lists."""
    if response.status == "failed":
        raise _failure(response.error, "the response failed")
    output = _Output(model)
    for index, item in enumerate(response.output or []):
        output.item(index, item)
    return _read_response(response, output)


@dataclass(slots=True)
class _StreamedCall:
    """A function call as it streams."""

    call_id: str | None
    name: str | None
    arguments: list[str]


class _StreamedReply(StreamedReply):
    """The reply, gathered from a stream's events, until its final response."""

    def __init__(self, model: str, event_type: Any) -> None:
        self.model = model
        self.event_type = event_type  # the SDK's BaseModel: every kind of event is one
        # output_index -> the item so far: a message's pieces [(part type, text)], a
        # function call, or a reasoning item
        self.parts: dict[int, list[tuple[str, str]] | _StreamedCall | ResponseReasoningItem] = {}
        self.calls: dict[int, int] = {}  # output_index -> the call's index among the calls
        self.final: Response | None = None

    def read(self, chunk: object) -> list[ModelStreamEvent]:
        event: ResponseStreamEvent = sdk_object(chunk, self.event_type, _PROVIDER)
        if event.type == "response.output_text.delta" or event.type == "response.refusal.delta":
            index, delta = event.output_index, event.delta or ""
            part = self.parts.setdefault(index, [])
            if not isinstance(part, list):
                raise ModelResponseError(
                    f"{_PROVIDER}: text streamed for output {index}, which is a function call"
                )
            kind = "refusal" if event.type == "response.refusal.delta" else "output_text"
            part.append((kind, delta))
            return [TextDelta(delta)] if delta else []
        if event.type == "response.output_item.added":
            return self._added(event.output_index, event.item)
        if event.type == "response.reasoning_summary_text.delta":
            delta = event.delta or ""
            return [ThinkingDelta(delta)] if delta else []
        if event.type == "response.function_call_arguments.delta":
            index, delta = event.output_index, event.delta or ""
            call = self.parts.get(index)
            if index not in self.calls or not isinstance(call, _StreamedCall):
                raise ModelResponseError(
                    f"{_PROVIDER}: arguments streamed for output {index}, which is no function call"
                )
            call.arguments.append(delta)
            return [ToolCallDelta(self.calls[index], None, None, delta)] if delta else []
        if event.type == "response.output_item.done":
            self._done(event.output_index, event.item)
        elif event.type == "response.completed" or event.type == "response.incomplete":
            self.final = event.response
            self.done = True
        elif event.type == "response.failed":
            raise _failure(event.response.error, "the response failed")
        elif event.type == "error":
            raise _failure(event, "the stream failed")
        return []

    def _added(self, index: int, item: ResponseOutputItem) -> list[ModelStreamEvent]:
        if item.type == "function_call":
            arguments = item.arguments or ""
            self.calls[index] = len(self.calls)
            self.parts[index] = _StreamedCall(item.call_id, item.name, [arguments])
            return [ToolCallDelta(self.calls[index], item.call_id, item.name, arguments)]
        if item.type == "message":
            self.parts.setdefault(index, [])
        elif item.type == "reasoning":
            self.parts[index] = item
        return []

    def _done(self, index: int, item: ResponseOutputItem) -> None:
        # The finished item is the truth for what its deltas built.
        call = self.parts.get(index)
        if item.type == "function_call" and isinstance(call, _StreamedCall):
            call.arguments = [item.arguments or ""]
        elif item.type == "message":
            self.parts[index] = _pieces(item)
        elif item.type == "reasoning":
            self.parts[index] = item

    def response(self) -> ModelResponse:
        final = self.final
        if final is None:
            raise ModelAPIError(
                f"{_PROVIDER}: the stream ended before response.completed; the reply is cut",
                transient=True,
            )
        if final.output or final.status == "failed":
            return _read_output(final, self.model)
        # A final response that lists no output (some compatible servers): what the events built.
        output = _Output(self.model)
        for position, index in enumerate(sorted(self.parts)):
            part = self.parts[index]
            if isinstance(part, _StreamedCall):
                output.call(position, part.call_id, part.name, "".join(part.arguments))
            elif isinstance(part, list):
                output.message(part)
            else:
                output.reasoning(part)
        return _read_response(final, output)


def _usage(usage: ResponseUsage | None) -> Usage:
    if usage is None:
        return Usage()
    given = int(usage.input_tokens or 0)
    details = usage.input_tokens_details
    cached = int(details.cached_tokens or 0) if details is not None else 0
    written = int(usage.output_tokens or 0)
    output_details = usage.output_tokens_details
    reasoning = int(output_details.reasoning_tokens or 0) if output_details else 0
    return Usage(given, written, min(cached, given), reasoning_tokens=min(reasoning, written))
