"""What loads can be saved: one depth rule for saved agents, checked when they load."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import Agent, AgentRegistry, Turn, tool

LIMIT = 254  # the dicts and lists within one another that to_json() writes


async def echo(value: object = None) -> None:
    """Takes anything."""


def nested(depth: int, inner: Any = 1) -> Any:
    """`inner` inside `depth` lists and dicts, alternating."""
    for level in range(depth):
        inner = [inner] if level % 2 else {"k": inner}
    return inner


def saved_agent() -> dict[str, Any]:
    async def make() -> dict[str, Any]:
        agent = Agent("deep", "d", [tool(echo)])
        await agent.put(Turn(echo, kwargs={"value": 0}))
        return agent.to_dict()

    try:
        return asyncio.run(make())
    finally:
        AgentRegistry.clear()


# A turn's kwargs sit 4 levels down: the agent, its queue, the turn, its kwargs.
AROUND_KWARGS = 4


def with_argument(depth: int, *, surrogate: bool = False) -> dict[str, Any]:
    document = copy.deepcopy(BASE)  # the tool is registered
    inner = "\ud800" if surrogate else 1  # orjson cannot write a lone surrogate at all
    document["queue"][0]["kwargs"]["value"] = nested(depth - AROUND_KWARGS, inner)
    return document


BASE: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _registered_tool() -> None:
    """Each test has registries of its own: register the tool there, save the agent."""
    BASE.clear()
    BASE.update(saved_agent())


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(LIMIT - 6, LIMIT + 60))
def test_an_agent_that_loads_saves_again(depth: int) -> None:
    document = with_argument(depth)
    if depth > LIMIT:
        with pytest.raises(ValueError, match=f"more than {LIMIT} levels deep"):
            Agent.from_dict(document)
        return
    try:
        assert orjson.loads(Agent.from_dict(document).to_json()) == document
    finally:
        AgentRegistry.clear()


def test_the_limit_is_exact_for_from_dict_and_from_json() -> None:
    assert Agent.from_dict(with_argument(LIMIT)).to_json()
    AgentRegistry.clear()
    too_deep = r"saved Agent is nested more than 254 levels deep .*; flatten it"
    with pytest.raises(ValueError, match=too_deep):
        Agent.from_dict(with_argument(LIMIT + 1))
    # orjson reads JSON nested up to 1024 levels: from_json checks as from_dict does.
    text = b'{"value": ' + b"[" * 300 + b"1" + b"]" * 300 + b"}"
    document = copy.deepcopy(BASE)
    document["queue"][0]["kwargs"] = "KWARGS"
    data = orjson.dumps(document).replace(b'"KWARGS"', text)
    with pytest.raises(ValueError, match=too_deep):
        Agent.from_json(data)


def test_the_depth_is_counted_whatever_else_orjson_cannot_write() -> None:
    # A lone surrogate stops orjson before the depth does: the depth is counted anyway.
    with pytest.raises(ValueError, match="more than 254 levels deep"):
        Agent.from_dict(with_argument(LIMIT + 1, surrogate=True))
