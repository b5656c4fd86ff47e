"""Tool arguments arrive as their annotated types (issue 23, part 4)."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
from typing import Annotated, Any, Literal, NewType, NotRequired, TypedDict

import orjson
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    ContextConfig,
    MemoryContextStore,
    ModelLoop,
    Tool,
    ToolArgumentsError,
    Turn,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call
from pygents_ctx.tools._convert import Conversion


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Where:
    city: str
    since: datetime.date | None = None


@dataclasses.dataclass(frozen=True)
class Query:
    text: str
    where: Where
    colors: tuple[Color, ...] = ()
    limit: int = 10


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError("n must be positive")


class Person(pydantic.BaseModel):
    name: str
    born: datetime.date


class Shift(TypedDict):
    day: datetime.date
    note: NotRequired[str]


UserId = NewType("UserId", uuid.UUID)


def probe(hint: Any, *, validate: bool = True) -> Tool[..., Any]:
    """A tool `probe(value: hint)` returning its argument as it arrived."""

    async def probe(value):  # type: ignore[no-untyped-def]
        return value

    probe.__annotations__ = {"value": hint}
    return tool(validate=validate)(probe)


DAY = datetime.date(2025, 3, 4)
ID = uuid.UUID(int=7)


def case_id(value: object) -> str:
    """A test id that is the same in every process (a set's order follows the hash seed)."""
    if isinstance(value, set | frozenset):
        return f"{type(value).__name__}({sorted(value, key=repr)!r})"
    return str(value)


@pytest.mark.parametrize(
    ("hint", "given", "expected"),
    [
        (datetime.date, "2025-03-04", DAY),
        (
            datetime.datetime,
            "2025-03-04T10:30:00+00:00",
            datetime.datetime(2025, 3, 4, 10, 30, tzinfo=datetime.UTC),
        ),
        (datetime.time, "10:30", datetime.time(10, 30)),
        (uuid.UUID, str(ID), ID),
        (UserId, str(ID), ID),
        (decimal.Decimal, "1.50", decimal.Decimal("1.50")),
        (decimal.Decimal, 0.1, decimal.Decimal("0.1")),
        (decimal.Decimal, 3, decimal.Decimal(3)),
        (pathlib.Path, "/tmp/notes.txt", pathlib.Path("/tmp/notes.txt")),
        (bytes, base64.b64encode(b"hi").decode(), b"hi"),
        (Color, "blue", Color.BLUE),
        (Level, 2, Level.HIGH),
        (Literal[Color.RED], "red", Color.RED),
        (Annotated[datetime.date, "the day"], "2025-03-04", DAY),
        (tuple[int, ...], [1, 2], (1, 2)),
        (tuple[int, Color], [1, "red"], (1, Color.RED)),
        (set[str], ["a", "b", "a"], {"a", "b"}),
        (frozenset[Color], ["red"], frozenset({Color.RED})),
        (list[datetime.date], ["2025-03-04"], [DAY]),
        (dict[str, Color], {"x": "red"}, {"x": Color.RED}),
        (dict[datetime.date, int], {"2025-03-04": 1}, {DAY: 1}),
        (datetime.date | None, "2025-03-04", DAY),
        (datetime.date | str, "2025-03-04", DAY),
        (str | datetime.date, "2025-03-04", "2025-03-04"),
        (int | datetime.date, "2025-03-04", DAY),
        (Where, {"city": "Paris"}, Where("Paris")),
        (
            Query,
            {"text": "tides", "where": {"city": "Brest", "since": "2025-03-04"}, "colors": ["red"]},
            Query("tides", Where("Brest", DAY), (Color.RED,)),
        ),
        (Node, {"name": "a", "children": [{"name": "b"}]}, Node("a", [Node("b")])),
        (list[Where], [{"city": "a"}, {"city": "b", "since": None}], [Where("a"), Where("b")]),
        (
            Person,
            {"name": "Ada", "born": "1815-12-10"},
            Person(name="Ada", born=datetime.date(1815, 12, 10)),
        ),
        (Shift, {"day": "2025-03-04", "note": "early"}, {"day": DAY, "note": "early"}),
    ],
    ids=case_id,
)
async def test_an_argument_arrives_as_its_annotated_type(
    hint: Any, given: Any, expected: Any
) -> None:
    made = probe(hint)
    received = await made(given)
    assert received == expected
    assert type(received) is type(expected)
    assert await made(value=given) == expected  # by name too


async def test_a_typed_dict_stays_a_dict_and_its_unknown_keys_stay() -> None:
    received = await probe(Shift)({"day": "2025-03-04", "extra": 1})
    assert received == {"day": DAY, "extra": 1}
    assert type(received) is dict


async def test_a_dataclass_drops_keys_that_are_not_its_fields() -> None:
    # As a tool drops keyword arguments it does not take: a model may send a superset.
    assert await probe(Where)({"city": "Paris", "country": "FR"}) == Where("Paris")


@pytest.mark.parametrize(
    ("hint", "value"),
    [
        (datetime.date, DAY),
        (datetime.date, datetime.datetime(2025, 3, 4, 1, 2)),  # a datetime is a date
        (Query, Query("x", Where("y"))),
        (Person, Person(name="Ada", born=DAY)),
        (tuple[int, ...], (1, 2)),
        (Color, Color.RED),
        (decimal.Decimal, decimal.Decimal("2.5")),
        (pathlib.Path, pathlib.Path("a")),
        (uuid.UUID, ID),
    ],
    ids=repr,
)
async def test_a_value_that_already_has_the_type_passes_unchanged(hint: Any, value: Any) -> None:
    assert await probe(hint)(value) is value


async def test_the_callers_arguments_are_not_changed() -> None:
    made = probe(list[Where])
    given = [{"city": "a"}]
    kwargs = {"value": given}
    assert await made(**kwargs) == [Where("a")]
    assert kwargs == {"value": [{"city": "a"}]}


async def test_optional_parameters_left_out_or_none_stay_as_they_are() -> None:
    @tool
    async def since(day: datetime.date | None = None, color: Color = Color.RED) -> Any:
        return day, color

    assert await since() == (None, Color.RED)
    assert await since(None, "blue") == (None, Color.BLUE)
    assert await since(day="2025-03-04") == (DAY, Color.RED)


async def test_plain_tools_convert_nothing_and_their_check_returns_none() -> None:
    @tool
    async def search(query: str, limit: int = 10, tags: list[str] | None = None) -> str:
        return query

    check = search._validator
    assert check is not None
    assert check(("tides",), {"limit": 3, "tags": ["a"]}) is None  # no work after the check


async def test_a_check_with_conversions_returns_the_converted_call() -> None:
    @tool
    async def when(label: str, /, day: datetime.date, *, color: Color) -> Any:
        return label, day, color

    check = when._validator
    assert check is not None
    assert check(("x", "2025-03-04"), {"color": "red"}) == (("x", DAY), {"color": Color.RED})
    assert await when("x", "2025-03-04", color="red") == ("x", DAY, Color.RED)


async def test_validate_false_passes_arguments_as_given() -> None:
    assert await probe(datetime.date, validate=False)("2025-03-04") == "2025-03-04"


async def test_a_value_that_cannot_be_made_is_an_argument_problem_naming_the_parameter() -> None:
    made = probe(list[Positive])
    with pytest.raises(ToolArgumentsError) as caught:
        await made([{"n": 1}, {"n": 0}])
    [problem] = caught.value.problems
    assert problem.path == "value[1]"
    assert problem.kind == "invalid"
    assert "Positive could not be made: n must be positive" in problem.message


async def test_bad_values_are_reported_as_before_with_the_expected_form() -> None:
    @tool
    async def book(q: Query, since: datetime.date, who: Person, ids: set[uuid.UUID]) -> None:
        raise AssertionError("must not run")

    with pytest.raises(ToolArgumentsError) as caught:
        await book(
            q={"text": "a", "where": {"city": 3}, "colors": ["green"]},
            since="soon",
            who={"name": "Ada", "born": "someday"},
            ids=["not-a-uuid"],
        )
    assert [(p.path, p.kind) for p in caught.value.problems] == [
        ("q.where.city", "invalid"),
        ("q.colors[0]", "invalid"),
        ("since", "invalid"),
        ("who.born", "invalid"),
        ("ids[0]", "invalid"),
    ]
    messages = [p.message for p in caught.value.problems]
    assert messages[1] == "expected one of 'red' | 'blue'; got string 'green'"
    assert messages[2] == "expected date string (ISO 8601); got string 'soon'"
    assert messages[4] == "expected UUID string; got string 'not-a-uuid'"


async def test_a_turn_and_an_agent_run_give_the_tool_typed_arguments() -> None:
    received: list[Any] = []

    @tool
    async def plan(q: Query, day: datetime.date) -> None:
        received.append((q, day))

    arguments = {"q": {"text": "t", "where": {"city": "c"}}, "day": "2025-03-04"}
    await Turn(plan, kwargs=arguments).returning()
    agent = Agent("planner", "plans", [plan])
    await agent.put(Turn(plan, kwargs=arguments))
    async for _ in agent.run():
        pass
    assert received == [(Query("t", Where("c")), DAY)] * 2


async def test_a_models_tool_call_reaches_the_tool_typed_and_a_bad_one_comes_back() -> None:
    received: list[Any] = []

    @tool
    async def plan(q: Query, day: datetime.date, color: Color = Color.RED) -> str:
        received.append((q, day, color))
        return "planned"

    good = {"q": {"text": "t", "where": {"city": "c"}}, "day": "2025-03-04", "color": None}
    bad = {"q": {"text": "t", "where": {"city": "c"}}, "day": "tomorrow"}
    model = ScriptedModel(
        [assistant(tool_call("plan", **bad)), assistant(tool_call("plan", **good)), "done"]
    )
    agent = Agent("planner", "plans", [plan], context=ContextConfig(MemoryContextStore()))

    await ModelLoop(agent, model).run("plan it")

    assert received == [(Query("t", Where("c")), DAY, Color.RED)]  # null: the default applies
    [refused] = model.calls[1].messages[-1].tool_results
    assert refused.is_error
    assert "day: expected date string (ISO 8601); got string 'tomorrow'" in refused.text


async def test_before_invoke_hooks_see_the_converted_values_and_the_turn_keeps_its_own() -> None:
    seen: list[Any] = []

    @tool
    async def log_day(day: datetime.date) -> datetime.date:
        return day

    @log_day.before_invoke
    async def look(day: datetime.date) -> None:
        seen.append(day)

    turn = Turn(log_day, kwargs={"day": "2025-03-04"})
    assert await turn.returning() == DAY
    assert seen == [DAY]
    assert turn.to_dict()["kwargs"] == {"day": "2025-03-04"}


# -- the round trip: a value, its JSON form, the value again -------------------------------


def to_json(value: Any) -> Any:
    """The JSON form a model would send for `value` (what the tool's schema describes)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | decimal.Decimal | pathlib.PurePath):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(x) for x in value]
    if isinstance(value, dict):
        return {str(to_json(k)): to_json(v) for k, v in value.items()}
    return value


ints = st.integers(-(2**63), 2**63 - 1)  # what JSON (orjson) carries
moments = st.datetimes(timezones=st.none() | st.just(datetime.UTC))
decimals = st.decimals(allow_nan=False, allow_infinity=False)
paths = st.lists(st.text("abc._-", min_size=1, max_size=4), max_size=3).map(
    lambda parts: pathlib.Path(*parts)
)
wheres = st.builds(Where, city=st.text(max_size=5), since=st.none() | st.dates())
queries = st.builds(
    Query,
    text=st.text(max_size=5),
    where=wheres,
    colors=st.lists(st.sampled_from(Color), max_size=3).map(tuple),
    limit=ints,
)
people = st.builds(Person, name=st.text(max_size=5), born=st.dates())

ROUND_TRIPS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (datetime.datetime, moments),
    (datetime.date, st.dates()),
    (datetime.time, st.times(timezones=st.none() | st.just(datetime.UTC))),
    (uuid.UUID, st.uuids()),
    (decimal.Decimal, decimals),
    (pathlib.Path, paths),
    (bytes, st.binary(max_size=8)),
    (Color, st.sampled_from(Color)),
    (Level, st.sampled_from(Level)),
    (
        tuple[int, Color, datetime.date],
        st.tuples(ints, st.sampled_from(Color), st.dates()),
    ),
    (tuple[uuid.UUID, ...], st.lists(st.uuids(), max_size=3).map(tuple)),
    (frozenset[datetime.date], st.frozensets(st.dates(), max_size=3)),
    (set[Color], st.sets(st.sampled_from(Color))),
    (dict[str, decimal.Decimal], st.dictionaries(st.text(max_size=3), decimals, max_size=3)),
    (list[Query], st.lists(queries, max_size=3)),
    (Query | None, st.none() | queries),
    (Person, people),
    (list[Person], st.lists(people, max_size=2)),
]


@pytest.mark.parametrize(
    ("hint", "values"), ROUND_TRIPS, ids=[str(hint) for hint, _ in ROUND_TRIPS]
)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_value_survives_its_json_form(hint: Any, values: Any, data: st.DataObject) -> None:
    value = data.draw(values)
    sent = orjson.loads(orjson.dumps(to_json(value)))  # what arrives from a model
    converted, problems = Conversion(hint).apply(sent)
    assert problems == []
    assert converted == value
    assert type(converted) is type(value)


async def test_an_item_a_set_cannot_hold_is_an_argument_problem() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        await probe(frozenset[Any])([{"a": 1}])
    [problem] = caught.value.problems
    assert problem.path == "value"
    assert "an array of hashable items" in problem.message


VALIDATED: list[Any] = []


class Counted(pydantic.BaseModel):
    name: str

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Counted:
        VALIDATED.append(obj)
        return super().model_validate(obj, **options)


async def test_a_pydantic_argument_is_validated_once_per_call() -> None:
    VALIDATED.clear()
    made = probe(Counted)
    assert await made({"name": "a"}) == Counted(name="a")
    assert len(VALIDATED) == 1  # the check's instance is the one the tool receives
    assert Conversion(Counted).apply({"name": "b"}) == (Counted(name="b"), [])
    assert len(VALIDATED) == 2
    with pytest.raises(ToolArgumentsError):
        await made({"name": 1})
