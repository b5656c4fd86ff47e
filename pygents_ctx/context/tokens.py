"""Token counting: counters, and message counts that are computed once.

A `TokenCounter` is any callable `str -> int`. `count_message_tokens` caches its
result on the message (keyed by the counter and the settings), so windows and
stores never re-tokenize a history to learn how big it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import orjson

from pygents_ctx.context.messages import (
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "HeuristicTokenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_message_tokens",
    "count_tokens",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that maps text to a number of tokens."""

    def __call__(self, text: str, /) -> int: ...


@dataclass(frozen=True, slots=True)
class HeuristicTokenCounter:
    """`ceil(len(text) / chars_per_token)`: fast, dependency-free, roughly right for English.

    Raises:
        ValueError: `chars_per_token` is not a positive number.

    Examples:
        >>> HeuristicTokenCounter()("hello world")
        3
    """

    chars_per_token: float = 4.0

    def __post_init__(self) -> None:
        value = self.chars_per_token
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(
                f"HeuristicTokenCounter.chars_per_token must be a positive number, not {value!r}"
            )

    def __call__(self, text: str, /) -> int:
        return math.ceil(len(text) / self.chars_per_token)


DEFAULT_COUNTER: Final = HeuristicTokenCounter()


def _import_tiktoken() -> Any:
    try:
        import tiktoken
    except ImportError:
        raise ImportError(
            "TiktokenCounter needs tiktoken: pip install 'pygents-ctx[tiktoken]'"
        ) from None
    return tiktoken


class TiktokenCounter:
    """Exact counts for OpenAI models, through `tiktoken` (`pip install 'pygents-ctx[tiktoken]'`).

    Args:
        encoding: An encoding name (`"cl100k_base"`, `"o200k_base"`, ...) or a
            `tiktoken.Encoding`. Named encodings are fetched by tiktoken once and
            cached on disk.

    Special-token text such as `<|endoftext|>` is counted as ordinary text.

    Raises:
        ImportError: tiktoken is not installed.
    """

    __slots__ = ("_encoding",)

    def __init__(self, encoding: str | tiktoken.Encoding = "cl100k_base") -> None:
        tiktoken = _import_tiktoken()
        self._encoding = tiktoken.get_encoding(encoding) if isinstance(encoding, str) else encoding

    @classmethod
    def for_model(cls, model: str) -> TiktokenCounter:
        """The counter for an OpenAI model name, such as `"gpt-4o"`.

        Raises:
            KeyError: tiktoken does not know the model.
        """
        return cls(_import_tiktoken().encoding_for_model(model))

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding's name."""
        return str(self._encoding.name)

    def __call__(self, text: str, /) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TiktokenCounter):
            return NotImplemented
        return self._encoding is other._encoding or self.encoding_name == other.encoding_name

    def __hash__(self) -> int:
        return hash(self.encoding_name)

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding_name!r})"


def counter_to_dict(counter: TokenCounter) -> dict[str, Any]:
    """The saved form of one of the package's counters.

    Raises:
        TypeError: `counter` is a custom callable, which cannot be saved.
    """
    if isinstance(counter, HeuristicTokenCounter):
        return {"type": "heuristic", "chars_per_token": counter.chars_per_token}
    if isinstance(counter, TiktokenCounter):
        return {"type": "tiktoken", "encoding": counter.encoding_name}
    raise TypeError(
        f"the token counter {counter!r} cannot be saved; use HeuristicTokenCounter or "
        f"TiktokenCounter, or leave counter unset and set it again after loading"
    )


def counter_from_dict(data: object) -> TokenCounter:
    """Rebuild a counter saved by `counter_to_dict()`.

    Raises:
        ValueError: The data does not describe a known counter.
    """
    if isinstance(data, Mapping):
        kind = data.get("type")
        if kind == "heuristic":
            return HeuristicTokenCounter(data.get("chars_per_token", 4.0))
        if kind == "tiktoken" and isinstance(data.get("encoding"), str):
            return TiktokenCounter(data["encoding"])
    raise ValueError(
        f"saved counter {data!r} is not a known counter; expected "
        '{"type": "heuristic", "chars_per_token": ...} or '
        '{"type": "tiktoken", "encoding": ...}'
    )


