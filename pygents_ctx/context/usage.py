"""Token usage a model provider reports: `Usage`, and `UsageRecord`, the form a store keeps.

Providers count the same things differently: OpenAI's `prompt_tokens` include
the tokens read from its prompt cache, Anthropic's `input_tokens` leave out the
tokens read from and written to its cache. A `Usage` always means the same:
`input_tokens` is every token of the prompt, and `cached_tokens` and
`cache_write_tokens` say which part of it the cache served or stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pygents_ctx._checks import whole_number

__all__ = ["Usage", "UsageRecord", "WindowRecord"]

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
    "window",
)
_LINK_FIELDS = ("parent_session", "call_id", "subagent_session")
_WINDOW_FIELDS = ("strategy", "history", "positions", "edited", "added", "summary")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


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
            whole_number(getattr(self, name), f"Usage.{name}")
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


def history_indexes(history: Sequence[object], window: Sequence[object]) -> list[int | None]:
    """Where each window message sits in the history, None where it cannot be told.

    A message the strategy kept is the history's own object. An edited one is a
    new object; strategies keep the order, so a run of edited messages between
    two kept ones maps one to one when the history has exactly as many there.
    """
    found: list[int | None] = [None] * len(window)
    # Most windows are a head and a tail of the history's own objects: matched from
    # both ends in the window's length; only what lies between is looked up.
    end, stop = len(window), len(history)
    while end and stop and window[end - 1] is history[stop - 1]:
        end, stop = end - 1, stop - 1
        found[end] = stop
    start = 0
    while start < end and start < stop and window[start] is history[start]:
        found[start] = start
        start += 1
    if start < end:
        where = {id(history[index]): index for index in range(start, stop)}
        for position in range(start, end):
            found[position] = where.get(id(window[position]))
    indexes = list(found)
    before, run = -1, []  # the last known history index, and the unknown positions since
    for position, index in enumerate([*found, len(history)]):
        if index is None:
            run.append(position)
            continue
        if run and index - before - 1 == len(run):
            for offset, at in enumerate(run, start=1):
                indexes[at] = before + offset
        before, run = index, []
    return indexes


def _runs(positions: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Increasing positions as `(start, stop)` runs: `[0, 1, 5, 6, 7]` is `((0, 2), (5, 8))`."""
    runs: list[tuple[int, int]] = []
    for position in positions:
        if runs and runs[-1][1] == position:
            runs[-1] = (runs[-1][0], position + 1)
        else:
            runs.append((position, position + 1))
    return tuple(runs)


def _check_runs(name: str, runs: object, history: int) -> tuple[tuple[int, int], ...]:
    if not isinstance(runs, list | tuple):
        raise TypeError(f"WindowRecord.{name} must be a list of [start, stop] runs, not {runs!r}")
    checked: list[tuple[int, int]] = []
    end = 0
    for run in runs:
        if not (isinstance(run, list | tuple) and len(run) == 2):
            raise TypeError(f"WindowRecord.{name} must hold [start, stop] pairs, not {run!r}")
        start = whole_number(run[0], f"WindowRecord.{name}")
        stop = whole_number(run[1], f"WindowRecord.{name}")
        if not end <= start < stop <= history:
            raise ValueError(
                f"WindowRecord.{name} runs must be increasing, non-empty and within the "
                f"history's {history} messages, not {run!r}"
            )
        checked.append((start, stop))
        end = stop
    return tuple(checked)


