"""The OpenAI Chat Completions wire format: `to_openai` and `from_openai`.

OpenAI tool messages have no `is_error` (the text keeps the fact, prefixed
`"Error: "`), a tool result carries no image, and tool arguments travel as a
JSON string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, cast

import orjson

from pygents_ctx.context.messages import (
    ContentBlock,
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
    _get,
    _image,
    _is_blank,
    _json_text,
    _kind,
    _list,
    _mapping,
    _our_messages,
    _text_blocks_only,
    _text_part,
    _typed,
    _unsupported,
    _wire_messages,
)

__all__ = ["from_openai", "to_openai"]

# OpenAI tool messages have no `is_error`: the text keeps the fact for the model.
_ERROR_PREFIX: Final = "Error: "

_DATA_URL: Final = re.compile(r"data:(?P<media_type>[^;,]*);base64,(?P<data>.*)", re.DOTALL)
_OPENAI_ROLES: Final = "'system', 'developer', 'user', 'assistant' or 'tool'"


# ----------------------------------------------------------------------------- OpenAI: out


def to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Convert messages to OpenAI Chat Completions messages.

    A message of exactly one text block gets string `content`; any other gets a
    list of parts. An assistant message's text goes to `content` (`None` when it
    has none) and its tool calls to `tool_calls`, with `arguments` as compact
    JSON. A user message's tool results become `role: "tool"` messages, in
    order, followed by a user message with its other blocks, if it has any.

    Never sent: blank text blocks (empty or only whitespace), thinking
    blocks and `ReasoningBlock`s (the Chat Completions API takes no reasoning
    back), and a message
    left with nothing to send by that.

    What OpenAI cannot carry: `is_error` (the tool message's content becomes
    the string `"Error: "` + the result's text); images in tool results,
    assistant or system messages; tool calls outside assistant messages and
    tool results outside user messages (all `ValueError`). Text and tool calls
    of an assistant message come out text first.

    `from_openai(to_openai(messages)) == messages` when there are no error
    results, each assistant message has its text blocks before its tool calls,
    each user message with tool results holds only tool results and does not
    directly follow another such message, and tool inputs are plain JSON.

    Args:
        messages: The conversation, oldest first.

    Returns:
        The OpenAI messages, JSON-ready.

    Raises:
        ValueError: A block OpenAI cannot carry, or a tool input that is not
            JSON; the message names the block, e.g. `messages[2].content[1]`.

    Examples:
        >>> to_openai([Message("user", "Hi"), Message("assistant", "Hello!")])
        [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello!'}]
    """
    wire: list[dict[str, Any]] = []
    for index, message in enumerate(_our_messages(messages)):
        path = f"messages[{index}]"
        if message.role == "system":
            wire.append(_openai_system(message, path))
        elif message.role == "assistant":
            reply = _openai_assistant(message, path)
            if reply is not None:
                wire.append(reply)
        else:
            wire.extend(_openai_user(message, path))
    return wire


def _openai_content(blocks: Sequence[TextBlock | ImageBlock]) -> str | list[dict[str, Any]]:
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return [_openai_part(block) for block in blocks]


