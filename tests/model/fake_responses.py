"""The scripted local server, speaking OpenAI's Responses API strictly, for the real SDK.

`FakeResponsesAPI` is `FakeAPI` (scripted replies, every request kept) that
first checks each request to `/responses` the way the real API does and
answers HTTP 400 with OpenAI's error body when the real API would refuse it
(`responses_problems` lists the rules). A refused request does not use up a
scripted reply; it is kept in `refused`.

The builders write bodies and event streams in the documented format: a
`response` object (`response`, with `message_item` / `call_item` /
`reasoning_item` output), a streamed response (`response_events`), and the
errors (`responses_error`, `error_event`, `failed_events`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from .fake_api import FakeAPI, Reply, Request

# -- the server ------------------------------------------------------------------------------


@dataclass
class RawReply(Reply):
    """A JSON response whose body is `raw`, sent as it is (a malformed body, say)."""

    raw: bytes = b""


class FakeResponsesAPI(FakeAPI):
    """`FakeAPI` that refuses (400) the Responses requests the real API refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[tuple[Request, list[str]]] = []

    async def _answer(self, reply: Reply, writer: Any) -> None:
        # `_serve` keeps the request and calls this with no await in between,
        # so the newest request is the one being answered.
        request = self.requests[-1]
        problems = responses_problems(request.body) if request.path.endswith("/responses") else []
        if problems:
            self.refused.append((request, problems))
            self.requests.pop()
            self.replies.appendleft(reply)
            reply = responses_error(400, "; ".join(problems), "invalid_request_error")
        if isinstance(reply, RawReply):
            await _write_raw(reply, writer)
        else:
            await super()._answer(reply, writer)


async def _write_raw(reply: RawReply, writer: asyncio.StreamWriter) -> None:
    head = [
        f"HTTP/1.1 {reply.status} OK",
        "Connection: close",
        "Content-Type: application/json",
        f"Content-Length: {len(reply.raw)}",
    ]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + reply.raw)
    await writer.drain()


# -- what the real API refuses ------------------------------------------------------------------

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ROLES = ("user", "assistant", "system", "developer")
_INPUT_PARTS = ("input_text", "input_image", "input_file")
_ASSISTANT_PARTS = ("output_text", "refusal")
_KNOWN = {
    "model",
    "input",
    "instructions",
    "store",
    "stream",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "top_p",
    "text",
    "reasoning",
    "metadata",
    "include",
    "truncation",
    "user",
    "service_tier",
    "previous_response_id",
    "prompt_cache_key",
    "seed",  # not OpenAI's; sent by tests as an extra field a compatible server reads
}
# The values `include` takes, as documented.
_INCLUDABLE = {
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
    "web_search_call.action.sources",
}


def responses_problems(body: dict[str, Any]) -> list[str]:
    """Why the real Responses API would refuse `body` (empty: it would not)."""
    problems = [f"Unknown parameter: '{key}'." for key in body if key not in _KNOWN]
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("Missing required parameter: 'model'.")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        problems.append("Invalid type for 'instructions': expected a string.")
    problems += _include_problems(body.get("include"))
    problems += _input_problems(body.get("input"), body.get("store", True), body.get("model"))
    problems += _tool_problems(body.get("tools"), body.get("tool_choice"))
    tokens = body.get("max_output_tokens")
    if tokens is not None and (not isinstance(tokens, int) or tokens < 16):
        problems.append("Invalid 'max_output_tokens': integer below minimum value (16).")
    problems += _format_problems(body.get("text"))
    return problems


def _include_problems(include: Any) -> list[str]:
    if include is None:
        return []
    if not isinstance(include, list):
        return ["Invalid type for 'include': expected an array of strings."]
    return [
        f"Invalid value: '{value}' for 'include[{index}]'. "
        f"Supported values are: {', '.join(sorted(_INCLUDABLE))}."
        for index, value in enumerate(include)
        if value not in _INCLUDABLE
    ]


def sealed(model: str, item_id: str) -> str:
    """The `encrypted_content` this server writes for reasoning item `item_id` of `model`."""
    plain = json.dumps({"model": model, "id": item_id}).encode()
    return "gAAAA" + base64.b64encode(plain).decode()


