"""A scripted HTTP server that speaks the Chat Completions and Messages APIs, for the real SDKs.

It listens on 127.0.0.1 on a free port, in the test's event loop, and answers
each request with the next scripted `Reply`, whatever the path: a JSON body,
a server-sent event stream, an error, a stall, a malformed body, a stream cut
short (cleanly, or by a dropped connection), or a dropped connection. It
keeps every request it received (`requests`) for the test to inspect.

Strict (the default): like the real APIs, it refuses with HTTP 400 and the
provider's error body every request they would refuse (empty text blocks,
empty assistant messages, orphan tool results, calls left without results,
unsigned thinking blocks, malformed structured-output requests, ...); see
`openai_problems` and `anthropic_problems`, one readable list of rules each.
A refused request does not use up a scripted reply, and is kept in `refused`.

The builders below write the bodies and event streams in each API's
documented format: `chat_completion` / `chat_chunks` (OpenAI) and `message` /
`message_events` (Anthropic), and their error bodies.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

# -- replies ---------------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted response.

    Attributes:
        status: The HTTP status.
        body: A JSON body (a dict), or None for an event stream.
        events: Server-sent events `(event name or None, data)`, when streaming.
        headers: More response headers (`retry-after`, ...).
        delay: Seconds to wait before answering (a stall, for timeouts).
        gap: Seconds to wait between events.
        drop: Close the connection without answering (after `delay`).
        hold: An event the reply waits for before answering (set by the test).
        cut_after: Stop the stream after this many events, without its final ones.
        cut: How the stream stops at `cut_after`: `"end"` ends the body cleanly
            (the server simply stopped), `"drop"` closes the connection in the
            middle of the body (the transport sees a broken response).
        raw: A body sent as it is, instead of `body` (such as malformed JSON).
    """

    status: int = 200
    body: dict[str, Any] | None = None
    events: list[tuple[str | None, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    gap: float = 0.0
    drop: bool = False
    hold: asyncio.Event | None = None
    cut_after: int | None = None
    cut: Literal["end", "drop"] = "end"
    raw: str | None = None


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def json_reply(body: dict[str, Any], status: int = 200, **options: Any) -> Reply:
    return Reply(status=status, body=body, **options)


def sse_reply(events: list[tuple[str | None, str]], **options: Any) -> Reply:
    return Reply(events=events, **options)


class FakeAPI:
    """The server. `await start()`, point a client at `url`, `script(...)` replies, `close()`.

    Args:
        strict: Refuse (HTTP 400) every request the real API would refuse.
    """

    def __init__(self, *, strict: bool = True) -> None:
        self.strict = strict
        self.replies: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.refused: list[tuple[Request, list[str]]] = []  # what strict mode refused, and why
        self.received = asyncio.Event()  # set by every request
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> FakeAPI:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def close(self) -> None:
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            request = await _read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            self.received.set()
            refusal = self._refusal(request) if self.strict else None
            if refusal is not None:
                reply = refusal
            else:
                reply = self.replies.popleft() if self.replies else _unscripted(request)
            await self._answer(reply, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass  # the client went away (a timeout, a cancelled test): nothing to answer
        finally:
            self._writers.discard(writer)
            writer.close()

    def _refusal(self, request: Request) -> Reply | None:
        """The 400 the real API would answer `request` with, or None when it would take it."""
        if request.path.endswith("/chat/completions"):
            problems = openai_problems(request.body)
            if problems:
                self.refused.append((request, problems))
                return openai_error(400, "; ".join(problems), "invalid_request_error")
        elif request.path.endswith("/messages"):
            problems = anthropic_problems(request.body)
            if problems:
                self.refused.append((request, problems))
                return anthropic_error(400, "invalid_request_error", "; ".join(problems))
        return None

    async def _answer(self, reply: Reply, writer: asyncio.StreamWriter) -> None:
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.drop:
            return
        reason = {200: "OK", 429: "Too Many Requests"}.get(reply.status, "Error")
        head = [f"HTTP/1.1 {reply.status} {reason}", "Connection: close"]
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        if reply.body is not None or reply.raw is not None or not reply.events:
            text = reply.raw if reply.raw is not None else json.dumps(reply.body or {})
            payload = text.encode()
            if not any(name.lower() == "content-type" for name in reply.headers):
                head.append("Content-Type: application/json")
            head.append(f"Content-Length: {len(payload)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
            await writer.drain()
            return
        # Chunked, as real servers stream: a connection dropped mid-body is then a
        # broken response to the client, not a body that simply ended.
        head += [
            "Content-Type: text/event-stream",
            "Cache-Control: no-cache",
            "Transfer-Encoding: chunked",
        ]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        for number, (name, data) in enumerate(reply.events):
            if reply.cut_after is not None and number >= reply.cut_after:
                break
            if reply.gap:
                await asyncio.sleep(reply.gap)
            lines = ([f"event: {name}"] if name else []) + [f"data: {data}"]
            payload = ("\n".join(lines) + "\n\n").encode()
            writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            await writer.drain()
        if reply.cut_after is not None and reply.cut == "drop":
            writer.transport.abort()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    method, path, _ = line.decode().split(" ", 2)
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, json.loads(raw) if raw else {})


def _unscripted(request: Request) -> Reply:
    error = {"message": f"no reply scripted for {request.method} {request.path}"}
    return Reply(status=400, body={"error": {"type": "invalid_request_error", **error}})


# -- OpenAI Chat Completions -------------------------------------------------------------

Call = tuple[str, str, str]  # (id, name, arguments as JSON text)


def chat_completion(
    text: str | None = None,
    calls: list[Call] = (),  # type: ignore[assignment]
    *,
    usage: tuple[int, int] | tuple[int, int, int] = (10, 5),
    finish_reason: str | None = None,
    model: str = "gpt-test",
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
) -> dict[str, Any]:
    """A `chat.completion` object with one choice.

    `reasoning` is the reasoning text a compatible server (vLLM, DeepSeek, ...)
    adds under `reasoning_field` (`reasoning_content`, or `reasoning`).
    """
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if reasoning is not None:
        message[reasoning_field] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": _openai_usage(usage),
    }


def _openai_usage(usage: tuple[int, ...]) -> dict[str, Any]:
    prompt, completion, *cached = usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached[0] if cached else 0},
    }


