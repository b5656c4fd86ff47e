"""Converters between `Message` lists and the OpenAI and Anthropic wire formats.

Both directions for each format: `to_openai` / `from_openai` for the OpenAI
Chat Completions messages, `to_anthropic` / `from_anthropic` for the Anthropic
Messages API (whose system prompt is a separate parameter). Image bytes travel
as base64 text; tool inputs travel as JSON (a string in OpenAI's `arguments`).

What a format has no place for follows one rule: a flag it lacks degrades into
text (an OpenAI tool message has no `is_error`, so the result's text is
prefixed with `"Error: "`), and content it has no place for is a `ValueError`
naming where it is (an image in an OpenAI tool result, a system message in the
middle of an Anthropic conversation). Nothing is dropped silently, except the
extra keys of a wire message or block that a `Message` has no field for
(`name`, `cache_control`, `detail`, ...). The guide page "Wire formats" has
the full table.

Every malformed input is a `ValueError` whose message names the offending
field, such as `messages[3].tool_calls[0].function.arguments`. The converters
never change their input and never share mutable data with it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, cast

import orjson

from pygents_ctx._json import dumps
from pygents_ctx.context.messages import (
    IMAGE_MEDIA_TYPES,
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = ["from_anthropic", "from_openai", "to_anthropic", "to_openai"]

# OpenAI tool messages have no `is_error`: the text keeps the fact for the model.
_ERROR_PREFIX: Final = "Error: "

_MISSING: Final = object()
_DATA_URL: Final = re.compile(r"data:(?P<media_type>[^;,]*);base64,(?P<data>.*)", re.DOTALL)
_OPENAI_ROLES: Final = "'system', 'developer', 'user', 'assistant' or 'tool'"


# ----------------------------------------------------------------------------- shared helpers


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _get(
    data: Mapping[str, Any], key: str, path: str, kind: type | tuple[type, ...], what: str
) -> Any:
    """`data[key]`, checked against `kind`; `what` describes the expected value."""
    value = data.get(key, _MISSING)
    if value is _MISSING:
        raise ValueError(f"{path}.{key} is missing; expected {what}")
    if not isinstance(value, kind):
        raise ValueError(f"{path}.{key} must be {what}, not {_kind(value)}")
    return value


def _mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{path} must be a dict, not {_kind(value)}")
    return value


def _list(value: object, path: str, what: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"{path} must be {what}, not {_kind(value)}")
    return value


def _our_messages(messages: object) -> list[Message]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise ValueError(f"messages must be a list of Message objects, not {_kind(messages)}")
    items = list(messages)
    for index, message in enumerate(items):
        if not isinstance(message, Message):
            raise ValueError(f"messages[{index}] must be a Message, not {_kind(message)}")
    return items


def _wire_messages(messages: object) -> list[Mapping[str, Any]]:
    items = _list(messages, "messages", "a list of message dicts")
    return [_mapping(message, f"messages[{index}]") for index, message in enumerate(items)]


def _json_text(value: dict[str, Any], path: str) -> str:
    try:
        return dumps(value, path).decode("utf-8")
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def _json_copy(value: Mapping[str, Any], path: str) -> dict[str, Any]:
    # A JSON round trip (in C) both checks that the value is JSON and deep-copies
    # it, so the output never shares a dict with the input.
    copied: dict[str, Any] = orjson.loads(_json_text(dict(value), path))
    return copied


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _image(media_type: str, encoded: str, path: str, type_path: str) -> ImageBlock:
    if media_type not in IMAGE_MEDIA_TYPES:
        raise ValueError(
            f"{type_path} {media_type!r} is not a supported image type; "
            f"use one of {', '.join(sorted(IMAGE_MEDIA_TYPES))}"
        )
    try:
        raw = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise ValueError(f"{path} is not valid base64") from None
    return ImageBlock(media_type, raw)


_BLOCK_NAMES: Final = {
    "text": "a text block",
    "image": "an image block",
    "tool_use": "a tool call (tool_use block)",
    "tool_result": "a tool result (tool_result block)",
}
_WHERE_IT_GOES: Final = {
    "image": "put images in a user message",
    "tool_use": "put tool calls in an assistant message",
    "tool_result": "put tool results in a user message",
}


def _cannot_carry(path: str, block: ContentBlock, where: str, fix: str = "") -> ValueError:
    fix = fix or _WHERE_IT_GOES[block.type]
    return ValueError(f"{path} is {_BLOCK_NAMES[block.type]}, which {where} cannot carry; {fix}")


def _text_blocks_only(message: Message, path: str, where: str) -> list[TextBlock]:
    for index, block in enumerate(message.content):
        if not isinstance(block, TextBlock):
            raise _cannot_carry(f"{path}.content[{index}]", block, where)
    return [block for block in message.content if isinstance(block, TextBlock)]


def _choices(allowed: tuple[str, ...]) -> str:
    if len(allowed) == 1:
        return repr(allowed[0])
    return f"one of {', '.join(map(repr, allowed))}"


def _unsupported(path: str, kind: object, allowed: tuple[str, ...]) -> ValueError:
    return ValueError(
        f"{path}.type {kind!r} is not supported here (a Message has no counterpart); "
        f"expected {_choices(allowed)}. Filter such entries out, or turn them into text, "
        "before converting"
    )


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


# ----------------------------------------------------------------------------- OpenAI: out


def to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Convert messages to OpenAI Chat Completions messages.

    A message of exactly one text block gets string `content`; any other gets a
    list of parts. An assistant message's text goes to `content` (`None` when it
    has none) and its tool calls to `tool_calls`, with `arguments` as compact
    JSON. A user message's tool results become `role: "tool"` messages, in
    order, followed by a user message with its other blocks, if it has any.

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
            wire.append(_openai_assistant(message, path))
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
    return {"role": "system", "content": _openai_content(texts)}


def _openai_assistant(message: Message, path: str) -> dict[str, Any]:
    texts: list[TextBlock] = []
    calls: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        where = f"{path}.content[{index}]"
        if isinstance(block, TextBlock):
            texts.append(block)
        elif isinstance(block, ToolUseBlock):
            arguments = _json_text(block.input, f"{where}.input")
            function = {"name": block.name, "arguments": arguments}
            calls.append({"id": block.id, "type": "function", "function": function})
        else:
            raise _cannot_carry(where, block, "an OpenAI assistant message")
    content: str | list[dict[str, Any]] | None = None
    if len(texts) == 1:
        content = texts[0].text
    elif texts:
        content = [_text_part(block.text) for block in texts]
    wire: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        wire["tool_calls"] = calls
    return wire


def _openai_user(message: Message, path: str) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    rest: list[TextBlock | ImageBlock] = []
    for index, block in enumerate(message.content):
        where = f"{path}.content[{index}]"
        if isinstance(block, ToolResultBlock):
            content = _openai_tool_content(block, where)
            wire.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        elif isinstance(block, ToolUseBlock):
            raise _cannot_carry(where, block, "an OpenAI user message")
        else:
            rest.append(block)
    if rest or not wire:
        wire.append({"role": "user", "content": _openai_content(rest)})
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
    message of `ToolResultBlock`s. `name` and other keys a `Message` has no
    field for are ignored; an assistant's `refusal` text becomes a text block.

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
        if role in ("system", "developer"):
            converted.append(Message("system", _read_openai_texts(message, path)))
        elif role == "user":
            converted.append(Message("user", _read_openai_user(message, path)))
        elif role == "assistant":
            converted.append(Message("assistant", _read_openai_assistant(message, path)))
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
    part = _mapping(part, path)
    kind = _get(part, "type", path, str, _choices(allowed))
    if kind not in allowed:
        raise _unsupported(path, kind, allowed)
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


# ----------------------------------------------------------------------------- Anthropic: out


def to_anthropic(
    messages: Iterable[Message],
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Convert messages to the Anthropic Messages API's `(system, messages)`.

    Leading system messages become the `system` parameter: `None` when there
    are none, a string when they hold one text block, otherwise a list of text
    blocks. A message of exactly one text block gets string `content`;
    any other gets a list of blocks. `is_error` appears only on error results.

    Anthropic carries every block kind, so the only limits are on system
    messages: one after a user or assistant message, or one holding anything
    but text, is a `ValueError`. Several leading system messages merge into one
    prompt. `from_anthropic(messages, system)` of the result gives the messages
    back exactly when there is at most one system message and tool inputs are
    plain JSON.

    Args:
        messages: The conversation, oldest first.

    Returns:
        `(system, messages)`, JSON-ready, for the API's `system` and `messages`.

    Raises:
        ValueError: A system message after the first user or assistant message,
            a non-text block in a system message, or a tool input that is not
            JSON; the message names it, e.g. `messages[4]`.

    Examples:
        >>> to_anthropic([Message("system", "Be brief."), Message("user", "Hi")])
        ('Be brief.', [{'role': 'user', 'content': 'Hi'}])
    """
    items = _our_messages(messages)
    lead = 0
    while lead < len(items) and items[lead].role == "system":
        lead += 1
    for index in range(lead, len(items)):
        if items[index].role == "system":
            raise ValueError(
                f"messages[{index}] is a system message after the conversation started; "
                "the Anthropic format has one system prompt, before all messages: move it "
                "to the start or make it a user message"
            )
    texts: list[TextBlock] = []
    for index in range(lead):
        where = "the Anthropic system prompt (text only)"
        texts += _text_blocks_only(items[index], f"messages[{index}]", where)
    system: str | list[dict[str, Any]] | None = None
    if len(texts) == 1:
        system = texts[0].text
    elif lead:
        system = [_text_part(block.text) for block in texts]
    wire = [
        {"role": message.role, "content": _anthropic_content(message, f"messages[{index}]")}
        for index, message in enumerate(items[lead:], start=lead)
    ]
    return system, wire


