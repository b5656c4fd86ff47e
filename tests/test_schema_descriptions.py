"""What a tool definition tells a model: descriptions from docstrings and `Annotated`, defaults,
nested types and their definitions."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, TypedDict

import pydantic
import pytest
from typing_extensions import Doc

from pygents_ctx import to_anthropic_tools, to_openai_tools, tool
from pygents_ctx.tools._docstrings import Docstring, parse_docstring

GOOGLE = """Book a room.

    Checks availability first; nothing is charged.

    Args:
        city (str): Where to stay,
            as the hotel lists it.
        nights: How many nights.
        *extras: Ignored.
        **options: Passed on.

    Returns:
        str: The booking reference.

    Raises:
        ValueError: The city is unknown.

    Examples:
        >>> book("Lyon", 2)
    """

NUMPY = """Book a room.

Checks availability first; nothing is charged.

Parameters
----------
city : str
    Where to stay,
    as the hotel lists it.
nights, rooms : int, optional
    How many.

Returns
-------
str
    The booking reference.

Notes
-----
Rooms are never overbooked.
"""

REST = """Book a room.

Checks availability first; nothing is charged.

:param city: Where to stay,
    as the hotel lists it.
:type city: str
:param int nights: How many nights.
:returns: The booking reference.
:rtype: str
:raises ValueError: The city is unknown.
"""


@pytest.mark.parametrize(
    ("doc", "parameters"),
    [
        (
            GOOGLE,
            {
                "city": "Where to stay, as the hotel lists it.",
                "nights": "How many nights.",
                "extras": "Ignored.",
                "options": "Passed on.",
            },
        ),
        (
            NUMPY,
            {
                "city": "Where to stay, as the hotel lists it.",
                "nights": "How many.",
                "rooms": "How many.",
            },
        ),
        (
            REST,
            {"city": "Where to stay, as the hotel lists it.", "nights": "How many nights."},
        ),
    ],
    ids=["google", "numpy", "rest"],
)
def test_each_docstring_style_is_read(doc: str, parameters: dict[str, str]) -> None:
    assert parse_docstring(doc) == Docstring(
        description="Book a room.\n\nChecks availability first; nothing is charged.",
        parameters=parameters,
        returns="The booking reference.",
    )


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (None, Docstring()),
        ("   ", Docstring()),
        ("One line.", Docstring("One line.")),
        ("Args:\n    x: Only arguments.", Docstring(None, {"x": "Only arguments."})),
        # A line that looks like a heading but is not a known section stays text.
        ("Summary.\n\nPlan:\n    step one", Docstring("Summary.\n\nPlan:\n    step one")),
        (
            "Summary.\n\nYields:\n    int: Each number.",
            Docstring("Summary.", returns="Each number."),
        ),
        (
            "Summary.\n\nReturns:\n    True when it worked.",
            Docstring("Summary.", returns="True when it worked."),
        ),
        # Styles are not mixed: a reST field after a Google section is not read.
        ("Args:\n    x: Google.\n:param y: reST.", Docstring(None, {"x": "Google."})),
    ],
    ids=[
        "none",
        "blank",
        "one-line",
        "only-args",
        "not-a-section",
        "yields",
        "returns-text",
        "mixed-styles",
    ],
)
def test_docstring_edge_cases(doc: str | None, expected: Docstring) -> None:
    assert parse_docstring(doc) == expected


def test_a_tools_description_and_schema_come_from_its_docstring() -> None:
    @tool
    async def book(city: str, nights: int = 1) -> str:
        """Book a room.

        Checks availability first; nothing is charged.

        Args:
            city: Where to stay.
            nights: How many nights.

        Returns:
            The booking reference.
        """
        return "ref"

    metadata = book.metadata
    assert metadata.description == "Book a room.\n\nChecks availability first; nothing is charged."
    assert metadata.input_schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Where to stay."},
            "nights": {"type": "integer", "description": "How many nights.", "default": 1},
        },
        "required": ["city"],
    }
    assert metadata.output_schema == {"type": "string", "description": "The booking reference."}
    assert book.doc_tree()["description"] == metadata.description


class Labelled:
    """Stands in for any metadata object with a `description` (pydantic's FieldInfo is one)."""

    description = "from an object"


def test_annotated_metadata_describes_a_parameter_and_wins_over_the_docstring() -> None:
    @tool
    async def pick(
        a: Annotated[int, "from a string"],
        b: Annotated[int, Labelled()],
        c: Annotated[int, pydantic.Field(description="from pydantic's Field")],
        d: Annotated[int, Doc("from typing_extensions.Doc")],
        e: Annotated[int, "first", "the last one wins"],
        f: Annotated[int | None, "optional, described"] = None,
    ) -> None:
        """Pick.

        Args:
            a: From the docstring, overruled.
        """

    properties = pick.metadata.input_schema["properties"]
    assert {name: p["description"] for name, p in properties.items()} == {
        "a": "from a string",
        "b": "from an object",
        "c": "from pydantic's Field",
        "d": "from typing_extensions.Doc",
        "e": "the last one wins",
        "f": "optional, described",
    }
    assert properties["f"] == {
        "type": "integer",
        "description": "optional, described",
    }


@dataclasses.dataclass
class Stay:
    """A hotel stay.

    Attributes:
        city: Where.
        nights: How long.
    """

    city: str
    nights: Annotated[int, "Nights, at least one."] = 1
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Plain:
    x: int


class Trip(TypedDict):
    """A trip."""

    origin: Annotated[str, "Where from."]
    stays: list[Stay]


def test_nested_types_carry_their_own_descriptions_and_defaults() -> None:
    @tool
    async def plan(trip: Trip, plain: Plain) -> None:
        pass

    properties = plan.metadata.input_schema["properties"]
    assert properties["trip"] == {
        "type": "object",
        "title": "Trip",
        "description": "A trip.",
        "properties": {
            "origin": {"type": "string", "description": "Where from."},
            "stays": {
                "type": "array",
                "items": {
                    "type": "object",
                    "title": "Stay",
                    "description": "A hotel stay.",
                    "properties": {
                        "city": {"type": "string", "description": "Where."},
                        "nights": {
                            "type": "integer",
                            "description": "Nights, at least one.",
                            "default": 1,
                        },
                        "notes": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["city"],
                },
            },
        },
        "required": ["origin", "stays"],
    }
    # The docstring dataclasses write for a class without one is not a description.
    assert "description" not in properties["plain"]


class Room(pydantic.BaseModel):
    beds: int = pydantic.Field(description="How many beds.")


class Booking(pydantic.BaseModel):
    room: Room
    guests: list[str]


def test_a_pydantic_models_definitions_move_to_the_root_where_its_refs_point() -> None:
    @tool
    async def reserve(booking: Booking, fallback: Room | None = None) -> None:
        pass

    schema = reserve.metadata.input_schema
    assert schema["properties"]["booking"]["properties"]["room"] == {"$ref": "#/$defs/Room"}
    assert schema["$defs"]["Room"]["properties"]["beds"]["description"] == "How many beds."
    assert "$defs" not in schema["properties"]["booking"]
    assert schema["properties"]["fallback"]["title"] == "Room"

    [strict] = to_openai_tools([reserve], strict=True)
    room = strict["function"]["parameters"]["$defs"]["Room"]
    assert (room["additionalProperties"], room["required"]) == (False, ["beds"])


@dataclasses.dataclass
class Folder:
    name: str
    children: list[Folder] = dataclasses.field(default_factory=list)
    parent: Folder | None = None


def test_a_type_that_refers_to_itself_is_defined_once_at_the_root() -> None:
    @tool
    async def walk(root: Folder, other: Folder) -> Folder:
        return root

    schema = walk.metadata.input_schema
    assert schema["properties"]["root"] == {"$ref": "#/$defs/Folder"}
    assert schema["properties"]["other"] == {"$ref": "#/$defs/Folder"}
    folder = schema["$defs"]["Folder"]
    assert folder["properties"]["children"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Folder"},
    }
    assert folder["properties"]["parent"]["anyOf"][0] == {"$ref": "#/$defs/Folder"}
    assert walk.metadata.output_schema == {
        "$ref": "#/$defs/Folder",
        "$defs": {"Folder": folder},
    }


def test_definitions_for_the_apis_carry_descriptions_and_defaults() -> None:
    @tool
    async def forecast(city: str, days: Annotated[int, "Days ahead."] = 3) -> str:
        """The forecast.

        Args:
            city: The city.
        """
        return "sunny"

    [openai] = to_openai_tools([forecast])
    assert openai["function"]["description"] == "The forecast."
    assert openai["function"]["parameters"]["properties"]["days"] == {
        "type": "integer",
        "description": "Days ahead.",
        "default": 3,
    }
    [strict] = to_anthropic_tools([forecast], strict=True)
    assert strict["input_schema"]["properties"]["days"] == {
        "type": "integer",
        "description": "Days ahead. Default: 3.",
    }


def test_schema_for_describes_a_single_hint() -> None:
    from pygents_ctx.tools._schema import schema_for

    assert schema_for(Annotated[list[int], "ids"]) == {
        "type": "array",
        "items": {"type": "integer"},
        "description": "ids",
    }
    assert schema_for(Any) == {}