def _unsealed(encrypted: str) -> dict[str, Any] | None:
    if not encrypted.startswith("gAAAA"):
        return None
    try:
        opened = json.loads(base64.b64decode(encrypted[5:], validate=True))
    except (binascii.Error, ValueError):
        return None
    return opened if isinstance(opened, dict) else None


def _reasoning_problems(given: list[Any], index: int, store: bool, model: Any) -> list[str]:
    item, where = given[index], f"input[{index}]"
    item_id = item.get("id")
    if not isinstance(item_id, str) or not item_id:
        return [f"Missing required parameter: '{where}.id'."]
    summary = item.get("summary")
    if not isinstance(summary, list) or any(
        not isinstance(part, dict)
        or part.get("type") != "summary_text"
        or not isinstance(part.get("text"), str)
        for part in summary
    ):
        return [f"Missing required parameter: '{where}.summary'."]
    encrypted = item.get("encrypted_content")
    if encrypted is None:
        if store:
            return []
        return [
            f"Item with id '{item_id}' not found. Items are not persisted when `store` is set "
            "to false. Try again with `store` set to true, or pass the item's encrypted content "
            "(include 'reasoning.encrypted_content')."
        ]
    opened = _unsealed(encrypted) if isinstance(encrypted, str) else None
    if opened is None or opened.get("id") != item_id or opened.get("model") != model:
        # The real API cannot decrypt another model's (or a changed) reasoning.
        return [f"The encrypted content for item {item_id} could not be verified."]
    following = given[index + 1] if index + 1 < len(given) else None
    follows = isinstance(following, dict) and (
        following.get("type") == "function_call"
        or (
            following.get("type", "message" if "role" in following else None) == "message"
            and following.get("role") == "assistant"
        )
    )
    if not follows:
        return [
            f"Item '{item_id}' of type 'reasoning' was provided without its required "
            "following item."
        ]
    return []


def _input_problems(given: Any, store: bool, model: Any = None) -> list[str]:
    if isinstance(given, str):
        return [] if given else ["Invalid 'input': empty string."]
    if not isinstance(given, list) or not given:
        return ["Invalid 'input': expected a string or a non-empty array of items."]
    problems: list[str] = []
    called: dict[str, int] = {}
    answered: set[str] = set()
    for index, item in enumerate(given):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            problems.append(f"Invalid type for '{where}': expected an object.")
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if "id" in item and not store and kind != "reasoning":
            problems.append(
                f"Item with id '{item['id']}' not found. Items are not persisted when "
                "`store` is set to false."
            )
        if kind == "message":
            problems += _message_problems(item, where)
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(item.get(key), str) or (key != "arguments" and not item[key]):
                    problems.append(f"Missing required parameter: '{where}.{key}'.")
            if isinstance(item.get("call_id"), str):
                called[item["call_id"]] = index
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in called:
                problems.append(
                    f"No tool call found for function call output with call_id {call_id}."
                )
            answered.add(call_id)
            output = item.get("output")
            if not isinstance(output, str | list):
                problems.append(f"Invalid type for '{where}.output': expected a string or array.")
            elif isinstance(output, list):
                problems += _parts_problems(output, f"{where}.output", _INPUT_PARTS)
        elif kind == "reasoning":
            problems += _reasoning_problems(given, index, store, model)
        else:
            problems.append(f"Invalid value: '{kind}' for '{where}.type'.")
    for call_id in called:
        if call_id not in answered:
            problems.append(f"No tool output found for function call {call_id}.")
    return problems


def _message_problems(item: dict[str, Any], where: str) -> list[str]:
    role = item.get("role")
    if role not in _ROLES:
        return [f"Invalid value: '{role}' for '{where}.role'."]
    content = item.get("content")
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or not content:
        return [f"Invalid '{where}.content': expected a string or a non-empty array."]
    allowed = _ASSISTANT_PARTS if role == "assistant" else _INPUT_PARTS
    return _parts_problems(content, f"{where}.content", allowed)


def _parts_problems(parts: list[Any], where: str, allowed: tuple[str, ...]) -> list[str]:
    problems = []
    for index, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            problems.append(
                f"Invalid value: '{kind}' for '{where}[{index}].type'. "
                f"Supported values are: {', '.join(allowed)}."
            )
        elif kind == "input_image" and not (part.get("image_url") or part.get("file_id")):
            problems.append(f"Missing required parameter: '{where}[{index}].image_url'.")
        elif kind in ("input_text", "output_text") and not isinstance(part.get("text"), str):
            problems.append(f"Missing required parameter: '{where}[{index}].text'.")
    return problems


