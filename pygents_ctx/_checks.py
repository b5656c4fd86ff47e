"""The argument checks every layer shares: one mistake, one check, one wording.

Each names the argument as the caller spells it (`"search limit"`,
`"Usage.input_tokens"`), raises `TypeError` for the wrong kind of value and
`ValueError` for a value out of range, and may add the fix after a semicolon.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Final, TypeVar

from pygents_ctx._json import shown

__all__ = [
    "LARGEST",
    "SMALLEST",
    "each_once",
    "fraction",
    "instances",
    "number",
    "storable_text",
    "strings",
    "unicode_text",
    "whole_number",
]

T = TypeVar("T")

# The integers SQLite's INTEGER and PostgreSQL's bigint hold: a count, an id or a
# position a store keeps or looks up lies between them.
SMALLEST: Final = -(2**63)
LARGEST: Final = 2**63 - 1


def whole_number(
    value: object, name: str, *, least: int | None = 0, most: int | None = None, fix: str = ""
) -> int:
    """`value` if it is an int (a bool is not) from `least` to `most` (None: no bound).

    Raises:
        TypeError: It is not an int.
        ValueError: It is below `least` or above `most`.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {_kind(value)}{_fix(fix)}")
    if (least is not None and value < least) or (most is not None and value > most):
        raise ValueError(f"{name} must be {_range(least, most)}, not {value}{_fix(fix)}")
    return value


def number(
    value: object, name: str, *, least: float | None = 0.0, above: bool = False, fix: str = ""
) -> float:
    """`value` as a float if it is a finite int or float (a bool is not) of at least `least`.

    With `above`, it must be more than `least` (a timeout: `least=0, above=True`);
    with `least=None`, any finite number will do.

    Raises:
        TypeError: It is not an int or a float.
        ValueError: It is infinite, NaN, or below (or with `above`, not above) `least`.
    """
    given = _as_float(value, name, fix)
    if least is None:
        bound = ""
    elif above:
        bound = f" more than {least:g}"
    else:
        bound = f" of at least {least:g}"
    if not math.isfinite(given) or (
        least is not None and (given < least or (above and given == least))
    ):
        raise ValueError(f"{name} must be a finite number{bound}, not {value}{_fix(fix)}")
    return given


def fraction(
    value: object, name: str, *, zero: bool = False, one: bool = True, fix: str = ""
) -> float:
    """`value` as a float if it is a number above 0 and at most 1: a share of a whole.

    `zero=True` lets 0 in too (a jitter of 0: none); `one=False` keeps 1 out
    (a share that must leave something).

    Raises:
        TypeError: It is not an int or a float.
        ValueError: It is NaN or outside that range.
    """
    share = _as_float(value, name, fix)
    low, high = ("at least 0" if zero else "above 0"), ("at most 1" if one else "below 1")
    # NaN fails every comparison: refused with the rest.
    if not ((share >= 0 if zero else share > 0) and (share <= 1 if one else share < 1)):
        raise ValueError(f"{name} must be a number {low} and {high}, not {value!r}{_fix(fix)}")
    return share


def storable_text(value: object, name: str, *, empty: bool = False, fix: str = "") -> str:
    """`value` if it is a str that every store can hold: a name, an id or a text.

    One rule on every backend, the in-memory ones too, so that each refuses the
    same values: no NUL (PostgreSQL's `text` cannot hold it) and no lone
    surrogate (UTF-8 cannot encode it, so no database can). Empty only with
    `empty=True`.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty, or holds a NUL or a lone surrogate.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_kind(value)}{_fix(fix)}")
    if not value and not empty:
        raise ValueError(f"{name} must not be empty{_fix(fix)}")
    if "\x00" in value:
        raise ValueError(
            f"{name} {shown(value)} holds a NUL character ('\\x00'), which PostgreSQL text "
            "cannot hold, so no store takes it; remove it"
        )
    return unicode_text(value, name)


def unicode_text(value: str, name: str) -> str:
    """`value` if UTF-8 can encode it: it holds no lone surrogate (which a str may).

    Raises:
        ValueError: It holds one; the message names `name` and where it is.
    """
    if not value.isascii():  # the quick answer for most text
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{name} {shown(value)} holds a lone surrogate ({value[exc.start]!r} at "
                f"{exc.start}), which UTF-8 cannot encode; pass valid Unicode text"
            ) from None
    return value


def strings(value: object, name: str, fix: str) -> list[str]:
    """The strings of `value`, a collection of them (one string alone is refused), in order.

    Raises:
        TypeError: `value` is a string, not iterable, or holds something else.
    """
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a collection of strings, not {value!r}{_fix(fix)}")
    listed = list(value)
    for item in listed:
        if not isinstance(item, str):
            raise TypeError(f"{name} must hold only strings, not {_kind(item)}{_fix(fix)}")
    return listed


def instances(value: object, kind: type[T], name: str) -> list[T]:
    """The items of `value`, a collection of `kind` objects, in order.

    One `kind` object alone, a string, bytes or a mapping is refused: each is
    a likely slip for a list of one.

    Raises:
        TypeError: `value` is not such a collection, or an item is not a `kind`.
    """
    if isinstance(value, kind | str | bytes | Mapping) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list of {kind.__name__} objects, not {_kind(value)}")
    listed = list(value)
    for index, item in enumerate(listed):
        if not isinstance(item, kind):
            raise TypeError(f"{name}[{index}] must be a {kind.__name__}, not {_kind(item)}")
    return listed


def each_once(items: list[T], key: Callable[[T], Hashable], name: str, fix: str = "") -> list[T]:
    """`items`, once no two of them share a `key`: a batch that names each thing once.

    Raises:
        ValueError: A key appears twice; the message names it.
    """
    seen: set[Hashable] = set()
    for item in items:
        known = key(item)
        if known in seen:
            raise ValueError(f"{name} holds {known!r} twice{_fix(fix)}")
        seen.add(known)
    return items


def _as_float(value: object, name: str, fix: str) -> float:
    """`value` as a float if it is an int or a float (a bool is not); else a TypeError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, not {_kind(value)}{_fix(fix)}")
    return float(value)


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:120]


def _range(least: int | None, most: int | None) -> str:
    if most is None:
        return f"at least {least}"
    if least is None:
        return f"at most {most}"
    return f"between {least} and {most}"


def _fix(fix: str) -> str:
    return f"; {fix}" if fix else ""
