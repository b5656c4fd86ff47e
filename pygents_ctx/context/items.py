"""`ContextItem`: the typed, immutable unit of context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pygents_ctx._json import JsonSerializable, is_mapping
from pygents_ctx.context.messages import Message
from pygents_ctx.context.messages import from_dict as message_from_dict
from pygents_ctx.context.messages import to_dict as message_to_dict

__all__ = ["ContextItem"]

T = TypeVar("T")

_TEXT_OR_NONE = (str, type(None))


def _not_text(field: str, value: object) -> TypeError:
    return TypeError(f"ContextItem {field} must be a string or None, not {value!r}")


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
        if not isinstance(self.description, _TEXT_OR_NONE):
            raise _not_text("description", self.description)
        if not isinstance(self.id, _TEXT_OR_NONE):
            raise _not_text("id", self.id)

    def to_dict(self) -> dict[str, Any]:
        """`{"id", "description", "content"}`, plus `"content_type": "message"` for a `Message`.

        A `Message` is saved in its dict form (`pygents_ctx.context.messages.to_dict`).
        """
        content = self.content
        if isinstance(content, Message):
            return {
                "id": self.id,
                "description": self.description,
                "content": message_to_dict(content),
                "content_type": "message",
            }
        return {"id": self.id, "description": self.description, "content": content}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextItem[Any]:
        """Rebuild an item saved by `to_dict()`; `id` and `description` may be missing.

        Raises:
            ValueError: `data` is not a dict with a `content` key, or a field has the wrong type.
        """
        if not is_mapping(data) or "content" not in data:
            raise ValueError(f"a saved ContextItem must be a dict with 'content', not {data!r}")
        content = data["content"]
        content_type = data.get("content_type")
        if content_type == "message":
            content = message_from_dict(content)
        elif content_type is not None:
            raise ValueError(
                f"saved ContextItem content_type {content_type!r} is unknown; "
                f"the only one is 'message' (or leave it out)"
            )
        try:
            return cls(content, data.get("description"), data.get("id"))
        except TypeError as exc:
            raise ValueError(str(exc)) from None
