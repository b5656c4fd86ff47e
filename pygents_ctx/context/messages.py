"""Typed conversation messages: content blocks, `Message`, and their dict form.

Blocks and messages are frozen value types. A `Message` holds its blocks in a
tuple, so nothing a caller does to a list it passed in reaches the message
(treat `ToolUseBlock.input` as read-only too: it is the one mutable field).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, TypeAlias, get_args

from pygents_ctx._checks import whole_number
from pygents_ctx._json import refuses_deep_nesting
from pygents_ctx._suggest import closest

__all__ = [
    "ContentBlock",
    "ImageBlock",
    "Message",
    "OffloadedResult",
    "ReasoningBlock",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "from_dict",
    "to_dict",
]

Role: TypeAlias = Literal["user", "assistant", "system"]
ROLES: Final = frozenset(get_args(Role))
IMAGE_MEDIA_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _checked_cache_control(owner: str, value: object) -> None:
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"{owner}.cache_control must be a dict or None, not {type(value).__name__}")


def _block_repr(block: Any) -> str:
    shown = [f"{name}={getattr(block, name)!r}" for name in _REPR_FIELDS[type(block)]]
    if block.cache_control is not None:
        shown.append(f"cache_control={block.cache_control!r}")
    offloaded = getattr(block, "offloaded", None)
    if offloaded is not None:
        shown.append(f"offloaded={offloaded!r}")
    return f"{type(block).__name__}({', '.join(shown)})"


def _require(owner: str, name: str, value: object, kind: type | tuple[type, ...]) -> None:
    if not isinstance(value, kind):
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise TypeError(f"{owner}.{name} must be {expected}, not {type(value).__name__}")


_SEQUENCES: Final = (list, tuple)


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Plain text.

    Attributes:
        text: The text.
        cache_control: Anthropic's prompt-caching mark, e.g. `{"type": "ephemeral"}`
            (None: none); kept, saved and sent back to Anthropic.
        signature: Gemini's thought signature for this text (None: none), the
            model's reasoning in an opaque form; kept, saved and sent back to
            Gemini in its place. Other providers never see it.

    Examples:
        >>> TextBlock("hello").text
        'hello'
    """

    text: str
    # Anthropic's prompt-caching mark (`{"type": "ephemeral"}`): kept, stored, exported
    # and sent back. Left out of the hash: it is a dict.
    cache_control: dict[str, Any] | None = field(default=None, kw_only=True, repr=False, hash=False)
    signature: str | None = field(default=None, kw_only=True, repr=False)
    type: ClassVar[str] = "text"

    def __post_init__(self) -> None:
        if type(self.text) is not str:
            _require("TextBlock", "text", self.text, str)
        if self.cache_control is not None:
            _checked_cache_control("TextBlock", self.cache_control)
        if self.signature is not None:
            _require("TextBlock", "signature", self.signature, str)

    __repr__ = _block_repr


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image: its media type (`image/jpeg`, `image/png`, `image/gif` or `image/webp`) and bytes.

    Raises:
        ValueError: `media_type` is not one of the four supported types.
    """

    media_type: str
    data: bytes
    # Anthropic's prompt-caching mark (`{"type": "ephemeral"}`): kept, stored, exported
    # and sent back. Left out of the hash: it is a dict.
    cache_control: dict[str, Any] | None = field(default=None, kw_only=True, repr=False, hash=False)
    type: ClassVar[str] = "image"

    def __post_init__(self) -> None:
        _require("ImageBlock", "media_type", self.media_type, str)
        _require("ImageBlock", "data", self.data, bytes)
        _checked_cache_control("ImageBlock", self.cache_control)
        if self.media_type not in IMAGE_MEDIA_TYPES:
            raise ValueError(
                f"ImageBlock.media_type {self.media_type!r} is not supported; "
                f"use one of {', '.join(sorted(IMAGE_MEDIA_TYPES))}"
            )

    def __repr__(self) -> str:  # the bytes can be megabytes
        cache = "" if self.cache_control is None else f", cache_control={self.cache_control!r}"
        return f"ImageBlock(media_type={self.media_type!r}, data=<{len(self.data)} bytes>{cache})"


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool call the model made: the call's `id`, the tool's `name` and its `input`.

    `signature` is Gemini's thought signature for the call (None: none): kept,
    saved and sent back to Gemini on the call's part; other providers never see it.
    """

    id: str
    name: str
    input: dict[str, Any]
    # Anthropic's prompt-caching mark (`{"type": "ephemeral"}`): kept, stored, exported
    # and sent back. Left out of the hash: it is a dict.
    cache_control: dict[str, Any] | None = field(default=None, kw_only=True, repr=False, hash=False)
    signature: str | None = field(default=None, kw_only=True, repr=False)
    type: ClassVar[str] = "tool_use"

    def __post_init__(self) -> None:
        _require("ToolUseBlock", "id", self.id, str)
        _require("ToolUseBlock", "name", self.name, str)
        _require("ToolUseBlock", "input", self.input, dict)
        _checked_cache_control("ToolUseBlock", self.cache_control)
        if self.signature is not None:
            _require("ToolUseBlock", "signature", self.signature, str)

    __repr__ = _block_repr


