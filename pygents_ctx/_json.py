"""JSON through orjson, strict about what JSON can hold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

import orjson

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["JsonSerializable", "dumps", "loads"]

_JSON_SCALARS = (str, int, float, bool, type(None))
# Hand dataclasses and datetimes to `default` (which refuses them): a silent
# conversion to a dict or a string would not come back as the same object.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


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
    return None if isinstance(value, _JSON_SCALARS) else (path, value)


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def dumps(data: Any, owner: str) -> bytes:
    """Serialize plain data to JSON bytes.

    Raises:
        TypeError: Something in `data` is not JSON; the message names the field.
    """
    try:
        return orjson.dumps(data, default=_refuse, option=_OPTIONS)
    except TypeError:
        found = _first_unjsonable(data, owner)
        where, value = found if found else (owner, data)
        raise TypeError(
            f"{where} holds a {type(value).__name__}, which JSON cannot hold; "
            f"store plain str/int/float/bool/None/list/dict values there"
        ) from None


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
