"""Typed context primitives: `ContextItem`, `ContextQueue` and `ContextPool`."""

from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.pool import ContextPool
from pygents_ctx.context.queue import ContextQueue

__all__ = ["ContextItem", "ContextPool", "ContextQueue"]
