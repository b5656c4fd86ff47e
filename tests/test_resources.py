"""Resources: tools and hooks that declare a parameter of an `@injectable` class."""

from __future__ import annotations

import uuid
from typing import Any, Optional, Protocol

import pytest

from pygents_ctx import (
    Agent,
    AgentHook,
    ContextConfig,
    MemoryContextStore,
    RunResource,
    RunScope,
    Turn,
    hook,
    injectable,
    tool,
)
from pygents_ctx._resources import injectable_named


@injectable
class Salutation:
    def __init__(self, text: str) -> None:
        self.text = text


@injectable
class Counter(Protocol):
    def next(self) -> int: ...


class Scoped:
    """A `RunResource`: one fresh Salutation per run, and a log of what it was told."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def open_run(self, scope: RunScope) -> Salutation:
        self.log.append(("open", scope))
        return Salutation(f"hi from {scope.conversation}")

    async def close_run(self, value: object, scope: RunScope) -> None:
        assert isinstance(value, Salutation)
        self.log.append(("close", value.text))


async def drain(agent: Agent) -> list[Any]:
    return [value async for _, value in agent.run()]


async def test_a_tool_receives_the_agents_resource_by_its_annotation() -> None:
    @tool
    async def greet(name: str, salutation: Salutation) -> str:
        return f"{salutation.text}, {name}"

    agent = Agent("host", "greets", [greet], resources={Salutation: Salutation("Hello")})
    await agent.put(Turn(greet, kwargs={"name": "Ada"}))

    assert await drain(agent) == ["Hello, Ada"]
    assert "salutation" not in greet.metadata.input_schema["properties"]


async def test_an_explicit_argument_wins_over_the_resource() -> None:
    @tool
    async def greet(salutation: Salutation) -> str:
        return salutation.text

    agent = Agent("host", "greets", [greet], resources={Salutation: Salutation("Hello")})
    await agent.put(Turn(greet, kwargs={"salutation": Salutation("Howdy")}))
    await agent.put(Turn(greet, args=[Salutation("Hey")]))

    assert await drain(agent) == ["Howdy", "Hey"]


async def test_optional_resources_are_none_when_the_agent_has_none() -> None:
    @tool
    async def union(salutation: Salutation | None = None) -> Any:
        return salutation

    @tool
    async def typing_optional(salutation: Optional[Salutation]) -> Any:  # noqa: UP045
        return salutation

    agent = Agent("host", "greets", [union, typing_optional])
    await agent.put(Turn(union))
    await agent.put(Turn(typing_optional))

    assert await drain(agent) == [None, None]


async def test_a_required_resource_that_is_missing_says_how_to_give_it() -> None:
    @tool
    async def greet(salutation: Salutation) -> str:
        return salutation.text

    agent = Agent("host", "greets", [greet])
    await agent.put(Turn(greet))
    with pytest.raises(TypeError, match=r"resources=\{Salutation: \.\.\.\}"):
        await drain(agent)
    with pytest.raises(TypeError, match="run it inside an agent that has one"):
        await Turn(greet).returning()


async def test_a_run_resource_gives_each_run_its_own_value_and_hears_the_end() -> None:
    @tool
    async def greet(salutation: Salutation) -> str:
        return salutation.text

    scoped = Scoped()
    store = MemoryContextStore(session_id="chat-7")
    agent = Agent(
        "host", "greets", [greet], resources={Salutation: scoped}, context=ContextConfig(store)
    )
    await agent.put(Turn(greet))
    run_ids = [agent.run_id async for _ in agent.run()]

    (_, scope), closed = scoped.log
    assert isinstance(scope, RunScope)
    assert (scope.agent, scope.conversation) == ("host", "chat-7")
    assert run_ids == [scope.run_id]
    assert closed == ("close", "hi from chat-7")
    assert isinstance(scoped, RunResource)


async def test_without_a_context_store_the_conversation_is_the_agent_itself() -> None:
    @tool
    async def greet(salutation: Salutation) -> str:
        return salutation.text

    agent = Agent("host", "greets", [greet], resources={Salutation: Scoped()})
    await agent.put(Turn(greet))

    assert await drain(agent) == ["hi from host"]


async def test_a_run_that_raises_does_not_close_its_resources() -> None:
    @tool
    async def fail(salutation: Salutation) -> None:
        raise RuntimeError("boom")

    scoped = Scoped()
    agent = Agent("host", "fails", [fail], resources={Salutation: scoped})
    await agent.put(Turn(fail))
    with pytest.raises(RuntimeError, match="boom"):
        await drain(agent)

    assert [event for event, _ in scoped.log] == ["open"]


async def test_hooks_receive_resources_too() -> None:
    seen: list[str] = []

    @tool
    async def work() -> int:
        return 1

    @hook(AgentHook.AFTER_TURN)
    async def note(agent: Agent, turn: Turn, salutation: Salutation) -> None:
        seen.append(salutation.text)

    agent = Agent("host", "works", [work], resources={Salutation: Salutation("hook!")})
    await agent.put(Turn(work))
    await drain(agent)

    assert seen == ["hook!"]


async def test_a_branch_shares_the_resources() -> None:
    @tool
    async def greet(salutation: Salutation) -> str:
        return salutation.text

    parent = Agent("host", "greets", [greet], resources={Salutation: Scoped()})
    child = parent.branch("child")
    await child.put(Turn(greet))

    assert await drain(child) == ["hi from child"]


def test_resources_are_checked_when_given() -> None:
    class Plain:
        pass

    with pytest.raises(TypeError, match="decorate the class with @injectable"):
        Agent("a", "", [], resources={Plain: Plain()})
    with pytest.raises(TypeError, match=r"resources\[Salutation\] must be a Salutation"):
        Agent("b", "", [], resources={Salutation: "hello"})
    with pytest.raises(TypeError, match="must be a mapping"):
        Agent("c", "", [], resources=[Salutation("x")])  # type: ignore[arg-type]
    agent = Agent("d", "", [])
    with pytest.raises(TypeError, match="@injectable"):
        agent.resources = {Plain: Plain()}
    assert agent.resources == {}


def test_a_protocol_that_is_not_runtime_checkable_takes_any_value() -> None:
    class Tick:
        def next(self) -> int:
            return 1

    agent = Agent("a", "", [], resources={Counter: Tick()})

    assert isinstance(agent.resources[Counter], Tick)


def test_injectable_decorates_classes_only() -> None:
    with pytest.raises(TypeError, match="decorates a class"):
        injectable(len)  # type: ignore[type-var]


def test_a_name_two_injectable_classes_share_resolves_to_neither() -> None:
    name = f"Twin{uuid.uuid4().hex}"
    first = injectable(type(name, (), {}))
    assert injectable_named(name) is first
    assert injectable_named(name) is first  # the same class again: still unique
    injectable(first)
    assert injectable_named(name) is first

    injectable(type(name, (), {}))

    assert injectable_named(name) is None


async def test_a_forward_reference_left_as_text_still_finds_the_class() -> None:
    async def greet(salutation: Salutation) -> str:
        return salutation.text

    greet.__annotations__["salutation"] = "Salutation | None"  # as if it could not be resolved
    greet.__annotations__["return"] = "Unresolvable"
    greeter = tool(greet)

    agent = Agent("host", "greets", [greeter], resources={Salutation: Salutation("text")})
    await agent.put(Turn(greeter))

    assert await drain(agent) == ["text"]
