"""How hook events are dispatched, attached and saved (shared by every owner)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar, Token
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Self, SupportsIndex, TypeVar, cast, overload

from pygents_ctx.errors import UnregisteredHookError, UnserializableHookError
from pygents_ctx.hooks._hooks import (
    CURRENT_HOOKS,
    AgentHook,
    ContextPoolHook,
    ContextQueueHook,
    Hook,
    HookFunction,
    HookKind,
    HookRegistry,
    ToolHook,
    TurnHook,
)

if TYPE_CHECKING:
    from collections.abc import Callable

L = TypeVar("L", bound="HookList")

__all__ = [
    "AgentHookList",
    "HookAttacher",
    "HookList",
    "HookSlot",
    "PoolHookList",
    "QueueHookList",
    "ToolHookList",
    "TurnHookList",
    "enter_hooks",
    "fire",
    "hook_of_kind",
    "hooks_from_dict",
    "hooks_given",
    "hooks_to_dict",
    "leave_hooks",
    "listening",
]


def listening(kind: HookKind, own: list[Hook], tags: frozenset[str]) -> bool:
    """Whether a hook would see `kind`: for an event whose arguments cost something to
    build (a snapshot), asked before building them."""
    if own and any(kind in h.kinds for h in own):
        return True
    registry = CURRENT_HOOKS.get()
    return registry.any_global and bool(registry.global_hooks(kind, tags))


async def fire(
    kind: HookKind, own: list[Hook], tags: frozenset[str], /, *args: Any, **kwargs: Any
) -> None:
    """Run the hooks of one event: the owner's own hooks of `kind`, in list order, then
    the global hooks of `kind` whose tags match `tags`, each function once.

    The global hooks are those of the `HookRegistry` current here (an agent makes
    its registry current while it fires its events and runs its turns, see
    `enter_hooks`). Every event site calls this; when no hook listens it returns at
    once. A hook that raises stops the dispatch (the rest do not run) and the
    error propagates. `args` and `kwargs` go to every hook (a `before_invoke`
    hook gets the call's).
    """
    registry = CURRENT_HOOKS.get()
    if not (own or registry.any_global):
        return
    called: list[HookFunction] = []  # by function: an equivalent twice still fires once
    for h in tuple(own):  # a hook may change the list it is in
        if kind in h.kinds and h.fn not in called:
            called.append(h.fn)
            await h(*args, **kwargs)
    if registry.any_global:
        for h in registry.global_hooks(kind, tags):
            if h.fn not in called:
                await h(*args, **kwargs)


def enter_hooks(registry: HookRegistry) -> Token[HookRegistry] | None:
    """Make `registry` the current `HookRegistry`: the events fired here fire its global
    hooks, and hook names are looked up in it. None when it already is (then nothing
    is set); `leave_hooks` undoes it.

    An agent calls it around its events and its turns: an agent whose registry is
    not current where it runs still fires its own registry's global hooks.
    """
    return None if CURRENT_HOOKS.get() is registry else CURRENT_HOOKS.set(registry)


def leave_hooks(entered: Token[HookRegistry] | None) -> None:
    """Undo `enter_hooks`."""
    if entered is not None:
        CURRENT_HOOKS.reset(entered)


class HookAttacher:
    """What `obj.<event>` returns: a decorator attaching a hook to that one object.

    Works bare (`@obj.event`), with options (`@obj.event(lock=True, env="prod")`)
    and as a plain call (`obj.event(fn)`). Given a `Hook` (from `@hook`,
    `HookRegistry.wrap` or another owner) without options, it attaches that very
    object and returns it.
    """

    __slots__ = ("_hooks", "_kind", "_names")

    def __init__(self, hooks: list[Hook], kind: HookKind, names: HookRegistry | None) -> None:
        self._hooks = hooks
        self._kind = kind
        self._names = names

    @overload
    def __call__(self, fn: HookFunction | Hook, /) -> Hook: ...
    @overload
    def __call__(
        self, fn: None = None, /, *, lock: bool = ..., **fixed_kwargs: Any
    ) -> Callable[[HookFunction | Hook], Hook]: ...
    def __call__(
        self, fn: HookFunction | Hook | None = None, /, *, lock: bool = False, **fixed_kwargs: Any
    ) -> Hook | Callable[[HookFunction | Hook], Hook]:
        def attach(f: HookFunction | Hook) -> Hook:
            entered = None if self._names is None else enter_hooks(self._names)
            try:
                made = hook_of_kind(self._kind, f, lock=lock, fixed_kwargs=fixed_kwargs)
            finally:
                leave_hooks(entered)
            self._hooks.append(made)
            return made

        return attach if fn is None else attach(fn)


def hook_of_kind(
    kind: HookKind,
    given: HookFunction | Hook,
    *,
    lock: bool = False,
    fixed_kwargs: Mapping[str, Any] | None = None,
) -> Hook:
    """The hook an owner attaches for `kind` when given `given`, registered by name.

    A `Hook` handling `kind`, given without options, is that very hook; one
    given with options gives its function to a new hook of `kind`; a function
    becomes a new hook of `kind`.

    Raises:
        TypeError: The function is not `async def`, or cannot take the event's arguments.
        ValueError: A hook of other events than a tool's, given for one it does not handle.
    """
    if isinstance(given, Hook) and not (lock or fixed_kwargs):
        made = _reuse(kind, given)
    else:
        # A new hook of this kind; from a hook given with options, its function.
        made = Hook(
            given.fn if isinstance(given, Hook) else given,
            kind,
            lock=lock,
            fixed_kwargs=fixed_kwargs,
        )
    return _named(made)


def _named(made: Hook) -> Hook:
    """`made`, registered by name for its owner to save (`HookRegistry.attach`).

    Another function may hold the name (a closure made twice, say): the hook
    is returned all the same and fires, and saving its owner then raises
    `UnserializableHookError`.
    """
    with contextlib.suppress(ValueError):
        HookRegistry.attach(made)
    return made


def _reuse(kind: HookKind, given: Hook) -> Hook:
    """`given` itself if it handles `kind`; else a hook of `kind` with its function and options.

    The second case is one function stacked under decorators of different
    events (`@tool_a.after_invoke` over `@tool_b.before_invoke`, as pygents'
    hooks page shows): it fires for both. The new hook is returned, so the
    name the decorators bind is the outermost one's. Only tools' events
    stack: for other owners pygents attaches a hook of another kind without
    ever firing it, so it is refused.

    Raises:
        TypeError: The function cannot take this event's arguments.
        ValueError: A hook of other events than a tool's, or given to another
            owner than a tool (it would never fire there in pygents).
    """
    if kind in given.kinds:
        return given
    if not (isinstance(kind, ToolHook) and all(isinstance(k, ToolHook) for k in given.kinds)):
        raise ValueError(
            f"hook {given.metadata.name!r} handles {given.type!r}, not {kind!r}; "
            f"attach it with the decorator of one of its kinds"
        )
    return Hook(
        given.fn,
        kind,
        lock=given.lock is not None,
        tags=given.tags,
        fixed_kwargs=given.fixed_kwargs,
    )


class HookList(list[Hook]):
    """An owner's `hooks`: its `Hook`s, in firing order, as a list.

    What pygents code puts in such a list is made a `Hook` as it goes in, so
    that it fires as it did there: a function whose `type` attribute names its
    event kind (or a tuple of kinds), and a `(kind, hook)` pair as pygents'
    tools hold. Anything else, or a hook of none of the owner's kinds (it would
    never fire), is refused then, with nothing added. A pair given to `in`,
    `index`, `count` or `remove` stands for what appending it put in: the hooks
    of that kind made of that hook's function.
    """

    __slots__ = ()
    kinds: ClassVar[type[Enum]]  # the owner's hook kinds (set by each subclass)
    owner: ClassVar[str]

    @classmethod
    def of(cls, items: Iterable[object]) -> Self:
        """A list of `items`, each made a `Hook` as `append` makes it."""
        made = cls()
        made.extend(items)
        return made

    def append(self, item: object, /) -> None:
        super().append(self._hook(item))

    def insert(self, index: SupportsIndex, item: object, /) -> None:
        super().insert(index, self._hook(item))

    def extend(self, items: Iterable[object], /) -> None:
        super().extend([self._hook(item) for item in items])  # all checked, then added

    def __iadd__(self, items: Iterable[object], /) -> Self:  # type: ignore[override,misc]
        self.extend(items)
        return self

    @overload
    def __setitem__(self, index: SupportsIndex, item: object, /) -> None: ...
    @overload
    def __setitem__(self, index: slice, items: Iterable[object], /) -> None: ...
    def __setitem__(self, index: SupportsIndex | slice, item: Any, /) -> None:
        if isinstance(index, slice):
            super().__setitem__(index, [self._hook(each) for each in item])
        else:
            super().__setitem__(index, self._hook(item))

    # pygents' tools hold `(kind, hook)` pairs. Asked about, a pair stands for what
    # appending it puts in: a hook of that kind made of that hook's (or function's) function.
    def _pair_positions(self, item: object) -> list[int] | None:
        """Where the hooks a `(kind, hook or function)` pair stands for are (None: not a pair)."""
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], self.kinds)):
            return None
        kind, given = item
        fn = given.fn if isinstance(given, Hook) else given
        return [i for i, held in enumerate(self) if kind in held.kinds and held.fn is fn]

    def __contains__(self, item: object, /) -> bool:
        positions = self._pair_positions(item)
        return super().__contains__(item) if positions is None else bool(positions)

    def count(self, item: Any, /) -> int:
        positions = self._pair_positions(item)
        return super().count(item) if positions is None else len(positions)

    def index(
        self, item: Any, start: SupportsIndex = 0, stop: SupportsIndex = sys.maxsize, /
    ) -> int:
        positions = self._pair_positions(item)
        if positions is None:
            return super().index(item, start, stop)
        first, last, _ = slice(start, stop).indices(len(self))
        for position in positions:
            if first <= position < last:
                return position
        raise ValueError(f"{item!r} is not in list")

    def remove(self, item: Any, /) -> None:
        del self[self.index(item)]

    @classmethod
    def _hook(cls, item: object) -> Hook:
        """`item` as a hook of this owner.

        Raises:
            TypeError: `item` is not a hook, a function with a `type`, or a `(kind, hook)` pair.
            ValueError: The hook handles none of the owner's kinds.
        """
        if isinstance(item, Hook):
            made = item
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], cls.kinds):
            made = hook_of_kind(cast("HookKind", item[0]), item[1])
        elif callable(item) and getattr(item, "type", None) is not None:
            made = _named(Hook(cast("HookFunction", item), cast("Any", item).type))
        else:
            raise TypeError(
                f"{cls.owner} hooks are Hook objects (from @{cls.owner}.<event>, @hook "
                f"or HookRegistry.wrap), or functions whose 'type' names their "
                f"{cls.kinds.__name__}; not {item!r}"
            )
        if not any(isinstance(kind, cls.kinds) for kind in made.kinds):
            raise ValueError(
                f"hook {made.metadata.name!r} handles {made.type!r}, which {cls.owner}s never "
                f"fire; give it one of the {cls.kinds.__name__} kinds"
            )
        return made


class TurnHookList(HookList):
    """A turn's hooks (and an agent's `turn_hooks`)."""

    __slots__ = ()
    kinds = TurnHook
    owner = "turn"


class AgentHookList(HookList):
    """An agent's hooks."""

    __slots__ = ()
    kinds = AgentHook
    owner = "agent"


