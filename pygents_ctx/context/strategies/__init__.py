"""Context strategies: build the window a model sees from the full transcript.

Every strategy has `async compact(messages) -> messages`, never mutates its
input, returns the very same list when it changed nothing, and never separates
a tool call from its result.
"""

from pygents_ctx.context.strategies.base import ContextStrategy, WindowStep
from pygents_ctx.context.strategies.budget import FitTokens, MiddleOut
from pygents_ctx.context.strategies.compose import (
    MODEL_CONTEXT_WINDOWS,
    Pipeline,
    UntilFits,
    model_context_window,
    register_model,
)
from pygents_ctx.context.strategies.edits import (
    ClearToolInputs,
    ClearToolResults,
    DropToolRounds,
    TruncateToolResults,
)
from pygents_ctx.context.strategies.pinned import PinnedWindow, Window
from pygents_ctx.context.strategies.stable import StableWindow
from pygents_ctx.context.strategies.summarize import (
    SUMMARY_PREFIX,
    Summarize,
    Summarizer,
    bridge_message,
    is_bridge,
    is_summary,
    render_transcript,
    summary_covers,
    summary_message,
    summary_ranges,
    summary_text,
)
from pygents_ctx.context.strategies.window import SlidingWindow, TrimRounds, Truncate

__all__ = [
    "MODEL_CONTEXT_WINDOWS",
    "SUMMARY_PREFIX",
    "ClearToolInputs",
    "ClearToolResults",
    "ContextStrategy",
    "DropToolRounds",
    "FitTokens",
    "MiddleOut",
    "PinnedWindow",
    "Pipeline",
    "SlidingWindow",
    "StableWindow",
    "Summarize",
    "Summarizer",
    "TrimRounds",
    "Truncate",
    "TruncateToolResults",
    "UntilFits",
    "Window",
    "WindowStep",
    "bridge_message",
    "is_bridge",
    "is_summary",
    "model_context_window",
    "register_model",
    "render_transcript",
    "summary_covers",
    "summary_message",
    "summary_ranges",
    "summary_text",
]
