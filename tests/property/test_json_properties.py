"""`to_json()` writes only what reads back equal: any other value is refused, naming it.

Small and large outputs are checked in different ways (see `pygents_ctx._json`),
so each property runs on both.
"""

from __future__ import annotations

import asyncio
import enum
import math
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import ContextItem, ContextQueue
from pygents_ctx._json import dumps

SETTINGS = settings(max_examples=80, deadline=None)


class Colour(enum.Enum):
    RED = "red"


class Size(enum.StrEnum):
    LARGE = "large"  # a str: JSON gives back a str equal to it


text = st.text(max_size=6)
faithful = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
    | st.just(Size.LARGE)
)
unfaithful = st.sampled_from([math.nan, math.inf, -math.inf, Colour.RED, uuid.UUID(int=5)])
values = st.recursive(
    faithful | unfaithful,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(text, inner, max_size=3)
    ),
    max_leaves=10,
)
PADDING = pytest.mark.parametrize("padding", [0, 50], ids=["small", "large"])


def _unfaithful(value: Any) -> bool:
    if isinstance(value, dict):
        return any(map(_unfaithful, value.values()))
    if isinstance(value, list | tuple):
        return any(map(_unfaithful, value))
    return isinstance(value, Colour | uuid.UUID) or (
        isinstance(value, float) and not math.isfinite(value)
    )


def _as_json_gives_it_back(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _as_json_gives_it_back(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_json_gives_it_back(item) for item in value]
    return value


@PADDING
def test_dumps_refuses_exactly_what_would_not_read_back_equal(padding: int) -> None:
    @SETTINGS
    @given(value=values)
    def check(value: Any) -> None:
        data = {"value": value, "padding": ["x" * 20] * padding}
        if _unfaithful(value):
            with pytest.raises(TypeError, match=r"data\.value"):
                dumps(data, "data")
        else:
            assert orjson.loads(dumps(data, "data"))["value"] == _as_json_gives_it_back(value)

    check()


@PADDING
def test_queue_to_json_refuses_exactly_what_would_not_read_back_equal(padding: int) -> None:
    with asyncio.Runner() as runner:

        @SETTINGS
        @given(value=values)
        def check(value: Any) -> None:
            queue: ContextQueue[Any] = ContextQueue(limit=padding + 1)
            runner.run(queue.append(ContextItem(content=value, description="first", id="a")))
            for i in range(padding):
                runner.run(queue.append(ContextItem(content=f"padding {i}")))
            if _unfaithful(value):
                with pytest.raises(TypeError, match=r"ContextQueue\.items\[0\]\.content"):
                    queue.to_json()
            else:
                restored = ContextQueue.from_json(queue.to_json())
                assert restored.items[0].content == _as_json_gives_it_back(value)

        check()
