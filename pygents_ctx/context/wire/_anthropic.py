"""The Anthropic Messages wire format: `to_anthropic` and `from_anthropic`.

The system prompt is a separate parameter (so system messages may only lead
the conversation), and tool inputs travel as JSON objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, cast

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
    _json_copy,
    _kind,
    _list,
    _mapping,
    _our_messages,
    _text_blocks_only,
    _text_part,
    _typed,
    _wire_messages,
)

__all__ = ["from_anthropic", "to_anthropic"]


# ----------------------------------------------------------------------------- Anthropic: out


def to_anthropic(
    messages: Iterable[Message],
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Convert messages to the Anthropic Messages API's `(system, messages)`.

    Leading system messages become the `system` parameter: `None` when there
    are none, a string when they hold one text block, otherwise a list of text
    blocks. A message of exactly one text block gets string `content`;
    any other gets a list of blocks. `is_error` appears only on error results.

    Thinking goes back as the API requires: a signed `ThinkingBlock` as a
    `thinking` block with its signature and a `RedactedThinkingBlock` as a
    `redacted_thinking` block, unchanged and in their place. Never sent: an
    unsigned `ThinkingBlock` (reasoning text from another provider, which the
    API would refuse), a `ReasoningBlock` (OpenAI's encrypted reasoning),
    blank text blocks (empty or only whitespace, which the API refuses), and
    a message left with nothing to send by that.

    Anthropic carries every other block kind, so the limits are on system
    messages (one after a user or assistant message, or one holding anything
    but text, is a `ValueError`) and on thinking (only in assistant
    messages). Several leading system messages merge into one prompt.
    `from_anthropic(messages, system)` of the result gives the messages back
    exactly when there is at most one system message, tool inputs are plain
    JSON and nothing was left out as above.

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
    if len(texts) == 1 and texts[0].cache_control is None:
        system = texts[0].text
    elif lead:
        system = [_anthropic_block(block, "system") for block in texts]
    wire = []
    for index, message in enumerate(items[lead:], start=lead):
        content = _anthropic_content(message, f"messages[{index}]")
        if content:
            wire.append({"role": message.role, "content": content})
    return system, wire


def _anthropic_content(message: Message, path: str) -> str | list[dict[str, Any]]:
    sent: list[tuple[int, ContentBlock]] = []
    for index, block in enumerate(message.content):
        thinking = isinstance(block, ThinkingBlock | RedactedThinkingBlock | ReasoningBlock)
        if thinking and message.role != "assistant":
            raise _cannot_carry(f"{path}.content[{index}]", block, f"a {message.role} message")
        # Unsigned thinking and OpenAI's reasoning items: Anthropic can read neither.
        if (
            _is_blank(block)
            or isinstance(block, ReasoningBlock)
            or (isinstance(block, ThinkingBlock) and block.signature is None)
        ):
            continue
        sent.append((index, block))
    if len(sent) == 1 and isinstance(sent[0][1], TextBlock) and sent[0][1].cache_control is None:
        return sent[0][1].text
    return [_anthropic_block(block, f"{path}.content[{index}]") for index, block in sent]


def _anthropic_block(block: ContentBlock, path: str) -> dict[str, Any]:
    wire = _anthropic_block_fields(block, path)
    cache_control = getattr(block, "cache_control", None)
    if cache_control is not None:
        wire["cache_control"] = _json_copy(cache_control, f"{path}.cache_control")
    return wire


def _anthropic_block_fields(block: ContentBlock, path: str) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return _text_part(block.text)
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    if isinstance(block, ImageBlock):
        source = {"type": "base64", "media_type": block.media_type, "data": _b64(block.data)}
        return {"type": "image", "source": source}
    if isinstance(block, ToolUseBlock):
        tool_input = _json_copy(block.input, f"{path}.input")
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": tool_input}
    if isinstance(block, ReasoningBlock):  # left out by the caller: Anthropic cannot read it
        raise _cannot_carry(path, block, "the Anthropic API", "it is OpenAI's; leave it out")
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
    one text block. A block's `cache_control` is kept on the block; other keys
    a `Message` has no field for (`citations`, ...) are ignored.

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
            base64, or a block type a `Message` cannot hold (`document`,
            ...). The message names the field and index, e.g.
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


_BLOCK_KINDS: Final = ("text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking")
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
    read = _read_anthropic_block_fields(block, path, allowed)
    fields = _mapping(block, path)
    if fields.get("cache_control") is None or isinstance(
        read, ThinkingBlock | RedactedThinkingBlock | ReasoningBlock
    ):
        return read
    cache_control = _get(fields, "cache_control", path, Mapping, "a dict")
    return replace(read, cache_control=dict(_json_copy(cache_control, f"{path}.cache_control")))


def _read_anthropic_block_fields(
    block: object, path: str, allowed: tuple[str, ...]
) -> ContentBlock:
    block, kind = _typed(block, path, allowed)
    if kind == "text":
        return TextBlock(_get(block, "text", path, str, "a string"))
    if kind == "image":
        return _read_anthropic_image(block, path)
    if kind == "thinking":
        signature = block.get("signature")
        if signature is not None and not isinstance(signature, str):
            raise ValueError(f"{path}.signature must be a string, not {_kind(signature)}")
        return ThinkingBlock(_get(block, "thinking", path, str, "a string"), signature)
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(_get(block, "data", path, str, "a string"))
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
