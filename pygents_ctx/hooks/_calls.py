"""How tools and hooks are called: fixed kwargs, dropped extras, context injection.

A parameter annotated `ContextQueue` or `ContextPool` receives the running
agent's queue or pool; one annotated with an `@injectable` class receives the
agent's resource of that class (see `_resources`). The queue and the pool build
on this module: each registers its class here when it is defined
(`receives_context`), so this module never imports them.

A parameter annotated `IdempotencyKey` receives the key of the model's tool
call the tool runs for (`CALL_KEY`, set by the model loop around the call); only
a tool may take one.

A `CallSpec` is worked out once, when a function is decorated, so that a call
does only the work its function needs: a plain function with no fixed kwargs and
no context parameters is called with its arguments untouched.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import re
import types
import typing
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pygents_ctx._checks import strings
from pygents_ctx._resources import injectable_named, is_injectable

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping

__all__ = [
    "CALL_KEY",
    "CONTEXT_READERS",
    "CURRENT_CONTEXT",
    "KEY",
    "POOL",
    "QUEUE",
    "CallSpec",
    "IdempotencyKey",
    "LoopLock",
    "any_dynamic",
    "evaluate_dynamic",
    "is_dynamic",
    "receives_context",
    "tag_set",
]

logger = logging.getLogger("pygents_ctx")

# The running agent's (queue, pool, resources of the run by class), set by the agent
# around each step of a turn and reset before control returns to its caller, so that
# agents interleaved on one event loop (or in one task) never see each other's context.
CURRENT_CONTEXT: ContextVar[tuple[Any, Any, Mapping[type, object]] | None] = ContextVar(
    "pygents_ctx_current_context", default=None
)

# Where the queue and the pool are in `CURRENT_CONTEXT`; KEY: the slot of an idempotency key.
QUEUE, POOL, KEY = 0, 1, -1


class IdempotencyKey(str):
    """A tool parameter's type: the key of the model's tool call, to dedupe a side effect by.

    A parameter of a `@tool` function annotated `IdempotencyKey` is filled by
    the model loop (`ModelLoop`) and left out of the tool's schema: the model
    never sees it. Its value is the session id and the model's tool call id
    (`"<session>:<call id>"`), the same every time that call runs: when a run
    resumed after a crash cannot tell whether a started call ran (see the
    step journal in the durable runs guide), a tool that passes the key to
    its payment provider, or keeps it with its effect, does the effect once.

    Called outside a model loop, the tool needs the key passed explicitly, or
    the parameter annotated `IdempotencyKey | None = None` (then None). Only
    a tool takes one: a hook (or another decorated function) with a
    parameter so annotated is refused when it is decorated.

    Examples:
        >>> from pygents_ctx import IdempotencyKey, tool
        >>> @tool
        ... async def refund(order: str, key: IdempotencyKey) -> str:
        ...     "Refund an order."
        ...     return f"refunded {order} once, as {key}"
        >>> refund.metadata.input_schema["required"]
        ['order']
    """

    __slots__ = ()


# The idempotency key of the model's tool call whose tool runs (in its task and the
# tasks it starts), set by the model loop around the call.
CALL_KEY: ContextVar[IdempotencyKey | None] = ContextVar("pygents_ctx_call_key", default=None)
# The classes registered with `receives_context`: the queue's and the pool's.
_CONTEXT_CLASSES: dict[int, type] = {}


def receives_context(cls: type, slot: int) -> None:
    """Let a parameter annotated `cls` receive the running agent's value at `slot`.

    `ContextQueue` registers itself at `QUEUE` and `ContextPool` at `POOL` when
    they are defined (before any tool or hook can name them), so that this
    module, which they build on, needs neither.
    """
    _CONTEXT_CLASSES[slot] = cls


class _ContextReaders:
    """Whether any tool or hook made so far reads `CURRENT_CONTEXT`.

    Only a function with a context parameter reads it. Until one is decorated,
    agents skip setting the variable around each turn, which is a sizeable share
    of a fast turn; nothing can tell the difference. (Tools and hooks are made at
    import time: one made during a turn sees the context from the next turn on.)
    """

    __slots__ = ("exist",)

    def __init__(self) -> None:
        self.exist = False


CONTEXT_READERS = _ContextReaders()

_ANNOTATION_NAME = re.compile(r"^\s*(?:[\w.]*\.)?(\w+)\b")
_OPTIONAL_TEXT = re.compile(r"\|\s*None\b|\bNone\s*\||^\s*Optional\[")
_DYNAMIC_TYPES = (
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    functools.partial,
)


class _Injected(NamedTuple):
    name: str
    position: int | None  # index among positional parameters, if it can be passed positionally
    slot: int | type  # QUEUE, POOL, or the injectable class of a resource
    optional: bool


def is_dynamic(value: object) -> bool:
    """Whether `value` is a function that is called for its value at invocation time.

    Plain functions, lambdas, bound methods and `functools.partial` objects that
    need no arguments count; classes and other callables are passed as they are.
    """
    # `callable` first: it turns plain data away far faster than the type check.
    if not callable(value) or not isinstance(value, _DYNAMIC_TYPES):
        return False
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in signature.parameters.values()
    )


def any_dynamic(values: Collection[object]) -> bool:
    """Whether any of `values` is dynamic (see `is_dynamic`)."""
    # Most arguments are plain data: `callable` (in C) rules them out before any Python call.
    return any(map(callable, values)) and any(map(is_dynamic, values))


def evaluate_dynamic(value: Any) -> Any:
    """Call `value` if it is dynamic (see `is_dynamic`), else return it unchanged."""
    return value() if is_dynamic(value) else value


def _context_slot(annotation: Any) -> tuple[int | type, bool] | None:
    """`(slot, optional)` when an annotation names a context queue or pool, or a resource."""
    if isinstance(annotation, str):
        found = _ANNOTATION_NAME.match(annotation.removeprefix("Optional["))
        if found is None:
            return None
        name = found.group(1)
        if name == IdempotencyKey.__name__:
            return KEY, bool(_OPTIONAL_TEXT.search(annotation))
        slot: int | type | None = next(
            (at for at, cls in _CONTEXT_CLASSES.items() if cls.__name__ == name),
            None,
        )
        if slot is None:
            slot = injectable_named(name)
        return None if slot is None else (slot, bool(_OPTIONAL_TEXT.search(annotation)))
    members = (
        typing.get_args(annotation)
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else (annotation,)
    )
    optional = type(None) in members
    for member in members:
        origin = typing.get_origin(member) or member
        if origin is IdempotencyKey:
            return KEY, optional
        for at, cls in _CONTEXT_CLASSES.items():
            if origin is cls:
                return at, optional
        if is_injectable(origin):
            return origin, optional
    return None


def _annotations(fn: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:
        # Forward references that cannot be resolved: fall back to the raw text.
        return {name: p.annotation for name, p in signature.parameters.items()}


class CallSpec:
    """What a call to one decorated function needs, worked out once.

    Args:
        fn: The decorated function.
        fixed_kwargs: Keyword arguments merged into every call.
        owner: How to name the function in error messages (`"tool 'fetch'"`).
        tool: Whether the function is a tool's (only a tool takes an `IdempotencyKey`).

    Raises:
        TypeError: A fixed kwarg names a parameter the function cannot accept,
            or a function that is not a tool's takes an `IdempotencyKey`.
    """

    __slots__ = (
        "accepted",
        "dynamic_fixed",
        "fixed_kwargs",
        "injected",
        "owner",
        "parameters",
        "plain",
        "positional",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        fixed_kwargs: Mapping[str, Any],
        owner: str,
        *,
        tool: bool = False,
    ) -> None:
        signature = inspect.signature(fn)
        params = signature.parameters
        self.owner = owner
        self.parameters = params
        takes_any_kwarg = any(p.kind is p.VAR_KEYWORD for p in params.values())
        self.accepted: frozenset[str] | None = (
            None
            if takes_any_kwarg
            else frozenset(
                name
                for name, p in params.items()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            )
        )
        if self.accepted is not None:
            unknown = sorted(set(fixed_kwargs) - self.accepted)
            if unknown:
                raise TypeError(
                    f"{owner} has no parameter {', '.join(map(repr, unknown))} for the fixed "
                    f"keyword argument(s); add the parameter (or **kwargs) or drop the kwarg"
                )
        self.fixed_kwargs = dict(fixed_kwargs)
        self.dynamic_fixed = frozenset(k for k, v in fixed_kwargs.items() if is_dynamic(v))
        hints = _annotations(fn, signature)
        injected = []
        positional = [
            name
            for name, p in params.items()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        self.positional = tuple(positional)
        for name, p in params.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                continue
            found = _context_slot(hints.get(name, p.annotation))
            if found is not None:
                slot, optional = found
                if slot == KEY and not tool:
                    raise TypeError(
                        f"{owner} has parameter {name!r} annotated IdempotencyKey, which only "
                        "a tool receives (the key of the model's tool call it runs for); take "
                        "the key in the @tool function and pass it on, or annotate "
                        f"{name!r} as str"
                    )
                position = positional.index(name) if name in positional else None
                injected.append(_Injected(name, position, slot, optional))
        self.injected = tuple(injected)
        if injected:
            CONTEXT_READERS.exist = True
        # Nothing to merge or inject: a call without keyword arguments passes straight through.
        self.plain = not self.fixed_kwargs and not self.injected

    @property
    def context_parameters(self) -> frozenset[str]:
        """Names of the parameters that receive the running agent's queue, pool or resources."""
        return frozenset(i.name for i in self.injected)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Return the keyword arguments to call the function with, given a call's own.

        Raises:
            TypeError: A required context parameter has no running agent to come from.
        """
        if self.fixed_kwargs:
            given = self.positional[: len(args)]  # a positional argument wins, as a kwarg would
            merged = {
                k: (v() if k in self.dynamic_fixed else v)
                for k, v in self.fixed_kwargs.items()
                if k not in given
            }
            for key in kwargs.keys() & merged.keys():
                logger.warning(
                    "Fixed kwarg %r is overridden by call-time argument for %s.", key, self.owner
                )
            merged.update(kwargs)
            kwargs = merged
        accepted = self.accepted
        if kwargs and accepted is not None and not kwargs.keys() <= accepted:
            kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        if self.injected:
            kwargs = self._inject(len(args), kwargs)
        return kwargs

    def _inject(self, n_positional: int, kwargs: dict[str, Any]) -> dict[str, Any]:
        context = CURRENT_CONTEXT.get()
        kwargs = dict(kwargs)  # never write into the caller's dict
        for injected in self.injected:
            name, position = injected.name, injected.position
            if name in kwargs or (position is not None and position < n_positional):
                continue  # an explicit argument always wins
            slot = injected.slot
            if slot == KEY:
                key = CALL_KEY.get()
                if key is not None:
                    kwargs[name] = key
                    continue
                if injected.optional:
                    if self.parameters[name].default is inspect.Parameter.empty:
                        kwargs[name] = None
                    continue
                raise TypeError(
                    f"{self.owner} needs an IdempotencyKey for parameter {name!r}: a model "
                    f"loop's model calls give one; pass {name}=... explicitly, or annotate "
                    f"it 'IdempotencyKey | None = None'"
                )
            if context is not None:
                if isinstance(slot, int):
                    kwargs[name] = context[slot]
                    continue
                resources = context[2]
                if slot in resources:
                    kwargs[name] = resources[slot]
                    continue
            if injected.optional:
                if self.parameters[name].default is inspect.Parameter.empty:
                    kwargs[name] = None
                continue
            if isinstance(slot, type):
                kind = slot.__name__
                where = (
                    f"give its agent one (Agent(..., resources={{{kind}: ...}}))"
                    if context is not None
                    else "run it inside an agent that has one"
                )
            else:
                kind = _CONTEXT_CLASSES[slot].__name__
                where = "run it inside an agent"
            raise TypeError(
                f"{self.owner} needs a {kind} for parameter {name!r}: {where}, "
                f"pass {name}=... explicitly, or annotate it '{kind} | None = None'"
            )
        return kwargs


class LoopLock(asyncio.Lock):
    """An `asyncio.Lock` per running event loop: what `tool.lock` and `hook.lock` hold.

    A lock made at import time would be bound to the first loop that contends
    for it; a decorated function outlives loops (tests, `asyncio.run` twice).
    It is an `asyncio.Lock` (as pygents' `tool.lock` is) that hands each loop a
    lock of its own: `async with tool.lock: ...` holds the tool's lock,
    `acquire()` / `release()` work as usual, and `locked()` tells whether a call
    holds it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._bound_loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()

    def get(self) -> asyncio.Lock:
        """The lock for the running loop."""
        loop = asyncio.get_running_loop()
        if loop is not self._bound_loop:
            self._bound_loop, self._lock = loop, asyncio.Lock()
        return self._lock

    def locked(self) -> bool:
        """Whether the lock is held."""
        return self._lock.locked()

    async def acquire(self) -> Literal[True]:
        """Wait for the running loop's lock and take it."""
        return await self.get().acquire()

    def release(self) -> None:
        """Release the lock (held in the running loop)."""
        self._lock.release()

    async def __aenter__(self) -> None:
        await self.get().acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()

    def __repr__(self) -> str:
        return f"<LoopLock {'locked' if self.locked() else 'unlocked'}>"


def tag_set(tags: Iterable[str] | None) -> frozenset[str]:
    """Check and freeze a collection of tags.

    Raises:
        TypeError: `tags` is a single string, or holds a non-string.
    """
    if tags is None:
        return frozenset()
    return frozenset(strings(tags, "tags", fix="write e.g. tags=['audit']"))
