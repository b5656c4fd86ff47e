"""Turning checked JSON values into the types a hint names, with a plan made once per hint.

`Converters().converter(hint)` compiles a hint to a function `value -> value`,
or None when a value that passed the hint's check (`_type_checks`) is already
what the hint names (`int`, `str`, `list[str]`, `Literal[...]`, a `TypedDict`
of such): the common case, which then costs nothing per call. What is
converted, from the JSON form a model sends:

- a dataclass from a dict of its fields (nested ones too; keys it does not
  take are dropped, as a tool drops unknown arguments), a pydantic model
  through its `model_validate`; a `TypedDict` stays a dict, its fields
  converted;
- an `Enum` member from its value (a `Literal` of members too);
- `datetime`, `date`, `time` from ISO 8601 text, `UUID` from its text,
  `Decimal` from a number or its text, a `Path` from a string, `bytes` from
  base64 text;
- a `tuple` (fixed or variadic), `set` or `frozenset` from an array; lists,
  sequences and dicts item by item, when their items need it;
- `X | Y`: with the first member, in the order written, whose check accepts
  the value and whose conversion succeeds (`date | str` makes a date of
  `"2025-01-01"`, `str | date` keeps the text).

A value that already has the annotated type passes through unchanged (the
same object). A value that cannot be converted raises `ConversionFailed`
with `ArgumentProblem`s whose paths are relative to the value (`""`,
`".field"`, `"[2]"`). `Conversion(hint).apply(value)` checks and converts
values of one hint, for callers outside a tool (the model loop's structured
output).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import pathlib
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

from typing_extensions import is_typeddict

from pygents_ctx.errors import ArgumentProblem
from pygents_ctx.tools._type_checks import (
    PydanticCheck,
    TypeCheck,
    TypeChecks,
    decimal_of,
    decode_base64,
    pydantic_problems,
    type_hints,
)

__all__ = ["Conversion", "ConversionFailed", "Convert", "Converters"]

Convert = Callable[[Any], Any]

_NONE_TYPE = type(None)
_REQUIRED_MARKS = (typing.Required, typing.NotRequired)


class ConversionFailed(Exception):
    """A value could not be made into its annotated type; `problems` say where and why."""

    def __init__(self, problems: list[ArgumentProblem]) -> None:
        super().__init__("; ".join(map(str, problems)))
        self.problems = problems

    @classmethod
    def because(cls, expected: str, value: object, reason: object = None) -> ConversionFailed:
        """One problem at the value itself: what was expected, and why it failed."""
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        why = f" ({reason})" if reason else ""
        return cls([ArgumentProblem("", "invalid", f"expected {expected}; got {shown}{why}")])

    def within(self, prefix: str) -> ConversionFailed:
        """The same problems, their paths under `prefix` (a name, `.field` or `[index]`)."""
        return ConversionFailed(
            [dataclasses.replace(p, path=f"{prefix}{p.path}") for p in self.problems]
        )


# -- the leaves ---------------------------------------------------------------------------


def _parsed(kind: type, parse: Callable[[str], Any], expected: str) -> Convert:
    """Instances of `kind` as they are; text through `parse`."""

    def convert(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        try:
            return parse(value)
        except (ValueError, TypeError) as exc:
            raise ConversionFailed.because(expected, value, exc) from None

    return convert


def _decimal(value: Any) -> Any:
    number = decimal_of(value)
    if number is None:
        raise ConversionFailed.because("a finite decimal number (or its text)", value)
    return number


def _bytes(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value
    try:
        return decode_base64(value)
    except (ValueError, TypeError) as exc:
        raise ConversionFailed.because("base64 text", value, exc) from None


_SIMPLE: dict[Any, Convert] = {
    datetime.datetime: _parsed(
        datetime.datetime, datetime.datetime.fromisoformat, "a date-time (ISO 8601)"
    ),
    datetime.date: _parsed(datetime.date, datetime.date.fromisoformat, "a date (ISO 8601)"),
    datetime.time: _parsed(datetime.time, datetime.time.fromisoformat, "a time (ISO 8601)"),
    uuid.UUID: _parsed(uuid.UUID, uuid.UUID, "a UUID"),
    decimal.Decimal: _decimal,
    bytes: _bytes,
}


def _enum(cls: type[enum.Enum]) -> Convert:
    def convert(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            values = " | ".join(repr(m.value) for m in cls)
            raise ConversionFailed.because(f"one of {values}", value) from None

    return convert


def _literal_members(args: tuple[Any, ...]) -> Convert | None:
    """A `Literal` holding enum members: a member's value becomes the member."""
    members = [a for a in args if isinstance(a, enum.Enum)]
    if not members:
        return None

    def convert(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value
        for member in members:
            if member.value == value and isinstance(value, bool) is isinstance(member.value, bool):
                return member
        return value

    return convert


# -- containers ---------------------------------------------------------------------------


def _items(make: type, item: Convert | None) -> Convert:
    """An array as `make` (tuple, set, frozenset, list), its items converted."""

    def convert(value: Any) -> Any:
        if item is None and type(value) is make:
            return value
        made = []
        for index, x in enumerate(value):
            try:
                made.append(x if item is None else item(x))
            except ConversionFailed as failed:
                raise failed.within(f"[{index}]") from None
        try:
            return made if make is list else make(made)
        except TypeError as exc:  # an item a set cannot hold (a dict for frozenset[Any])
            raise ConversionFailed.because("an array of hashable items", value, exc) from None

    return convert


def _same_container(item: Convert) -> Convert:
    """An abstract sequence or set (`Sequence[X]`): the same kind of container, items converted."""
    as_list = _items(list, item)

    def convert(value: Any) -> Any:
        if isinstance(value, list | tuple | set | frozenset):
            made = as_list(value)
            return made if type(value) is list else type(value)(made)
        return value  # anything else might be consumed by reading it

    return convert


def _fixed_tuple(items: list[Convert | None]) -> Convert:
    def convert(value: Any) -> Any:
        made = []
        for index, (item, x) in enumerate(zip(items, value, strict=True)):
            try:
                made.append(x if item is None else item(x))
            except ConversionFailed as failed:
                raise failed.within(f"[{index}]") from None
        return tuple(made)

    return convert


def _mapping(key: Convert | None, item: Convert | None) -> Convert:
    def convert(value: Any) -> Any:
        made = {}
        for k, v in value.items():
            try:
                made[k if key is None else key(k)] = v if item is None else item(v)
            except ConversionFailed as failed:
                raise failed.within(f"[{k!r}]") from None
        return made

    return convert


class _Union:
    """`X | Y`: the first member whose check accepts the value and whose conversion succeeds."""

    __slots__ = ("options", "takes_none")

    def __init__(
        self, options: list[tuple[TypeCheck | None, Convert | None]], takes_none: bool
    ) -> None:
        self.options = options
        self.takes_none = takes_none

    def __call__(self, value: Any) -> Any:
        if value is None and self.takes_none:
            return None
        failed: ConversionFailed | None = None
        for check, convert in self.options:
            if check is not None and not check.ok(value):
                continue
            if convert is None:
                return value
            try:
                return convert(value)
            except ConversionFailed as exc:
                failed = failed or exc
        expected = " or ".join(c.expected for c, _ in self.options if c is not None) or "a value"
        raise failed or ConversionFailed.because(expected, value)


# -- objects ------------------------------------------------------------------------------


class _Dataclass:
    """A dataclass from a dict of its fields (an instance passes as it is).

    Its fields are filled in after it is made (see `Converters`), so that a
    dataclass that refers to itself compiles.
    """

    __slots__ = ("cls", "fields")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.fields: dict[str, Convert | None] = {}

    def __call__(self, value: Any) -> Any:
        cls = self.cls
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ConversionFailed.because(f"{cls.__name__} (object)", value)
        fields = self.fields
        given = {}
        for name, x in value.items():
            if name not in fields:
                continue  # not one of its fields: dropped, as a tool drops unknown arguments
            convert = fields[name]
            if convert is not None:
                try:
                    x = convert(x)
                except ConversionFailed as failed:
                    raise failed.within(f".{name}") from None
            given[name] = x
        try:
            return cls(**given)
        except Exception as exc:  # its __post_init__ refusing the values, whatever it raises
            raise ConversionFailed(
                [ArgumentProblem("", "invalid", f"{cls.__name__} could not be made: {exc}")]
            ) from None


class _TypedDict:
    """A `TypedDict` stays a dict: its fields converted, the rest kept as given."""

    __slots__ = ("fields",)

    def __init__(self) -> None:
        self.fields: dict[str, Convert] = {}

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise ConversionFailed.because("object", value)
        made = dict(value)
        for name, convert in self.fields.items():
            if name in made:
                try:
                    made[name] = convert(made[name])
                except ConversionFailed as failed:
                    raise failed.within(f".{name}") from None
        return made


def _pydantic(model: Any, check: TypeCheck | None) -> Convert:
    def convert(value: Any) -> Any:
        if isinstance(value, model):
            return value
        if isinstance(check, PydanticCheck):
            last = check.last
            if last is not None and last[0] is value:  # the check just validated it
                check.last = None
                return last[1]
        try:
            return model.model_validate(value)
        except Exception as exc:  # pydantic's ValidationError, without importing pydantic
            raise ConversionFailed(pydantic_problems(exc, "")) from None

    return convert


_ABSTRACT_ARRAYS = frozenset(
    {
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Set,
        collections.abc.MutableSet,
        collections.abc.Collection,
        collections.abc.Iterable,
    }
)
_CONCRETE_ARRAYS = frozenset({list, tuple, set, frozenset})
_MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})