class ToolHookList(HookList):
    """A tool's hooks."""

    __slots__ = ()
    kinds = ToolHook
    owner = "tool"


class QueueHookList(HookList):
    """A context queue's hooks."""

    __slots__ = ()
    kinds = ContextQueueHook
    owner = "queue"


class PoolHookList(HookList):
    """A context pool's hooks."""

    __slots__ = ()
    kinds = ContextPoolHook
    owner = "pool"


class HookSlot:
    """Descriptor for an instance decorator: `owner.<name>` attaches a hook of `kind`.

    The hook is named in the current `HookRegistry`, or, given `names`, in the
    registry `names(owner)` returns (an agent's own, where loading it looks).
    """

    __slots__ = ("_list_name", "_names", "kind")

    def __init__(
        self,
        kind: HookKind,
        list_name: str = "hooks",
        names: Callable[[Any], HookRegistry] | None = None,
    ) -> None:
        self.kind = kind
        self._list_name = list_name
        self._names = names

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> HookSlot: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> HookAttacher: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> HookSlot | HookAttacher:
        if obj is None:
            return self
        hooks: list[Hook] = getattr(obj, self._list_name)
        return HookAttacher(hooks, self.kind, None if self._names is None else self._names(obj))


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
                f"{owner}: hook {name!r} is not the one registered under that name (a "
                f"different hook holds it), so it cannot be saved by name; give the function "
                f"a unique name"
            )
        for kind in h.kinds:
            if isinstance(kind, kind_type):
                names = saved.setdefault(kind.value, [])
                if name not in names:
                    names.append(name)
    return saved


