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
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from .api_rules import anthropic_problems, openai_problems

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
    refusal: str | None = None,
) -> dict[str, Any]:
    """A `chat.completion` object with one choice.

    `reasoning` is the reasoning text a compatible server (vLLM, DeepSeek, ...)
    adds under `reasoning_field` (`reasoning_content`, or `reasoning`).
    `refusal` is the model's refusal (`message.refusal`; `content` is then
    usually null, and the finish reason `stop`).
    """
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": refusal}
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
    refusal: list[str] = (),  # type: ignore[assignment]
) -> list[tuple[str | None, str]]:
    """The events of a streamed completion: text pieces, then each call's argument pieces.

    As the API streams: the first chunk carries the role, a call's first chunk
    its id and name, later chunks only argument pieces; the last choice chunk
    the finish reason; with `stream_options.include_usage`, a final chunk with
    no choices and the usage; then `[DONE]`. `reasoning` pieces (as a
    compatible reasoning server sends them, under `reasoning_field`) come
    before the text; `refusal` pieces (`delta.refusal`) after it.
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
    events += [chunk({"refusal": piece}) for piece in refusal]
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
    stop_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `message` object: content blocks (`text_block`, `tool_use_block`), usage, stop reason.

    `stop_details` is what the API adds to `stop_reason: "refusal"` (see
    `refusal_details`).
    """
    calls = any(block["type"] == "tool_use" for block in blocks)
    return {
        "stop_details": stop_details,
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
    stop_details: dict[str, Any] | None = None,
) -> list[tuple[str | None, str]]:
    """The events of a streamed message.

    Each block is `("text", [pieces])`, `("tool_use", (id, name, [json pieces]))`,
    `("thinking", ([pieces], signature))` or `("redacted_thinking", data)`.
    As the API streams: `message_start` (usage so far), then per block
    `content_block_start`, its deltas (a thinking block's signature last, as a
    `signature_delta`), `content_block_stop`; a `ping`; then `message_delta`
    (stop reason and its `stop_details`, output tokens) and `message_stop`.
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
            "stop_details": stop_details,
        },
        "usage": {"output_tokens": full["output_tokens"]},
    }
    events.append(("message_delta", json.dumps(delta)))
    events.append(("message_stop", json.dumps({"type": "message_stop"})))
    return events


def refusal_details(explanation: str | None, category: str | None = "cyber") -> dict[str, Any]:
    """The `stop_details` the API sends with `stop_reason: "refusal"`."""
    return {"type": "refusal", "category": category, "explanation": explanation}


def anthropic_error(status: int, kind: str, text: str = "try later", **headers: str) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": text}}
    return Reply(
        status=status, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )
