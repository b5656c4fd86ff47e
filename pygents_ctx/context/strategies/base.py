"""The strategy protocol, and what budgeted strategies share: measuring and overflow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, cast, runtime_checkable

from pygents_ctx._checks import whole_number
from pygents_ctx.context.messages import Message
from pygents_ctx.context.tokens import (
    DEFAULT_COUNTER,
    TokenCounter,
    count_message_tokens,
    settings_key,
)
from pygents_ctx.errors import ContextOverflowError

__all__ = ["ContextStrategy", "WindowStep"]

OnOverflow: TypeAlias = Literal["keep", "raise"]


@runtime_checkable
class ContextStrategy(Protocol):
    """Builds the window a model sees from a conversation.

    `compact` never mutates its input or the messages in it, and returns the
    very same list object when it changed nothing, so callers can skip work by
    identity. Its output never separates a tool call from its result.

    A strategy may also build its window incrementally, over what it built
    before, with an optional `compact_since` method (see `WindowStep`);
    `Pipeline` and `UntilFits` call it on the stages that have one, and
    `compact` alone on the others. Only `compact` is required.
    """

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The window for `messages`: `messages` itself when nothing changes."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class WindowStep:
    """One window built by `compact_since`, and what a caller hands back on the next call.

    A strategy that builds its window incrementally has, beside `compact`,

        async def compact_since(
            self, messages: list[Message], previous: WindowStep | None, unchanged: int
        ) -> WindowStep

    where `previous` is the step it returned to this caller last time (None on
    the first call) and `unchanged` says how many leading messages of
    `messages` are those of the input of that call, in the same places (the
    same objects, or equal ones). The strategy trusts `unchanged` only when
    `previous` is the step it returned last: another caller may have called
    it since, and then it works as if nothing were known, and says that none
    of its window is unchanged (its last window was another caller's). So
    one instance shared by two pipelines stays correct, only slower. The
    window must equal what `compact(messages)` of a new instance returns,
    and be `messages` itself exactly when that is.

    `Pipeline` and `UntilFits` pass each stage's step and the previous stage's
    `unchanged` along, so a stage after an edit that only changed the newest
    messages rereads only those. The built-in editors (`ClearToolResults`,
    `ClearToolInputs`, `TruncateToolResults`, `DropToolRounds`), `FitTokens`,
    `Pipeline` and `UntilFits` have `compact_since`.

    Attributes:
        messages: The window. It may be a list the strategy keeps and changes
            on its next call: read it before calling again, never change it
            (`compact` returns a list of the caller's own).
        unchanged: How many leading messages of `messages` are those of the
            window of the previous step (equal, usually the same objects), in
            place (0 when not known).
        tokens: The window's token count, as the strategy counts, when it
            knows it without counting again (None: not known).
    """

    messages: list[Message]
    unchanged: int
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Measure:
    """How a budgeted strategy counts: a counter and the per-message settings.

    Counts are cached on each message, so measuring a history twice costs one
    cache lookup per message the second time.
    """

    counter: TokenCounter = DEFAULT_COUNTER
    per_message_overhead: int = 4
    tokens_per_media: int = 600
    _key: tuple[object, int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not callable(self.counter):
            raise TypeError(f"counter must be a callable str -> int, not {self.counter!r}")
        for name in ("per_message_overhead", "tokens_per_media"):
            whole_number(getattr(self, name), name)
        key = settings_key(self.counter, self.per_message_overhead, self.tokens_per_media)
        object.__setattr__(self, "_key", key)

    def __call__(self, message: Message) -> int:
        cached = message._tokens
        if cached is not None and cached[0] is self._key:  # the hot path: one identity check
            return cached[1]
        return count_message_tokens(
            message,
            self.counter,
            per_message_overhead=self.per_message_overhead,
            tokens_per_media=self.tokens_per_media,
        )

    def total(self, messages: Sequence[Message], start: int = 0, stop: int | None = None) -> int:
        """The tokens of `messages[start:stop]`."""
        return sum(map(self, messages[start:stop]))


def check_strategy(value: object, name: str) -> ContextStrategy:
    """`value` if it is a context strategy: an object (not a class) with a `compact` method.

    Raises:
        TypeError: It is a class, or has no `compact` method; `name` names it.
    """
    if isinstance(value, type):
        # A class has `compact` too, as an unbound function: it would fail at the first window.
        raise TypeError(
            f"{name} must be a strategy instance, not the class {value.__name__}; "
            f"write {value.__name__}(...)"
        )
    if not callable(getattr(value, "compact", None)):
        raise TypeError(
            f"{name} must have an async compact(messages) method, as a context strategy "
            f"(FitTokens(16_000), StableWindow(), ...) has; not {type(value).__name__}"
        )
    return cast("ContextStrategy", value)


def check_count(owner: str, name: str, value: object, least: int) -> int:
    """Return `value` if it is an int of at least `least`.

    Raises:
        TypeError: It is not an int (bools are not).
        ValueError: It is below `least`.
    """
    return whole_number(value, f"{owner} {name}", least=least)


def check_budget(owner: str, max_tokens: object, reserve_tokens: object = 0) -> int:
    """The usable budget, `max_tokens - reserve_tokens`, after checking both.

    Raises:
        TypeError: Either is not an int.
        ValueError: `max_tokens` is below 1, or the reserve is negative or leaves nothing.
    """
    budget = check_count(owner, "max_tokens", max_tokens, 1)
    reserve = check_count(owner, "reserve_tokens", reserve_tokens, 0)
    if reserve >= budget:
        raise ValueError(
            f"{owner} reserve_tokens ({reserve}) must be less than max_tokens "
            f"({budget}); lower the reserve or raise the budget"
        )
    return budget - reserve


def check_on_overflow(owner: str, on_overflow: object) -> OnOverflow:
    """Return `on_overflow` if it is "keep" or "raise".

    Raises:
        ValueError: It is anything else.
    """
    if on_overflow == "keep" or on_overflow == "raise":
        return on_overflow
    raise ValueError(f"{owner} on_overflow must be 'keep' or 'raise', not {on_overflow!r}")


def overflow(owner: str, on_overflow: OnOverflow, *, tokens: int, budget: int) -> None:
    """Called when even the smallest window is over budget: raise, or let it through.

    Raises:
        ContextOverflowError: `on_overflow` is "raise".
    """
    if on_overflow == "raise":
        raise ContextOverflowError(
            f"{owner}: the smallest window it can build (head, task and the newest "
            f"round) is {tokens} tokens, over the budget of {budget}; raise the budget, "
            f"shorten the newest round, or use on_overflow='keep'",
            tokens=tokens,
            budget=budget,
        )
