"""A process that runs a model loop until it waits for approval, or continues one the store holds.

Usage: python approval_worker.py DATABASE SESSION RAN_FILE PHASE [DECISION ...]

DATABASE is `sqlite:` and a SQLite file, or `postgres:` and a DSN; SESSION
the session's id in it.

- `start`: ask the model (scripted: two deletes and a listing), run until the
  loop waits for approval, make the DECISIONs.
- `finish`: a new agent and loop over the same session (nothing else saved),
  make the DECISIONs, run the loop again (the model then answers).

A DECISION is `approve:CALL_ID` or `reject:CALL_ID:REASON`. Each phase prints
one JSON line: how the run ended, the calls still waiting, and the tool
results the model was shown. Every tool call that runs appends a line to
RAN_FILE, so the test sees across processes that none ran twice.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson

from pygents_ctx import Agent, ContextConfig, ModelLoop, ToolUseBlock, tool
from pygents_ctx.context.stores import (
    ContextStore,
    PostgresContextStore,
    SQLiteContextStore,
    connect,
    connect_postgres,
)
from pygents_ctx.testing import ScriptedModel, assistant

DATABASE, SESSION, RAN = sys.argv[1], sys.argv[2], Path(sys.argv[3])
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


async def decide(loop: ModelLoop) -> None:
    for decision in DECISIONS:
        kind, call_id, *reason = decision.split(":", 2)
        if kind == "approve":
            await loop.approve(call_id)
        else:
            await loop.reject(call_id, *reason)


@asynccontextmanager
async def session_store() -> AsyncIterator[ContextStore]:
    kind, _, where = DATABASE.partition(":")
    if kind == "postgres":
        async with connect_postgres(where) as conn:
            yield PostgresContextStore(conn, session_id=SESSION)
    else:
        async with connect(where) as conn:
            yield SQLiteContextStore(conn, session_id=SESSION)


async def main() -> None:
    async with session_store() as store:
        context = ContextConfig(store)
        agent = Agent("janitor", "Cleans up", [delete, list_files], context=context)
        if PHASE == "start":
            model = ScriptedModel([assistant("Cleaning up.", *CALLS)])
            loop = ModelLoop(agent, model)
            finished = await loop.run("Delete a.txt and b.txt")
            await decide(loop)
        else:
            model = ScriptedModel(["Deleted a.txt; b.txt was kept."])
            loop = ModelLoop(agent, model)
            await decide(loop)
            finished = await loop.run()
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
            "listed": [call.id for call in await loop.pending_approvals()],
            "shown": shown,
        }
        print(orjson.dumps(report).decode())


asyncio.run(main())
