"""A tool call's arguments are checked before the tool runs: every problem, in one error."""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import logging
import pathlib
import pickle
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, NewType, NotRequired, Protocol, TypedDict

import pydantic
import pytest

from pygents_ctx import (
    Agent,
    ArgumentProblem,
    ContextQueue,
    StopReason,
    Tool,
    ToolArgumentsError,
    Turn,
    tool,
)

UserId = NewType("UserId", int)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Address:
    street: str
    city: str = "Paris"


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


class Filter(TypedDict):
    field: str
    limit: NotRequired[int]


class Person(pydantic.BaseModel):
    name: str
    age: int


class Greeter(Protocol):
    def greet(self) -> str: ...


def probe(hint: Any) -> Tool[..., Any]:
    """A tool `probe(value: hint)` returning its argument."""

    async def probe(value):  # type: ignore[no-untyped-def]
        return value

    probe.__annotations__ = {"value": hint}
    return tool(probe)


def problems(made: Tool[..., Any], *args: Any, **kwargs: Any) -> list[str]:
    """The problems a call reports, as text (none when it is accepted)."""
    check = made._validator
    assert check is not None
    try:
        check(args, kwargs)
    except ToolArgumentsError as exc:
        refused = exc
    else:
        return []
    assert refused.tool == made.key
    return [str(problem) for problem in refused.problems]


@pytest.mark.parametrize(
    ("hint", "accepted", "refused"),
    [
        (str, ["", "text"], [3, None, b"x"]),
        (int, [0, -5, 2**70], [True, 1.0, "1", None]),
        (float, [1.5, 2, -0.0], [True, "1.5", None]),
        (bool, [True, False], [1, 0, "true"]),
        (type(None), [None], [0, ""]),
        (int | None, [3, None], ["3", True]),
        (int | str, [3, "3"], [3.5, None]),
        (Literal["asc", "desc"], ["asc"], ["ASC", 1]),
        (Literal[1, 2], [1, 2], [True, "1", 3]),
        (Color, [Color.RED, "red", "blue"], ["green", Color]),
        (Level, [Level.LOW, 1, 2], [True, 3, "1"]),
        (list[int], [[], [1, 2], (1, 2)], [[1, "2"], "12", {1: 2}, {1, 2}]),
        (set[str], [{"a"}, ["a"], frozenset()], [[1], "a"]),
        (tuple[int, str], [(1, "a"), [1, "a"]], [(1,), ("a", 1), (1, "a", 2)]),
        (tuple[int, ...], [(), (1, 2, 3)], [(1, "2")]),
        (dict[str, int], [{}, {"a": 1}], [{"a": "1"}, {1: 1}, [("a", 1)]]),
        (collections.abc.Sequence[str], [["a"], ("a",)], ["abc", [1]]),
        (collections.abc.Mapping[str, float], [{"a": 1}], [{"a": None}]),
        (Address, [Address("x"), {"street": "x"}, {"street": "x", "city": "y"}], [{}, "x"]),
        (Filter, [{"field": "f"}, {"field": "f", "limit": 2}], [{"limit": 2}, {"field": 1}]),
        (Node, [{"name": "a", "children": [{"name": "b"}]}], [{"name": "a", "children": [{}]}]),
        (Person, [Person(name="a", age=1), {"name": "a", "age": 1}], [{"name": "a"}, "a"]),
        (datetime.datetime, [datetime.datetime(2025, 1, 1), "2025-01-01T10:00:00"], ["soon", 1]),
        (datetime.date, [datetime.date(2025, 1, 1), "2025-01-01"], ["01/01/2025"]),
        (bytes, [b"x", bytearray(b"x"), "eA=="], [1]),
        (UserId, [7], ["7"]),
        (Annotated[int, "a count"], [1], ["1"]),
        (datetime.time, [datetime.time(10, 30), "10:30:00"], ["half past ten"]),
        (bytes, ["", "aGk="], ["not base64!", "x=="]),
        (uuid.UUID, [uuid.UUID(int=1), str(uuid.UUID(int=1))], ["not-a-uuid", 1]),
        (decimal.Decimal, [decimal.Decimal("1.5"), 2, 0.1, "3.25"], ["NaN", "x", True, None]),
        (pathlib.Path, [pathlib.Path("a"), "/tmp/notes.txt"], [1, None]),
        (Literal[Color.RED], [Color.RED, "red"], ["blue", Color.BLUE]),
    ],
    ids=lambda v: None if isinstance(v, list) else getattr(v, "__name__", repr(v)),
)
def test_values_are_checked_against_the_hint(
    hint: Any, accepted: list[Any], refused: list[Any]
) -> None:
    made = probe(hint)
    for value in accepted:
        assert problems(made, value) == [], value
        assert problems(made, value=value) == [], value
    for value in refused:
        assert problems(made, value), value
        assert problems(made, value=value), value


