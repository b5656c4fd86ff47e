"""Composing strategies: `Pipeline` runs them all, `UntilFits` only until the window fits.

`UntilFits.for_model` sizes the budget from a model's context window, looked up
in `MODEL_CONTEXT_WINDOWS`: a plain dict from model-name prefix to tokens that
ships with the major OpenAI, Anthropic and Gemini families and that
`register_model` extends.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterable
from typing import Final

from pygents_ctx._checks import fraction
from pygents_ctx.context.messages import Message
from pygents_ctx.context.strategies.base import (
    ContextStrategy,
    Measure,
    OnOverflow,
    WindowStep,
    check_budget,
    check_count,
    check_on_overflow,
    check_strategy,
)
from pygents_ctx.context.strategies.pinned import PinnedWindow, Window
from pygents_ctx.context.strategies.stable import StableWindow
from pygents_ctx.context.tokens import DEFAULT_COUNTER, TokenCounter
from pygents_ctx.errors import ContextOverflowError, UnknownModelError

__all__ = [
    "MODEL_CONTEXT_WINDOWS",
    "Pipeline",
    "UntilFits",
    "model_context_window",
    "register_model",
]


MODEL_CONTEXT_WINDOWS: Final[dict[str, int]] = {
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 272_000,  # a 400k window, of which 128k are for the output
    "gpt-5-chat": 128_000,
    "gpt-5.1": 272_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    # Google
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
}
"""The most tokens a prompt may hold, by model name or name prefix.

Where a provider caps the input below the whole window (as for `gpt-5`), the
cap is listed. It is a plain dict: add to it with `register_model`, which
checks the entry. See `model_context_window` for how names are matched.
"""

# A name continues past a prefix with one of these, as in `gpt-4o-2024-08-06`,
# `claude-3-5-sonnet@20240620` or `llama3:8b`: `gpt-4` matches `gpt-4-0613`, not `gpt-4o`.
_SEPARATORS: Final = "-@:"


def register_model(name: str, context_window: int) -> None:
    """Add a model (or a family, by prefix) to `MODEL_CONTEXT_WINDOWS`, or change one.

    Args:
        name: The model name, or a prefix of the names of a family: `"my-llm"`
            also covers `"my-llm-2025-01-01"` and `"my-llm-mini"`.
        context_window: The most tokens a prompt to it may hold.

    Raises:
        TypeError: `context_window` is not an int.
        ValueError: `name` is empty or not a string, or `context_window` is below 1.

    Examples:
        >>> register_model("acme-chat", 32_000)
        >>> model_context_window("acme-chat-2025-06-01")
        32000
        >>> del MODEL_CONTEXT_WINDOWS["acme-chat"]  # it is a plain dict
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"register_model name must be a non-empty model name, not {name!r}")
    MODEL_CONTEXT_WINDOWS[name] = check_count("register_model", "context_window", context_window, 1)


def model_context_window(name: str) -> int:
    """The tokens a prompt to the model `name` may hold, from `MODEL_CONTEXT_WINDOWS`.

    The longest listed prefix of `name` that ends where `name` does, or before
    a `-`, `@` or `:`, wins, so dated and variant names resolve to their family
    (`gpt-4o-2024-08-06` to `gpt-4o`) while `gpt-4` does not claim `gpt-4o`.
    A provider prefix such as `openai/` or `models/` is ignored when the full
    name is not listed.

    Raises:
        UnknownModelError: No listed prefix matches; the message says how to
            register the model.
        TypeError: `name` is not a string.

    Examples:
        >>> model_context_window("claude-3-5-sonnet-20241022")
        200000
    """
    if not isinstance(name, str):
        raise TypeError(f"a model name must be a str, not {type(name).__name__}")
    candidates = [name]
    if "/" in name:
        candidates.append(name.rsplit("/", 1)[1])
    for candidate in candidates:
        window = _lookup(candidate)
        if window is not None:
            return window
    raise UnknownModelError(
        f"no context window is known for model {name!r}; register it with "
        f"register_model({name!r}, <tokens>), or give UntilFits a max_tokens"
    )


