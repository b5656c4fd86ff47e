"""Tools: decoration, calls, fixed kwargs, locks, metadata and schemas, hooks, subtools."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Optional

import pytest

from tests.compat.conftest import Impl, pygents_shape
from tests.compat.marks import covers


@covers("tool", "Tool", "Tool.fn", "Tool.metadata", "ToolMetadata.name", "ToolMetadata.description")
async def test_a_decorated_coroutine_is_a_callable_tool(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    @m.tool()
    async def twice(a: int) -> int:
        return 2 * a

    assert isinstance(add, m.Tool)
    assert await add(2) == 3
    assert await add(a=2, b=5) == 7
    assert await twice(a=4) == 8
    assert add.__name__ == "add"
    assert add.fn.__name__ == "add"
    assert add.metadata.name == "add"
    assert add.metadata.description == "Add two numbers."
    assert twice.metadata.description is None
    assert m.ToolRegistry.get("add") is add


@covers("tool", "AsyncGenTool")
async def test_a_decorated_async_generator_is_iterated(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    assert [v async for v in count(n=3)] == [0, 1, 2]
    assert [v async for v in count(2)] == [0, 1]


@covers("tool")
def test_a_plain_function_is_refused(impl: Impl) -> None:
    with pytest.raises(TypeError, match="Tool must be async"):

        @impl.m.tool
        def not_async() -> None:
            pass

    with pytest.raises(m_unregistered(impl)):
        impl.m.ToolRegistry.get("not_async")


def m_unregistered(impl: Impl) -> type[Exception]:
    error: type[Exception] = impl.m.UnregisteredToolError
    return error


def _another_fetch() -> Any:
    async def fetch() -> int:
        return 2

    return fetch


@covers("tool", "ToolRegistry.register")
def test_a_second_tool_under_a_taken_name_is_refused(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def fetch() -> int:
        return 1

    with pytest.raises(ValueError, match="'fetch' already registered"):
        m.tool(_another_fetch())  # a different function (re-definitions: see test_differences)

    assert m.ToolRegistry.get("fetch") is fetch


@covers("Tool.lock", "tool")
async def test_lock_is_none_unless_asked_and_then_serializes_calls(impl: Impl) -> None:
    m = impl.m
    active = most = 0

    async def slow() -> None:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0.01)
        active -= 1

    @m.tool
    async def free() -> None:
        await slow()

    @m.tool(lock=True)
    async def guarded() -> None:
        await slow()

    assert free.lock is None
    assert guarded.lock is not None
    async with guarded.lock:
        assert guarded.lock.locked()
    assert not guarded.lock.locked()

    await asyncio.gather(free(), free(), free())
    assert most == 3
    most = 0
    await asyncio.gather(guarded(), guarded(), guarded())
    assert most == 1


@covers("Tool.tags", "tool")
def test_tags_are_a_frozenset(impl: Impl) -> None:
    m = impl.m

    @m.tool(tags=["search", "web"])
    async def tagged() -> None:
        pass

    @m.tool
    async def untagged() -> None:
        pass

    assert tagged.tags == frozenset({"search", "web"})
    assert untagged.tags == frozenset()


@covers("tool")
async def test_fixed_kwargs_are_merged_and_a_call_argument_overrides_with_a_warning(
    impl: Impl, caplog: pytest.LogCaptureFixture
) -> None:
    m = impl.m
    calls = iter(range(10))

    @m.tool(env="prod", stamp=lambda: next(calls))
    async def deploy(service: str, env: str = "dev", stamp: int = -1) -> str:
        return f"{service}@{env}#{stamp}"

    assert await deploy("api") == "api@prod#0"
    assert await deploy(service="db") == "db@prod#1"
    with caplog.at_level(logging.WARNING):
        assert await deploy("api", env="test") == "api@test#2"

    assert [r.getMessage() for r in caplog.records] == [
        "Fixed kwarg 'env' is overridden by call-time argument for tool 'deploy'."
    ]


@covers("tool")
async def test_keyword_arguments_the_function_does_not_take_are_dropped(impl: Impl) -> None:
    @impl.m.tool
    async def echo(x: int) -> int:
        return x

    assert await echo(x=1, unrelated="ignored") == 1


@covers("ToolMetadata.input_schema", "ToolMetadata.output_schema", "tool")
def test_schemas_are_written_from_the_type_hints(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def search(
        query: str,
        limit: Optional[int] = None,  # noqa: UP045 (the spelling pygents users have)
        ratio: float = 0.5,
        exact: bool = False,
        tags: list[str] | None = None,
        either: int | str = 0,
        anything=None,  # type: ignore[no-untyped-def]
    ) -> dict[str, int]:
        return {}

    # pygents_ctx adds keys to this shape (see test_differences): compared without them.
    assert pygents_shape(search.metadata.input_schema) == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "ratio": {"type": "number"},
            "exact": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "anything": {},
        },
        "required": ["query"],
    }
    assert search.metadata.output_schema["type"] == "object"


@covers("ToolMetadata.output_schema", "tool")
def test_output_schema_is_none_without_a_return_hint_and_the_item_schema_of_a_generator(
    impl: Impl,
) -> None:
    m = impl.m

    @m.tool
    async def untyped(x: int):  # type: ignore[no-untyped-def]
        return x

    @m.tool
    async def nothing(x: int) -> None:
        pass

    @m.tool
    async def names(n: int) -> AsyncIterator[str]:
        yield "a"

    @m.tool
    async def raw(n: int):  # type: ignore[no-untyped-def]
        yield n

    assert untyped.metadata.output_schema is None
    assert nothing.metadata.output_schema is None
    assert names.metadata.output_schema == {"type": "string"}
    assert raw.metadata.output_schema is None
    assert names.metadata.input_schema == {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }


@covers(
    "ToolMetadata",
    "ToolMetadata.dict",
    "ToolMetadata.start_time",
    "ToolMetadata.end_time",
    "Tool.metadata",
)
async def test_metadata_records_the_latest_call(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def ping(host: str) -> str:
        """Answer."""
        return "pong"

    before = ping.metadata.dict()
    assert before == {
        "name": "ping",
        "description": "Answer.",
        "start_time": None,
        "end_time": None,
        "input_schema": {
            "type": "object",
            "properties": {"host": {"type": "string"}},
            "required": ["host"],
        },
        "output_schema": {"type": "string"},
    }
    await ping("localhost")
    start, end = ping.metadata.start_time, ping.metadata.end_time
    assert start is not None
    assert end is not None
    assert end >= start
    after = ping.metadata.dict()
    assert list(after) == list(before)
    assert after["start_time"] == start.isoformat()


@covers("ToolMetadata", "ToolMetadata.dict")
def test_metadata_made_by_hand_compares_and_prints_as_a_dataclass(impl: Impl) -> None:
    made = impl.m.ToolMetadata("search", "Search the web.")

    assert made == impl.m.ToolMetadata("search", "Search the web.")
    assert made != impl.m.ToolMetadata("search", "Other.")
    assert repr(made) == (
        "ToolMetadata(name='search', description='Search the web.', start_time=None, "
        "end_time=None, input_schema=None, output_schema=None)"
    )
    assert made.dict()["input_schema"] is None


@covers("Tool.before_invoke", "Tool.after_invoke", "Tool.on_error")
async def test_tool_hooks_see_the_arguments_the_result_and_the_error(impl: Impl) -> None:
    m = impl.m
    seen: list[Any] = []

    @m.tool
    async def divide(a: int, b: int) -> float:
        return a / b

    @divide.before_invoke
    async def before(a: int, b: int) -> None:
        seen.append(("before", a, b))

    @divide.after_invoke
    async def after(result: float) -> None:
        seen.append(("after", result))

    @divide.on_error
    async def failed(exc: BaseException) -> None:
        seen.append(("error", type(exc).__name__))

    assert await divide(a=6, b=3) == 2
    with pytest.raises(ZeroDivisionError):
        await divide(a=1, b=0)

    assert seen == [
        ("before", 6, 3),
        ("after", 2),
        ("before", 1, 0),
        ("error", "ZeroDivisionError"),
    ]


@covers("AsyncGenTool.on_yield", "Tool.after_invoke")
async def test_a_generator_tools_hooks_see_each_value_and_the_list(impl: Impl) -> None:
    m = impl.m
    seen: list[Any] = []

    @m.tool
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @count.on_yield
    async def each(value: int) -> None:
        seen.append(("yield", value))

    @count.after_invoke
    async def done(result: list[int]) -> None:
        seen.append(("after", result))

    assert [v async for v in count(n=2)] == [0, 1]
    assert seen == [("yield", 0), ("yield", 1), ("after", [0, 1])]


@covers("Tool.after_invoke", "AsyncGenTool")
async def test_after_invoke_gets_the_partial_list_when_the_consumer_stops_early(
    impl: Impl,
) -> None:
    m = impl.m
    received: list[list[int]] = []

    @m.tool
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @count.after_invoke
    async def done(result: list[int]) -> None:
        received.append(result)

    values = count(n=5)
    async for value in values:
        if value == 1:
            break
    await values.aclose()

    assert received == [[0, 1]]


@covers("Tool.subtool", "Tool.doc_tree", "ToolRegistry.definitions", "ToolRegistry.all")
def test_subtools_are_registered_under_their_dotted_path(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def files(path: str = ".") -> str:
        """Work with files."""
        return path

    @files.subtool
    async def read(path: str) -> str:
        """Read a file."""
        return path

    @read.subtool()
    async def lines(path: str) -> int:
        return 0

    assert m.ToolRegistry.get("files.read") is read
    assert m.ToolRegistry.get("files.read.lines") is lines
    assert read.__name__ == "files.read"
    assert read.metadata.name == "read"
    assert [t.metadata.name for t in m.ToolRegistry.all()] == ["files", "read", "lines"]
    tree = {
        "name": "files",
        "description": "Work with files.",
        "subtools": [
            {
                "name": "read",
                "description": "Read a file.",
                "subtools": [{"name": "lines", "description": None, "subtools": []}],
            }
        ],
    }
    assert files.doc_tree() == tree
    assert m.ToolRegistry.definitions() == [tree]


@covers("Tool.add_subtool", "Tool.doc_tree", "ToolRegistry.definitions")
def test_add_subtool_attaches_a_tool_made_elsewhere(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def shell() -> None:
        pass

    @m.tool
    async def run(command: str) -> str:
        return command

    shell.add_subtool(run)

    assert m.ToolRegistry.get("run") is run
    assert shell.doc_tree()["subtools"] == [{"name": "run", "description": None, "subtools": []}]
    assert [d["name"] for d in m.ToolRegistry.definitions()] == ["run", "shell"]


@covers("Agent", "Tool.subtool")
async def test_an_agent_given_a_root_tool_runs_its_subtools(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def math() -> None:
        pass

    @math.subtool
    async def square(x: int) -> int:
        return x * x

    agent = m.Agent("calc", "Calculates", [math])
    await agent.put(m.Turn("math.square", kwargs={"x": 3}))

    assert [value async for _, value in agent.run()] == [9]


@covers("ToolRegistry.get", "ToolRegistry.unregister", "ToolRegistry.clear", "ToolRegistry")
def test_the_tool_registry_finds_forgets_and_names_what_is_missing(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def lookup() -> None:
        pass

    assert m.ToolRegistry.get("lookup") is lookup
    m.ToolRegistry.unregister("lookup")
    with pytest.raises(m.UnregisteredToolError, match="'lookup' not found") as info:
        m.ToolRegistry.get("lookup")
    assert isinstance(info.value, KeyError)

    @m.tool
    async def again() -> None:
        pass

    m.ToolRegistry.clear()
    assert m.ToolRegistry.all() == []
