"""`ContextItem`: the typed, immutable unit of context."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, fields
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, Generic, NamedTuple, TypeVar

from pygents_ctx._json import JsonSerializable, is_mapping, refuses_deep_nesting
from pygents_ctx.context.messages import Message
from pygents_ctx.context.messages import from_dict as message_from_dict
from pygents_ctx.context.messages import to_dict as message_to_dict

__all__ = ["ContextItem"]

T = TypeVar("T")

_TEXT_OR_NONE = (str, type(None))
_TEXT_TYPES = frozenset(_TEXT_OR_NONE)  # `type(x) in` it: faster than isinstance, no subclasses


def _text_error(description: object, id: object) -> TypeError:
    """The error for a `description` or `id` (the first that is wrong) not a str or None."""
    if isinstance(description, _TEXT_OR_NONE):
        field, value = "id", id
    else:
        field, value = "description", description
    return TypeError(f"ContextItem {field} must be a string or None, not {value!r}")


_new_object = object.__new__
_set_attribute = object.__setattr__
_CONTENT = itemgetter("content")
_DESCRIPTION, _ID = itemgetter("description"), itemgetter("id")


# Slotted by hand: `slots=True` would remake the class, and before Python 3.14 that
# breaks `ContextItem[str](...)` (typing sets __orig_class__ through a stale super()).
# Slots keep an item at a quarter of the memory of one with a `__dict__`, make
# reading a field quicker, and let a queue or a pool set thousands of loaded items'
# fields through the slots' own setters, one pass in C per field (`_from_fields`).
# init=False: the slots leave no room for class-level defaults; `__init__` has them.
@dataclass(frozen=True, init=False)
class ContextItem(JsonSerializable, Generic[T]):
    """One piece of context: a payload, with an optional description and id.

    An item with an `id` belongs in a `ContextPool` (keyed lookup); one without
    goes into a `ContextQueue`. A tool that returns an item has the agent route
    it by that rule.

    Args:
        content: The full payload.
        description: A compact summary that selection logic reads instead of
            the content.
        id: The key when stored in a pool.

    Raises:
        TypeError: `description` or `id` is not a string or None.

    Examples:
        >>> from pygents_ctx import ContextItem
        >>> ContextItem(content="Q3 numbers", description="Q3 report", id="doc-1").id
        'doc-1'
    """

    __slots__ = ("__weakref__", "content", "description", "id")

    content: T
    description: str | None
    id: str | None

    def __init__(self, content: T, description: str | None = None, id: str | None = None) -> None:
        if not (isinstance(description, _TEXT_OR_NONE) and isinstance(id, _TEXT_OR_NONE)):
            raise _text_error(description, id)
        _set_content(self, content)
        _set_description(self, description)
        _set_id(self, id)

    def __post_init__(self) -> None:
        # The check for a dataclass subclass, whose generated `__init__` calls this.
        if not (isinstance(self.description, _TEXT_OR_NONE) and isinstance(self.id, _TEXT_OR_NONE)):
            raise _text_error(self.description, self.id)

    # What copy and pickle go through (the frozen `__setattr__` refuses their default):
    # the fields' values, a dataclass subclass's too, as `dataclass(slots=True)` writes.
    def __getstate__(self) -> list[Any]:
        return [getattr(self, field.name) for field in fields(self)]

    def __setstate__(self, state: list[Any]) -> None:
        for field, value in zip(fields(self), state, strict=True):
            _set_attribute(self, field.name, value)

    def to_dict(self) -> dict[str, Any]:
        """`{"id", "description", "content"}`, plus `"content_type"` for a `Message` or a
        registered content type.

        A `Message` is saved in its dict form (`pygents_ctx.context.messages.to_dict`)
        with `"content_type": "message"`; an instance of a class registered with
        `@content_type` in its JSON form, with the name it was registered under.
        """
        content = self.content
        if isinstance(content, Message):
            return {
                "id": self.id,
                "description": self.description,
                "content": message_to_dict(content),
                "content_type": "message",
            }
        codec = CODEC_OF_CLASS.get(type(content))
        if codec is not None:
            return {
                "id": self.id,
                "description": self.description,
                "content": codec.dump(content),
                "content_type": codec.name,
            }
        return {"id": self.id, "description": self.description, "content": content}

    @staticmethod
    def _all_to_dicts(items: Collection[ContextItem[Any]]) -> list[dict[str, Any]]:
        """`to_dict()` of each item (a queue or a pool saves thousands).

        Whether any content needs more than its fields (a `Message`, a registered
        content type) is asked once per type of content, not once per item.
        """
        kinds = set(map(type, map(_content_of, items)))
        if any(issubclass(kind, Message) or kind in CODEC_OF_CLASS for kind in kinds):
            return [item.to_dict() for item in items]
        return [
            {"id": item.id, "description": item.description, "content": item.content}
            for item in items
        ]

    @classmethod
    def _user_values(cls, data: dict[str, Any]) -> list[Any]:
        return cls._user_values_of([data])

    @staticmethod
    def _user_values_of(saved_items: Iterable[dict[str, Any]]) -> list[Any]:
        """`_user_values` of many saved items: their contents."""
        return list(map(_CONTENT, saved_items))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextItem[Any]:
        """Rebuild an item saved by `to_dict()`; `id` and `description` may be missing.

        Raises:
            ValueError: `data` is not a dict with a `content` key, or a field has the wrong type.
        """
        return cls._from_fields(cls._checked_fields([data]))[0]

    @staticmethod
    @refuses_deep_nesting("ContextItem")
    def _checked_fields(saved: list[Any]) -> ItemFields:
        """The fields of the saved items, checked as `__init__` checks them, field by field.

        When every item is in the form `to_dict` writes for content that is not a
        `Message` (most are), each field is read and checked in one pass in C
        across the items: a queue or a pool loads thousands. Otherwise item by
        item, each content made again from its `content_type`.

        Raises:
            ValueError: An item is not a dict with `content`, or a field has the wrong type.
        """
        if {dict}.issuperset(map(type, saved)) and {3}.issuperset(map(len, saved)):
            try:  # three keys, each present: exactly these three
                contents = list(map(_CONTENT, saved))
                descriptions = list(map(_DESCRIPTION, saved))
                ids = list(map(_ID, saved))
            except KeyError:
                pass
            else:
                if (
                    set(map(type, descriptions)) <= _TEXT_TYPES
                    and set(map(type, ids)) <= _TEXT_TYPES
                ):
                    return ItemFields(contents, descriptions, ids)
        checked = ItemFields([], [], [])
        for data in saved:
            if not is_mapping(data) or "content" not in data:
                raise ValueError(f"a saved ContextItem must be a dict with 'content', not {data!r}")
            content, description, id = data["content"], data.get("description"), data.get("id")
            if "content_type" in data:
                content = _saved_content(data["content_type"], content)
            if not (isinstance(description, _TEXT_OR_NONE) and isinstance(id, _TEXT_OR_NONE)):
                raise ValueError(str(_text_error(description, id)))
            checked.contents.append(content)
            checked.descriptions.append(description)
            checked.ids.append(id)
        return checked

    @classmethod
    def _from_fields(cls, checked: ItemFields) -> list[ContextItem[Any]]:
        """Items with the `checked` fields (see `_checked_fields`), without `__init__`.

        One pass in C per field, no bytecode per item: make the bare instances,
        then set each field through its slot's own setter.
        """
        items: list[ContextItem[Any]] = list(map(_new_object, repeat(cls, len(checked.ids))))
        deque(map(_set_content, items, checked.contents), maxlen=0)
        deque(map(_set_description, items, checked.descriptions), maxlen=0)
        deque(map(_set_id, items, checked.ids), maxlen=0)
        return items


class ItemFields(NamedTuple):
    """The checked fields of saved items, one list per field, in the items' order."""

    contents: list[Any]
    descriptions: list[str | None]
    ids: list[str | None]


