"""What the adapters share: an SDK call and stream, errors, checks, request parts, parsed arguments.

Each adapter reads its SDK's typed replies itself (`SDKModel._read`, its
`StreamedReply`); what a reply is before that, when it is not the SDK's
object, is met in one place (`sdk_object`).
"""

from __future__ import annotations

import importlib
import json
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

import orjson

from pygents_ctx.errors import ModelAPIError, ModelError, ModelResponseError
from pygents_ctx.model.base import ModelResponse, ModelSettings, ModelStreamEvent
from pygents_ctx.model.retry import is_transient_status, retry_after_seconds

if TYPE_CHECKING:
    from pygents_ctx.model.base import Tools, Window

__all__ = [
    "RAW_ARGUMENTS",
    "SDKModel",
    "StreamedReply",
    "add_sampling_and_extras",
    "add_tools",
    "check_model_name",
    "cut_stream",
    "import_sdk",
    "openai_client",
    "parse_arguments",
    "provider_errors",
    "read_body",
    "refuse_sync_client",
    "sdk_object",
    "translate_error",
    "transport_errors",
]

_Object = TypeVar("_Object")

# The key a tool call's input holds its text under when that text is not a JSON object.
RAW_ARGUMENTS: Final = "_raw_arguments"

# The `tool_choice` modes both OpenAI APIs name as they are; another choice is a tool's name.
_OPENAI_CHOICES: Final = ("auto", "required", "none")

# Error kinds an error event in the middle of a stream names, which a later call may not meet.
_TRANSIENT_KINDS: Final = frozenset(
    {
        "api_error",
        "overloaded_error",
        "rate_limit_error",
        "rate_limit_exceeded",
        "server_error",
        "timeout_error",
    }
)


def check_model_name(model: object, owner: str) -> None:
    """Refuse a model name that is not a non-empty str, before anything is made.

    Raises:
        ValueError: `model` is empty or not a str.
    """
    if not isinstance(model, str) or not model:
        raise ValueError(f"{owner} needs a model name, not {model!r}")


def import_sdk(name: str, owner: str, *, extra: str | None = None) -> ModuleType:
    """Import the SDK `name`, or fail saying which extra (default: `name`) installs it.

    Raises:
        ImportError: It is not installed.
    """
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(
            f"{owner} needs the {name!r} package: the {extra or name!r} extra "
            f"(pip install -e '.[{extra or name}]' from a checkout)"
        ) from None


def openai_client(
    sdk: ModuleType, owner: str, *, api_key: str | None, base_url: str | None, timeout: float
) -> Any:
    """An `AsyncOpenAI` without the SDK's own retries (a `ModelLoop` retries with its policy).

    Raises:
        ValueError: The SDK cannot make one (no key given or in the environment).
    """
    try:
        return sdk.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)
    except sdk.OpenAIError as exc:
        raise ValueError(
            f"{owner} could not make a client ({exc}); pass api_key=... or set "
            "OPENAI_API_KEY (any string for a local server that needs no key)"
        ) from None


def refuse_sync_client(client: object, sdk: ModuleType, owner: str, wanted: str) -> None:
    """Refuse a synchronous client of `sdk`, whose calls cannot be awaited.

    Raises:
        TypeError: `client` is one of the SDK's synchronous clients.
    """
    sync = tuple(
        getattr(sdk, name)
        for name in ("OpenAI", "AzureOpenAI", "Anthropic", "AnthropicBedrock", "AnthropicVertex")
        if isinstance(getattr(sdk, name, None), type)
    )
    if isinstance(client, sync):
        raise TypeError(
            f"{owner} needs an asynchronous client: pass client={wanted}(...), "
            f"not a {type(client).__name__} (its calls cannot be awaited)"
        )


def transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP library's request errors, from whichever the SDKs imported (no import here)."""
    return tuple(
        module.RequestError
        for name in ("httpx", "httpx2")
        if (module := sys.modules.get(name)) is not None
        and isinstance(getattr(module, "RequestError", None), type)
    )


@contextmanager
def provider_errors(
    provider: str, api_error: type[Exception], translate: Callable[[Any], ModelError]
) -> Iterator[None]:
    """Turn what can go wrong in a call (or mid-stream) into `ModelError`s.

    The SDK's errors (`api_error`) are translated (`translate`); a body that
    is not JSON (a proxy's error page, a reply cut inside an event) and a
    transport error the SDK let through (a connection dropped mid-stream) are
    transient `ModelAPIError`s, worth trying again.
    """
    try:
        yield
    except api_error as exc:
        raise translate(exc) from exc
    except json.JSONDecodeError as exc:
        raise ModelAPIError(
            f"{provider}: the reply is not valid JSON ({exc})", transient=True
        ) from exc
    except transport_errors() as exc:
        raise ModelAPIError(
            f"{provider}: the connection broke ({type(exc).__name__}: {exc})", transient=True
        ) from exc


