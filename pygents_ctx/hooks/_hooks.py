"""Hooks: async callbacks fired on lifecycle events, per object or globally.

A hook is attached to one object with an instance decorator
(`@agent.before_turn`, `@queue.on_evict`, ...) or to every object that fires
its kind with `@hook(kind)`: a global hook, which belongs to the current
`HookRegistry` (the process default unless `AgentRegistry.use()` says
otherwise). For one event the object's own hooks run first, in list order,
then the global hooks of that kind not already called, from the registry
current where the event fires (an agent makes its registry's current while
it fires its events and runs its turns); a global hook with `tags` fires only
for objects that share one of them. A hook that raises stops the dispatch and
the exception propagates.

Examples:
    >>> from pygents_ctx import AgentHook, hook
    >>> @hook(AgentHook.BEFORE_TURN, tags=["audited"])
    ... async def audit(agent):
    ...     print("turn on", agent.name)
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias

from pygents_ctx.errors import UnregisteredHookError
from pygents_ctx.hooks._calls import CallSpec, LoopLock, tag_set
from pygents_ctx.hooks._registry import NameRegistry, on_current, redefines

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

__all__ = [
    "AgentHook",
    "ContextPoolHook",
    "ContextQueueHook",
    "Hook",
    "HookKind",
    "HookMetadata",
    "ToolHook",
    "TurnHook",
    "hook",
]


class TurnHook(Enum):
    """Events of a `Turn`."""

    BEFORE_RUN = "before_run"
    AFTER_RUN = "after_run"
    ON_TIMEOUT = "on_timeout"
    ON_ERROR = "on_error"
    ON_COMPLETE = "on_complete"


class AgentHook(Enum):
    """Events of an `Agent`."""

    BEFORE_TURN = "before_turn"
    AFTER_TURN = "after_turn"
    ON_TURN_VALUE = "on_turn_value"
    BEFORE_PUT = "before_put"
    AFTER_PUT = "after_put"
    ON_PAUSE = "on_pause"
    ON_RESUME = "on_resume"


class ToolHook(Enum):
    """Events of a `Tool`."""

    BEFORE_INVOKE = "before_invoke"
    ON_YIELD = "on_yield"
    AFTER_INVOKE = "after_invoke"
    ON_ERROR = "on_error"


class ContextQueueHook(Enum):
    """Events of a `ContextQueue`."""

    BEFORE_APPEND = "before_append"
    AFTER_APPEND = "after_append"
    BEFORE_CLEAR = "before_clear"
    AFTER_CLEAR = "after_clear"
    ON_EVICT = "on_evict"


class ContextPoolHook(Enum):
    """Events of a `ContextPool`."""

    BEFORE_ADD = "before_add"
    AFTER_ADD = "after_add"
    BEFORE_REMOVE = "before_remove"
    AFTER_REMOVE = "after_remove"
    BEFORE_CLEAR = "before_clear"
    AFTER_CLEAR = "after_clear"
    ON_EVICT = "on_evict"


# Plain enums, not str enums: TurnHook.ON_ERROR and ToolHook.ON_ERROR share a
# value but are different events, and must not compare (or hash) equal.
HookKind: TypeAlias = TurnHook | AgentHook | ToolHook | ContextQueueHook | ContextPoolHook
_KIND_TYPES = (TurnHook, AgentHook, ToolHook, ContextQueueHook, ContextPoolHook)
# pygents' name for the union, which its hooks page imports from here; `HookKind`
# is the documented one (so HookType stays out of __all__ and the top level).
HookType: TypeAlias = HookKind

HookFunction: TypeAlias = "Callable[..., Awaitable[Any]]"

# What each event passes, by the names pygents' documentation gives them: the
# positional arguments, then the keyword ones. None: the keyword arguments of the
# call it watches (a tool's before_invoke). A hook must be able to take them all.
_EVENT_ARGUMENTS: dict[HookKind, tuple[str, ...] | None] = {
    TurnHook.BEFORE_RUN: ("turn",),
    TurnHook.AFTER_RUN: ("turn", "output"),
    TurnHook.ON_TIMEOUT: ("turn",),
    TurnHook.ON_ERROR: ("turn", "exc"),
    TurnHook.ON_COMPLETE: ("turn", "stop_reason"),
    AgentHook.BEFORE_TURN: ("agent",),
    AgentHook.AFTER_TURN: ("agent", "turn"),
    AgentHook.ON_TURN_VALUE: ("agent", "turn", "value"),
    AgentHook.BEFORE_PUT: ("agent", "turn"),
    AgentHook.AFTER_PUT: ("agent", "turn"),
    AgentHook.ON_PAUSE: ("agent",),
    AgentHook.ON_RESUME: ("agent",),
    ToolHook.BEFORE_INVOKE: None,
    ToolHook.ON_YIELD: ("value",),
    ToolHook.AFTER_INVOKE: ("result",),
    ToolHook.ON_ERROR: (),
    ContextQueueHook.BEFORE_APPEND: ("queue", "items", "current"),
    ContextQueueHook.AFTER_APPEND: ("appended", "current"),
    ContextQueueHook.BEFORE_CLEAR: ("queue", "items"),
    ContextQueueHook.AFTER_CLEAR: ("queue",),
    ContextQueueHook.ON_EVICT: ("queue", "item"),
    ContextPoolHook.BEFORE_ADD: ("pool", "item"),
    ContextPoolHook.AFTER_ADD: ("pool", "item"),
    ContextPoolHook.BEFORE_REMOVE: ("pool", "item"),
    ContextPoolHook.AFTER_REMOVE: ("pool", "item"),
    ContextPoolHook.BEFORE_CLEAR: ("pool", "items"),
    ContextPoolHook.AFTER_CLEAR: ("pool",),
    ContextPoolHook.ON_EVICT: ("pool", "item"),
}
# Arguments an event passes by keyword, after its positional ones.
_EVENT_KEYWORDS: dict[HookKind, tuple[str, ...]] = {ToolHook.ON_ERROR: ("exc",)}


@dataclass(frozen=True)
class HookMetadata:
    """What a hook is: its function's name and docstring."""

    name: str
    description: str | None

    def dict(self) -> dict[str, Any]:
        """The metadata as a plain dict."""
        return {"name": self.name, "description": self.description}


