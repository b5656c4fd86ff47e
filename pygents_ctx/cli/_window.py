"""The `window` command, and its `--strategy` mini-language: a short spec to a real strategy.

`window` prints the window a strategy would build from a session's live
history, measured against a budget.

A spec is one or more stages separated by commas; each stage is a name,
optionally followed by `:` and a whole number (`k` multiplies by 1,000).
Several stages become a `Pipeline`, applied left to right:

    fit:8000                      FitTokens(8000)
    stable                        StableWindow(24000)
    sliding                       SlidingWindow(100)
    clear-results:3,fit:8k        Pipeline([ClearToolResults(3), FitTokens(8000)])
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from pygents_ctx.cli._db import with_session
from pygents_ctx.cli._render import Output, plural, render_message
from pygents_ctx.context.messages import Message, to_dict
from pygents_ctx.context.stores import SessionInfo, SQLiteContextStore
from pygents_ctx.context.strategies.base import ContextStrategy
from pygents_ctx.context.strategies.budget import FitTokens, MiddleOut
from pygents_ctx.context.strategies.compose import Pipeline
from pygents_ctx.context.strategies.edits import (
    ClearToolInputs,
    ClearToolResults,
    DropToolRounds,
    TruncateToolResults,
)
from pygents_ctx.context.strategies.stable import StableWindow
from pygents_ctx.context.strategies.window import SlidingWindow, TrimRounds, Truncate
from pygents_ctx.context.tokens import count_message_tokens
from pygents_ctx.context.usage import history_indexes

__all__ = [
    "DEFAULT_SPEC",
    "STAGES",
    "SpecError",
    "Stage",
    "StrategySpec",
    "parse_strategy",
    "read_number",
    "spec_help",
    "window",
]


class SpecError(ValueError):
    """A `--strategy` spec that cannot be read; the message says which stage and why."""


@dataclass(frozen=True, slots=True)
class Stage:
    """One name of the mini-language: the strategy it builds from its number.

    Attributes:
        name: What the spec writes, e.g. `"fit"`.
        build: Makes the strategy from the number.
        number: What the number means, for help and errors, e.g. `"MAX_TOKENS"`.
        default: The number when the spec gives none; None when it must be given.
        builds: The strategy it stands for, as help shows it, e.g. `"FitTokens(MAX_TOKENS)"`.
        budgeted: Whether the number is a token budget (the window is measured against it).
    """

    name: str
    build: Callable[[int], ContextStrategy]
    number: str
    default: int | None
    builds: str
    budgeted: bool = False


def _truncate_messages(limit: int) -> ContextStrategy:
    return Truncate(max_messages=limit)


def _truncate_chars(limit: int) -> ContextStrategy:
    return Truncate(max_chars=limit)


STAGES: Final[dict[str, Stage]] = {
    stage.name: stage
    for stage in (
        Stage("fit", FitTokens, "MAX_TOKENS", None, "FitTokens(MAX_TOKENS)", budgeted=True),
        Stage("middle-out", MiddleOut, "MAX_TOKENS", None, "MiddleOut(MAX_TOKENS)", budgeted=True),
        Stage(
            "stable", StableWindow, "MAX_TOKENS", 24_000, "StableWindow(MAX_TOKENS)", budgeted=True
        ),
        Stage("sliding", SlidingWindow, "MAX_MESSAGES", 100, "SlidingWindow(MAX_MESSAGES)"),
        Stage("rounds", TrimRounds, "MAX_ROUNDS", None, "TrimRounds(MAX_ROUNDS)"),
        Stage(
            "truncate-messages",
            _truncate_messages,
            "MAX_MESSAGES",
            None,
            "Truncate(max_messages=MAX_MESSAGES)",
        ),
        Stage(
            "truncate-chars", _truncate_chars, "MAX_CHARS", None, "Truncate(max_chars=MAX_CHARS)"
        ),
        Stage(
            "truncate-results",
            TruncateToolResults,
            "MAX_CHARS",
            500,
            "TruncateToolResults(MAX_CHARS)",
        ),
        Stage("clear-results", ClearToolResults, "KEEP_RECENT", 3, "ClearToolResults(KEEP_RECENT)"),
        Stage("clear-inputs", ClearToolInputs, "KEEP_RECENT", 3, "ClearToolInputs(KEEP_RECENT)"),
        Stage("drop-tool-rounds", DropToolRounds, "KEEP_RECENT", 5, "DropToolRounds(KEEP_RECENT)"),
    )
}

# The window when none is asked for: what `ContextConfig` builds without a strategy.
DEFAULT_SPEC: Final = "stable"

_NUMBER: Final = re.compile(r"(\d[\d_]*)(k?)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class StrategySpec:
    """A parsed spec: the strategy, the token budget it implies, and the text it came from.

    Attributes:
        strategy: The strategy (a `Pipeline` when the spec has several stages).
        budget: The smallest token budget among its budgeted stages (`fit`,
            `middle-out`, `stable`), or None when it has none.
        text: The spec as given.
    """

    strategy: ContextStrategy
    budget: int | None
    text: str


def parse_strategy(text: str) -> StrategySpec:
    """Read a strategy spec such as `"clear-results:3,fit:8000"`.

    Raises:
        SpecError: The spec is empty, has an empty stage, names an unknown
            strategy, misses a required number, has a number that is not a
            whole number, or a number the strategy refuses.

    Examples:
        >>> spec = parse_strategy("clear-results:3,fit:8k")
        >>> spec.strategy
        Pipeline([ClearToolResults(3, ...), FitTokens(8000)])
        >>> spec.budget
        8000
    """
    if not text.strip():
        raise SpecError("the strategy spec is empty; give one such as 'fit:8000' or 'sliding:50'")
    parts = text.split(",")
    strategies: list[ContextStrategy] = []
    budgets: list[int] = []
    for position, part in enumerate(parts, start=1):
        stage, number = _read_stage(part.strip(), position, text)
        try:
            strategies.append(stage.build(number))
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{part.strip()!r}: {exc}") from None
        if stage.budgeted:
            budgets.append(number)
    strategy = strategies[0] if len(strategies) == 1 else Pipeline(strategies)
    return StrategySpec(strategy, min(budgets) if budgets else None, text)


def _read_stage(part: str, position: int, text: str) -> tuple[Stage, int]:
    if not part:
        raise SpecError(f"stage {position} of {text!r} is empty; separate stages with one comma")
    name, _, argument = part.partition(":")
    name = name.strip().lower()
    stage = STAGES.get(name)
    if stage is None:
        close = difflib.get_close_matches(name, STAGES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SpecError(f"unknown strategy {name!r}{hint}; choose from {', '.join(sorted(STAGES))}")
    usage = f"{stage.name}:{stage.number}"
    if not argument.strip():
        if ":" in part or stage.default is None:
            raise SpecError(
                f"{part!r} needs a number: {usage} (e.g. {stage.name}:{_example(stage)})"
            )
        return stage, stage.default
    number = read_number(argument)
    if number is None:
        raise SpecError(
            f"{part!r}: {stage.number} must be a whole number such as "
            f"{stage.name}:{_example(stage)} (a 'k' suffix means thousands), not {argument!r}"
        )
    return stage, number


def read_number(text: str) -> int | None:
    """A whole number written as `8000`, `8_000` or `8k` (thousands); None if `text` is not one.

    Examples:
        >>> read_number("128k"), read_number("8_000"), read_number("-1")
        (128000, 8000, None)
    """
    match = _NUMBER.fullmatch(text.strip())
    if match is None:
        return None
    number = int(match.group(1).replace("_", ""))
    return number * 1000 if match.group(2) else number


def _example(stage: Stage) -> str:
    return "8000" if stage.budgeted else str(stage.default or 3)


def spec_help() -> str:
    """The stage names for `--help`, one per line: the form, then the strategy it builds."""
    lines = []
    for stage in STAGES.values():
        if stage.default is None:
            form, builds = f"{stage.name}:{stage.number}", stage.builds
        else:
            form = f"{stage.name}[:{stage.number}]"
            builds = f"{stage.builds}, default {stage.default}"
        lines.append(f"  {form:<34} {builds}")
    return "\n".join(lines)


# -- the window command -----------------------------------------------------------


def _budget_note(tokens: int, budget: int | None) -> str:
    if budget is None:
        return ""
    if tokens <= budget:
        return f"; budget {budget}: {budget - tokens} left"
    return f"; budget {budget}: over by {tokens - budget}"


def window(args: argparse.Namespace, out: Output) -> None:
    """`window`: the window `--strategy` (else `DEFAULT_SPEC`) builds from the live history."""
    chosen: StrategySpec | None = args.strategy
    spec = parse_strategy(DEFAULT_SPEC) if chosen is None else chosen

    async def build(
        store: SQLiteContextStore, info: SessionInfo
    ) -> tuple[SessionInfo, list[Message], list[Message]]:
        history = await store.get_history()
        return info, history, await spec.strategy.compact(list(history))

    info, history, built = with_session(args.db, args.session, build)
    budget = args.budget if args.budget is not None else spec.budget
    kept = {id(message) for message in history}
    indexes = history_indexes(history, built)
    counts = [count_message_tokens(message) for message in built]
    tokens, history_tokens = sum(counts), sum(map(count_message_tokens, history))
    if out.as_json:
        out.json(
            {
                "session_id": info.session_id,
                "strategy": spec.text,
                "default_strategy": chosen is None,
                "budget": budget,
                "tokens": tokens,
                "history_messages": len(history),
                "history_tokens": history_tokens,
                "messages": [
                    {
                        "history_index": index,
                        "edited": id(message) not in kept,
                        "tokens": count,
                        "message": to_dict(message),
                    }
                    for message, index, count in zip(built, indexes, counts, strict=True)
                ],
            }
        )
        return
    rows = [
        [
            "?" if index is None else str(index),
            message.role + ("" if id(message) in kept else "*"),
            str(count),
            render_message(message),
        ]
        for message, index, count in zip(built, indexes, counts, strict=True)
    ]
    out.table(["#", "role", "tokens", "content"], rows, right={0, 2})
    out.lines(
        [
            f"window: {len(built)} of {plural(len(history), 'message')}, "
            f"{plural(tokens, 'token')} (history {history_tokens})"
            f"{_budget_note(tokens, budget)}"
        ]
    )
    if any(id(message) not in kept for message in built):
        out.lines(["* edited by the strategy"])
    if chosen is None:
        out.lines(
            [
                f"strategy: {DEFAULT_SPEC} ({spec.strategy!r}), what ContextConfig uses when "
                "given none; --strategy SPEC builds another"
            ]
        )
