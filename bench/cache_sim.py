"""A simulator of providers' prompt caches, following their documented rules.

A prompt is a list of `Segment`s in the order the provider reads them (tool
definitions, system prompt, messages), each with a key (its encoded bytes), a
token count and whether the request marks a cache breakpoint at its end. A
cache's `serve(segments, at)` says how many of the prompt's tokens the provider
would read from its cache at time `at` (seconds), and how many it would write.

OpenAI (automatic prefix caching): a prompt of at least 1,024 tokens is cached
whole, prefix by prefix; a later prompt that starts with a cached prefix reads
it, counted from 1,024 tokens up in steps of 128 (`cached_tokens`). An entry
lives 5 minutes after its last use (the documented 5 to 10 minutes of
inactivity, taken at its shortest).

Anthropic (explicit breakpoints): a request marks at most 4 breakpoints
(`cache_control`; more is an error, as the API answers 400). The prefix up to
each breakpoint is written to the cache when it is at least the model's
minimum cacheable length (1,024, 2,048 or 4,096 tokens); a later request reads
the longest cached prefix that ends at one of its breakpoints or at most 20
blocks before one, checked from its last breakpoint back. What lies between
the prefix read and the last cacheable breakpoint is written (priced 1.25x the
input price, a read 0.1x). An entry lives 5 minutes, renewed by each read.

Both match whole segments: a prefix that ends inside a segment counts up to
the segment before it, so the simulator never reports more than a provider
could serve. Segments are one per message (OpenAI, Anthropic) and one per tool
definition and system block (Anthropic), where the breakpoints can be.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

__all__ = [
    "ANTHROPIC_MIN_TOKENS",
    "AnthropicPromptCache",
    "OpenAIPromptCache",
    "Segment",
    "Served",
    "anthropic_min_tokens",
    "anthropic_segments",
    "openai_segments",
]

LIFETIME: Final = 300.0  # seconds: both providers' default, renewed by each use
# Anthropic's minimum cacheable prompt length by model family (its prompt caching docs).
ANTHROPIC_MIN_TOKENS: Final = {
    "claude-opus-4-5": 4_096,
    "claude-haiku-4-5": 4_096,
    "claude-3-5-haiku": 2_048,
    "claude-3-haiku": 2_048,
    "claude-opus-4": 1_024,
    "claude-sonnet-4": 1_024,
    "claude-3-7-sonnet": 1_024,
}

Count = Callable[[Any], int]


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of a prompt: its bytes (as a digest), its tokens, and a breakpoint at its end."""

    key: bytes
    tokens: int
    breakpoint: bool = False


@dataclass(frozen=True, slots=True)
class Served:
    """How a provider would bill one prompt: all its tokens, and the cached and written parts."""

    input_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0


def anthropic_min_tokens(model: str) -> int:
    """The minimum cacheable prompt length for an Anthropic model (1,024 when unknown)."""
    for family, tokens in ANTHROPIC_MIN_TOKENS.items():
        if model.startswith(family):
            return tokens
    return 1_024


class _Entries:
    """Cached prefixes (by their chained digest), oldest use first, dropped after `lifetime`."""

    def __init__(self, lifetime: float) -> None:
        if lifetime <= 0:
            raise ValueError(f"a prompt cache's lifetime must be > 0 seconds, not {lifetime!r}")
        self.lifetime = lifetime
        self._used: OrderedDict[bytes, float] = OrderedDict()
        self._now = float("-inf")

    def expire(self, at: float) -> None:
        if at < self._now:
            raise ValueError(f"prompts must be served in time order: {at} comes before {self._now}")
        self._now = at
        while self._used:
            key, used = next(iter(self._used.items()))
            if used + self.lifetime > at:
                break
            del self._used[key]

    def __contains__(self, key: bytes) -> bool:
        return key in self._used

    def touch(self, key: bytes, at: float) -> None:
        self._used[key] = at
        self._used.move_to_end(key)


def _chain(segments: Sequence[Segment]) -> tuple[list[bytes], list[int]]:
    """Each prefix's digest (it names the prefix's whole content) and its tokens."""
    digests, ends = [], []
    digest, total = b"", 0
    for segment in segments:
        digest = hashlib.blake2b(digest + segment.key, digest_size=16).digest()
        total += segment.tokens
        digests.append(digest)
        ends.append(total)
    return digests, ends


class OpenAIPromptCache:
    """OpenAI's automatic prefix caching (see the module docstring)."""

    def __init__(
        self, *, min_tokens: int = 1_024, step: int = 128, lifetime: float = LIFETIME
    ) -> None:
        if min_tokens < 1 or step < 1:
            raise ValueError(f"min_tokens and step must be >= 1, not {min_tokens} and {step}")
        self.min_tokens = min_tokens
        self.step = step
        self._entries = _Entries(lifetime)

    def serve(self, segments: Sequence[Segment], at: float) -> Served:
        """Bill `segments` sent at time `at`, then cache its prefixes."""
        self._entries.expire(at)
        digests, ends = _chain(segments)
        total = ends[-1] if ends else 0
        matched = 0
        for digest, end in zip(digests, ends, strict=True):
            if digest not in self._entries:
                break  # a prefix is cached only with every shorter one
            matched = end
        cached = 0
        if total >= self.min_tokens and matched >= self.min_tokens:
            cached = self.min_tokens + (matched - self.min_tokens) // self.step * self.step
        if total >= self.min_tokens:
            for digest in digests:
                self._entries.touch(digest, at)
        return Served(total, cached)


class AnthropicPromptCache:
    """Anthropic's prompt caching at explicit breakpoints (see the module docstring)."""

    def __init__(
        self,
        *,
        min_tokens: int = 1_024,
        lifetime: float = LIFETIME,
        max_breakpoints: int = 4,
        lookback: int = 20,
    ) -> None:
        if min_tokens < 1 or max_breakpoints < 1 or lookback < 1:
            raise ValueError(
                "min_tokens, max_breakpoints and lookback must be >= 1, not "
                f"{min_tokens}, {max_breakpoints} and {lookback}"
            )
        self.min_tokens = min_tokens
        self.max_breakpoints = max_breakpoints
        self.lookback = lookback
        self._entries = _Entries(lifetime)

    def serve(self, segments: Sequence[Segment], at: float) -> Served:
        """Bill `segments` sent at time `at`, then cache the prefixes at its breakpoints.

        Raises:
            ValueError: The prompt marks more breakpoints than the API takes.
        """
        marks = [i for i, segment in enumerate(segments) if segment.breakpoint]
        if len(marks) > self.max_breakpoints:
            raise ValueError(
                f"the request marks {len(marks)} cache breakpoints; the API takes at most "
                f"{self.max_breakpoints}"
            )
        self._entries.expire(at)
        digests, ends = _chain(segments)
        total = ends[-1] if ends else 0
        read_at = -1
        for mark in reversed(marks):  # the last breakpoint first: the longest prefix wins
            for index in range(mark, max(-1, mark - self.lookback), -1):
                if digests[index] in self._entries:
                    read_at = index
                    break
            if read_at >= 0:
                break
        read = ends[read_at] if read_at >= 0 else 0
        if read_at >= 0:
            self._entries.touch(digests[read_at], at)
        written_to = read
        for mark in marks:
            if ends[mark] >= self.min_tokens:
                self._entries.touch(digests[mark], at)
                written_to = max(written_to, ends[mark])
        return Served(total, read, written_to - read)


def _digest(value: Any) -> bytes:
    return hashlib.blake2b(
        orjson.dumps(value, option=orjson.OPT_SORT_KEYS), digest_size=16
    ).digest()


def _unmarked(part: Mapping[str, Any]) -> Mapping[str, Any]:
    """`part` without its `cache_control` marks: a mark is not part of the cached content.

    Marks sit on tool definitions, system blocks and a message's content blocks.
    """
    if "cache_control" in part:
        part = {k: v for k, v in part.items() if k != "cache_control"}
    content = part.get("content")
    if isinstance(content, list) and any(_marked(block) for block in content):
        blocks = [_unmarked(b) if isinstance(b, Mapping) else b for b in content]
        part = {**part, "content": blocks}
    return part


def openai_segments(request: Mapping[str, Any], count: Count) -> list[Segment]:
    """A Chat Completions request body as segments: its tools, then one per message.

    `count(message)` gives a wire message's tokens; the tool definitions are
    `count({"tools": ...})`, in the prompt before the messages.
    """
    segments = []
    tools = request.get("tools")
    if tools:
        segments.append(Segment(_digest(tools), count({"tools": tools})))
    segments += [Segment(_digest(m), count(m)) for m in request["messages"]]
    return segments


def _marked(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("cache_control") is not None


def _blocks(content: object) -> Iterable[object]:
    return content if isinstance(content, list) else ()


def anthropic_segments(request: Mapping[str, Any], count: Count) -> list[Segment]:
    """A Messages API request as segments, breakpoints where it has `cache_control`.

    In the API's order: each tool definition, each system block (a string
    system prompt is one), each message (marked when any of its blocks is).
    A segment's key leaves out the marks and reads string content as the one
    text block it is, so a message hashes alike with and without a mark.
    `count(part)` gives the tokens of a tool definition, a system block or a
    wire message.
    """
    parts: list[tuple[Any, bool]] = [(tool, _marked(tool)) for tool in request.get("tools") or ()]
    system = request.get("system")
    if isinstance(system, str):
        parts.append(({"type": "text", "text": system}, False))
    else:
        parts += [(block, _marked(block)) for block in system or ()]
    for message in request["messages"]:
        content = message.get("content")
        if isinstance(content, str):  # the API reads it as one text block, as a mark needs
            message = {**message, "content": [{"type": "text", "text": content}]}
        parts.append((message, any(_marked(block) for block in _blocks(content))))
    segments = []
    for part, marked in parts:
        plain = _unmarked(part)
        segments.append(Segment(_digest(plain), count(plain), marked))
    return segments
