"""The checks of `ModelLoop`'s arguments: each wrong one named, before the loop changes anything.

The option groups (`LoopLimits`, `ToolPolicy`, `LeasePolicy`) check their own
fields when they are made; here each is checked to be one.
"""

from __future__ import annotations

from pygents_ctx.agent import Agent
from pygents_ctx.model.base import ModelSettings
from pygents_ctx.model.options import LeasePolicy, LoopLimits, ToolPolicy
from pygents_ctx.model.retry import RetryPolicy

__all__ = ["check_options"]


def check_options(
    agent: object,
    model: object,
    *,
    instructions: object,
    settings: object,
    retry: object,
    limits: object,
    tool_policy: object,
    lease: object,
) -> None:
    """Refuse a wrong argument of `ModelLoop(...)`, naming it and the fix.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: The agent has no context.
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
    if instructions is not None and not isinstance(instructions, str):
        raise TypeError(f"ModelLoop instructions must be a str, not {instructions!r}")
    if settings is not None and not isinstance(settings, ModelSettings):
        raise TypeError(f"ModelLoop settings must be a ModelSettings, not {settings!r}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(f"ModelLoop retry must be a RetryPolicy, not {retry!r}")
    if not isinstance(limits, LoopLimits):
        raise TypeError(
            f"ModelLoop limits must be a LoopLimits (e.g. LoopLimits(max_steps=10)), not {limits!r}"
        )
    if tool_policy is not None and not isinstance(tool_policy, ToolPolicy):
        raise TypeError(
            f"ModelLoop tool_policy must be a ToolPolicy (e.g. ToolPolicy(parallel=1)), "
            f"not {tool_policy!r}"
        )
    if lease is not None and not isinstance(lease, LeasePolicy):
        raise TypeError(
            f"ModelLoop lease must be a LeasePolicy (e.g. LeasePolicy(wait=5)), or None "
            f"to hold no lease, not {lease!r}"
        )
