"""`LoopLimits`, `ToolPolicy`, `LeasePolicy`: checked when made, frozen, shared by sub-agents."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    ContextConfig,
    LeasePolicy,
    LoopLimits,
    ModelLoop,
    Pricing,
    ToolPolicy,
    ToolResultOffload,
)
from pygents_ctx.testing import ScriptedModel


@pytest.mark.parametrize(
    ("group", "fields", "error", "match"),
    [
        (LoopLimits, {"max_steps": 0}, ValueError, r"LoopLimits\.max_steps must be at least 1"),
        (LoopLimits, {"max_steps": True}, TypeError, r"LoopLimits\.max_steps"),
        (LoopLimits, {"max_steps": 2.5}, TypeError, r"LoopLimits\.max_steps"),
        (LoopLimits, {"max_tokens": -1}, ValueError, r"LoopLimits\.max_tokens"),
        (LoopLimits, {"max_cost": 1.0}, ValueError, r"max_cost needs pricing=Pricing\("),
        (LoopLimits, {"max_cost": math.nan}, ValueError, r"LoopLimits\.max_cost"),
        (LoopLimits, {"pricing": "cheap"}, TypeError, r"LoopLimits\.pricing must be a Pricing"),
        (LoopLimits, {"step_timeout": math.inf}, ValueError, r"LoopLimits\.step_timeout"),
        (LoopLimits, {"output_retries": -1}, ValueError, r"output_retries must be at least 0"),
        (LoopLimits, {"output_retries": "2"}, TypeError, r"output_retries must be an int"),
        (ToolPolicy, {"parallel": 0}, ValueError, r"ToolPolicy\.parallel must be at least 1"),
        (ToolPolicy, {"timeout": -0.5}, ValueError, r"ToolPolicy\.timeout"),
        (ToolPolicy, {"offload": 8000}, TypeError, r"ToolPolicy\.offload must be a ToolResult"),
        (LeasePolicy, {"ttl": 0}, ValueError, r"LeasePolicy\.ttl"),
        (LeasePolicy, {"wait": -1}, ValueError, r"LeasePolicy\.wait"),
    ],
)
def test_a_bad_field_is_refused_naming_it(
    group: type[Any], fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        group(**fields)


def test_the_groups_are_frozen_values() -> None:
    limits = LoopLimits(max_steps=5)

    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_steps = 6  # type: ignore[misc]
    assert limits == LoopLimits(max_steps=5)
    assert dataclasses.replace(limits, max_tokens=1_000).max_steps == 5
    with pytest.raises(ValueError, match="max_steps"):  # a copy is checked too
        dataclasses.replace(limits, max_steps=0)
    assert LeasePolicy(wait=False).wait == 0.0


def test_each_tool_policy_offloads_on_its_own_unless_given_one() -> None:
    offload = ToolResultOffload(max_tokens=2_000)

    assert ToolPolicy().offload is not ToolPolicy().offload
    assert ToolPolicy(offload=offload).offload is offload
    assert ToolPolicy(offload=None).offload is None


@given(
    steps=st.integers(min_value=1, max_value=10**9) | st.none(),
    tokens=st.integers(min_value=1, max_value=10**12) | st.none(),
    cost=st.floats(min_value=1e-6, max_value=1e6) | st.none(),
    timeout=st.floats(min_value=1e-3, max_value=1e6),
    retries=st.integers(min_value=0, max_value=100),
)
def test_any_positive_limits_make_a_loop_that_keeps_them(
    steps: int | None, tokens: int | None, cost: float | None, timeout: float, retries: int
) -> None:
    pricing = Pricing(input=1.0, output=2.0) if cost is not None else None
    limits = LoopLimits(steps, tokens, cost, pricing, timeout, retries)
    agent = Agent("limited", "", [], context=ContextConfig.default(), replace=True)

    loop = ModelLoop(agent, ScriptedModel([]), limits=limits, lease=None)

    assert loop.limits is limits
    assert loop.lease is None


@given(value=st.integers(max_value=0) | st.floats(max_value=0) | st.just(math.inf))
def test_no_limit_below_one_step_is_taken(value: float) -> None:
    with pytest.raises((TypeError, ValueError), match="max_steps"):
        LoopLimits(max_steps=value)  # type: ignore[arg-type]
