"""`ContextItem`: the typed, immutable unit of context."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from operator import itemgetter
from typing import Any, Generic, TypeVar

from pygents_ctx._json import JsonSerializable, is_mapping, refuses_deep_nesting
from pygents_ctx.context.messages import Message
from pygents_ctx.context.messages import from_dict as message_from_dict
from pygents_ctx.context.messages import to_dict as message_to_dict

__all__ = ["ContextItem"]

T = TypeVar("T")

_TEXT_OR_NONE = (str, type(None))


def _text_error(description: object, id: object) -> TypeError:
    """The error for a `description` or `id` (the first that is wrong) not a str or None."""
    if isinstance(description, _TEXT_OR_NONE):
        field, value = "id", id
    else:
        field, value = "description", description
    return TypeError(f"ContextItem {field} must be a string or None, not {value!r}")


_set_attribute = object.__setattr__  # what a frozen dataclass sets its fields with
_CONTENT = itemgetter("content")


# Slotted by hand: `slots=True` would remake the class, and before Python 3.14 that
# breaks `ContextItem[str](...)` (typing sets __orig_class__ through a stale super()).
# Slots keep an item at a quarter of the memory of one with a `__dict__`.
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
        _set_attribute(self, "content", content)
        _set_attribute(self, "description", description)
        _set_attribute(self, "id", id)

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

    @classmethod
    def _user_values(cls, data: dict[str, Any]) -> list[Any]:
        return cls._user_values_of([data])

    @staticmethod
    def _user_values_of(saved_items: Iterable[dict[str, Any]]) -> list[Any]:
        """`_user_values` of many saved items: their contents."""
        return list(map(_CONTENT, saved_items))

    @classmethod
    @refuses_deep_nesting("ContextItem")
    def from_dict(cls, data: Mapping[str, Any]) -> ContextItem[Any]:
        """Rebuild an item saved by `to_dict()`; `id` and `description` may be missing.

        Raises:
            ValueError: `data` is not a dict with a `content` key, or a field has the wrong type.
        """
        return cls._load(data)

    @classmethod
    def _load(cls, data: object) -> ContextItem[Any]:
        """`from_dict` of one saved item, for any `data` (a queue or a pool loads each so).

        Raises:
            ValueError: `data` is not a dict with `content`, or a field has the wrong type.
        """
        if not is_mapping(data) or "content" not in data:
            raise ValueError(f"a saved ContextItem must be a dict with 'content', not {data!r}")
        content = data["content"]
        if "content_type" in data:
            content = _saved_content(data["content_type"], content)
        try:
            return cls(content, data.get("description"), data.get("id"))
        except TypeError as exc:
            raise ValueError(str(exc)) from None


# The defaults `__init__` gives, on the fields too (slots leave no room for class-level
# ones): `fields()` shows them, and a dataclass subclass's generated `__init__` has them.
for _optional in fields(ContextItem)[1:]:
    _optional.default = None


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
