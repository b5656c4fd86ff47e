"""pygents_ctx: a turn-based async agent runtime with typed context primitives.

Tools say *how* (`@tool`), turns say *what* (`Turn`), and an `Agent` runs a
queue of turns, routing every produced value by its type: a `Turn` is queued,
a `ContextItem` goes into the agent's `ContextQueue` or `ContextPool`, and
anything else is yielded to the caller.
"""

from pygents_ctx.agent import Agent
from pygents_ctx.context import ContextItem, ContextPool, ContextQueue
from pygents_ctx.errors import (
    PygentsError,
    SafeExecutionError,
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
    "ContextItem",
    "ContextPool",
    "ContextPoolHook",
    "ContextQueue",
    "ContextQueueHook",
    "Hook",
    "HookKind",
    "HookMetadata",
    "HookRegistry",
    "PygentsError",
    "SafeExecutionError",
    "StopReason",
    "Tool",
    "ToolHook",
    "ToolMetadata",
    "ToolRegistry",
    "Turn",
    "TurnHook",
    "TurnMetadata",
    "TurnTimeoutError",
    "UnregisteredAgentError",
    "UnregisteredHookError",
    "UnregisteredToolError",
    "UnserializableHookError",
    "WrongRunMethodError",
    "hook",
    "tool",
]

__version__ = "0.1.0"
