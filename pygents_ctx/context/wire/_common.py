"""What the OpenAI and Anthropic converters share: checked reads of wire data, errors, images."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from pygents_ctx._checks import instances
from pygents_ctx._json import dumps
from pygents_ctx.context.messages import (
    IMAGE_MEDIA_TYPES,
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
)

__all__ = [
    "_MISSING",
    "_b64",
    "_cannot_carry",
    "_choices",
    "_get",
    "_image",
    "_is_blank",
    "_json_copy",
    "_json_text",
    "_kind",
    "_list",
    "_mapping",
    "_our_messages",
    "_text_blocks_only",
    "_text_part",
    "_typed",
    "_unsupported",
    "_wire_messages",
]

_MISSING: Final = object()


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
    try:
        return instances(messages, Message, "messages")
    except TypeError as error:  # the converters' one error for what they cannot read
        raise ValueError(str(error)) from None


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
    "thinking": "a thinking block",
    "redacted_thinking": "a redacted thinking block",
    "reasoning": "a reasoning item (ReasoningBlock)",
}
_WHERE_IT_GOES: Final = {
    "image": "put images in a user message",
    "tool_use": "put tool calls in an assistant message",
    "tool_result": "put tool results in a user message",
    "thinking": "thinking belongs in an assistant message",
    "redacted_thinking": "thinking belongs in an assistant message",
    "reasoning": "reasoning belongs in an assistant message",
}


def _is_blank(block: ContentBlock) -> bool:
    """Text with nothing to read: the APIs refuse such a block, so it is never sent."""
    return isinstance(block, TextBlock) and not block.text.strip()


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


def _typed(value: object, path: str, allowed: tuple[str, ...]) -> tuple[Mapping[str, Any], str]:
    """A wire block or part as a mapping, and its `type`, which must be one of `allowed`."""
    part = _mapping(value, path)
    kind = _get(part, "type", path, str, _choices(allowed))
    if kind not in allowed:
        raise _unsupported(path, kind, allowed)
    return part, kind


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
