"""Hooks: async callbacks fired on lifecycle events, per object or globally.

A hook is attached to one object with an instance decorator
(`@agent.before_turn`, `@queue.on_evict`, ...) or to every object that fires
its kind with `@hook(kind)`. For one event the object's own hooks run first, in
list order, then the global hooks of that kind not already called; a global
hook with `tags` fires only for objects that share one of them. A hook that
raises stops the dispatch and the exception propagates.

Examples:
    >>> from pygents_ctx import AgentHook, hook
    >>> @hook(AgentHook.BEFORE_TURN, tags=["audited"])
    ... async def audit(agent):
    ...     print("turn on", agent.name)
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias

from pygents_ctx._calls import CallSpec, LoopLock, tag_set
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

    Made by `@hook(...)` (global) or an instance decorator such as
    `@agent.before_turn`. Calling it awaits the function with the fixed kwargs
    merged in and context parameters injected.
    """

    __slots__ = (
        "_direct",
        "_lock",
        "_spec",
        "fixed_kwargs",
        "fn",
        "kinds",
        "lock",
        "metadata",
        "tags",
    )

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
        # No lock and nothing to merge or inject: a dispatch with positional arguments
        # only may call the function itself (see `_dispatch.fire_on`).
        self._direct = self._lock is None and self._spec.plain

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

    Examples:
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
    if isinstance(kind, str):
        raise TypeError(
            f"hook() takes hook kind members such as TurnHook.BEFORE_RUN, not the string {kind!r}"
        )
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
