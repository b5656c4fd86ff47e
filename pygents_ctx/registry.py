"""The three global, name-keyed registries: tools, agents and hooks.

Saved state refers to tools, agents and hooks by name only; these registries
are the one place names turn back into objects, so nothing is ever imported or
evaluated from saved data.

Each registry is defined beside what it holds (`HookRegistry` in
`pygents_ctx.hooks`, `ToolRegistry` in `pygents_ctx.tools`, `AgentRegistry` in
`pygents_ctx.agent`), so that no layer names a higher one's classes; this
module is their public path. `AgentScope` gives agent names (and the names of
hooks attached inside it) to one request or task.
"""

from __future__ import annotations

from pygents_ctx.agent import AgentRegistry
from pygents_ctx.agent._names import AgentScope
from pygents_ctx.hooks import HookRegistry
from pygents_ctx.tools import ToolRegistry

__all__ = ["AgentRegistry", "AgentScope", "HookRegistry", "ToolRegistry"]
