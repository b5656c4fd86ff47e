"""Issue 28: behaviours pygents users rely on, run unchanged on both packages."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

import pygents_ctx
from tests.compat.conftest import Impl
from tests.compat.marks import covers


def _fresh_python(code: str) -> str:
    """Run `code` in a new interpreter importing this checkout's pygents_ctx; its stdout."""
    root = Path(pygents_ctx.__file__).parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@covers("ToolRegistry.all", "ToolRegistry.definitions")
def test_importing_the_package_registers_no_tool(impl: Impl) -> None:
    out = _fresh_python(
        f"import {impl.name} as m\nprint(len(m.ToolRegistry.all()), m.ToolRegistry.definitions())\n"
    )

    assert out.splitlines() == ["0 []"]


@covers("ContextPool")
async def test_a_stored_item_is_in_the_pool(impl: Impl) -> None:
    item = impl.context.ContextItem(id="doc-1", description="d", content=1)
    other = impl.context.ContextItem(id="doc-2", description="d", content=2)
    pool = impl.m.ContextPool()
    await pool.add(item)

    assert item in pool
    assert other not in pool


@covers("ContextPool.get")
def test_get_of_a_missing_id_raises_key_error_carrying_the_key(impl: Impl) -> None:
    pool = impl.m.ContextPool()

    with pytest.raises(KeyError) as raised:
        pool.get("doc-9")

    assert raised.value.args == ("doc-9",)


@covers("ContextPool.on_evict")
async def test_on_evict_sees_the_item_still_in_the_pool(impl: Impl) -> None:
    item = impl.context.ContextItem
    pool = impl.m.ContextPool(limit=1)
    seen: list[Any] = []

    @pool.on_evict
    async def evicted(p: Any, old: Any) -> None:
        seen.append((old.id, p.get(old.id) is old, len(p)))

    await pool.add(item(id="a", description="d", content=1))
    await pool.add(item(id="b", description="d", content=2))

    assert seen == [("a", True, 1)]
    assert [i.id for i in pool] == ["b"]


@covers("hooks")
def test_hook_type_imports_from_the_hooks_module(impl: Impl) -> None:
    from importlib import import_module

    hooks = import_module(f"{impl.name}.hooks")

    assert set(typing.get_args(hooks.HookType)) == {
        impl.m.TurnHook,
        impl.m.AgentHook,
        impl.m.ToolHook,
        impl.m.ContextQueueHook,
        impl.m.ContextPoolHook,
    }


