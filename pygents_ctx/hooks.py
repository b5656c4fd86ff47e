"""Hooks: async callbacks fired on lifecycle events, per object or globally.

A hook is attached to one object with an instance decorator
(`@agent.before_turn`, `@queue.on_evict`, ...) or to every object that fires
its kind with `@hook(kind)`. For one event the object's own hooks run first, in
list order, then the global hooks of that kind not already called; a global
hook with `tags` fires only for objects that share one of them. A hook that
raises stops the dispatch and the exception propagates.

Example:
    >>> from pygents_ctx import AgentHook, hook
    >>> @hook(AgentHook.BEFORE_TURN, tags=["audited"])
    ... async def audit(agent):
    ...     print("turn on", agent.name)
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias, overload

from pygents_ctx._calls import CallSpec, LoopLock
from pygents_ctx.errors import UnserializableHookError
from pygents_ctx.registry import HookRegistry

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

HookFunction: TypeAlias = "Callable[..., Awaitable[Any]]"


@dataclass(frozen=True, slots=True)
class HookMetadata:
    """What a hook is: its function's name and docstring."""

    name: str
    description: str | None

    def dict(self) -> dict[str, Any]:
        """The metadata as a plain dict."""
        return {"name": self.name, "description": self.description}


class Hook:
    """An async function bound to one or more event kinds.

    Made by `@hook(...)` (global) or an instance decorator such as
    `@agent.before_turn`. Calling it awaits the function with the fixed kwargs
    merged in and context parameters injected.
    """

    __slots__ = ("_lock", "_spec", "fixed_kwargs", "fn", "kinds", "lock", "metadata", "tags")

    def __init__(
        self,
        fn: HookFunction,
        kinds: tuple[HookKind, ...],
        *,
        lock: bool = False,
        tags: Iterable[str] | None = None,
        fixed_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"hook {getattr(fn, '__name__', fn)!r} must be an 'async def' function")
        self.fn = fn
        self.kinds = kinds
        self.lock = lock
        self.tags = tag_set(tags)
        self.fixed_kwargs = dict(fixed_kwargs or {})
        self.metadata = HookMetadata(fn.__name__, inspect.getdoc(fn))
        self._spec = CallSpec(fn, self.fixed_kwargs, f"hook {fn.__name__!r}")
        self._lock = LoopLock() if lock else None

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Await the hook's function with these arguments."""
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
            and self.lock == other.lock
            and self.tags == other.tags
            and self.fixed_kwargs == other.fixed_kwargs
        )

    def __repr__(self) -> str:
        kinds = ", ".join(f"{type(k).__name__}.{k.name}" for k in self.kinds)
        return f"<Hook {self.metadata.name} [{kinds}]>"


def hook(
    kind: HookKind | Iterable[HookKind],
    *,
    lock: bool = False,
    tags: Iterable[str] | None = None,
    **fixed_kwargs: Any,
) -> Callable[[HookFunction], Hook]:
    """Register a global hook: it fires for every object that dispatches `kind`.

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

    Example:
        >>> from pygents_ctx import ContextQueueHook, hook
        >>> @hook([ContextQueueHook.AFTER_APPEND, ContextQueueHook.ON_EVICT], tags=["chat"])
        ... async def trace(*args, **kwargs):
        ...     pass
    """
    kinds = _kinds(kind)

    def register(fn: HookFunction) -> Hook:
        created = Hook(fn, kinds, lock=lock, tags=tags, fixed_kwargs=fixed_kwargs)
        HookRegistry.register(created)
        HookRegistry.add_global(created)
        return created

    return register


def _kinds(kind: HookKind | Iterable[HookKind]) -> tuple[HookKind, ...]:
    kinds = (kind,) if isinstance(kind, _KIND_TYPES) else tuple(kind)
    if not kinds:
        raise ValueError("hook() needs at least one hook kind; the list was empty")
    for k in kinds:
        if not isinstance(k, _KIND_TYPES):
            raise TypeError(
                f"hook() takes members of TurnHook, AgentHook, ToolHook, ContextQueueHook or "
                f"ContextPoolHook, not {k!r}"
            )
    return kinds


def tag_set(tags: Iterable[str] | None) -> frozenset[str]:
    if tags is None:
        return frozenset()
    if isinstance(tags, str):
        raise TypeError(f"tags must be a collection of strings, not the string {tags!r}")
    result = frozenset(tags)
    for tag in result:
        if not isinstance(tag, str):
            raise TypeError(f"tags must be strings, got {tag!r}")
    return result