def _check_amount(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int of at least 0, not {value!r}")
    return value


def _input_json(data: dict[str, Any]) -> str:
    try:
        return orjson.dumps(data).decode()  # non-ASCII stays as is, as models see it
    except TypeError:
        return json.dumps(data, ensure_ascii=False, default=repr)


def _count_blocks(message: Message, counter: TokenCounter, tokens_per_media: int) -> int:
    total = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            total += counter(block.text)
        elif isinstance(block, ToolUseBlock):
            total += counter(block.name) + counter(_input_json(block.input))
        elif isinstance(block, ToolResultBlock):
            if isinstance(block.content, str):
                total += counter(block.content)
            else:
                for part in block.content:
                    total += counter(part.text) if isinstance(part, TextBlock) else tokens_per_media
        elif isinstance(block, ImageBlock):
            total += tokens_per_media
        elif isinstance(block, ThinkingBlock):
            total += counter(block.thinking)
        elif isinstance(block, RedactedThinkingBlock):
            # Opaque: the provider counts the thinking it encrypted, not this text;
            # the text's length is the nearest measure there is.
            total += counter(block.data)
    return total


_SETTINGS: dict[tuple[object, int, int], tuple[object, int, int]] = {}


def settings_key(
    counter: TokenCounter, per_message_overhead: int, tokens_per_media: int
) -> tuple[object, int, int]:
    """One shared tuple per counting setting, so a cached count is matched by identity."""
    key = (counter, per_message_overhead, tokens_per_media)
    try:
        if len(_SETTINGS) > 256:  # counters made per call: do not hold them forever
            _SETTINGS.clear()
        return _SETTINGS.setdefault(key, key)
    except TypeError:  # an unhashable counter
        return key


def count_message_tokens(
    message: Message,
    counter: TokenCounter = DEFAULT_COUNTER,
    *,
    per_message_overhead: int = 4,
    tokens_per_media: int = 600,
) -> int:
    """The tokens a message costs a model: overhead plus its blocks, counted once.

    Text blocks count their text, a tool call its name and the JSON of its input
    (non-ASCII kept as is), a tool result its text, an image `tokens_per_media`.
    Each piece goes through `counter` on its own. The result is cached on the
    message for this counter and these settings.

    Raises:
        ValueError: `per_message_overhead` or `tokens_per_media` is negative.

    Examples:
        >>> count_message_tokens(Message("user", "hello world"))
        7
    """
    cached = message._tokens
    if cached is not None:
        (seen_counter, overhead, media), count = cached
        if (
            overhead == per_message_overhead
            and media == tokens_per_media
            and (seen_counter is counter or seen_counter == counter)
        ):
            return count
    _check_amount("per_message_overhead", per_message_overhead)
    _check_amount("tokens_per_media", tokens_per_media)
    count = per_message_overhead + _count_blocks(message, counter, tokens_per_media)
    key = settings_key(counter, per_message_overhead, tokens_per_media)
    object.__setattr__(message, "_tokens", (key, count))
    return count


def count_tokens(
    messages: Iterable[Message],
    counter: TokenCounter = DEFAULT_COUNTER,
    *,
    per_message_overhead: int = 4,
    tokens_per_media: int = 600,
) -> int:
    """The sum of `count_message_tokens` over `messages` (each count cached)."""
    return sum(
        count_message_tokens(
            message,
            counter,
            per_message_overhead=per_message_overhead,
            tokens_per_media=tokens_per_media,
        )
        for message in messages
    )


def count_content_tokens(content: object, counter: TokenCounter = DEFAULT_COUNTER) -> int:
    """The tokens of any context payload: a message as above, a string as text, else its JSON."""
    if isinstance(content, Message):
        return count_message_tokens(content, counter)
    if isinstance(content, str):
        return counter(content)
    try:
        text = orjson.dumps(content).decode()
    except TypeError:
        text = str(content)
    return counter(text)
