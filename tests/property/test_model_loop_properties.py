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
    LoopLimits,
    LoopStop,
    MemoryContextStore,
    Message,
    ModelLoop,
    ModelResponse,
    ToolPolicy,
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
    loop = ModelLoop(
        agent,
        ScriptedModel(messages),
        tool_policy=ToolPolicy(parallel=parallel),
        limits=LoopLimits(max_steps=max_steps),
    )

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


@settings(max_examples=40, deadline=None)
@given(
    script=replies,
    refused_at=st.integers(0, 6),
    refused_calls=st.lists(st.sampled_from(CALL_KINDS), max_size=3),
    max_steps=st.integers(1, 8),
)
def test_a_refusal_ends_the_run_there_and_leaves_no_call_unanswered(
    script: list[list[str]], refused_at: int, refused_calls: list[str], max_steps: int
) -> None:
    ToolRegistry.clear()
    AgentRegistry.clear()
    ran: list[int] = []

    @tool
    async def echo(value: int) -> int:
        """Echo."""
        ran.append(value)
        return value

    counter = itertools.count()
    messages: list[Any] = [
        assistant(*[_call(kind, next(counter)) for kind in kinds]) if kinds else "done"
        for kinds in script
    ][:refused_at]
    calls = [_call(kind, 1000 + n) for n, kind in enumerate(refused_calls)]
    messages.append(ModelResponse(assistant(*calls), refusal="I won't."))
    store = MemoryContextStore()
    agent = Agent(f"r{next(_names)}", "", [echo], context=ContextConfig(store))
    loop = ModelLoop(agent, ScriptedModel(messages), limits=LoopLimits(max_steps=max_steps))

    finished = asyncio.run(loop.run("go"))

    history = asyncio.run(store.get_history())
    called = [call.id for message in history for call in message.tool_uses]
    answered = [result.tool_use_id for message in history for result in message.tool_results]
    assert called == answered  # every stored call has its result, in order
    assert not any(value >= 1000 for value in ran)  # the refused reply's calls never ran
    if finished.reason is LoopStop.REFUSAL:  # reached within max_steps; a text "done" ends it first
        assert finished.steps == len(loop.model.calls) == len(messages)  # type: ignore[attr-defined]
        assert (history[-1].text, finished.refusal) == ("I won't.", "I won't.")
    else:
        assert finished.reason in (LoopStop.ANSWER, LoopStop.MAX_STEPS)
