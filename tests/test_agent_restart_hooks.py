"""Hooks that survive a restart: a hook defined inside main() is given back when loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentHook,
    AgentRegistry,
    AgentScope,
    ContextItem,
    ContextQueue,
    Hook,
    HookRegistry,
    Turn,
    TurnHook,
    UnregisteredHookError,
    tool,
)

ROOT = Path(__file__).resolve().parents[1]

# A worker that checkpoints after every turn with a hook defined inside main(). The
# first process dies in the middle of its third turn; the second resumes from the
# checkpoint, giving the hook back to from_json, and the hook keeps checkpointing.
WORKER = """
import asyncio, os, sys
from pathlib import Path
from pygents_ctx import Agent, ContextItem, Turn, tool

@tool
async def work(step: int) -> ContextItem[str]:
    if step == 3 and sys.argv[1] == "first":
        os._exit(3)  # the process crashes mid-turn
    return ContextItem(content=f"step {step} done")

async def main(mode: str, state: Path) -> None:
    async def checkpoint(agent: Agent, turn: Turn) -> None:
        state.write_bytes(agent.to_json())

    if mode == "first":
        agent = Agent("worker", "works in steps", [work])
        agent.after_turn(checkpoint)
        for step in (1, 2, 3, 4):
            await agent.put(Turn(work, kwargs={"step": step}))
    elif mode == "resume":
        agent = Agent.from_json(state.read_bytes(), hooks=[checkpoint])
    else:  # a resume that forgets the hook
        agent = Agent.from_json(state.read_bytes())
    async for _ in agent.run():
        pass
    print(*(item.content for item in agent.context_queue), sep="|")

asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
"""


def _run(script: Path, mode: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's pygents_ctx
    return subprocess.run(
        [sys.executable, str(script), mode, str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=script.parent,
        env=env,
        check=False,
    )


def test_a_checkpoint_hook_defined_in_main_restores_in_a_new_process(tmp_path: Path) -> None:
    script, state = tmp_path / "worker.py", tmp_path / "worker.json"
    script.write_text(WORKER)

    crashed = _run(script, "first", state)
    assert crashed.returncode == 3, crashed.stderr
    saved = json.loads(state.read_text())
    assert saved["hooks"] == {"after_turn": ["checkpoint"]}
    assert [t["kwargs"]["step"] for t in saved["queue"]] == [3, 4]

    forgot = _run(script, "forgot", state)
    assert forgot.returncode != 0
    assert "hook 'checkpoint' not found" in forgot.stderr
    assert "Agent.from_json(data, hooks=[checkpoint])" in forgot.stderr

    resumed = _run(script, "resume", state)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "step 1 done|step 2 done|step 3 done|step 4 done"
    final = json.loads(state.read_text())  # the restored hook checkpointed again
    assert final["queue"] == []
    assert final["hooks"] == {"after_turn": ["checkpoint"]}


@pytest.fixture
def work() -> Any:
    @tool
    async def work(step: int) -> ContextItem[str]:
        return ContextItem(content=f"step {step}")

    return work


async def test_given_hooks_are_matched_by_name_and_fire(work: Any) -> None:
    fired: list[str] = []

    def make_agent() -> str:
        agent = Agent("worker", "d", [work])

        @agent.after_turn
        async def checkpoint(a: Agent, turn: Turn) -> None:
            fired.append("old")

        @agent.on_error
        async def failed(turn: Turn, exc: BaseException) -> None:
            pass

        text = agent.to_json()
        AgentRegistry.unregister("worker")
        return text

    text = make_agent()
    HookRegistry.clear()  # as in a new process: the hooks defined in a function are gone

    async def checkpoint(a: Agent, turn: Turn) -> None:
        fired.append("new")

    async def failed(turn: Turn, exc: BaseException) -> None:
        pass

    restored = Agent.from_json(text, hooks=[checkpoint, failed])
    await restored.put(Turn(work, kwargs={"step": 1}))
    async for _ in restored.run():
        pass

    assert fired == ["new"]
    assert [h.fn for h in restored.hooks] == [checkpoint]
    assert [h.kinds for h in restored.hooks] == [(AgentHook.AFTER_TURN,)]
    assert [h.kinds for h in restored.turn_hooks] == [(TurnHook.ON_ERROR,)]
    assert restored.to_dict()["hooks"] == {"after_turn": ["checkpoint"]}  # it saves again


async def test_a_given_hook_wins_over_a_registered_one_and_reaches_the_queue(work: Any) -> None:
    queue: ContextQueue[Any] = ContextQueue(limit=3)

    @queue.on_evict
    async def evicted(q: ContextQueue[Any], item: ContextItem[Any]) -> None:
        pass

    agent = Agent("worker", "d", [work], context_queue=queue)
    text = agent.to_json()
    AgentRegistry.unregister("worker")

    async def fresh(q: ContextQueue[Any], item: ContextItem[Any]) -> None:
        pass

    fresh.__name__ = "evicted"  # the same name, another function (a new process's)
    restored = Agent.from_json(text, hooks=[fresh])

    assert [h.fn for h in restored.context_queue.hooks] == [fresh]


def test_a_missing_hook_names_the_fix_and_registers_nothing(work: Any) -> None:
    saved = {
        "name": "worker",
        "description": "d",
        "tool_names": ["work"],
        "hooks": {"after_turn": ["checkpoint"]},
    }

    with pytest.raises(UnregisteredHookError, match=r"hooks=\[checkpoint\]"):
        Agent.from_dict(saved)

    with pytest.raises(UnregisteredHookError):
        Agent.from_dict(saved, hooks=[])
    # nothing was registered: the name is free
    Agent("worker", "d", [work])


def test_bad_given_hooks_are_refused(work: Any) -> None:
    saved = {"name": "worker", "description": "d", "tool_names": ["work"]}

    def sync_hook(agent: Agent, turn: Turn) -> None:
        pass

    async def twin(agent: Agent) -> None:
        pass

    async def other(agent: Agent) -> None:
        pass

    other.__name__ = "twin"
    with pytest.raises(TypeError, match="hooks= takes hooks or async functions"):
        Agent.from_dict(saved, hooks=[42])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="two hooks named 'twin'"):
        Agent.from_dict(saved, hooks=[twin, other])
    with pytest.raises(TypeError, match="async def"):
        Agent.from_dict({**saved, "hooks": {"after_turn": ["sync_hook"]}}, hooks=[sync_hook])
    given = Hook(twin, AgentHook.BEFORE_TURN)
    with pytest.raises(ValueError, match="not 'after_turn'"):
        Agent.from_dict({**saved, "hooks": {"after_turn": ["twin"]}}, hooks=[given])


async def test_restoring_per_request_in_scopes_gives_each_its_own_hook(work: Any) -> None:
    """The service case: each request restores its agent with its own closure hook."""
    agent = Agent("worker", "d", [work])

    @agent.after_turn
    async def checkpoint(a: Agent, turn: Turn) -> None:
        pass

    text = agent.to_json()
    AgentRegistry.unregister("worker")
    HookRegistry.clear()
    seen: list[int] = []

    def handler_hook(request: int) -> Any:
        async def checkpoint(a: Agent, turn: Turn) -> None:
            seen.append(request)

        return checkpoint

    for request in range(3):
        async with AgentScope():
            restored = Agent.from_json(text, hooks=[handler_hook(request)])
            await restored.put(Turn(work, kwargs={"step": request}))
            async for _ in restored.run():
                pass
            assert restored.to_dict()["hooks"] == {"after_turn": ["checkpoint"]}

    assert seen == [0, 1, 2]


def test_giving_the_registered_hook_s_function_gives_that_hook(work: Any) -> None:
    agent = Agent("worker", "d", [work])

    @agent.after_turn
    async def audit(a: Agent, turn: Turn) -> None:
        pass

    text = agent.to_json()
    AgentRegistry.unregister("worker")

    restored = Agent.from_json(text, hooks=[audit.fn])

    assert restored.hooks == [audit]
