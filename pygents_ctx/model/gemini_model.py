"""`GeminiModel`: Google's Gemini API through the official `google-genai` SDK.

Install the `gemini` extra (`pip install -e '.[gemini]'` from a checkout).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, aclosing
from typing import TYPE_CHECKING, Any, ClassVar, Final

import orjson

from pygents_ctx.context.messages import (
    ContentBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from pygents_ctx.context.usage import Usage
from pygents_ctx.context.wire._gemini import GEMINI_MADE_ID, to_gemini
from pygents_ctx.errors import ModelAPIError, ModelResponseError
from pygents_ctx.model._sdk import (
    SDKModel,
    StreamedReply,
    check_model_name,
    cut_stream,
    import_sdk,
    provider_errors,
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
from pygents_ctx.model.definitions import to_gemini_tools
from pygents_ctx.model.retry import is_transient_status, retry_after_seconds

if TYPE_CHECKING:
    from google.genai.types import (
        GenerateContentResponse,
        GenerateContentResponseUsageMetadata,
        Part,
    )

    from pygents_ctx.model.base import ModelStreamEvent, Tools, Window

__all__ = ["REFUSAL_REASONS", "GeminiModel"]

REFUSAL_REASONS: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
"""The finish reasons of a reply Gemini stopped for its content: a refusal."""
# Finish reasons of a reply whose function call the model botched: worth asking again.
_BOTCHED_CALLS: Final = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
_MODES: Final = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


class GeminiModel(SDKModel):
    """A `Model` served by Google's Gemini API (`generateContent`, `streamGenerateContent`).

    The SDK's own retries are off (no `retry_options`): a `ModelLoop` retries
    429s and 5xx with its `RetryPolicy`, so there is one policy.

    What is sent: leading system messages as `systemInstruction`, the rest
    as `contents` (see `pygents_ctx.context.wire.to_gemini`), tools as
    `functionDeclarations` with their JSON schema (`parametersJsonSchema`),
    `tool_choice` as `toolConfig.functionCallingConfig` (`"required"` is mode
    `ANY`, a tool's name is `ANY` limited to it), `max_tokens`, `temperature`,
    `top_p` and `stop` in `generationConfig`, `output_schema` as
    `responseMimeType: application/json` with `responseJsonSchema`,
    `extra_body` merged into the request body (such as
    `{"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}`)
    and `extra_headers` as headers. Gemini has no switch for one call at a
    time: `parallel_tool_calls=False` is not sent.

    What a reply becomes: text parts, `TextBlock`s (consecutive pieces joined);
    `functionCall` parts, `ToolUseBlock`s, with Gemini's id or, when it gave
    none, one made here (starting `GEMINI_MADE_ID`, kept with the call so its
    result pairs with it, and not sent back); thought summaries (`thought:
    true`), `ThinkingBlock`s (streamed as `ThinkingDelta`s). Each part's
    thought signature is kept on its block (`signature`), saved with the
    session and sent back on the same part, which Gemini 3 requires for
    function calls. `finish_reason` is Gemini's `finishReason` in lower case
    (`"stop"`, `"max_tokens"`, which `hit_length_limit` reads, `"safety"`,
    ...). A reply stopped for its content (`REFUSAL_REASONS`: `SAFETY`,
    `RECITATION`, `PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`, ...) keeps what
    it held and its `refusal` names the reason and the blocked safety
    categories; so does a prompt Gemini blocked
    (no candidates, `promptFeedback.blockReason`), with an empty message and
    `finish_reason` the block reason in lower case. A `ModelLoop` run then
    ends with `LoopStop.REFUSAL`. A reply with no candidates and no block
    reason is a `ModelResponseError`. A malformed function call
    (`MALFORMED_FUNCTION_CALL`) is a transient `ModelAPIError`: asked again.

    Usage: `input_tokens` is `promptTokenCount` (with `toolUsePromptTokenCount`),
    `cached_tokens` its `cachedContentTokenCount`, `output_tokens` the
    reply's and the thinking's (`candidatesTokenCount` + `thoughtsTokenCount`).

    Args:
        model: The model's name, e.g. `"gemini-2.5-flash"`.
        api_key: The key (default: `GEMINI_API_KEY` or `GOOGLE_API_KEY`).
        base_url: The server (default: Google's).
        client: A `google.genai.Client` (or its `.aio`) to use instead of making one.
        settings: Default settings for every call.
        timeout: Seconds a request may take.

    Raises:
        ImportError: The `google-genai` package is not installed.
        ValueError: `model` is empty.
        TypeError: `client` is not a `google.genai.Client` (or its `.aio`).
    """

    provider: ClassVar[str] = "Gemini"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        settings: ModelSettings | None = None,
        timeout: float = 600.0,
    ) -> None:
        check_model_name(model, "GeminiModel")
        genai = import_sdk("google.genai", "GeminiModel", extra="gemini")
        self._genai_errors = import_sdk("google.genai.errors", "GeminiModel", extra="gemini")
        self._types = import_sdk("google.genai.types", "GeminiModel", extra="gemini")
        if client is None:
            options: dict[str, Any] = {"timeout": int(timeout * 1000)}
            if base_url is not None:
                options["base_url"] = base_url
            client = genai.Client(api_key=api_key, http_options=options)
        aio = getattr(client, "aio", client)
        if not callable(getattr(getattr(aio, "models", None), "generate_content_stream", None)):
            raise TypeError(
                f"GeminiModel needs a google.genai.Client (or its .aio), "
                f"not a {type(client).__name__}"
            )
        self.client: Any = client
        self._aio: Any = aio
        self.model = model
        self.settings = ModelSettings().merged(settings)

    def __repr__(self) -> str:
        return f"GeminiModel({self.model!r})"

    def request(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> dict[str, Any]:
        """The keyword arguments `complete` passes to `client.aio.models.generate_content`.

        `contents` and `config` are the SDK's types, made from the REST shapes
        `to_gemini` and `to_gemini_tools` write.

        Raises:
            ValueError: A message Gemini cannot carry (see `to_gemini`), a tool
                definition it refuses, or a `tool_choice` naming no tool offered.
        """
        messages, _ = window_parts(window)
        chosen = self.settings.merged(settings)
        system, contents = to_gemini(messages)
        # The SDK neither runs tools nor resumes a broken stream on its own: the loop does.
        config: dict[str, Any] = {
            "automatic_function_calling": {"disable": True},
            "automatic_continuation": False,
        }
        if system is not None:
            config["system_instruction"] = system
        if tools:
            config["tools"] = to_gemini_tools(tools)
            choice = chosen.tool_choice
            if choice is not None:
                names = [d["name"] for d in config["tools"][0]["functionDeclarations"]]
                calling: dict[str, Any] = {"mode": _MODES.get(choice, "ANY")}
                if choice not in _MODES:
                    if choice not in names:
                        raise ValueError(
                            f"ModelSettings.tool_choice names {choice!r}, which is not among "
                            f"the tools offered ({', '.join(names)})"
                        )
                    calling["allowedFunctionNames"] = [choice]
                config["tool_config"] = {"functionCallingConfig": calling}
        if chosen.max_tokens is not None:
            config["max_output_tokens"] = chosen.max_tokens
        if chosen.temperature is not None:
            config["temperature"] = chosen.temperature
        if chosen.top_p is not None:
            config["top_p"] = chosen.top_p
        if chosen.stop is not None:
            config["stop_sequences"] = list(chosen.stop)
        output = chosen.output_schema
        if output is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = dict(output.schema)
        http: dict[str, Any] = {}
        if chosen.extra_body:
            http["extra_body"] = dict(chosen.extra_body)
        if chosen.extra_headers:
            http["headers"] = dict(chosen.extra_headers)
        if http:
            config["http_options"] = http
        types = self._types
        return {
            "model": self.model,
            "contents": [types.Content.model_validate(content) for content in contents],
            "config": types.GenerateContentConfig.model_validate(config),
        }

    def _create(self, request: dict[str, Any]) -> Awaitable[Any]:
        reply: Awaitable[GenerateContentResponse] = self._aio.models.generate_content(**request)
        return reply

    async def _open(
        self, request: dict[str, Any]
    ) -> AbstractAsyncContextManager[AsyncIterator[object]]:
        stream = self._aio.models.generate_content_stream
        chunks: AsyncGenerator[GenerateContentResponse, None] = await stream(**request)
        return aclosing(chunks)

    def _read(self, reply: object, settings: ModelSettings) -> ModelResponse:
        whole = _Reply(self.model, self._types.GenerateContentResponse, streamed=False)
        whole.read(reply)
        return whole.response()

    def _streamed(self, settings: ModelSettings) -> _Reply:
        return _Reply(self.model, self._types.GenerateContentResponse, streamed=True)

    def _errors(self) -> AbstractContextManager[None]:
        return provider_errors(self.provider, self._genai_errors.APIError, _api_error)


def _api_error(exc: Any) -> ModelAPIError:
    code = exc.code if isinstance(exc.code, int) else None
    headers = getattr(exc.response, "headers", None) or {}
    status = f" ({exc.status})" if isinstance(exc.status, str) and exc.status else ""
    message = exc.message if isinstance(exc.message, str) and exc.message else str(exc)
    if code is None:
        return ModelAPIError(f"Gemini: the stream failed{status}: {message}", transient=True)
    return ModelAPIError(
        f"Gemini: HTTP {code}{status}: {message}",
        status_code=code,
        transient=is_transient_status(code, headers),
        retry_after=retry_after_seconds(headers),
    )


def _name(value: Any) -> str | None:
    """An SDK enum's name (`FinishReason.STOP` -> `"STOP"`), or a plain string as it is."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


class _Reply(StreamedReply):
    """A reply, gathered from one response or a stream of them, part by part."""

    def __init__(
        self, model: str, response_type: type[GenerateContentResponse], *, streamed: bool
    ) -> None:
        self.model = model
        self.response_type = response_type
        self.streamed = streamed
        # ["text", pieces, signature] | ["thought", pieces, signature]
        # | ["call", id, name, args, signature]
        self.blocks: list[list[Any]] = []
        self.calls = 0
        self.usage = Usage()
        self.finish: str | None = None
        self.blocked_categories: list[str] = []
        self.block_reason: str | None = None
        self.block_message: str | None = None
        self.candidates = False  # a chunk had a candidate
        self.chunks = 0

    @property
    def finished(self) -> bool:
        return self.finish is not None or self.block_reason is not None

    def read(self, chunk: object) -> list[ModelStreamEvent]:
        response = sdk_object(chunk, self.response_type, "Gemini")
        self.chunks += 1
        self.model = response.model_version or self.model
        usage = response.usage_metadata
        if usage is not None:  # cumulative: a later count replaces an earlier one
            self.usage = _usage(usage)
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            self.block_reason = _name(feedback.block_reason)
            self.block_message = feedback.block_reason_message
        candidates = response.candidates or []
        if not candidates:
            return []
        self.candidates = True
        candidate = candidates[0]
        events: list[ModelStreamEvent] = []
        content = candidate.content
        for part in (content.parts if content is not None else None) or []:
            events += self._part(part)
        if candidate.finish_reason is not None:
            self.finish = _name(candidate.finish_reason)
        for rating in candidate.safety_ratings or []:
            if rating.blocked:
                self.blocked_categories.append(_name(rating.category) or "unknown")
        return events

    def _part(self, part: Part) -> list[ModelStreamEvent]:
        raw = part.thought_signature
        signature = base64.b64encode(raw).decode("ascii") if raw else None
        call = part.function_call
        if call is not None:
            number = self.calls
            self.calls += 1
            call_id = call.id or f"{GEMINI_MADE_ID}{uuid.uuid4().hex[:24]}"
            args = dict(call.args or {})
            self.blocks.append(["call", call_id, call.name or "", args, signature])
            return [ToolCallDelta(number, call_id, call.name or "", orjson.dumps(args).decode())]
        text = part.text
        if text is None and signature is None:
            return []  # a part a Message has no place for (executable code, ...)
        kind = "thought" if part.thought else "text"
        last = self.blocks[-1] if self.blocks else None
        if last is not None and last[0] == kind and last[2] is None:
            last[1].append(text or "")
            last[2] = signature
        else:
            self.blocks.append([kind, [text or ""], signature])
        if not text:
            return []
        return [ThinkingDelta(text)] if kind == "thought" else [TextDelta(text)]

    def response(self) -> ModelResponse:
        if self.streamed and not self.finished and (self.candidates or not self.chunks):
            raise cut_stream("Gemini", "a chunk with a finishReason")
        if not self.candidates and self.block_reason is None:
            raise ModelResponseError(
                "Gemini: the reply has no candidates and no promptFeedback.blockReason, "
                "so there is no answer to read"
            )
        if self.finish in _BOTCHED_CALLS:
            raise ModelAPIError(
                f"Gemini: the model wrote a function call it could not finish "
                f"(finishReason {self.finish}); asking again may succeed",
                transient=True,
            )
        blocks: list[ContentBlock] = []
        for block in self.blocks:
            if block[0] == "call":
                blocks.append(ToolUseBlock(block[1], block[2], block[3], signature=block[4]))
            elif block[0] == "thought":
                blocks.append(ThinkingBlock("".join(block[1]), block[2]))
            elif "".join(block[1]).strip() or block[2] is not None:
                blocks.append(TextBlock("".join(block[1]), signature=block[2]))
        refusal: str | None = None
        finish = self.finish
        if not self.candidates and self.block_reason is not None:
            finish = self.block_reason
            said = f": {self.block_message}" if self.block_message else ""
            refusal = f"Gemini blocked the prompt (blockReason {self.block_reason}){said}"
        elif finish in REFUSAL_REASONS:
            categories = (
                f" ({', '.join(self.blocked_categories)})" if self.blocked_categories else ""
            )
            refusal = f"Gemini stopped the reply for {finish}{categories}"
        return ModelResponse(
            Message("assistant", blocks),
            self.usage,
            self.model,
            None if finish is None else finish.lower(),
            refusal,
        )


def _usage(usage: GenerateContentResponseUsageMetadata) -> Usage:
    prompt = int(usage.prompt_token_count or 0) + int(usage.tool_use_prompt_token_count or 0)
    thoughts = int(usage.thoughts_token_count or 0)
    output = int(usage.candidates_token_count or 0) + thoughts
    cached = min(int(usage.cached_content_token_count or 0), prompt)
    return Usage(prompt, output, cached, reasoning_tokens=thoughts)
