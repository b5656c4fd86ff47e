"""A process that runs a model loop until it waits for approval, or continues one a file holds.

Usage: python approval_worker.py DATABASE STATE_FILE RAN_FILE PHASE [DECISION ...]

- `start`: ask the model (scripted: two deletes and a listing), run until the
  loop waits for approval, make the DECISIONs, save the agent to STATE_FILE.
- `finish`: load the agent from STATE_FILE, make the DECISIONs, run the loop
  again (the model then answers), save the agent again.

A DECISION is `approve:CALL_ID` or `reject:CALL_ID:REASON`. Each phase prints
one JSON line: how the run ended, the calls still waiting, and the tool
results the model was shown. Every tool call that runs appends a line to
RAN_FILE, so the test sees across processes that none ran twice.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import orjson

from pygents_ctx import Agent, ContextConfig, ModelLoop, ToolUseBlock, tool
from pygents_ctx.context.stores import SQLiteContextStore, connect
from pygents_ctx.testing import ScriptedModel, assistant

DATABASE, STATE, RAN = (Path(arg) for arg in sys.argv[1:4])
PHASE, DECISIONS = sys.argv[4], sys.argv[5:]

CALLS = [
    ToolUseBlock("call_del_a", "delete", {"path": "a.txt"}),
    ToolUseBlock("call_list", "list_files", {}),
    ToolUseBlock("call_del_b", "delete", {"path": "b.txt"}),
]


def ran(line: str) -> None:
    with RAN.open("a") as file:
        file.write(line + "\n")


@tool(needs_approval=True)
async def delete(path: str) -> str:
    """Delete a file."""
    ran(f"delete {path}")
    return f"deleted {path}"


@tool
async def list_files() -> str:
    """List the files."""
    ran("list_files")
    return "a.txt b.txt"


def decide(loop: ModelLoop) -> None:
    for decision in DECISIONS:
        kind, call_id, *reason = decision.split(":", 2)
        if kind == "approve":
            loop.approve(call_id)
        else:
            loop.reject(call_id, *reason)


async def main() -> None:
    async with connect(DATABASE) as conn:
        context = ContextConfig(SQLiteContextStore(conn, session_id="cleanup"))
        if PHASE == "start":
            agent = Agent("janitor", "Cleans up", [delete, list_files], context=context)
            model = ScriptedModel([assistant("Cleaning up.", *CALLS)])
            loop = ModelLoop(agent, model)
            finished = await loop.run("Delete a.txt and b.txt")
        else:
            agent = Agent.from_json(STATE.read_bytes(), context=context)
            model = ScriptedModel(["Deleted a.txt; b.txt was kept."])
            loop = ModelLoop(agent, model)
            decide(loop)
            finished = await loop.run()
        if PHASE == "start":
            decide(loop)
        STATE.write_bytes(agent.to_json())
        shown = [
            {"id": result.tool_use_id, "content": result.content, "is_error": result.is_error}
            for call in model.calls
            for message in call.messages
            for result in message.tool_results
        ]
        report = {
            "reason": finished.reason.value,
            "text": finished.text,
            "pending": [call.id for call in finished.pending],
            "listed": [call.id for call in loop.pending_approvals],
            "shown": shown,
        }
        print(orjson.dumps(report).decode())


asyncio.run(main())
