"""ModelLoop invariants over random scripts: every call answered, in order, once."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    LoopStop,
    MemoryContextStore,
    Message,
    ModelLoop,
    ToolRegistry,
    ToolUseBlock,
    tool,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

_names = itertools.count()

CALL_KINDS = ("ok", "fails", "unknown", "raw")


def _call(kind: str, n: int) -> ToolUseBlock:
    if kind == "ok":
        return tool_call("echo", value=n)
    if kind == "fails":
        return tool_call("boom", value=n)
    if kind == "unknown":
        return tool_call("nowhere", value=n)
    return ToolUseBlock(f"raw_{n}", "echo", {"_raw_arguments": "{"})


replies = st.lists(st.lists(st.sampled_from(CALL_KINDS), max_size=3), max_size=6)


@settings(max_examples=40, deadline=None)
@given(script=replies, parallel=st.integers(1, 3), max_steps=st.integers(1, 8))
def test_every_call_is_answered_once_in_order(
    script: list[list[str]], parallel: int, max_steps: int
) -> None:
    ToolRegistry.clear()
    AgentRegistry.clear()

    @tool
    async def echo(value: int) -> int:
        """Echo."""
        await asyncio.sleep(0)
        return value

    @tool
    async def boom(value: int) -> int:
        """Fail."""
        raise RuntimeError(f"boom {value}")

    counter = itertools.count()
    kinds_by_id: dict[str, str] = {}
    messages: list[Any] = []
    for kinds in script:
        calls = [_call(kind, next(counter)) for kind in kinds]
        kinds_by_id.update((call.id, kind) for call, kind in zip(calls, kinds, strict=True))
        messages.append(assistant(*calls) if calls else "done")
    messages.append("final")
    store = MemoryContextStore()
    agent = Agent(f"p{next(_names)}", "", [echo, boom], context=ContextConfig(store))
    loop = ModelLoop(agent, ScriptedModel(messages), parallel_tools=parallel, max_steps=max_steps)

    finished = asyncio.run(loop.run("go"))

    history = asyncio.run(store.get_history())
    for index, message in enumerate(history):
        if message.tool_uses:  # answered by the next message, in the calls' order
            answer = history[index + 1]
            assert answer.role == "user"
            assert [r.tool_use_id for r in answer.tool_results] == [c.id for c in message.tool_uses]
        for result in message.tool_results:
            assert result.is_error == (kinds_by_id[result.tool_use_id] != "ok")
    model_calls = len(loop.model.calls)  # type: ignore[attr-defined]
    assert finished.steps == model_calls <= max_steps
    if finished.reason is LoopStop.ANSWER:
        assert history[-1] == Message("assistant", finished.text)