# While a load runs with hooks given to it (`Agent.from_dict(..., hooks=...)`): them by name.
_GIVEN: ContextVar[Mapping[str, HookFunction | Hook] | None] = ContextVar(
    "pygents_ctx_given_hooks", default=None
)


@contextlib.contextmanager
def hooks_given(hooks: Iterable[HookFunction | Hook] | None, owner: str) -> Iterator[None]:
    """While the block runs, saved hook names resolve to `hooks` first (by function name).

    Raises:
        TypeError: An element is neither a `Hook` nor an `async def` function.
        ValueError: Two of them have the same name.
    """
    if hooks is None:
        yield
        return
    given: dict[str, HookFunction | Hook] = {}
    for h in hooks:
        if isinstance(h, Hook):
            name = h.metadata.name
        elif callable(h) and isinstance(getattr(h, "__name__", None), str):
            name = h.__name__
        else:
            raise TypeError(
                f"{owner}: hooks= takes hooks or async functions (matched to the saved hooks "
                f"by name), not {h!r}"
            )
        if name in given and given[name] is not h:
            raise ValueError(
                f"{owner}: hooks= has two hooks named {name!r}; saved hooks are found by "
                f"name, so give each function a name of its own"
            )
        given[name] = h
    token = _GIVEN.set(given)
    try:
        yield
    finally:
        _GIVEN.reset(token)


