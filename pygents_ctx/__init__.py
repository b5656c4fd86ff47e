"""pygents_ctx: a turn-based async agent runtime with typed context primitives.

Tools say *how* (`@tool`), turns say *what* (`Turn`), and an `Agent` runs a
queue of turns, routing every produced value by its type: a `Turn` is queued,
a `ContextItem` goes into the agent's `ContextQueue` or `ContextPool`, and
anything else is yielded to the caller.
"""

from pygents_ctx.agent import Agent
from pygents_ctx.context import (
    ContentBlock,
    ContextItem,
    ContextPool,
    ContextQueue,
    HeuristicTokenCounter,
    ImageBlock,
    Message,
    TextBlock,
    TiktokenCounter,
    TokenCounter,
    ToolResultBlock,
    ToolUseBlock,
    count_message_tokens,
    count_tokens,
    from_anthropic,
    from_dict,
    from_openai,
    to_anthropic,
    to_dict,
    to_openai,
)
from pygents_ctx.errors import (
    ContextOverflowError,
    PygentsError,
    SafeExecutionError,
    SummarizationError,
    TurnTimeoutError,
    UnregisteredAgentError,
    UnregisteredHookError,
    UnregisteredToolError,
    UnserializableHookError,
    WrongRunMethodError,
)
from pygents_ctx.hooks import (
    AgentHook,
    ContextPoolHook,
    ContextQueueHook,
    Hook,
    HookKind,
    HookMetadata,
    ToolHook,
    TurnHook,
    hook,
)
from pygents_ctx.registry import AgentRegistry, HookRegistry, ToolRegistry
from pygents_ctx.tools import Tool, ToolMetadata, tool
from pygents_ctx.turns import StopReason, Turn, TurnMetadata

__all__ = [
    "Agent",
    "AgentHook",
    "AgentRegistry",
    "ContentBlock",
    "ContextItem",
    "ContextOverflowError",
    "ContextPool",
    "ContextPoolHook",
    "ContextQueue",
    "ContextQueueHook",
    "HeuristicTokenCounter",
    "Hook",
    "HookKind",
    "HookMetadata",
    "HookRegistry",
    "ImageBlock",
    "Message",
    "PygentsError",
    "SafeExecutionError",
    "StopReason",
    "SummarizationError",
    "TextBlock",
    "TiktokenCounter",
    "TokenCounter",
    "Tool",
    "ToolHook",
    "ToolMetadata",
    "ToolRegistry",
    "ToolResultBlock",
    "ToolUseBlock",
    "Turn",
    "TurnHook",
    "TurnMetadata",
    "TurnTimeoutError",
    "UnregisteredAgentError",
    "UnregisteredHookError",
    "UnregisteredToolError",
    "UnserializableHookError",
    "WrongRunMethodError",
    "count_message_tokens",
    "count_tokens",
    "from_anthropic",
    "from_dict",
    "from_openai",
    "hook",
    "to_anthropic",
    "to_dict",
    "to_openai",
    "tool",
]

__version__ = "0.1.0"
