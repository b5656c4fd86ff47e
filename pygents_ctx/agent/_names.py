"""Agent names: what `AgentRegistry` does, and `AgentScope`, which gives a request names of its own.

Names live in namespaces. Each `AgentRegistry` has one at its root; the
process default registry's is the global namespace, which is what pygents
had: module-level agents, and any agent made outside a scope, are there, held
for as long as they are registered. An `AgentScope` (one line in a
request handler) opens a namespace of its own for the code inside it, and for
the asyncio tasks that code starts (it is a `ContextVar`): fifty concurrent
handlers can each make an agent called `"support"`, and `send()` between the
agents of one request reaches that request's. When the scope ends its names
are forgotten, so nothing accumulates however many requests a process serves.

A branch is registered weakly (in the namespace current where it is made): it
keeps its name while something references it, and gives it up when nothing does.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from pygents_ctx._suggest import closest
from pygents_ctx.agent._checks import check_name
from pygents_ctx.errors import UnregisteredAgentError
from pygents_ctx.hooks._hooks import CURRENT_HOOKS, SCOPED_HOOK_NAMES, HookNames, HookRegistry
from pygents_ctx.hooks._registry import logger, on_current
from pygents_ctx.tools._tools import CURRENT_TOOLS, ToolRegistry

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import TracebackType
    from typing import Self

__all__ = [
    "AgentNames",
    "AgentRegistryBase",
    "AgentScope",
    "NamedAgent",
    "current_names",
    "open_names",
    "set_process_default",
]


class NamedAgent(Protocol):
    """What the registry needs of an agent (`Agent` is one)."""

    name: str

    @property
    def is_running(self) -> bool: ...


class AgentNames:
    """One namespace of agent names: a registry's root one, or an `AgentScope`'s.

    Agents are held strongly (made with `Agent(...)`, restored, registered) or
    weakly (branches). A scope's namespace looks names up in itself first, then
    in the namespaces around it, out to its registry's root.
    """

    __slots__ = ("__weakref__", "_makers", "_strong", "_weak", "closed", "outer", "registry")

    def __init__(self, registry: AgentRegistryBase[Any], outer: AgentNames | None = None) -> None:
        self.registry = registry  # the registry whose tools and hooks its agents use
        self.outer = outer
        self.closed = False
        self._strong: dict[str, Any] = {}
        self._weak: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        # The asyncio task each name was registered from (absent: from no task).
        self._makers: dict[str, weakref.ref[asyncio.Task[Any]]] = {}

    def held(self, name: str) -> Any | None:
        """The agent registered here (not around) under `name`, if any."""
        agent = self._strong.get(name)
        return self._weak.get(name) if agent is None else agent

    def find(self, name: str) -> Any | None:
        """The agent `name` as seen from here: this namespace's, else the nearest around it."""
        names: AgentNames | None = self
        while names is not None:
            agent = names.held(name)
            if agent is not None:
                return agent
            names = names.outer
        return None

    def visible(self) -> list[str]:
        """Every name seen from here (for a suggestion in an error)."""
        seen: list[str] = []
        names: AgentNames | None = self
        while names is not None:
            seen += [*names._strong, *names._weak.keys()]
            names = names.outer
        return seen

    def __len__(self) -> int:
        """How many agents this namespace holds (not the ones around it)."""
        return len(self._strong) + len(self._weak)

    def put(self, name: str, agent: Any, *, weak: bool) -> None:
        """Hold `agent` under `name` (replacing whatever is there), noting the current task."""
        self.drop(name)
        if weak:
            self._weak[name] = agent
        else:
            self._strong[name] = agent
        task = _current_task()
        if task is not None:
            self._makers[name] = weakref.ref(task)

    def drop(self, name: str) -> bool:
        """Forget `name` here; whether it was held."""
        self._makers.pop(name, None)
        if self._strong.pop(name, None) is not None:
            return True
        return self._weak.pop(name, None) is not None

    def made_by_another_live_task(self, name: str) -> bool:
        """Whether `name` was registered from an asyncio task, not this one, still running.

        Such a task is a concurrent request or job: its agent is in use there,
        even between runs, so a same-named agent made here must not replace it.
        """
        maker = self._makers.get(name)
        task = None if maker is None else maker()
        return task is not None and not task.done() and task is not _current_task()

    def is_weak(self, name: str) -> bool:
        """Whether `name` is held weakly here (a branch)."""
        return name in self._weak

    def close(self) -> None:
        """Forget every name: the scope has ended."""
        self.closed = True
        self.clear()

    def clear(self) -> None:
        """Forget every name, the scope staying open."""
        self._strong.clear()
        self._weak.clear()
        self._makers.clear()


