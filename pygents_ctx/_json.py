"""JSON through orjson, strict about what JSON can hold."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Self, TypeGuard

import orjson

__all__ = ["JsonSerializable", "dumps", "is_mapping", "loads"]

_JSON_SCALARS = (str, int, float, bool, type(None))
# Hand dataclasses and datetimes to `default` (which refuses them): a silent
# conversion to a dict or a string would not come back as the same object.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


_INT_RANGE = range(-(2**63), 2**64)  # what orjson can write


def _holdable(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)  # orjson would write NaN and infinity as null
    if isinstance(value, int) and not isinstance(value, bool):
        return value in _INT_RANGE
    return isinstance(value, _JSON_SCALARS)


def _first_unjsonable(value: Any, path: str) -> tuple[str, Any] | None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} (key {key!r})", key
            found = _first_unjsonable(item, f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _first_unjsonable(item, f"{path}[{index}]")
            if found:
                return found
        return None
    return None if _holdable(value) else (path, value)


# `dict` first: the dicts JSON gives pass without asking the (much slower) ABC.
_MAPPING_TYPES = (dict, Mapping)


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether saved data is a mapping."""
    return isinstance(value, _MAPPING_TYPES)


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def dumps(data: Any, owner: str) -> bytes:
    """Serialize plain data to JSON bytes.

    Raises:
        TypeError: Something in `data` is not JSON; the message names the field.
    """
    try:
        encoded = orjson.dumps(data, default=_refuse, option=_OPTIONS)
        # orjson writes NaN and infinity as null. Reading the bytes back and comparing
        # (both in C) is far cheaper than walking the data in Python to rule that out.
        suspect = b"null" in encoded and orjson.loads(encoded) != data
        found = _first_unjsonable(data, owner) if suspect else None
    except TypeError:
        found = _first_unjsonable(data, owner) or (owner, data)
    if found is None:
        return encoded
    where, value = found
    raise TypeError(
        f"{where} holds {value!r} ({type(value).__name__}), which JSON cannot hold; "
        f"store plain str/int/float/bool/None/list/dict values (finite numbers) there"
    )


def loads(data: bytes | str, owner: str) -> Any:
    """Parse JSON bytes or text.

    Raises:
        ValueError: `data` is not valid JSON.
    """
    if not isinstance(data, bytes | bytearray | memoryview | str):
        raise TypeError(f"{owner}.from_json takes bytes or str, not {type(data).__name__}")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{owner}.from_json: not valid JSON ({exc})") from None


class JsonSerializable:
    """Adds `to_json()` / `from_json()` to a class with `to_dict()` / `from_dict()`."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        raise NotImplementedError

    def to_json(self) -> bytes:
        """`to_dict()` as JSON bytes.

        Raises:
            TypeError: A value is not JSON; the message names the object and field.
        """
        return dumps(self.to_dict(), type(self).__name__)

    @classmethod
    def from_json(cls, data: bytes | str) -> Self:
        """Rebuild from JSON made by `to_json()`.

        Raises:
            ValueError: The JSON is invalid or does not describe this kind of object.
        """
        return cls.from_dict(loads(data, cls.__name__))
