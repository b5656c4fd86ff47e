"""The scripted local server, speaking the Gemini API strictly, for the real `google-genai` SDK.

`FakeGemini` is `FakeAPI` (scripted replies, every request kept) that first
checks each request to `/v1[beta]/models/{model}:generateContent` or
`:streamGenerateContent?alt=sse` the way the real API does, and answers HTTP
400 with Google's error body (`{"error": {"code", "message", "status"}}`)
when the real API would refuse it (`gemini_problems` lists the rules). A
refused request does not use up a scripted reply; it is kept in `refused`.

Thought signatures are the server's own: a reply built with `signed=True`
parts carries a fresh signature, and the server remembers each one and the
function call it was issued with. A later request that sends a signature
the server never issued, or sends back such a call without its signature
(Gemini 3 refuses both), is refused.

The builders write the documented shapes: `candidate_response` (one
candidate, its parts, `finishReason`, `usageMetadata`), `blocked_response`
(no candidates, `promptFeedback.blockReason`), `stream_chunks` (the same,
as `alt=sse` chunks) and `gemini_error`.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
from typing import Any

from .fake_api import FakeAPI, Reply, Request

_PATH = re.compile(
    r"^/v1(?:beta)?/models/([^/:?]+):(generateContent|streamGenerateContent)(\?.*)?$"
)
_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}")
_KNOWN = {
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "generationConfig",
    "safetySettings",
    "cachedContent",
}
_GENERATION = {
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "stopSequences",
    "responseMimeType",
    "responseJsonSchema",
    "responseSchema",
    "thinkingConfig",
    "candidateCount",
    "seed",
}
_DATA_FIELDS = (
    "text",
    "inlineData",
    "functionCall",
    "functionResponse",
    "fileData",
    "executableCode",
    "codeExecutionResult",
)
_STATUS = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


class FakeGemini(FakeAPI):
    """`FakeAPI` that refuses (400) the Gemini requests the real API refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.issued: dict[str, tuple[str, str] | None] = {}  # signature -> (call name, args)
        self._numbers = itertools.count(1)

    def sign(self, call: tuple[str, str] | None = None) -> str:
        """A fresh signature, remembered (with the call it signs, if any)."""
        signature = base64.b64encode(f"sig-{next(self._numbers)}".encode()).decode()
        self.issued[signature] = call
        return signature

    def _refusal(self, request: Request) -> Reply | None:
        problems = self.problems(request)
        if problems:
            self.refused.append((request, problems))
            return gemini_error(400, "; ".join(problems))
        return None

    def problems(self, request: Request) -> list[str]:
        """Why the real Gemini API would refuse `request` (empty: it would not).

        The API reads JSON by protobuf's rules, which take a field by its
        lowerCamelCase name or its original snake_case one (the SDK sends
        some of each, such as `mime_type`); the body is first put in
        lowerCamelCase (in place, so tests read one spelling), leaving the
        values that are the caller's own data (schemas, arguments, results).
        """
        request.body = _camel(request.body)
        match = _PATH.match(request.path)
        if match is None:
            return [f"Not found: {request.method} {request.path}"]
        if match.group(2) == "streamGenerateContent" and "alt=sse" not in (match.group(3) or ""):
            return ["streamGenerateContent without alt=sse is not an event stream"]
        if not request.headers.get("x-goog-api-key"):
            return ["Method doesn't allow unregistered callers (missing x-goog-api-key)."]
        body = request.body
        problems = [
            f'Invalid JSON payload received. Unknown name "{k}".' for k in body if k not in _KNOWN
        ]
        problems += self._contents_problems(body.get("contents"))
        problems += _system_problems(body.get("systemInstruction"))
        declared = _declared(body.get("tools"), problems)
        problems += _tool_config_problems(body.get("toolConfig"), declared)
        problems += _generation_problems(body.get("generationConfig"))
        return problems

    def _contents_problems(self, contents: Any) -> list[str]:
        if not isinstance(contents, list) or not contents:
            return ["* GenerateContentRequest.contents: contents is not specified"]
        problems: list[str] = []
        previous_role: str | None = None
        pending: list[dict[str, Any]] = []  # the function calls of the last model turn
        for index, content in enumerate(contents):
            where = f"contents[{index}]"
            if not isinstance(content, dict):
                problems.append(f"{where} must be an object")
                continue
            role = content.get("role")
            if role not in ("user", "model"):
                problems.append(f"{where}.role must be 'user' or 'model', not {role!r}")
            if role == previous_role:
                problems.append(
                    "Please ensure that multiturn requests alternate between user and model."
                )
            previous_role = role
            parts = content.get("parts")
            if not isinstance(parts, list) or not parts:
                problems.append(
                    f"* GenerateContentRequest.{where}.parts: contents.parts must not be empty."
                )
                continue
            calls: list[dict[str, Any]] = []
            responses: list[dict[str, Any]] = []
            for number, part in enumerate(parts):
                problems += self._part_problems(part, f"{where}.parts[{number}]", role)
                if isinstance(part, dict) and isinstance(part.get("functionCall"), dict):
                    calls.append(part)
                if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                    responses.append(part["functionResponse"])
            if role == "model":
                problems += self._signature_problems(calls, index)
            if role == "user" and (pending or responses):
                problems += _pairing_problems(pending, responses, where)
            pending = [c["functionCall"] for c in calls] if role == "model" else []
        if pending:
            problems.append("the last content is a function call turn with no function responses")
        return problems

    def _part_problems(self, part: Any, where: str, role: Any) -> list[str]:
        if not isinstance(part, dict):
            return [f"{where} must be an object"]
        unknown = [k for k in part if k not in (*_DATA_FIELDS, "thought", "thoughtSignature")]
        if unknown:
            return [f"Invalid JSON payload received. Unknown name \"{unknown[0]}\" at '{where}'."]
        data = [k for k in _DATA_FIELDS if k in part]
        if len(data) != 1:
            return [f"{where} must have exactly one data field, not {data}"]
        problems: list[str] = []
        signature = part.get("thoughtSignature")
        if signature is not None:
            try:
                base64.b64decode(signature, validate=True)
            except (binascii.Error, TypeError):
                return [f"{where}.thoughtSignature is not valid base64"]
            if signature not in self.issued:
                problems.append(f"{where}: Corrupted thought signature.")
            if role != "model":
                problems.append(f"{where}: thought signatures belong in model turns")
        kind = data[0]
        value = part[kind]
        if kind == "text":
            if not isinstance(value, str):
                problems.append(f"{where}.text must be a string")
            elif not value and signature is None:
                problems.append("Unable to submit request because it has an empty text parameter.")
        elif kind == "inlineData":
            if not isinstance(value, dict) or not isinstance(value.get("mimeType"), str):
                problems.append(f"{where}.inlineData needs mimeType and data")
        elif kind == "functionCall":
            if role != "model":
                problems.append(f"{where}: a functionCall belongs in a model turn")
            if not isinstance(value, dict) or not isinstance(value.get("name"), str):
                problems.append(f"{where}.functionCall.name is required")
            elif not isinstance(value.get("args", {}), dict):
                problems.append(f"{where}.functionCall.args must be an object")
        elif kind == "functionResponse":
            if role != "user":
                problems.append(f"{where}: a functionResponse belongs in a user turn")
            if not isinstance(value, dict) or not isinstance(value.get("name"), str):
                problems.append(f"{where}.functionResponse.name is required")
            elif not isinstance(value.get("response"), dict):
                problems.append(f"{where}.functionResponse.response must be an object")
        return problems

    def _signature_problems(self, calls: list[dict[str, Any]], index: int) -> list[str]:
        """Gemini 3: a call the server signed must come back with its signature."""
        problems = []
        for part in calls:
            call = part["functionCall"]
            key = (call.get("name"), json.dumps(call.get("args", {}), sort_keys=True))
            signed = [s for s, issued in self.issued.items() if issued == key]
            if signed and part.get("thoughtSignature") not in signed:
                problems.append(
                    f"Function call `{call.get('name')}` in the {index + 1}. content block "
                    "is missing a `thought_signature`."
                )
        return problems


