"""Durable runs on DBOS: real DBOS, on SQLite and PostgreSQL, real processes killed with SIGKILL.

Each run is a child process (`dbos_worker.py`) that launches DBOS and runs a
workflow whose `durable_run` calls a counting model and a `refund` tool,
logging every model call and tool call to files. A killed run is recovered
by DBOS in a second process, which finishes it; the test counts what ran.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from dbos import DBOSClient

from bench.kills import transcript_problems
from pygents_ctx import (
    Agent,
    AgentScope,
    Assistant,
    ContextConfig,
    HistoryRetention,
    Message,
    ModelLoop,
)
from pygents_ctx.context.stores import MemoryContextStore, SQLiteContextStore, connect
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.integrations import dbos as durable
from pygents_ctx.model._tool_calls import INTERRUPTED
from pygents_ctx.testing import ScriptedModel

WORKER = Path(__file__).with_name("dbos_worker.py")
ROOT = str(Path(__file__).resolve().parents[2])
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
}


@dataclass(frozen=True)
class Setup:
    """Where DBOS keeps its workflows, where the conversation is, and the logs."""

    system_db: str
    backend: str
    target: str
    work: Path

    def child(self, *args: str, pause: str = "") -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                self.system_db,
                self.backend,
                self.target,
                str(self.work),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**ENV, "DBOS_TEST_PAUSE": pause},
        )

    def result(self, process: subprocess.Popen[str]) -> dict[str, Any]:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        reply: dict[str, Any] = orjson.loads(out.splitlines()[-1])
        return reply

    def killed_at(self, point: str, *args: str) -> None:
        """Run the workflow until it prints that it is at `point`, then SIGKILL it there."""
        process = self.child(*args, pause=point)
        assert process.stdout is not None
        line = process.stdout.readline()
        if line != f"at {point}\n":
            process.kill()
            raise AssertionError(
                f"the worker did not stop at {point}: {line!r} {process.communicate()}"
            )
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL

    def lines(self, name: str) -> list[str]:
        path = self.work / name
        return path.read_text().splitlines() if path.exists() else []

    def repeated_model_calls(self) -> int:
        """Model calls made again after one with the same request had replied."""
        replied: set[str] = set()
        repeated = 0
        for line in self.lines("model.log"):
            event, digest = line.split()
            if event == "start" and digest in replied:
                repeated += 1
            elif event == "done":
                replied.add(digest)
        return repeated

    def tool_starts(self) -> Counter[str]:
        return Counter(
            line.split()[1] for line in self.lines("tool.log") if line.startswith("start")
        )

    async def history(self, session: str) -> list[Message]:
        if self.backend == "sqlite":
            async with connect(self.target) as conn:
                return await SQLiteContextStore(conn, session_id=session).get_history()
        async with connect_postgres(self.target) as pg:
            return await PostgresContextStore(pg, session_id=session).get_history()

    def steps(self, workflow: str) -> list[str]:
        """The kinds of the workflow's steps as DBOS recorded them (ours, then the workflow's)."""
        client = DBOSClient(system_database_url=self.system_db)
        try:
            listed = client.list_workflow_steps(workflow)
        finally:
            client.destroy()
        return [
            step["output"].kind
            if step["function_name"] == durable.STEP_NAME
            else step["function_name"]
            for step in listed
        ]


@pytest.fixture(params=["sqlite", "postgres"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    """Both on SQLite (DBOS's database and the conversation's), or both on PostgreSQL.

    DBOS's database is on PostgreSQL for both where DBOS cannot use this
    Python's SQLite (`tests.conftest.DBOS_ON_SQLITE`).
    """
    if request.param == "sqlite":
        system = request.getfixturevalue("dbos_system_database")
        yield Setup(system, "sqlite", str(tmp_path / "store.db"), tmp_path)
        return
    server = request.getfixturevalue("postgres")
    name = f"dbos_{uuid.uuid4().hex[:12]}"  # DBOS creates its system database
    yield Setup(
        f"postgresql://postgres@/{name}?host={server.directory}&port=5432",
        "postgres",
        server.dsn,
        tmp_path,
    )


def check_transcript(history: list[Message], prompt: str) -> None:
    assert transcript_problems(history) == []
    assert [m.text for m in history if m.role == "user" and not m.tool_results] == [prompt]
    assert history[-1].role == "assistant"
    assert not history[-1].tool_uses


@pytest.mark.timeout(60)
async def test_a_workflow_runs_the_loop_with_each_model_and_tool_call_a_dbos_step(
    setup: Setup,
) -> None:
    session, workflow = f"s-{uuid.uuid4().hex}", uuid.uuid4().hex
    result = setup.result(setup.child("run", "loop", session, workflow, "order 7"))

    assert result["text"] == "done: refunded order 7"
    assert result["after"] == "DONE: REFUNDED ORDER 7"
    assert setup.steps(workflow) == ["run", "model", "tool", "model", "end", "after"]
    assert len(setup.lines("model.log")) == 4
    assert len(setup.tool_starts()) == 1
    check_transcript(await setup.history(session), "order 7")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("point", "prompt", "results"),
    [
        # DBOS recorded the reply, the store did not have it yet: the model is not asked again
        ("stored", "order 7", ["refunded order 7"]),
        # DBOS recorded the refund, the journal did not have its result yet: DBOS's is used
        ("recorded", "order 7", ["refunded order 7"]),
        # the refund started and may have run: the model is told so; it is not run again
        ("tool", "order 7", [INTERRUPTED]),
        # two refunds at once: one finished (its step recorded after the other's began), one
        # inside: the finished one keeps its result
        ("tool", "order 5 and order 6", [INTERRUPTED, "refunded order 6"]),
    ],
    ids=[
        "after-a-model-call",
        "after-a-tool-call",
        "inside-a-tool-call",
        "inside-one-of-two-calls",
    ],
)
async def test_a_killed_worker_is_recovered_by_dbos_in_another_process_repeating_nothing(
    setup: Setup, point: str, prompt: str, results: list[str]
) -> None:
    session, workflow = f"s-{uuid.uuid4().hex}", uuid.uuid4().hex
    setup.killed_at(point, "run", "loop", session, workflow, prompt)
    before = setup.lines("model.log")
    result = setup.result(setup.child("recover", workflow))

    history = await setup.history(session)
    check_transcript(history, prompt)
    assert setup.repeated_model_calls() == 0
    assert setup.lines("model.log")[: len(before)] == before
    assert len(setup.lines("model.log")) == 4  # two model calls, each made once
    assert set(setup.tool_starts().values()) == {1}  # no tool call run twice
    assert [r.content for m in history for r in m.tool_results] == results
    assert result["text"] == "done: " + "; ".join(results)
    steps = setup.steps(workflow)
    assert steps.count("model") == 2
    assert steps[-2:] == ["end", "after"]


@pytest.mark.timeout(60)
async def test_an_assistant_killed_after_its_run_ended_is_not_run_again(
    tmp_path: Path, dbos_system_database: str
) -> None:
    setup = Setup(dbos_system_database, "sqlite", str(tmp_path / "store.db"), tmp_path)
    session, workflow = f"s-{uuid.uuid4().hex}", uuid.uuid4().hex
    setup.killed_at("after", "run", "assistant", session, workflow, "order 8")
    calls = setup.lines("model.log")
    result = setup.result(setup.child("recover", workflow))

    assert result["after"] == "DONE: REFUNDED ORDER 8"
    assert setup.lines("model.log") == calls
    assert len(calls) == 4
    check_transcript(await setup.history(session), "order 8")


# -- refused before anything changes ---------------------------------------------------


async def test_a_loop_whose_conversation_is_not_in_a_database_is_refused_naming_the_fix() -> None:
    with AgentScope():
        store = MemoryContextStore(session_id="chat")
        agent = Agent("a", "", [], context=ContextConfig(store))
        model = ScriptedModel(["hi"])
        loop = ModelLoop(agent, model)
        with pytest.raises(ValueError, match=r"ContextConfig\(SQLiteContextStore"):
            await durable.durable_run(loop, "hello")
        assert loop.model is model
        assert await store.get_history() == []


async def test_a_loop_that_keeps_no_history_is_refused(tmp_path: Path) -> None:
    async with connect(str(tmp_path / "s.db")) as conn, AgentScope():
        store = SQLiteContextStore(conn, session_id="chat")
        context = ContextConfig(store, retention=HistoryRetention.NONE)
        loop = ModelLoop(Agent("a", "", [], context=context), ScriptedModel(["hi"]))
        with pytest.raises(ValueError, match="retention NONE"):
            await durable.durable_run(loop, "hello")
        assert await store.get_history() == []


async def test_a_run_outside_a_dbos_workflow_is_refused_before_anything_is_stored(
    tmp_path: Path,
) -> None:
    async with connect(str(tmp_path / "s.db")) as conn, AgentScope():
        store = SQLiteContextStore(conn, session_id="chat")
        loop = ModelLoop(Agent("a", "", [], context=ContextConfig(store)), ScriptedModel(["hi"]))
        with pytest.raises(RuntimeError, match=r"@DBOS.workflow\(\).*DBOS.launch\(\)"):
            await durable.durable_run(loop, "hello")
        assert await store.get_history() == []


@pytest.mark.parametrize(
    ("runner", "session", "prompt", "error", "match"),
    [
        ("assistant", None, "hello", TypeError, "session='alice'"),
        ("loop", "alice", "hello", TypeError, "takes no session"),
        ("other", None, "hello", TypeError, "ModelLoop or an Assistant"),
        ("loop", None, Message("assistant", "hi"), TypeError, "a user Message"),
    ],
)
async def test_arguments_that_do_not_fit_the_runner_are_refused(
    tmp_path: Path,
    runner: str,
    session: str | None,
    prompt: str | Message,
    error: type[Exception],
    match: str,
) -> None:
    async with connect(str(tmp_path / "s.db")) as conn, AgentScope():
        store = SQLiteContextStore(conn, session_id="chat")
        loop = ModelLoop(Agent("a", "", [], context=ContextConfig(store)), ScriptedModel(["hi"]))
        chosen: Any = {
            "assistant": Assistant("helper", model=ScriptedModel(["hi"])),
            "loop": loop,
            "other": object(),
        }[runner]
        with pytest.raises(error, match=match):
            await durable.durable_run(chosen, prompt, session=session)
        assert await store.get_history() == []


async def test_without_dbos_installed_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "dbos", None)  # `import dbos` raises ImportError
    async with connect(str(tmp_path / "s.db")) as conn, AgentScope():
        store = SQLiteContextStore(conn, session_id="chat")
        loop = ModelLoop(Agent("a", "", [], context=ContextConfig(store)), ScriptedModel(["hi"]))
        with pytest.raises(ImportError, match=r"pip install -e '\.\[dbos\]'"):
            await durable.durable_run(loop, "hello")
        assert await store.get_history() == []
