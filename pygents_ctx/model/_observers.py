"""Watchers of a `ModelLoop`'s runs, model calls and tool calls (tracing builds on them).

Hooks see turns, not the spans of time a tracer needs: a run from its first
step to its finish (made current while its steps run, so what the steps do
nests under it), one model call with its window and response, one tool call
with its call id and the exception it raised (which the loop turns into an
error result the model reads). `OBSERVERS` is empty unless something
(`pygents_ctx.integrations.tracing.instrument()`) adds one, and the loop
checks it with a single truthiness test, so watching costs nothing when off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from pygents_ctx.context.config import PromptWindow
    from pygents_ctx.context.messages import ToolResultBlock, ToolUseBlock
    from pygents_ctx.model.base import ModelResponse
    from pygents_ctx.model.events import LoopFinished

__all__ = [
    "OBSERVERS",
    "LoopObserver",
    "ModelCallWatch",
    "RunWatch",
    "ToolCallWatch",
    "watch_model_call",
    "watch_run",
    "watch_tool_call",
]

W = TypeVar("W")


class RunWatch(Protocol):
    """One run of a loop, watched."""

    def resume(self) -> None:
        """The run's steps are about to run (again): make the run current."""

    def pause(self) -> None:
        """They stopped (the run yields an event, or ends): undo `resume`."""

    def end(self, finished: LoopFinished | None, error: BaseException | None) -> None:
        """The run ended: how (`finished`), or the exception that ended it."""


class ModelCallWatch(Protocol):
    """One model call, watched."""

    def end(self, response: ModelResponse | None, error: BaseException | None) -> None:
        """The call answered (`response`), or failed (`error`)."""


class ToolCallWatch(Protocol):
    """One tool call of a model's, watched; current while the tool runs."""

    def failed(self, error: BaseException) -> None:
        """The tool raised `error` (the model reads it as the call's error result)."""

    def end(self, result: ToolResultBlock | None, error: BaseException | None) -> None:
        """The call ended with `result`, or `error` escaped it (a cancellation)."""


class LoopObserver(Protocol):
    """What watches every `ModelLoop`: it starts a watch for each run and each call."""

    def run(self, loop: Any) -> RunWatch:
        """A run of `loop` (a `ModelLoop`) starts."""

    def model_call(self, loop: Any, step: int, window: PromptWindow) -> ModelCallWatch:
        """`loop` calls its model with `window`, for step `step`."""

    def tool_call(self, call: ToolUseBlock, tool: Any) -> ToolCallWatch:
        """A model's `call` of `tool` (a `Tool`, or None when there is none) starts."""


# Who watches; the loop tests `if OBSERVERS:` before anything else.
OBSERVERS: list[LoopObserver] = []


def watch_run(loop: Any) -> RunWatch:
    """A watch of a run of `loop` for every observer (call only when `OBSERVERS`)."""
    return _one_or_all([observer.run(loop) for observer in OBSERVERS])


def watch_model_call(loop: Any, step: int, window: PromptWindow) -> ModelCallWatch:
    """A watch of one model call for every observer (call only when `OBSERVERS`)."""
    return _one_or_all([observer.model_call(loop, step, window) for observer in OBSERVERS])


def watch_tool_call(call: ToolUseBlock, tool: Any) -> ToolCallWatch:
    """A watch of one tool call for every observer (call only when `OBSERVERS`)."""
    return _one_or_all([observer.tool_call(call, tool) for observer in OBSERVERS])


def _one_or_all(watches: list[W]) -> W:
    return watches[0] if len(watches) == 1 else cast("W", _Each(watches))


class _Each:
    """Several observers' watches as one: each method call goes to every one, in order."""

    __slots__ = ("_watches",)

    def __init__(self, watches: list[Any]) -> None:
        self._watches = watches

    def __getattr__(self, name: str) -> Any:
        def each(*args: Any) -> None:
            for watch in self._watches:
                getattr(watch, name)(*args)

        return each
