"""JSON through orjson, strict about what JSON can hold."""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import reprlib
from collections.abc import Callable, Mapping
from typing import Any, Final, ParamSpec, Self, TypeGuard, TypeVar

import orjson

__all__ = [
    "JsonSerializable",
    "check_writable_depth",
    "dumps",
    "is_mapping",
    "loads",
    "refuses_deep_nesting",
    "shown",
]

P = ParamSpec("P")
R = TypeVar("R")

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


# orjson writes values of these types (and finite floats) so that they read back as
# they were, a tuple as a list. Others it converts: NaN and infinity to null, an Enum
# to its value, a UUID to a string, a subclass of str or dict to the base type, ...
_EXACT_TYPES = frozenset({str, int, bool, type(None), dict, list, tuple})
_is_float = float.__instancecheck__
_CENSUS_FROM = 512  # bytes of JSON


def _loads_back_equal(values: list[Any]) -> bool:
    """Whether JSON that orjson wrote of `values` surely reads back equal to them.

    Call only after `orjson.dumps()` of them succeeded: there are then no cycles,
    every int fits and every key is a string. False means "look closer", not "wrong".
    """
    # Breadth first, in C: `gc.get_referents` lists what the dicts, lists and tuples
    # of one level hold (a dict's values; its keys are strings, orjson checked), and
    # `map(type, ...)` takes the census. Only floats need a look at their values.
    level = values
    while level:
        kinds = set(map(type, level))
        if not kinds <= _EXACT_TYPES:
            if not kinds - _EXACT_TYPES <= {float}:
                return False
            if not math.isfinite(sum(filter(_is_float, level), 0.0)):
                return False  # a NaN or an infinity (or finite floats that overflow the sum)
        level = gc.get_referents(*level)
    return True


def dumps(data: Any, owner: str, user_values: list[Any] | None = None) -> bytes:
    """Serialize plain data to JSON bytes that read back equal to it.

    Args:
        data: What to write.
        owner: Names `data` in error messages.
        user_values: The parts of `data` that hold values users gave, which must be
            checked; None for all of it. The rest must be JSON by construction.

    Raises:
        TypeError: Something in `data` is not JSON; the message names the field.
    """
    try:
        encoded = orjson.dumps(data, default=_refuse, option=_OPTIONS)
    except TypeError as exc:
        if str(exc) == _TOO_DEEP:  # before walking it: a walk would recurse as deep
            raise TypeError(
                f"{owner} is nested more than {_DEPTH} levels deep: too deep to write "
                "as JSON; flatten it"
            ) from None
        raise _cannot_hold(*(_first_unjsonable(data, owner) or (owner, data))) from None
    # Two ways to know that the JSON reads back equal: read it back and compare, at a
    # cost per object; or a census of the types in what users gave, cheaper per object
    # but with a fixed cost per level of nesting, so worth it only beyond a few hundred
    # bytes. Whatever the census finds unusual, the comparison decides.
    census_pays = len(encoded) > _CENSUS_FROM
    checked = [data] if user_values is None else user_values
    if (census_pays and _loads_back_equal(checked)) or orjson.loads(encoded) == data:
        return encoded
    # Rarely here (a float that is not finite, an Enum, a tuple, ...): walk in Python,
    # which names the field, only once the exact comparison has failed.
    found = _first_unjsonable(data, owner)
    if found is None:
        return encoded  # differs only as JSON must: a tuple reads back as a list
    raise _cannot_hold(*found)


_TOO_DEEP: Final = "Recursion limit reached"  # what orjson says past its depth
_DEPTH: Final = 254  # how deep orjson writes: dicts and lists within one another
_SHOWN: Final = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 60, 60


def shown(value: object) -> str:
    """`repr(value)` for an error message: short, however large or deeply nested `value` is."""
    return _SHOWN.repr(value)


