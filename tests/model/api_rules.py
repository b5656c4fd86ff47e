"""What the real APIs refuse, as rules: one validator per provider, for the strict `FakeAPI`.

`openai_problems(body)` and `anthropic_problems(body)` list why the Chat
Completions and Messages APIs would answer a request body with HTTP 400 (an
empty list: they would take it), in the APIs' own words where they have them.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["anthropic_problems", "openai_problems"]

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