READ_TOOL_RESULT: Final = "read_tool_result"


@dataclass(frozen=True, slots=True)
class OffloadedResult:
    """What stands in the history for a tool result too large for it: the stub's facts.

    The whole text is in a blob store under `handle`; the history keeps its
    size, its first `head` and last `tail` characters, and the result's
    content is the stub text (`stub_text()`) the model reads, which says how
    to read the rest with the `read_tool_result` tool. Made by
    `pygents_ctx.model.ToolResultOffload`.

    Attributes:
        handle: The blob's name in the blob store (`"tool-results/<sha256>"`).
        chars: The length of the whole text, in characters.
        tokens: Its token count, by the counter that judged it too large.
        head: Its first characters, as shown.
        tail: Its last characters, as shown (after the head: they never overlap).
        media_type: What the text is: `"application/json"` or `"text/plain"`.
        words: The distinct words of the whole text, space-separated, that
            `ContextStore.search` looks in (so a search finds what only the
            blob holds); `ToolResultOffload` keeps the first
            `INDEXED_CHARACTERS` (100,000) characters of them. Empty: the
            search sees the stub text only (a stub made by hand, or stored
            before the offload kept them).

    Raises:
        TypeError: A field has the wrong type.
        ValueError: `handle` is empty, a count is negative, or `head` and
            `tail` together are longer than `chars`.

    Examples:
        >>> stub = OffloadedResult("tool-results/ab", chars=9000, tokens=2250, head="ab", tail="z")
        >>> print(stub.stub_text())
        ab
        [… 8,997 of 9,000 chars (~2,250 tokens) offloaded, read with read_tool_result(...) …]
        z
    """

    handle: str
    chars: int
    tokens: int
    head: str
    tail: str
    media_type: str = "text/plain"
    words: str = field(default="", kw_only=True, repr=False)

    def __post_init__(self) -> None:
        for name in ("handle", "head", "tail", "media_type", "words"):
            _require("OffloadedResult", name, getattr(self, name), str)
        for name in ("chars", "tokens"):
            whole_number(getattr(self, name), f"OffloadedResult.{name}")
        if not self.handle:
            raise ValueError("OffloadedResult.handle must not be empty")
        if len(self.head) + len(self.tail) > self.chars:
            raise ValueError(
                f"OffloadedResult head and tail hold {len(self.head) + len(self.tail)} chars, "
                f"more than the whole text's {self.chars}: they must be parts of it"
            )

    @property
    def hidden_chars(self) -> int:
        """How many characters are between the head and the tail: in the blob only."""
        return self.chars - len(self.head) - len(self.tail)

    def stub_text(self) -> str:
        """The text the model reads in the result's place: head, where the rest is, tail."""
        note = (
            f"[… {self.hidden_chars:,} of {self.chars:,} chars (~{self.tokens:,} tokens) "
            f"offloaded, read with {READ_TOOL_RESULT}(handle={_quoted(self.handle)}, "
            f"offset={len(self.head)}, length=...) …]"
        )
        return "\n".join(part for part in (self.head, note, self.tail) if part)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The result of the call `tool_use_id`: text, or text and image blocks.

    Tool results travel in a `user` message, after the assistant message that
    made the calls. A result too large for the window is offloaded (see
    `pygents_ctx.model.ToolResultOffload`): its content is then the stub text
    the model reads, and `offloaded` says where the whole text is.

    Attributes:
        tool_use_id: The call's id.
        content: The result: text, or text and image blocks.
        is_error: Whether the call failed.
        cache_control: Anthropic's prompt-caching mark (None: none).
        offloaded: For an offloaded result, its `OffloadedResult` (None: the
            content is the whole result).
    """

    tool_use_id: str
    content: str | Sequence[TextBlock | ImageBlock]
    is_error: bool = False
    # Anthropic's prompt-caching mark (`{"type": "ephemeral"}`): kept, stored, exported
    # and sent back. Left out of the hash: it is a dict.
    cache_control: dict[str, Any] | None = field(default=None, kw_only=True, repr=False, hash=False)
    offloaded: OffloadedResult | None = field(default=None, kw_only=True, repr=False)
    type: ClassVar[str] = "tool_result"

    __repr__ = _block_repr

    def __post_init__(self) -> None:
        _require("ToolResultBlock", "tool_use_id", self.tool_use_id, str)
        _require("ToolResultBlock", "is_error", self.is_error, bool)
        _checked_cache_control("ToolResultBlock", self.cache_control)
        if self.offloaded is not None:
            _require("ToolResultBlock", "offloaded", self.offloaded, OffloadedResult)
        if isinstance(self.content, str):
            return
        _require("ToolResultBlock", "content", self.content, (str, list, tuple))
        content = tuple(self.content)
        for index, block in enumerate(content):
            if not isinstance(block, TextBlock | ImageBlock):
                raise TypeError(
                    f"ToolResultBlock.content[{index}] must be a TextBlock or ImageBlock, "
                    f"not {type(block).__name__}"
                )
        object.__setattr__(self, "content", content)

    @property
    def text(self) -> str:
        """The result's text: the string, or its text blocks joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(block.text for block in self.content if isinstance(block, TextBlock))


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """A reasoning model's thinking, before its answer or tool calls.

    Anthropic's extended thinking signs each block (`signature`), and the API
    needs the block back unchanged, in its place before the turn's tool
    calls. Gemini's thought summaries keep their thought signature here too,
    when their part carried one. Reasoning text that OpenAI-compatible servers return
    (`reasoning_content`) has no signature: it is kept for people to read and
    is never sent back (the APIs refuse it, or do not read it).

    Attributes:
        thinking: The reasoning text.
        signature: The provider's signature of it (None: unsigned).

    Examples:
        >>> ThinkingBlock("2 + 2 is 4", signature="EqQB...").signature
        'EqQB...'
    """

    thinking: str
    signature: str | None = None
    type: ClassVar[str] = "thinking"

    def __post_init__(self) -> None:
        _require("ThinkingBlock", "thinking", self.thinking, str)
        if self.signature is not None:
            _require("ThinkingBlock", "signature", self.signature, str)


