"""What the queue and the pool share.

Limits, the inherit sentinel, and the checks of a saved queue or pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, Final, NamedTuple

from pygents_ctx._checks import whole_number
from pygents_ctx.context.items import ContextItem

__all__ = [
    "INHERIT",
    "Inherit",
    "Saved",
    "check_limit",
    "read_saved",
    "saved_user_values",
]


class Inherit(Enum):
    """Sentinel type: "not given, take the parent's" (unlike `None` or `[]`)."""

    TOKEN = "inherit"


INHERIT: Final = Inherit.TOKEN


def check_limit(limit: object, owner: str) -> int:
    """Return `limit` if it is an int of at least 1.

    Raises:
        TypeError: It is not an int.
        ValueError: It is less than 1.
    """
    checked = whole_number(limit, f"{owner} limit", least=None)
    if checked < 1:  # pygents' words, which code written for it matches
        raise ValueError(f"{owner} limit must be >= 1, not {checked}")
    return checked


class Saved(NamedTuple):
    """The checked fields of a saved queue or pool."""

    limit: Any
    items: list[ContextItem[Any]]
    hooks: object
    tags: list[str]


def read_saved(data: object, owner: str, *, limit_required: bool) -> Saved:
    """Check the common shape of a saved queue or pool, before anything is built.

    Raises:
        ValueError: A required key is missing or a field has the wrong type.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a saved {owner} must be a dict, not {type(data).__name__}")
    if limit_required and "limit" not in data:
        raise ValueError(f"saved {owner} is missing the 'limit' key")
    limit = data.get("limit")
    if limit is not None or limit_required:
        try:
            check_limit(limit, owner)
        except TypeError as exc:
            raise ValueError(f"saved {exc}") from None
    raw_items = data.get("items", [])
    if not isinstance(raw_items, list):
        raise ValueError(f"saved {owner} 'items' must be a list, not {type(raw_items).__name__}")
    items = [ContextItem._load(item) for item in raw_items]
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError(f"saved {owner} 'tags' must be a list of strings, not {tags!r}")
    return Saved(limit, items, data.get("hooks", {}), tags)


def saved_user_values(data: dict[str, Any]) -> list[Any]:
    """`_user_values` of a saved queue or pool (see `JsonSerializable._user_values`).

    Its tags, which are a plain attribute (not checked when assigned), and its
    items' contents.
    """
    return [data["tags"], *ContextItem._user_values_of(data["items"])]
