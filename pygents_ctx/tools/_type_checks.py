"""Type checks of the values a tool is called with, one per type hint, compiled once.

`TypeChecks().check(hint)` compiles a hint to a `TypeCheck`, or None when it
need not be checked: the tool's schema says `{}` (any value) for it (`Any`, no
hint, a `TypeVar`, a callable, a class other than a dataclass, `TypedDict` or
pydantic model), so no value a model sends for it is refused. A check answers
`ok(value)` quickly, and `explain(value, path, out)` lists what is wrong with
paths into nested values. What is accepted is what the tool's input schema
describes, or the Python type itself: a `bool` is not an `int`, an `int` is a
`float`; an `Enum` takes a member or its value; a dataclass, `TypedDict` or
pydantic model takes an instance or a dict with the fields it needs; a
`datetime` (`date`, `time`) takes an instance or an ISO 8601 string, a `UUID`
its text, a `Decimal` a number or its text, a `Path` a string, `bytes` base64
text. Values are only checked here; `_convert` turns the JSON forms into the
annotated types once a call passed.
"""

from __future__ import annotations

import base64
import binascii
import collections.abc
import dataclasses
import datetime
import decimal
import enum
import pathlib
import types
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Union

from typing_extensions import is_typeddict

from pygents_ctx._suggest import closest
from pygents_ctx.errors import ArgumentProblem

__all__ = [
    "PydanticCheck",
    "TypeCheck",
    "TypeChecks",
    "decimal_of",
    "decode_base64",
    "missing",
    "pydantic_problems",
    "type_hints",
    "unknown",
]

_NONE_TYPE = type(None)
_TEXT = (str, bytes, bytearray)


def type_hints(fn: Any) -> dict[str, Any]:
    """`fn`'s type hints with `Annotated` kept; `{}` when they cannot be resolved."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # a forward reference that does not resolve: nothing to check against
        return {}


# -- describing values ---------------------------------------------------------------


def _kind_of(value: object) -> str:
    """The JSON name of a value's type, as a model knows them."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _invalid(path: str, expected: str, value: object) -> ArgumentProblem:
    return ArgumentProblem(
        path, "invalid", f"expected {expected}; got {_kind_of(value)} {_shown(value)}"
    )


def _same(value: object, allowed: object) -> bool:
    """Equal, and not a `bool` standing for a number (`True == 1`) or the reverse."""
    return value == allowed and isinstance(value, bool) is isinstance(allowed, bool)


# -- the checks, one node per type hint ------------------------------------------------


class TypeCheck:
    """The check of one type hint: `ok` answers quickly, `explain` says what is wrong."""

    __slots__ = ("expected", "fast")

    def __init__(self, expected: str, fast: frozenset[type] = frozenset()) -> None:
        self.expected = expected
        # Exact types that pass without a call to `ok` (an int for `int`, never a bool).
        self.fast = fast

    def ok(self, value: object) -> bool:
        raise NotImplementedError

    def explain(self, value: object, path: str, out: list[ArgumentProblem]) -> None:
        if not self.ok(value):
            out.append(_invalid(path, self.expected, value))


class _Instance(TypeCheck):
    __slots__ = ("no_bool", "types")

    def __init__(self, types: tuple[type, ...], expected: str, *, no_bool: bool = False) -> None:
        super().__init__(expected, frozenset(types) - {bool} if no_bool else frozenset(types))
        self.types = types
        self.no_bool = no_bool

    def ok(self, value: object) -> bool:
        return isinstance(value, self.types) and not (self.no_bool and isinstance(value, bool))


class _Predicate(TypeCheck):
    __slots__ = ("test",)

    def __init__(self, test: Callable[[object], bool], expected: str) -> None:
        super().__init__(expected)
        self.test = test

    def ok(self, value: object) -> bool:
        return self.test(value)