def _lookup(name: str) -> int | None:
    end = len(name)
    while end > 0:
        window = MODEL_CONTEXT_WINDOWS.get(name[:end])
        if window is not None:
            return window
        end = max(name.rfind(separator, 0, end) for separator in _SEPARATORS)
    return None


def _check_strategies(owner: str, strategies: object) -> tuple[ContextStrategy, ...]:
    if isinstance(strategies, ContextStrategy):
        raise TypeError(
            f"{owner} takes a list of strategies; wrap the one strategy in a list: "
            f"{owner}([{strategies!r}])"
        )
    if not isinstance(strategies, Iterable) or isinstance(strategies, str | bytes):
        raise TypeError(f"{owner} takes a list of strategies, not {type(strategies).__name__}")
    checked = tuple(strategies)
    for index, strategy in enumerate(checked):
        check_strategy(strategy, f"{owner} strategies[{index}]")
    return checked


def _same_measure(strategy: ContextStrategy, measure: Measure) -> bool:
    """True if `strategy` counts tokens as `measure` does."""
    return getattr(strategy, "measure", None) == measure


def _strategies_repr(strategies: tuple[ContextStrategy, ...]) -> str:
    return f"[{', '.join(map(repr, strategies))}]"


class _Staged:
    """A composition of stages (`Pipeline`, `UntilFits`).

    Its `compact` and `compact_since` run the subclass's `_run`, which keeps
    the step it made last in `_step`.
    """

    _step: WindowStep | None

    async def _run(self, messages: list[Message], unchanged: int) -> WindowStep:
        raise NotImplementedError

    async def compact(self, messages: list[Message]) -> list[Message]:
        """The window the stages make (`messages` itself if they changed nothing)."""
        window = (await self._run(messages, 0)).messages
        return window if window is messages else list(window)

    async def compact_since(
        self, messages: list[Message], previous: WindowStep | None, unchanged: int
    ) -> WindowStep:
        """`compact`, each stage over what it built before (see `WindowStep`).

        `unchanged` is trusted only when `previous` is this composition's own last step.
        """
        trusted = previous is not None and previous is self._step
        step = await self._run(messages, unchanged if trusted else 0)
        return step if trusted else WindowStep(step.messages, 0, step.tokens)


