"""`Message`s to the Gemini API's `contents` and `systemInstruction` (its REST JSON shape)."""

from __future__ import annotations

from typing import Any, Final

from pygents_ctx.context.messages import (
    ImageBlock,
    Message,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.context.wire._common import (
    _b64,
    _cannot_carry,
    _is_blank,
    _our_messages,
    _text_blocks_only,
)

__all__ = ["GEMINI_MADE_ID", "to_gemini"]

GEMINI_MADE_ID: Final = "gemini-call-"
"""How the ids we give Gemini's function calls start (the API sent none); never sent back."""


def to_gemini(messages: list[Message]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The Gemini API's `systemInstruction` (None: none) and `contents` for `messages`.

    The leading system messages become `systemInstruction`; `user` messages
    become `user` contents and `assistant` messages `model` contents (each
    run of messages of one role becomes one content, as the API expects
    turns to alternate). Text goes as `text` parts, images as `inlineData`,
    tool calls as `functionCall` parts and tool results as `functionResponse`
    parts named by their call's tool (`{"result": text}`, or `{"error": text}`
    for a failed call). A call's id is sent when Gemini gave it (ids the
    adapter made, starting `GEMINI_MADE_ID`, are not). Gemini's thought
    signatures (`TextBlock.signature`, `ToolUseBlock.signature`, a signed
    `ThinkingBlock`) go back on their parts, in place; unsigned thinking,
    redacted thinking and `ReasoningBlock`s (other providers') and blank text
    are left out, and
    so is a message left with no parts (a reply blocked before it began).

    Raises:
        ValueError: A system message after the conversation started, a tool
            result that answers no earlier call, an image in a tool result,
            or a block in a role that cannot carry it; the message names the
            field and the fix.
    """
    items = _our_messages(messages)
    lead = 0
    system_parts: list[dict[str, Any]] = []
    while lead < len(items) and items[lead].role == "system":
        for block in _text_blocks_only(items[lead], f"messages[{lead}]", "a system instruction"):
            if not _is_blank(block):
                system_parts.append({"text": block.text})
        lead += 1
    names: dict[str, str] = {}  # call id -> tool name, for the results
    contents: list[dict[str, Any]] = []
    for index in range(lead, len(items)):
        message = items[index]
        path = f"messages[{index}]"
        if message.role == "system":
            raise ValueError(
                f"{path} is a system message after the conversation started; Gemini takes "
                "system text only as systemInstruction: put system messages first"
            )
        parts = (
            _model_parts(message, path, names)
            if message.role == "assistant"
            else _user_parts(message, path, names)
        )
        if not parts:
            continue
        role = "model" if message.role == "assistant" else "user"
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    system = {"parts": system_parts} if system_parts else None
    return system, contents


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def _model_parts(message: Message, path: str, names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for number, block in enumerate(message.content):
        if isinstance(block, TextBlock):
            if not _is_blank(block) or block.signature is not None:
                parts.append(_signed({"text": block.text}, block.signature))
        elif isinstance(block, ToolUseBlock):
            names[block.id] = block.name
            call: dict[str, Any] = {"name": block.name, "args": dict(block.input)}
            if not block.id.startswith(GEMINI_MADE_ID):
                call["id"] = block.id
            parts.append(_signed({"functionCall": call}, block.signature))
        elif isinstance(block, ThinkingBlock):
            if block.signature is not None:
                parts.append(
                    {"text": block.thinking, "thought": True, "thoughtSignature": block.signature}
                )
        elif isinstance(block, ImageBlock):
            parts.append(_image(block))
        elif not isinstance(block, RedactedThinkingBlock | ReasoningBlock):
            raise _cannot_carry(f"{path}.content[{number}]", block, "a Gemini model turn")
    return parts


def _user_parts(message: Message, path: str, names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for number, block in enumerate(message.content):
        where = f"{path}.content[{number}]"
        if isinstance(block, TextBlock):
            if not _is_blank(block):
                parts.append({"text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(_image(block))
        elif isinstance(block, ToolResultBlock):
            parts.append(_function_response(block, where, names))
        else:
            raise _cannot_carry(where, block, "a Gemini user turn")
    return parts


def _function_response(block: ToolResultBlock, where: str, names: dict[str, str]) -> dict[str, Any]:
    name = names.get(block.tool_use_id)
    if name is None:
        raise ValueError(
            f"{where}.tool_use_id {block.tool_use_id!r} answers no earlier tool call; Gemini "
            "names a result by its call's tool: keep the assistant message with the call"
        )
    if not isinstance(block.content, str) and any(
        isinstance(item, ImageBlock) for item in block.content
    ):
        raise ValueError(
            f"{where}.content holds an image, which a Gemini functionResponse cannot carry; "
            "return text from the tool, or put the image in a user message"
        )
    response: dict[str, Any] = {
        "name": name,
        "response": {"error" if block.is_error else "result": block.text},
    }
    if not block.tool_use_id.startswith(GEMINI_MADE_ID):
        response["id"] = block.tool_use_id
    return {"functionResponse": response}


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"inlineData": {"mimeType": block.media_type, "data": _b64(block.data)}}