async def fire(
    kind: HookKind, own: list[Hook], tags: frozenset[str], *args: Any, **kwargs: Any
) -> None:
    """Run the hooks of one event: the owner's own, then the matching globals.

    Callers test `own or <global list>` first, so an unobserved event costs no await.
    """
    called: list[Hook] = []
    for h in tuple(own):
        if kind in h.kinds and h not in called:
            called.append(h)
            await h(*args, **kwargs)
    for h in tuple(HookRegistry.globals_for(kind)):
        if h in called or (h.tags and h.tags.isdisjoint(tags)):
            continue
        called.append(h)
        await h(*args, **kwargs)


class HookAttacher:
    """What `obj.<event>` returns: a decorator attaching a hook to that one object.

    Works bare (`@obj.event`), with options (`@obj.event(lock=True, env="prod")`)
    and as a plain call (`obj.event(fn)`).
    """

    __slots__ = ("_hooks", "_kind")

    def __init__(self, hooks: list[Hook], kind: HookKind) -> None:
        self._hooks = hooks
        self._kind = kind

    @overload
    def __call__(self, fn: HookFunction, /) -> Hook: ...
    @overload
    def __call__(
        self, fn: None = None, /, *, lock: bool = ..., **fixed_kwargs: Any
    ) -> Callable[[HookFunction], Hook]: ...
    def __call__(
        self, fn: HookFunction | None = None, /, *, lock: bool = False, **fixed_kwargs: Any
    ) -> Hook | Callable[[HookFunction], Hook]:
        def attach(f: HookFunction) -> Hook:
            created = Hook(f, (self._kind,), lock=lock, fixed_kwargs=fixed_kwargs)
            # Another function may hold the name (a closure made twice, say): the hook
            # still fires, and saving its owner raises UnserializableHookError.
            with contextlib.suppress(ValueError):
                HookRegistry.register(created)
            self._hooks.append(created)
            return created

        return attach if fn is None else attach(fn)


class HookSlot:
    """Descriptor for an instance decorator: `owner.<name>` attaches a hook of `kind`."""

    __slots__ = ("_list_name", "kind")

    def __init__(self, kind: HookKind, list_name: str = "hooks") -> None:
        self.kind = kind
        self._list_name = list_name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> HookSlot: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> HookAttacher: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> HookSlot | HookAttacher:
        if obj is None:
            return self
        hooks: list[Hook] = getattr(obj, self._list_name)
        return HookAttacher(hooks, self.kind)


def hooks_to_dict(hooks: Iterable[Hook], kind_type: type[Enum], owner: str) -> dict[str, list[str]]:
    """Hook names grouped by kind value, as saved by `to_dict()`.

    Raises:
        UnserializableHookError: A hook cannot be found again by its name.
    """
    saved: dict[str, list[str]] = {}
    for h in hooks:
        name = h.metadata.name
        if not HookRegistry.is_saved_as(h):
            raise UnserializableHookError(
                f"{owner}: hook {name!r} cannot be saved by name, because a different hook is "
                f"registered as {name!r}; give the function a unique name"
            )
        for kind in h.kinds:
            if isinstance(kind, kind_type):
                names = saved.setdefault(kind.value, [])
                if name not in names:
                    names.append(name)
    return saved


def hooks_from_dict(data: object, kind_type: type[Enum], owner: str) -> list[Hook]:
    """Resolve saved hook names through `HookRegistry`.

    Raises:
        ValueError: The data is not `{kind value: [names]}` or a kind is unknown.
        UnregisteredHookError: A name is not registered.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{owner}: 'hooks' must be a dict of kind -> list of names, not {data!r}")
    valid = {k.value: k for k in kind_type}
    hooks: list[Hook] = []
    for value, names in data.items():
        kind = valid.get(value)
        if kind is None:
            raise ValueError(
                f"{owner}: unknown hook kind {value!r} in 'hooks'; expected one of {sorted(valid)}"
            )
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{owner}: 'hooks'[{value!r}] must be a list of hook names")
        for name in names:
            found = HookRegistry.get(name)
            if kind not in found.kinds:
                raise ValueError(
                    f"{owner}: hook {name!r} is registered for {found.kinds}, not {value!r}"
                )
            if found not in hooks:
                hooks.append(found)
    return hooks