def chat_chunks(
    pieces: list[str] = (),  # type: ignore[assignment]
    calls: list[tuple[str, str, list[str]]] = (),  # type: ignore[assignment]
    *,
    usage: tuple[int, ...] | None = (10, 5),
    model: str = "gpt-test",
    finish_reason: str | None = None,
    reasoning: list[str] = (),  # type: ignore[assignment]
    reasoning_field: str = "reasoning_content",
) -> list[tuple[str | None, str]]:
    """The events of a streamed completion: text pieces, then each call's argument pieces.

    As the API streams: the first chunk carries the role, a call's first chunk
    its id and name, later chunks only argument pieces; the last choice chunk
    the finish reason; with `stream_options.include_usage`, a final chunk with
    no choices and the usage; then `[DONE]`. `reasoning` pieces (as a
    compatible reasoning server sends them, under `reasoning_field`) come
    before the text.
    """

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, str]:
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return None, json.dumps(body)

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({reasoning_field: piece}) for piece in reasoning]
    events += [chunk({"content": piece}) for piece in pieces]
    for index, (call_id, name, argument_pieces) in enumerate(calls):
        first = {"index": index, "id": call_id, "type": "function"}
        events.append(
            chunk({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]})
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in argument_pieces
        ]
    events.append(chunk({}, finish_reason or ("tool_calls" if calls else "stop")))
    if usage is not None:
        final = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [],
            "usage": _openai_usage(usage),
        }
        events.append((None, json.dumps(final)))
    events.append((None, "[DONE]"))
    return events


def openai_error(status: int, message: str, kind: str = "server_error", **headers: str) -> Reply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply(
        status=status, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )


