"""The model loop's three steps as tools for its turns: `model_ask`, `model_think`, `model_act`.

Each step is a turn on the agent, so hooks, pause, saving and restoring apply
to it; the step's tool finds the `ModelLoop` running it through a context
variable and does the work there. A step's arguments are what the store does
not hold: the user's new message for `model_ask`, and for `model_act` the ids
of the stored calls to run (and whether they wait for approvals).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextvars import ContextVar
from typing import Any, Final, Protocol

from pygents_ctx.model._replies import closing
from pygents_ctx.registry import ToolRegistry
from pygents_ctx.tools import Tool

__all__ = ["ACT", "ASK", "RUNNING", "STEP_TOOLS", "THINK", "register_step_tools"]


class SteppedLoop(Protocol):
    """What a step's tool calls on the loop that runs it (`ModelLoop`)."""

    def _ask(self, data: dict[str, Any]) -> AsyncIterator[Any]: ...

    def _think(self) -> AsyncIterator[Any]: ...

    def _act(
        self, call_ids: list[str], approvals: dict[str, Any] | None
    ) -> AsyncGenerator[Any, None]: ...


RUNNING: ContextVar[SteppedLoop | None] = ContextVar("pygents_model_loop", default=None)


def _loop(step: str) -> SteppedLoop:
    loop = RUNNING.get()
    if loop is None:
        raise RuntimeError(
            f"the model loop's step {step!r} ran outside ModelLoop.run() or stream(); "
            "run the agent through its ModelLoop"
        )
    return loop


async def model_ask(message: dict[str, Any]) -> AsyncIterator[Any]:
    """The user's message: into the conversation, then a model call."""
    async with closing(_loop("model_ask")._ask(message)) as values:
        async for value in values:
            yield value


async def model_think() -> AsyncIterator[Any]:
    """One model call: show the model the window, keep its reply, act on it or finish."""
    async with closing(_loop("model_think")._think()) as values:
        async for value in values:
            yield value


async def model_act(
    call_ids: list[str] | None = None,
    approvals: dict[str, Any] | None = None,
    calls: list[dict[str, Any]] | None = None,
) -> AsyncIterator[Any]:
    """Run the model's tool calls `call_ids`; their results go back as one message.

    The calls are read from the store, which holds them with the model's
    reply (the step carries their ids only). `approvals` maps each call
    that needs a person's approval to its decision (None while undecided);
    None means not yet looked at. `calls` is how agents saved by older
    versions name the calls (whole calls: only their ids are read).
    """
    if call_ids is None:
        call_ids = [str(call["id"]) for call in calls or ()]
    async with closing(_loop("model_act")._act(call_ids, approvals)) as values:
        async for value in values:
            yield value


# The loop's own steps: their arguments come from the loop itself (no check needed),
# and a failed step ends the run whatever the agent's on_tool_error says.
STEP_TOOLS: Final = tuple(
    Tool(step, validate=False, on_tool_error="raise")
    for step in (model_ask, model_think, model_act)
)
ASK, THINK, ACT = STEP_TOOLS


def register_step_tools(registry: ToolRegistry | None = None) -> None:
    """Register the steps' tools in `registry` (None: the current one); an agent saved
    mid-loop names them to be restored."""
    for step in STEP_TOOLS:
        (ToolRegistry.current() if registry is None else registry).register(step)


# Not registered at import: `ToolRegistry.all()` and `definitions()` list the program's
# tools only. A loop registers them when made; loading an agent saved mid-loop (or
# `Turn("model_think")`) registers them when it looks the first one up by name.
ToolRegistry._provide((step.key for step in STEP_TOOLS), register_step_tools)
