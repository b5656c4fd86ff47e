"""The three global, name-keyed registries: tools, agents and hooks.

Saved state refers to tools, agents and hooks by name only; these registries
are the one place names turn back into objects, so nothing is ever imported or
evaluated from saved data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pygents_ctx.errors import UnregisteredAgentError, UnregisteredHookError, UnregisteredToolError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pygents_ctx.agent import Agent
    from pygents_ctx.hooks import Hook, HookKind
    from pygents_ctx.tools import Tool

__all__ = ["AgentRegistry", "HookRegistry", "ToolRegistry"]


class ToolRegistry:
    """Every tool made with `@tool` or `.subtool()`, keyed by name.

    A root tool's key is its function's `__name__`; a subtool's is scoped by its
    parents (`"parent.child"`).
    """

    _tools: ClassVar[dict[str, Tool[..., Any]]] = {}

    @classmethod
    def register(cls, tool: Tool[..., Any]) -> None:
        """Add `tool` under `tool.key`.

        Raises:
            ValueError: Another tool already has that key.
        """
        held = cls._tools.get(tool.key)
        if held is not None and held is not tool:
            raise ValueError(
                f"a tool named {tool.key!r} is already registered; rename the function or "
                f"call ToolRegistry.unregister({tool.key!r}) first"
            )
        cls._tools[tool.key] = tool

    @classmethod
    def get(cls, name: str) -> Tool[..., Any]:
        """Return the tool registered under `name`.

        Raises:
            UnregisteredToolError: No tool has that name.
        """
        try:
            return cls._tools[name]
        except KeyError:
            raise UnregisteredToolError(
                f"no tool named {name!r} is registered; decorate it with @tool first"
            ) from None

    @classmethod
    def all(cls) -> list[Tool[..., Any]]:
        """Every registered tool, subtools included, in registration order."""
        return list(cls._tools.values())

    @classmethod
    def definitions(cls) -> list[dict[str, Any]]:
        """The `doc_tree()` of every root tool, sorted by name."""
        roots = sorted((t for t in cls._tools.values() if t.parent is None), key=lambda t: t.key)
        return [t.doc_tree() for t in roots]

    @classmethod
    def unregister(cls, name: str) -> None:
        """Remove the tool `name` and its subtools.

        Raises:
            UnregisteredToolError: No tool has that name.
        """
        cls.get(name)
        prefix = name + "."
        for key in [k for k in cls._tools if k == name or k.startswith(prefix)]:
            del cls._tools[key]

    @classmethod
    def clear(cls) -> None:
        """Remove every tool."""
        cls._tools.clear()


class AgentRegistry:
    """Every live agent, keyed by name, so agents can message each other."""

    _agents: ClassVar[dict[str, Agent]] = {}

    @classmethod
    def register(cls, agent: Agent) -> None:
        """Add `agent` under `agent.name`.

        Raises:
            ValueError: Another agent already has that name.
        """
        held = cls._agents.get(agent.name)
        if held is not None and held is not agent:
            raise ValueError(
                f"an agent named {agent.name!r} is already registered; choose another name "
                f"or call AgentRegistry.unregister({agent.name!r}) first"
            )
        cls._agents[agent.name] = agent

    @classmethod
    def get(cls, name: str) -> Agent:
        """Return the agent registered under `name`.

        Raises:
            UnregisteredAgentError: No agent has that name.
        """
        try:
            return cls._agents[name]
        except KeyError:
            raise UnregisteredAgentError(f"no agent named {name!r} is registered") from None

    @classmethod
    def unregister(cls, name: str) -> None:
        """Remove the agent `name`.

        Raises:
            UnregisteredAgentError: No agent has that name.
        """
        cls.get(name)
        del cls._agents[name]

    @classmethod
    def clear(cls) -> None:
        """Remove every agent."""
        cls._agents.clear()


class HookRegistry:
    """Every hook by its function's name, and the global hooks by kind.

    Owners save their hooks by name; loading resolves the names here.
    """

    _hooks: ClassVar[dict[str, Hook]] = {}
    # One list per kind, created once and only ever mutated in place: owners keep
    # a reference so that "are there global hooks?" costs a truth test.
    _globals: ClassVar[dict[HookKind, list[Hook]]] = {}

    @classmethod
    def register(cls, hook: Hook) -> None:
        """Add `hook` under `hook.metadata.name`.

        Registering the same hook again (or an equivalent one: same function and
        options) is a no-op.

        Raises:
            ValueError: A different hook already has that name.
        """
        name = hook.metadata.name
        held = cls._hooks.get(name)
        if held is not None and not held.same_as(hook):
            raise ValueError(
                f"a different hook named {name!r} is already registered; rename the function "
                f"or call HookRegistry.unregister({name!r}) first"
            )
        if held is None:
            cls._hooks[name] = hook

    @classmethod
    def get(cls, name: str) -> Hook:
        """Return the hook registered under `name`.

        Raises:
            UnregisteredHookError: No hook has that name.
        """
        try:
            return cls._hooks[name]
        except KeyError:
            raise UnregisteredHookError(
                f"no hook named {name!r} is registered; define (import) it before loading"
            ) from None

    @classmethod
    def unregister(cls, name: str) -> None:
        """Remove the hook `name`, from the global hooks too.

        Raises:
            UnregisteredHookError: No hook has that name.
        """
        hook = cls.get(name)
        del cls._hooks[name]
        for hooks in cls._globals.values():
            hooks[:] = [h for h in hooks if h is not hook]

    @classmethod
    def clear(cls) -> None:
        """Forget every hook name and every global hook."""
        cls._hooks.clear()
        cls.clear_globals()

    @classmethod
    def clear_globals(cls) -> None:
        """Detach every global hook, keeping the names (for test isolation)."""
        for hooks in cls._globals.values():
            hooks.clear()

    @classmethod
    def get_by_type(cls, kind: HookKind, hooks: Iterable[Hook]) -> list[Hook]:
        """The hooks among `hooks` that handle `kind`, in order."""
        return [h for h in hooks if kind in h.kinds]

    @classmethod
    def globals_for(cls, kind: HookKind) -> list[Hook]:
        """The live list of global hooks of `kind` (mutated in place, never replaced)."""
        return cls._globals.setdefault(kind, [])

    @classmethod
    def add_global(cls, hook: Hook) -> None:
        """Make `hook` fire for every object dispatching one of its kinds."""
        for kind in hook.kinds:
            hooks = cls.globals_for(kind)
            if not any(held.same_as(hook) for held in hooks):
                hooks.append(hook)

    @classmethod
    def is_saved_as(cls, hook: Hook) -> bool:
        """Whether loading `hook.metadata.name` gives `hook` (or an equivalent) back."""
        held = cls._hooks.get(hook.metadata.name)
        return held is not None and held.same_as(hook)