class Pipeline(_Staged):
    """Apply strategies in order, each one's output feeding the next.

    Put cheap, lossless edits first (clipping tool output) and lossy selection
    last (a window, a backstop). Each stage keeps the strategy contract, so the
    pipeline does too: when no stage changes anything it returns its input
    itself. An empty pipeline is allowed and changes nothing.

    A pipeline that starts with a window builder (a `StableWindow` or a
    `PinnedWindow`) builds windows too (`build`), each with the prefix it
    shares with the one before, where a model adapter places its prompt-cache
    breakpoints: `Pipeline([StableWindow(), ClearToolResults()])` keeps them.

    Args:
        strategies: The stages, in the order they run.

    Raises:
        TypeError: `strategies` is not a list (a lone strategy must be wrapped
            in one), or a stage has no `compact` method.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> from pygents_ctx.context.strategies.window import SlidingWindow, TrimRounds
        >>> history = [Message("user", "task")] + [
        ...     Message("assistant" if i % 2 else "user", f"turn {i}") for i in range(10)
        ... ]
        >>> pipeline = Pipeline([TrimRounds(3), SlidingWindow(5)])
        >>> [m.text for m in asyncio.run(pipeline.compact(history))]
        ['task', 'turn 6', 'turn 7', 'turn 8', 'turn 9']
    """

    def __init__(self, strategies: Iterable[ContextStrategy]) -> None:
        self.strategies = _check_strategies("Pipeline", strategies)
        self._last: list[Message] = []  # the window `build` returned last
        self._chain = _Chain(len(self.strategies))
        self._step: WindowStep | None = None

    def __repr__(self) -> str:
        return f"Pipeline({_strategies_repr(self.strategies)})"

    def __copy__(self) -> Pipeline:
        """The stages copied, nothing built yet: a branch's window follows its own conversation."""
        return Pipeline([copy.copy(strategy) for strategy in self.strategies])

    @property
    def builds_windows(self) -> bool:
        """Whether the first stage is a window builder (a `StableWindow` or a `PinnedWindow`)."""
        return bool(self.strategies) and isinstance(self.strategies[0], PinnedWindow | StableWindow)

    async def build(self, messages: list[Message]) -> Window:
        """The first stage's window of `messages`, after the later stages' edits.

        The `Window` has the first stage's `pin` and `repinned`, the edited
        messages' token count (counted as the first stage counts), and
        `stable_prefix`: how many leading messages it shares with the window
        this pipeline built last, at most as many as the first stage's window
        shares. An edit of an old message (a tool result cleared as it ages)
        ends it there, so the prefix before the edit is still served from the
        provider's cache.

        Raises:
            TypeError: The first stage is not a `StableWindow` or a `PinnedWindow`
                (see `builds_windows`); use `compact`.
            ContextOverflowError: As the first stage's `build`.
        """
        first = self.strategies[0] if self.strategies else None
        if not isinstance(first, PinnedWindow | StableWindow):
            raise TypeError(
                "Pipeline.build needs a StableWindow or a PinnedWindow as the first stage, "
                f"not {type(first).__name__}: put the window builder first, or use compact()"
            )
        self._step = None  # a later compact_since does not follow on from this input
        window = await first.build(messages)
        # The window builder's stable prefix is what the later stages may take as unchanged.
        unchanged = 0 if window.repinned else window.stable_prefix
        chain, self._chain = self._chain, _Chain(len(self.strategies))
        try:
            step = await chain.run(self.strategies, window.messages, unchanged, 1)
        finally:
            self._chain = chain
        edited = step.messages if step.messages is window.messages else list(step.messages)
        last, self._last = self._last, edited
        shared, most = 0, min(window.stable_prefix, len(edited), len(last))
        while shared < most and (edited[shared] is last[shared] or edited[shared] == last[shared]):
            shared += 1
        tokens = window.tokens if edited is window.messages else first.measure.total(edited)
        return Window(edited, tokens, window.pin, window.repinned, shared)

    async def _run(self, messages: list[Message], unchanged: int) -> WindowStep:
        self._step = None
        # Taken out while in use: a call made meanwhile (a stage awaits) starts from
        # nothing known, rather than read the stages' steps half updated.
        chain, self._chain = self._chain, _Chain(len(self.strategies))
        try:
            step = await chain.run(self.strategies, messages, unchanged)
        finally:
            self._chain = chain
        self._step = step
        return step


class _Chain:
    """What a composition remembers of its stages, to call each over what it built before.

    Per stage: the `WindowStep` it returned last, whether it returned its own
    input last (for a stage with only `compact`: then its output is as
    unchanged as its input), and the fewest messages its input kept unchanged
    since it last ran (a stage after one that fitted does not run).
    """

    __slots__ = ("floors", "steps", "through")

    def __init__(self, size: int) -> None:
        self.steps: list[WindowStep | None] = [None] * size
        self.through = [False] * size
        self.floors = [0] * (size + 1)  # the last: the output's, unused

    def reset(self) -> None:
        """Forget every stage's step: after a failed call, nothing known is trusted."""
        size = len(self.steps)
        self.steps, self.through, self.floors = [None] * size, [False] * size, [0] * (size + 1)

    async def call(
        self, index: int, strategy: ContextStrategy, messages: list[Message], unchanged: int
    ) -> WindowStep:
        """Run stage `index` on `messages`; its output's unchanged count goes to the next stage."""
        floor = min(self.floors[index], unchanged)
        self.floors[index] = sys.maxsize
        since = getattr(strategy, "compact_since", None)
        if since is not None:
            step: WindowStep = await since(messages, self.steps[index], floor)
            self.steps[index] = step
        else:
            output = await strategy.compact(messages)
            through, self.through[index] = self.through[index], output is messages
            step = WindowStep(output, floor if output is messages and through else 0)
        self.floors[index + 1] = min(self.floors[index + 1], step.unchanged)
        return step

    async def run(
        self,
        strategies: tuple[ContextStrategy, ...],
        messages: list[Message],
        unchanged: int,
        first: int = 0,
    ) -> WindowStep:
        """Every stage from `first` on, each on the previous one's output."""
        step = WindowStep(messages, unchanged)
        try:
            for index in range(first, len(strategies)):
                step = await self.call(index, strategies[index], step.messages, step.unchanged)
        except BaseException:
            self.reset()
            raise
        return step


