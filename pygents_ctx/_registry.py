"""What the name-keyed registries share: a class-level dict of names to objects.

Each registry lives beside the kind of object it holds (`HookRegistry` in
`hooks`, `ToolRegistry` in `tools`, `AgentRegistry` in `agent`) and builds on
this base; `pygents_ctx.registry` gathers the three under their public path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from pygents_ctx.errors import _UnregisteredError

__all__ = ["NameRegistry", "identical"]

T = TypeVar("T")


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
    def _add(cls, name: str, entry: T, same: Callable[[T, T], bool]) -> None:
        held = cls._entries.get(name)
        if held is not None and not same(held, entry):
            raise cls._taken(name)
        if held is None:
            cls._entries[name] = entry

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
            raise cls._missing(
                f"{cls._noun} {name!r} not found: nothing is registered under that name; "
                f"{cls._missing_hint}"
            ) from None
        return entry

    @classmethod
    def clear(cls) -> None:
        """Remove everything."""
        cls._entries.clear()


def identical(held: object, entry: object) -> bool:
    """Whether two entries are one object (a registry that holds no equivalents)."""
    return held is entry
