"""Resources: values an agent hands to the tools and hooks it runs, found by type.

A tool reaches its agent's queue and pool by annotating a parameter
`ContextQueue` or `ContextPool`. Resources extend that to any class marked
`@injectable`: give the agent `resources={SomeClass: value}` and a parameter
annotated `SomeClass` (or `SomeClass | None = None`) receives `value` while the
agent runs the tool. An explicit argument always wins.

A value that implements `RunResource` is not handed over itself: at the start
of each run the agent asks it for the run's value (`open_run(scope)`), and at
the normal end of the run tells it the run is over (`close_run`). A task store
works this way, giving each agent the board of its own conversation.

Resources are not saved with the agent (`to_dict()`); give them again after
loading, by assigning `agent.resources`.

Example:
    >>> import asyncio
    >>> from pygents_ctx import Agent, Turn, injectable, tool
    >>> @injectable
    ... class Greeting:
    ...     def __init__(self, text: str) -> None:
    ...         self.text = text
    >>> @tool
    ... async def greet(name: str, greeting: Greeting) -> str:
    ...     return f"{greeting.text}, {name}"
    >>> async def main() -> list[str]:
    ...     agent = Agent("host", "Greets", [greet], resources={Greeting: Greeting("Hello")})
    ...     await agent.put(Turn(greet, kwargs={"name": "Ada"}))
    ...     return [value async for _, value in agent.run()]
    >>> asyncio.run(main())
    ['Hello, Ada']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar, runtime_checkable

__all__ = [
    "NO_RESOURCES",
    "RunResource",
    "RunScope",
    "check_resources",
    "close_resources",
    "injectable",
    "injectable_named",
    "is_injectable",
    "open_resources",
]

T = TypeVar("T", bound=type)

_INJECTABLE: set[type] = set()
# Class names, for annotations that stay text (a forward reference get_type_hints
# cannot resolve): a name two injectable classes share resolves to neither.
_BY_NAME: dict[str, type | None] = {}

NO_RESOURCES: Final[Mapping[type, object]] = {}


def injectable(cls: T) -> T:
    """Let tool and hook parameters annotated `cls` receive the running agent's resource.

    Give the agent the value with `Agent(..., resources={cls: value})`. Apply
    it before the tools that use `cls` are decorated (at import time, as a
    class decorator).

    Raises:
        TypeError: `cls` is not a class.
    """
    if not isinstance(cls, type):
        raise TypeError(f"@injectable decorates a class, not {cls!r}")
    _INJECTABLE.add(cls)
    name = cls.__name__
    _BY_NAME[name] = cls if _BY_NAME.get(name, cls) is cls else None
    return cls


def is_injectable(cls: object) -> bool:
    """Whether `cls` was marked `@injectable`."""
    return cls in _INJECTABLE


def injectable_named(name: str) -> type | None:
    """The one injectable class called `name`, if there is exactly one."""
    return _BY_NAME.get(name)


@dataclass(frozen=True, slots=True)
class RunScope:
    """Who is running: what a `RunResource` is told at the start and end of a run.

    Attributes:
        agent: The agent's name.
        conversation: The agent's conversation: its context store's session id
            when it has a `ContextConfig`, otherwise its name (the agent's own
            history is then its only conversation).
        run_id: The run's id (`agent.run_id`).
    """

    agent: str
    conversation: str
    run_id: str


@runtime_checkable
class RunResource(Protocol):
    """A resource that gives each run of an agent its own value.

    `open_run(scope)` is called when a run starts and returns what the tools
    receive during that run; `close_run(value, scope)` is awaited when the run
    ends normally (not when it raises or is cancelled).
    """

    def open_run(self, scope: RunScope) -> object:
        """The value the agent's tools receive during the run `scope`."""
        ...

    async def close_run(self, value: object, scope: RunScope) -> None:
        """The run `scope` ended normally; `value` is what `open_run` gave it."""
        ...


def check_resources(resources: object, owner: str) -> dict[type, object]:
    """A copy of an agent's `resources`, after checking it.

    Raises:
        TypeError: It is not a mapping, a key is not an `@injectable` class, or a
            value is neither an instance of its key nor a `RunResource`.
    """
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise TypeError(
            f"{owner}: resources must be a mapping of class to value, "
            f"not {type(resources).__name__}"
        )
    checked: dict[type, object] = {}
    for cls, value in resources.items():
        if not is_injectable(cls):
            raise TypeError(
                f"{owner}: resources key {cls!r} is not an injectable class; "
                "decorate the class with @injectable"
            )
        if not isinstance(value, RunResource) and not _instance_of(value, cls):
            raise TypeError(
                f"{owner}: resources[{cls.__name__}] must be a {cls.__name__} "
                f"(or a RunResource giving one per run), not {type(value).__name__}"
            )
        checked[cls] = value
    return checked


def _instance_of(value: object, cls: type) -> bool:
    try:
        return isinstance(value, cls)
    except TypeError:  # a Protocol that is not runtime-checkable: nothing to check
        return True


def open_resources(resources: Mapping[type, object], scope: RunScope) -> dict[type, object]:
    """The values the tools of the run `scope` receive, by class."""
    return {
        cls: value.open_run(scope) if isinstance(value, RunResource) else value
        for cls, value in resources.items()
    }


async def close_resources(
    resources: Mapping[type, object], opened: Mapping[type, object], scope: RunScope
) -> None:
    """Tell each `RunResource` that the run `scope` ended normally, in the given order."""
    for cls, value in resources.items():
        if isinstance(value, RunResource):
            await value.close_run(opened[cls], scope)
