"""`ContextItem`: the typed, immutable unit of context."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any, Generic, TypeVar

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


# No slots=True: before Python 3.14 a slotted frozen dataclass breaks
# `ContextItem[str](...)` (typing sets __orig_class__ through a stale super()).
@dataclass(frozen=True)
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

    Examples:
        >>> from pygents_ctx import ContextItem
        >>> ContextItem(content="Q3 numbers", description="Q3 report", id="doc-1").id
        'doc-1'
    """

    content: T
    description: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.description, _TEXT_OR_NONE) and isinstance(self.id, _TEXT_OR_NONE)):
            raise _text_error(self.description, self.id)

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
    def _all_to_dicts(items: Iterable[ContextItem[Any]]) -> list[dict[str, Any]]:
        """`to_dict()` of each item (a queue or a pool saves thousands)."""
        return [
            item.to_dict()
            if isinstance(item.content, Message) or type(item.content) in CODEC_OF_CLASS
            else {"id": item.id, "description": item.description, "content": item.content}
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
        return cls._from_fields(cls._checked_fields([data], parsed=False))[0]

    @classmethod
    def _from_json_data(cls, data: Any) -> ContextItem[Any]:
        return cls._from_fields(cls._checked_fields([data], parsed=True))[0]

    @staticmethod
    @refuses_deep_nesting("ContextItem")
    def _checked_fields(saved: Iterable[object], parsed: bool) -> list[dict[str, Any]]:
        """The fields of each saved item, checked as `__post_init__` would, in dicts of their own.

        Each dict becomes an item's `__dict__` (`_from_fields`), which skips the frozen
        dataclass's `__init__`, most of the cost of a load: a queue or a pool loads
        thousands. `parsed`: the dicts are fresh from `from_json` (see
        `JsonSerializable._from_json_data`).
        """
        if type(saved) is list and _all_plain(saved):
            # Fresh from JSON, nothing else holds the dicts: the items can keep them.
            return saved if parsed else list(map(dict, saved))
        fields: list[dict[str, Any]] = []
        append = fields.append
        for data in saved:
            if (
                type(data) is dict
                and len(data) == 3
                and "content" in data
                and type(data.get("description", data)) in _TEXT_TYPES
                and type(data.get("id", data)) in _TEXT_TYPES
            ):
                # Exactly the fields (the form `to_dict` writes for content that is not
                # a `Message`), each of the right type. Fresh from JSON, nothing else
                # holds the dict: the item can keep it.
                append(data if parsed else dict(data))
                continue
            if not is_mapping(data) or "content" not in data:
                raise ValueError(f"a saved ContextItem must be a dict with 'content', not {data!r}")
            content, description, id = data["content"], data.get("description"), data.get("id")
            if "content_type" in data:
                content = _saved_content(data["content_type"], content)
            if not (isinstance(description, _TEXT_OR_NONE) and isinstance(id, _TEXT_OR_NONE)):
                raise ValueError(str(_text_error(description, id)))
            append({"content": content, "description": description, "id": id})
        return fields

    @classmethod
    def _from_fields(cls, fields: list[dict[str, Any]]) -> list[ContextItem[Any]]:
        """Items with the checked `fields` (see `_checked_fields`), which become theirs.

        Two passes in C, no bytecode per item: make the bare instances, then
        give each its dict of fields.
        """
        items: list[ContextItem[Any]] = list(map(_new_object, repeat(cls, len(fields))))
        deque(map(_set_attribute, items, repeat("__dict__"), fields), maxlen=0)
        return items


def _all_plain(saved: list[Any]) -> bool:
    """Whether every saved item is exactly the form `to_dict` writes for content that is
    not a `Message`: a dict of `content`, `description` and `id`, the last two str or None.

    One pass in C per condition: a queue or a pool saves thousands of them.
    """
    if not {dict}.issuperset(map(type, saved)) or not {3}.issuperset(map(len, saved)):
        return False
    try:  # three keys, each present: exactly these three
        deque(map(_CONTENT, saved), maxlen=0)
        descriptions = set(map(type, map(_DESCRIPTION, saved)))
        ids = set(map(type, map(_ID, saved)))
    except KeyError:
        return False
    return descriptions <= _TEXT_TYPES and ids <= _TEXT_TYPES


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
