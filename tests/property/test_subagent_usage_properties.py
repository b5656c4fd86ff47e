"""Sub-agent usage over random call trees: every model call recorded once, linked to its call."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    MemoryContextStore,
    ModelLoop,
    ToolPolicy,
    ToolRegistry,
)
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

# Each lead reply: how many sub-agent calls it makes, and for each, whether the
# sub-agent itself asks a sub-sub-agent before answering.
replies = st.lists(st.lists(st.booleans(), min_size=1, max_size=3), max_size=4)
keeps = st.sampled_from(["transcript", "none"])


def _sub_reply(messages: list[Any]) -> Any:
    """Ask the inner sub-agent when the task says so (once), else answer."""
    last = messages[-1]
    if not last.has_tool_results and last.text.startswith("deep"):
        return assistant(tool_call("dig", task="inner"))
    return "sub answer"


@settings(max_examples=40, deadline=None)
@given(script=replies, middle_keep=keeps, inner_keep=keeps, parallel=st.integers(1, 3))
def test_every_model_call_is_one_record_in_the_first_callers_session(
    script: list[list[bool]], middle_keep: Any, inner_keep: Any, parallel: int
) -> None:
    ToolRegistry.clear()
    AgentRegistry.clear()
    inner = ModelLoop(
        Agent("inner", "Digs", [], context=ContextConfig(MemoryContextStore())),
        ScriptedModel(["inner answer"] * 20),
    )
    middle = ModelLoop(
        Agent("middle", "Asks", [], context=ContextConfig(MemoryContextStore())),
        ScriptedModel([_sub_reply] * 40),
        tools=[inner.as_tool("dig", "Dig", keep=inner_keep)],
        tool_policy=ToolPolicy(parallel=parallel),
    )
    lead_replies: list[Any] = [
        assistant(*(tool_call("ask", task="deep" if deep else "flat") for deep in reply))
        for reply in script
    ]
    lead = ModelLoop(
        Agent("lead", "Leads", [], context=ContextConfig(MemoryContextStore())),
        ScriptedModel([*lead_replies, "done"]),
        tools=[middle.as_tool("ask", "Ask", keep=middle_keep)],
        tool_policy=ToolPolicy(parallel=parallel),
    )

    assert asyncio.run(lead.run("go")).text == "done"

    calls = len(lead.model.calls) + len(middle.model.calls) + len(inner.model.calls)
    usage = asyncio.run(lead.agent.context.store.get_usage())
    assert len(usage) == calls  # once each, all in the first caller's session
    assert asyncio.run(middle.agent.context.store.get_usage()) == []
    assert asyncio.run(inner.agent.context.store.get_usage()) == []
    lead_call_ids = {
        call.id
        for message in asyncio.run(lead.agent.context.history())
        for call in message.tool_uses
    }
    linked = [record for record in usage if record.call_id is not None]
    assert len(linked) == len(middle.model.calls) + len(inner.model.calls)
    lead_session = lead.agent.context.session_id
    middles, inners = len(middle.model.calls), len(inner.model.calls)
    if middle_keep == "none":  # no middle transcript: everything is credited to the lead's calls
        assert {r.parent_session for r in linked} <= {lead_session}
        assert {r.call_id for r in linked} == lead_call_ids
        unkept = middles + (inners if inner_keep == "none" else 0)
        assert sum(r.subagent_session is None for r in linked) == unkept
        return
    direct = [r for r in linked if r.parent_session == lead_session]
    assert len(direct) == middles
    assert {r.call_id for r in direct} == lead_call_ids
    transcripts = {r.call_id: r.subagent_session for r in direct}
    assert None not in transcripts.values()
    assert len(set(transcripts.values())) == len(lead_call_ids)  # one transcript per call
    deeper = [r for r in linked if r.parent_session != lead_session]
    assert len(deeper) == inners
    assert {r.parent_session for r in deeper} <= set(transcripts.values())
    assert all((r.subagent_session is None) == (inner_keep == "none") for r in deeper)
