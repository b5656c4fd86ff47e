"""MCP content blocks to and from pygents_ctx's: a tool result, both ways.

The `mcp` SDK's content models are read by their `type` field (duck-typed),
so this module needs no import of the SDK when reading, and makes plain dicts
(which the SDK validates) when writing.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import IMAGE_MEDIA_TYPES, ImageBlock, Message, TextBlock

__all__ = ["MCPToolResult", "to_mcp_content"]


@dataclass(frozen=True)
class MCPToolResult:
    """What an MCP server answered to a tool call, as pygents_ctx content.

    Attributes:
        content: The result's blocks: text and images as `TextBlock` and
            `ImageBlock`; audio, resource links and embedded resources as a
            `TextBlock` describing them (a text resource: its text).
        structured: The result's `structuredContent` (a JSON object), or None.
        is_error: Whether the server reported the call as failed (`isError`).
    """

    content: list[TextBlock | ImageBlock] = field(default_factory=list)
    structured: dict[str, Any] | None = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (the structured content as JSON, with no text)."""
        texts = [block.text for block in self.content if isinstance(block, TextBlock)]
        if not texts and self.structured is not None:
            return orjson.dumps(self.structured).decode()
        return "\n".join(texts)

    def for_model(self) -> str | list[TextBlock | ImageBlock]:
        """What a model reads: the text alone when there is only text, else the blocks.

        Structured content the blocks do not carry (no text block at all) is
        added as its JSON text, so the model sees it.
        """
        blocks = list(self.content)
        if self.structured is not None and not any(isinstance(b, TextBlock) for b in blocks):
            blocks.insert(0, TextBlock(orjson.dumps(self.structured).decode()))
        if all(isinstance(block, TextBlock) for block in blocks):
            return self.text if blocks else ""
        return blocks

    @classmethod
    def of(cls, result: Any) -> MCPToolResult:
        """The SDK's `CallToolResult` as an `MCPToolResult`."""
        structured = getattr(result, "structured_content", None)
        return cls(
            [_block(item) for item in getattr(result, "content", None) or ()],
            dict(structured) if isinstance(structured, Mapping) else None,
            bool(getattr(result, "is_error", False)),
        )


def _block(item: Any) -> TextBlock | ImageBlock:
    kind = getattr(item, "type", None)
    if kind == "text":
        return TextBlock(str(item.text))
    if kind == "image":
        media_type = str(getattr(item, "mime_type", "") or "")
        try:
            data = base64.b64decode(item.data, validate=True)
        except (binascii.Error, TypeError, ValueError):
            return TextBlock(f"[an image ({media_type}) whose data is not base64]")
        if media_type in IMAGE_MEDIA_TYPES:
            return ImageBlock(media_type, data)
        return TextBlock(f"[an image of type {media_type or 'unknown'}, {len(data)} bytes]")
    if kind == "audio":
        return TextBlock(f"[audio of type {getattr(item, 'mime_type', 'unknown')}]")
    if kind == "resource_link":
        name = getattr(item, "name", None)
        return TextBlock(f"[resource {item.uri}{f' ({name})' if name else ''}]")
    if kind == "resource":
        resource = item.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return TextBlock(text)
        kind_of_resource = getattr(resource, "mime_type", None)
        return TextBlock(f"[resource {resource.uri} of type {kind_of_resource}]")
    return TextBlock(f"[content of type {kind!r}]")


def to_mcp_content(value: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """A pygents_ctx tool's return value as MCP content blocks, and its structured content.

    Text stays text; a `TextBlock` / `ImageBlock` (or a list of them, or a
    `Message`) becomes its MCP block; any other value is sent as its JSON
    text, and a JSON object (a dict) is also the structured content. A
    `ContextItem` is sent as its content.
    """
    if isinstance(value, ContextItem):
        value = value.content
    if isinstance(value, Message):
        value = list(value.content)
    if isinstance(value, str):
        return [_text(value)], None
    if isinstance(value, TextBlock | ImageBlock):
        return [_mcp_block(value)], None
    if isinstance(value, list) and value and all(_is_block(v) for v in value):
        return [_mcp_block(block) for block in value], None
    text = orjson.dumps(value, default=str).decode()
    structured = dict(value) if isinstance(value, Mapping) else None
    return [_text(text)], structured


def _is_block(value: object) -> bool:
    return isinstance(value, TextBlock | ImageBlock)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _mcp_block(block: TextBlock | ImageBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return _text(block.text)
    encoded = base64.b64encode(block.data).decode()
    return {"type": "image", "data": encoded, "mimeType": block.media_type}