class _Union(TypeCheck):
    __slots__ = ("options",)

    def __init__(self, options: list[TypeCheck]) -> None:
        super().__init__(
            " or ".join(dict.fromkeys(o.expected for o in options)),
            frozenset().union(*(o.fast for o in options)),
        )
        self.options = options

    def ok(self, value: object) -> bool:
        kind = type(value)
        for option in self.options:  # noqa: SIM110 (a loop: cheaper than any() over a generator)
            if kind in option.fast or option.ok(value):
                return True
        return False

    def explain(self, value: object, path: str, out: list[ArgumentProblem]) -> None:
        if self.ok(value):
            return
        # `X | None` given something that is not None: what is wrong with it as an X.
        others = [o for o in self.options if _NONE_TYPE not in o.fast]
        if value is not None and len(others) == 1:
            others[0].explain(value, path, out)
        else:
            out.append(_invalid(path, self.expected, value))


class _Choice(TypeCheck):
    """A `Literal` or an `Enum`: one of a few values (an enum's members too)."""

    __slots__ = ("members", "values")

    def __init__(self, values: list[object], members: type | None, expected: str) -> None:
        super().__init__(expected, frozenset() if members is None else frozenset({members}))
        self.values = values
        self.members = members

    def ok(self, value: object) -> bool:
        if self.members is not None and isinstance(value, self.members):
            return True
        return any(_same(value, allowed) for allowed in self.values)


def _all_pass(check: TypeCheck | None, values: Iterable[object]) -> bool:
    """Whether every value passes `check` (None passes anything); exact types first."""
    if check is None:
        return True
    fast, ok = check.fast, check.ok
    for value in values:  # noqa: SIM110 (a loop: cheaper than all() over a generator)
        if type(value) not in fast and not ok(value):
            return False
    return True


_READ_TWICE = frozenset({list, tuple, set, frozenset})


class _Array(TypeCheck):
    __slots__ = ("concrete", "containers", "item")

    def __init__(self, containers: tuple[type, ...], item: TypeCheck | None, expected: str) -> None:
        super().__init__(expected)
        self.containers = containers
        self.item = item
        # The plain containers it takes, told apart by their exact type (the common case).
        self.concrete = frozenset(c for c in _READ_TWICE if issubclass(c, containers))

    def _items(self, value: object) -> Iterable[object] | None:
        """The items to check, or None when `value` is not such a container."""
        if not isinstance(value, self.containers) or isinstance(value, (*_TEXT, Mapping)):
            return None
        if isinstance(value, list | tuple | set | frozenset):
            return value
        return ()  # anything else might be consumed by reading it: its type is all we check

    def ok(self, value: object) -> bool:
        if type(value) in self.concrete:
            return _all_pass(self.item, value)  # type: ignore[arg-type]  # a plain container
        items = self._items(value)
        return items is not None and _all_pass(self.item, items)

    def explain(self, value: object, path: str, out: list[ArgumentProblem]) -> None:
        items = self._items(value)
        if items is None:
            out.append(_invalid(path, self.expected, value))
        elif self.item is not None:
            for index, x in enumerate(items):
                self.item.explain(x, f"{path}[{index}]", out)


class _Tuple(TypeCheck):
    """A fixed-length `tuple[X, Y]`: an array with exactly those items."""

    __slots__ = ("items",)

    def __init__(self, items: list[TypeCheck | None], expected: str) -> None:
        super().__init__(expected)
        self.items = items

    def ok(self, value: object) -> bool:
        return (
            isinstance(value, list | tuple)
            and len(value) == len(self.items)
            and all(n is None or n.ok(x) for n, x in zip(self.items, value, strict=True))
        )

    def explain(self, value: object, path: str, out: list[ArgumentProblem]) -> None:
        if not isinstance(value, list | tuple) or len(value) != len(self.items):
            out.append(_invalid(path, self.expected, value))
            return
        for index, (node, x) in enumerate(zip(self.items, value, strict=True)):
            if node is not None:
                node.explain(x, f"{path}[{index}]", out)