def _openai_part(block: TextBlock | ImageBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return _text_part(block.text)
    url = f"data:{block.media_type};base64,{_b64(block.data)}"
    return {"type": "image_url", "image_url": {"url": url}}


def _openai_system(message: Message, path: str) -> dict[str, Any]:
    texts = _text_blocks_only(message, path, "an OpenAI system message")
    return _named({"role": "system", "content": _openai_content(texts)}, message)


def _named(wire: dict[str, Any], message: Message) -> dict[str, Any]:
    if message.name is not None:  # OpenAI's participant name
        wire["name"] = message.name
    return wire


def _openai_assistant(message: Message, path: str) -> dict[str, Any] | None:
    texts: list[TextBlock] = []
    calls: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        where = f"{path}.content[{index}]"
        if _is_blank(block) or isinstance(
            block, ThinkingBlock | RedactedThinkingBlock | ReasoningBlock
        ):
            continue
        if isinstance(block, TextBlock):
            texts.append(block)
        elif isinstance(block, ToolUseBlock):
            arguments = _json_text(block.input, f"{where}.input")
            function = {"name": block.name, "arguments": arguments}
            calls.append({"id": block.id, "type": "function", "function": function})
        else:
            raise _cannot_carry(where, block, "an OpenAI assistant message")
    if not texts and not calls:
        return None
    # No text beside tool calls: no `content` key (the API needs none then; a null
    # costs the SDK's request transform a union match per message, every call).
    wire: dict[str, Any] = {"role": "assistant"}
    if len(texts) == 1:
        wire["content"] = texts[0].text
    elif texts:
        wire["content"] = [_text_part(block.text) for block in texts]
    if calls:
        wire["tool_calls"] = calls
    return _named(wire, message)


def _openai_user(message: Message, path: str) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    rest: list[TextBlock | ImageBlock] = []
    for index, block in enumerate(message.content):
        where = f"{path}.content[{index}]"
        if isinstance(block, ToolResultBlock):
            content = _openai_tool_content(block, where)
            wire.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        elif isinstance(
            block, ToolUseBlock | ThinkingBlock | RedactedThinkingBlock | ReasoningBlock
        ):
            raise _cannot_carry(where, block, "an OpenAI user message")
        elif not _is_blank(block):
            rest.append(block)
    if rest:
        wire.append(_named({"role": "user", "content": _openai_content(rest)}, message))
    return wire


def _openai_tool_content(result: ToolResultBlock, path: str) -> str | list[dict[str, Any]]:
    if not isinstance(result.content, str):
        for index, block in enumerate(result.content):
            if isinstance(block, ImageBlock):
                raise _cannot_carry(
                    f"{path}.content[{index}]",
                    block,
                    "an OpenAI tool message (text only)",
                    "send the image in a user message after the tool results, "
                    "or describe it in text",
                )
    if result.is_error:
        return _ERROR_PREFIX + result.text
    if isinstance(result.content, str):
        return result.content
    return [_text_part(block.text) for block in result.content if isinstance(block, TextBlock)]


# ----------------------------------------------------------------------------- OpenAI: in


def from_openai(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Convert OpenAI Chat Completions messages to `Message`s.

    Content may be a string, a list of parts or (on assistant messages) `None`.
    `developer` messages (what newer OpenAI models take instead of `system`)
    become system messages. Consecutive `role: "tool"` messages become one user
    message of `ToolResultBlock`s. A message's `name` is kept (`Message.name`);
    other keys a `Message` has no field for are ignored; an assistant's
    `refusal` text becomes a text block.

    `to_openai(from_openai(wire)) == wire` for wire messages in the form
    `to_openai` writes.

    Args:
        messages: The OpenAI messages, oldest first.

    Returns:
        The conversation as `Message`s.

    Raises:
        ValueError: A malformed message: a missing or mistyped field, an
            unknown role or part type, an image that is not a base64 `data:`
            URL, or tool-call `arguments` that are not a JSON object. The
            message names the field, e.g.
            `messages[3].tool_calls[0].function.arguments`.

    Examples:
        >>> from_openai([{"role": "developer", "content": "Be brief."}])
        [Message(role='system', content=(TextBlock(text='Be brief.'),))]
    """
    wire = _wire_messages(messages)
    converted: list[Message] = []
    results: list[ToolResultBlock] = []
    for index, message in enumerate(wire):
        path = f"messages[{index}]"
        role = _get(message, "role", path, str, f"one of {_OPENAI_ROLES}")
        if role == "tool":
            results.append(_read_openai_tool(message, path))
            continue
        if results:
            converted.append(Message("user", results))
            results = []
        name = message.get("name")
        if name is not None:
            name = _get(message, "name", path, str, "a string")
        if role in ("system", "developer"):
            converted.append(Message("system", _read_openai_texts(message, path), name=name))
        elif role == "user":
            converted.append(Message("user", _read_openai_user(message, path), name=name))
        elif role == "assistant":
            blocks = _read_openai_assistant(message, path)
            converted.append(Message("assistant", blocks, name=name))
        else:
            raise ValueError(f"{path}.role {role!r} is unknown; expected one of {_OPENAI_ROLES}")
    if results:
        converted.append(Message("user", results))
    return converted


def _read_openai_parts(
    message: Mapping[str, Any], path: str, allowed: tuple[str, ...]
) -> list[TextBlock | ImageBlock]:
    content = _get(message, "content", path, (str, list, tuple), "a string or a list of parts")
    if isinstance(content, str):
        return [TextBlock(content)]
    return [
        _read_openai_part(part, f"{path}.content[{index}]", allowed)
        for index, part in enumerate(content)
    ]


def _read_openai_part(part: object, path: str, allowed: tuple[str, ...]) -> TextBlock | ImageBlock:
    part, kind = _typed(part, path, allowed)
    if kind == "text":
        return TextBlock(_get(part, "text", path, str, "a string"))
    if kind == "refusal":
        return TextBlock(_get(part, "refusal", path, str, "a string"))
    return _read_openai_image(part, path)


def _read_openai_image(part: Mapping[str, Any], path: str) -> ImageBlock:
    image_url = _get(part, "image_url", path, (Mapping, str), "a dict with a 'url'")
    where = f"{path}.image_url"
    if isinstance(image_url, Mapping):
        url = _get(image_url, "url", where, str, "a data: URL")
        where = f"{where}.url"
    else:  # some clients send the URL itself
        url = image_url
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise ValueError(
            f"{where} must be a base64 data URL ('data:<media_type>;base64,<data>'), "
            f"not {url[:40]!r}; the converter does not download images, so fetch it "
            "and inline its bytes"
        )
    return _image(match["media_type"], match["data"], where, f"{where} media type")


def _read_openai_texts(message: Mapping[str, Any], path: str) -> list[TextBlock]:
    # Only "text" parts are allowed, so every block is a TextBlock.
    return cast("list[TextBlock]", _read_openai_parts(message, path, ("text",)))


def _read_openai_user(message: Mapping[str, Any], path: str) -> list[TextBlock | ImageBlock]:
    return _read_openai_parts(message, path, ("text", "image_url"))


def _read_openai_assistant(message: Mapping[str, Any], path: str) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    if message.get("content") is not None:
        blocks.extend(_read_openai_parts(message, path, ("text", "refusal")))
    refusal = message.get("refusal")
    if refusal is not None:
        blocks.append(TextBlock(_get(message, "refusal", path, str, "a string or None")))
    if message.get("function_call") is not None:
        raise ValueError(
            f"{path}.function_call is the deprecated single-call format; "
            "convert it to tool_calls first"
        )
    calls = message.get("tool_calls")
    if calls is not None:
        calls = _list(calls, f"{path}.tool_calls", "a list of tool calls")
        for index, call in enumerate(calls):
            blocks.append(_read_openai_call(call, f"{path}.tool_calls[{index}]"))
    return blocks


def _read_openai_call(call: object, path: str) -> ToolUseBlock:
    call = _mapping(call, path)
    kind = call.get("type", "function")
    if kind != "function":
        raise _unsupported(path, kind, ("function",))
    call_id = _get(call, "id", path, str, "a string")
    function = _get(call, "function", path, Mapping, "a dict with 'name' and 'arguments'")
    where = f"{path}.function"
    name = _get(function, "name", where, str, "a string")
    arguments = _get(function, "arguments", where, str, "a JSON object encoded as a string")
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError as exc:
        raise ValueError(
            f"{where}.arguments is not valid JSON ({exc}); expected a JSON object "
            "encoded as a string, such as '{}'"
        ) from None
    if not isinstance(parsed, dict):
        raise ValueError(
            f"{where}.arguments must encode a JSON object, not {_kind(parsed)}; "
            "wrap the value in an object, such as '{\"value\": ...}'"
        )
    return ToolUseBlock(call_id, name, parsed)


def _read_openai_tool(message: Mapping[str, Any], path: str) -> ToolResultBlock:
    call_id = _get(message, "tool_call_id", path, str, "the id of the tool call it answers")
    content = _get(message, "content", path, (str, list, tuple), "a string or a list of parts")
    if isinstance(content, str):
        return ToolResultBlock(call_id, content)
    texts = [
        _read_openai_part(part, f"{path}.content[{index}]", ("text",))
        for index, part in enumerate(content)
    ]
    return ToolResultBlock(call_id, texts)
