"""How hook events are dispatched, attached and saved (shared by every owner)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from enum import Enum
from typing import TYPE_CHECKING, Any, overload

from pygents_ctx.errors import UnserializableHookError
from pygents_ctx.hooks import Hook, HookFunction, HookKind
from pygents_ctx.registry import HookRegistry

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "HookAttacher",
    "HookSlot",
    "fire",
    "hooks_from_dict",
    "hooks_to_dict",
    "listening",
]


def listening(kind: HookKind, own: list[Hook], global_hooks: list[Hook]) -> bool:
    """Whether any hook would see `kind`: worth building costly arguments (snapshots) for."""
    return bool(global_hooks) or any(kind in h.kinds for h in own)


async def fire(
    kind: HookKind, own: list[Hook], tags: frozenset[str], *args: Any, **kwargs: Any
) -> None:
    """Run the hooks of one event: the owner's own, then the matching globals.

    Callers test `own or <global list>` first, so an unobserved event costs no await.
    """
    called: list[HookFunction] = []  # by function: an equivalent twice still fires once
    for h in tuple(own):
        if kind in h.kinds and h.fn not in called:
            called.append(h.fn)
            await h(*args, **kwargs)
    for h in tuple(HookRegistry.globals_for(kind)):
        if h.fn in called or (h.tags and h.tags.isdisjoint(tags)):
            continue
        called.append(h.fn)
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
        def attach(f: HookFunction | Hook) -> Hook:
            if isinstance(f, Hook):  # re-attaching a hook made elsewhere: reuse its function
                f = f.fn
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
