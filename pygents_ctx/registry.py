"""The three global, name-keyed registries: tools, agents and hooks.

Saved state refers to tools, agents and hooks by name only; these registries
are the one place names turn back into objects, so nothing is ever imported or
evaluated from saved data.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pygents_ctx._origin import same_origin
from pygents_ctx._suggest import closest
from pygents_ctx.errors import UnregisteredAgentError, UnregisteredHookError, UnregisteredToolError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable
    from enum import Enum

    from pygents_ctx.agent import Agent
    from pygents_ctx.errors import _UnregisteredError
    from pygents_ctx.hooks import Hook, HookKind
    from pygents_ctx.tools import Tool

__all__ = ["AgentRegistry", "HookRegistry", "ToolRegistry"]

T = TypeVar("T")

logger = logging.getLogger("pygents_ctx")


def _redefines(held: Callable[..., Any], new: Callable[..., Any]) -> bool:
    """Whether function `new` is a new definition of `held`: the same module and
    qualified name, compiled anew (a re-run notebook cell, a reloaded module).

    Two closures of the same code (a factory called twice) are different
    functions, not a re-definition, and so is the same function wrapped twice.
    """
    if held is new:
        return False
    original, fresh = inspect.unwrap(held), inspect.unwrap(new)
    return (
        getattr(held, "__module__", None) == getattr(new, "__module__", None)
        and getattr(held, "__qualname__", None) == getattr(new, "__qualname__", None)
        and getattr(original, "__code__", None) is not getattr(fresh, "__code__", None)
    )


class _NameRegistry(Generic[T]):
    """What the three registries share: a class-level dict of names to objects."""

    _entries: ClassVar[dict[str, Any]]
    _noun: ClassVar[str]
    _missing: ClassVar[type[_UnregisteredError]]
    _missing_hint: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._entries = {}  # one dict per registry, never shared

    @classmethod
    def _add(
        cls,
        name: str,
        entry: T,
        same: Callable[[T, T], bool],
        replaces: Callable[[T, T], bool],
    ) -> None:
        """Register `entry` under `name`: a no-op when `same` as the one held, and
        in its place when it `replaces` it (a re-definition); else `_taken`."""
        held = cls._entries.get(name)
        if held is None:
            cls._entries[name] = entry
        elif not same(held, entry):
            if not replaces(held, entry):
                raise cls._taken(name)
            cls._replace(name, held)
            cls._entries[name] = entry
            logger.debug("%s %r was defined again: the new definition replaces it", cls._noun, name)

    @classmethod
    def _replace(cls, name: str, held: T) -> None:
        """Forget what the registry holds for `held` (under `name`) before a new definition."""
        del cls._entries[name]

    @classmethod
    def _taken(cls, name: str) -> ValueError:
        """The error for a name another object holds."""
        return ValueError(
            f"{cls._noun} {name!r} already registered: a different {cls._noun} has that "
            f"name; rename it or call {cls.__name__}.unregister({name!r}) first"
        )

    @classmethod
    def get(cls, name: str) -> T:
        """Return the object registered under `name`.

        Raises:
            UnregisteredToolError, UnregisteredAgentError, UnregisteredHookError:
                Nothing has that name (each is a `KeyError`).
        """
        try:
            entry: T = cls._entries[name]
        except KeyError:
            meant = closest(name, cls._entries)
            guess = "" if meant is None else f" (did you mean {meant!r}?)"
            raise cls._missing(
                f"{cls._noun} {name!r} not found{guess}: nothing is registered under that "
                f"name; {cls._missing_hint}"
            ) from None
        return entry

    @classmethod
    def clear(cls) -> None:
        """Remove everything."""
        cls._entries.clear()


def _identical(held: object, entry: object) -> bool:
    return held is entry


def _made_again(held: Agent, new: Agent) -> bool:
    """Whether agent `new` was made by the same line of code as `held`, which is idle."""
    return same_origin(held._origin, new._origin) and not held.is_running


class ToolRegistry(_NameRegistry["Tool[..., Any]"]):
    """Every tool made with `@tool` or `.subtool()`, keyed by name.

    A root tool's key is its function's `__name__`; a subtool's is scoped by its
    parents (`"parent.child"`).
    """

    _noun = "tool"
    _missing = UnregisteredToolError
    _missing_hint = "decorate it with @tool first"

    @classmethod
    def register(cls, tool: Tool[..., Any]) -> None:
        """Add `tool` under `tool.key`.

        A new definition of the registered tool's function (the same module
        and qualified name, compiled anew: a re-run notebook cell, a reloaded
        module) replaces it, and its subtools, logging a debug line on the
        `pygents_ctx` logger.

        Raises:
            ValueError: A different tool already has that key.
        """
        cls._add(tool.key, tool, _identical, lambda held, new: _redefines(held.fn, new.fn))

    @classmethod
    def _replace(cls, name: str, held: Tool[..., Any]) -> None:
        cls.unregister(name)  # with its subtools: the new definition brings its own

    @classmethod
    def all(cls) -> list[Tool[..., Any]]:
        """Every registered tool, subtools included, in registration order."""
        return list(cls._entries.values())

    @classmethod
    def definitions(cls) -> list[dict[str, Any]]:
        """The `doc_tree()` of every root tool, sorted by name."""
        roots = sorted((t for t in cls._entries.values() if t.parent is None), key=lambda t: t.key)
        return [t.doc_tree() for t in roots]

    @classmethod
    def unregister(cls, name: str) -> None:
        """Remove the tool `name` and its subtools.

        Raises:
            UnregisteredToolError: No tool has that name.
        """
        cls.get(name)
        prefix = name + "."
        for key in [k for k in cls._entries if k == name or k.startswith(prefix)]:
            del cls._entries[key]


class AgentRegistry(_NameRegistry["Agent"]):
    """Every live agent, keyed by name, so agents can message each other."""

    _noun = "agent"
    _missing = UnregisteredAgentError
    _missing_hint = "create it (or restore it with Agent.from_dict) first"

    @classmethod
    def register(cls, agent: Agent) -> None:
        """Add `agent` under `agent.name`.

        An agent made again by the same line of code (`Agent(...)` in a re-run
        notebook cell) replaces the registered one when that one is not
        running, logging a debug line on the `pygents_ctx` logger.

        Raises:
            ValueError: Another agent already has that name.
        """
        cls._add(agent.name, agent, _identical, _made_again)

    @classmethod
    def unregister(cls, name: str) -> None:
        """Remove the agent `name`.

        Raises:
            UnregisteredAgentError: No agent has that name.
        """
        cls.get(name)
        del cls._entries[name]

    @classmethod
    def _rename(cls, agent: Agent, old: str, new: str) -> None:
        """Move `agent` from `old` to `new` (when it is registered under `old`).

        Raises:
            ValueError: Another agent has the name `new`.
        """
        held = cls._entries.get(new)
        if held is not None and held is not agent:
            raise cls._taken(new)
        if cls._entries.get(old) is agent:
            del cls._entries[old]
            cls._entries[new] = agent


class GlobalHooks(list["Hook"]):
    """The global hooks of one kind, in registration order: a live list.

    Only `HookRegistry` changes it, and it then calls `changed()`. In between,
    the hooks that fire for a given tag set are worked out once and reused, so
    dispatching an event does not filter the list again (a hook's tags, like its
    other options, are fixed when it is made).
    """

    __slots__ = ("_matching", "kind", "lone")

    def __init__(self, kind: HookKind) -> None:
        super().__init__()
        self.kind = kind
        self._matching: dict[frozenset[str], tuple[Hook, ...]] = {}
        # The function to call when one hook, without tags and taking the arguments
        # as they are, is all there is: dispatching is then just calling it.
        self.lone: Callable[..., Awaitable[Any]] | None = None

    def matching(self, tags: frozenset[str]) -> tuple[Hook, ...]:
        """The hooks that fire for an owner with `tags`, in order, one per function.

        A hook with tags fires only for owners sharing one of them; of hooks
        wrapping the same function, only the first that fires is kept.
        """
        found = self._matching.get(tags)
        if found is None:
            selected: list[Hook] = []
            for h in self:
                if (not h.tags or not h.tags.isdisjoint(tags)) and all(
                    h.fn is not kept.fn for kept in selected
                ):
                    selected.append(h)
            found = self._matching[tags] = tuple(selected)
        return found

    def changed(self) -> None:
        """Forget the worked-out subsets (after the list was changed)."""
        self._matching.clear()
        only = self[0] if len(self) == 1 else None
        self.lone = only._call if only is not None and not only.tags and only._direct else None


class HookRegistry(_NameRegistry["Hook"]):
    """Every hook by its function's name, and the global hooks by kind.

    Owners save their hooks by name; loading resolves the names here.
    """

    _noun = "hook"
    _missing = UnregisteredHookError
    _missing_hint = "define (import) it before loading"
    # One list per kind, created on first use and only ever mutated in place: owners
    # keep a reference so that "are there global hooks?" costs a truth test.
    _globals: ClassVar[dict[HookKind, GlobalHooks]] = {}
    # Per hook-kind enum, the global hooks of any of its kinds: "is anything
    # watching turns at all?" is then one truth test on a hot path.
    _any_kind: ClassVar[dict[type[Enum], list[Hook]]] = {}
    # The Hook class, set by pygents_ctx.hooks (which builds on this module) for wrap().
    _hook_class: ClassVar[type[Hook]]

    @classmethod
    def wrap(
        cls,
        fn: Callable[..., Awaitable[Any]],
        kind: HookKind | Iterable[HookKind],
        *,
        lock: bool = False,
        tags: Iterable[str] | None = None,
        **fixed_kwargs: Any,
    ) -> Hook:
        """Make `fn` a hook registered under its name, without making it global.

        The hook fires only where it is attached (`owner.hooks.append(h)`, or an
        instance decorator such as `@queue.before_append`, which attaches this
        very object). Wrapping the same function again with the same options
        returns the registered hook. If a different hook already has the name,
        the new hook is returned unregistered: it fires, but saving its owner
        raises `UnserializableHookError`.

        Args:
            fn: An `async def` function.
            kind: One event kind, or a list of kinds.
            lock: Serialize concurrent calls of this hook.
            tags: Tags, kept for a later `add_global` (they filter global hooks only).
            **fixed_kwargs: Merged into every call, as for `@hook`.

        Raises:
            TypeError: `fn` is not `async def`, `kind` is not a hook kind, or a
                fixed kwarg is not one of its parameters.
            ValueError: `kind` is an empty list.

        Examples:
            >>> from pygents_ctx import HookRegistry, TurnHook
            >>> async def log_start(turn):
            ...     print("starting", turn.tool_name)
            >>> HookRegistry.wrap(log_start, TurnHook.BEFORE_RUN).type
            <TurnHook.BEFORE_RUN: 'before_run'>
        """
        made = cls._hook_class(fn, kind, lock=lock, tags=tags, fixed_kwargs=fixed_kwargs)
        held: Hook | None = cls._entries.get(made.metadata.name)
        if held is not None and held.same_as(made):
            return held
        if held is None or _redefines(held.fn, made.fn):
            cls.register(made)
        return made

    @classmethod
    def register(cls, hook: Hook) -> None:
        """Add `hook` under `hook.metadata.name`.

        Registering the same hook again (or an equivalent one: same function and
        options) is a no-op. A new definition of the registered hook's function
        (see `ToolRegistry.register`) replaces it, in the global hooks too.

        Raises:
            ValueError: A different hook already has that name.
        """
        cls._add(
            hook.metadata.name,
            hook,
            lambda held, new: held.same_as(new),
            lambda held, new: _redefines(held.fn, new.fn),
        )

    @classmethod
    def _replace(cls, name: str, held: Hook) -> None:
        cls.unregister(name)  # from the global hooks too: `@hook` adds the new one

    @classmethod
    def unregister(cls, name: str) -> None:
        """Remove the hook `name`, from the global hooks too.

        Raises:
            UnregisteredHookError: No hook has that name.
        """
        hook = cls.get(name)
        del cls._entries[name]
        for hooks in cls._globals.values():
            hooks[:] = [h for h in hooks if h is not hook]
            hooks.changed()
        cls._gather_any_kind()

    @classmethod
    def clear(cls) -> None:
        """Forget every hook name and every global hook."""
        super().clear()
        cls.clear_globals()

    @classmethod
    def clear_globals(cls) -> None:
        """Detach every global hook, keeping the names (for test isolation)."""
        for hooks in cls._globals.values():
            hooks.clear()
            hooks.changed()
        cls._gather_any_kind()

    @classmethod
    def get_by_type(cls, kind: HookKind, hooks: Iterable[Hook]) -> list[Hook]:
        """The hooks among `hooks` that handle `kind`, in order."""
        return [h for h in hooks if kind in h.kinds]

    @classmethod
    def globals_for(cls, kind: HookKind) -> GlobalHooks:
        """The live list of global hooks of `kind` (mutated in place, never replaced)."""
        hooks = cls._globals.get(kind)
        if hooks is None:
            hooks = cls._globals[kind] = GlobalHooks(kind)
        return hooks

    @classmethod
    def globals_for_any(cls, kind_type: type[Enum]) -> list[Hook]:
        """The live list of global hooks of any kind in `kind_type` (e.g. `TurnHook`)."""
        hooks = cls._any_kind.get(kind_type)
        if hooks is None:
            hooks = cls._any_kind[kind_type] = []
            cls._gather_any_kind()
        return hooks

    @classmethod
    def add_global(cls, hook: Hook) -> None:
        """Make `hook` fire for every object dispatching one of its kinds."""
        for kind in hook.kinds:
            hooks = cls.globals_for(kind)
            if not any(held.same_as(hook) for held in hooks):
                hooks.append(hook)
                hooks.changed()
        cls._gather_any_kind()

    @classmethod
    def _gather_any_kind(cls) -> None:
        for kind_type, hooks in cls._any_kind.items():
            hooks[:] = [
                h for kind, held in cls._globals.items() if type(kind) is kind_type for h in held
            ]

    @classmethod
    def is_saved_as(cls, hook: Hook) -> bool:
        """Whether loading `hook.metadata.name` gives `hook` (or an equivalent) back."""
        held = cls._entries.get(hook.metadata.name)
        return held is not None and held.same_as(hook)