# -- Anthropic Messages -------------------------------------------------------------------


def message(
    *blocks: dict[str, Any],
    usage: dict[str, int] | None = None,
    stop_reason: str | None = None,
    model: str = "claude-test",
) -> dict[str, Any]:
    """A `message` object: content blocks (`text_block`, `tool_use_block`), usage, stop reason."""
    calls = any(block["type"] == "tool_use" for block in blocks)
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(blocks),
        "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
        "usage": _anthropic_usage(usage),
    }


def _anthropic_usage(usage: dict[str, int] | None) -> dict[str, Any]:
    return {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        **(usage or {}),
    }


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(call_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def thinking_block(thinking: str, signature: str = "sig-1") -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def redacted_thinking_block(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def message_events(
    *blocks: tuple[str, Any],
    usage: dict[str, int] | None = None,
    model: str = "claude-test",
    stop_reason: str | None = None,
) -> list[tuple[str | None, str]]:
    """The events of a streamed message.

    Each block is `("text", [pieces])`, `("tool_use", (id, name, [json pieces]))`,
    `("thinking", ([pieces], signature))` or `("redacted_thinking", data)`.
    As the API streams: `message_start` (usage so far), then per block
    `content_block_start`, its deltas (a thinking block's signature last, as a
    `signature_delta`), `content_block_stop`; a `ping`; then `message_delta`
    (stop reason, output tokens) and `message_stop`.
    """
    full = _anthropic_usage(usage)
    start_usage = {**full, "output_tokens": 1}
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        },
    }
    events: list[tuple[str | None, str]] = [("message_start", json.dumps(start))]
    events.append(("ping", json.dumps({"type": "ping"})))
    calls = False
    for index, (kind, content) in enumerate(blocks):
        if kind == "text":
            begin = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in content]
        elif kind == "thinking":
            pieces, signature = content
            begin = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": piece} for piece in pieces]
            deltas.append({"type": "signature_delta", "signature": signature})
        elif kind == "redacted_thinking":
            begin = {"type": "redacted_thinking", "data": content}
            deltas = []
        else:
            calls = True
            call_id, name, pieces = content
            begin = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        events.append(
            (
                "content_block_start",
                json.dumps({"type": "content_block_start", "index": index, "content_block": begin}),
            )
        )
        events += [
            (
                "content_block_delta",
                json.dumps({"type": "content_block_delta", "index": index, "delta": d}),
            )
            for d in deltas
        ]
        events.append(
            ("content_block_stop", json.dumps({"type": "content_block_stop", "index": index}))
        )
    delta = {
        "type": "message_delta",
        "delta": {
            "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None,
        },
        "usage": {"output_tokens": full["output_tokens"]},
    }
    events.append(("message_delta", json.dumps(delta)))
    events.append(("message_stop", json.dumps({"type": "message_stop"})))
    return events


def anthropic_error(status: int, kind: str, text: str = "try later", **headers: str) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": text}}
    return Reply(
        status=status, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )


# -- the strict checks: what each real API refuses ------------------------------------------


_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # a tool's name, as both APIs take it


def openai_problems(body: dict[str, Any]) -> list[str]:
    """Why the Chat Completions API would refuse `body` (empty: it would take it).

    Each rule is one the real API enforces, in its own words where it has them.
    """
    problems: list[str] = []
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["'messages' must be a non-empty array"]
    waiting: dict[str, int] = {}  # call id -> index of the assistant message that made it
    for index, msg in enumerate(messages):
        where = f"messages[{index}]"
        role = msg.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            problems.append(f"{where}.role: invalid value {role!r}")
            continue
        for extra in ("reasoning_content", "reasoning", "thinking"):
            if extra in msg:  # what reasoning servers send is not part of the request format
                problems.append(f"{where}: Additional properties are not allowed ({extra!r})")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if call_id not in waiting:
                problems.append(
                    f"{where}: messages with role 'tool' must be a response to a preceding "
                    f"message with 'tool_calls' (no call {call_id!r} is waiting)"
                )
            waiting.pop(call_id, None)
            problems += _openai_content_problems(msg.get("content"), where, empty_ok=True)
            continue
        if waiting:
            problems.append(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(sorted(waiting))}"
            )
            waiting = {}
        if role != "assistant":
            problems += _openai_content_problems(msg.get("content"), where, empty_ok=True)
            continue
        calls = msg.get("tool_calls")
        if calls is not None and (not isinstance(calls, list) or not calls):
            problems.append(f"{where}.tool_calls: must be a non-empty array when given")
            calls = None
        for number, call in enumerate(calls or []):
            function = call.get("function") or {}
            if call.get("type") != "function" or not call.get("id") or not function.get("name"):
                problems.append(f"{where}.tool_calls[{number}]: needs an id, type and name")
            if not isinstance(function.get("arguments"), str):
                problems.append(f"{where}.tool_calls[{number}].function.arguments: not a string")
            waiting[call.get("id")] = index
        content = msg.get("content")
        if not calls and (content is None or content == "" or content == []):
            problems.append(
                f"{where}: an assistant message needs 'content' or 'tool_calls' "
                f"(content was {content!r})"
            )
        elif content is not None:
            problems += _openai_content_problems(content, where, empty_ok=bool(calls))
    if waiting:
        problems.append(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(sorted(waiting))}"
        )
    problems += _openai_format_problems(body.get("response_format"))
    for number, definition in enumerate(body.get("tools") or []):
        function = definition.get("function") or {}
        if definition.get("type") != "function" or not _NAME.fullmatch(function.get("name", "")):
            problems.append(f"tools[{number}]: needs type 'function' and a valid function name")
        elif function.get("strict"):
            parameters = function.get("parameters") or {}
            problems += _strict_schema_problems(parameters, f"tools[{number}].function.parameters")
    return problems


def _openai_content_problems(content: object, where: str, *, empty_ok: bool) -> list[str]:
    if isinstance(content, str):
        return [] if content or empty_ok else [f"{where}.content: must not be empty"]
    if not isinstance(content, list) or (not content and not empty_ok):
        return [f"{where}.content: expected a string or an array of parts, got {content!r}"]
    return [
        f"{where}.content[{number}].text: text parts must be non-empty"
        for number, part in enumerate(content)
        if part.get("type") == "text" and not part.get("text")
    ]


def _openai_format_problems(response_format: object) -> list[str]:
    if response_format is None:
        return []
    if not isinstance(response_format, dict) or response_format.get("type") not in (
        "text",
        "json_object",
        "json_schema",
    ):
        return [f"response_format: invalid value {response_format!r}"]
    if response_format["type"] != "json_schema":
        return []
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        return ["response_format.json_schema: needs a 'name'"]
    schema = spec.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return ["response_format.json_schema.schema: must be the schema of an object"]
    if spec.get("strict"):
        return _strict_schema_problems(schema, "response_format.json_schema.schema")
    return []


def _strict_schema_problems(schema: dict[str, Any], where: str) -> list[str]:
    """Strict mode: every object closed and every property required, all the way down."""
    problems: list[str] = []
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            problems.append(f"{where}: 'additionalProperties' is required to be false")
        if sorted(schema.get("required", [])) != sorted(properties):
            problems.append(f"{where}: 'required' must list every property")
        for name, inner in properties.items():
            problems += _strict_schema_problems(inner, f"{where}.properties.{name}")
    for key in ("items", "anyOf", "$defs"):
        inner = schema.get(key)
        parts = inner.values() if isinstance(inner, dict) and key == "$defs" else inner
        if isinstance(parts, dict):
            parts = [parts]
        for number, part in enumerate(parts or []):
            if isinstance(part, dict):
                problems += _strict_schema_problems(part, f"{where}.{key}[{number}]")
    return problems