# The defaults `__init__` gives, on the fields too (slots leave no room for class-level
# ones): `fields()` shows them, and a dataclass subclass's generated `__init__` has them.
for _optional in fields(ContextItem)[1:]:
    _optional.default = None

# The slots' own setters (the frozen dataclass's `__setattr__` refuses): `__init__` and
# `_from_fields` set the fields through them.
_set_content, _set_description, _set_id = (
    ContextItem.__dict__[name].__set__ for name in ("content", "description", "id")
)
_content_of = attrgetter("content")


@dataclass(frozen=True, slots=True)
class ContentCodec:
    """How items of a registered content type are saved and made again (`content_type`)."""

    name: str
    cls: type
    dump: Callable[[Any], Any]  # the content -> its JSON form
    load: Callable[[Any], Any]  # the JSON form -> the content


# Content types registered with `pygents_ctx.content_type`, by saved name and by class.
CONTENT_CODECS: dict[str, ContentCodec] = {}
CODEC_OF_CLASS: dict[type, ContentCodec] = {}


def _saved_content(content_type: object, content: Any) -> Any:
    """The content of a saved item that names its `content_type`."""
    if content_type == "message":
        return message_from_dict(content)
    if content_type is None:
        return content
    codec = CONTENT_CODECS.get(content_type) if isinstance(content_type, str) else None
    if codec is None:
        known = ", ".join(repr(name) for name in ("message", *sorted(CONTENT_CODECS)))
        raise ValueError(
            f"saved ContextItem content_type {content_type!r} is unknown (known: {known}); "
            "register the class with @content_type before loading, as tools are registered"
        )
    return codec.load(content)
