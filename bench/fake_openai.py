"""A deterministic OpenAI-compatible model server for load tests, on 127.0.0.1 only.

Every `POST .../chat/completions` is answered by one rule, whatever came before:

- the conversation ends with a user message: the reply calls the first tool
  the request offers whose name the user's text contains, else the first tool
  it offers, each required argument filled from the user's text (a string
  gets the text, an integer or a number its length, a boolean `true`);
- it ends with tool results: the reply is the final text
  `answer to <user text>: <tool result>`, which names the question it answers;
- the request asks for a JSON schema (`response_format` of type `json_schema`)
  and offers no tools: the reply is a JSON document of that schema (its
  `$ref`s followed into its `$defs`), each
  string the user's text, each integer or number its length, each boolean
  `true`, each array empty, each enum its first value;
- the user's text contains `[fail]`: an HTTP 400 `invalid_request_error`
  (not retried by a client), to exercise a service's error path.

Replies stream (server-sent events, as the API writes them) when the request
asks for `stream`, and come as one JSON body otherwise; each waits `latency`
seconds first, as a real model would think. Usage counts a message as a
quarter of its text's characters plus 4 (`message_tokens`), the tools offered
as 4 more, and reports `prompt_tokens_details.cached_tokens` by OpenAI's
prompt caching rule (bench/cache_sim.py: prompts of 1,024 tokens or more,
prefixes read in 128-token steps, 5 minutes of life, on the server's `clock`).
Connections are kept alive.
`GET /stats` returns how many completions were asked for, and how many failed.

Use it in a test's event loop (`await FakeOpenAI(latency).start()`, then
`url`, `close()`), or as a process: `python -m bench.fake_openai --latency 0.05`
prints `listening on http://127.0.0.1:PORT` and serves until it is terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import signal
import time
from collections.abc import Callable
from typing import Any

from bench.cache_sim import OpenAIPromptCache, Served, openai_segments

__all__ = ["FAIL_MARK", "FakeOpenAI", "answer_for", "message_tokens", "reply_for"]

FAIL_MARK = "[fail]"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


def answer_for(question: str, tool_result: str) -> str:
    """The final text the server gives for `question` once its tool answered `tool_result`."""
    return f"answer to {question}: {tool_result}"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _argument(kind: Any, text: str) -> Any:
    if kind == "integer":
        return len(text)
    if kind == "number":
        return float(len(text))
    if kind == "boolean":
        return True
    return text


def _document(schema: dict[str, Any], text: str, defs: dict[str, Any] | None = None) -> Any:
    """A value of `schema` (a JSON schema; `$ref`s point into its `$defs`) made from `text`."""
    defs = schema.get("$defs", defs or {})
    if "$ref" in schema:
        return _document(defs[schema["$ref"].rsplit("/", 1)[-1]], text, defs)
    if "enum" in schema:
        return schema["enum"][0]
    options = schema.get("anyOf") or []
    if options:
        chosen = next((o for o in options if o.get("type") != "null"), options[0])
        return _document(chosen, text, defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: _document(field, text, defs) for name, field in properties.items()}
    if kind == "array":
        return []
    if kind == "null":
        return None
    return _argument(kind, text)


def reply_for(body: dict[str, Any]) -> dict[str, Any] | None:
    """The assistant message for a request body (`content`, `tool_calls`), or None for `[fail]`.

    Raises:
        ValueError: The request has no messages, no user message, or asks for a
            tool call without offering tools.
    """
    messages = body.get("messages") or []
    if not messages:
        raise ValueError("the request has no messages")
    questions = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    if not questions:
        raise ValueError("the request has no user message")
    question = questions[-1]
    if FAIL_MARK in question:
        return None
    last = messages[-1]
    if last.get("role") == "tool":
        results: list[str] = []
        for message in reversed(messages):  # the results of the last reply's calls
            if message.get("role") != "tool":
                break
            results.insert(0, _text(message.get("content")))
        return {"content": answer_for(question, " ".join(results)), "tool_calls": []}
    tools = body.get("tools") or []
    shape = body.get("response_format") or {}
    if not tools and shape.get("type") == "json_schema":
        document = _document(shape["json_schema"]["schema"], question)
        return {"content": json.dumps(document), "tool_calls": []}
    if not tools:
        raise ValueError("the conversation ends with a user message and the request offers no tool")
    named = [t for t in tools if t["function"]["name"] in question]
    function = (named or tools)[0]["function"]
    schema = function.get("parameters") or {}
    properties = schema.get("properties") or {}
    arguments = {
        name: _argument(properties.get(name, {}).get("type"), question)
        for name in schema.get("required") or []
    }
    # Unique within a transcript (the position), the same on every run (the text).
    digest = hashlib.sha256(question.encode()).hexdigest()[:8]
    call = {
        "id": f"call_{len(messages)}_{digest}",
        "name": function["name"],
        "arguments": arguments,
    }
    return {"content": None, "tool_calls": [call]}


def message_tokens(message: dict[str, Any]) -> int:
    """The server's token count of one message of a request (or of its `{"tools": ...}`)."""
    return len(_text(message.get("content"))) // 4 + 4