def anthropic_problems(body: dict[str, Any]) -> list[str]:
    """Why the Messages API would refuse `body` (empty: it would take it)."""
    problems: list[str] = []
    if not isinstance(body.get("max_tokens"), int):
        problems.append("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: at least one message is required"]
    if messages[0].get("role") != "user":
        problems.append("messages: the first message must use the user role")
    waiting: set[str] = set()
    for index, msg in enumerate(messages):
        where = f"messages.{index}"
        role, content = msg.get("role"), msg.get("content")
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: Input should be 'user' or 'assistant'")
        final = index == len(messages) - 1 and role == "assistant"  # a prefill may be empty
        if isinstance(content, str):
            content = [{"type": "text", "text": content}] if content or not final else []
        if not isinstance(content, list) or (not content and not final):
            problems.append(
                f"{where}: all messages must have non-empty content except for the optional "
                "final assistant message"
            )
            content = []
        answered = {b.get("tool_use_id") for b in content if b.get("type") == "tool_result"}
        if waiting - answered:
            problems.append(
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {', '.join(sorted(waiting - answered))}. Each `tool_use` block must "
                "have a corresponding `tool_result` block in the next message."
            )
        if answered - waiting:
            problems.append(
                f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(sorted(map(str, answered - waiting)))}. Each `tool_result` block "
                "must have a corresponding `tool_use` block in the previous message."
            )
        waiting = set()
        for number, block in enumerate(content):
            problems += _anthropic_block_problems(block, f"{where}.content.{number}", role)
            if block.get("type") == "tool_use":
                waiting.add(block.get("id"))
    if waiting:
        problems.append(
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(sorted(waiting))}"
        )
    for number, definition in enumerate(body.get("tools") or []):
        schema = definition.get("input_schema")
        if not _NAME.fullmatch(definition.get("name", "")):
            problems.append(f"tools.{number}.name: String should match pattern '{_NAME.pattern}'")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            problems.append(f"tools.{number}.input_schema: the schema of an object is required")
    problems += _anthropic_tool_choice_problems(body)
    return problems


def _anthropic_block_problems(block: dict[str, Any], where: str, role: object) -> list[str]:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str) or not text:
            return [f"{where}.text: text content blocks must be non-empty"]
        if not text.strip():
            return [f"{where}.text: text content blocks must contain non-whitespace text"]
        return []
    if kind in ("tool_use", "thinking", "redacted_thinking") and role != "assistant":
        return [f"{where}: `{kind}` blocks can only be in assistant messages"]
    if kind == "tool_result" and role != "user":
        return [f"{where}: `tool_result` blocks can only be in user messages"]
    if kind == "tool_use":
        ok = block.get("id") and block.get("name") and isinstance(block.get("input"), dict)
        return [] if ok else [f"{where}: a tool_use block needs an id, a name and an input"]
    if kind == "thinking":
        if not isinstance(block.get("thinking"), str):
            return [f"{where}.thinking: Field required"]
        if not isinstance(block.get("signature"), str) or not block["signature"]:
            return [f"{where}.signature: Field required"]
        return []
    if kind == "redacted_thinking":
        ok = isinstance(block.get("data"), str) and block["data"]
        return [] if ok else [f"{where}.data: Field required"]
    if kind in ("tool_result", "image"):
        return []
    return [f"{where}.type: Input tag {kind!r} does not match any of the expected tags"]


def _anthropic_tool_choice_problems(body: dict[str, Any]) -> list[str]:
    choice = body.get("tool_choice")
    if choice is None:
        return []
    names = [tool.get("name") for tool in body.get("tools") or []]
    kind = choice.get("type")
    if kind not in ("auto", "any", "tool", "none"):
        return [f"tool_choice.type: invalid value {kind!r}"]
    if kind == "tool" and choice.get("name") not in names:
        return [f"tool_choice.name: no tool named {choice.get('name')!r} is offered"]
    thinking = body.get("thinking")
    if kind in ("any", "tool") and isinstance(thinking, dict) and thinking.get("type") == "enabled":
        return ["Thinking may not be enabled when tool_choice forces tool use."]
    return []
