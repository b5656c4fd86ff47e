"""`Tool.from_schema`: a tool defined by a JSON Schema, its calls checked against it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import Agent, Turn
from pygents_ctx.errors import ToolArgumentsError
from pygents_ctx.registry import AgentRegistry, ToolRegistry
from pygents_ctx.tools import Tool

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "mode": {"enum": ["fast", "slow"]},
        "address": {"$ref": "#/$defs/Address"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}},
    },
    "required": ["n"],
    "additionalProperties": False,
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        }
    },
}


async def echo(**arguments: Any) -> dict[str, Any]:
    return arguments


def make(**options: Any) -> Tool[..., Any]:
    return Tool.from_schema("echo", echo, description="Echo.", input_schema=SCHEMA, **options)


async def test_a_call_that_fits_runs_with_its_arguments() -> None:
    tool = make()

    result = await tool(n=3, tags=["a"], mode="fast", address={"city": "Oslo"}, note=None)

    assert result == {
        "n": 3,
        "tags": ["a"],
        "mode": "fast",
        "address": {"city": "Oslo"},
        "note": None,
    }
    assert tool.metadata.name == tool.key == "echo"
    assert tool.metadata.description == "Echo."
    assert tool.metadata.input_schema == SCHEMA


async def test_every_problem_is_listed_with_its_path_and_the_tool_does_not_run() -> None:
    ran: list[Any] = []

    async def record(**arguments: Any) -> None:
        ran.append(arguments)

    tool = Tool.from_schema("record", record, input_schema=SCHEMA)

    with pytest.raises(ToolArgumentsError) as caught:
        await tool(
            n="3",
            tags=["a", 2],
            mode="medium",
            address={"cty": "Oslo"},
            note=1,
            extra={"x": "y"},
        )

    assert [str(p) for p in caught.value.problems] == [
        "n: expected integer; got string '3'",
        "tags[1]: expected string; got integer 2",
        "mode: expected one of 'fast' | 'slow'; got string 'medium'",
        "address.city: required, not given",
        "address.cty: not a field of this object; did you mean 'city'?",
        "note: expected string or null; got integer 1",
        "extra.x: expected number; got string 'y'",
    ]
    assert ran == []


async def test_unknown_names_are_dropped_unless_something_required_is_missing() -> None:
    tool = make()

    assert await tool(n=1, verbose=True) == {"n": 1}
    with pytest.raises(ToolArgumentsError) as caught:
        await tool(count=1)
    assert [str(p) for p in caught.value.problems] == [
        "n: required, not given",
        "count: not a parameter of this tool (those are: n, tags, mode, address, note, extra)",
    ]


async def test_an_open_schema_keeps_extra_names_but_reports_a_misspelled_one() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tool = Tool.from_schema("weather", echo, input_schema=schema)

    assert await tool(city="Oslo", units="metric") == {"city": "Oslo", "units": "metric"}
    with pytest.raises(ToolArgumentsError) as caught:
        await tool(cty="Oslo", units="metric")
    assert [str(p) for p in caught.value.problems] == [
        "city: required, not given",
        "cty: not a parameter of this tool; did you mean 'city'?",
    ]


async def test_positional_arguments_are_refused() -> None:
    with pytest.raises(ToolArgumentsError, match="by name, not by position"):
        await make()(3)


async def test_validate_false_passes_anything_through() -> None:
    assert await make(validate=False)(n="three") == {"n": "three"}


async def test_a_schema_tool_runs_as_a_turn_of_an_agent_and_is_saved_by_name() -> None:
    tool = make()
    ToolRegistry.register(tool)
    agent = Agent("schema-agent", "uses a schema tool", [tool])
    await agent.put(Turn(tool, kwargs={"n": 2}))
    values = [value async for _, value in agent.run()]
    saved = agent.to_json()
    AgentRegistry.unregister("schema-agent")

    assert values == [{"n": 2}]
    assert Agent.from_json(saved).tools == [tool]


def test_bad_definitions_are_refused() -> None:
    def sync(**arguments: Any) -> None:
        return None

    with pytest.raises(TypeError, match="'async def'"):
        Tool.from_schema("sync", sync)
    with pytest.raises(ValueError, match="must describe an object"):
        Tool.from_schema("listy", echo, input_schema={"type": "array"})
    with pytest.raises(TypeError, match="must be a dict"):
        Tool.from_schema("bad", echo, input_schema="{}")  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["n", "mode", "note"]),
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    )
)
async def test_a_call_runs_exactly_when_no_problem_is_reported(arguments: dict[str, Any]) -> None:
    tool = make()
    fits = (
        "n" in arguments
        and type(arguments["n"]) is int
        and arguments.get("mode", "fast") in ("fast", "slow")
        and type(arguments.get("mode", "fast")) is str
        and (arguments.get("note") is None or isinstance(arguments.get("note"), str))
    )
    integral_float = isinstance(arguments.get("n"), float) and arguments["n"].is_integer()
    if fits or (integral_float and not fits_but_n(arguments)):
        assert await tool(**arguments) == arguments
    else:
        with pytest.raises(ToolArgumentsError):
            await tool(**arguments)


def fits_but_n(arguments: dict[str, Any]) -> bool:
    """Whether something other than `n` is wrong."""
    mode = arguments.get("mode", "fast")
    note = arguments.get("note")
    return not (type(mode) is str and mode in ("fast", "slow")) or not (
        note is None or isinstance(note, str)
    )
