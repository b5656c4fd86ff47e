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
    BlobNotFoundError,
    CollectionNotFoundError,
    ConcurrentModificationError,
    ContextOverflowError,
    ContextQueue,
    EntityNotFoundError,
    InMemoryVectorStore,
    LeaseLostError,
    MemoryContextStore,
    Message,
    MissingExtensionError,
    ModelAPIError,
    ModelError,
    ModelFallbackError,
    ModelResponseError,
    OutputValidationError,
    PygentsError,
    RetryLimitError,
    SafeExecutionError,
    SessionBusyError,
    SessionNotFoundError,
    StoreClosedError,
    StoreSchemaError,
    SubagentError,
    SummarizationError,
    TaskNotFoundError,
    TaskTransitionError,
    ToolArgumentsError,
    ToolResultNotFoundError,
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
    (ToolArgumentsError, (ValueError, TypeError)),
    (UnregisteredAgentError, (KeyError,)),
    (UnregisteredHookError, (KeyError,)),
    (UnserializableHookError, (ValueError,)),
    (ContextOverflowError, (ValueError,)),
    (SummarizationError, (RuntimeError,)),
    (StoreClosedError, (RuntimeError,)),
    (StoreSchemaError, (RuntimeError,)),
    (ConcurrentModificationError, (RuntimeError,)),
    (SessionNotFoundError, (KeyError,)),
    (SessionBusyError, (RuntimeError,)),
    (LeaseLostError, (RuntimeError,)),
    (UnknownModelError, (KeyError,)),
    (CollectionNotFoundError, (KeyError,)),
    (EntityNotFoundError, (KeyError,)),
    (BlobNotFoundError, (KeyError,)),
    (ToolResultNotFoundError, (KeyError,)),
    (TaskNotFoundError, (KeyError,)),
    (TaskTransitionError, (ValueError,)),
    (RetryLimitError, (TaskTransitionError, ValueError)),
    (ModelError, (RuntimeError,)),
    (ModelAPIError, (ModelError, RuntimeError)),
    (ModelFallbackError, (ModelAPIError, ModelError, RuntimeError)),
    (ModelResponseError, (ModelError, RuntimeError)),
    (OutputValidationError, (ModelError, RuntimeError)),
    (SubagentError, (ModelError, RuntimeError)),
    (MissingExtensionError, (RuntimeError,)),
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

    # ArgumentProblem is not an error: it is what ToolArgumentsError lists.
    assert exported == {"PygentsError", "ArgumentProblem"} | {error.__name__ for error, _ in TREE}
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


async def _call_a_tool_with_a_misspelled_argument() -> None:
    @tool
    async def greet(name: str) -> str:
        return f"hi {name}"

    await Turn(greet, kwargs={"nme": "Ada"}).returning()


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


async def _compact_a_prefix_another_writer_changed() -> None:
    store = MemoryContextStore([Message("user", "hello"), Message("assistant", "hi")])
    seen = await store.get_history()
    await store.replace_prefix(2, [Message("user", "another worker's summary")])
    await store.replace_prefix(2, [Message("user", "my summary")], expected=seen)


async def _walk_from_a_missing_entity() -> None:
    from pygents_ctx.memory import InMemoryGraphStore

    await InMemoryGraphStore().neighbors("nowhere")


async def _read_a_missing_blob() -> None:
    from pygents_ctx.memory import InMemoryBlobStore

    await InMemoryBlobStore().get("missing.pdf")


async def _finish_a_missing_task() -> None:
    from pygents_ctx.memory import InMemoryTaskStore

    await InMemoryTaskStore().board("chat", "agent").update_status(404, "succeeded")


async def _claim_a_claimed_task() -> None:
    from pygents_ctx.memory import InMemoryTaskStore

    board = InMemoryTaskStore().board("chat", "agent")
    [task] = await board.add_tasks(["contested"])
    await board.update_status(task.id, "in_progress")
    await board.update_status(task.id, "in_progress")


async def _retry_past_the_limit() -> None:
    from pygents_ctx.memory import InMemoryTaskStore

    board = InMemoryTaskStore().board("chat", "agent")
    [task] = await board.add_tasks(["flaky"], max_attempts=1)
    await board.update_status(task.id, "failed")
    await board.retry(task.id)


async def _run_on_a_session_another_run_holds() -> None:
    store = MemoryContextStore(session_id="chat")
    async with store.lease(owner="first-run"):
        await store.lease().acquire()


async def _lease_a_misspelled_session() -> None:
    from pygents_ctx.context.stores import SQLiteContextStore, connect

    async with connect(":memory:") as conn:
        await SQLiteContextStore(conn, session_id="chat").append(Message("user", "hi"))
        await SQLiteContextStore(conn, session_id="caht").lease().acquire()


async def _renew_a_lease_another_took_over() -> None:
    store = MemoryContextStore(session_id="chat")
    stalled = await store.lease(ttl=0.01, renew=False).acquire()
    await asyncio.sleep(0.02)
    await store.lease().acquire()
    await stalled.renew()


async def _search_a_missing_collection() -> None:
    await InMemoryVectorStore().search("notes", [1.0, 0.0])


TRIGGERS = [
    pytest.param(_change_a_running_agent, SafeExecutionError, "description", id="safe-execution"),
    pytest.param(_yield_from_a_coroutine_tool, WrongRunMethodError, "returning", id="wrong-run"),
    pytest.param(_outlast_the_timeout, TurnTimeoutError, "slow", id="timeout"),
    pytest.param(_name_a_missing_tool, UnregisteredToolError, "missing_tool", id="tool"),
    pytest.param(
        _call_a_tool_with_a_misspelled_argument,
        ToolArgumentsError,
        "nme: not a parameter of this tool; did you mean 'name'",
        id="tool-arguments",
    ),
    pytest.param(_send_to_a_missing_agent, UnregisteredAgentError, "nobody", id="agent"),
    pytest.param(_load_a_missing_hook, UnregisteredHookError, "missing_hook", id="hook"),
    pytest.param(_save_a_clashing_hook, UnserializableHookError, "clashing", id="unserializable"),
    pytest.param(
        _compact_a_prefix_another_writer_changed,
        ConcurrentModificationError,
        "oldest 2 messages",
        id="concurrent-modification",
    ),
    pytest.param(_walk_from_a_missing_entity, EntityNotFoundError, "nowhere", id="entity"),
    pytest.param(_read_a_missing_blob, BlobNotFoundError, "missing.pdf", id="blob"),
    pytest.param(_finish_a_missing_task, TaskNotFoundError, "404", id="task"),
    pytest.param(_claim_a_claimed_task, TaskTransitionError, "it is already", id="claim"),
    pytest.param(_retry_past_the_limit, RetryLimitError, "all 1 of its attempts", id="retry-limit"),
    pytest.param(_search_a_missing_collection, CollectionNotFoundError, "notes", id="collection"),
    pytest.param(_run_on_a_session_another_run_holds, SessionBusyError, "first-run", id="busy"),
    pytest.param(_lease_a_misspelled_session, SessionNotFoundError, "'caht'", id="session"),
    pytest.param(_renew_a_lease_another_took_over, LeaseLostError, "took it over", id="lease-lost"),
]


@pytest.mark.parametrize(("trigger", "error", "named"), TRIGGERS)
async def test_each_error_is_raised_by_a_realistic_mistake(
    trigger: Callable[[], Awaitable[None]], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named) as info:
        await trigger()

    assert isinstance(info.value, PygentsError)