class Hook:
    """An async function bound to one or more event kinds.

    Made by `@hook(...)` (global), `HookRegistry.wrap(fn, kind)` or an instance
    decorator such as `@agent.before_turn`. Calling it awaits the function with
    the fixed kwargs merged in and context parameters injected.

    The function must take every argument its events pass, as in pygents:
    `on_turn_value(agent, turn, value)` needs three parameters (or `*args`).
    One that cannot is refused here, when it is decorated, rather than called
    with other values than it expects. Keyword arguments it does not take are
    dropped.

    Attributes:
        fn: The function.
        kinds: The event kinds it handles, as a tuple.
        tags: For a global hook, the tags an owner needs one of (empty: any owner).
        fixed_kwargs: Keyword arguments merged into every call.
        metadata: Its name and docstring.
    """

    __slots__ = (
        "_lock",
        "_spec",
        "_takes",
        "fixed_kwargs",
        "fn",
        "kinds",
        "metadata",
        "tags",
    )

    def __init__(
        self,
        fn: HookFunction,
        kinds: HookKind | Iterable[HookKind],
        *,
        lock: bool = False,
        tags: Iterable[str] | None = None,
        fixed_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"hook {getattr(fn, '__name__', fn)!r} must be an 'async def' function")
        self.fn = fn
        self.kinds = _kinds(kinds)
        self.tags = tag_set(tags)
        self.fixed_kwargs = dict(fixed_kwargs or {})
        self.metadata = HookMetadata(fn.__name__, inspect.getdoc(fn))
        self._spec = CallSpec(fn, self.fixed_kwargs, f"hook {fn.__name__!r}")
        self._lock = LoopLock() if lock else None
        self._takes = _check_takes_events(self._spec, self.kinds, fn.__name__)

    @property
    def type(self) -> HookKind | tuple[HookKind, ...]:
        """The kind this hook handles, or the tuple of kinds of a multi-kind hook."""
        return self.kinds[0] if len(self.kinds) == 1 else self.kinds

    @property
    def lock(self) -> LoopLock | None:
        """The lock serializing its calls (usable with `async with`), or None if not asked for."""
        return self._lock

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Await the hook's function with these arguments (the ones it takes)."""
        takes = self._takes
        if takes is not None and len(args) > takes:
            args = args[:takes]
        spec = self._spec
        if kwargs or not spec.plain:
            kwargs = spec.bind(args, kwargs)
        if self._lock is None:
            return await self.fn(*args, **kwargs)
        async with self._lock.get():
            return await self.fn(*args, **kwargs)

    def same_as(self, other: Hook) -> bool:
        """Whether `other` wraps the same function with the same kinds and options."""
        return self is other or (
            self.fn is other.fn
            and self.kinds == other.kinds
            and (self._lock is None) == (other._lock is None)
            and self.tags == other.tags
            and self.fixed_kwargs == other.fixed_kwargs
        )

    def __repr__(self) -> str:
        return f"Hook(type={self.type!r}, metadata={self.metadata!r})"