@dataclass(frozen=True, slots=True)
class RedactedThinkingBlock:
    """Thinking the provider encrypted (Anthropic's `redacted_thinking`): sent back as it came.

    Attributes:
        data: The encrypted thinking, opaque.
    """

    data: str
    type: ClassVar[str] = "redacted_thinking"

    def __post_init__(self) -> None:
        _require("RedactedThinkingBlock", "data", self.data, str)

    def __repr__(self) -> str:  # opaque, and often long
        return f"RedactedThinkingBlock(data=<{len(self.data)} chars>)"


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    """A reasoning item of OpenAI's Responses API: the model's thinking, kept to send back.

    A reasoning model thinks before it calls tools; with `store=False` the
    API keeps nothing, so the next request carries the thinking back as this
    item, encrypted (`encrypted_content`), in its place before the calls it
    led to. Only `OpenAIResponsesModel` sends it, and only to the model that
    wrote it (`model`); every other encoder leaves it out, as it leaves out
    unsigned thinking.

    Attributes:
        id: The item's id (`rs_...`).
        summary: The readable summaries of the thinking, in order (often none).
        encrypted_content: The thinking, encrypted by OpenAI (None: not asked
            for, so it cannot be sent back to a server that stores nothing).
        model: The model the request that produced it named; the item is sent
            back only in a request to that same model.

    Examples:
        >>> block = ReasoningBlock("rs_1", ("Checked both cities.",), "gAAA...", model="o4-mini")
        >>> block.summary, block.model
        (('Checked both cities.',), 'o4-mini')
    """

    id: str
    summary: Sequence[str] = ()
    encrypted_content: str | None = None
    model: str = field(default="", kw_only=True)
    type: ClassVar[str] = "reasoning"

    def __post_init__(self) -> None:
        _require("ReasoningBlock", "id", self.id, str)
        _require("ReasoningBlock", "summary", self.summary, (list, tuple))
        summary = tuple(self.summary)
        for index, text in enumerate(summary):
            if not isinstance(text, str):
                raise TypeError(
                    f"ReasoningBlock.summary[{index}] must be str, not {type(text).__name__}"
                )
        object.__setattr__(self, "summary", summary)
        if self.encrypted_content is not None:
            _require("ReasoningBlock", "encrypted_content", self.encrypted_content, str)
        _require("ReasoningBlock", "model", self.model, str)
        if not self.id:
            raise ValueError("ReasoningBlock.id must not be empty: the API names the item by it")

    def __repr__(self) -> str:  # the encrypted content is opaque, and long
        encrypted = (
            "None" if self.encrypted_content is None else f"<{len(self.encrypted_content)} chars>"
        )
        return (
            f"ReasoningBlock(id={self.id!r}, summary={self.summary!r}, "
            f"encrypted_content={encrypted}, model={self.model!r})"
        )


