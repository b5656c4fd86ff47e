"""ContextItem: a frozen, generic value with a fixed saved shape."""

from __future__ import annotations

import copy
import dataclasses
import enum
import math
import pickle
import uuid
from dataclasses import FrozenInstanceError
from typing import Any

import orjson
import pytest

from pygents_ctx import ContextItem, ContextQueue, Message
from pygents_ctx.context import ContextItem as ContextItemFromContext


def test_context_item_is_importable_from_the_context_package() -> None:
    assert ContextItemFromContext is ContextItem


def test_only_content_is_required_and_the_rest_defaults_to_none() -> None:
    item = ContextItem(content={"text": "hi"})

    assert item.content == {"text": "hi"}
    assert item.description is None
    assert item.id is None


def test_content_is_required() -> None:
    with pytest.raises(TypeError):
        ContextItem()  # type: ignore[call-arg]


def test_fields_are_content_description_id_in_that_order() -> None:
    item = ContextItem("payload", "a summary", "doc-1")

    assert (item.content, item.description, item.id) == ("payload", "a summary", "doc-1")
    assert [f.name for f in dataclasses.fields(ContextItem)] == ["content", "description", "id"]


@pytest.mark.parametrize("field", ["content", "description", "id"])
def test_fields_cannot_be_reassigned(field: str) -> None:
    item = ContextItem(content="a", description="b", id="c")

    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(item, field, "changed")

    assert item == ContextItem(content="a", description="b", id="c")


def test_new_attributes_cannot_be_set() -> None:
    item = ContextItem(content="a")

    with pytest.raises(AttributeError):
        item.extra = 1  # type: ignore[attr-defined]


def test_items_with_equal_fields_are_equal_and_hash_alike() -> None:
    first = ContextItem(content="x", description="d", id="i")
    second = ContextItem(content="x", description="d", id="i")

    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


@pytest.mark.parametrize(
    "other",
    [
        ContextItem(content="y", description="d", id="i"),
        ContextItem(content="x", description="other", id="i"),
        ContextItem(content="x", description="d", id="other"),
        ContextItem(content="x", description="d"),
    ],
)
def test_items_differing_in_any_field_are_not_equal(other: ContextItem[str]) -> None:
    assert ContextItem(content="x", description="d", id="i") != other


def test_parametrized_item_constructs_at_runtime() -> None:
    item = ContextItem[str](content="hello", id="greeting", description="a greeting")

    assert item == ContextItem(content="hello", id="greeting", description="a greeting")


@pytest.mark.parametrize("field", ["id", "description"])
@pytest.mark.parametrize("value", [1, b"bytes", ["a"]])
def test_non_string_id_or_description_is_a_type_error(field: str, value: object) -> None:
    with pytest.raises(TypeError, match=field):
        ContextItem(content="x", **{field: value})


def test_to_dict_has_id_description_content_in_that_order() -> None:
    item = ContextItem(content=[1, 2], description="two numbers", id="n")

    saved = item.to_dict()

    assert saved == {"id": "n", "description": "two numbers", "content": [1, 2]}
    assert list(saved) == ["id", "description", "content"]


def test_to_dict_of_a_bare_item_keeps_the_none_fields() -> None:
    assert ContextItem(content="c").to_dict() == {"id": None, "description": None, "content": "c"}


@pytest.mark.parametrize(
    "item",
    [
        ContextItem(content="c"),
        ContextItem(content={"a": [1, None]}, description="d"),
        ContextItem(content=None, description="d", id="i"),
    ],
)
def test_from_dict_rebuilds_what_to_dict_saved(item: ContextItem[Any]) -> None:
    assert ContextItem.from_dict(item.to_dict()) == item


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"content": 5}, ContextItem(content=5)),
        ({"content": 5, "id": "i"}, ContextItem(content=5, id="i")),
        ({"content": 5, "description": "d"}, ContextItem(content=5, description="d")),
    ],
)
def test_from_dict_accepts_missing_optional_keys(
    data: dict[str, Any], expected: ContextItem[Any]
) -> None:
    assert ContextItem.from_dict(data) == expected


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"id": "i", "description": "d"},
        {"id": "i", "description": "d", "contents": 1},  # three keys, but not the three
        ["content"],
        "content",
        None,
    ],
)
def test_from_dict_without_content_is_a_value_error(data: Any) -> None:
    with pytest.raises(ValueError, match="content"):
        ContextItem.from_dict(data)