class Converters:
    """Compiles type hints to converters; an object type is compiled once, so recursion ends."""

    def __init__(self, checks: TypeChecks | None = None) -> None:
        self._checks = TypeChecks() if checks is None else checks
        self._objects: dict[type, Convert | None] = {}

    def converter(self, hint: Any) -> Convert | None:
        """The converter for `hint`, or None when a value that passed its check needs none."""
        if hint is Any or hint is object or isinstance(hint, str | typing.ForwardRef):
            return None
        simple = _SIMPLE.get(hint)
        if simple is not None:
            return simple
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Annotated or origin in _REQUIRED_MARKS:
            return self.converter(args[0])
        supertype = getattr(hint, "__supertype__", None)  # a NewType
        if supertype is not None:
            return self.converter(supertype)
        if origin is Union or isinstance(hint, types.UnionType):
            return self._union(args)
        if origin is Literal:
            return _literal_members(args)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _enum(hint)
        if isinstance(hint, type) and issubclass(hint, pathlib.PurePath):
            return _parsed(hint, hint, "a path")
        container = origin if origin is not None else hint
        if container in _CONCRETE_ARRAYS:
            if container is tuple and args and args[-1] is not Ellipsis:
                items = [self.converter(a) for a in args]
                return _fixed_tuple(items)  # an array becomes a tuple
            item = self.converter(args[0]) if args else None
            if container is list:
                return None if item is None else _items(list, item)
            return _items(container, item)
        if container in _ABSTRACT_ARRAYS:
            item = self.converter(args[0]) if args else None
            return None if item is None else _same_container(item)
        if container in _MAPPINGS:
            key, item = (self.converter(args[0]), self.converter(args[1])) if args else (None, None)
            return None if key is item is None else _mapping(key, item)
        if isinstance(hint, type):
            return self._class(hint)
        return None

    def _union(self, args: tuple[Any, ...]) -> Convert | None:
        members = [a for a in args if a is not _NONE_TYPE]
        converters = [self.converter(a) for a in members]
        if all(c is None for c in converters):
            return None
        checks = [self._checks.check(a) for a in members]
        return _Union(list(zip(checks, converters, strict=True)), len(members) < len(args))

    def _class(self, cls: type) -> Convert | None:
        if cls in self._objects:
            return self._objects[cls]
        made: Convert | None = None
        if callable(getattr(cls, "model_validate", None)):
            made = _pydantic(cls, self._checks.check(cls))
        elif is_typeddict(cls):
            made = self._typeddict(cls)
        elif dataclasses.is_dataclass(cls):
            made = self._dataclass(cls)
        self._objects[cls] = made
        return made

    def _dataclass(self, cls: type) -> Convert:
        made = _Dataclass(cls)
        self._objects[cls] = made  # before its fields: a field may refer back to it
        hints = type_hints(cls)
        made.fields = {
            f.name: self.converter(hints.get(f.name, Any))
            for f in dataclasses.fields(cls)
            if f.init
        }
        return made

    def _typeddict(self, cls: type) -> Convert | None:
        made = _TypedDict()
        self._objects[cls] = made  # before its fields: a field may refer back to it
        for name, hint in type_hints(cls).items():
            convert = self.converter(hint)
            if convert is not None:
                made.fields[name] = convert
        return made if made.fields else None


class Conversion:
    """Check and convert values of one hint, the plan made once (see the module docstring).

    For values checked one at a time outside a tool (the model loop's
    structured output); a tool compiles its own plan (`_validation`).

    Args:
        hint: The type the values must have.
    """

    __slots__ = ("_check", "_convert")

    def __init__(self, hint: Any) -> None:
        checks = TypeChecks()
        self._check = checks.check(hint)
        self._convert = Converters(checks).converter(hint)

    def apply(self, value: Any, path: str = "") -> tuple[Any, list[ArgumentProblem]]:
        """`(converted, [])`, or `(value, problems)` when it does not fit.

        The problems' paths start with `path`.
        """
        if self._check is not None:
            found: list[ArgumentProblem] = []
            self._check.explain(value, path, found)
            if found:
                return value, found
        if self._convert is None:
            return value, []
        try:
            return self._convert(value), []
        except ConversionFailed as failed:
            return value, failed.within(path).problems
