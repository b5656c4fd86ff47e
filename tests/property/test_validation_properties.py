"""Argument checks agree with what the schema describes, for any JSON a model could send."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pygents_ctx import ToolArgumentsError, tool

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)


async def _search(
    query: str,
    limit: int | None = None,
    ratio: float = 0.5,
    exact: bool = False,
    tags: list[str] | None = None,
    weights: dict[str, float] | None = None,
) -> None:
    pass


SEARCH = tool(_search)


def _fits(name: str, value: Any) -> bool:
    """What the schema says of each parameter, written out independently of the checks."""

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def is_number(v: Any) -> bool:
        return is_int(v) or isinstance(v, float)

    return {
        "query": lambda: isinstance(value, str),
        "limit": lambda: value is None or is_int(value),
        "ratio": lambda: is_number(value),
        "exact": lambda: isinstance(value, bool),
        "tags": lambda: (
            value is None or (isinstance(value, list) and all(isinstance(t, str) for t in value))
        ),
        "weights": lambda: (
            value is None or (isinstance(value, dict) and all(is_number(w) for w in value.values()))
        ),
    }[name]()


@given(
    st.dictionaries(
        st.sampled_from(["query", "limit", "ratio", "exact", "tags", "weights", "qurey"]), JSON
    )
)
def test_a_call_is_refused_exactly_when_an_argument_does_not_fit(arguments: dict[str, Any]) -> None:
    check = SEARCH._validator
    assert check is not None
    expected_paths = {
        name for name, value in arguments.items() if name != "qurey" and not _fits(name, value)
    }
    missing = "query" not in arguments
    try:
        check((), arguments)
    except ToolArgumentsError as exc:
        found = {(p.kind, p.path.split("[")[0]) for p in exc.problems}
    else:
        found = set()

    expected = {("invalid", name) for name in expected_paths}
    if missing:
        expected.add(("missing", "query"))
        if "qurey" in arguments:  # the misspelling, reported only because query is missing
            expected.add(("unknown", "qurey"))
    assert found == expected
