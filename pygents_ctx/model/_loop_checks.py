"""The checks of `ModelLoop`'s options: each wrong one named, before the loop changes anything."""

from __future__ import annotations

import math

from pygents_ctx.agent import Agent
from pygents_ctx.model.base import ModelSettings, Pricing
from pygents_ctx.model.retry import RetryPolicy

__all__ = ["check_options"]


def _positive(name: str, value: object, kind: type | tuple[type, ...] = int) -> None:
    if (
        isinstance(value, bool) or not isinstance(value, kind) or not (0 < value < math.inf)  # type: ignore[operator]
    ):
        raise ValueError(f"ModelLoop {name} must be a positive number, not {value!r}")


def check_options(
    agent: object,
    model: object,
    *,
    max_steps: object,
    max_tokens: object,
    max_cost: object,
    pricing: object,
    parallel_tools: object,
    tool_timeout: object,
    step_timeout: object,
    instructions: object,
    settings: object,
    retry: object,
) -> None:
    """Refuse a wrong option of `ModelLoop(...)`, naming it and the fix.

    Raises:
        TypeError: An option has the wrong type.
        ValueError: The agent has no context, a limit is not positive, or
            `max_cost` is given without `pricing`.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"ModelLoop needs an Agent, not {type(agent).__name__}")
    if agent.context is None:
        raise ValueError(
            f"ModelLoop needs an agent with a conversation store; create agent "
            f"{agent.name!r} with context=ContextConfig(store, strategy)"
        )
    if not (
        callable(getattr(model, "complete", None)) and callable(getattr(model, "stream", None))
    ):
        raise TypeError(
            f"ModelLoop model must have complete() and stream() (a Model), not {model!r}"
        )
    for name, limit in (("max_steps", max_steps), ("max_tokens", max_tokens)):
        if limit is not None:
            _positive(name, limit)
    if max_cost is not None:
        _positive("max_cost", max_cost, (int, float))
        if pricing is None:
            raise ValueError("ModelLoop max_cost needs pricing=Pricing(input=..., output=...)")
    if pricing is not None and not isinstance(pricing, Pricing):
        raise TypeError(f"ModelLoop pricing must be a Pricing, not {pricing!r}")
    _positive("parallel_tools", parallel_tools)
    _positive("tool_timeout", tool_timeout, (int, float))
    _positive("step_timeout", step_timeout, (int, float))
    if instructions is not None and not isinstance(instructions, str):
        raise TypeError(f"ModelLoop instructions must be a str, not {instructions!r}")
    if settings is not None and not isinstance(settings, ModelSettings):
        raise TypeError(f"ModelLoop settings must be a ModelSettings, not {settings!r}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(f"ModelLoop retry must be a RetryPolicy, not {retry!r}")