def _usage(served: Served, reply: dict[str, Any]) -> dict[str, Any]:
    completion = len(reply["content"] or "") // 4 + 8 * len(reply["tool_calls"])
    return {
        "prompt_tokens": served.input_tokens,
        "completion_tokens": completion,
        "total_tokens": served.input_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": served.cached_tokens},
    }


def _openai_calls(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
        }
        for call in reply["tool_calls"]
    ]


def _completion(body: dict[str, Any], reply: dict[str, Any], served: Served) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply["content"], "refusal": None}
    if reply["tool_calls"]:
        message["tool_calls"] = _openai_calls(reply)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply["tool_calls"] else "stop",
            }
        ],
        "usage": _usage(served, reply),
    }


def _chunks(body: dict[str, Any], reply: dict[str, Any], served: Served) -> list[dict[str, Any]]:
    """The chunks of a streamed reply: the role, text in three pieces, each call, the end."""
    model = body.get("model", "fake")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    text = reply["content"] or ""
    third = max(1, len(text) // 3)
    chunks += [chunk({"content": text[i : i + third]}) for i in range(0, len(text), third)]
    for index, call in enumerate(_openai_calls(reply)):
        chunks.append(chunk({"tool_calls": [{"index": index, **call}]}))
    chunks.append(chunk({}, "tool_calls" if reply["tool_calls"] else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        final = chunk({})
        final["choices"], final["usage"] = [], _usage(served, reply)
        chunks.append(final)
    return chunks


class FakeOpenAI:
    """The server: `await start()`, point a client at `url` (it ends in `/v1`), `await close()`.

    Args:
        latency: Seconds each completion waits before its reply starts.
        clock: Seconds now, for the prompt cache's lifetime (`time.monotonic`).
    """

    def __init__(self, latency: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        if latency < 0:
            raise ValueError(f"FakeOpenAI latency must be >= 0 seconds, not {latency!r}")
        self.latency = latency
        self.clock = clock
        self.cache = OpenAIPromptCache()
        self.completions = 0
        self.failures = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, port: int = 0) -> FakeOpenAI:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        return self

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started: await start() first")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """The base URL to give an OpenAI client."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:  # keep-alive: requests one after another on this connection
                request = await _read_request(reader)
                if request is None:
                    return
                await self._answer(*request, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer(
        self, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter
    ) -> None:
        if method == "GET" and path.rstrip("/").endswith("/stats"):
            stats = {"completions": self.completions, "failures": self.failures}
            await _send_json(writer, 200, stats)
            return
        if not path.rstrip("/").endswith("/chat/completions"):
            await _send_error(writer, 404, f"no route {method} {path}")
            return
        if method != "POST":
            await _send_error(writer, 405, f"{path} takes POST")
            return
        try:
            body = json.loads(raw)
            reply = reply_for(body)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self.failures += 1
            await _send_error(writer, 400, f"the fake server cannot answer this request: {exc}")
            return
        self.completions += 1
        served = self.cache.serve(openai_segments(body, message_tokens), self.clock())
        if self.latency:
            await asyncio.sleep(self.latency)
        if reply is None:
            self.failures += 1
            await _send_error(writer, 400, f"the user asked for a failure with {FAIL_MARK}")
        elif body.get("stream"):
            await _send_events(writer, _chunks(body, reply, served))
        else:
            await _send_json(writer, 200, _completion(body, reply, served))


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, path, _ = line.decode().split(" ", 2)
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return method, path, await reader.readexactly(length)


def _head(status: int, *headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _send_json(writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    head = _head(status, "Content-Type: application/json", f"Content-Length: {len(payload)}")
    writer.write(head + payload)
    await writer.drain()


async def _send_error(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    await _send_json(writer, status, {"error": error})


async def _send_events(writer: asyncio.StreamWriter, chunks: list[dict[str, Any]]) -> None:
    """Server-sent events in chunked transfer encoding, so the connection stays open."""
    writer.write(
        _head(
            200,
            "Content-Type: text/event-stream",
            "Cache-Control: no-cache",
            "Transfer-Encoding: chunked",
        )
    )
    for data in [*(json.dumps(chunk) for chunk in chunks), "[DONE]"]:
        event = f"data: {data}\n\n".encode()
        writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _serve_forever(latency: float, port: int) -> None:
    server = await FakeOpenAI(latency).start(port)
    print(f"listening on http://127.0.0.1:{server.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.close()


def main(arguments: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    options = parser.parse_args(arguments)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(options.latency, options.port))


if __name__ == "__main__":
    main()