@covers("Turn.metadata")
async def test_turn_metadata_fields_can_be_assigned(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def echo(value: Any = None) -> Any:
        return value

    turn = m.Turn("echo", kwargs={"value": 1})
    await turn.returning()
    turn.metadata.stop_reason = m.StopReason.ERROR

    assert turn.metadata.stop_reason is m.StopReason.ERROR
    assert turn.to_dict()["metadata"]["stop_reason"] == "error"


@covers("Turn.on_timeout")
async def test_on_timeout_sees_the_timeout_as_the_stop_reason(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def slow() -> None:
        await asyncio.sleep(5)

    turn = m.Turn("slow", timeout=0.05)
    seen: list[Any] = []

    @turn.on_timeout
    async def timed_out(t: Any) -> None:
        seen.append(t.metadata.stop_reason)

    with pytest.raises(m.TurnTimeoutError):
        await turn.returning()

    assert seen == [m.StopReason.TIMEOUT]


@covers("Turn", "tool")
async def test_extra_positional_arguments_are_ignored(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def shout(text: str) -> str:
        return text.upper()

    assert await m.Turn("shout", args=["p", "extra"]).returning() == "P"
    assert await shout("q", "extra") == "Q"


async def test_validate_false_calls_the_tool_as_pygents_does() -> None:
    # pygents has no `validate` option (it would be a fixed kwarg there): pygents_ctx only.
    @pygents_ctx.tool(validate=False)
    async def echo(text: str) -> Any:
        return text

    assert await pygents_ctx.Turn("echo", args=[3, "extra"]).returning() == 3


@covers("Tool.before_invoke", "Tool.after_invoke")
async def test_one_hook_stacked_on_two_tools_decorators_fires_for_both(impl: Impl) -> None:
    m = impl.m
    seen: list[Any] = []

    @m.tool
    async def fetch(url: str = "u") -> str:
        return url

    @m.tool
    async def store(key: str = "k") -> str:
        return key

    @fetch.after_invoke
    @store.before_invoke
    async def audit(*args: Any, **kwargs: Any) -> None:
        seen.append((args, kwargs))

    await store(key="k1")
    await fetch(url="u1")

    assert len(seen) == 2
    assert seen[0] == ((), {"key": "k1"})
    assert "u1" in (*seen[1][0], *seen[1][1].values())  # positional here, keyword in pygents


@covers("ContextPool.before_add")
def test_a_hook_of_another_owners_event_is_refused_where_pygents_never_fires_it(
    impl: Impl,
) -> None:
    m = impl.m
    pool = m.ContextPool()

    async def watch(*args: Any) -> None:
        pass

    turn_hook = m.HookRegistry.wrap(watch, m.TurnHook.BEFORE_RUN)
    if impl.is_pygents:
        pool.before_add(turn_hook)  # attached, and never fired for a pool event
    else:
        with pytest.raises(ValueError, match="handles"):
            pool.before_add(turn_hook)


@covers("Agent")
def test_an_agent_given_another_tool_under_a_registered_name_says_so_in_pygents_words(
    impl: Impl,
) -> None:
    m = impl.m

    @m.tool
    async def lookup(x: int = 1) -> int:
        return x

    async def impostor_fn(x: int = 1) -> int:
        return x

    impostor_fn.__name__ = impostor_fn.__qualname__ = "lookup"
    impostor = m.Tool(impostor_fn)

    with pytest.raises(ValueError, match="not the instance given"):
        m.Agent("a", "d", [impostor])


@covers("Turn")
async def test_a_missing_tool_argument_says_required(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def need(a: int, b: str) -> int:
        return a

    with pytest.raises(TypeError, match="required"):
        await m.Turn("need", kwargs={"a": 1}).returning()


@covers("ContextPool.add")
async def test_an_item_without_id_is_refused_in_pygents_words(impl: Impl) -> None:
    pool = impl.m.ContextPool()

    with pytest.raises(ValueError, match="ContextPool requires a ContextItem with both 'id'"):
        await pool.add(impl.context.ContextItem(content=1, description="d"))


@covers("Tool.after_invoke", "Turn.yielding")
async def test_after_invoke_of_a_generator_left_early_fires_once_it_is_closed(impl: Impl) -> None:
    m = impl.m
    seen: list[Any] = []

    @m.tool
    async def count(n: int) -> Any:
        for i in range(n):
            yield i

    @count.after_invoke
    async def done(*args: Any, **kwargs: Any) -> None:
        seen.append([*args, *kwargs.values()][0])

    async with contextlib.aclosing(m.Turn("count", kwargs={"n": 5}).yielding()) as values:
        async for value in values:
            if value == 1:
                break

    # pygents ran the tool to its end before handing out the first value (see the
    # migration page); pygents_ctx streams, and reports the values handed out.
    assert seen == ([[0, 1, 2, 3, 4]] if impl.is_pygents else [[0, 1]])


@covers("Turn.returning")
async def test_a_turn_started_twice_at_once_raises_safe_execution_error(impl: Impl) -> None:
    m = impl.m

    @m.tool
    async def slow() -> int:
        await asyncio.sleep(0.02)
        return 1

    turn = m.Turn("slow")
    first = asyncio.ensure_future(turn.returning())
    await asyncio.sleep(0)

    with pytest.raises(m.SafeExecutionError):
        await turn.returning()
    assert await first == 1


@covers("tool")
def test_a_different_function_under_a_taken_tool_name_raises_value_error(impl: Impl) -> None:
    m = impl.m

    def make() -> Any:
        async def taken(x: int = 1) -> int:
            return x

        return taken

    m.tool(make())
    with pytest.raises(ValueError, match="'taken' already registered"):
        m.tool(make())


@covers("ToolMetadata")
async def test_tool_metadata_is_a_dataclass_for_asdict(impl: Impl) -> None:
    import dataclasses

    @impl.m.tool
    async def double(x: int) -> int:
        return 2 * x

    await double(2)
    fields = dataclasses.asdict(double.metadata)

    assert list(fields) == [
        "name",
        "description",
        "start_time",
        "end_time",
        "input_schema",
        "output_schema",
    ]
    assert fields["name"] == "double"
    assert fields["start_time"] is not None
    assert fields["end_time"] >= fields["start_time"]
    assert fields["output_schema"] == {"type": "integer"}


@covers("HookRegistry.get_by_type")
def test_get_by_type_takes_anything_whose_type_names_the_kind(impl: Impl) -> None:
    m = impl.m

    async def plain(turn: Any) -> None:
        pass

    async def other(agent: Any) -> None:
        pass

    async def started(turn: Any) -> None:
        pass

    plain.type = m.TurnHook.BEFORE_RUN  # type: ignore[attr-defined]
    other.type = m.AgentHook.BEFORE_TURN  # type: ignore[attr-defined]
    wrapped = m.HookRegistry.wrap(started, m.TurnHook.BEFORE_RUN)

    assert m.HookRegistry.get_by_type(m.TurnHook.BEFORE_RUN, [plain, other, wrapped]) == [
        plain,
        wrapped,
    ]