class _Mapping(TypeCheck):
    __slots__ = ("key", "value")

    def __init__(self, key: TypeCheck | None, value: TypeCheck | None, expected: str) -> None:
        super().__init__(expected)
        self.key = key
        self.value = value

    def ok(self, value: object) -> bool:
        if not isinstance(value, Mapping):
            return False
        return _all_pass(self.key, value.keys()) and _all_pass(self.value, value.values())

    def explain(self, value: object, path: str, out: list[ArgumentProblem]) -> None:
        if not isinstance(value, Mapping):
            out.append(_invalid(path, self.expected, value))
            return
        for k, v in value.items():
            if self.key is not None and not self.key.ok(k):
                out.append(_invalid(f"{path} key {_shown(k)}", self.key.expected, k))
            if self.value is not None:
                self.value.explain(v, f"{path}[{k!r}]", out)


class _Object(TypeCheck):
    """A dataclass or `TypedDict`: an instance (of a dataclass), or a dict of its fields.

    Its fields are filled in after it is made (see `TypeChecks`), so that a type
    that refers to itself compiles.
    """

    __slots__ = ("fields", "instance", "required")

    def __init__(self, name: str, instance: type | None) -> None:
        super().__init__(f"{name} (object)", frozenset(() if instance is None else (instance,)))
        self.instance = instance
        self.fields: dict[str, TypeCheck | None] = {}
        self.required: tuple[str, ...] = ()

    def ok(self, value: object) -> bool:
        if self.instance is not None and isinstance(value, self.instance):
            return True
        if not isinstance(value, Mapping) or not all(name in value for name in self.required):
            return False
        fields = self.fields
        for name, x in value.items():
            node = fields.get(name)
            if node is not None and not node.ok(x):
                return False
        return True

    def explain(self, value: object, path: str, out: list[ArgumentProblem]) -> None:
        if self.instance is not None and isinstance(value, self.instance):
            return
        if not isinstance(value, Mapping):
            out.append(_invalid(path, self.expected, value))
            return
        strangers = []
        for name, x in value.items():
            if name not in self.fields:
                strangers.append(str(name))
                continue
            node = self.fields[name]
            if node is not None:
                node.explain(x, f"{path}.{name}", out)
        absent = [name for name in self.required if name not in value]
        out.extend(missing(f"{path}.{name}") for name in absent)
        if absent:
            what = f"a field of {self.expected.removesuffix(' (object)')}"
            out.extend(unknown(f"{path}.", name, absent, self.fields, what) for name in strangers)


class PydanticCheck(TypeCheck):
    """A pydantic model: an instance, or a dict its `model_validate` accepts.

    The instance the last accepted dict made is kept in `last`, so that the
    conversion that follows the check (`_convert`) takes it instead of
    validating the same dict again.
    """

    __slots__ = ("last", "model")

    def __init__(self, model: type) -> None:
        super().__init__(f"{model.__name__} (object)", frozenset({model}))
        self.model = model
        self.last: tuple[object, object] | None = None  # (the dict, its instance)

    def _error(self, value: object) -> Exception | None:
        try:
            made = self.model.model_validate(value)  # type: ignore[attr-defined]
        except Exception as exc:  # pydantic's ValidationError, without importing pydantic
            return exc
        self.last = (value, made)
        return None

    def ok(self, value: object) -> bool:
        return isinstance(value, self.model) or (
            isinstance(value, Mapping) and self._error(value) is None
        )

    def explain(self, value: object, path: str, out: list[ArgumentProblem]) -> None:
        if isinstance(value, self.model):
            return
        if not isinstance(value, Mapping):
            out.append(_invalid(path, self.expected, value))
            return
        error = self._error(value)
        if error is not None:
            out.extend(pydantic_problems(error, path))


def pydantic_problems(error: Exception, path: str) -> list[ArgumentProblem]:
    """The problems a pydantic `ValidationError` lists, each with its path under `path`."""
    details = getattr(error, "errors", None)
    if not callable(details):
        return [ArgumentProblem(path, "invalid", str(error))]
    found = []
    for detail in details():
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in detail["loc"]
        )
        if detail.get("type") == "missing":
            found.append(ArgumentProblem(f"{path}{where}", "missing", str(detail["msg"])))
        else:
            found.append(ArgumentProblem(f"{path}{where}", "invalid", str(detail["msg"])))
    return found


