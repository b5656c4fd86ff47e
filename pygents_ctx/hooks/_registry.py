"""What the name-keyed registries share: a class-level dict of names to objects.

Each registry lives beside the kind of object it holds (`HookRegistry` in
`hooks`, `ToolRegistry` in `tools`, `AgentRegistry` in `agent`) and builds on
this base; `pygents_ctx.registry` gathers the three under their public path.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pygents_ctx._suggest import closest

if TYPE_CHECKING:
    from collections.abc import Callable

    from pygents_ctx.errors import _UnregisteredError

__all__ = ["NameRegistry", "identical", "redefines"]

T = TypeVar("T")

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


class NameRegistry(Generic[T]):
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


def identical(held: object, entry: object) -> bool:
    """Whether two entries are one object (a registry that holds no equivalents)."""
    return held is entry