# Values that are the caller's own JSON, whose keys are never renamed.
_OPAQUE = frozenset(
    {
        "args",
        "response",
        "parametersJsonSchema",
        "parameters",
        "responseJsonSchema",
        "responseSchema",
    }
)


def _camel(value: Any) -> Any:
    if isinstance(value, list):
        return [_camel(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        name = head + "".join(word.title() for word in rest)
        out[name] = item if name in _OPAQUE else _camel(item)
    return out


def _pairing_problems(
    calls: list[dict[str, Any]], responses: list[dict[str, Any]], where: str
) -> list[str]:
    if len(calls) != len(responses):
        return [
            "Please ensure that the number of function response parts is equal to the number "
            f"of function call parts of the function call turn ({where}: {len(responses)} "
            f"responses for {len(calls)} calls)."
        ]
    problems = []
    for call, response in zip(calls, responses, strict=True):
        if call.get("name") != response.get("name"):
            problems.append(
                f"{where}: the function response for {call.get('name')!r} is named "
                f"{response.get('name')!r}"
            )
        if "id" in call and response.get("id") != call["id"]:
            problems.append(
                f"{where}: the function response's id {response.get('id')!r} does not match "
                f"its call's id {call['id']!r}"
            )
        if "id" in response and "id" not in call:
            problems.append(f"{where}: the function response has an id its call never had")
    return problems


def _system_problems(system: Any) -> list[str]:
    if system is None:
        return []
    parts = system.get("parts") if isinstance(system, dict) else None
    if not isinstance(parts, list) or not parts:
        return ["systemInstruction.parts must not be empty"]
    if not all(isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"] for p in parts):
        return ["systemInstruction parts must be non-empty text"]
    return []


def _declared(tools: Any, problems: list[str]) -> list[str]:
    if tools is None:
        return []
    names: list[str] = []
    if not isinstance(tools, list):
        problems.append("tools must be a list")
        return names
    for tool in tools:
        for declaration in (tool or {}).get("functionDeclarations", []):
            name = declaration.get("name")
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                problems.append(f"Invalid function name {name!r}")
            if "parameters" in declaration and "parametersJsonSchema" in declaration:
                problems.append(f"{name}: set parameters or parametersJsonSchema, not both")
            schema = declaration.get("parametersJsonSchema")
            if schema is not None and (
                not isinstance(schema, dict) or schema.get("type") != "object"
            ):
                problems.append(f"{name}: parametersJsonSchema must describe an object")
            names.append(name)
    if len(set(names)) != len(names):
        problems.append("Duplicate function declaration names")
    return names


def _tool_config_problems(config: Any, declared: list[str]) -> list[str]:
    if config is None:
        return []
    calling = config.get("functionCallingConfig", {})
    mode = calling.get("mode")
    if mode not in ("AUTO", "ANY", "NONE", "VALIDATED"):
        return [f"Invalid value at 'tool_config.function_calling_config.mode' ({mode!r})"]
    allowed = calling.get("allowedFunctionNames")
    if allowed is not None:
        if mode != "ANY":
            return ["allowedFunctionNames may be set only when mode is ANY"]
        missing = [n for n in allowed if n not in declared]
        if missing:
            return [f"allowedFunctionNames names undeclared functions: {missing}"]
    if not declared:
        return ["toolConfig is set but no function is declared"]
    return []


def _generation_problems(config: Any) -> list[str]:
    if config is None:
        return []
    problems = [
        f"Invalid JSON payload received. Unknown name \"{k}\" at 'generation_config'."
        for k in config
        if k not in _GENERATION
    ]
    tokens = config.get("maxOutputTokens")
    if tokens is not None and (not isinstance(tokens, int) or tokens < 1):
        problems.append("maxOutputTokens must be a positive integer")
    temperature = config.get("temperature")
    if temperature is not None and not 0 <= temperature <= 2:
        problems.append("temperature must be between 0 and 2")
    stops = config.get("stopSequences")
    if stops is not None and len(stops) > 5:
        problems.append("at most 5 stopSequences")
    mime = config.get("responseMimeType")
    if mime is not None and mime not in ("text/plain", "application/json", "text/x.enum"):
        problems.append(f"unsupported responseMimeType {mime!r}")
    if "responseJsonSchema" in config:
        if mime != "application/json":
            problems.append("responseJsonSchema needs responseMimeType application/json")
        if "responseSchema" in config:
            problems.append("set responseSchema or responseJsonSchema, not both")
    return problems


# -- replies ---------------------------------------------------------------------------------


def usage(prompt: int = 10, output: int = 5, cached: int = 0, thoughts: int = 0) -> dict[str, Any]:
    """`usageMetadata`, as the API counts: the prompt includes its cached part."""
    counts = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output + thoughts,
    }
    if cached:
        counts["cachedContentTokenCount"] = cached
    if thoughts:
        counts["thoughtsTokenCount"] = thoughts
    return counts


def candidate_response(
    *parts: dict[str, Any],
    finish: str | None = "STOP",
    usage_metadata: dict[str, Any] | None = None,
    ratings: list[dict[str, Any]] | None = None,
    model: str = "gemini-test-001",
) -> dict[str, Any]:
    """A `GenerateContentResponse` with one candidate."""
    candidate: dict[str, Any] = {"index": 0}
    if parts:
        candidate["content"] = {"role": "model", "parts": list(parts)}
    if finish is not None:
        candidate["finishReason"] = finish
    if ratings is not None:
        candidate["safetyRatings"] = ratings
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": "r1"}
    if usage_metadata is not None or finish is not None:
        body["usageMetadata"] = usage_metadata or usage()
    return body


def blocked_response(reason: str | None = "SAFETY", message: str | None = None) -> dict[str, Any]:
    """A reply to a prompt Gemini blocked: no candidates, `promptFeedback.blockReason`."""
    body: dict[str, Any] = {"usageMetadata": usage(7, 0), "modelVersion": "gemini-test-001"}
    if reason is not None:
        feedback: dict[str, Any] = {"blockReason": reason}
        if message is not None:
            feedback["blockReasonMessage"] = message
        body["promptFeedback"] = feedback
    return body


def text(value: str, signature: str | None = None, thought: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"text": value}
    if thought:
        part["thought"] = True
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def call(
    name: str, args: dict[str, Any], call_id: str | None = None, signature: str | None = None
) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        function["id"] = call_id
    part: dict[str, Any] = {"functionCall": function}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def signed_call(
    api: FakeGemini, name: str, args: dict[str, Any], call_id: str | None = None
) -> dict[str, Any]:
    """A function call part with a signature the server issued for it (Gemini 3's way)."""
    signature = api.sign((name, json.dumps(args, sort_keys=True)))
    return call(name, args, call_id, signature)


def stream_chunks(*bodies: dict[str, Any]) -> list[tuple[str | None, str]]:
    """`alt=sse` events, one `GenerateContentResponse` chunk each."""
    return [(None, json.dumps(body)) for body in bodies]


def chunk(*parts: dict[str, Any], **options: Any) -> dict[str, Any]:
    """A streamed chunk: parts, and no finishReason unless one is given."""
    options.setdefault("finish", None)
    return candidate_response(*parts, **options)


def gemini_error(status: int, message: str = "try again later", **headers: str) -> Reply:
    """An HTTP error with Google's error body."""
    body = {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}
    return Reply(
        status=status, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )
