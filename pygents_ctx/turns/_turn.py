"""Turns: the *what* of an agent, as plain data naming a tool and its arguments.

A turn is serializable: it holds the tool's registry key, the arguments and a
timeout, and runs with `await turn.returning()` (coroutine tools) or
`async for value in turn.yielding()` (generator tools).

Example:
    >>> import asyncio
    >>> from pygents_ctx import Turn, tool
    >>> @tool
    ... async def greet(name: str) -> str:
    ...     return f"hello {name}"
    >>> asyncio.run(Turn(greet, kwargs={"name": "ada"}).returning())
    'hello ada'

`Turn` is what users declare and call; the work behind its methods is in the
modules beside this one: its fields (`_state`), how it runs (`_running`) and
how it is saved and loaded (`_saving`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Mapping
from dataclasses import replace
from typing import Any, Generic

from typing_extensions import TypeVar

from pygents_ctx._json import loads
from pygents_ctx.errors import SafeExecutionError
from pygents_ctx.hooks import Hook, TurnHook
from pygents_ctx.hooks._calls import tag_set
from pygents_ctx.hooks._dispatch import HookSlot, TurnHookList
from pygents_ctx.tools import Tool, ToolRegistry
from pygents_ctx.turns._arguments import TurnArgs, TurnKwargs
from pygents_ctx.turns._running import TurnRunning
from pygents_ctx.turns._saving import Registries, TurnSaving, tools_of
from pygents_ctx.turns._state import (
    Declared,
    StopReason,
    TurnMetadata,
    check_args,
    check_kwargs,
    check_timeout,
)

__all__ = ["StopReason", "Turn", "TurnMetadata"]

T = TypeVar("T", default=Any)  # what a turn's tool produces


class Turn(TurnRunning, TurnSaving, Generic[T]):
    """One unit of work: a tool, its arguments and a timeout.

    Generic in what its tool produces: `Turn[int]` runs a tool returning an
    `int` (or, for a generator tool, yielding them).

    Args:
        tool: The tool, its registry key, or the function it decorates.
        args: Positional arguments for the tool.
        kwargs: Keyword arguments for the tool.
        timeout: Seconds the whole run (every step of a generator) may take.
        tags: Tags that global hooks can filter on.
        registry: The `ToolRegistry` a name (or function) is looked up in, or
            an `AgentRegistry` (its `tools`); None: the current one, the
            process default unless `AgentRegistry.use()` says otherwise.

    Any zero-argument function among the `args` / `kwargs` values is called
    for its value when the tool is invoked, not when the turn is made.

    Raises:
        UnregisteredToolError: No tool is registered under `tool`.
        ValueError: `timeout` is not a positive number.
        TypeError: `args` is not a list or tuple, `kwargs` is not a dict of str
            keys, or `registry` is not a registry.
    """

    # The fields are `TurnState`'s (see `turns._state`).
    __slots__ = ()

    before_run = HookSlot(TurnHook.BEFORE_RUN)
    after_run = HookSlot(TurnHook.AFTER_RUN)
    on_timeout = HookSlot(TurnHook.ON_TIMEOUT)
    on_error = HookSlot(TurnHook.ON_ERROR)
    on_complete = HookSlot(TurnHook.ON_COMPLETE)

    def __init__(
        self,
        tool: Tool[..., Any] | str | Callable[..., Any],
        args: Iterable[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        timeout: float = 60,
        tags: Iterable[str] | None = None,
        *,
        registry: ToolRegistry | Registries | None = None,
    ) -> None:
        declared = Declared(
            self._resolve(tool, tools_of(registry, "Turn")),
            *check_args(args),
            *check_kwargs(kwargs),
            check_timeout(timeout),
            tag_set(tags),
        )
        self._fill(declared)

    # -- the guarded fields ------------------------------------------------

    def _guard(self, field: str) -> None:
        """Called by every setter before it changes the turn's declaration."""
        if self._running:
            raise SafeExecutionError(
                f"Cannot change property {field!r} while the turn is running "
                f"(tool {self._declared.tool.key!r}); wait for it to finish"
            )

    @staticmethod
    def _resolve(
        tool: Tool[..., Any] | str | Callable[..., Any], registry: ToolRegistry | None
    ) -> Tool[..., Any]:
        """The tool `tool` is, or names in `registry` (None: the current one)."""
        if isinstance(tool, Tool):
            return tool
        if registry is None:
            registry = ToolRegistry.current()
        if isinstance(tool, str):
            return registry.get(tool)
        name = getattr(tool, "__name__", None)
        if callable(tool) and isinstance(name, str):
            held = registry.get(name)
            if held.fn is tool:  # the function a tool decorates names that tool
                return held
        raise TypeError(f"Turn has no tool: its tool must be a Tool or a tool name, not {tool!r}")

    # Each setter gives the turn a new declaration: copies of it keep the one they share.

    @property
    def tool(self) -> Tool[..., Any]:
        """The tool this turn runs."""
        return self._declared.tool

    @tool.setter
    def tool(self, value: Tool[..., Any] | str | Callable[..., Any]) -> None:
        self._guard("tool")
        self._declared = replace(self._declared, tool=self._resolve(value, None))

    @property
    def tool_name(self) -> str:
        """The tool's registry key."""
        return self._declared.tool.key

    @property
    def args(self) -> list[Any]:
        """The positional arguments: a list whose changes go to the turn (see `TurnArgs`)."""
        return TurnArgs(self, self._declared.args)

    @args.setter
    def args(self, value: Iterable[Any] | None) -> None:
        self._guard("args")
        args, dynamic = check_args(value)
        self._declared = replace(self._declared, args=args, dynamic_args=dynamic)

    @property
    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments: a dict whose changes go to the turn (see `TurnKwargs`)."""
        return TurnKwargs(self, self._declared.kwargs)

    @kwargs.setter
    def kwargs(self, value: Mapping[str, Any] | None) -> None:
        self._guard("kwargs")
        kwargs, dynamic = check_kwargs(value)
        self._declared = replace(self._declared, kwargs=kwargs, dynamic_kwargs=dynamic)

    @property
    def timeout(self) -> float:
        """Seconds the whole run may take."""
        return self._declared.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self._guard("timeout")
        self._declared = replace(self._declared, timeout=check_timeout(value))

    @property
    def tags(self) -> frozenset[str]:
        """Tags that global hooks can filter on."""
        return self._declared.tags

    @tags.setter
    def tags(self, value: Iterable[str] | None) -> None:
        self._guard("tags")
        self._declared = replace(self._declared, tags=tag_set(value))

    @property
    def hooks(self) -> list[Hook]:
        """Its own hooks, in firing order (a list assigned is checked as `append` checks)."""
        hooks = self._hooks
        if hooks is None:  # a turn without hooks has no list until one is asked for
            hooks = self._hooks = TurnHookList()
        return hooks

    @hooks.setter
    def hooks(self, hooks: Iterable[object]) -> None:
        self._hooks = TurnHookList.of(hooks)

    @property
    def is_running(self) -> bool:
        """Whether a run of this turn is in progress."""
        return self._running

    @property
    def metadata(self) -> TurnMetadata:
        """Times and stop reason of the latest run (all `None` before one)."""
        return self._metadata()

    def __repr__(self) -> str:
        tool, timeout = self._declared.tool.key, self._declared.timeout
        return f"Turn(tool={tool!r}, timeout={timeout!r}, metadata={self.metadata!r})"

    # -- running (see turns._running) -----------------------------------------------

    def returning(self) -> Coroutine[Any, Any, T]:
        """Run a coroutine tool and return its result (also kept in `output`).

        Use as `await turn.returning()`.

        Raises:
            WrongRunMethodError: The tool is an async generator.
            SafeExecutionError: The turn is already running.
            TurnTimeoutError: The tool ran past `timeout`.
        """
        return self._returning(self._own_hooks)

    def yielding(self) -> AsyncGenerator[T, None]:
        """Run a generator tool, yielding each value as the tool produces it.

        `output` collects the values yielded so far.

        Raises:
            WrongRunMethodError: The tool is a coroutine function.
            SafeExecutionError: The turn is already running.
            TurnTimeoutError: The whole iteration ran past `timeout`.
        """
        return self._yielding(self._own_hooks)

    # -- copies ------------------------------------------------------------------

    def copy(self) -> Turn:
        """A fresh, unrun turn with the same tool, arguments, timeout, tags and hooks.

        The copy shares this turn's declaration, which is never changed (a
        setter makes a new one), and has its own list of the same hooks.
        """
        # Its three fields set here, not through `_fill`: a branch copies thousands of
        # turns, and the call would be a sixth of the cost of each copy.
        twin = object.__new__(Turn)
        hooks = self._hooks
        twin._declared = self._declared
        twin._hooks = TurnHookList(hooks) if hooks else None
        twin._run = None
        return twin

    # -- saving (see turns._saving) ------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The turn as plain data; dynamic arguments are evaluated now.

        Raises:
            UnserializableHookError: A hook cannot be saved by name.
        """
        return self._saved(fresh=True)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, registry: ToolRegistry | Registries | None = None
    ) -> Turn:
        """Rebuild a turn saved by `to_dict()`; only `tool_name` is required.

        Args:
            data: What `to_dict()` returned.
            registry: Where the saved names are looked up: an `AgentRegistry`
                (the tool in its `tools`, the hooks in its `hooks`), or a
                `ToolRegistry` (the tool; the hooks in the current
                `HookRegistry`). None: the current registries.

        Raises:
            ValueError: A key is missing or has the wrong type.
            UnregisteredToolError: The tool is not registered (there).
            UnregisteredHookError: A hook name is not registered.
            TypeError: `registry` is not a registry.

        Examples:
            >>> from pygents_ctx import AgentRegistry, Turn, tool
            >>> plugin = AgentRegistry()
            >>> with plugin.use():
            ...     @tool
            ...     async def fetch(url: str) -> str:
            ...         return url
            >>> saved = Turn(fetch, kwargs={"url": "a"}).to_dict()
            >>> Turn.from_dict(saved, registry=plugin).tool is fetch
            True
        """
        return cls._load(data, False, registry, "Turn.from_dict")

    @classmethod
    def from_json(
        cls, data: bytes | str, *, registry: ToolRegistry | Registries | None = None
    ) -> Turn:
        """Rebuild a turn from `to_json()` output; `registry` as for `from_dict`.

        Raises:
            ValueError: The JSON is invalid or does not describe a turn.
            UnregisteredToolError: The tool is not registered (there).
            UnregisteredHookError: A hook name is not registered.
            TypeError: `registry` is not a registry.
        """
        return cls._load(loads(data, cls.__name__), True, registry, "Turn.from_json")