def _tool_problems(tools: Any, choice: Any) -> list[str]:
    problems = []
    names = set()
    for index, definition in enumerate(tools or []):
        where = f"tools[{index}]"
        if not isinstance(definition, dict) or definition.get("type") != "function":
            problems.append(f"Invalid value for '{where}.type'.")
            continue
        if "function" in definition:  # the Chat Completions shape
            problems.append(f"Unknown parameter: '{where}.function'.")
        name = definition.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.append(f"Missing required parameter: '{where}.name'.")
        names.add(name)
        parameters = definition.get("parameters")
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            problems.append(f"Invalid '{where}.parameters': expected an object schema.")
        elif definition.get("strict", True) and parameters.get("additionalProperties") is not False:
            # The API makes a function strict unless told otherwise.
            problems.append(
                f"Invalid schema for function '{name}': 'additionalProperties' is required "
                "to be supplied and to be false."
            )
    if choice is not None and choice not in ("auto", "required", "none"):
        if not isinstance(choice, dict) or choice.get("type") != "function":
            problems.append("Invalid value for 'tool_choice'.")
        elif choice.get("name") not in names:
            problems.append(f"Tool choice '{choice.get('name')}' not found in 'tools'.")
    return problems


def _format_problems(text: Any) -> list[str]:
    if text is None:
        return []
    if not isinstance(text, dict):
        return ["Invalid type for 'text': expected an object."]
    form = text.get("format")
    if form is None:
        return []
    kind = form.get("type") if isinstance(form, dict) else None
    if kind in ("text", "json_object"):
        return []
    if kind != "json_schema":
        return [f"Invalid value: '{kind}' for 'text.format.type'."]
    problems = []
    if not isinstance(form.get("name"), str) or not _NAME.fullmatch(form["name"]):
        problems.append("Missing required parameter: 'text.format.name'.")
    schema = form.get("schema")
    if not isinstance(schema, dict):
        problems.append("Missing required parameter: 'text.format.schema'.")
    elif form.get("strict") and schema.get("additionalProperties") is not False:
        problems.append(
            "Invalid schema for response_format: 'additionalProperties' is required to be "
            "supplied and to be false."
        )
    return problems


# -- bodies ----------------------------------------------------------------------------------


def message_item(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    """An assistant message output item with one `output_text` part."""
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def refusal_item(refusal: str, item_id: str = "msg_1") -> dict[str, Any]:
    """An assistant message output item whose one part is the model's `refusal`."""
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": refusal}],
    }


