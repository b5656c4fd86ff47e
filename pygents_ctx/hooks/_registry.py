"""What the name-keyed registries share: a registry object holding names and objects.

Each registry lives beside the kind of object it holds (`HookRegistry` in
`hooks`, `ToolRegistry` in `tools`, `AgentRegistry` in `agent`) and builds on
this base; `pygents_ctx.registry` gathers the three under their public path.

A registry is an object (`ToolRegistry()` makes an empty one), and each kind
has a process default. Called on the class, as pygents code calls them
(`ToolRegistry.get("search")`), the methods act on the current registry: the
process default, unless `AgentRegistry.use()` made another one current.
"""

from __future__ import annotations

import inspect
import logging
from types import MethodType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, ParamSpec, Protocol, TypeVar, cast

from pygents_ctx._suggest import closest

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Concatenate

    from pygents_ctx.errors import _UnregisteredError

__all__ = ["NameRegistry", "identical", "on_current", "redefines"]


class _Registry(Protocol):
    @classmethod
    def current(cls) -> Any: ...


T = TypeVar("T")
S = TypeVar("S", bound=_Registry)
P = ParamSpec("P")
V = TypeVar("V")

logger = logging.getLogger("pygents_ctx")


def redefines(held: Callable[..., Any], new: Callable[..., Any]) -> bool:
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


class on_current(Generic[S, P, V]):  # used as a decorator, as classmethod is
    """A registry method that also works on the class, on the current registry.

    `registry.get(name)` asks that registry; `ToolRegistry.get(name)`, as
    pygents code writes it, asks the current one (`ToolRegistry.current()`).
    This is the one reason the registries use a descriptor: pygents' registries
    were classes with class methods, and code written for them must keep working.
    """

    def __init__(self, method: Callable[Concatenate[S, P], V]) -> None:
        self._method = method
        self.__doc__ = method.__doc__
        self.__name__ = method.__name__
        self.__wrapped__ = method

    def __get__(self, registry: S | None, owner: type[S]) -> Callable[P, V]:
        target = owner.current() if registry is None else registry
        return cast("Callable[P, V]", MethodType(self._method, target))


class NameRegistry(Generic[T]):
    """What the three registries share: names to objects, in one registry object."""

    _noun: ClassVar[str]
    _missing: ClassVar[type[_UnregisteredError]]
    _missing_hint: ClassVar[str]

    def __init__(self) -> None:
        self._entries: dict[str, T] = {}

    @classmethod
    def current(cls: type[S]) -> S:
        """The registry that calls on the class act on (the process default unless
        `AgentRegistry.use()` made another current)."""
        raise NotImplementedError  # each registry says where its current one is

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {len(self._entries)} {self._noun}s>"

    def _add(
        self,
        name: str,
        entry: T,
        same: Callable[[T, T], bool],
        replaces: Callable[[T, T], bool],
    ) -> None:
        """Register `entry` under `name`: a no-op when `same` as the one held, and
        in its place when it `replaces` it (a re-definition); else `_taken`."""
        held = self._entries.get(name)
        if held is None:
            self._entries[name] = entry
        elif not same(held, entry):
            if not replaces(held, entry):
                raise self._taken(name)
            self._replace(name, held)
            self._entries[name] = entry
            logger.debug(
                "%s %r was defined again: the new definition replaces it", self._noun, name
            )

    def _replace(self, name: str, held: T) -> None:
        """Forget what the registry holds for `held` (under `name`) before a new definition."""
        del self._entries[name]

    def _taken(self, name: str) -> ValueError:
        """The error for a name another object holds."""
        return ValueError(
            f"{self._noun} {name!r} already registered: a different {self._noun} has that "
            f"name; rename it or call {type(self).__name__}.unregister({name!r}) first"
        )

    @on_current
    def get(self, name: str) -> T:
        """Return the object registered under `name`.

        Raises:
            UnregisteredToolError, UnregisteredAgentError, UnregisteredHookError:
                Nothing has that name (each is a `KeyError`).
        """
        return self._lookup(name)

    def _lookup(self, name: str) -> T:
        """`get`, for the registries that look further first (a scope, tools made on demand)."""
        try:
            entry: T = self._entries[name]
        except KeyError:
            meant = closest(name, self._entries)
            guess = "" if meant is None else f" (did you mean {meant!r}?)"
            raise self._missing(
                f"{self._noun} {name!r} not found{guess}: nothing is registered under that "
                f"name{self._elsewhere(name)}"
            ) from None
        return entry

    def _elsewhere(self, name: str) -> str:
        """The end of the message for a name not found here: how to register it, and,
        for a registry that is not the current one (one given by `registry=`), that
        registering (`@tool`, `@hook`) goes to the current one."""
        current = type(self).current()
        if current is self:
            return f"; {self._missing_hint}"
        kind = type(self).__name__
        there = (
            f"; the current {kind} has a {self._noun} {name!r}: register it in this one too"
            if name in current._entries
            else f"; register the {self._noun} in it"
        )
        return (
            f" in the {kind} given ({self!r}), which is not the current one (where @tool and "
            f"@hook register){there} (`registry.register(...)`, or define it inside "
            f"`with agent_registry.use():`)"
        )

    @on_current
    def clear(self) -> None:
        """Remove everything."""
        self._entries.clear()


def identical(held: object, entry: object) -> bool:
    """Whether two entries are one object (a registry that holds no equivalents)."""
    return held is entry
