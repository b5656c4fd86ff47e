"""`@content_type`: a user's dataclass or pydantic model as the content of saved context items.

A queue or pool saves its items as JSON. An instance of a registered class is
saved in its JSON form with `content_type` naming the class, and made again
from that form when loaded, checked and converted as a tool's arguments are
(`_convert`). Like a tool, the class must be registered in the process that
loads (the decorator runs when its module is imported).
"""

from __future__ import annotations

import base64
import dataclasses
import decimal
import enum
import pathlib
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from pygents_ctx.context.items import CODEC_OF_CLASS, CONTENT_CODECS, ContentCodec
from pygents_ctx.tools._convert import Conversion

__all__ = ["content_type"]

C = TypeVar("C", bound=type)


def _is_pydantic(cls: type) -> bool:
    return callable(getattr(cls, "model_validate", None)) and callable(
        getattr(cls, "model_dump", None)
    )


def _json_default(value: Any) -> Any:
    """The JSON form of what orjson does not write itself (the forms `_convert` reads back)."""
    if callable(getattr(value, "model_dump", None)):
        return value.model_dump(mode="json")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"{value!r} ({type(value).__name__}) has no JSON form")


def _same_class(held: type, new: type) -> bool:
    """The same class, or a new definition of it (a re-run cell, a reloaded module)."""
    return held is new or (
        held.__module__ == new.__module__ and held.__qualname__ == new.__qualname__
    )


def _dump(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, default=_json_default))


def _loader(cls: type, name: str) -> Callable[[Any], Any]:
    conversion = Conversion(cls)

    def load(data: Any) -> Any:
        value, problems = conversion.apply(data)
        if problems:
            listed = "; ".join(
                f"{p.path.lstrip('.') or '(the content)'}: {p.message}" for p in problems
            )
            raise ValueError(f"saved {name} content does not fit the class: {listed}")
        return value

    return load


def content_type(cls: C | None = None, *, name: str | None = None) -> Any:
    """Register a dataclass or pydantic model as the content of saved context items.

    Items of a registered class in a `ContextQueue` or `ContextPool` save in
    their JSON form (`content_type` names the class) and load as instances
    again, checked and converted as a tool's arguments are: nested
    dataclasses, enums, dates, UUIDs and the rest. Register the class where it
    is defined, so the process that loads has it too. An instance of a class
    that is not registered cannot be saved, and the error says so.

    Args:
        cls: The class (as a decorator: `@content_type`).
        name: The name saved with each item (default: the class's name).

    Returns:
        The class, unchanged, or a decorator that registers it.

    Raises:
        TypeError: `cls` is not a dataclass or a pydantic model.
        ValueError: Another class is registered under `name` (a new definition
            of the same class, as in a re-run cell, replaces it).

    Examples:
        >>> import asyncio
        >>> from dataclasses import dataclass
        >>> from pygents_ctx import ContextItem, ContextPool
        >>> @content_type
        ... @dataclass
        ... class Memo:
        ...     title: str
        ...     pages: int
        >>> pool = ContextPool()
        >>> asyncio.run(pool.add(ContextItem(Memo("Q3", 12), description="Q3", id="q3")))
        >>> ContextPool.from_json(pool.to_json()).get("q3").content
        Memo(title='Q3', pages=12)
    """

    def register(cls: C) -> C:
        if not isinstance(cls, type) or not (dataclasses.is_dataclass(cls) or _is_pydantic(cls)):
            raise TypeError(
                f"@content_type takes a dataclass or a pydantic model class, not {cls!r}; "
                "store other values as plain JSON (str, int, float, bool, None, list, dict)"
            )
        saved_as = cls.__name__ if name is None else name
        if not isinstance(saved_as, str) or not saved_as or saved_as == "message":
            raise ValueError(
                f"@content_type name must be a non-empty str other than 'message', not {saved_as!r}"
            )
        held = CONTENT_CODECS.get(saved_as)
        if held is not None and not _same_class(held.cls, cls):
            raise ValueError(
                f"content type {saved_as!r} is registered for {held.cls.__module__}."
                f"{held.cls.__qualname__} already; give this class another name "
                "(@content_type(name=...))"
            )
        if held is not None:
            CODEC_OF_CLASS.pop(held.cls, None)
        codec = ContentCodec(saved_as, cls, _dump, _loader(cls, saved_as))
        CONTENT_CODECS[saved_as] = codec
        CODEC_OF_CLASS[cls] = codec
        return cls

    return register if cls is None else register(cls)
