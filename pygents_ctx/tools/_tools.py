"""Tools: the *how* of an agent, as decorated async functions.

A tool is an `async def` (returning one value) or an async generator (yielding
several), decorated with `@tool`. Calling it checks the arguments against the
function's signature (`ToolArgumentsError` lists every problem; `validate=False`
turns the check off) and makes them the types their hints name (a dataclass
from a dict, a date from its text; see `_convert`), then calls the function
with fixed kwargs merged in, unknown keyword arguments dropped, and
`ContextQueue` / `ContextPool` parameters filled from the running agent. A
tool knows nothing about agents, queues or stores beyond that.

Example:
    >>> from pygents_ctx import tool
    >>> @tool
    ... async def add(a: int, b: int = 1) -> int:
    ...     "Add two numbers."
    ...     return a + b
    >>> print(*add.metadata.input_schema["required"])
    a
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any, ClassVar, Generic, ParamSpec, TypeVar, overload

from pygents_ctx._clock import RunTimes
from pygents_ctx.errors import UnregisteredToolError
from pygents_ctx.hooks import Hook, ToolHook
from pygents_ctx.hooks._calls import CallSpec, IdempotencyKey, LoopLock, tag_set
from pygents_ctx.hooks._dispatch import HookSlot, ToolHookList, fire
from pygents_ctx.hooks._registry import NameRegistry, identical, on_current, redefines
from pygents_ctx.tools._docstrings import parse_docstring
from pygents_ctx.tools._errors import OnToolError, check_on_tool_error
from pygents_ctx.tools._json_schema import check_object_schema, schema_check
from pygents_ctx.tools._schema import signature_schemas
from pygents_ctx.tools._type_checks import type_hints
from pygents_ctx.tools._validation import ArgumentValidator

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
    from datetime import datetime
    from typing import TypeAlias

    # A function of a call's arguments (one dict) saying whether a person must approve it.
    ApprovalRule: TypeAlias = Callable[[dict[str, Any]], bool | Awaitable[bool]]

__all__ = ["IdempotencyKey", "Tool", "ToolMetadata", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
# A subtool's own signature, independent of its parent's P and R.
SP = ParamSpec("SP")
SR = TypeVar("SR")


# A dataclass for `dataclasses.asdict()` / `fields()` (as pygents' is), with the
# methods written here: the times are read from the run clock, not stored.
@dataclass(init=False, repr=False, eq=False)
class ToolMetadata(RunTimes):
    """What a tool is, and when it last ran.

    Args:
        name: The function's name (a subtool's short name, without its parents).
        description: The docstring's description: its text before the first
            section (`Args:`, `Returns:`, `Raises:`, ...), which a model reads.
        start_time: When the latest call started (for metadata made by hand).
        end_time: When it ended.
        input_schema: A JSON Schema object of the parameters the caller
            provides (fixed kwargs and context parameters left out), with
            each one's description (from the docstring's `Args` section or
            `Annotated` metadata) and its default, when JSON can hold it.
        output_schema: The schema of the return value, or of one yielded item;
            None when the function has no return hint or returns None.
    """

    __slots__ = ("description", "input_schema", "name", "output_schema")

    # The fields, in pygents' order; the times are the properties below.
    name: str
    description: str | None
    start_time: datetime | None
    end_time: datetime | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None

    # No `__hash__`: equal metadata compare equal, and the times change with each run.
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        name: str,
        description: str | None,
        start_time: datetime | None = None,
        end_time: datetime | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.description = description
        self.input_schema = input_schema
        self.output_schema = output_schema
        if start_time is not None or end_time is not None:
            self._load_times(
                None if start_time is None else start_time.timestamp(),
                None if end_time is None else end_time.timestamp(),
            )

    @property  # type: ignore[no-redef]  # the field declared above
    def start_time(self) -> datetime | None:
        """When the latest call started (UTC), or `None` before the first."""
        return self._wall_datetimes()[0]

    @property  # type: ignore[no-redef]  # the field declared above
    def end_time(self) -> datetime | None:
        """When the latest call ended (UTC), or `None` while it runs."""
        return self._wall_datetimes()[1]

    def _fields(self) -> tuple[Any, ...]:
        start, end = self._wall_datetimes()
        return self.name, self.description, start, end, self.input_schema, self.output_schema

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolMetadata):
            return NotImplemented
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        name, description, start, end, inputs, output = self._fields()
        return (
            f"ToolMetadata(name={name!r}, description={description!r}, start_time={start!r}, "
            f"end_time={end!r}, input_schema={inputs!r}, output_schema={output!r})"
        )

    def dict(self) -> dict[str, Any]:
        """The metadata as a plain dict, times as ISO 8601 strings."""
        start, end = self.start_time, self.end_time
        return {
            "name": self.name,
            "description": self.description,
            "start_time": start.isoformat() if start else None,
            "end_time": end.isoformat() if end else None,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
        }


class Tool(Generic[P, R]):
    """A registered async function (or async generator) that turns can run.

    Made by `@tool` or `@parent.subtool`; call it like the function it wraps.
    Instance decorators attach hooks to this tool only: `before_invoke` (the
    call's arguments), `on_yield(value)`, `after_invoke(result)` (the return
    value, or the list of yielded values) and `on_error(exc=...)`.

    Attributes:
        on_tool_error: What an agent does when a turn of this tool fails:
            `"raise"`, `"return"` (the exception is the turn's value), or None
            to follow the agent's `on_tool_error`.
        needs_approval: Whether a `ModelLoop` stops for a person's approval
            before running a model's call of this tool: True, False, or a
            function of the call's arguments (see `@tool`).
    """

    # Slots: a turn reads several of these on every run.
    __slots__ = (
        "__name__",
        "__wrapped__",
        "_call",
        "_hooks",
        "_lock",
        "_positional_room",
        "_spec",
        "_validates",
        "_validator",
        "fixed_kwargs",
        "fn",
        "is_generator",
        "key",
        "metadata",
        "needs_approval",
        "on_tool_error",
        "parent",
        "subtools",
        "tags",
    )

    before_invoke = HookSlot(ToolHook.BEFORE_INVOKE)
    on_yield = HookSlot(ToolHook.ON_YIELD)
    after_invoke = HookSlot(ToolHook.AFTER_INVOKE)
    on_error = HookSlot(ToolHook.ON_ERROR)

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        parent: Tool[..., Any] | None = None,
        lock: bool = False,
        tags: Iterable[str] | None = None,
        fixed_kwargs: Mapping[str, Any] | None = None,
        validate: bool = True,
        on_tool_error: OnToolError | None = None,
        needs_approval: bool | ApprovalRule = False,
    ) -> None:
        if not (isinstance(needs_approval, bool) or callable(needs_approval)):
            raise TypeError(
                f"tool {getattr(fn, '__name__', fn)!r} needs_approval must be True, False or a "
                f"function of the call's arguments (a dict) returning a bool, "
                f"not {needs_approval!r}"
            )
        self.needs_approval = needs_approval
        self.is_generator = inspect.isasyncgenfunction(fn)
        if not (self.is_generator or inspect.iscoroutinefunction(fn)):
            raise TypeError(
                f"Tool must be async: {getattr(fn, '__name__', fn)!r} is neither an 'async def' "
                f"function nor an async generator function"
            )
        self.fn = fn
        self.__wrapped__ = fn
        self.parent = parent
        self.key: str = fn.__name__ if parent is None else f"{parent.key}.{fn.__name__}"
        self.__name__ = self.key
        self.on_tool_error = (
            None
            if on_tool_error is None
            else check_on_tool_error(on_tool_error, f"tool {self.key!r}")
        )
        self.tags = tag_set(tags)
        self.fixed_kwargs = dict(fixed_kwargs or {})
        self._hooks: list[Hook] = ToolHookList()
        self.subtools: list[Tool[..., Any]] = []
        self._spec = CallSpec(fn, self.fixed_kwargs, f"tool {self.key!r}", tool=True)
        # Positional arguments past the function's parameters are dropped, as pygents
        # documents (and as keyword arguments it does not take are).
        self._positional_room = (
            sys.maxsize
            if any(p.kind is p.VAR_POSITIONAL for p in self._spec.parameters.values())
            else len(self._spec.positional)
        )
        self._lock = LoopLock() if lock else None
        hints, doc = type_hints(fn), parse_docstring(fn.__doc__)
        self._validates = bool(validate)
        self._validator = ArgumentValidator.build(self.key, self._spec, hints) if validate else None
        inputs, output = signature_schemas(
            fn,
            skip=frozenset(self.fixed_kwargs) | self._spec.context_parameters,
            generator=self.is_generator,
            hints=hints,
            doc=doc,
        )
        self.metadata = ToolMetadata(
            fn.__name__, doc.description, input_schema=inputs, output_schema=output
        )
        self._call: Callable[[tuple[Any, ...], dict[str, Any]], Any] = (
            self._iterate if self.is_generator else self._invoke
        )

    @classmethod
    def from_schema(
        cls,
        name: str,
        call: Callable[..., Awaitable[Any]],
        *,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        lock: bool = False,
        tags: Iterable[str] | None = None,
        validate: bool = True,
        on_tool_error: OnToolError | None = None,
        needs_approval: bool | ApprovalRule = False,
    ) -> Tool[..., Any]:
        """A tool defined by a name, a description and a JSON Schema, not by a signature.

        For tools whose definition comes from elsewhere (an MCP server, a
        config file): `call` is awaited with the call's arguments as keyword
        arguments. Calls are checked against `input_schema` (the common JSON
        Schema subset: types, properties, required, enum, items, anyOf,
        additionalProperties; see `_json_schema`), with the same
        `ToolArgumentsError` as a function tool; a model sees the schema as
        given. Hooks, locks, turns, timeouts and `on_tool_error` work as for
        any tool. The tool is not registered: `ToolRegistry.register` it to
        make agents that name it loadable.

        Args:
            name: The tool's name and registry key (what a model calls it).
            call: An async function taking the arguments by name.
            description: What the tool does, for a model.
            input_schema: A JSON object schema of the arguments (None: no arguments).
            output_schema: A JSON Schema of the result, if known.
            lock: As for `@tool`.
            tags: As for `@tool`.
            validate: As for `@tool`.
            on_tool_error: As for `@tool`.
            needs_approval: As for `@tool`.

        Raises:
            TypeError: `call` is not async, or `input_schema` is not a dict.
            ValueError: `input_schema` does not describe an object, or
                `on_tool_error` is not one `@tool` takes.

        Examples:
            >>> import asyncio
            >>> async def lookup(**arguments):
            ...     return f"found {arguments['term']}"
            >>> search = Tool.from_schema(
            ...     "search",
            ...     lookup,
            ...     description="Search the docs.",
            ...     input_schema={"type": "object", "properties": {"term": {"type": "string"}}},
            ... )
            >>> asyncio.run(search(term="hooks"))
            'found hooks'
        """
        if not inspect.iscoroutinefunction(call):
            raise TypeError(f"tool {name!r}: call must be an 'async def' function, not {call!r}")
        owner = f"tool {name!r}"
        schema = check_object_schema(
            {"type": "object", "properties": {}} if input_schema is None else input_schema, owner
        )

        async def run(**arguments: Any) -> Any:
            return await call(**arguments)

        run.__name__ = run.__qualname__ = name
        made: Tool[..., Any] = cls(
            run,  # type: ignore[arg-type]  # its ParamSpec is the schema's, not a signature
            lock=lock,
            tags=tags,
            validate=False,
            on_tool_error=on_tool_error,
            needs_approval=needs_approval,
        )
        made.metadata = ToolMetadata(
            name,
            description,
            input_schema=schema,
            output_schema=None if output_schema is None else dict(output_schema),
        )
        made._validates = bool(validate)
        made._validator = schema_check(name, schema) if validate else None
        # Its arguments are named by the schema: positional ones are refused, not dropped.
        made._positional_room = sys.maxsize
        return made

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the tool: await the result, or `async for` over a generator tool.

        Positional arguments past the function's parameters are ignored, as
        keyword arguments it does not take are (pygents' behaviour).
        """
        result: R = self._call(args, kwargs)
        return result

    @property
    def validate(self) -> bool:
        """Whether calls check their arguments first (`@tool(validate=False)` turns it off)."""
        return self._validates

    @property
    def lock(self) -> LoopLock | None:
        """The lock serializing calls (usable with `async with`), or None without `lock=True`."""
        return self._lock

    @property
    def hooks(self) -> list[Hook]:
        """Its own hooks, in firing order (a list assigned is checked as `append` checks)."""
        return self._hooks

    @hooks.setter
    def hooks(self, hooks: Iterable[object]) -> None:
        self._hooks = ToolHookList.of(hooks)

    def __repr__(self) -> str:
        return f"<Tool {self.key}>"

    def _arguments(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments to call the function with: checked (and converted), fixed
        kwargs and context parameters added, positional ones past its parameters
        dropped (as keyword arguments it does not take are: pygents' behaviour).

        Raises:
            ToolArgumentsError: The arguments do not fit the function's signature.
        """
        if len(args) > self._positional_room:
            args = args[: self._positional_room]
        validator = self._validator
        if validator is not None:
            converted = validator(args, kwargs)
            if converted is not None:  # some arguments made into their annotated types
                args, kwargs = converted
        spec = self._spec
        if kwargs or not spec.plain:
            kwargs = spec.bind(args, kwargs)
        return args, kwargs

    async def _invoke(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args, kwargs = self._arguments(args, kwargs)
        hooks, tags = self._hooks, self.tags
        await fire(ToolHook.BEFORE_INVOKE, hooks, tags, *args, **kwargs)
        metadata = self.metadata
        metadata._mark_start(monotonic())
        try:
            try:
                if self._lock is None:
                    result = await self.fn(*args, **kwargs)  # type: ignore[misc]
                else:
                    async with self._lock.get():
                        result = await self.fn(*args, **kwargs)  # type: ignore[misc]
            finally:
                metadata._end = monotonic()
        except Exception as exc:
            await fire(ToolHook.ON_ERROR, hooks, tags, exc=exc)
            raise
        await fire(ToolHook.AFTER_INVOKE, hooks, tags, result)
        return result

    async def _iterate(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        args, kwargs = self._arguments(args, kwargs)
        hooks, tags = self._hooks, self.tags
        await fire(ToolHook.BEFORE_INVOKE, hooks, tags, *args, **kwargs)
        metadata = self.metadata
        metadata._mark_start(monotonic())
        produced: list[Any] = []
        closed_early = False
        lock = None if self._lock is None else self._lock.get()
        try:
            if lock is not None:
                await lock.acquire()
            generator = self.fn(*args, **kwargs)
            try:
                async for value in generator:  # type: ignore[attr-defined]
                    produced.append(value)
                    await fire(ToolHook.ON_YIELD, hooks, tags, value)
                    try:
                        yield value
                    except (GeneratorExit, asyncio.CancelledError):
                        # Closed by the consumer: `aclose()`, or Python finalizing the
                        # abandoned generator (asyncio.run cancels that closing task when
                        # the run ends, so the close arrives as CancelledError).
                        closed_early = True
                        raise
            finally:
                metadata._end = monotonic()
                await generator.aclose()  # type: ignore[attr-defined]
                if lock is not None:
                    lock.release()
        except Exception as exc:
            await fire(ToolHook.ON_ERROR, hooks, tags, exc=exc)
            raise
        except BaseException:
            # The consumer stopped early: report what it received, then finish closing.
            if closed_early:
                await fire(ToolHook.AFTER_INVOKE, hooks, tags, produced)
            raise
        await fire(ToolHook.AFTER_INVOKE, hooks, tags, produced)

    @overload
    def subtool(self, fn: Callable[SP, SR], /) -> Tool[SP, SR]: ...
    @overload
    def subtool(
        self,
        /,
        *,
        lock: bool = ...,
        tags: Iterable[str] | None = ...,
        validate: bool = ...,
        on_tool_error: OnToolError | None = ...,
        needs_approval: bool | ApprovalRule = ...,
        **fixed_kwargs: Any,
    ) -> Callable[[Callable[SP, SR]], Tool[SP, SR]]: ...
    def subtool(
        self,
        fn: Callable[SP, SR] | None = None,
        /,
        *,
        lock: bool = False,
        tags: Iterable[str] | None = None,
        validate: bool = True,
        on_tool_error: OnToolError | None = None,
        needs_approval: bool | ApprovalRule = False,
        **fixed_kwargs: Any,
    ) -> Tool[SP, SR] | Callable[[Callable[SP, SR]], Tool[SP, SR]]:
        """Register a tool under this one, keyed `"<this key>.<function name>"`.

        Takes the same options as `@tool`. The subtool is a full tool; an agent
        given this tool accepts turns for its subtools too.

        Raises:
            TypeError, ValueError: As for `@tool`.
        """

        def register(f: Callable[SP, SR]) -> Tool[SP, SR]:
            made = Tool(
                f,
                parent=self,
                lock=lock,
                tags=tags,
                fixed_kwargs=fixed_kwargs,
                validate=validate,
                on_tool_error=on_tool_error,
                needs_approval=needs_approval,
            )
            ToolRegistry.register(made)
            self.subtools.append(made)
            return made

        return register if fn is None else register(fn)

    def add_subtool(self, child: Tool[..., Any]) -> None:
        """Attach a tool made elsewhere under this one.

        It then appears in `doc_tree()`, and an agent given this tool accepts
        its turns. It keeps its registry key (and stays a root tool of
        `ToolRegistry.definitions()`); `subtool()` makes a scoped one instead.

        Raises:
            TypeError: `child` is not a `Tool`.
            ValueError: `child` is already attached here, or attaching it would
                make a cycle (it is this tool or holds it).
        """
        if not isinstance(child, Tool):
            raise TypeError(f"add_subtool takes a Tool made by @tool, not {child!r}")
        if child in self.subtools:
            raise ValueError(f"tool {child.key!r} is already a subtool of {self.key!r}")
        if any(t is self for t in child.walk()):
            raise ValueError(
                f"tool {child.key!r} cannot be a subtool of {self.key!r}: that would make a "
                f"cycle (it is, or holds, {self.key!r} itself)"
            )
        self.subtools.append(child)

    def walk(self) -> Iterable[Tool[..., Any]]:
        """This tool and all of its subtools, depth first."""
        yield self
        for sub in self.subtools:
            yield from sub.walk()

    def doc_tree(self) -> dict[str, Any]:
        """`{"name", "description", "subtools": [...]}` for this tool, recursively."""
        return {
            "name": self.metadata.name,
            "description": self.metadata.description,
            "subtools": [sub.doc_tree() for sub in self.subtools],
        }


# -- the registry of tools (public through pygents_ctx.registry) --------------


class ToolRegistry(NameRegistry["Tool[..., Any]"]):
    """Every tool made with `@tool` or `.subtool()`, keyed by name.

    A root tool's key is its function's `__name__`; a subtool's is scoped by its
    parents (`"parent.child"`).

    `ToolRegistry()` makes an empty registry (an `AgentRegistry` brings one);
    called on the class (`ToolRegistry.get(name)`, and `@tool` registering),
    the methods act on the current one: the process default, unless
    `AgentRegistry.use()` made another current.
    """

    _noun = "tool"
    _missing = UnregisteredToolError
    _missing_hint = "decorate it with @tool first"
    # Names whose tools the package registers only when first asked for by name (the
    # model loop's steps, which a saved agent names): the program's own tools are all
    # `all()` and `definitions()` list until then. Each registry asked registers them.
    _on_demand: ClassVar[dict[str, Callable[[ToolRegistry], None]]] = {}

    @classmethod
    def current(cls) -> ToolRegistry:
        """The registry `ToolRegistry.get(...)`, `@tool` and the other class calls use."""
        return CURRENT_TOOLS.get()

    @classmethod
    def _provide(cls, names: Iterable[str], register: Callable[[ToolRegistry], None]) -> None:
        """Have `register(registry)` called the first time a registry is asked for one of
        `names` it does not hold."""
        for name in names:
            cls._on_demand[name] = register

    @on_current
    def get(self, name: str) -> Tool[..., Any]:
        """Return the tool registered under `name`.

        Raises:
            UnregisteredToolError: Nothing has that name (a `KeyError`).
        """
        if name not in self._entries and name in self._on_demand:
            self._on_demand[name](self)
        return self._lookup(name)

    @on_current
    def register(self, tool: Tool[..., Any]) -> None:
        """Add `tool` under `tool.key`.

        A new definition of the registered tool's function (the same module
        and qualified name, compiled anew: a re-run notebook cell, a reloaded
        module) replaces it, and its subtools, logging a debug line on the
        `pygents_ctx` logger.

        Raises:
            ValueError: A different tool already has that key.
        """
        self._add(tool.key, tool, identical, lambda held, new: redefines(held.fn, new.fn))

    def _replace(self, name: str, held: Tool[..., Any]) -> None:
        self.unregister(name)  # with its subtools: the new definition brings its own

    @on_current
    def all(self) -> list[Tool[..., Any]]:
        """Every registered tool, subtools included, in registration order."""
        return list(self._entries.values())

    @on_current
    def definitions(self) -> list[dict[str, Any]]:
        """The `doc_tree()` of every root tool, sorted by name."""
        roots = sorted((t for t in self._entries.values() if t.parent is None), key=lambda t: t.key)
        return [t.doc_tree() for t in roots]

    @on_current
    def unregister(self, name: str) -> None:
        """Remove the tool `name` and its subtools.

        Raises:
            UnregisteredToolError: No tool has that name.
        """
        self.get(name)
        prefix = name + "."
        for key in [k for k in self._entries if k == name or k.startswith(prefix)]:
            del self._entries[key]


# The registry `ToolRegistry.get(...)`, `@tool` and the other calls on the class use: the
# process default (shared on purpose: it is the one every context sees), unless
# `AgentRegistry.use()` made another one current.
CURRENT_TOOLS: ContextVar[ToolRegistry] = ContextVar(
    "pygents_ctx_tools",
    default=ToolRegistry(),  # noqa: B039
)


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...
@overload
def tool(
    *,
    lock: bool = ...,
    tags: Iterable[str] | None = ...,
    validate: bool = ...,
    on_tool_error: OnToolError | None = ...,
    needs_approval: bool | ApprovalRule = ...,
    **fixed_kwargs: Any,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...
def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    lock: bool = False,
    tags: Iterable[str] | None = None,
    validate: bool = True,
    on_tool_error: OnToolError | None = None,
    needs_approval: bool | ApprovalRule = False,
    **fixed_kwargs: Any,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make an async function (or async generator) a registered tool.

    Use bare (`@tool`) or with options (`@tool(lock=True, api_key=get_key)`).

    Args:
        fn: The function, when used bare.
        lock: Serialize concurrent calls with a lock held around the function
            (around the whole iteration of a generator).
        tags: Tags that global hooks can filter on.
        validate: Check each call's arguments against the function's
            signature before it runs (`ToolArgumentsError`), and make them
            their annotated types; False skips both, for a hot internal tool
            whose callers are trusted.
        on_tool_error: What an agent does when a turn of this tool fails:
            `"raise"` (the run ends with the exception), `"return"` (the
            exception is the turn's value and the run goes on), or None (the
            default) to follow the agent's `on_tool_error`.
        needs_approval: Whether a `ModelLoop` stops for a person's approval
            before it runs a model's call of this tool (`await loop.approve()` /
            `loop.reject()`, then run the loop again). True: every call;
            a function: the calls for which it returns True, given the call's
            arguments as one dict (sync or async; one that raises counts as
            True, so a person sees the call). Calls made directly (a `Turn`,
            `await tool(...)`) never wait for approval.
        **fixed_kwargs: Merged under every call's kwargs; a zero-argument
            function is called for its value on each call.

    Returns:
        The `Tool`, or a decorator that makes one.

    Raises:
        TypeError: The function is not async, a fixed kwarg is not one of its
            parameters, or `needs_approval` is neither a bool nor a function.
        ValueError: A different tool with the same name is already registered
            (a re-definition of the same function replaces it: see
            `ToolRegistry.register`), or `on_tool_error` is not one of the above.
    """

    def register(f: Callable[P, R]) -> Tool[P, R]:
        made = Tool(
            f,
            lock=lock,
            tags=tags,
            fixed_kwargs=fixed_kwargs,
            validate=validate,
            on_tool_error=on_tool_error,
            needs_approval=needs_approval,
        )
        ToolRegistry.register(made)
        return made

    return register if fn is None else register(fn)
