"""Tools reach the board of the agent that runs them through a `TaskBoard` parameter."""

from __future__ import annotations

from typing import Any

import pytest

from pygents_ctx import Agent, ContextConfig, MemoryContextStore, SQLiteContextStore, Turn, tool
from pygents_ctx.context.stores import SQLiteConnection
from pygents_ctx.memory import (
    InMemoryTaskStore,
    SQLiteTaskStore,
    TaskBoard,
    TaskStatus,
    TaskStore,
)


def planning_tools() -> tuple[Any, Any]:
    @tool
    async def plan(steps: list[str], board: TaskBoard) -> list[int]:
        return [task.id for task in await board.add_tasks(steps)]

    @tool
    async def start(task_id: int, board: TaskBoard) -> str:
        task = await board.update_status(task_id, TaskStatus.IN_PROGRESS)
        return f"{board.agent}@{board.conversation}: {task.title}"

    return plan, start


async def drain(agent: Agent) -> list[Any]:
    return [value async for _, value in agent.run()]


async def test_a_tool_gets_the_board_of_its_agents_conversation(
    sqlite_conn: SQLiteConnection,
) -> None:
    plan, start = planning_tools()
    store = SQLiteTaskStore(sqlite_conn)
    context = ContextConfig(SQLiteContextStore(sqlite_conn, session_id="chat-42"))
    agent = Agent("planner", "plans", [plan, start], context=context, resources={TaskBoard: store})
    await agent.put(Turn(plan, kwargs={"steps": ["search", "read"]}))
    await agent.put(Turn(start, kwargs={"task_id": 2}))

    assert await drain(agent) == [[1, 2], "planner@chat-42: read"]
    board = store.board("chat-42", "planner")
    assert [t.status for t in await board.tasks()] == [TaskStatus.PENDING, TaskStatus.IN_PROGRESS]
    assert "board" not in plan.metadata.input_schema["properties"]


async def test_agents_sharing_a_store_each_get_their_own_board() -> None:
    plan, _ = planning_tools()
    store = InMemoryTaskStore()
    conversation = MemoryContextStore(session_id="chat")
    for name, steps in (("a", ["one"]), ("b", ["two", "three"])):
        agent = Agent(
            name, "", [plan], context=ContextConfig(conversation), resources={TaskBoard: store}
        )
        await agent.put(Turn(plan, kwargs={"steps": steps}))
        await drain(agent)

    assert await store.boards() == [("chat", "a"), ("chat", "b")]
    assert [t.title for t in await store.board("chat", "b").tasks()] == ["two", "three"]


async def test_without_a_context_store_the_board_is_keyed_by_the_agents_name() -> None:
    plan, _ = planning_tools()
    store = InMemoryTaskStore()
    agent = Agent("solo", "", [plan], resources={TaskBoard: store})
    for steps in (["first run"], ["second run"]):
        await agent.put(Turn(plan, kwargs={"steps": steps}))
        await drain(agent)

    board = store.board("solo", "solo")
    assert [t.title for t in await board.tasks()] == ["first run", "second run"]


@pytest.mark.parametrize("settle", [True, False])
async def test_a_store_can_settle_the_board_when_the_run_ends(settle: bool) -> None:
    plan, start = planning_tools()
    store = InMemoryTaskStore(settle_after_run=settle)
    agent = Agent("worker", "", [plan, start], resources={TaskBoard: store})
    await agent.put(Turn(plan, kwargs={"steps": ["left running", "never started"]}))
    await agent.put(Turn(start, kwargs={"task_id": 1}))
    await drain(agent)

    statuses = [t.status for t in await store.board("worker", "worker").tasks()]
    first = TaskStatus.SUCCEEDED if settle else TaskStatus.IN_PROGRESS
    assert statuses == [first, TaskStatus.PENDING]


async def test_a_run_that_fails_leaves_its_board_as_it_was() -> None:
    @tool
    async def start_then_fail(board: TaskBoard) -> None:
        [task] = await board.add_tasks(["doomed"])
        await board.update_status(task.id, TaskStatus.IN_PROGRESS)
        raise RuntimeError("the tool broke")

    store = InMemoryTaskStore(settle_after_run=True)
    agent = Agent("worker", "", [start_then_fail], resources={TaskBoard: store})
    await agent.put(Turn(start_then_fail))
    with pytest.raises(RuntimeError, match="the tool broke"):
        await drain(agent)

    [task] = await store.board("worker", "worker").tasks()
    assert task.status is TaskStatus.IN_PROGRESS


async def test_a_fixed_board_can_be_given_instead_of_a_store() -> None:
    plan, _ = planning_tools()
    board = InMemoryTaskStore().board("project-x", "team")
    agent = Agent("anyone", "", [plan], resources={TaskBoard: board})
    await agent.put(Turn(plan, kwargs={"steps": ["shared"]}))
    await drain(agent)

    assert [t.title for t in await board.tasks()] == ["shared"]


async def test_a_tool_needing_a_board_says_how_to_give_one() -> None:
    plan, _ = planning_tools()
    agent = Agent("boardless", "", [plan])
    await agent.put(Turn(plan, kwargs={"steps": ["x"]}))

    with pytest.raises(TypeError, match=r"needs a TaskBoard.*resources=\{TaskBoard: \.\.\.\}"):
        await drain(agent)


def test_a_task_store_is_a_run_resource_for_task_boards() -> None:
    store: TaskStore = InMemoryTaskStore()
    agent = Agent("a", "", [], resources={TaskBoard: store})

    assert agent.resources == {TaskBoard: store}
    with pytest.raises(TypeError, match=r"resources\[TaskBoard\] must be a TaskBoard"):
        Agent("b", "", [], resources={TaskBoard: "not a board"})
