"""A model in the loop: the `Model` protocol, OpenAI, Anthropic and Gemini adapters, `ModelLoop`.

The adapters import their SDK only when made: the `openai`, `anthropic` or `gemini`
extra (`pip install -e '.[openai]'` from a checkout).
"""

from pygents_ctx.model.anthropic_model import MAX_BREAKPOINTS, AnthropicModel
from pygents_ctx.model.assistant import Assistant
from pygents_ctx.model.base import (
    Model,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    OutputSchema,
    Pricing,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from pygents_ctx.model.definitions import to_anthropic_tools, to_gemini_tools, to_openai_tools
from pygents_ctx.model.events import (
    AgentValue,
    LoopEvent,
    LoopFinished,
    LoopStop,
    ModelReplied,
    ModelRetry,
    StepStarted,
    ToolApprovalRequired,
    ToolCallFinished,
    ToolCallStarted,
)
from pygents_ctx.model.fallback import FallbackModel
from pygents_ctx.model.gemini_model import GeminiModel
from pygents_ctx.model.history_search import SEARCH_HISTORY_LIMIT, search_history
from pygents_ctx.model.loop import ModelLoop
from pygents_ctx.model.offload import ToolResultOffload
from pygents_ctx.model.openai_model import OpenAIModel
from pygents_ctx.model.openai_responses_model import OpenAIResponsesModel
from pygents_ctx.model.options import LeasePolicy, LoopLimits, ToolPolicy
from pygents_ctx.model.retry import RetryPolicy

__all__ = [
    "MAX_BREAKPOINTS",
    "SEARCH_HISTORY_LIMIT",
    "AgentValue",
    "AnthropicModel",
    "Assistant",
    "FallbackModel",
    "GeminiModel",
    "LeasePolicy",
    "LoopEvent",
    "LoopFinished",
    "LoopLimits",
    "LoopStop",
    "Model",
    "ModelLoop",
    "ModelReplied",
    "ModelResponse",
    "ModelRetry",
    "ModelSettings",
    "ModelStreamEvent",
    "OpenAIModel",
    "OpenAIResponsesModel",
    "OutputSchema",
    "Pricing",
    "RetryPolicy",
    "StepStarted",
    "TextDelta",
    "ThinkingDelta",
    "ToolApprovalRequired",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolPolicy",
    "ToolResultOffload",
    "search_history",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_openai_tools",
]
