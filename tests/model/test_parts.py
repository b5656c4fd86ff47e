"""Tool definitions (strict and not), the retry policy, settings and prices."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any, Literal, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pygents_ctx import (
    ModelAPIError,
    ModelSettings,
    Pricing,
    RetryPolicy,
    Usage,
    to_anthropic_tools,
    to_openai_tools,
    tool,
)
from pygents_ctx.model.definitions import accepts_null
from pygents_ctx.model.retry import is_transient_status, retry_after_seconds


class Place(TypedDict):
    city: str
    country: str


@dataclass
class Window:
    days: int
    hourly: bool = False


@pytest.fixture
def forecast() -> Any:
    @tool
    async def forecast(
        place: Place, window: Window, unit: Literal["C", "F"] = "C", note: str | None = None
    ) -> str:
        """The forecast for a place."""
        return "sunny"

    return forecast


def test_plain_definitions_carry_the_metadata(forecast: Any) -> None:
    [openai] = to_openai_tools([forecast])
    [anthropic] = to_anthropic_tools([forecast])

    assert openai == {
        "type": "function",
        "function": {
            "name": "forecast",
            "description": "The forecast for a place.",
            "parameters": forecast.metadata.input_schema,
        },
    }
    assert anthropic == {
        "name": "forecast",
        "description": "The forecast for a place.",
        "input_schema": forecast.metadata.input_schema,
    }
    assert openai["function"]["parameters"] is not forecast.metadata.input_schema  # a copy


def test_openai_strict_requires_everything_and_makes_optional_nullable(forecast: Any) -> None:
    [definition] = to_openai_tools([forecast], strict=True)

    function = definition["function"]
    parameters = function["parameters"]
    assert function["strict"] is True
    assert parameters["required"] == ["place", "window", "unit", "note"]
    assert parameters["additionalProperties"] is False
    assert parameters["properties"]["unit"] == {
        "anyOf": [{"type": "string", "enum": ["C", "F"]}, {"type": "null"}],
        "description": "Default: 'C'.",
    }
    # Already nullable: left as it is, its default (None) described.
    assert parameters["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    nested = parameters["properties"]["window"]
    assert nested["required"] == ["days", "hourly"]
    assert nested["additionalProperties"] is False
    assert nested["properties"]["hourly"] == {
        "anyOf": [{"type": "boolean"}, {"type": "null"}],
        "description": "Default: False.",  # a dataclass field's default, read from the schema
    }
    assert parameters["properties"]["place"]["additionalProperties"] is False


def test_anthropic_strict_closes_objects_and_keeps_optional_optional(forecast: Any) -> None:
    [definition] = to_anthropic_tools([forecast], strict=True)

    schema = definition["input_schema"]
    assert definition["strict"] is True
    assert schema["required"] == ["place", "window"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["window"]["required"] == ["days"]
    assert "default" not in str(schema)


@pytest.mark.parametrize(
    ("annotation", "what"),
    [
        ("Any", "accepts any value"),
        ("dict[str, int]", "free-form keys"),
        ("tuple[int, str]", "tuple"),
    ],
)
def test_what_strict_mode_cannot_express_is_refused_by_name(annotation: str, what: str) -> None:
    namespace: dict[str, Any] = {"Any": Any}
    exec(f"async def vague(value: {annotation}) -> str:\n    return ''", namespace)
    vague = tool(namespace["vague"])

    with pytest.raises(ValueError, match=rf"tool 'vague' parameter 'value' .*{what}.*strict=False"):
        to_openai_tools([vague], strict=True)
    assert to_openai_tools([vague])  # without strict mode it is fine


def test_names_the_apis_refuse_and_duplicates_are_refused() -> None:
    @tool
    async def first() -> None:
        """One."""

    @tool
    async def café() -> None:
        """A name the APIs refuse."""

    with pytest.raises(ValueError, match="'café', which the model APIs refuse"):
        to_openai_tools([café])
    with pytest.raises(ValueError, match="two tools are named 'first'"):
        to_openai_tools([first, first])
    with pytest.raises(TypeError, match=r"tools\[0\] must be a Tool"):
        to_anthropic_tools(["first"])  # type: ignore[list-item]


def test_accepts_null_reads_the_schema() -> None:
    assert accepts_null({})
    assert accepts_null({"type": ["string", "null"]})
    assert accepts_null({"enum": ["a", None]})
    assert accepts_null({"anyOf": [{"type": "integer"}, {"type": "null"}]})
    assert not accepts_null({"type": "integer"})


# -- the retry policy -------------------------------------------------------------------------


@given(failures=st.integers(1, 10), jitter=st.floats(0, 1))
def test_backoff_grows_within_its_bounds(failures: int, jitter: float) -> None:
    policy = RetryPolicy(max_attempts=11, initial_delay=0.5, max_delay=8.0, jitter=jitter)

    delay = policy.delay(failures, ModelAPIError("busy", transient=True))

    assert delay is not None
    base = min(8.0, 0.5 * 2 ** (failures - 1))
    assert base * (1 - jitter) <= delay <= base


def test_the_providers_wait_is_used_unless_it_is_too_long() -> None:
    policy = RetryPolicy(max_delay=30.0)

    assert policy.delay(1, ModelAPIError("slow", transient=True, retry_after=12.0)) == 12.0
    assert policy.delay(1, ModelAPIError("slow", transient=True, retry_after=120.0)) is None
    assert policy.delay(1, ModelAPIError("no", transient=False)) is None
    assert policy.delay(1, ValueError("not a model error")) is None
    assert (
        policy.delay(3, ModelAPIError("busy", transient=True)) is None
    )  # the third attempt failed


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_attempts", 0),
        ("initial_delay", -1),
        ("multiplier", 0.5),
        ("jitter", 2),
        ("max_delay", True),
    ],
)
def test_a_bad_policy_is_refused(field: str, value: Any) -> None:
    error = TypeError if isinstance(value, bool) else ValueError
    with pytest.raises(error, match=f"RetryPolicy.{field}"):
        RetryPolicy(**{field: value})


def test_retry_after_headers_in_each_form() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)

    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert 25 < (retry_after_seconds({"retry-after": later}) or 0) <= 30
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after-ms": "x"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize(
    ("status", "headers", "transient"),
    [
        (408, {}, True),
        (409, {}, True),
        (429, {}, True),
        (502, {}, True),
        (400, {}, False),
        (404, {}, False),
        (400, {"x-should-retry": "true"}, True),
        (503, {"x-should-retry": "false"}, False),
    ],
)
def test_which_statuses_are_transient(
    status: int, headers: dict[str, str], transient: bool
) -> None:
    assert is_transient_status(status, headers) is transient


# -- settings and prices ----------------------------------------------------------------------


def test_settings_merge_field_by_field() -> None:
    base = ModelSettings(max_tokens=100, temperature=0.5, extra_body={"a": 1, "b": 1})

    merged = base.merged(ModelSettings(temperature=0.0, extra_body={"b": 2}))

    assert (merged.max_tokens, merged.temperature) == (100, 0.0)
    assert merged.extra_body == {"a": 1, "b": 2}
    assert base.merged(None) is base
    assert repr(ModelSettings(extra_headers={"x": "y"})) == "ModelSettings(...)"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"max_tokens": 0}, ValueError),
        ({"temperature": -1}, ValueError),
        ({"stop": "END"}, TypeError),
        ({"tool_choice": ""}, TypeError),
        ({"parallel_tool_calls": "yes"}, TypeError),
        ({"extra_body": ["a"]}, TypeError),
    ],
)
def test_bad_settings_are_refused(fields: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match="ModelSettings"):
        ModelSettings(**fields)


def test_prices_count_cached_and_written_tokens_apart() -> None:
    prices = Pricing(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)

    cost = prices.cost(
        Usage(1_000_000, 1_000_000, cached_tokens=500_000, cache_write_tokens=250_000)
    )

    assert cost == pytest.approx(0.25 * 3.0 + 0.5 * 0.3 + 0.25 * 3.75 + 15.0)
    assert Pricing(input=1.0, output=1.0).cost(Usage(10, 0, cached_tokens=10)) == pytest.approx(
        1e-5
    )
    with pytest.raises(ValueError, match=r"Pricing\.output"):
        Pricing(input=1.0, output=-1.0)