def _anthropic_content(message: Message, path: str) -> str | list[dict[str, Any]]:
    blocks = message.content
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return [
        _anthropic_block(block, f"{path}.content[{index}]") for index, block in enumerate(blocks)
    ]


def _anthropic_block(block: ContentBlock, path: str) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return _text_part(block.text)
    if isinstance(block, ImageBlock):
        source = {"type": "base64", "media_type": block.media_type, "data": _b64(block.data)}
        return {"type": "image", "source": source}
    if isinstance(block, ToolUseBlock):
        tool_input = _json_copy(block.input, f"{path}.input")
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": tool_input}
    content = block.content
    wire: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": content
        if isinstance(content, str)
        else [
            _anthropic_block(item, f"{path}.content[{index}]") for index, item in enumerate(content)
        ],
    }
    if block.is_error:
        wire["is_error"] = True
    return wire


# ----------------------------------------------------------------------------- Anthropic: in


def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Message]:
    """Convert Anthropic Messages API messages (and system prompt) to `Message`s.

    A `system` prompt becomes one leading system message (a string gives one
    text block, a list of text blocks gives those blocks). String `content` is
    one text block. Keys a `Message` has no field for, such as
    `cache_control`, are ignored.

    `to_anthropic(from_anthropic(messages, system)) == (system, messages)` for
    input in the form `to_anthropic` writes.

    Args:
        messages: The API's `messages`: `user` and `assistant` turns.
        system: The API's `system` parameter, if any.

    Returns:
        The conversation as `Message`s, the system prompt first.

    Raises:
        ValueError: A malformed message: a missing or mistyped field, a
            `system` role inside `messages`, an image source that is not
            base64, or a block type a `Message` cannot hold (`thinking`,
            `document`, ...). The message names the field and index, e.g.
            `messages[1].content[0].type`.

    Examples:
        >>> from_anthropic([{"role": "user", "content": "Hi"}], system="Be brief.")
        [Message(role='system', content=(TextBlock(text='Be brief.'),)), \
Message(role='user', content=(TextBlock(text='Hi'),))]
    """
    wire = _wire_messages(messages)
    converted: list[Message] = []
    if system is not None:
        converted.append(Message("system", _read_anthropic_system(system)))
    for index, message in enumerate(wire):
        path = f"messages[{index}]"
        role = _get(message, "role", path, str, "'user' or 'assistant'")
        if role not in ("user", "assistant"):
            hint = "; pass the system prompt as the `system` argument" if role == "system" else ""
            raise ValueError(f"{path}.role {role!r} must be 'user' or 'assistant'{hint}")
        content = _get(message, "content", path, (str, list, tuple), "a string or a list of blocks")
        if isinstance(content, str):
            converted.append(Message(role, content))
            continue
        blocks = [
            _read_anthropic_block(block, f"{path}.content[{number}]", _BLOCK_KINDS)
            for number, block in enumerate(content)
        ]
        converted.append(Message(role, blocks))
    return converted