def _cannot_hold(where: str, value: Any) -> TypeError:
    kind = type(value)
    if dataclasses.is_dataclass(kind) or callable(getattr(kind, "model_validate", None)):
        fix = (
            f"register {kind.__name__} with @content_type (pygents_ctx.content_type) to save "
            "its instances in a queue or pool and load them back"
        )
    else:
        fix = "store plain str/int/float/bool/None/list/dict values (finite numbers) there"
    return TypeError(
        f"{where} holds {shown(value)} ({kind.__name__}), which JSON cannot hold; {fix}"
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


def _none(value: object) -> None:
    return None


_CONTAINERS = (dict, list, tuple)
_DEPTH_PROBES = (_OPTIONS, orjson.OPT_NON_STR_KEYS | _OPTIONS)


def _depth_over(data: Any, limit: int) -> bool:
    """Whether `data` has more than `limit` dicts and lists within one another."""
    level = [data] if isinstance(data, _CONTAINERS) else []
    depth = 0
    while level:  # level by level, so that no depth makes Python recurse
        depth += 1
        if depth > limit:
            return True
        level = [
            item
            for node in level
            for item in (node.values() if isinstance(node, dict) else node)
            if isinstance(item, _CONTAINERS)
        ]
    return False


def check_writable_depth(data: Any, owner: str) -> None:
    """Refuse saved data nested deeper than `to_json()` can write it again.

    One rule for every loader: what loads can be saved. orjson writes at most
    254 dicts and lists within one another.

    Raises:
        ValueError: `data` is nested deeper; the message names `owner` and the limit.
    """
    # In C: orjson fails exactly past the depth it writes, whatever the values are.
    # First without OPT_NON_STR_KEYS (2.5x slower), which only keys other than
    # strings need: parsed JSON has none.
    too_deep = False
    for option in _DEPTH_PROBES:
        try:
            orjson.dumps(data, default=_none, option=option)
            return
        except TypeError as exc:
            if str(exc) == _TOO_DEEP:
                too_deep = True
                break
    # Something else stopped orjson first (a lone surrogate, a huge int): count in Python.
    if too_deep or _depth_over(data, _DEPTH):
        raise ValueError(
            f"saved {owner} is nested more than {_DEPTH} levels deep (dicts and lists within "
            "one another), deeper than to_json() can write it again; flatten it"
        )


def refuses_deep_nesting(owner: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make a loader report data nested past Python's recursion limit as malformed.

    Walking, counting or showing (in an error message) such data raises
    `RecursionError` somewhere inside the loader; to its caller that is one more
    kind of malformed data: the `ValueError` every loader documents.
    """

    def decorate(load: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(load)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return load(*args, **kwargs)
            except RecursionError:
                raise ValueError(
                    f"saved {owner} is nested too deeply to read (past Python's recursion limit)"
                ) from None

        return guarded

    return decorate


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
        data = self._json_data()
        return dumps(data, type(self).__name__, self._user_values(data))

    def _json_data(self) -> Any:
        """What `to_json()` writes: `to_dict()`, or equal data that need not be a copy.

        `to_json()` only reads it once, so it may share the object's own containers.
        """
        return self.to_dict()

    @classmethod
    def _user_values(cls, data: Any) -> list[Any] | None:
        """The parts of saved `data` that hold values users gave (None: all of it).

        `to_json()` checks only these: a class lists here every saved field it does
        not check itself when the field is set, as it checks a name or a timeout.
        """
        return None

    @classmethod
    def from_json(cls, data: bytes | str) -> Self:
        """Rebuild from JSON made by `to_json()`.

        Raises:
            ValueError: The JSON is invalid or does not describe this kind of object.
        """
        return cls._from_json_data(loads(data, cls.__name__))

    @classmethod
    def _from_json_data(cls, data: Any) -> Self:
        """`from_dict()` of what `from_json()` has just parsed.

        That data is plain dicts and lists that nothing else holds, with string keys
        and no functions in it: a class may keep its containers instead of copying them.
        """
        return cls.from_dict(data)
