"""`tool.metadata.input_schema` / `output_schema`, derived from type hints."""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import pathlib
import typing
import uuid
from typing import Annotated, Any, Literal, NotRequired, Optional, Required, TypedDict, Union

import pytest

from pygents_ctx import ContextPool, ContextQueue, Tool, tool


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


class Book(TypedDict):
    title: str
    year: int


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Show(TypedDict, total=False):
    title: Required[str]
    year: int


class Partial(TypedDict, total=False):
    note: str


class Model:
    """Stands in for a pydantic model: it describes itself."""

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return {"type": "object", "title": "Model", "x-from": "model_json_schema"}


POINT_SCHEMA = {
    "type": "object",
    "title": "Point",
    "properties": {
        "x": {"type": "integer"},
        "y": {"type": "integer", "default": 0},
        # A default factory is not called to describe the field: it might do anything.
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["x"],
}


def probe_tool(hint: Any, *, returns: Any = None, generator: bool = False) -> Tool[..., Any]:
    """A tool `probe(value: hint) -> returns`, with the hints set as real objects."""
    if generator:

        async def probe(value):  # type: ignore[no-untyped-def]
            yield value
    else:

        async def probe(value):  # type: ignore[no-untyped-def]
            return value

    probe.__annotations__ = {"value": hint, "return": hint if returns is None else returns}
    return tool(probe)


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (collections.abc.Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (frozenset[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (decimal.Decimal, {"type": "string", "pattern": r"^-?\d+(\.\d+)?$"}),
        (pathlib.Path, {"type": "string", "format": "path"}),
        (datetime.date, {"type": "string", "format": "date"}),
        (Literal["asc", "desc"], {"type": "string", "enum": ["asc", "desc"]}),
        (Literal[1, 2, 3], {"type": "integer", "enum": [1, 2, 3]}),
        (Literal[1, "a", None], {"enum": [1, "a", None]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Point, POINT_SCHEMA),
        (
            Book,
            {
                "type": "object",
                "title": "Book",
                "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
                "required": ["title", "year"],
            },
        ),
        (
            Partial,
            {"type": "object", "title": "Partial", "properties": {"note": {"type": "string"}}},
        ),
        (Model, {"type": "object", "title": "Model", "x-from": "model_json_schema"}),
        (Annotated[int, "a count"], {"type": "integer", "description": "a count"}),
        (Any, {}),
        (list[Point], {"type": "array", "items": POINT_SCHEMA}),
        (
            dict[str, list[Color] | None],
            {
                "type": "object",
                "additionalProperties": {
                    "anyOf": [
                        {"type": "array", "items": {"type": "string", "enum": ["red", "green"]}},
                        {"type": "null"},
                    ]
                },
            },
        ),
    ],
    ids=lambda v: None if isinstance(v, dict) else getattr(v, "__name__", repr(v)),
)
def test_type_hint_schema(hint: Any, expected: dict[str, Any]) -> None:
    probe = probe_tool(hint)
    assert probe.metadata.input_schema == {
        "type": "object",
        "properties": {"value": expected},
        "required": ["value"],
    }
    assert probe.metadata.output_schema == expected


@pytest.mark.parametrize(
    ("hint", "parameter", "returned"),
    [
        (
            Optional[int],  # noqa: UP045
            {"type": "integer"},
            {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        ),
        (int | None, {"type": "integer"}, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (
            Union[str, float, None],  # noqa: UP007
            {"anyOf": [{"type": "string"}, {"type": "number"}]},
            {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]},
        ),
        (type(None), {"type": "null"}, None),
    ],
    ids=["Optional[int]", "int | None", "str | float | None", "None"],
)
def test_a_parameters_none_alternative_is_left_out_as_pygents_writes_it(
    hint: Any, parameter: dict[str, Any], returned: dict[str, Any] | None
) -> None:
    # A caller passes None by leaving the parameter out; a return value can be null.
    probe = probe_tool(hint)
    assert probe.metadata.input_schema["properties"]["value"] == parameter
    assert probe.metadata.output_schema == returned


@pytest.mark.parametrize("typed_dict", [Movie, Show])
def test_typed_dict_not_required_keys_are_not_required(typed_dict: type) -> None:
    probe = probe_tool(typed_dict)
    assert probe.metadata.output_schema == {
        "type": "object",
        "title": typed_dict.__name__,
        "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["title"],
    }


@pytest.mark.parametrize(
    ("returns", "expected"),
    [
        (collections.abc.AsyncIterator[int], {"type": "integer"}),
        (typing.AsyncIterator[str], {"type": "string"}),
        (collections.abc.AsyncGenerator[Point, None], POINT_SCHEMA),
        (typing.AsyncGenerator[list[bool], None], {"type": "array", "items": {"type": "boolean"}}),
        (collections.abc.AsyncIterator[Any], {}),
    ],
    ids=[
        "AsyncIterator[int]",
        "typing.AsyncIterator[str]",
        "AsyncGenerator[Point]",
        "typing.AsyncGenerator[list[bool]]",
        "AsyncIterator[Any]",
    ],
)
def test_generator_output_schema_is_the_yielded_item_schema(
    returns: Any, expected: dict[str, Any]
) -> None:
    probe = probe_tool(int, returns=returns, generator=True)
    assert probe.metadata.output_schema == expected


def test_string_annotations_are_resolved() -> None:
    @tool
    async def search(query: str, limit: int | None = None) -> list[Point]:
        return []

    assert search.metadata.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
        },
        "required": ["query"],
    }
    assert search.metadata.output_schema == {"type": "array", "items": POINT_SCHEMA}


def test_missing_hints_describe_anything() -> None:
    @tool
    async def loose(a, b=2):  # type: ignore[no-untyped-def]
        return a

    assert loose.metadata.input_schema == {
        "type": "object",
        "properties": {"a": {}, "b": {"default": 2}},
        "required": ["a"],
    }
    assert loose.metadata.output_schema is None


def test_generator_without_return_hint_has_no_output_schema() -> None:
    @tool
    async def stream(n: int):  # type: ignore[no-untyped-def]
        yield n

    assert stream.metadata.output_schema is None


def test_none_return_has_no_output_schema() -> None:
    @tool
    async def fire_and_forget(x: int) -> None:
        pass

    assert fire_and_forget.metadata.output_schema is None


_SENTINEL = object()


@pytest.mark.parametrize(
    ("default", "written"),
    [
        (3, 3),
        (0, 0),
        ("x", "x"),
        (False, False),
        (None, _SENTINEL),  # says only "may be left out", which `required` says
        (1.5, 1.5),
        ((1, 2), [1, 2]),
        ({"a": [Color.RED]}, {"a": ["red"]}),
        (Level.HIGH, 2),
        (_SENTINEL, _SENTINEL),
        (float("nan"), _SENTINEL),
        ({1: "a"}, _SENTINEL),
        ([_SENTINEL], _SENTINEL),
    ],
    ids=[
        "int",
        "zero",
        "str",
        "false",
        "none",
        "float",
        "tuple",
        "dict-of-enums",
        "int-enum",
        "object",
        "nan",
        "int-keys",
        "list-of-objects",
    ],
)
def test_defaults_make_a_parameter_optional_and_are_written_when_json_holds_them(
    default: Any, written: Any
) -> None:
    async def probe(value: int, option: int = default) -> int:
        return value

    made = tool(probe)
    option: dict[str, Any] = {"type": "integer"}
    if written is not _SENTINEL:
        option["default"] = written
    assert made.metadata.input_schema == {
        "type": "object",
        "properties": {"value": {"type": "integer"}, "option": option},
        "required": ["value"],
    }


def test_no_required_key_when_nothing_is_required() -> None:
    @tool
    async def optional_only(a: int = 1, *, b: str = "x") -> None:
        pass

    assert optional_only.metadata.input_schema == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": 1},
            "b": {"type": "string", "default": "x"},
        },
    }


def test_required_follows_parameter_order_including_keyword_only() -> None:
    @tool
    async def ordered(z: int, a: int = 0, *, m: str, b: str = "") -> None:
        pass

    assert ordered.metadata.input_schema["required"] == ["z", "m"]
    assert list(ordered.metadata.input_schema["properties"]) == ["z", "a", "m", "b"]


def test_fixed_kwargs_context_parameters_and_var_arguments_are_left_out() -> None:
    @tool(api_key=lambda: "secret", region="eu")
    async def fetch(
        url: str,
        queue: ContextQueue[Any],
        pool: ContextPool[Any] | None,
        api_key: str,
        *extra: int,
        region: str = "us",
        history: Optional[ContextQueue[str]] = None,  # noqa: UP045
        **options: Any,
    ) -> str:
        return url

    assert fetch.metadata.input_schema == {
        "type": "object",
        "properties": {"url": {"type": "string"}},
        "required": ["url"],
    }


def test_metadata_dict_carries_the_schemas() -> None:
    @tool
    async def add(a: int, b: int = 1) -> int:
        return a + b

    data = add.metadata.dict()
    assert data["input_schema"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 1}},
        "required": ["a"],
    }
    assert data["output_schema"] == {"type": "integer"}
