"""Differences pygents' own test suite found (bench/pygents_suite.py), each now the same.

Every scenario runs on pygents 0.7.0 and on pygents_ctx and asserts the same
observable behaviour.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.compat.conftest import Impl
from tests.compat.marks import covers


@covers("HookRegistry.get_by_type")
@pytest.mark.parametrize("kinds", [tuple, frozenset])
def test_get_by_type_reads_a_collection_of_kinds_in_type(impl: Impl, kinds: type) -> None:
    m = impl.m

    async def watcher(agent: Any) -> None:
        pass

    watcher.type = kinds([m.AgentHook.BEFORE_TURN])  # type: ignore[attr-defined]

    assert m.HookRegistry.get_by_type(m.AgentHook.BEFORE_TURN, [watcher]) == [watcher]
    assert m.HookRegistry.get_by_type(m.AgentHook.AFTER_TURN, [watcher]) == []


@covers("HookRegistry.wrap")
def test_wrapping_a_hook_for_its_own_kind_returns_that_hook(impl: Impl) -> None:
    m = impl.m

    @m.hook(m.TurnHook.BEFORE_RUN)
    async def existing(turn: Any) -> None:
        pass

    assert m.HookRegistry.wrap(existing, m.TurnHook.BEFORE_RUN) is existing
    assert m.HookRegistry.get("existing") is existing


def test_wrapping_a_hook_for_another_kind_makes_a_hook_of_its_function() -> None:
    # pygents returns the hook with its own kind; pygents_ctx returns a hook that
    # handles the kind asked for (migration page, "Smaller differences").
    import pygents_ctx as m

    m.HookRegistry.clear()
    try:

        @m.hook(m.TurnHook.BEFORE_RUN)
        async def watch(turn: Any) -> None:
            pass

        other = m.HookRegistry.wrap(watch, m.TurnHook.ON_TIMEOUT)
        assert other is not watch
        assert other.fn is watch.fn
        assert other.type is m.TurnHook.ON_TIMEOUT
        assert m.HookRegistry.get("watch") is watch
    finally:
        m.HookRegistry.clear()


@covers("Tool.after_invoke")
def test_after_invoke_gets_what_a_generator_yielded_before_the_consumer_broke_off(
    impl: Impl,
) -> None:
    m = impl.m
    received: list[list[int]] = []

    @m.tool
    async def three_values() -> Any:
        yield 10
        yield 20
        yield 30

    # (A hook that awaits is cancelled there on Python 3.12, in pygents as here: asyncio.run()
    # ends by cancelling what is left, the generator's closing included. On 3.13 it runs.)
    @three_values.after_invoke
    async def seen(values: list[int]) -> None:
        received.append(list(values))

    async def take_one() -> None:
        async for value in three_values():
            if value == 10:
                break

    asyncio.run(take_one())
    assert received == [[10]]


@covers("Tool.after_invoke")
def test_after_invoke_does_not_fire_for_a_generator_that_raised(impl: Impl) -> None:
    m = impl.m
    received: list[Any] = []

    @m.tool
    async def fails() -> Any:
        yield 1
        raise RuntimeError("broke")

    @fails.after_invoke
    async def seen(values: list[int]) -> None:
        received.append(values)

    async def drain() -> None:
        async for _ in fails():
            pass

    with pytest.raises(RuntimeError, match="broke"):
        asyncio.run(drain())
    assert received == []


@covers("ContextPool.from_dict")
def test_a_saved_pool_item_without_an_id_is_refused_with_pygents_phrase(impl: Impl) -> None:
    saved = {"limit": 2, "items": [{"content": 1, "description": "d"}], "hooks": {}}
    with pytest.raises(ValueError, match="ContextPool requires a ContextItem with 'id' set"):
        impl.context.ContextPool.from_dict(saved)


@covers("ToolMetadata.input_schema")
def test_a_parameter_defaulting_to_none_has_pygents_schema(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def search(query: str, limit: int | None = None, page: str | None = None) -> str:
        return query

    assert search.metadata.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "page": {"type": "string"},
        },
        "required": ["query"],
    }


@covers("Tool.hooks")
def test_a_tools_hooks_answer_for_kind_and_hook_pairs(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def double(n: int) -> int:
        return 2 * n

    async def noted(*args: Any, **kwargs: Any) -> None:
        pass

    async def before(n: int) -> None:
        pass

    after = double.after_invoke(noted)  # pygents holds (AFTER_INVOKE, after)
    double.hooks.append((m.ToolHook.BEFORE_INVOKE, before))
    double.hooks.append((m.ToolHook.ON_ERROR, after))  # another event of the same function

    assert (m.ToolHook.AFTER_INVOKE, after) in double.hooks
    assert (m.ToolHook.BEFORE_INVOKE, before) in double.hooks
    assert (m.ToolHook.ON_ERROR, after) in double.hooks
    assert (m.ToolHook.BEFORE_INVOKE, after) not in double.hooks
    assert (m.ToolHook.AFTER_INVOKE, before) not in double.hooks
    assert double.hooks.index((m.ToolHook.ON_ERROR, after)) == 2
    assert double.hooks.count((m.ToolHook.AFTER_INVOKE, after)) == 1
    assert double.hooks.count((m.ToolHook.ON_YIELD, after)) == 0

    double.hooks.remove((m.ToolHook.AFTER_INVOKE, after))
    assert (m.ToolHook.AFTER_INVOKE, after) not in double.hooks
    assert len(double.hooks) == 2
    with pytest.raises(ValueError, match="not in list"):
        double.hooks.remove((m.ToolHook.AFTER_INVOKE, after))
    with pytest.raises(ValueError, match="not in list"):
        double.hooks.index((m.ToolHook.ON_ERROR, after), 0, 1)
