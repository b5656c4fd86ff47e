"""The child process of the DBOS tests: one durable model loop run, or the recovery of one.

    python dbos_worker.py SYSTEM_DB BACKEND TARGET WORKDIR MODE [ARGS...]

SYSTEM_DB is DBOS's system database URL; BACKEND `sqlite` (TARGET a database
file) or `postgres` (TARGET a DSN) is where the conversation is kept;
WORKDIR holds the logs the parent counts:

- `model.log`: `start DIGEST` when the model is called, `done DIGEST` when it replied;
- `tool.log`: `start KEY ORDER` / `end KEY ORDER` around each `refund` call (KEY its
  idempotency key).

Modes (each prints one JSON line with the run's result, then exits):

- `run RUNNER SESSION WORKFLOW PROMPT [PAUSE]`: launches DBOS and runs the
  workflow WORKFLOW (a `ModelLoop`, or an `Assistant` when RUNNER is
  `assistant`) on the session. PAUSE stops the run for good at a point, after
  printing it: `stored` (the model replied and DBOS recorded the step, its
  reply not stored yet), `recorded` (DBOS recorded a `refund` call's step, the
  journal has not finished it), `tool` (inside the `refund` call) or `after` (the
  durable run ended, inside the workflow's own step after it): the parent
  kills the process there.
- `recover WORKFLOW`: launches DBOS, which recovers the workflows of the dead
  process, and waits for WORKFLOW's result.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import orjson
from dbos import DBOS, SetWorkflowID

from pygents_ctx import (
    Agent,
    AgentScope,
    Assistant,
    ContextConfig,
    IdempotencyKey,
    LeasePolicy,
    Message,
    ModelLoop,
    tool,
)
from pygents_ctx.context.stores import ContextStore, SQLiteContextStore, connect
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.integrations.dbos import durable_run
from pygents_ctx.model import ModelResponse
from pygents_ctx.testing import assistant, tool_call

SYSTEM_DB, BACKEND, TARGET, WORKDIR, MODE, *ARGS = sys.argv[1:]
WORK = Path(WORKDIR)
PAUSE = os.environ.get("DBOS_TEST_PAUSE", "")
LEASE = LeasePolicy(ttl=2.0)  # a killed run's lease runs out soon


def log(name: str, line: str) -> None:
    fd = os.open(WORK / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())  # one write: a line is whole or absent
    finally:
        os.close(fd)


def say(line: str) -> None:
    print(line, flush=True)


async def pause(point: str) -> None:
    if point == PAUSE:
        say(f"at {point}")
        await asyncio.sleep(3600)  # until killed


class CountingModel:
    """Calls `refund` for the prompt's order, then answers with its result; logs each call."""

    async def complete(self, window: Any, tools: Any = (), *, settings: Any = None) -> Any:
        messages = list(window.messages if hasattr(window, "messages") else window)
        digest = hashlib.sha256(
            orjson.dumps([m.text for m in messages] + [str(m.tool_results) for m in messages])
        ).hexdigest()[:16]
        log("model.log", f"start {digest}")
        await asyncio.sleep(0.05)
        last = messages[-1]
        if last.tool_results:
            reply = assistant("done: " + "; ".join(str(r.content) for r in last.tool_results))
        elif " and " in last.text:  # two refunds at once
            first, second = last.text.split(" and ")
            reply = assistant(tool_call("refund", order=first), tool_call("refund", order=second))
        else:
            reply = assistant(tool_call("refund", order=last.text))
        log("model.log", f"done {digest}")
        return ModelResponse(reply)

    async def stream(self, window: Any, tools: Any = (), *, settings: Any = None) -> Any:
        yield await self.complete(window, tools, settings=settings)


@tool
async def refund(order: str, key: IdempotencyKey) -> str:
    """Refund an order; the calls of "order 5 and order 6" run at once."""
    log("tool.log", f"start {key} {order}")
    if order != "order 6":  # 6 finishes; 5 stops (PAUSE=tool) once the journal holds 6's result
        if order == "order 5":
            await finished("order 6")
        await pause("tool")
    await asyncio.sleep(0.05)
    log("tool.log", f"end {key} {order}")
    return f"refunded {order}"


STORES: list[Any] = []  # the run's store: the journal "order 5" waits on


async def finished(order: str) -> None:
    """Wait until the journal holds the result of the call refunding `order`."""
    if PAUSE != "tool":
        return
    while True:
        keys = [
            line.split()[1]
            for line in (WORK / "tool.log").read_text().splitlines()
            if line.startswith("start") and line.endswith(f" {order}")
        ]
        if keys:
            journal = await STORES[0].get_journal([keys[0].split(":", 1)[1]])
            if any(result is not None for result in journal.values()):
                return
        await asyncio.sleep(0.02)


class Pausing(ContextStore):
    """Pauses where the test kills: after a reply is stored, after a call is recorded."""

    async def append(self, message: Message, **options: Any) -> Any:
        if message.role == "assistant":
            await pause("stored")
        return await super().append(message, **options)

    async def journal_finish(self, call_id: str, result: Any) -> None:
        await pause("recorded")
        await super().journal_finish(call_id, result)


class PausingSQLite(Pausing, SQLiteContextStore):
    pass


class PausingPostgres(Pausing, PostgresContextStore):
    pass


SUPPORT = Assistant(
    "support",
    model=CountingModel(),
    tools=[refund],
    lease=LEASE,
    store=TARGET if BACKEND == "sqlite" else None,
)


@DBOS.step()
async def after(text: str) -> str:
    await pause("after")
    return text.upper()


@DBOS.workflow()
async def answer(runner: str, session: str, prompt: str) -> dict[str, Any]:
    if runner == "assistant":
        finished = await durable_run(SUPPORT, prompt, session=session)
    elif BACKEND == "sqlite":
        async with connect(TARGET) as conn:
            finished = await loop_run(PausingSQLite(conn, session_id=session), prompt)
    else:
        async with connect_postgres(TARGET) as pg:
            finished = await loop_run(PausingPostgres(pg, session_id=session), prompt)
    return {"text": finished.text, "after": await after(finished.text), "pid": os.getpid()}


async def loop_run(store: Any, prompt: str) -> Any:
    STORES.append(store)
    with AgentScope():
        agent = Agent("worker", "refunds", [refund], context=ContextConfig(store))
        return await durable_run(ModelLoop(agent, CountingModel(), lease=LEASE), prompt)


async def main() -> None:
    DBOS(config={"name": "pygents-dbos-test", "system_database_url": SYSTEM_DB})
    DBOS.launch()
    try:
        if MODE == "run":
            runner, session, workflow, prompt = ARGS
            with SetWorkflowID(workflow):
                result = await answer(runner, session, prompt)
        else:
            (workflow,) = ARGS
            handle = await DBOS.retrieve_workflow_async(workflow)
            result = await handle.get_result()
        say(orjson.dumps(result).decode())
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    asyncio.run(main())
