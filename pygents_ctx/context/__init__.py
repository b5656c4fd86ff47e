"""Typed context: items, the queue and the pool, messages and token counting."""

from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    OffloadedResult,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    from_dict,
    to_dict,
)
from pygents_ctx.context.pool import ContextPool
from pygents_ctx.context.queue import ContextQueue
from pygents_ctx.context.tokens import (
    EstimatedTokenCounter,
    HeuristicTokenCounter,
    TiktokenCounter,
    TokenCalibration,
    TokenCounter,
    calibrate,
    count_message_tokens,
    count_tokens,
)
from pygents_ctx.context.wire import from_anthropic, from_openai, to_anthropic, to_gemini, to_openai

__all__ = [
    "ContentBlock",
    "ContextItem",
    "ContextPool",
    "ContextQueue",
    "EstimatedTokenCounter",
    "HeuristicTokenCounter",
    "ImageBlock",
    "Message",
    "OffloadedResult",
    "ReasoningBlock",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "TiktokenCounter",
    "TokenCalibration",
    "TokenCounter",
    "ToolResultBlock",
    "ToolUseBlock",
    "calibrate",
    "count_message_tokens",
    "count_tokens",
    "from_anthropic",
    "from_dict",
    "from_openai",
    "to_anthropic",
    "to_dict",
    "to_gemini",
    "to_openai",
]
