"""Hooks: async callbacks fired on lifecycle events, per object or globally.

`_hooks` holds the hook kinds, `Hook`, `@hook` and `HookRegistry`; `_calls`
calls a hook or a tool's function with what it asks for; `_registry` is the
name-keyed registry the three registries share; `_dispatch` fires an event's
hooks in order.
"""

from pygents_ctx.hooks._hooks import (
    AgentHook,
    ContextPoolHook,
    ContextQueueHook,
    Hook,
    HookKind,
    HookMetadata,
    HookRegistry,
    ToolHook,
    TurnHook,
    hook,
)

# pygents' name for HookKind, importable from here as from `pygents.hooks`
# (HookKind is the documented one, so HookType stays out of __all__).
from pygents_ctx.hooks._hooks import HookType as HookType

__all__ = [
    "AgentHook",
    "ContextPoolHook",
    "ContextQueueHook",
    "Hook",
    "HookKind",
    "HookMetadata",
    "HookRegistry",
    "ToolHook",
    "TurnHook",
    "hook",
]