def hooks_from_dict(data: object, list_type: type[L], owner: str) -> L:
    """Resolve saved hook names: to the hooks given to the load (`hooks_given`), else
    through `HookRegistry`.

    Raises:
        ValueError: The data is not `{kind value: [names]}` or a kind is unknown.
        UnregisteredHookError: A name is not registered.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{owner}: 'hooks' must be a dict of kind -> list of names, not {data!r}")
    if not data:
        return list_type()  # the usual case, and loading an agent asks once per turn
    valid: dict[str, HookKind] = {k.value: cast("HookKind", k) for k in list_type.kinds}
    wanted: dict[str, list[HookKind]] = {}  # each name with its kinds, in first-seen order
    for value, names in data.items():
        kind = valid.get(value)
        if kind is None:
            raise ValueError(
                f"{owner}: unknown hook kind {value!r} in 'hooks'; expected one of {sorted(valid)}"
            )
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{owner}: 'hooks'[{value!r}] must be a list of hook names")
        for name in names:
            wanted.setdefault(name, []).append(kind)
    given = _GIVEN.get()
    hooks = list_type()
    for name, kinds in wanted.items():
        if given is not None and name in given:
            found = _given_hook(given[name], kinds, owner)
        else:
            found = _registered_hook(name, kinds, owner)
        for kind in kinds:
            if kind not in found.kinds:
                raise ValueError(
                    f"{owner}: hook {name!r} is registered for {found.kinds}, not {kind.value!r}"
                )
        if found not in hooks:
            hooks.append(found)
    return hooks


def _registered_hook(name: str, kinds: list[HookKind], owner: str) -> Hook:
    """The hook registered as `name`; for a function registered as it is, a hook of
    it for the saved `kinds` (which saves by the same name again).

    Raises:
        UnregisteredHookError: There is none; the message says how to give it.
    """
    try:
        found = HookRegistry.get(name)
    except UnregisteredHookError:
        raise UnregisteredHookError(
            f"{owner}: hook {name!r} not found: no hook is registered under that name (a "
            f"hook defined inside a function, such as `@agent.after_turn` in main(), is "
            f"registered only once that code runs); pass it to the load, as in "
            f"Agent.from_json(data, hooks=[{name}]), or define it at module level"
        ) from None
    return found if isinstance(found, Hook) else Hook(found, kinds)


def _given_hook(given: HookFunction | Hook, kinds: list[HookKind], owner: str) -> Hook:
    """The hook a load was given for a saved name, registered so its owner saves again.

    Raises:
        TypeError: A function that is not `async def`.
    """
    if isinstance(given, Hook):
        made = given
    else:
        try:
            made = Hook(given, kinds)
        except TypeError as exc:
            raise TypeError(f"{owner}: {exc}") from None
        with contextlib.suppress(UnregisteredHookError):
            held = HookRegistry.get(made.metadata.name)
            if isinstance(held, Hook) and held.same_as(made):
                return held  # the function given is the registered hook's: that hook
    return _named(made)