@pytest.mark.parametrize(
    "data",
    [
        {"content": 1, "id": 7},
        {"content": 1, "description": ["d"]},
        {"content": 1, "id": "i", "description": 3.5},
    ],
)
def test_from_dict_with_wrong_field_types_is_a_value_error(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"id|description"):
        ContextItem.from_dict(data)


def test_an_item_loaded_from_a_dict_keeps_no_link_to_it() -> None:
    data: dict[str, Any] = {"id": "i", "description": "d", "content": "c"}
    item = ContextItem.from_dict(data)

    data["id"] = "changed"
    data["content"] = "changed"

    assert item == ContextItem(content="c", description="d", id="i")


def test_item_round_trips_through_json() -> None:
    item = ContextItem(content={"text": "q3", "n": [1, 2.5]}, description="d", id="x")

    assert item.to_json() == b'{"id":"x","description":"d","content":{"text":"q3","n":[1,2.5]}}'
    assert ContextItem.from_json(item.to_json()) == item
    assert ContextItem.from_json(item.to_json().decode()) == item


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    "content",
    [Colour.RED, uuid.UUID(int=1), math.nan, math.inf, {"deep": [1, -math.inf]}],
    ids=["enum", "uuid", "nan", "infinity", "nested-infinity"],
)
def test_to_json_refuses_what_json_would_change_even_in_an_item_with_no_null(
    content: Any,
) -> None:
    # Every field set: the JSON holds no null, so nothing looks like a NaN written as null.
    item = ContextItem(content=content, description="d", id="i")

    with pytest.raises(TypeError, match=r"ContextItem\.content"):
        item.to_json()


async def test_items_loaded_from_json_are_the_same_frozen_values() -> None:
    built = [
        ContextItem(content={"text": "plain"}, description="d", id="i"),
        ContextItem(content="no id"),
        ContextItem(content=Message("user", "hi"), description="a message", id="m"),
    ]
    queue: ContextQueue[Any] = ContextQueue(limit=3)
    await queue.append(*built)

    loaded = ContextQueue.from_json(queue.to_json()).items

    assert loaded == built
    assert hash(loaded[1]) == hash(built[1])  # the one whose content is hashable
    for item, twin in zip(loaded, built, strict=True):
        # Slotted, loaded or built: the three fields and nothing else.
        assert not hasattr(item, "__dict__")
        assert not hasattr(twin, "__dict__")
        with pytest.raises(FrozenInstanceError):
            item.id = "changed"  # type: ignore[misc]
        assert dataclasses.replace(item, id="x") == dataclasses.replace(twin, id="x")


@pytest.mark.parametrize(
    ("saved", "field"),
    [
        ({"id": 7, "description": "d", "content": 1}, "id"),
        ({"id": "i", "description": ["d"], "content": 1}, "description"),
        ({"id": "i", "description": "d"}, "content"),
        ({"id": "i", "description": "d", "content": 1, "content_type": "poem"}, "content_type"),
    ],
)
@pytest.mark.parametrize("owner", [ContextItem, ContextQueue], ids=["item", "queue"])
def test_from_json_checks_the_saved_fields_as_from_dict_does(
    saved: Any, field: str, owner: Any
) -> None:
    data = saved if owner is ContextItem else {"limit": 2, "items": [saved]}

    with pytest.raises(ValueError, match=field) as from_dict:
        owner.from_dict(data)
    with pytest.raises(ValueError, match=field) as from_json:
        owner.from_json(orjson.dumps(data))
    assert str(from_json.value) == str(from_dict.value)


@dataclasses.dataclass(frozen=True)
class _Note(ContextItem[str]):
    """A user's dataclass subclass: its generated `__init__` still checks the base fields."""

    colour: str = "red"


def test_a_dataclass_subclass_checks_its_fields_and_copies_them_all() -> None:
    note = _Note("text", "d", "i", colour="blue")

    for twin in (copy.copy(note), copy.deepcopy(note), pickle.loads(pickle.dumps(note))):
        assert twin == note
        assert twin.colour == "blue"
    with pytest.raises(TypeError, match="description must be a string or None"):
        _Note("text", 7)  # type: ignore[arg-type]
