"""Durable runs under kill -9: a `ModelLoop` worker killed at random moments, many times.

    python -m bench.kills [--kills N] [--backend sqlite|postgres|both] [--seed S]

Each life is a real process (forked from this one, so a restart costs no
imports) that opens the store and runs `ModelLoop`s on one of a few sessions,
forever: a new prompt, or (half the time, when a session's last run did not
end) a resumed run without one, or a new prompt over the unfinished calls.
Its model is a `ScriptedModel` that calls the `refund` tool (once or twice
at a time) and then answers; `refund` is slow and appends an effect line to
a file unless one with its `IdempotencyKey` is there. The parent kills each
life with SIGKILL at a random moment and starts the next one.

Then it reads every session back and counts what must be 0: a finished tool
call run again (a key started twice), a duplicate effect, a "not run" label
on a call that started, a finished model call repeated (two assistant
messages in a row), and transcripts a provider would reject (a call without
exactly one result in the next message, or a result without its call).
It writes bench/out/kills.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import random
import select
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from pygents_ctx import (
    Agent,
    AgentScope,
    ContextConfig,
    IdempotencyKey,
    LeasePolicy,
    Message,
    ModelLoop,
    tool,
)
from pygents_ctx.context.stores import ContextStore, SQLiteContextStore, connect
from pygents_ctx.context.stores.sqlite import SQLiteConnection
from pygents_ctx.errors import SessionBusyError
from pygents_ctx.model._tool_calls import CANCELLED, INTERRUPTED, NOT_RUN
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

SESSIONS = 8  # a killed life's lease runs out before its session comes round again
LEASE_TTL = 1.0
TOOL_SECONDS = 0.03
MODEL_SECONDS = 0.005


@dataclass
class Report:
    """What a series of kills left behind: counts to `not_run` say what ran; the rest must be 0."""

    backend: str
    kills: int = 0
    seconds: float = 0.0
    tool_calls: int = 0
    finished: int = 0
    interrupted: int = 0
    not_run: int = 0
    repeated_tool_calls: int = 0
    duplicate_effects: int = 0
    not_run_on_started: int = 0
    repeated_model_calls: int = 0
    invalid_transcripts: int = 0
    worker_errors: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.repeated_tool_calls
            or self.duplicate_effects
            or self.not_run_on_started
            or self.repeated_model_calls
            or self.invalid_transcripts
            or self.worker_errors
        )


# ----------------------------------------------------------------------------- a life


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def _log(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())  # one write: a line is whole or absent
    finally:
        os.close(fd)


def _tools(workdir: Path) -> Any:
    log, effects = workdir / "tool.log", workdir / "effects.log"

    @tool
    async def refund(order: str, key: IdempotencyKey) -> str:
        """Refund an order (once per key, however often it is called)."""
        _log(log, f"start {key}")
        await asyncio.sleep(TOOL_SECONDS)
        if f"effect {key}" not in _lines(effects):
            _log(effects, f"effect {key}")
        await asyncio.sleep(TOOL_SECONDS / 3)
        _log(log, f"end {key}")
        return f"refunded {order}"

    return refund


async def _think(messages: list[Message]) -> Message:
    await asyncio.sleep(MODEL_SECONDS)
    last = messages[-1]
    if last.tool_results:
        return Message("assistant", "done")
    calls = [tool_call("refund", order=last.text)]
    if int(last.text.rsplit("-", 1)[-1]) % 2:  # every other prompt: two calls at once
        calls.append(tool_call("refund", order=last.text + "/b"))
    return assistant(*calls)


def _store(conn: Any, session: str) -> ContextStore:
    if isinstance(conn, SQLiteConnection):
        return SQLiteContextStore(conn, session_id=session)
    from pygents_ctx.context.stores.postgres import PostgresContextStore

    return PostgresContextStore(conn, session_id=session)


async def _run_once(store: ContextStore, refund: Any, rng: random.Random, n: int) -> bool:
    """One run on `store`'s session; False if another life's lease still holds it."""
    with AgentScope():
        agent = Agent("worker", "refunds", [refund], context=ContextConfig(store))
        loop = ModelLoop(agent, ScriptedModel([_think] * 10), lease=LeasePolicy(ttl=LEASE_TTL))
        history = await store.get_history()
        ended = bool(history) and history[-1].role == "assistant" and not history[-1].tool_uses
        try:
            if history and not ended and rng.random() < 0.5:
                await loop.run()  # resumed: the journal says what ran
            else:
                await loop.run(f"order {os.getpid()}-{n}")
        except SessionBusyError:
            return False  # a killed life's lease: another session meanwhile
    return True


async def _runs(conn: Any, workdir: Path, rng: random.Random, ready: int) -> None:
    refund = _tools(workdir)
    os.write(ready, b"r")
    for n in itertools.count():
        for index in rng.sample(range(SESSIONS), SESSIONS):
            if await _run_once(_store(conn, f"s{index}"), refund, rng, n):
                break
        else:
            await asyncio.sleep(0.05)


async def _life(backend: str, target: str, workdir: Path, seed: int, ready: int) -> None:
    rng = random.Random(seed)
    if backend == "sqlite":
        async with connect(target) as conn:
            await _runs(conn, workdir, rng, ready)
    else:
        from pygents_ctx.context.stores.postgres import connect_postgres

        async with connect_postgres(target) as pg:
            await _runs(pg, workdir, rng, ready)


def _child(backend: str, target: str, workdir: Path, seed: int, ready: int) -> NoReturn:
    code = 0
    try:
        asyncio.run(_life(backend, target, workdir, seed, ready))
    except BaseException:
        _log(workdir / "errors.log", traceback.format_exc().replace("\n", " | "))
        code = 1
    os._exit(code)


# ----------------------------------------------------------------------------- the parent


def kill_trials(
    backend: str, target: str, workdir: Path, kills: int, *, seed: int = 0, most: float = 0.3
) -> Report:
    """Start and SIGKILL `kills` lives (each at a random moment up to `most` seconds), then check.

    `target` is the SQLite file or the PostgreSQL DSN; `workdir` holds the tool's logs.
    """
    rng = random.Random(seed)
    report = Report(backend)
    began = time.perf_counter()
    for life in range(kills):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _child(backend, target, workdir, rng.randrange(2**32) + life, write)
        os.close(write)
        ready, _, _ = select.select([read], [], [], 60.0)
        if ready and os.read(read, 1):
            time.sleep(rng.uniform(0.0, most))
        os.close(read)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            report.kills += 1
        else:
            report.worker_errors += 1
    report.seconds = time.perf_counter() - began
    report.problems += _lines(workdir / "errors.log")
    report.worker_errors += len(_lines(workdir / "errors.log"))
    asyncio.run(_check(backend, target, workdir, report))
    return report


async def _check(backend: str, target: str, workdir: Path, report: Report) -> None:
    if backend == "sqlite":
        async with connect(target) as conn:
            await _check_sessions(conn, workdir, report)
    else:
        from pygents_ctx.context.stores.postgres import connect_postgres

        async with connect_postgres(target) as pg:
            await _check_sessions(pg, workdir, report)


async def _check_sessions(conn: Any, workdir: Path, report: Report) -> None:
    starts = Counter(line.split()[1] for line in _lines(workdir / "tool.log") if "start" in line)
    effects = Counter(line.split()[1] for line in _lines(workdir / "effects.log"))
    report.repeated_tool_calls = sum(n - 1 for n in starts.values() if n > 1)
    report.duplicate_effects = sum(n - 1 for n in effects.values() if n > 1)
    for index in range(SESSIONS):
        store = _store(conn, f"s{index}")
        history = await store.get_history()
        calls = [call for message in history for call in message.tool_uses]
        report.tool_calls += len(calls)
        journal = await store.get_journal(call.id for call in calls)
        for message in history:
            for result in message.tool_results:
                key = f"{store.session_id}:{result.tool_use_id}"
                if result.content == INTERRUPTED:
                    report.interrupted += 1
                elif result.content == NOT_RUN:
                    report.not_run += 1
                    if key in starts or result.tool_use_id in journal:
                        report.not_run_on_started += 1
                        report.problems.append(f"not run, but started: {key}")
                elif result.content != CANCELLED:
                    report.finished += 1
        problems = transcript_problems(history)
        report.invalid_transcripts += bool(problems)
        report.problems += [f"s{index}: {p}" for p in problems]
        report.repeated_model_calls += sum(
            a.role == b.role == "assistant" for a, b in itertools.pairwise(history)
        )


def transcript_problems(history: list[Message]) -> list[str]:
    """What a provider would reject: each call answered exactly once, in the next message.

    The newest assistant message's calls may wait (its run was killed before them).
    """
    problems = []
    for at, message in enumerate(history):
        if message.tool_results:
            previous = history[at - 1] if at else None
            asked = [] if previous is None else [call.id for call in previous.tool_uses]
            answered = [result.tool_use_id for result in message.tool_results]
            if sorted(answered) != sorted(asked):
                problems.append(f"message {at} answers {answered}, the calls were {asked}")
        elif message.tool_uses and at + 1 < len(history) and not history[at + 1].tool_results:
            problems.append(f"message {at}'s calls are not answered next")
        if message.tool_results and any(
            r.content == CANCELLED for r in message.tool_results
        ):  # nothing cancels here: every life is killed
            problems.append(f"message {at} holds a cancelled result")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kills", description=__doc__)
    parser.add_argument("--kills", type=int, default=1000, help="kills in all (split by backend)")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)
    backends = ["sqlite", "postgres"] if options.backend == "both" else [options.backend]
    share = math.ceil(options.kills / len(backends))
    reports = []
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            if backend == "sqlite":
                reports.append(kill_trials(backend, f"{tmp}/kills.db", Path(tmp), share))
            else:
                from tests import postgres_server

                server = postgres_server.start()
                try:
                    reports.append(kill_trials(backend, server.dsn, Path(tmp), share))
                finally:
                    server.stop()
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "kills.json").write_text(json.dumps([asdict(r) for r in reports], indent=2))
    for report in reports:
        counts = {k: v for k, v in asdict(report).items() if k != "problems"}
        print(json.dumps(counts))
        for problem in report.problems[:10]:
            print("  ", problem)
    return 0 if all(report.clean for report in reports) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
