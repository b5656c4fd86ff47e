"""Agent names: what `AgentRegistry` does, and `AgentScope`, which gives a request names of its own.

Names live in namespaces. There is one global namespace, which is what
pygents had: module-level agents, and any agent made outside a scope, are
there, held for as long as they are registered. An `AgentScope` (one line in a
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
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pygents_ctx._suggest import closest
from pygents_ctx.agent._checks import check_name
from pygents_ctx.agent._origin import Origin, same_origin
from pygents_ctx.errors import UnregisteredAgentError
from pygents_ctx.hooks._hooks import SCOPED_HOOK_NAMES, HookNames
from pygents_ctx.hooks._registry import logger

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

__all__ = ["GLOBAL_NAMES", "AgentNames", "AgentRegistryBase", "AgentScope", "NamedAgent"]


class NamedAgent(Protocol):
    """What the registry needs of an agent (`Agent` is one)."""

    name: str
    _origin: Origin | None

    @property
    def is_running(self) -> bool: ...


class AgentNames:
    """One namespace of agent names: the global one, or an `AgentScope`'s.

    Agents are held strongly (made with `Agent(...)`, restored, registered) or
    weakly (branches). A scope's namespace looks names up in itself first, then
    in the namespaces around it, out to the global one.
    """

    __slots__ = ("__weakref__", "_makers", "_strong", "_weak", "closed", "outer")

    def __init__(self, outer: AgentNames | None = None) -> None:
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

GLOBAL_NAMES = AgentNames()  # the names outside any scope
_CURRENT: ContextVar[AgentNames] = ContextVar("pygents_ctx_agent_names", default=GLOBAL_NAMES)


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

    __slots__ = ("_hook_token", "_names", "_token")

    def __init__(self) -> None:
        self._names: AgentNames | None = None
        self._token: Token[AgentNames] | None = None
        self._hook_token: Token[HookNames | None] | None = None

    def __enter__(self) -> Self:
        if self._names is not None:
            raise RuntimeError("an AgentScope is entered once; make a new AgentScope() per block")
        self._names = AgentNames(_CURRENT.get())
        self._token = _CURRENT.set(self._names)
        self._hook_token = SCOPED_HOOK_NAMES.set(HookNames(SCOPED_HOOK_NAMES.get()))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._names is not None
        assert self._token is not None
        assert self._hook_token is not None
        # Ended in another context (an async generator closed by the garbage collector,
        # say), the tokens cannot be reset there; that context's values are its own.
        with contextlib.suppress(ValueError):
            SCOPED_HOOK_NAMES.reset(self._hook_token)
        with contextlib.suppress(ValueError):
            _CURRENT.reset(self._token)
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


class AgentRegistryBase(Generic[A]):
    """What `AgentRegistry` does (it is this, for `Agent`): names in the current namespace."""

    @classmethod
    def register(cls, agent: A) -> None:
        """Add `agent` under `agent.name`, in the current scope (else globally).

        An agent made again by the same line of code (`Agent(...)` in a re-run
        notebook cell) replaces the registered one when that one is not
        running and was not registered from another asyncio task that is still
        running, logging a debug line on the `pygents_ctx` logger.

        Raises:
            ValueError: Another agent already has that name in this scope, or
                a concurrent task registered one there (make each task's
                agents inside `async with AgentScope():`).
            RuntimeError: The scope has ended (a task that outlived its scope).
        """
        # The agent looks names up (send) where it is registered.
        object.__setattr__(agent, "_names", cls._add(agent, weak=False))

    @classmethod
    def _open_names(cls) -> AgentNames:
        """The current namespace, which takes new names.

        Raises:
            RuntimeError: Its scope has ended (a task that outlived its scope).
        """
        names = _CURRENT.get()
        if names.closed:
            raise RuntimeError(
                "an agent was made after its AgentScope ended (in a task that outlived the "
                "scope?); make it inside the scope, or in a new AgentScope()"
            )
        return names

    @classmethod
    def _check_free(cls, name: str, names: AgentNames) -> None:
        """Refuse `name` when it is not a non-empty string or an agent holds it in `names`.

        Raises:
            ValueError: It is not, or one does.
        """
        check_name(name)
        if names.held(name) is not None:
            raise cls._taken(name, names)

    @classmethod
    def _add(cls, agent: A, *, weak: bool) -> AgentNames:
        """Register `agent` in the current namespace; return it (the agent keeps it)."""
        names, name = cls._open_names(), agent.name
        held = names.held(name)
        if held is agent:
            return names
        if held is not None:
            if names.made_by_another_live_task(name):
                raise cls._taken_by_a_task(name)
            if not (same_origin(held._origin, agent._origin) and not held.is_running):
                raise cls._taken(name, names)
            logger.debug("agent %r was defined again: the new definition replaces it", name)
        names.put(name, agent, weak=weak)
        return names

    @classmethod
    def _taken(cls, name: str, names: AgentNames) -> ValueError:
        """The error for a name another agent holds."""
        fix = (
            f"rename it or call AgentRegistry.unregister({name!r}) first (to make an agent "
            f"per request or task, make it inside `with AgentScope():`)"
            if names is GLOBAL_NAMES
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

    @classmethod
    def get(cls, name: str) -> A:
        """The agent registered under `name`, as seen from the current scope.

        Raises:
            UnregisteredAgentError: No agent has that name (a `KeyError`).
        """
        return cls._find(name, _CURRENT.get())

    @classmethod
    def _find(cls, name: str, names: AgentNames) -> A:
        agent: A | None = names.find(name)
        if agent is None:
            meant = closest(name, names.visible())
            guess = "" if meant is None else f" (did you mean {meant!r}?)"
            raise UnregisteredAgentError(
                f"agent {name!r} not found{guess}: nothing is registered under that name; "
                f"create it (or restore it with Agent.from_dict) first"
            )
        return agent

    @classmethod
    def unregister(cls, name: str) -> None:
        """Remove the agent `name` (the current scope's, else the nearest around it).

        Raises:
            UnregisteredAgentError: No agent has that name.
        """
        names: AgentNames | None = _CURRENT.get()
        cls.get(name)
        while names is not None and not names.drop(name):
            names = names.outer

    @classmethod
    def clear(cls) -> None:
        """Remove every agent visible here: the scope's, those of the scopes around, the global."""
        names: AgentNames | None = _CURRENT.get()
        while names is not None:
            names.clear()
            names = names.outer

    @classmethod
    def _release(cls, agent: A, names: AgentNames) -> None:
        """Forget `agent` in `names` if it still holds it (a branch leaving its block)."""
        if names.held(agent.name) is agent:
            names.drop(agent.name)

    @classmethod
    def _rename(cls, agent: A, names: AgentNames, old: str, new: str) -> None:
        """Move `agent` from `old` to `new` in `names` (when it is registered under `old`).

        Raises:
            ValueError: Another agent has the name `new` there.
        """
        held = names.held(new)
        if held is not None and held is not agent:
            raise cls._taken(new, names)
        if names.held(old) is agent:
            weak = names.is_weak(old)
            names.drop(old)
            names.put(new, agent, weak=weak)