@dataclass(frozen=True, slots=True)
class WindowRecord:
    """Which messages one model call was sent, and which strategy chose them.

    Positions index the live history as the store's `get_history()` returned it
    for the call (in a fork, the fork's own history), kept as `(start, stop)`
    runs: a window is mostly a head and a contiguous tail, so a few pairs.

    Attributes:
        strategy: The strategy's `repr()`: its name and parameters, e.g.
            `"FitTokens(4000)"` or `"StableWindow(max_tokens=24000, low_water=0.5)"`.
        history: How many messages the live history held at the call.
        positions: The history messages the window holds, as runs, in order.
        edited: The part of `positions` the strategy sent edited (results
            cleared or cut); the history keeps the original.
        added: Window messages that are in no history position (the loop's
            instructions, a strategy's own notes).
        summary: `summary_mark()` of the history: which compaction's summary
            it held (None: none yet). A later compaction changes the live
            history's positions, and its new summary tells a reader so.

    Raises:
        TypeError, ValueError: A field has the wrong type, or a run is empty,
            out of order or beyond `history`.

    Examples:
        >>> history = ["a", "b", "c", "d", "e"]
        >>> record = WindowRecord.of("SlidingWindow(max_messages=3)", history, history[2:])
        >>> record.positions, list(record.indexes())
        (((2, 5),), [2, 3, 4])
    """

    strategy: str
    history: int
    positions: tuple[tuple[int, int], ...] = ()
    edited: tuple[tuple[int, int], ...] = ()
    added: int = 0
    summary: str | None = None

    def __post_init__(self) -> None:
        if self.summary is not None and not isinstance(self.summary, str):
            raise TypeError(
                f"WindowRecord.summary must be a str or None, not {type(self.summary).__name__}"
            )
        if not isinstance(self.strategy, str):
            raise TypeError(
                f"WindowRecord.strategy must be a str, not {type(self.strategy).__name__}"
            )
        whole_number(self.history, "WindowRecord.history")
        whole_number(self.added, "WindowRecord.added")
        for name in ("positions", "edited"):
            runs = _check_runs(name, getattr(self, name), self.history)
            object.__setattr__(self, name, runs)
        kept = set(self.indexes())
        if any(index not in kept for index in _indexes(self.edited)):
            raise ValueError("WindowRecord.edited must be a part of positions")

    @classmethod
    def of(
        cls,
        strategy: str,
        history: Sequence[object],
        window: Sequence[object],
        *,
        unstored: int = 0,
        summary: str | None = None,
    ) -> WindowRecord:
        """The record of `window`, built from `history` by the strategy `strategy` describes.

        `history`'s first `unstored` messages are not the store's (a loop's
        instructions): window messages from them count as `added`, and so do
        messages a strategy repeated or moved before an earlier one (positions
        are kept in history order).
        """
        placed: list[int] = []
        edited: list[int] = []
        last = unstored - 1
        for index, message in zip(history_indexes(history, window), window, strict=True):
            if index is None or index <= last:
                continue
            last = index
            placed.append(index - unstored)
            if message is not history[index]:
                edited.append(index - unstored)
        added = len(window) - len(placed)
        return cls(strategy, len(history) - unstored, _runs(placed), _runs(edited), added, summary)

    def indexes(self) -> list[int]:
        """Every history position the window holds, in order."""
        return _indexes(self.positions)

    def to_dict(self) -> dict[str, Any]:
        """`{"strategy", "history", "positions", "edited", "added", "summary"}`.

        Runs are `[start, stop]` lists.
        """
        return {
            "strategy": self.strategy,
            "history": self.history,
            "positions": [list(run) for run in self.positions],
            "edited": [list(run) for run in self.edited],
            "added": self.added,
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WindowRecord:
        """A `WindowRecord` from `to_dict()` output.

        Raises:
            TypeError, ValueError: As for the constructor, a field is missing, or a key is unknown.
        """
        unknown = sorted(set(data) - set(_WINDOW_FIELDS))
        if unknown:
            raise ValueError(f"WindowRecord has no field {unknown[0]!r}; expected {_WINDOW_FIELDS}")
        if "strategy" not in data or "history" not in data:
            raise ValueError("WindowRecord needs 'strategy' and 'history'")
        return cls(**data)


def _indexes(runs: Sequence[tuple[int, int]]) -> list[int]:
    return [index for start, stop in runs for index in range(start, stop)]


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
        window: Which history messages the call was sent and which strategy
            chose them; None when not recorded (records made before it was).

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
    window: WindowRecord | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.window is not None and not isinstance(self.window, WindowRecord):
            raise TypeError(
                "UsageRecord.window must be a WindowRecord or None, "
                f"not {type(self.window).__name__}"
            )
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
            whole_number(self.estimated_input_tokens, "UsageRecord.estimated_input_tokens")
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
        `parent_session`, `call_id` and `subagent_session`, and a record of
        the window sent `window` (`WindowRecord.to_dict()`).
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
        if self.window is not None:
            data["window"] = self.window.to_dict()
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
        window = data.get("window")
        if window is not None and not isinstance(window, Mapping):
            raise TypeError(f"UsageRecord.window must be a dict or None, not {window!r}")
        rest = {k: v for k, v in data.items() if k not in ("usage", "window")}
        return cls(
            Usage.from_dict(usage),
            window=None if window is None else WindowRecord.from_dict(window),
            **rest,
        )