@pytest.mark.parametrize(
    "hint",
    [
        Any,
        object,
        "Undefined",
        Greeter,
        collections.abc.Callable[[], int],
        type[int],
    ],
    ids=lambda v: getattr(v, "__name__", repr(v)),
)
def test_hints_whose_schema_is_anything_refuse_nothing(hint: Any) -> None:
    # A model is told `{}` for these: any value it sends is let through.
    made = probe(hint)
    assert made.metadata.input_schema["properties"]["value"] == {}
    assert problems(made, "/tmp/notes.txt") == []
    assert problems(made) == ["value: required, not given"]  # still checked for being given


def test_a_tool_with_nothing_to_check_has_no_validator() -> None:
    @tool
    async def loose(a=None, b: Any = 2):  # type: ignore[no-untyped-def]
        return a

    assert loose._validator is None
    assert loose.validate  # it would check, had it anything to check


def test_each_problem_has_a_path_into_the_value() -> None:
    @tool
    async def plan(
        where: Address, ids: list[int], tags: dict[str, Color], person: Person | None = None
    ) -> None:
        pass

    found = problems(
        plan,
        where={"street": 5, "cty": "Lyon"},
        ids=[1, "two", 3],
        tags={"a": "red", "b": "green"},
        person={"name": "Ada"},
    )

    assert found == [
        "where.street: expected string; got integer 5",  # given: `cty` is just an extra
        "ids[1]: expected integer; got string 'two'",
        "tags['b']: expected one of 'red' | 'blue'; got string 'green'",
        "person.age: Field required",
    ]


def test_an_unknown_field_is_reported_only_when_a_required_one_is_missing() -> None:
    made = probe(Address)

    assert problems(made, {"street": "x", "extra": 1}) == []  # a superset, as for arguments
    assert problems(made, {"stret": "x"}) == [
        "value.street: required, not given",
        "value.stret: not a field of Address; did you mean 'street'?",
    ]


async def test_the_nme_case_names_the_missing_parameter_and_the_misspelling() -> None:
    @tool
    async def greet(name: str) -> str:
        return f"hi {name}"

    with pytest.raises(ToolArgumentsError) as info:
        await Turn(greet, kwargs={"nme": "x"}).returning()

    error = info.value
    assert error.problems == (
        ArgumentProblem("name", "missing", "required, not given"),
        ArgumentProblem(
            "nme", "unknown", "not a parameter of this tool; did you mean 'name'?", "name"
        ),
    )
    assert str(error) == (
        "tool 'greet' was called with invalid arguments (2 problems); it did not run:\n"
        "  - name: required, not given\n"
        "  - nme: not a parameter of this tool; did you mean 'name'?"
    )
    assert isinstance(error, ValueError)
    assert isinstance(error, TypeError)
    copied = pickle.loads(pickle.dumps(error))
    assert (copied.tool, copied.problems, str(copied)) == (error.tool, error.problems, str(error))


async def test_unknown_names_are_dropped_when_nothing_required_is_missing() -> None:
    @tool
    async def greet(name: str, times: int = 1) -> str:
        return f"hi {name}" * times

    assert await greet(name="a", tiems=3) == "hi a"  # the superset rule: no error
    assert problems(greet, "a", bogus=1) == []