class UntilFits(_Staged):
    """Apply strategies in order only until the window fits `max_tokens`.

    The window is measured before the first strategy (if it fits, the input is
    returned as is) and after each one; the first output that fits is
    returned and the strategies after it do not run. Order them from the
    gentlest to the harshest. If the window is still over after the last,
    `on_overflow` decides: `"keep"` returns the last output, `"raise"` raises
    `ContextOverflowError`.

    Measuring reads counts cached on the messages, newest first, and stops
    once over the budget, so a long history costs what fits in the window.
    Each stage is called over what it built before (`compact_since`, see
    `WindowStep`), and the part of a stage's output that it left unchanged
    is counted as a running total, so a step late in a long run costs what
    changed, not the window. Use one instance per conversation for that
    (sharing one is correct, only slower). Use the same counter settings as
    the budgeted strategies inside (the defaults are the same): a message
    caches one count, and counting it under other settings on every call
    means tokenizing it again each time.

    Args:
        max_tokens: The budget for the prompt.
        strategies: The strategies to try, in order; may be empty.
        counter: How to count text (default: `EstimatedTokenCounter()`).
        per_message_overhead: Tokens added per message.
        tokens_per_media: Tokens counted per image.
        on_overflow: What to do when the last strategy's output is still over.

    Raises:
        TypeError: `strategies` is not a list of strategies, `max_tokens` or
            a per-message setting is not an int, or `counter` is not callable.
        ValueError: `max_tokens` is below 1, a per-message setting is
            negative, or `on_overflow` is not "keep" or "raise".

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message
        >>> from pygents_ctx.context.strategies.window import SlidingWindow, TrimRounds
        >>> text = "the quick brown fox jumps over the lazy dog"  # 10 tokens
        >>> history = [Message("user", "task")] + [
        ...     Message("assistant" if i % 2 else "user", text) for i in range(20)
        ... ]
        >>> fit = UntilFits(200, [TrimRounds(8), TrimRounds(4), TrimRounds(1)])
        >>> len(asyncio.run(fit.compact(history)))  # TrimRounds(4) was enough
        9
    """

    def __init__(
        self,
        max_tokens: int,
        strategies: Iterable[ContextStrategy],
        *,
        counter: TokenCounter = DEFAULT_COUNTER,
        per_message_overhead: int = 4,
        tokens_per_media: int = 600,
        on_overflow: OnOverflow = "keep",
    ) -> None:
        self.max_tokens = check_budget("UntilFits", max_tokens)
        self.strategies = _check_strategies("UntilFits", strategies)
        self.measure = Measure(counter, per_message_overhead, tokens_per_media)
        self.on_overflow = check_on_overflow("UntilFits", on_overflow)
        self._chain = _Chain(len(self.strategies))
        self._step: WindowStep | None = None
        self._exit = -2  # which stage's output the last call returned (-1: its input)
        # Per output of the chain (0: the input): how many leading messages were
        # counted, and their tokens.
        self._sums: list[tuple[int, int] | None] = [None] * (len(self.strategies) + 1)

    @classmethod
    def for_model(
        cls,
        name: str,
        strategies: Iterable[ContextStrategy],
        ratio: float = 0.8,
        *,
        counter: TokenCounter = DEFAULT_COUNTER,
        per_message_overhead: int = 4,
        tokens_per_media: int = 600,
        on_overflow: OnOverflow = "keep",
    ) -> UntilFits:
        """An `UntilFits` whose budget is `ratio` of the model's context window.

        `max_tokens` is `int(model_context_window(name) * ratio)`; the rest of
        the window is left for the reply and for the error of the token
        estimate. The other arguments are those of `UntilFits`.

        Raises:
            UnknownModelError: The model is not in `MODEL_CONTEXT_WINDOWS`
                (add it with `register_model`).
            TypeError: `ratio` is not a number.
            ValueError: `ratio` is not above 0 and at most 1.

        Examples:
            >>> from pygents_ctx.context.strategies.window import SlidingWindow
            >>> UntilFits.for_model("gpt-4o-2024-08-06", [SlidingWindow()]).max_tokens
            102400
        """
        ratio = fraction(ratio, "UntilFits.for_model ratio")
        window = model_context_window(name)
        return cls(
            max(1, int(window * ratio)),
            strategies,
            counter=counter,
            per_message_overhead=per_message_overhead,
            tokens_per_media=tokens_per_media,
            on_overflow=on_overflow,
        )

    def __repr__(self) -> str:
        overflow = "" if self.on_overflow == "keep" else f", on_overflow={self.on_overflow!r}"
        return f"UntilFits({self.max_tokens}, {_strategies_repr(self.strategies)}{overflow})"

    async def _run(self, messages: list[Message], unchanged: int) -> WindowStep:
        self._step = None
        last, self._exit = self._exit, -2
        # Taken out while in use, as in `Pipeline`: a call made meanwhile knows nothing.
        chain, self._chain = self._chain, _Chain(len(self.strategies))
        sums, self._sums = self._sums, [None] * len(self._sums)
        try:
            return await self._fit(messages, unchanged, chain, sums, last)
        finally:
            self._chain, self._sums = chain, sums

    async def _fit(
        self,
        messages: list[Message],
        unchanged: int,
        chain: _Chain,
        sums: list[tuple[int, int] | None],
        last: int,
    ) -> WindowStep:
        chain.floors[0] = min(chain.floors[0], unchanged)
        step, exit = WindowStep(messages, unchanged), -1
        try:
            tokens = self._count(sums, 0, messages, unchanged)
            if tokens is None:
                for index, strategy in enumerate(self.strategies):
                    output = await chain.call(index, strategy, messages, chain.floors[index])
                    if output.messages is messages:  # an unchanged window is still over
                        sums[index + 1] = None  # what was counted there is not its input
                        continue
                    messages, step, exit = output.messages, output, index
                    if output.tokens is not None and _same_measure(strategy, self.measure):
                        # The stage counted its window as this would: no need to again.
                        tokens = output.tokens if output.tokens <= self.max_tokens else None
                        sums[index + 1] = None  # what was counted there is not this
                    else:
                        tokens = self._count(sums, index + 1, messages, output.unchanged)
                    if tokens is not None:
                        break
                else:
                    self._overflow(messages)
        except BaseException:
            chain.reset()
            sums[:] = [None] * len(sums)
            raise
        # The same stage's output as last time: as unchanged as that stage says.
        self._step = WindowStep(step.messages, step.unchanged if exit == last else 0, tokens)
        self._exit = exit
        return self._step

    def _count(
        self, sums: list[tuple[int, int] | None], at: int, messages: list[Message], unchanged: int
    ) -> int | None:
        """The tokens of `messages`, output `at` of the chain (0: the input); None if over.

        The newest messages, after the `unchanged` ones, are counted newest first,
        stopping once over the budget. The unchanged ones are counted as a running
        total kept per output, from where the last count stopped, and only as far
        as needed: a step costs what changed, not the window.
        """
        measure, budget = self.measure, self.max_tokens
        used = 0
        for index in range(len(messages) - 1, unchanged - 1, -1):
            used += measure(messages[index])
            if used > budget:
                return None
        known = sums[at]
        mark, total = known if known is not None and known[0] <= unchanged else (0, 0)
        while mark < unchanged and used + total <= budget:
            total += measure(messages[mark])
            mark += 1
        sums[at] = mark, total
        used += total
        return None if used > budget else used

    def _overflow(self, messages: list[Message]) -> None:
        if self.on_overflow == "raise":
            tokens, budget = self.measure.total(messages), self.max_tokens
            raise ContextOverflowError(
                f"UntilFits: after all {len(self.strategies)} strategies the window is "
                f"{tokens} tokens, over the budget of {budget}; add a harsher strategy "
                f"(e.g. FitTokens) last, raise the budget, or use on_overflow='keep'",
                tokens=tokens,
                budget=budget,
            )