def call_item(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A `function_call` output item."""
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def reasoning_item(
    summary: str = "Thinking it over.", item_id: str = "rs_1", sealed_for: str | None = None
) -> dict[str, Any]:
    """A `reasoning` output item with a summary (none if empty).

    `sealed_for`: the model whose encrypted content it carries (what the API
    writes when asked with `include=["reasoning.encrypted_content"]`).
    """
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
    }
    if sealed_for is not None:
        item["encrypted_content"] = sealed(sealed_for, item_id)
    return item


def response(
    *output: dict[str, Any],
    usage: tuple[int, ...] | None = (10, 5),
    status: str = "completed",
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
    model: str = "gpt-test",
) -> dict[str, Any]:
    """A `response` object: its output items, usage (input, output[, cached[, reasoning]])."""
    body: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "error": error,
        "incomplete_details": None if incomplete_reason is None else {"reason": incomplete_reason},
        "instructions": None,
        "model": model,
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None if usage is None else _usage(usage),
    }
    return body


def _usage(usage: tuple[int, ...]) -> dict[str, Any]:
    given, written, *rest = usage
    cached, reasoning = (*rest, 0, 0)[:2]
    return {
        "input_tokens": given,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": written,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": given + written,
    }


# -- event streams ---------------------------------------------------------------------------

# ("text", [pieces]) | ("refusal", [pieces]) | ("call", (id, name, [pieces]))
# | ("reasoning", summary) | ("reasoning", reasoning_item(...))
Streamed = tuple[str, Any]


def response_events(
    *items: Streamed,
    usage: tuple[int, ...] | None = (10, 5),
    status: str = "completed",
    incomplete_reason: str | None = None,
    model: str = "gpt-test",
    final_output: bool = True,
) -> list[tuple[str | None, str]]:
    """The events of a streamed response, as the API sends them.

    `response.created` and `response.in_progress` (no output yet); per item
    `response.output_item.added`, its deltas (`response.output_text.delta` or
    `response.refusal.delta` inside a content part, or
    `response.function_call_arguments.delta`), their
    `.done` events and `response.output_item.done`; then `response.completed`
    (or `response.incomplete`) with the whole response. `final_output=False`
    leaves the final response's output empty (some compatible servers do).
    """
    events: list[tuple[str | None, str]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, json.dumps({"type": kind, "sequence_number": len(events), **data})))

    start = response(usage=None, status="in_progress", model=model)
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    done: list[dict[str, Any]] = []
    for index, (kind, content) in enumerate(items):
        if kind == "text":
            item_id = f"msg_{index}"
            text = "".join(content)
            added = {**message_item("", item_id), "status": "in_progress", "content": []}
            emit("response.output_item.added", output_index=index, item=added)
            part = {"type": "output_text", "text": "", "annotations": []}
            where = {"item_id": item_id, "output_index": index, "content_index": 0}
            emit("response.content_part.added", **where, part=part)
            for piece in content:
                emit("response.output_text.delta", **where, delta=piece, logprobs=[])
            emit("response.output_text.done", **where, text=text, logprobs=[])
            emit("response.content_part.done", **where, part={**part, "text": text})
            item = message_item(text, item_id)
        elif kind == "refusal":
            item_id = f"msg_{index}"
            text = "".join(content)
            added = {**refusal_item("", item_id), "status": "in_progress", "content": []}
            emit("response.output_item.added", output_index=index, item=added)
            part = {"type": "refusal", "refusal": ""}
            where = {"item_id": item_id, "output_index": index, "content_index": 0}
            emit("response.content_part.added", **where, part=part)
            for piece in content:
                emit("response.refusal.delta", **where, delta=piece)
            emit("response.refusal.done", **where, refusal=text)
            emit("response.content_part.done", **where, part={**part, "refusal": text})
            item = refusal_item(text, item_id)
        elif kind == "call":
            call_id, name, pieces = content
            item = call_item(call_id, name, "".join(pieces))
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            for piece in pieces:
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        else:
            item = content if isinstance(content, dict) else reasoning_item(content)
            emit("response.output_item.added", output_index=index, item={**item, "summary": []})
            for number, part in enumerate(item["summary"]):
                where = {"item_id": item["id"], "output_index": index, "summary_index": number}
                emit("response.reasoning_summary_part.added", **where, part={**part, "text": ""})
                text = part["text"]
                for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                    emit("response.reasoning_summary_text.delta", **where, delta=piece)
                emit("response.reasoning_summary_text.done", **where, text=text)
                emit("response.reasoning_summary_part.done", **where, part=part)
        emit("response.output_item.done", output_index=index, item=item)
        done.append(item)
    final = response(
        *(done if final_output else ()),
        usage=usage,
        status=status,
        incomplete_reason=incomplete_reason,
        model=model,
    )
    emit("response.incomplete" if status == "incomplete" else "response.completed", response=final)
    return events


def error_event(code: str, message: str = "try again") -> tuple[str, str]:
    """An `error` event, as the API sends one in the middle of a stream."""
    body = {"type": "error", "code": code, "message": message, "param": None, "sequence_number": 9}
    return "error", json.dumps(body)


def failed_events(code: str, message: str = "the model failed") -> list[tuple[str | None, str]]:
    """A stream that starts, then ends with `response.failed`."""
    events = response_events(("text", ["Hal"]))[:-1]
    failed = response(usage=None, status="failed", error={"code": code, "message": message})
    body = {"type": "response.failed", "sequence_number": len(events), "response": failed}
    return [*events, ("response.failed", json.dumps(body))]


def responses_error(status: int, message: str, kind: str = "server_error", **headers: str) -> Reply:
    """An HTTP error with OpenAI's error body."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply(
        status=status, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )
