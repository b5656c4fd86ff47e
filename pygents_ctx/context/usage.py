"""Token usage a model provider reports: `Usage`, and `UsageRecord`, the form a store keeps.

Providers count the same things differently: OpenAI's `prompt_tokens` include
the tokens read from its prompt cache, Anthropic's `input_tokens` leave out the
tokens read from and written to its cache. A `Usage` always means the same:
`input_tokens` is every token of the prompt, and `cached_tokens` and
`cache_write_tokens` say which part of it the cache served or stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["Usage", "UsageRecord"]

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
_RECORD_FIELDS = (
    "usage",
    "run_id",
    "model",
    "estimated_input_tokens",
    "created_at",
    "parent_session",
    "call_id",
    "subagent_session",
)
_LINK_FIELDS = ("parent_session", "call_id", "subagent_session")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _check_amount(owner: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{owner}.{name} must be at least 0, not {value}")
    return value


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens used by one model call, or by several added up (`a + b`, `sum(..., Usage())`).

    Attributes:
        input_tokens: Every token of the prompt, the cached ones included.
        output_tokens: The tokens of the reply.
        cached_tokens: The part of `input_tokens` read from the provider's prompt cache.
        cache_write_tokens: The part of `input_tokens` written to the prompt
            cache (Anthropic reports it; OpenAI caches without saying).
        reasoning_tokens: The part of `output_tokens` a reasoning model spent
            thinking (OpenAI's `output_tokens_details.reasoning_tokens`; 0
            where the provider does not say).

    Raises:
        TypeError: An amount is not an int.
        ValueError: An amount is negative, the cached and cache-write
            tokens add up to more than `input_tokens`, or `reasoning_tokens`
            is more than `output_tokens`.

    Examples:
        >>> total = Usage(1_000, 50, cached_tokens=800) + Usage(1_200, 40, cached_tokens=1_000)
        >>> total.input_tokens, total.cached_tokens, total.total_tokens
        (2200, 1800, 2290)
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __post_init__(self) -> None:
        for name in _USAGE_FIELDS:
            _check_amount("Usage", name, getattr(self, name))
        if self.cached_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError(
                f"Usage.cached_tokens ({self.cached_tokens}) and cache_write_tokens "
                f"({self.cache_write_tokens}) are parts of input_tokens ({self.input_tokens}) "
                "and cannot add up to more; give input_tokens as the whole prompt"
            )
        if self.reasoning_tokens > self.output_tokens:
            raise ValueError(
                f"Usage.reasoning_tokens ({self.reasoning_tokens}) is a part of output_tokens "
                f"({self.output_tokens}) and cannot be more; give output_tokens as the whole reply"
            )

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """`input_tokens + output_tokens`."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        """The five amounts by name."""
        return {name: getattr(self, name) for name in _USAGE_FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """A `Usage` from `to_dict()` output; missing amounts are 0.

        Raises:
            TypeError, ValueError: As for the constructor, or an unknown key.
        """
        unknown = sorted(set(data) - set(_USAGE_FIELDS))
        if unknown:
            raise ValueError(f"Usage has no field {unknown[0]!r}; expected {_USAGE_FIELDS}")
        return cls(**data)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One model call's usage as a store keeps it: what the provider counted, and our estimate.

    Attributes:
        usage: What the provider reported.
        run_id: The agent run the call belonged to.
        model: The model's name, as the provider gave it.
        estimated_input_tokens: The prompt's size as this library counted it
            before the call (the window's `tokens`), to compare with
            `usage.input_tokens`; None when not estimated.
        created_at: When the call ended: ISO 8601 in UTC with microseconds.
        parent_session: For a sub-agent's model call (`ModelLoop.as_tool`),
            the session whose transcript holds the tool call that ran the
            sub-agent; None for a session's own calls.
        call_id: For a sub-agent's model call, the id of that tool call.
        subagent_session: For a sub-agent's model call, the session of the
            sub-agent's own transcript (None when it was not kept:
            `as_tool(keep="none")`).

    A sub-agent's records are kept once, in the session its caller records
    its own calls in, so the spend of a conversation and of every sub-agent
    it called adds up in that one session; the three fields say where each
    call came from.

    Raises:
        TypeError, ValueError: A field has the wrong type or a negative amount,
            or `subagent_session` or `parent_session` is given without `call_id`.

    Examples:
        >>> record = UsageRecord(Usage(120, 30), run_id="run-1", model="gpt-4o")
        >>> record.usage.total_tokens, record.model
        (150, 'gpt-4o')
    """

    usage: Usage
    run_id: str | None = field(default=None, kw_only=True)
    model: str = field(default="", kw_only=True)
    estimated_input_tokens: int | None = field(default=None, kw_only=True)
    created_at: str = field(default_factory=_now, kw_only=True)
    parent_session: str | None = field(default=None, kw_only=True)
    call_id: str | None = field(default=None, kw_only=True)
    subagent_session: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.usage, Usage):
            raise TypeError(f"UsageRecord.usage must be a Usage, not {type(self.usage).__name__}")
        if self.run_id is not None and not isinstance(self.run_id, str):
            raise TypeError(
                f"UsageRecord.run_id must be a str or None, not {type(self.run_id).__name__}"
            )
        for name in ("model", "created_at"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(
                    f"UsageRecord.{name} must be a str, not {type(getattr(self, name)).__name__}"
                )
        if self.estimated_input_tokens is not None:
            _check_amount("UsageRecord", "estimated_input_tokens", self.estimated_input_tokens)
        for name in _LINK_FIELDS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(
                    f"UsageRecord.{name} must be a str or None, not {type(value).__name__}"
                )
        if self.call_id is None and (self.parent_session or self.subagent_session) is not None:
            raise ValueError(
                "UsageRecord.parent_session and subagent_session describe a sub-agent's call: "
                "give its call_id too (the id of the tool call that ran the sub-agent)"
            )

    def to_dict(self) -> dict[str, Any]:
        """`{"usage", "run_id", "model", "estimated_input_tokens", "created_at"}`.

        `usage` is `Usage.to_dict()`; a sub-agent's record also has
        `parent_session`, `call_id` and `subagent_session`.
        """
        data: dict[str, Any] = {
            "usage": self.usage.to_dict(),
            "run_id": self.run_id,
            "model": self.model,
            "estimated_input_tokens": self.estimated_input_tokens,
            "created_at": self.created_at,
        }
        if self.call_id is not None:
            data.update({name: getattr(self, name) for name in _LINK_FIELDS})
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UsageRecord:
        """A `UsageRecord` from `to_dict()` output; only `usage` is required.

        Raises:
            TypeError, ValueError: As for the constructor, `usage` is missing or
                not a dict, or a key is unknown.
        """
        unknown = sorted(set(data) - set(_RECORD_FIELDS))
        if unknown:
            raise ValueError(f"UsageRecord has no field {unknown[0]!r}; expected {_RECORD_FIELDS}")
        usage = data.get("usage")
        if not isinstance(usage, Mapping):
            raise TypeError(f"UsageRecord.usage must be a dict of amounts, not {usage!r}")
        return cls(Usage.from_dict(usage), **{k: v for k, v in data.items() if k != "usage"})
