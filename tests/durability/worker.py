"""The child process of the durability tests: one store session, driven from stdin.

    python worker.py BACKEND TARGET SESSION MODE [ARGS...]

BACKEND is `sqlite` (TARGET a database file) or `postgres` (TARGET a DSN).
Every mode prints `ready` once the store is open. Modes:

- `crash RUN`: appends forever (single messages and batches, with a
  compaction now and then), printing each index once the call that wrote it
  has returned, that is, once it is acknowledged. It ends only when killed.
- `append NAME COUNT`: waits for a line, appends `NAME:0` ... one message at a
  time, prints `half` halfway and waits for another line, then exits.
- `churn NAME COUNT MAX_TOKENS`: appends `NAME:i` and reports a model call's
  usage to an `AutoCompactStore` after each message, so it compacts whenever
  the history is over `MAX_TOKENS`. Its summaries list what they cover.
- `serve`: one JSON command per line in, one JSON reply per line out (see `serve`).
- `hold TTL BLOCK`: forever: takes the session's lease (waiting as long as it
  takes), appends BLOCK messages `TOKEN:PID:i` a little apart, so a block
  outlasts TTL and the lease must be renewed, and lets go.
- `loop TTL`: forever: runs a `ModelLoop` on the session (one tool call and an
  answer, each model call and the tool a little slow), waiting for the lease
  as long as it takes.
- `stall TTL`: one `ModelLoop` run per line, on the session the line names
  (see `stall`), which can stop inside its tool call or model call until told
  to go on: the parent freezes the process there.

Anything raised reaches stderr and a non-zero exit code: the tests read both.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from pygents_ctx import (
    Agent,
    AutoCompactStore,
    ContextConfig,
    LeasePolicy,
    Message,
    ModelLoop,
    tool,
)
from pygents_ctx.context.stores import ContextStore, SQLiteContextStore, connect
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

PADDING = " word" * 20  # long enough that a summary listing ids is smaller


def message(text: str, index: int = 0) -> Message:
    return Message("user" if index % 2 == 0 else "assistant", text + PADDING)


def covered(messages: list[Message], previous: str | None) -> str:
    """A summary that names every message it covers: `previous` ids, then theirs."""
    ids = [m.text.split()[0] for m in messages]
    return ",".join([previous, *ids] if previous else ids)


async def list_summarizer(messages: list[Message], previous: str | None) -> str:
    return covered(messages, previous)


async def read_line() -> str:
    return await asyncio.to_thread(sys.stdin.readline)


def say(*lines: object) -> None:
    print(*lines, sep="\n", flush=True)


# -- modes ------------------------------------------------------------------------------


async def crash(store: ContextStore, run: str) -> None:
    index = 0
    for step in itertools.count(1):
        if step % 5 == 3:
            batch = [message(f"{run}:{index + k}", index + k) for k in range(3)]
            await store.append_many(batch, run_id=run)
            await store.add_context_tokens(1, 1)
            done = range(index, index + 3)
        else:
            await store.append(message(f"{run}:{index}", index), run_id=run)
            done = range(index, index + 1)
        say(*done)
        index = done[-1] + 1
        if step % 30 == 0:  # fold the oldest ten into a summary: a kill may land in it too
            oldest = await store.get_history()
            await store.replace_prefix(10, [Message("user", "S")], expected=oldest[:10])


async def append(store: ContextStore, name: str, count: int) -> None:
    await read_line()  # start together
    for index in range(count):
        if index == count // 2:  # both finish their first half before either goes on
            say("half")
            await read_line()
        await store.append(message(f"{name}:{index}", index))
    say("done")


async def churn(store: ContextStore, name: str, count: int, max_tokens: int) -> None:
    compacting = AutoCompactStore(store, list_summarizer, keep_recent=2, max_tokens=max_tokens)
    await read_line()
    for index in range(count):
        await compacting.append(message(f"{name}:{index}", index))
        await compacting.add_context_tokens(await compacting.token_count(), 0)
    say("done")


async def hold(store: ContextStore, ttl: float, block: int) -> None:
    while True:
        async with store.lease(ttl=ttl, wait=math.inf, create=True) as lease:
            for index in range(block):
                await lease.check()
                await store.append(Message("user", f"{lease.token}:{os.getpid()}:{index}"))
                await asyncio.sleep(ttl / 10)


async def model_loop(store: ContextStore, ttl: float) -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        await asyncio.sleep(ttl / 4)
        return a + b

    async def think(messages: list[Message]) -> Message:
        await asyncio.sleep(ttl / 4)
        if messages[-1].tool_results:
            return Message("assistant", "the sum is 5")
        return assistant(tool_call("add", a=2, b=3))

    agent = Agent(f"worker-{os.getpid()}", "adds", [add], context=ContextConfig(store))
    loop = ModelLoop(agent, ScriptedModel([think] * 100_000), lease=LeasePolicy(ttl, math.inf))
    for index in itertools.count():
        await loop.run(f"{os.getpid()}:{index}: what is 2 + 3?")


async def stall(store: ContextStore, ttl: float) -> None:
    """Runs, one JSON command a line: `{"session": "s", "stall": "tool" | "model" | null}`.

    Each runs a `ModelLoop` on session `s` (one tool call, then the answer
    "the sum is 5"), waiting for its lease as long as it takes. With `stall`,
    the run prints `{"stalled": "tool"}` (or `"model"`) inside that call, the
    first time it gets there, and waits for a line before the call returns.
    The reply: `{"ok": the answer}` or `{"error": name, "message": ...}`.
    """
    pending: list[str | None] = [None]  # where this run stops, until it has

    async def stop_if(here: str) -> None:
        if pending[0] == here:
            pending[0] = None
            say(orjson.dumps({"stalled": here}).decode())
            await read_line()

    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        await stop_if("tool")
        return a + b

    async def think(messages: list[Message]) -> Message:
        await stop_if("model")
        if messages[-1].tool_results:
            return Message("assistant", "the sum is 5")
        return assistant(tool_call("add", a=2, b=3))

    while line := await read_line():
        command = orjson.loads(line)
        pending[0] = command["stall"]
        session = on_session(store, command["session"])
        agent = Agent(
            f"stall-{session.session_id}",
            "adds",
            [add],
            context=ContextConfig(session),
            replace=True,  # a command for a session seen before makes its agent again
        )
        loop = ModelLoop(agent, ScriptedModel([think] * 10), lease=LeasePolicy(ttl, math.inf))
        try:
            finished = await loop.run(f"{os.getpid()}: what is 2 + 3?")
        except Exception as exc:
            reply = {"error": type(exc).__name__, "message": str(exc)}
        else:
            reply = {"ok": finished.text}
        say(orjson.dumps(reply).decode())


def on_session(store: ContextStore, session: str) -> ContextStore:
    if isinstance(store, SQLiteContextStore):
        return SQLiteContextStore(store.connection, session_id=session)
    assert isinstance(store, PostgresContextStore)
    return PostgresContextStore(store.connection, session_id=session)


async def serve(store: ContextStore, delete: Callable[[], Awaitable[None]]) -> None:
    """Commands, one JSON object a line; each reply is `{"ok": ...}` or `{"error": ...}`.

    - `{"op": "append", "texts": [...], "run_id": null}`
    - `{"op": "clear"}`, `{"op": "clear_run", "run_id": "r"}`
    - `{"op": "replace_prefix", "count": 2, "texts": ["S"]}`
    - `{"op": "delete_session"}`: deletes the session's row with SQL, behind
      the stores' backs, as an operator's clean-up script would
    - `{"op": "history"}`: the live and archived texts this store reads
    - `{"op": "compact", "summarizer": "slow" | "fail" | "list", "keep_recent": 2}`:
      "slow" prints `{"summarizing": true}` and waits for a line before it
      returns the list summary; "fail" raises
    """
    while line := await read_line():
        command = orjson.loads(line)
        try:
            reply = await _command(store, delete, command)
        except Exception as exc:  # the test decides whether it was expected
            reply = {"error": type(exc).__name__, "message": str(exc)}
        say(orjson.dumps(reply).decode())


async def _command(
    store: ContextStore, delete: Callable[[], Awaitable[None]], command: dict[str, Any]
) -> dict[str, Any]:
    op = command["op"]
    if op == "append":
        batch = [message(text, i) for i, text in enumerate(command["texts"])]
        await store.append_many(batch, run_id=command.get("run_id"))
    elif op == "clear":
        await store.clear()
    elif op == "clear_run":
        await store.clear_run(command["run_id"])
    elif op == "replace_prefix":
        await store.replace_prefix(command["count"], [message(t) for t in command["texts"]])
    elif op == "delete_session":
        await delete()
    elif op == "history":
        live = await store.get_history()
        everything = await store.get_history(include_archived=True)
        return {"ok": True, "live": [m.text for m in live], "all": [m.text for m in everything]}
    elif op == "compact":
        return {"ok": await _compact(store, command["summarizer"], command["keep_recent"])}
    else:
        raise ValueError(f"unknown op {op!r}")
    return {"ok": True}


async def _compact(store: ContextStore, kind: str, keep_recent: int) -> bool:
    async def slow(messages: list[Message], previous: str | None) -> str:
        say(orjson.dumps({"summarizing": True}).decode())
        await read_line()
        return covered(messages, previous)

    async def fail(messages: list[Message], previous: str | None) -> str:
        raise ConnectionError("the model is down")

    summarizer = {"slow": slow, "fail": fail, "list": list_summarizer}[kind]
    return await AutoCompactStore(store, summarizer, keep_recent=keep_recent).compact()


# -- opening the store ----------------------------------------------------------------


async def main(backend: str, target: str, session: str, mode: str, *args: str) -> None:
    store: ContextStore
    if backend == "sqlite":
        async with connect(target) as conn:
            store = SQLiteContextStore(conn, session_id=session)

            async def delete_sqlite() -> None:
                sql = "DELETE FROM pygents_sessions WHERE session_id = ?"
                await conn.run(lambda db: db.execute(sql, (session,)))

            await run(mode, store, delete_sqlite, args)
    else:
        async with connect_postgres(target) as pg:
            store = PostgresContextStore(pg, session_id=session)

            async def delete_postgres() -> None:
                sql = "DELETE FROM pygents_sessions WHERE session_id = %s"
                await pg.run(lambda db: db.execute(sql, (session,)))

            await run(mode, store, delete_postgres, args)


async def run(
    mode: str, store: ContextStore, delete: Callable[[], Awaitable[None]], args: tuple[str, ...]
) -> None:
    say("ready")
    if mode == "crash":
        await crash(store, args[0])
    elif mode == "append":
        await append(store, args[0], int(args[1]))
    elif mode == "churn":
        await churn(store, args[0], int(args[1]), int(args[2]))
    elif mode == "serve":
        await serve(store, delete)
    elif mode == "hold":
        await hold(store, float(args[0]), int(args[1]))
    elif mode == "loop":
        await model_loop(store, float(args[0]))
    elif mode == "stall":
        await stall(store, float(args[0]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