def sdk_object(value: object, kind: type[_Object], provider: str) -> _Object:
    """`value`, a reply or a stream's chunk, as the SDK's typed object `kind`.

    The one place an adapter meets a reply in another form. The SDKs build
    their objects from any JSON object (what a field misses is None), so
    what is not one is what they could not build: the text of a body that
    is not JSON (a proxy's error page, as the SDKs return it), or JSON that
    is no object.

    Raises:
        ModelAPIError: The body is text, not the API's JSON (transient; see `read_body`).
        ModelResponseError: `value` is something else than `kind`.
    """
    if isinstance(value, kind):
        return value
    read_body(value, provider)
    raise ModelResponseError(
        f"{provider}: the reply is a {type(value).__name__}, not the API's JSON object "
        f"({kind.__name__}); the server does not speak the API"
    )


def read_body(response: object, provider: str) -> None:
    """Refuse a body the SDK could not parse: one that was not JSON at all.

    The SDKs return a body whose content type is not JSON (a proxy's error
    page) as its text, not as an error.

    Raises:
        ModelAPIError: The body is text, not the API's JSON (transient); an HTML
            page is named as one, with the likely fix (a `base_url` that points
            at a web page rather than the API).
    """
    if isinstance(response, str | bytes):
        text = response.decode(errors="replace") if isinstance(response, bytes) else response
        shown = text[:80]
        if text.lstrip()[:1] == "<":
            raise ModelAPIError(
                f"{provider}: the server sent an HTML page, not the API's JSON ({shown!r}); "
                "check base_url: it must point at the API (a compatible server's usually "
                "ends in /v1)",
                transient=True,
            )
        raise ModelAPIError(f"{provider}: the reply is not valid JSON ({shown!r})", transient=True)


def cut_stream(provider: str, final: str) -> ModelAPIError:
    """The error for a stream that ended before its final event `final`."""
    return ModelAPIError(
        f"{provider}: the stream ended before {final}; the reply is incomplete", transient=True
    )


def parse_arguments(text: str) -> dict[str, Any]:
    """A tool call's arguments as a dict; text that is no JSON object is kept under RAW_ARGUMENTS.

    The model sees the raw text again if the call is sent back, and the loop
    answers such a call with an error result instead of running the tool.
    """
    if not text.strip():
        return {}
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {RAW_ARGUMENTS: text}
    return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS: text}


def _error_kind(body: object) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return str(inner.get("type") or inner.get("code") or "")
    return ""


def translate_error(sdk: ModuleType, exc: Exception, provider: str) -> ModelError:
    """The `ModelError` for an exception of the SDK `sdk`; others are not translated.

    Raises:
        TypeError: `exc` is not one of the SDK's API errors.
    """
    if isinstance(exc, sdk.APITimeoutError):
        return ModelAPIError(f"{provider}: the request timed out ({exc})", transient=True)
    if isinstance(exc, sdk.APIConnectionError):
        return ModelAPIError(f"{provider}: the connection failed ({exc})", transient=True)
    if isinstance(exc, sdk.APIResponseValidationError):
        return ModelResponseError(f"{provider}: the reply does not match the API ({exc})")
    if isinstance(exc, sdk.APIStatusError):
        headers = exc.response.headers
        status = int(exc.status_code)
        if status < 400:  # an error event inside a stream that began well
            transient = _error_kind(exc.body) in _TRANSIENT_KINDS
        else:
            transient = is_transient_status(status, headers)
        return ModelAPIError(
            f"{provider}: HTTP {status}: {_detail(exc, status)}",
            status_code=status,
            transient=transient,
            retry_after=retry_after_seconds(headers),
        )
    if isinstance(exc, sdk.APIError):  # an error event inside a stream
        kind = _error_kind(exc.body)
        return ModelAPIError(
            f"{provider}: the stream failed: {exc.message}", transient=kind in _TRANSIENT_KINDS
        )
    raise TypeError(f"not an API error of {sdk.__name__}: {exc!r}")


def _detail(exc: Any, status: int) -> str:
    """What the API said of its refusal: its error body's message, else the SDK's text.

    The SDK's text starts "Error code: 400 - " and then repeats the whole body;
    the message alone reads once, after the one "HTTP 400" the error already has.
    """
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str) and message:
        return message
    return str(exc.message).removeprefix(f"Error code: {status} - ")