def _check_takes_events(spec: CallSpec, kinds: tuple[HookKind, ...], name: str) -> int | None:
    """Refuse a function that cannot take the arguments of one of its events.

    A `before_invoke` hook gets the watched call's arguments: as its keyword
    arguments it does not take are dropped, so are positional ones past its
    parameters. Returns how many positional arguments to pass it then (None: all).

    Parameters given fixed kwargs do not count (an event's arguments never land
    in them); a context parameter (`queue: ContextQueue`) past the event's
    arguments is injected, so it need not be given.

    Raises:
        TypeError: It takes fewer positional arguments than an event passes, or
            needs more than it passes; the message shows the signature to use.
    """
    params = spec.parameters
    if any(p.kind is p.VAR_POSITIONAL for p in params.values()):
        return None
    free = [n for n in spec.positional if n not in spec.fixed_kwargs]
    filled_elsewhere = spec.context_parameters | spec.fixed_kwargs.keys()
    for kind in kinds:
        passed = _EVENT_ARGUMENTS[kind]
        if passed is None:
            continue  # the watched call's arguments: any signature may take some
        keywords = _EVENT_KEYWORDS.get(kind, ())
        # Required parameters no event argument lands in: past the positional ones,
        # or keyword-only, and filled by no fixed kwarg, injection or event keyword.
        unfilled = [
            *free[len(passed) :],
            *(n for n, p in params.items() if p.kind is p.KEYWORD_ONLY),
        ]
        missing = [
            n
            for n in unfilled
            if params[n].default is params[n].empty
            and n not in filled_elsewhere
            and n not in keywords
        ]
        if len(free) >= len(passed) and not missing:
            continue
        wanted = ", ".join((*passed, *(f"{k}=..." for k in keywords)))
        event = f"{kind.__class__.__name__}.{kind.name}, which passes ({wanted})"
        unmet = (
            f", and its required parameter(s) {', '.join(map(repr, missing))} would get nothing"
            if missing
            else ""
        )
        raise TypeError(
            f"hook {name!r} cannot take the arguments of {event}; it takes "
            f"({', '.join(free) or 'nothing'}){unmet}. Declare it as "
            f"'async def {name}({', '.join(passed)})' (any names; other parameters need "
            f"defaults or fixed kwargs), or with *args"
        )
    return len(free) if ToolHook.BEFORE_INVOKE in kinds else None


# -- the registry of hooks (public through pygents_ctx.registry) --------------


class GlobalHooks(list["Hook"]):
    """The global hooks of one kind, in registration order: a live list.

    Only `HookRegistry` changes it, and it then calls `changed()`. In between,
    the hooks that fire for a given tag set are worked out once and reused, so
    dispatching an event does not filter the list again (a hook's tags, like its
    other options, are fixed when it is made).
    """

    __slots__ = ("_matching", "kind")

    def __init__(self, kind: HookKind) -> None:
        super().__init__()
        self.kind = kind
        self._matching: dict[frozenset[str], tuple[Hook, ...]] = {}

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


class HookNames:
    """The names of the hooks attached inside one `AgentScope` (see `HookRegistry.attach`).

    Looked up before the global names, then out through the scopes around it;
    forgotten with the scope, so a hook defined per request does not stay.
    """

    __slots__ = ("entries", "outer")

    def __init__(self, outer: HookNames | None) -> None:
        self.outer = outer
        self.entries: dict[str, Hook] = {}

    def find(self, name: str) -> Hook | None:
        """The hook `name` in this scope or the nearest around it."""
        names: HookNames | None = self
        while names is not None:
            held = names.entries.get(name)
            if held is not None:
                return held
            names = names.outer
        return None


# The current scope's hook names (an AgentScope sets it); None: only the global ones.
SCOPED_HOOK_NAMES: ContextVar[HookNames | None] = ContextVar("pygents_ctx_hook_names", default=None)


