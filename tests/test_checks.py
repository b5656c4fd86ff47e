"""The shared argument checks: what each accepts, and the error for what it does not."""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pygents_ctx._checks import (
    each_once,
    fraction,
    instances,
    number,
    storable_text,
    strings,
    whole_number,
)

anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
)


@given(value=anything, least=st.none() | st.integers(-5, 5), span=st.none() | st.integers(0, 10))
def test_whole_number_takes_exactly_the_ints_in_range(
    value: Any, least: int | None, span: int | None
) -> None:
    most = None if span is None else (least or 0) + span
    is_int = isinstance(value, int) and not isinstance(value, bool)
    in_range = is_int and (least is None or value >= least) and (most is None or value <= most)
    if in_range:
        assert whole_number(value, "n", least=least, most=most) is value
    else:
        with pytest.raises(ValueError if is_int else TypeError, match=r"^n must be "):
            whole_number(value, "n", least=least, most=most)


@given(value=anything, least=st.none() | st.floats(-5, 5), above=st.booleans())
def test_number_takes_exactly_the_finite_numbers_in_range(
    value: Any, least: float | None, above: bool
) -> None:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    in_range = (
        is_number
        and math.isfinite(value)
        and (least is None or value > least or (value == least and not above))
    )
    if in_range:
        assert number(value, "x", least=least, above=above) == value
    else:
        with pytest.raises(ValueError if is_number else TypeError, match=r"^x must be a"):
            number(value, "x", least=least, above=above)


@given(value=anything | st.sampled_from([0, 1, 0.0, 1.0]), zero=st.booleans(), one=st.booleans())
def test_fraction_takes_exactly_the_numbers_between_0_and_1_its_ends_allow(
    value: Any, zero: bool, one: bool
) -> None:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    in_range = (
        is_number and (value >= 0 if zero else value > 0) and (value <= 1 if one else value < 1)
    )
    if in_range:
        assert fraction(value, "x", zero=zero, one=one) == value
    else:
        with pytest.raises(ValueError if is_number else TypeError, match=r"^x must be a number"):
            fraction(value, "x", zero=zero, one=one)


# Any character, a NUL and lone surrogates (category Cs) included.
any_text = st.text(st.characters(blacklist_categories=()) | st.just("\x00"), max_size=6)


@given(value=anything | any_text, empty=st.booleans())
def test_storable_text_takes_exactly_what_every_store_can_hold(value: Any, empty: bool) -> None:
    if not isinstance(value, str):
        with pytest.raises(TypeError, match=r"^name must be a str, not "):
            storable_text(value, "name", empty=empty)
        return
    try:
        value.encode()
        utf8 = True
    except UnicodeEncodeError:
        utf8 = False
    if (value or empty) and "\x00" not in value and utf8:
        assert storable_text(value, "name", empty=empty) is value
        # What it takes, a database's text column keeps as it was.
        with closing(sqlite3.connect(":memory:")) as db:
            assert db.execute("SELECT ?", (value,)).fetchone() == (value,)
    else:
        with pytest.raises(ValueError, match=r"^name (must not be empty|.* holds a (NUL|lone))"):
            storable_text(value, "name", empty=empty)


@given(items=st.lists(st.integers(-3, 3), max_size=6))
def test_each_once_takes_exactly_the_lists_without_a_repeated_key(items: list[int]) -> None:
    keys = [abs(item) for item in items]
    if len(set(keys)) == len(keys):
        assert each_once(items, abs, "ids") is items
    else:
        first = next(key for index, key in enumerate(keys) if key in keys[:index])
        with pytest.raises(ValueError, match=rf"^ids holds {first} twice$"):
            each_once(items, abs, "ids")


def test_the_messages_name_the_argument_the_bound_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"^search limit must be between 1 and 50, not 99; ask"):
        whole_number(99, "search limit", least=1, most=50, fix="ask for fewer")
    with pytest.raises(TypeError, match=r"^batch must be an int, not bool True$"):
        whole_number(True, "batch")
    with pytest.raises(ValueError, match=r"^ttl must be a finite number more than 0, not 0"):
        number(0, "ttl", above=True)
    with pytest.raises(ValueError, match=r"^overhead must be a finite number, not nan"):
        number(math.nan, "overhead", least=None)
    with pytest.raises(ValueError, match=r"^low_water must be a number above 0 and below 1, not 1"):
        fraction(1, "low_water", one=False, fix="e.g. 0.5")
    with pytest.raises(ValueError, match=r"^jitter must be a number at least 0 and at most 1, not"):
        fraction(math.inf, "jitter", zero=True)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("search", "must be a collection of strings, not 'search'; write"),
        (3, "must be a collection of strings, not 3"),
        (["a", 1], "must hold only strings, not int 1"),
    ],
)
def test_strings_refuses_a_lone_string_and_anything_not_a_string(value: Any, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        strings(value, "keep_tools", fix="write keep_tools=('search',)")


def test_strings_keeps_the_order_and_reads_any_iterable_once() -> None:
    assert strings(iter(["b", "a", "b"]), "ids", fix="") == ["b", "a", "b"]


class Thing:
    pass


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (Thing(), r"^things must be a list of Thing objects, not Thing"),
        ("ab", r"^things must be a list of Thing objects, not str 'ab'"),
        ({"a": 1}, r"^things must be a list of Thing objects, not dict"),
        ([Thing(), 3], r"^things\[1\] must be a Thing, not int 3"),
    ],
)
def test_instances_refuses_one_alone_and_names_the_wrong_item(value: Any, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        instances(value, Thing, "things")


def test_instances_keeps_the_items_in_order() -> None:
    made = [Thing(), Thing()]
    assert instances(iter(made), Thing, "things") == made
