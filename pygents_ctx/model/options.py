"""The options of a `ModelLoop`, in three small groups: its limits, its tool calls, its lease.

Each group is a frozen value, checked when it is made (a wrong field raises
at once, naming the field and the fix), so one can be defined once and given
to many loops: `ModelLoop(agent, model, limits=LoopLimits(max_steps=5))`.
A sub-agent (`ModelLoop.as_tool`) runs each call on a copy of its loop, groups
included (without the lease: its branch's conversation is its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from pygents_ctx._checks import number, whole_number
from pygents_ctx.context.stores.lease import check_lease_options
from pygents_ctx.model.base import Pricing
from pygents_ctx.model.offload import ToolResultOffload

__all__ = ["LeasePolicy", "LoopLimits", "ToolPolicy"]

_NO_LIMIT: Final = "None means no limit"
_SECONDS: Final = "a number of seconds"


@dataclass(frozen=True, slots=True)
class LoopLimits:
    """How far one run of a `ModelLoop` (one `run()` or `stream()`) may go.

    A run that reaches `max_steps`, `max_tokens` or `max_cost` ends with
    `LoopFinished(reason=...)` before the model call that would pass it.

    Args:
        max_steps: The most model calls per run (None: no limit).
        max_tokens: A token budget per run: input and output tokens together,
            as the provider reported them, plus the next window's estimate
            (None: none).
        max_cost: A cost budget per run, in the currency of `pricing` (None: none).
        pricing: The model's prices; needed by `max_cost`.
        step_timeout: Seconds one step (a model call with its retries, or a
            reply's tool calls) may take; past it the run raises `TurnTimeoutError`.
        output_retries: With `ModelLoop(output_type=...)`: how many answers in
            a row that do not fit are sent back with what was wrong before
            `OutputValidationError` is raised.

    Raises:
        TypeError: A limit or timeout is not a number (`max_steps`, `max_tokens`
            and `output_retries` not an int), or `pricing` is not a `Pricing`.
        ValueError: A limit or timeout is not positive and finite,
            `output_retries` is negative, or `max_cost` is given without `pricing`.

    Examples:
        >>> LoopLimits(max_steps=5).max_steps
        5
        >>> LoopLimits(max_steps=0)
        Traceback (most recent call last):
        ...
        ValueError: LoopLimits.max_steps must be at least 1, not 0; None means no limit
    """

    max_steps: int | None = 20
    max_tokens: int | None = None
    max_cost: float | None = None
    pricing: Pricing | None = None
    step_timeout: float = 600.0
    output_retries: int = 2

    def __post_init__(self) -> None:
        if self.max_steps is not None:
            whole_number(self.max_steps, "LoopLimits.max_steps", least=1, fix=_NO_LIMIT)
        if self.max_tokens is not None:
            whole_number(self.max_tokens, "LoopLimits.max_tokens", least=1, fix=_NO_LIMIT)
        if self.max_cost is not None:
            number(self.max_cost, "LoopLimits.max_cost", above=True, fix=_NO_LIMIT)
            if self.pricing is None:
                raise ValueError(
                    "LoopLimits.max_cost needs pricing=Pricing(input=..., output=...) "
                    "to count the cost"
                )
        if self.pricing is not None and not isinstance(self.pricing, Pricing):
            raise TypeError(f"LoopLimits.pricing must be a Pricing, not {self.pricing!r}")
        number(self.step_timeout, "LoopLimits.step_timeout", above=True, fix=_SECONDS)
        whole_number(self.output_retries, "LoopLimits.output_retries", fix="0 never asks again")


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How a `ModelLoop` runs the tool calls of one reply, and keeps their results.

    Args:
        parallel: How many calls of one reply run at once (1: one after another).
        timeout: Seconds each call may take; past it the call's result is an
            error the model reads.
        offload: Moves a result over its token budget to a blob store and
            keeps a stub in the history, which the model pages through with
            the `read_tool_result` tool (`ToolResultOffload`); None keeps
            every result whole. Default: a `ToolResultOffload()` of the
            policy's own, beside the conversation.
        search_history: Offers the `search_history` tool while the window
            is not the whole stored conversation (the strategy left messages
            out or edited them, or a compaction archived some), so the model
            can find what it no longer sees. Not offered when the agent keeps
            no history (`HistoryRetention.NONE`) or has a tool of that name;
            False never offers it (give the tool to the loop to offer it always).

    Raises:
        TypeError: `parallel` is not an int, `timeout` not a number, `offload`
            not a `ToolResultOffload` or None, or `search_history` not a bool.
        ValueError: `parallel` or `timeout` is not positive (`timeout` finite).

    Examples:
        >>> ToolPolicy(parallel=1, offload=None, search_history=False)
        ToolPolicy(parallel=1, timeout=60.0, offload=None, search_history=False)
    """

    parallel: int = 4
    timeout: float = 60.0
    offload: ToolResultOffload | None = field(default_factory=ToolResultOffload)
    search_history: bool = True

    def __post_init__(self) -> None:
        whole_number(self.parallel, "ToolPolicy.parallel", least=1)
        number(self.timeout, "ToolPolicy.timeout", above=True, fix=_SECONDS)
        if self.offload is not None and not isinstance(self.offload, ToolResultOffload):
            raise TypeError(
                f"ToolPolicy.offload must be a ToolResultOffload, or None to keep results "
                f"whole, not {self.offload!r}"
            )
        if not isinstance(self.search_history, bool):
            raise TypeError(
                f"ToolPolicy.search_history must be a bool (False: never offer the tool), "
                f"not {self.search_history!r}"
            )


@dataclass(frozen=True, slots=True)
class LeasePolicy:
    """How a `ModelLoop` holds its session's lease for each run.

    While a run holds the lease, no other run (in this process or any other
    sharing the database) writes to the session; a new session is created
    for it. `ModelLoop(lease=None)` takes no lease.

    Args:
        ttl: Seconds the lease outlives its last renewal: how long a crashed
            run keeps others waiting.
        wait: Seconds a run waits for another run's lease before raising
            `SessionBusyError` (0: at once; `math.inf`: as long as it takes).

    Raises:
        TypeError: `ttl` or `wait` is not a number.
        ValueError: `ttl` is not positive and finite, or `wait` is negative.

    Examples:
        >>> LeasePolicy(wait=5).wait
        5.0
    """

    ttl: float = 30.0
    wait: float = 0.0

    def __post_init__(self) -> None:
        ttl, wait = check_lease_options(
            self.ttl, self.wait, names=("LeasePolicy.ttl", "LeasePolicy.wait")
        )
        # Kept as the seconds they were checked as (wait=False is 0.0): set once, here.
        object.__setattr__(self, "ttl", ttl)
        object.__setattr__(self, "wait", wait)