class HookRegistry(NameRegistry["Hook | HookFunction"]):
    """Every hook by its function's name, and the global hooks by kind.

    Owners save their hooks by name; loading resolves the names here. As in
    pygents, a plain `async def` function may be registered as it is
    (`register(fn)`): it then names no events, and a saved owner naming it
    gets a hook of that function for the events it saved.

    `HookRegistry()` makes an empty registry, with no global hooks (an
    `AgentRegistry` brings one); called on the class (`HookRegistry.get(name)`,
    and `@hook` registering), the methods act on the current one: the process
    default, unless `AgentRegistry.use()` made another current.

    Global hooks (`@hook`, `add_global`) belong to a registry. An event fires
    the global hooks of the registry current where it fires: an agent makes
    its own registry's current while it fires its events and runs its turns
    (so the turns, tools, queue and pool it runs fire them too); a tool, turn,
    queue or pool used outside an agent fires the current registry's. With
    one registry (module-level code, the process default), a global hook fires
    for every object, as in pygents. Unregistering a name detaches its global hook.
    """

    _noun = "hook"
    _missing = UnregisteredHookError
    _missing_hint = "define (import) it before loading"

    def __init__(self) -> None:
        super().__init__()
        # One list per kind, created on first use and only ever mutated in place.
        self._globals: dict[HookKind, GlobalHooks] = {}
        # Whether any global hook is attached: while none is, a dispatch looks up nothing.
        self.any_global = False

    @classmethod
    def current(cls) -> HookRegistry:
        """The registry that `HookRegistry.get(...)` and the other calls on the class use."""
        return CURRENT_HOOKS.get()

    @on_current
    def wrap(
        self,
        /,
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
            fn: An `async def` function, or a hook: that hook itself (registered)
                when it handles exactly `kind` and no option is given, as in
                pygents; otherwise a hook of its function with these options.
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
        if isinstance(fn, Hook):  # already a hook: itself when it is the hook asked for
            if set(fn.kinds) == set(_kinds(kind)) and not (lock or tags or fixed_kwargs):
                self.register(fn)
                return fn
            fn = fn.fn
        made = Hook(fn, kind, lock=lock, tags=tags, fixed_kwargs=fixed_kwargs)
        held: Hook | HookFunction | None = self._entries.get(made.metadata.name)
        if isinstance(held, Hook) and held.same_as(made):
            return held
        if held is None or _replaces(held, made):
            self.register(made)
        return made

    @on_current
    def register(self, hook: Hook | HookFunction) -> None:
        """Add `hook` under its name (`hook.metadata.name`, or a function's `__name__`).

        Registering the same hook again (or an equivalent one: same function and
        options) is a no-op. A new definition of the registered hook's function
        (see `ToolRegistry.register`) replaces it, in the global hooks too.

        A plain `async def` function is registered as it is, as pygents does:
        `get()` returns that function until a hook made of it (by `wrap`,
        `@hook` or an instance decorator) takes its place under the name.

        Raises:
            ValueError: A different hook already has that name.
            TypeError: `hook` is neither a `Hook` nor an `async def` function.

        Examples:
            >>> from pygents_ctx import HookRegistry
            >>> async def audit(turn):
            ...     pass
            >>> HookRegistry.register(audit)
            >>> HookRegistry.get("audit") is audit
            True
        """
        if isinstance(hook, Hook):
            name = hook.metadata.name
        elif inspect.iscoroutinefunction(hook):
            name = hook.__name__
        else:
            raise TypeError(
                f"HookRegistry.register takes a Hook or an 'async def' function, not {hook!r}"
            )
        self._add(name, hook, _same_entry, _replaces)

    @on_current
    def attach(self, hook: Hook) -> None:
        """Register a hook being attached to one owner (an instance decorator, a load).

        Outside an `AgentScope` this is `register`, and so it is for a function
        defined at module level (defined once, it is named once, globally).
        Inside a scope, a function defined inside another (a closure, made anew
        by every request) is named in the scope: the hooks a request handler
        defines neither collide with another request's nor stay after the
        scope, and their owners save.

        Raises:
            ValueError: A different hook has the name (in the scope, or globally).
        """
        scope = SCOPED_HOOK_NAMES.get()
        if scope is None or "<locals>" not in getattr(hook.fn, "__qualname__", "<locals>"):
            self.register(hook)
            return
        name = hook.metadata.name
        held = scope.entries.get(name)
        if held is None:
            outside = self._entries.get(name)
            if outside is None or not _same_entry(outside, hook):
                scope.entries[name] = hook
        elif not held.same_as(hook):
            if not redefines(held.fn, hook.fn):
                raise self._taken(name)
            scope.entries[name] = hook

    @on_current
    def get(self, name: str) -> Hook | HookFunction:
        """The hook registered as `name` (the current `AgentScope`'s first).

        A function registered as it is (`register(fn)`) is returned as it is.

        Raises:
            UnregisteredHookError: Nothing has that name (a `KeyError`).
        """
        scope = SCOPED_HOOK_NAMES.get()
        held = None if scope is None else scope.find(name)
        return self._lookup(name) if held is None else held

    def _replace(self, name: str, held: Hook | HookFunction) -> None:
        self.unregister(name)  # from the global hooks too: `@hook` adds the new one

    @on_current
    def unregister(self, name: str) -> None:
        """Remove the hook `name`, from the global hooks too.

        Raises:
            UnregisteredHookError: No hook has that name.
        """
        hook = self.get(name)
        scope = SCOPED_HOOK_NAMES.get()
        while scope is not None:  # the scope's name, else the registry's
            if scope.entries.pop(name, None) is not None:
                return
            scope = scope.outer
        del self._entries[name]
        self._detach(hook)

    @on_current
    def clear(self) -> None:
        """Forget every hook name (the current `AgentScope`'s too) and every global hook."""
        self.clear_globals()
        super().clear()
        scope = SCOPED_HOOK_NAMES.get()
        while scope is not None:
            scope.entries.clear()
            scope = scope.outer

    @on_current
    def clear_globals(self) -> None:
        """Detach every global hook of this registry, keeping the names."""
        for held in self._globals.values():
            if held:
                held.clear()
                held.changed()
        self.any_global = False

    @classmethod
    def get_by_type(cls, kind: HookKind, hooks: Iterable[Hook]) -> list[Hook]:
        """The hooks among `hooks` that handle `kind`, in order.

        As in pygents, anything whose `type` attribute is `kind` (or a tuple
        holding it) counts too, such as a function given a `type`.
        """
        return [h for h in hooks if kind in _kinds_of(h)]

    @on_current
    def globals_for(self, kind: HookKind) -> GlobalHooks:
        """The live list of this registry's global hooks of `kind` (mutated in place,
        never replaced)."""
        hooks = self._globals.get(kind)
        if hooks is None:
            hooks = self._globals[kind] = GlobalHooks(kind)
        return hooks

    @on_current
    def add_global(self, hook: Hook) -> None:
        """Make `hook` a global hook of this registry: it fires for every object
        dispatching one of its kinds while this registry is current (see the class)."""
        for kind in hook.kinds:
            hooks = self.globals_for(kind)
            if not any(held.same_as(hook) for held in hooks):
                hooks.append(hook)
                hooks.changed()
                self.any_global = True

    def global_hooks(self, kind: HookKind, tags: frozenset[str]) -> tuple[Hook, ...]:
        """The global hooks of `kind` that fire for an owner with `tags`, in order
        (see `GlobalHooks.matching`)."""
        hooks = self._globals.get(kind)
        return () if hooks is None else hooks.matching(tags)

    @on_current
    def is_saved_as(self, hook: Hook) -> bool:
        """Whether loading `hook.metadata.name` gives `hook` (or an equivalent) back."""
        name, scope = hook.metadata.name, SCOPED_HOOK_NAMES.get()
        held: Hook | HookFunction | None = None if scope is None else scope.find(name)
        if held is None:
            held = self._entries.get(name)
        if held is None or isinstance(held, Hook):
            return held is not None and held.same_as(hook)
        return _loads_as(held, hook)

    def _detach(self, hook: Hook | HookFunction) -> None:
        """Take `hook` out of this registry's global hooks (if it is there)."""
        for held in self._globals.values():
            kept = [h for h in held if h is not hook]
            if len(kept) != len(held):
                held[:] = kept
                held.changed()
        self.any_global = any(self._globals.values())


# The registry `HookRegistry.get(...)` and the other calls on the class use: the process
# default (shared on purpose: it is the one every context sees), unless
# `AgentRegistry.use()` made another one current.
CURRENT_HOOKS: ContextVar[HookRegistry] = ContextVar(
    "pygents_ctx_hooks",
    default=HookRegistry(),  # noqa: B039
)


def hook(
    kind: HookKind | Iterable[HookKind],
    *,
    lock: bool = False,
    tags: Iterable[str] | None = None,
    **fixed_kwargs: Any,
) -> Callable[[HookFunction], Hook]:
    """Register a global hook: it fires for every object that dispatches `kind`.

    The hook is named in the current `HookRegistry` and is one of its global
    hooks: the process default's, unless `AgentRegistry.use()` made another
    registry current (then it fires where that registry is current, and for
    that registry's agents; see `HookRegistry`).

    Args:
        kind: One event kind, or a list of kinds (the function should then take
            `*args, **kwargs`).
        lock: Serialize concurrent calls of this hook.
        tags: Fire only for objects that share at least one of these tags.
        **fixed_kwargs: Merged into every call; a zero-argument function is
            called for its value each time.

    Returns:
        A decorator that returns the registered `Hook`.

    Raises:
        ValueError: `kind` is an empty list, or another hook has the function's name.
        TypeError: `kind` is not a hook kind, or the function is not `async def`.

    Examples:
        >>> from pygents_ctx import ContextQueueHook, hook
        >>> @hook([ContextQueueHook.AFTER_APPEND, ContextQueueHook.ON_EVICT], tags=["chat"])
        ... async def trace(*args, **kwargs):
        ...     pass
    """
    kinds = _kinds(kind)  # checked now, not when the function arrives

    def register(fn: HookFunction) -> Hook:
        created = Hook(fn, kinds, lock=lock, tags=tags, fixed_kwargs=fixed_kwargs)
        registry = HookRegistry.current()
        registry.register(created)
        registry.add_global(created)
        return created

    return register


def _same_entry(held: Hook | HookFunction, new: Hook | HookFunction) -> bool:
    """Whether registering `new` where `held` is changes nothing.

    A function registered again is itself; a registered hook's own function
    given as it is adds nothing to the hook. A hook made of a function
    registered as it is does: the events it handles.
    """
    if isinstance(held, Hook):
        return held.same_as(new) if isinstance(new, Hook) else held.fn is new
    return held is new


def _replaces(held: Hook | HookFunction, new: Hook | HookFunction) -> bool:
    """Whether `new` takes the name from `held`: a hook made of the function registered
    as it is, or a new definition of the same function."""
    new_fn = new.fn if isinstance(new, Hook) else new
    if not isinstance(held, Hook) and new_fn is held:
        return True
    return redefines(held.fn if isinstance(held, Hook) else held, new_fn)


def _loads_as(fn: HookFunction, hook: Hook) -> bool:
    """Whether loading a hook saved by the name of `fn`, registered as it is, gives
    `hook` back: a hook of `fn` for the saved events, without options."""
    return hook.fn is fn and hook.lock is None and not hook.tags and not hook.fixed_kwargs


def _kinds_of(h: object) -> tuple[object, ...]:
    """The kinds `h` handles: a `Hook`'s, or what its `type` attribute names."""
    if isinstance(h, Hook):
        return h.kinds
    named = getattr(h, "type", None)
    return tuple(named) if isinstance(named, (tuple, frozenset)) else (named,)


def _kinds(kind: HookKind | Iterable[HookKind]) -> tuple[HookKind, ...]:
    """One kind or several, as a checked tuple.

    Raises:
        TypeError: Something is not a hook kind member (a string included:
            "on_error" names both a turn's and a tool's event).
        ValueError: The list is empty.
    """
    if isinstance(kind, _KIND_TYPES):
        return (kind,)
    given: object = kind  # callers may pass anything: a string, a number
    kinds: tuple[object, ...] = (
        tuple(given) if isinstance(given, Iterable) and not isinstance(given, str) else (given,)
    )
    if not kinds:
        raise ValueError("a hook needs at least one type (hook kind); the list was empty")
    checked: list[HookKind] = []
    for k in kinds:
        if not isinstance(k, _KIND_TYPES):
            raise TypeError(
                f"hook kinds are members of TurnHook, AgentHook, ToolHook, ContextQueueHook or "
                f"ContextPoolHook (such as TurnHook.BEFORE_RUN), not {k!r}"
            )
        checked.append(k)
    return tuple(checked)