def add_sampling_and_extras(request: dict[str, Any], settings: ModelSettings) -> None:
    """Put `settings`' sampling and its extra body and headers into an OpenAI SDK `request`.

    Both OpenAI APIs take `temperature` and `top_p` as arguments; the extras
    go as the SDK's `extra_body` and `extra_headers` (copies: the SDK may keep them).
    """
    for name in ("temperature", "top_p"):
        value = getattr(settings, name)
        if value is not None:
            request[name] = value
    if settings.extra_body:
        request["extra_body"] = dict(settings.extra_body)
    if settings.extra_headers:
        request["extra_headers"] = dict(settings.extra_headers)


def add_tools(
    request: dict[str, Any],
    definitions: list[dict[str, Any]],
    settings: ModelSettings,
    forced: Callable[[str], dict[str, Any]],
) -> None:
    """Put tool `definitions` and `settings`' tool options into an OpenAI SDK `request`.

    `parallel_tool_calls` goes with the tools, and only when there are some.
    Both OpenAI APIs take the `tool_choice` modes `auto`, `required` and
    `none` as they are; a tool's name becomes `forced(name)`, each API's
    shape for "call this tool".
    """
    if definitions:
        request["tools"] = definitions
        if settings.parallel_tool_calls is not None:
            request["parallel_tool_calls"] = settings.parallel_tool_calls
    choice = settings.tool_choice
    if choice is not None:
        request["tool_choice"] = choice if choice in _OPENAI_CHOICES else forced(choice)


class StreamedReply(ABC):
    """A reply as it streams: its chunks read in order, then the whole reply."""

    done = False
    """The final chunk came: nothing after it is read."""

    @abstractmethod
    def read(self, chunk: object) -> list[ModelStreamEvent]:
        """Take in the next chunk (read with `sdk_object`); the events to yield for it."""

    @abstractmethod
    def response(self) -> ModelResponse:
        """The whole reply.

        Raises:
            ModelAPIError: The stream ended before the reply did (transient).
            ModelResponseError: The reply cannot be read as a `Message`.
        """


class SDKModel(ABC):
    """A `Model` called through a provider's SDK: the call and the stream, read by the adapter.

    An adapter writes its request (`request`), calls the SDK (`_create`)
    and reads what comes back (`_read`, `_streamed`); a call's errors
    become `ModelError`s here (`_errors`).
    """

    provider: ClassVar[str]
    model: str
    settings: ModelSettings
    _sdk: ModuleType

    @abstractmethod
    def request(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of the SDK's call."""

    @abstractmethod
    def _create(self, request: dict[str, Any]) -> Awaitable[Any]:
        """The SDK's call for `request`: its reply, or its stream when `request` asks for one."""

    @abstractmethod
    def _read(self, reply: object, settings: ModelSettings) -> ModelResponse:
        """The `ModelResponse` of the SDK's reply (read with `sdk_object`) for `settings`."""

    async def _open(
        self, request: dict[str, Any]
    ) -> AbstractAsyncContextManager[AsyncIterator[object]]:
        """The SDK's stream of the reply to `request`, closed when left."""
        request["stream"] = True
        stream: AbstractAsyncContextManager[AsyncIterator[object]] = await self._create(request)
        return stream

    @abstractmethod
    def _streamed(self, settings: ModelSettings) -> StreamedReply:
        """The reply to gather from the stream, asked for with `settings`."""

    def _errors(self) -> AbstractContextManager[None]:
        """The SDK's errors, a body that is no JSON and a broken connection as `ModelError`s."""
        sdk = self._sdk
        return provider_errors(
            self.provider, sdk.APIError, lambda exc: translate_error(sdk, exc, self.provider)
        )

    async def complete(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """The model's reply to `window`, offered `tools` (see `Model.complete`).

        Raises:
            ModelAPIError: The provider refused the call, could not be reached,
                or sent a body that is not its JSON (transient).
            ModelResponseError: The reply cannot be read as a `Message`.
            ValueError: A request the provider cannot take (see `request`).
        """
        request = self.request(window, tools, settings=settings)
        with self._errors():
            reply = await self._create(request)
        return self._read(reply, self.settings.merged(settings))

    async def stream(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> AsyncIterator[ModelStreamEvent]:
        """The reply as the provider writes it, then the whole `ModelResponse` (see `Model.stream`).

        Raises:
            ModelAPIError: As for `complete`; also an error the provider sent
                mid-stream, a connection broken mid-stream, and a stream that
                ended before the reply did (transient).
            ModelResponseError: As for `complete`.
            ValueError: As for `complete`.
        """
        request = self.request(window, tools, settings=settings)
        reply = self._streamed(self.settings.merged(settings))
        with self._errors():
            async with await self._open(request) as chunks:
                async for chunk in chunks:
                    for event in reply.read(chunk):
                        yield event
                    if reply.done:
                        break
        yield reply.response()