def test_every_problem_of_a_call_is_listed_in_parameter_order() -> None:
    @tool
    async def book(city: str, nights: int, guests: int = 1, *, breakfast: bool = False) -> None:
        pass

    assert problems(book, 5, guests="two", breakfast=1, nigths=3) == [
        "city: expected string; got integer 5",
        "guests: expected integer; got string 'two'",
        "breakfast: expected boolean; got integer 1",
        "nights: required, not given",
        "nigths: not a parameter of this tool; did you mean 'nights'?",
    ]


def test_positional_arguments_are_checked_where_they_land() -> None:
    @tool
    async def move(x: int, y: int = 0, /, *, speed: float = 1.0) -> None:
        pass

    assert problems(move, 1, 2) == []
    assert problems(move, 1, "2") == ["y: expected integer; got string '2'"]
    assert problems(move, 1, 2, 3) == [
        "args: 3 positional arguments given, the tool takes at most 2"
    ]
    # Positional-only: a keyword does not reach it.
    assert problems(move, x=1) == [
        "x: required, not given",
        "x: can only be given by position, not by name",
    ]


def test_an_argument_given_by_position_and_by_name_is_refused() -> None:
    @tool
    async def pair(a: int, b: Any = None) -> None:
        pass

    assert problems(pair, 1, a=1) == ["a: given twice: by position and by name"]
    assert problems(pair, 1, 2, b=2) == ["b: given twice: by position and by name"]


def test_var_arguments_and_a_kwargs_parameter_take_anything_extra() -> None:
    @tool
    async def loose(first: int, *rest: int, **options: Any) -> None:
        pass

    assert problems(loose, 1, 2, "3", anything="goes") == []  # *rest is not checked
    assert problems(loose, fist=1) == ["first: required, not given"]  # no unknowns with **


def test_fixed_kwargs_and_context_parameters_are_not_the_callers_to_give() -> None:
    @tool(region="eu")
    async def fetch(url: str, queue: ContextQueue[Any] | None, region: str) -> str:
        return url

    assert problems(fetch, "u") == []  # region is fixed, queue is injected
    assert problems(fetch, "u", region=5) == ["region: expected string; got integer 5"]


async def test_every_way_of_calling_a_tool_checks_first() -> None:
    ran: list[Any] = []

    @tool
    async def double(x: int) -> int:
        ran.append(x)
        return 2 * x

    @tool
    async def count(n: int) -> AsyncIterator[int]:
        ran.append(n)
        yield n

    @double.before_invoke
    async def seen(*args: Any, **kwargs: Any) -> None:
        ran.append("before_invoke")

    turn_with_hooks = Turn(double, args=["2"])

    @turn_with_hooks.on_error
    async def failed(turn: Turn, exc: Exception) -> None:
        ran.append(type(exc).__name__)

    agent = Agent("checker", "checks", [double, count])
    await agent.put(Turn(count, kwargs={"n": "3"}))

    with pytest.raises(ToolArgumentsError):
        await double("2")
    with pytest.raises(ToolArgumentsError):
        [v async for v in count("3")]
    with pytest.raises(ToolArgumentsError):
        await turn_with_hooks.returning()
    with pytest.raises(ToolArgumentsError):
        [v async for v in Turn(count, kwargs={"n": "3"}).yielding()]
    with pytest.raises(ToolArgumentsError):
        [v async for v in agent.run()]

    # The tool never ran, nor did its before_invoke hook; the turn's on_error fired.
    assert ran == ["ToolArgumentsError"]
    assert turn_with_hooks.metadata.stop_reason is StopReason.ERROR
    assert double.metadata.start_time is None  # a refused call is not a call


async def test_an_agent_run_without_hooks_checks_too() -> None:
    @tool
    async def double(x: int) -> int:
        return 2 * x

    agent = Agent("plain", "no hooks anywhere", [double])
    await agent.put(Turn(double, args=["2"]))
    turn = agent.turns[0]

    with pytest.raises(ToolArgumentsError, match="x: expected integer"):
        [v async for v in agent.run()]
    assert turn.metadata.stop_reason is StopReason.ERROR
    assert not turn.is_running