def _current_task() -> asyncio.Task[Any] | None:
    """The running asyncio task, or None outside one (module level, a plain script)."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running event loop
        return None


A = TypeVar("A", bound=NamedAgent)

# The namespace agents are made in and looked up from: an AgentScope's, or the root one of
# the registry `AgentRegistry.use()` made current; unset, the process default's root.
_CURRENT: ContextVar[AgentNames] = ContextVar("pygents_ctx_agent_names")
_process_default_names: AgentNames | None = None


def set_process_default(registry: AgentRegistryBase[Any]) -> None:
    """Make `registry` the process default (`pygents_ctx.agent` does, once, at import)."""
    global _process_default_names  # set once, when the package is imported
    _process_default_names = registry._root


def current_names() -> AgentNames:
    """The namespace agents are registered in and looked up from, here and now."""
    names = _CURRENT.get(_process_default_names)
    assert names is not None, "pygents_ctx.agent sets the process default at import"
    return names


class AgentScope:
    """A namespace of agent names for one request, task or job: `with AgentScope():`.

    Agents made (or restored, or branched) inside the block are registered in
    the scope, not globally: agents of the same name in two scopes do not
    collide, so concurrent request handlers can each make their own
    `Agent("support", ...)`. `send()` and `AgentRegistry.get()` look a name up
    in the scope first, then in the scopes around it, then among the global
    agents (module-level agents stay reachable). Hooks attached inside the
    block (`@agent.after_turn` on a function defined there) are named in the
    scope too, so each request's own checkpoint hook saves with its agent.
    Asyncio tasks started inside the block share its scope. When the block
    ends, the scope forgets its agents and hooks; the agents themselves stay
    usable while referenced.

    Works as `with AgentScope():` and as `async with AgentScope():`; scopes nest.

    Args:
        registry: The registry the scope is in (None: the current one, which
            is the process default unless `AgentRegistry.use()` says otherwise):
            names not found in the scope are looked up at its root, and the
            block's tools and hooks are its `tools` and `hooks`.

    Raises:
        RuntimeError: (on entry) The scope is entered a second time.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Agent, AgentRegistry, AgentScope
        >>> async def handle(user: str) -> str:
        ...     with AgentScope():
        ...         agent = Agent("support", f"helps {user}", [])
        ...         await asyncio.sleep(0)  # the other handlers run meanwhile
        ...         return AgentRegistry.get("support").description
        >>> async def main() -> list[str]:
        ...     return await asyncio.gather(handle("ann"), handle("bob"))
        >>> asyncio.run(main())
        ['helps ann', 'helps bob']
    """

    __slots__ = ("_names", "_registry", "_tokens")

    def __init__(self, registry: AgentRegistryBase[Any] | None = None) -> None:
        if registry is not None and not isinstance(registry, AgentRegistryBase):
            raise TypeError(f"AgentScope registry must be an AgentRegistry, not {registry!r}")
        self._registry = registry
        self._names: AgentNames | None = None
        self._tokens: contextlib.ExitStack | None = None

    def __enter__(self) -> Self:
        if self._names is not None:
            raise RuntimeError("an AgentScope is entered once; make a new AgentScope() per block")
        around = current_names() if self._registry is None else self._registry._root
        self._names = AgentNames(around.registry, around)
        tokens = self._tokens = contextlib.ExitStack()
        if self._registry is not None:
            tokens.callback(_reset, CURRENT_TOOLS, CURRENT_TOOLS.set(self._registry.tools))
            tokens.callback(_reset, CURRENT_HOOKS, CURRENT_HOOKS.set(self._registry.hooks))
        tokens.callback(_reset, _CURRENT, _CURRENT.set(self._names))
        hook_names = HookNames(SCOPED_HOOK_NAMES.get())
        tokens.callback(_reset, SCOPED_HOOK_NAMES, SCOPED_HOOK_NAMES.set(hook_names))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._names is not None
        assert self._tokens is not None
        self._tokens.close()
        self._names.close()

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __len__(self) -> int:
        """How many agents the scope holds now (0 once it has ended)."""
        return 0 if self._names is None else len(self._names)

    def __repr__(self) -> str:
        state = "not entered" if self._names is None else f"{len(self._names)} agents"
        if self._names is not None and self._names.closed:
            state = "ended"
        return f"AgentScope({state})"


def open_names(registry: AgentRegistryBase[Any] | None) -> AgentNames:
    """The namespace of `registry` (None: the current one) seen from here, which takes
    new names: the current scope's when it is that registry's, else its root.

    Raises:
        RuntimeError: Its scope has ended (a task that outlived its scope).
    """
    names = current_names()
    if registry is not None and names.registry is not registry:
        names = registry._root
    if names.closed:
        raise RuntimeError(
            "an agent was made after its AgentScope ended (in a task that outlived the "
            "scope?); make it inside the scope, or in a new AgentScope()"
        )
    return names


def _reset(var: ContextVar[Any], token: Token[Any]) -> None:
    """Give `var` back the value it had before `token`'s `set`.

    Ended in another context (an async generator closed by the garbage
    collector, say), the token cannot be reset there; that context's values
    are its own.
    """
    with contextlib.suppress(ValueError):
        var.reset(token)


class AgentRegistryBase(Generic[A]):
    """What `AgentRegistry` does (it is this, for `Agent`): agent names, and the tool
    and hook registries its agents use."""

    def __init__(
        self, *, tools: ToolRegistry | None = None, hooks: HookRegistry | None = None
    ) -> None:
        if tools is not None and not isinstance(tools, ToolRegistry):
            raise TypeError(f"AgentRegistry tools must be a ToolRegistry, not {tools!r}")
        if hooks is not None and not isinstance(hooks, HookRegistry):
            raise TypeError(f"AgentRegistry hooks must be a HookRegistry, not {hooks!r}")
        self.tools = ToolRegistry() if tools is None else tools
        self.hooks = HookRegistry() if hooks is None else hooks
        self._root = AgentNames(self)

    @classmethod
    def current(cls) -> Self:
        """The registry that `AgentRegistry.get(...)` and `Agent(...)` use here: the process
        default, unless `use()` (or an `AgentScope(registry=...)`) made another current."""
        return cast("Self", current_names().registry)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {len(self._root)} agents>"

    @contextlib.contextmanager
    def use(self) -> Iterator[Self]:
        """Make this registry current in the block: `with registry.use():`.

        Code inside it that does not name a registry (`@tool`, `Agent(...)`,
        `ToolRegistry.get(...)`, `HookRegistry.register(...)`, loading) uses
        this one, its `tools` and its `hooks`, as module-level pygents code
        uses the process default, and the events fired inside it fire its
        global hooks (`@hook`); the asyncio tasks started inside share it.
        It is what a test does to start from empty registries.

        Examples:
            >>> from pygents_ctx import AgentRegistry, ToolRegistry, tool
            >>> registry = AgentRegistry()
            >>> with registry.use():
            ...     @tool
            ...     async def lookup(q: str) -> str:
            ...         return q
            >>> registry.tools.get("lookup") is lookup
            True
            >>> "lookup" in [t.key for t in ToolRegistry.all()]  # the process default
            False
        """
        with contextlib.ExitStack() as tokens:
            tokens.callback(_reset, CURRENT_TOOLS, CURRENT_TOOLS.set(self.tools))
            tokens.callback(_reset, CURRENT_HOOKS, CURRENT_HOOKS.set(self.hooks))
            tokens.callback(_reset, _CURRENT, _CURRENT.set(self._root))
            tokens.callback(_reset, SCOPED_HOOK_NAMES, SCOPED_HOOK_NAMES.set(None))
            yield self

    def _here(self) -> AgentNames:
        """This registry's namespace as seen from here: the current scope's when it is
        this registry's, else the root one."""
        names = current_names()
        return names if names.registry is self else self._root

    @on_current
    def register(self, agent: A) -> None:
        """Add `agent` under `agent.name` (in the current scope, if it is this registry's).

        Raises:
            ValueError: Another agent already has that name here, or a
                concurrent task registered one there (make each task's agents
                inside `async with AgentScope():`).
            RuntimeError: The scope has ended (a task that outlived its scope).
        """
        names = self._open_names()
        self._add(agent, names, weak=False, replace=False)
        # The agent looks names up (send) where it is registered.
        object.__setattr__(agent, "_names", names)

    def _open_names(self) -> AgentNames:
        """The namespace seen from here, which takes new names (see `open_names`)."""
        return open_names(self)

    def _check_free(self, name: str, names: AgentNames) -> None:
        """Refuse `name` when it is not a non-empty string or an agent holds it in `names`.

        Raises:
            ValueError: It is not, or one does.
        """
        check_name(name)
        if names.held(name) is not None:
            raise self._taken(name, names)

    def _add(self, agent: A, names: AgentNames, *, weak: bool, replace: bool) -> None:
        """Register `agent` in `names`: a taken name is refused unless its agent is idle
        and `replace` is given (and it was not registered by another running task).

        Raises:
            ValueError: The name is taken (see `Agent`).
        """
        name = agent.name
        held = names.held(name)
        if held is agent:
            return
        if held is not None:
            if names.made_by_another_live_task(name):
                raise self._taken_by_a_task(name)
            if held.is_running or not replace:
                raise self._taken(name, names)
            logger.debug("agent %r was made again: the new agent replaces the idle one", name)
        names.put(name, agent, weak=weak)

    @staticmethod
    def _taken(name: str, names: AgentNames) -> ValueError:
        """The error for a name another agent holds."""
        fix = (
            f"rename it, pass replace=True to replace the idle one (as a re-run notebook "
            f"cell wants), or call AgentRegistry.unregister({name!r}) first (to make an "
            f"agent per request or task, make it inside `with AgentScope():`)"
            if names.outer is None
            else "rename it, or make it in an AgentScope of its own"
        )
        return ValueError(
            f"agent {name!r} already registered: a different agent has that name; {fix}"
        )

    @staticmethod
    def _taken_by_a_task(name: str) -> ValueError:
        """The error for a name an agent of another running task holds."""
        return ValueError(
            f"agent {name!r} already registered by another task that is still running "
            "(a concurrent request or job?): agents made per request or task share one "
            "set of names unless each is made inside `async with AgentScope():`; "
            "open one at the start of the handler, or give each agent its own name"
        )

    @on_current
    def get(self, name: str) -> A:
        """The agent registered under `name`, as seen from the current scope.

        Raises:
            UnregisteredAgentError: No agent has that name (a `KeyError`).
        """
        return self._find(name, self._here())

    @staticmethod
    def _find(name: str, names: AgentNames) -> A:
        agent: A | None = names.find(name)
        if agent is None:
            meant = closest(name, names.visible())
            guess = "" if meant is None else f" (did you mean {meant!r}?)"
            raise UnregisteredAgentError(
                f"agent {name!r} not found{guess}: nothing is registered under that name; "
                f"create it (or restore it with Agent.from_dict) first"
            )
        return agent

    @on_current
    def unregister(self, name: str) -> None:
        """Remove the agent `name` (the current scope's, else the nearest around it).

        Raises:
            UnregisteredAgentError: No agent has that name.
        """
        here = self._here()
        self._find(name, here)  # raises when there is none
        names: AgentNames | None = here
        while names is not None and not names.drop(name):
            names = names.outer

    @on_current
    def clear(self) -> None:
        """Remove every agent visible here: the scope's, those of the scopes around, the root's."""
        names: AgentNames | None = self._here()
        while names is not None:
            names.clear()
            names = names.outer

    @staticmethod
    def _release(agent: A, names: AgentNames) -> None:
        """Forget `agent` in `names` if it still holds it (a branch leaving its block)."""
        if names.held(agent.name) is agent:
            names.drop(agent.name)

    def _rename(self, agent: A, names: AgentNames, old: str, new: str) -> None:
        """Move `agent` from `old` to `new` in `names` (when it is registered under `old`).

        Raises:
            ValueError: Another agent has the name `new` there.
        """
        held = names.held(new)
        if held is not None and held is not agent:
            raise self._taken(new, names)
        if names.held(old) is agent:
            weak = names.is_weak(old)
            names.drop(old)
            names.put(new, agent, weak=weak)