ContentBlock: TypeAlias = (
    TextBlock
    | ImageBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ReasoningBlock
)
_REPR_FIELDS: Final[dict[type, tuple[str, ...]]] = {
    TextBlock: ("text",),
    ToolUseBlock: ("id", "name", "input"),
    ToolResultBlock: ("tool_use_id", "content", "is_error"),
}
_BLOCK_TYPES: Final = (
    TextBlock,
    ImageBlock,
    ToolUseBlock,
    ToolResultBlock,
    ThinkingBlock,
    RedactedThinkingBlock,
    ReasoningBlock,
)


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of a conversation: a `role` and a tuple of content blocks.

    `content` accepts any iterable of blocks (a list, as in most code) and is
    stored as a tuple. A plain string is taken as one `TextBlock`.
    `has_tool_uses` and `has_tool_results` say whether any block is a tool
    call or a tool result (set once, at construction).

    Attributes:
        role: `"user"`, `"assistant"` or `"system"`.
        content: The blocks.
        name: The participant's name (OpenAI's message `name`), or None;
            sent to OpenAI, which takes it, and kept (not sent) for Anthropic.
        metadata: A JSON object of your own or a provider's about this message
            (None: none); saved and exported with it, never sent to a model.

    Examples:
        >>> message = Message("user", [TextBlock("What is 2 + 2?")])
        >>> message.text
        'What is 2 + 2?'
        >>> Message("user", "Hi", name="alice").name
        'alice'
    """

    role: Role
    content: tuple[ContentBlock, ...] = ()
    name: str | None = field(default=None, repr=False)
    metadata: dict[str, Any] | None = field(default=None, repr=False, hash=False)
    # One cached token count, keyed by the counting settings (see tokens.py).
    _tokens: tuple[tuple[object, int, int], int] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # Whether any block is a tool result / a tool call: strategies ask on every call.
    has_tool_results: bool = field(default=False, init=False, repr=False, compare=False)
    has_tool_uses: bool = field(default=False, init=False, repr=False, compare=False)

    def __init__(
        self,
        role: Role,
        content: Iterable[ContentBlock] | str = (),
        *,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(role, str) or role not in ROLES:
            raise ValueError(f"Message.role must be 'user', 'assistant' or 'system', not {role!r}")
        if name is not None:
            _require("Message", "name", name, str)
        if metadata is not None:
            _require("Message", "metadata", metadata, dict)
        if isinstance(content, str):
            blocks: tuple[ContentBlock, ...] = (TextBlock(content),)
        else:
            # A list or tuple (what loading passes) skips the slower ABC checks.
            if type(content) not in _SEQUENCES and (
                not isinstance(content, Iterable) or isinstance(content, Mapping | bytes)
            ):
                raise TypeError(
                    "Message.content must be a list of content blocks, "
                    f"not {type(content).__name__}"
                )
            blocks = tuple(content)
            for index, block in enumerate(blocks):
                if not isinstance(block, _BLOCK_TYPES):
                    raise TypeError(
                        f"Message.content[{index}] must be a content block, "
                        f"not {type(block).__name__}"
                    )
        kinds = {type(block) for block in blocks}
        self._fill(role, blocks, ToolResultBlock in kinds, ToolUseBlock in kinds, name, metadata)

    def _fill(
        self,
        role: Role,
        blocks: tuple[ContentBlock, ...],
        tool_results: bool,
        tool_uses: bool,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Set every field from checked values, as a frozen dataclass sets them."""
        set_field = object.__setattr__
        set_field(self, "role", role)
        set_field(self, "content", blocks)
        set_field(self, "name", name)
        set_field(self, "metadata", metadata)
        set_field(self, "_tokens", None)
        set_field(self, "has_tool_results", tool_results)
        set_field(self, "has_tool_uses", tool_uses)

    def __repr__(self) -> str:
        extra = "".join(
            f", {key}={value!r}"
            for key, value in (("name", self.name), ("metadata", self.metadata))
            if value is not None
        )
        return f"Message(role={self.role!r}, content={self.content!r}{extra})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The token cache may hold any counter: rebuild from the fields alone.
        return _rebuilt_message, (self.role, self.content, self.name, self.metadata)

    @property
    def text(self) -> str:
        """The text blocks' text, joined by newlines."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        """The tool calls in this message."""
        return tuple(block for block in self.content if isinstance(block, ToolUseBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        """The tool results in this message."""
        return tuple(block for block in self.content if isinstance(block, ToolResultBlock))


def _rebuilt_message(
    role: Role,
    content: tuple[ContentBlock, ...],
    name: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    return Message(role, content, name=name, metadata=metadata)


# ----------------------------------------------------------------------------- dict form


def to_dict(value: ContentBlock | Message) -> dict[str, Any]:
    """The JSON-ready dict of a block (tagged by `type`) or a message (`role`, `content`).

    Image bytes become base64 text. Optional fields (a message's `name` and
    `metadata`, a block's `cache_control`, a thinking, text or tool-use block's `signature`)
    appear only when set.

    Examples:
        >>> to_dict(TextBlock("hello"))
        {'type': 'text', 'text': 'hello'}
        >>> to_dict(Message("user", "Hi", name="alice"))
        {'role': 'user', 'content': [{'type': 'text', 'text': 'Hi'}], 'name': 'alice'}
    """
    if isinstance(value, Message):
        message: dict[str, Any] = {
            "role": value.role,
            "content": [to_dict(block) for block in value.content],
        }
        if value.name is not None:
            message["name"] = value.name
        if value.metadata is not None:
            message["metadata"] = value.metadata
        return message
    block = _block_dict(value)
    cache_control = getattr(value, "cache_control", None)
    if cache_control is not None:
        block["cache_control"] = cache_control
    if isinstance(value, TextBlock | ToolUseBlock) and value.signature is not None:
        block["signature"] = value.signature
    return block


def _block_dict(value: object) -> dict[str, Any]:
    if isinstance(value, TextBlock):
        return {"type": "text", "text": value.text}
    if isinstance(value, ToolUseBlock):
        return {"type": "tool_use", "id": value.id, "name": value.name, "input": dict(value.input)}
    if isinstance(value, ToolResultBlock):
        content = value.content
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": value.tool_use_id,
            "content": content if isinstance(content, str) else [to_dict(b) for b in content],
            "is_error": value.is_error,
        }
        if value.offloaded is not None:
            result["offloaded"] = _offloaded_dict(value.offloaded)
        return result
    if isinstance(value, ImageBlock):
        return {
            "type": "image",
            "media_type": value.media_type,
            "data": base64.b64encode(value.data).decode("ascii"),
        }
    if isinstance(value, ThinkingBlock):
        thinking = {"type": "thinking", "thinking": value.thinking}
        return thinking if value.signature is None else {**thinking, "signature": value.signature}
    if isinstance(value, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": value.data}
    if isinstance(value, ReasoningBlock):
        return {
            "type": "reasoning",
            "id": value.id,
            "summary": list(value.summary),
            "encrypted_content": value.encrypted_content,
            "model": value.model,
        }
    raise TypeError(f"to_dict takes a content block or a Message, not {type(value).__name__}")


def _offloaded_dict(stub: OffloadedResult) -> dict[str, Any]:
    return {
        "handle": stub.handle,
        "chars": stub.chars,
        "tokens": stub.tokens,
        "head": stub.head,
        "tail": stub.tail,
        "media_type": stub.media_type,
        **({"words": stub.words} if stub.words else {}),
    }


@refuses_deep_nesting("message")
def from_dict(data: Mapping[str, Any]) -> Any:
    """Rebuild a block or a message from `to_dict()` output.

    A dict with a `role` is a message; any other needs a block `type`. Every
    key must be one that `to_dict()` writes for that kind: an unknown key
    (a typo such as `is_eror`) is refused, never dropped.

    Raises:
        ValueError: Unknown `type` or `role`, an unknown key, a missing field, a
            field of the wrong type, bad base64, or an unsupported image media
            type; the message names the field by its path.

    Examples:
        >>> from_dict({"type": "text", "text": "hello"})
        TextBlock(text='hello')
        >>> from_dict({"type": "tool_result", "tool_use_id": "t1", "content": "", "is_eror": True})
        Traceback (most recent call last):
        ...
        ValueError: tool_result block: unknown key 'is_eror' (did you mean 'is_error'?)
    """
    # First, the one short path: most stored messages are plain text (a history loads thousands).
    return _plain_text_message(data) or _read(data, "")


def _plain_text_message(data: object) -> Message | None:
    """The usual stored message, fresh from `orjson.loads`, or None for any other `data`.

    The usual form: a dict of exactly a role and a list of text blocks (dicts of
    exactly `type` "text" and a str `text`). Its exact types prove that none of
    the general reader's key and type checks can fail, so it is made at once.
    """
    # Two keys, both found (a missing one reads as None, which fails its type check):
    # exactly these two.
    if type(data) is not dict or len(data) != 2:
        return None
    role, content = data.get("role"), data.get("content")
    if type(role) is not str or role not in ROLES or type(content) is not list:
        return None
    blocks = []
    for block in content:
        if type(block) is not dict or len(block) != 2 or block.get("type") != "text":
            return None
        text = block.get("text")
        if type(text) is not str:
            return None
        blocks.append(TextBlock(text))
    # Made from values checked above (a role, text blocks: no tool calls or results),
    # without checking them again in `Message.__init__`.
    message = Message.__new__(Message)
    message._fill(role, tuple(blocks), False, False)  # type: ignore[arg-type]  # one of ROLES
    return message


def _refuse_unknown_keys(data: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    for key in data:
        if key not in known:
            guess = closest(key, known) if isinstance(key, str) else None
            hint = (
                f" (did you mean {guess!r}?)" if guess else f"; expected {', '.join(sorted(known))}"
            )
            raise ValueError(f"{where}: unknown key {key!r}{hint}")


def _read(data: object, path: str) -> Any:
    if type(data) is not dict and not isinstance(data, Mapping):  # parsed JSON: a dict
        raise ValueError(f"{path or 'value'} must be a dict, not {type(data).__name__}")
    if "role" in data and "type" not in data:
        return _read_message(data, path)
    kind = data.get("type")
    reader = _BLOCK_READERS.get(kind) if isinstance(kind, str) else None
    if reader is None or not isinstance(kind, str):
        raise ValueError(
            f"{path or 'block'}.type {kind!r} is unknown; "
            f"expected one of {', '.join(sorted(_BLOCK_READERS))} (or a message with 'role')"
        )
    where = path or f"{kind} block"
    _refuse_unknown_keys(data, _BLOCK_KEYS[kind], where)
    try:
        return reader(data, where)
    except KeyError as exc:
        raise ValueError(f"{where} is missing the {exc.args[0]!r} field") from None
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None


_MESSAGE_KEYS: Final = frozenset({"role", "content", "name", "metadata"})


def _read_message(data: Mapping[str, Any], path: str) -> Message:
    where = path or "message"
    _refuse_unknown_keys(data, _MESSAGE_KEYS, where)
    content = data.get("content")
    if not isinstance(content, list):
        raise ValueError(f"{where}.content must be a list of blocks, not {type(content).__name__}")
    blocks = [_read(block, f"{where}.content[{i}]") for i, block in enumerate(content)]
    if not all(isinstance(block, _BLOCK_TYPES) for block in blocks):
        raise ValueError(f"{where}.content must hold content blocks, not messages")
    try:
        return Message(data["role"], blocks, name=data.get("name"), metadata=data.get("metadata"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def _read_text(data: Mapping[str, Any], path: str) -> TextBlock:
    return TextBlock(
        data["text"], cache_control=data.get("cache_control"), signature=data.get("signature")
    )


def _read_image(data: Mapping[str, Any], path: str) -> ImageBlock:
    encoded = data["data"]
    if not isinstance(encoded, str):
        raise TypeError(f"ImageBlock.data must be base64 text, not {type(encoded).__name__}")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise TypeError("ImageBlock.data is not valid base64") from None
    try:
        return ImageBlock(data["media_type"], raw, cache_control=data.get("cache_control"))
    except ValueError as exc:
        raise TypeError(str(exc)) from None


def _read_tool_use(data: Mapping[str, Any], path: str) -> ToolUseBlock:
    return ToolUseBlock(
        data["id"],
        data["name"],
        data["input"],
        cache_control=data.get("cache_control"),
        signature=data.get("signature"),
    )


def _read_tool_result(data: Mapping[str, Any], path: str) -> ToolResultBlock:
    content = data["content"]
    if isinstance(content, list):
        content = [_read(block, f"{path}.content[{i}]") for i, block in enumerate(content)]
    stub = data.get("offloaded")
    return ToolResultBlock(
        data["tool_use_id"],
        content,
        data.get("is_error", False),
        cache_control=data.get("cache_control"),
        offloaded=None if stub is None else _read_offloaded(stub, f"{path}.offloaded"),
    )


_OFFLOADED_KEYS: Final = frozenset(
    {"handle", "chars", "tokens", "head", "tail", "media_type", "words"}
)


def _read_offloaded(data: object, path: str) -> OffloadedResult:
    if not isinstance(data, Mapping):
        raise TypeError(f"{path} must be a dict, not {type(data).__name__}")
    _refuse_unknown_keys(data, _OFFLOADED_KEYS, path)
    try:
        return OffloadedResult(
            data["handle"],
            chars=data["chars"],
            tokens=data["tokens"],
            head=data["head"],
            tail=data["tail"],
            media_type=data.get("media_type", "text/plain"),
            words=data.get("words", ""),
        )
    except KeyError as exc:
        raise TypeError(f"{path} is missing the {exc.args[0]!r} field") from None
    except ValueError as exc:
        raise TypeError(str(exc)) from None


def _read_thinking(data: Mapping[str, Any], path: str) -> ThinkingBlock:
    return ThinkingBlock(data["thinking"], data.get("signature"))


def _read_redacted_thinking(data: Mapping[str, Any], path: str) -> RedactedThinkingBlock:
    return RedactedThinkingBlock(data["data"])


def _read_reasoning(data: Mapping[str, Any], path: str) -> ReasoningBlock:
    return ReasoningBlock(
        data["id"],
        data.get("summary", ()),
        data.get("encrypted_content"),
        model=data.get("model", ""),
    )


_BLOCK_KEYS: Final = {
    "text": frozenset({"type", "text", "cache_control", "signature"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "reasoning": frozenset({"type", "id", "summary", "encrypted_content", "model"}),
    "image": frozenset({"type", "media_type", "data", "cache_control"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control", "signature"}),
    "tool_result": frozenset(
        {"type", "tool_use_id", "content", "is_error", "cache_control", "offloaded"}
    ),
}
_BLOCK_READERS: Final = {
    "text": _read_text,
    "thinking": _read_thinking,
    "redacted_thinking": _read_redacted_thinking,
    "reasoning": _read_reasoning,
    "image": _read_image,
    "tool_use": _read_tool_use,
    "tool_result": _read_tool_result,
}