async def test_dynamic_values_are_checked_once_computed() -> None:
    @tool
    async def double(x: int) -> int:
        return 2 * x

    source = {"value": 4}
    turn = Turn(double, kwargs={"x": lambda: source["value"]})
    assert await turn.returning() == 8

    source["value"] = "four"
    with pytest.raises(ToolArgumentsError, match="x: expected integer; got string 'four'"):
        await turn.copy().returning()


async def test_validate_false_calls_the_function_with_whatever_it_is_given() -> None:
    @tool(validate=False)
    async def echo(text: str) -> Any:
        return text

    assert echo._validator is None
    assert not echo.validate
    assert await echo(3) == 3
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        await echo()


def test_subtools_take_the_option_too() -> None:
    @tool
    async def files() -> None:
        pass

    @files.subtool(validate=False)
    async def read(path: str) -> str:
        return path

    @files.subtool
    async def stat(path: str) -> str:
        return path

    assert read._validator is None
    assert problems(stat, 1) == ["path: expected string; got integer 1"]


async def test_turn_hooks_see_the_refusal_as_the_turns_error() -> None:
    @tool
    async def double(x: int) -> int:
        return 2 * x

    agent = Agent("watched", "d", [double])
    stopped: list[Any] = []

    @agent.on_complete
    async def complete(turn: Turn, reason: StopReason) -> None:
        stopped.append(reason)

    await agent.put(Turn(double, kwargs={"y": 1}))
    with pytest.raises(ToolArgumentsError):
        [v async for v in agent.run()]
    assert stopped == [StopReason.ERROR]


def test_a_pydantic_model_reports_each_of_its_errors() -> None:
    made = probe(Person)

    assert problems(made, {"name": 1, "age": "x"}) == [
        "value.name: Input should be a valid string",
        "value.age: Input should be a valid integer, unable to parse string as an integer",
    ]


def test_a_failing_value_shows_a_short_repr() -> None:
    made = probe(int)

    [found] = problems(made, "x" * 100)

    assert found.startswith("value: expected integer; got string 'xxxx")
    assert found.endswith("...")
    assert len(found) < 100


def test_a_refusal_is_logged_nowhere(caplog: pytest.LogCaptureFixture) -> None:
    made = probe(int)
    with caplog.at_level(logging.DEBUG, logger="pygents_ctx"):
        problems(made, "x")
    assert caplog.records == []  # the error says it all


def test_every_argument_is_explained_when_one_fails() -> None:
    # The slow path walks every argument: the right ones, of every kind, pass it too.
    @tool
    async def mixed(
        color: Color, where: Address, person: Person, other: Person, count: int
    ) -> None:
        pass

    assert problems(
        mixed, Color.RED, Address("x"), Person(name="a", age=1), {"name": "b", "age": 2}, "x"
    ) == ["count: expected integer; got string 'x'"]
    assert problems(mixed, "red", "Main St", "Ada", [], 1) == [
        "where: expected Address (object); got string 'Main St'",
        "person: expected Person (object); got string 'Ada'",
        "other: expected Person (object); got array []",
    ]


def test_an_iterable_that_reading_would_consume_is_checked_by_its_type_only() -> None:
    made = probe(collections.abc.Iterable[int])
    numbers = (n for n in ["not", "ints"])

    assert problems(made, numbers) == []
    assert list(numbers) == ["not", "ints"]  # not consumed by the check
    assert problems(made, 5) == ["value: expected array of integer; got integer 5"]


class _SelfChecking:
    """Has `model_validate` as pydantic models do, but raises a plain error."""

    @classmethod
    def model_validate(cls, value: object) -> _SelfChecking:
        raise ValueError("not a valid self-checking value")

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return {"type": "object", "title": "_SelfChecking"}


def test_a_model_whose_error_lists_nothing_is_reported_in_one_line() -> None:
    made = probe(_SelfChecking)

    assert problems(made, {"a": 1}) == ["value: not a valid self-checking value"]
