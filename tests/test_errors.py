"""The exception tree, and a realistic way to hit each exception."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import pygents_ctx.errors
from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextOverflowError,
    ContextQueue,
    PygentsError,
    SafeExecutionError,
    StoreClosedError,
    StoreSchemaError,
    SummarizationError,
    Turn,
    TurnTimeoutError,
    UnknownModelError,
    UnregisteredAgentError,
    UnregisteredHookError,
    UnregisteredToolError,
    UnserializableHookError,
    WrongRunMethodError,
    tool,
)

TREE: list[tuple[type[Exception], tuple[type[Exception], ...]]] = [
    (SafeExecutionError, ()),
    (WrongRunMethodError, (TypeError,)),
    (TurnTimeoutError, (TimeoutError,)),
    (UnregisteredToolError, (KeyError,)),
    (UnregisteredAgentError, (KeyError,)),
    (UnregisteredHookError, (KeyError,)),
    (UnserializableHookError, (ValueError,)),
    (ContextOverflowError, (ValueError,)),
    (SummarizationError, (RuntimeError,)),
    (StoreClosedError, (RuntimeError,)),
    (StoreSchemaError, (RuntimeError,)),
    (UnknownModelError, (KeyError,)),
]


def test_pygents_error_is_an_exception() -> None:
    assert issubclass(PygentsError, Exception)


@pytest.mark.parametrize(("error", "builtins"), TREE, ids=lambda e: getattr(e, "__name__", ""))
def test_every_error_derives_from_pygents_error_and_its_builtin(
    error: type[Exception], builtins: tuple[type[Exception], ...]
) -> None:
    assert issubclass(error, PygentsError)
    for builtin in builtins:
        assert issubclass(error, builtin)


def test_errors_module_lists_every_error_class_in_its_tree() -> None:
    documented = pygents_ctx.errors.__doc__ or ""
    exported = set(pygents_ctx.errors.__all__)

    assert exported == {"PygentsError"} | {error.__name__ for error, _ in TREE}
    for name in exported:
        assert name in documented


# -- realistic triggers ------------------------------------------------------------------


async def _change_a_running_agent() -> None:
    @tool
    async def rename() -> None:
        AgentRegistry.get("busy").description = "changed while running"

    agent = Agent("busy", "runs", [rename])
    await agent.put(Turn(rename))
    async for _ in agent.run():
        pass


async def _yield_from_a_coroutine_tool() -> None:
    @tool
    async def answer() -> int:
        return 42

    async for _ in Turn(answer).yielding():
        pass


async def _outlast_the_timeout() -> None:
    @tool
    async def slow() -> None:
        await asyncio.sleep(1)

    await Turn(slow, timeout=0.05).returning()


async def _name_a_missing_tool() -> None:
    Turn("missing_tool")


async def _send_to_a_missing_agent() -> None:
    @tool
    async def ping() -> None:
        pass

    agent = Agent("sender", "sends", [ping])
    await agent.send("nobody", Turn(ping))


async def _load_a_missing_hook() -> None:
    ContextQueue.from_dict({"limit": 1, "hooks": {"on_evict": ["missing_hook"]}})


async def _save_a_clashing_hook() -> None:
    def make() -> Callable[..., Awaitable[None]]:
        async def clashing(*args: Any) -> None:
            pass

        return clashing

    ContextQueue[str](limit=1).on_evict(make())
    queue = ContextQueue[str](limit=1)
    queue.on_evict(make())
    queue.to_dict()


TRIGGERS = [
    pytest.param(_change_a_running_agent, SafeExecutionError, "description", id="safe-execution"),
    pytest.param(_yield_from_a_coroutine_tool, WrongRunMethodError, "returning", id="wrong-run"),
    pytest.param(_outlast_the_timeout, TurnTimeoutError, "slow", id="timeout"),
    pytest.param(_name_a_missing_tool, UnregisteredToolError, "missing_tool", id="tool"),
    pytest.param(_send_to_a_missing_agent, UnregisteredAgentError, "nobody", id="agent"),
    pytest.param(_load_a_missing_hook, UnregisteredHookError, "missing_hook", id="hook"),
    pytest.param(_save_a_clashing_hook, UnserializableHookError, "clashing", id="unserializable"),
]


@pytest.mark.parametrize(("trigger", "error", "named"), TRIGGERS)
async def test_each_error_is_raised_by_a_realistic_mistake(
    trigger: Callable[[], Awaitable[None]], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named) as info:
        await trigger()

    assert isinstance(info.value, PygentsError)