_BLOCK_KINDS: Final = ("text", "image", "tool_use", "tool_result")
_RESULT_KINDS: Final = ("text", "image")


def _read_anthropic_system(system: object) -> list[TextBlock]:
    if isinstance(system, str):
        return [TextBlock(system)]
    blocks = _list(system, "system", "a string or a list of text blocks")
    # Only "text" blocks are allowed, so every block is a TextBlock.
    return [
        cast("TextBlock", _read_anthropic_block(block, f"system[{index}]", ("text",)))
        for index, block in enumerate(blocks)
    ]


def _read_anthropic_block(block: object, path: str, allowed: tuple[str, ...]) -> ContentBlock:
    block = _mapping(block, path)
    kind = _get(block, "type", path, str, _choices(allowed))
    if kind not in allowed:
        raise _unsupported(path, kind, allowed)
    if kind == "text":
        return TextBlock(_get(block, "text", path, str, "a string"))
    if kind == "image":
        return _read_anthropic_image(block, path)
    if kind == "tool_use":
        tool_input = _get(block, "input", path, Mapping, "a dict")
        return ToolUseBlock(
            _get(block, "id", path, str, "a string"),
            _get(block, "name", path, str, "a string"),
            _json_copy(tool_input, f"{path}.input"),
        )
    return _read_anthropic_result(block, path)