def missing(path: str) -> ArgumentProblem:
    return ArgumentProblem(path, "missing", "required, not given")


def unknown(
    prefix: str, name: str, missing: list[str], known: Iterable[str], what: str
) -> ArgumentProblem:
    """An unknown name, with the missing (else any known) name it probably meant.

    `what` says what it is not, e.g. "a parameter of this tool".
    """
    known = list(known)
    meant = closest(name, missing) or closest(name, known)
    if meant is not None:
        return ArgumentProblem(
            f"{prefix}{name}", "unknown", f"not {what}; did you mean {meant!r}?", meant
        )
    takes = ", ".join(known) or "none"
    return ArgumentProblem(f"{prefix}{name}", "unknown", f"not {what} (those are: {takes})")


def _one_of(values: Iterable[object]) -> str:
    return "one of " + " | ".join(map(_shown, values))


def _parses(
    parse: Callable[[str], object], kind: type | tuple[type, ...]
) -> Callable[[object], bool]:
    """A test passing an instance of `kind`, or text `parse` reads without a ValueError."""

    def test(value: object) -> bool:
        if isinstance(value, kind):
            return True
        if not isinstance(value, str):
            return False
        try:
            parse(value)
        except ValueError:
            return False
        return True

    return test


def decimal_of(value: object) -> decimal.Decimal | None:
    """`value` (a `Decimal`, an integer, a float or numeric text) as a finite `Decimal`, or None.

    A float is read from its shortest text (`0.1` is `Decimal("0.1")`), the
    number a model wrote.
    """
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = decimal.Decimal(repr(value) if isinstance(value, float) else value)
    except (decimal.InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def decode_base64(text: str) -> bytes:
    """Base64 text as bytes; a ValueError when it is not base64."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None


# Hints checked by one node each (dates also take their ISO 8601 text).
_SIMPLE: dict[object, Callable[[], TypeCheck]] = {
    str: lambda: _Instance((str,), "string"),
    int: lambda: _Instance((int,), "integer", no_bool=True),
    float: lambda: _Instance((int, float), "number", no_bool=True),
    bool: lambda: _Instance((bool,), "boolean"),
    _NONE_TYPE: lambda: _Instance((_NONE_TYPE,), "null"),
    bytes: lambda: _Predicate(
        _parses(decode_base64, (bytes, bytearray)), "bytes (or a base64 string)"
    ),
    uuid.UUID: lambda: _Predicate(_parses(uuid.UUID, uuid.UUID), "UUID string"),
    decimal.Decimal: lambda: _Predicate(
        lambda value: decimal_of(value) is not None, "decimal number (or its text)"
    ),
    datetime.datetime: lambda: _Predicate(
        _parses(datetime.datetime.fromisoformat, datetime.datetime), "date-time string (ISO 8601)"
    ),
    datetime.date: lambda: _Predicate(
        _parses(datetime.date.fromisoformat, datetime.date), "date string (ISO 8601)"
    ),
    datetime.time: lambda: _Predicate(
        _parses(datetime.time.fromisoformat, datetime.time), "time string (ISO 8601)"
    ),
}
_ARRAYS: dict[object, tuple[type, ...]] = {
    list: (list, tuple),
    tuple: (list, tuple),
    set: (list, tuple, set, frozenset),
    frozenset: (list, tuple, set, frozenset),
    collections.abc.Sequence: (collections.abc.Sequence,),
    collections.abc.MutableSequence: (collections.abc.Sequence,),
    collections.abc.Set: (list, tuple, collections.abc.Set),
    collections.abc.MutableSet: (list, tuple, collections.abc.Set),
    collections.abc.Collection: (collections.abc.Collection,),
    collections.abc.Iterable: (collections.abc.Iterable,),
}
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_REQUIRED_MARKS = {typing.Required: True, typing.NotRequired: False}


class TypeChecks:
    """Compiles type hints to nodes; an object type is compiled once, so recursion ends."""

    def __init__(self) -> None:
        self._objects: dict[type, TypeCheck | None] = {}

    def check(self, hint: Any) -> TypeCheck | None:
        """The check for `hint`, or None when it cannot (or need not) be checked."""
        if hint is Any or hint is object or isinstance(hint, str | typing.ForwardRef):
            return None
        simple = _SIMPLE.get(hint)
        if simple is not None:
            return simple()
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Annotated:
            return self.check(args[0])
        supertype = getattr(hint, "__supertype__", None)  # a NewType
        if supertype is not None:
            return self.check(supertype)
        if origin is Union or isinstance(hint, types.UnionType):
            options = [self.check(a) for a in args]
            checked = [o for o in options if o is not None]
            return _Union(checked) if len(checked) == len(options) else None
        if origin is Literal:
            # An enum member among the values is also given by its value (as JSON says it).
            values = [*args, *(a.value for a in args if isinstance(a, enum.Enum))]
            return _Choice(
                values, None, _one_of(a.value if isinstance(a, enum.Enum) else a for a in args)
            )
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            values = [member.value for member in hint]
            return _Choice(values, hint, _one_of(values))
        container = origin if origin is not None else hint
        if container in _ARRAYS:
            return self._array(container, args)
        if container in _MAPPINGS:
            key, value = (self.check(args[0]), self.check(args[1])) if args else (None, None)
            shown = "object" if value is None else f"object of {value.expected}"
            return _Mapping(key, value, shown)
        if isinstance(hint, type) and issubclass(hint, pathlib.PurePath):
            return _Predicate(_parses(hint, hint), "path string")
        if isinstance(hint, type):
            return self._class(hint)
        # Anything else (a callable, a TypeVar, a generic class of your own): the schema
        # is `{}`, any value, so no value is refused.
        return None

    def _array(self, container: object, args: tuple[Any, ...]) -> TypeCheck:
        containers = _ARRAYS[container]
        if container is tuple and args and args[-1] is not Ellipsis:
            items = [self.check(a) for a in args]
            shown = ", ".join("any" if n is None else n.expected for n in items)
            return _Tuple(items, f"array of [{shown}]")
        item = self.check(args[0]) if args else None
        return _Array(containers, item, "array" if item is None else f"array of {item.expected}")

    def _class(self, cls: type) -> TypeCheck | None:
        if cls in self._objects:
            return self._objects[cls]
        made: TypeCheck | None = None
        if callable(getattr(cls, "model_validate", None)):
            made = PydanticCheck(cls)
        elif is_typeddict(cls):
            made = self._object(cls, None)
        elif dataclasses.is_dataclass(cls):
            made = self._object(cls, cls)
        # Any other class (a class of your own) has the schema `{}`: a model may send any
        # value for it, so none is refused.
        self._objects[cls] = made
        return made

    def _object(self, cls: type, instance: type | None) -> TypeCheck:
        made = _Object(cls.__name__, instance)
        self._objects[cls] = made  # before its fields: a field may refer back to it
        hints = type_hints(cls)
        if instance is None:  # a TypedDict: Required / NotRequired, else its totality
            required = []
            for name, hint in hints.items():
                is_required = getattr(cls, "__total__", True)
                while typing.get_origin(hint) in _REQUIRED_MARKS:
                    is_required = _REQUIRED_MARKS[typing.get_origin(hint)]
                    hint = typing.get_args(hint)[0]
                made.fields[name] = self.check(hint)
                if is_required:
                    required.append(name)
            made.required = tuple(required)
        else:
            fields = [f for f in dataclasses.fields(cls) if f.init]
            made.fields = {f.name: self.check(hints.get(f.name, Any)) for f in fields}
            made.required = tuple(
                f.name
                for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            )
        return made