def _read_anthropic_image(block: Mapping[str, Any], path: str) -> ImageBlock:
    source = _get(block, "source", path, Mapping, "a dict")
    where = f"{path}.source"
    kind = _get(source, "type", where, str, "'base64'")
    if kind != "base64":
        raise ValueError(
            f"{where}.type {kind!r} is not supported; expected 'base64' (the converter does "
            "not download images or resolve files, so fetch it and inline its bytes)"
        )
    media_type = _get(source, "media_type", where, str, "an image media type")
    data = _get(source, "data", where, str, "base64 text")
    return _image(media_type, data, f"{where}.data", f"{where}.media_type")


def _read_anthropic_result(block: Mapping[str, Any], path: str) -> ToolResultBlock:
    tool_use_id = _get(block, "tool_use_id", path, str, "a string")
    # The API lets an empty result leave `content` out.
    content = block.get("content", "")
    if not isinstance(content, str):
        items = _list(content, f"{path}.content", "a string or a list of text and image blocks")
        content = [
            _read_anthropic_block(item, f"{path}.content[{index}]", _RESULT_KINDS)
            for index, item in enumerate(items)
        ]
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise ValueError(f"{path}.is_error must be a bool, not {_kind(is_error)}")
    return ToolResultBlock(tool_use_id, content, is_error)
