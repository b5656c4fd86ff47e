"""The examples run as a user would run them, in a fresh interpreter."""

from __future__ import annotations

import asyncio
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

from tests.model.fake_api import FakeAPI, chat_chunks, sse_reply

ROOT = Path(__file__).resolve().parents[1]


def test_runtime_tour_chains_branches_saves_and_finishes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "runtime_tour.py")],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    out = done.stdout
    assert "researcher [search] found 'moon'" in out
    assert "- [moon] The Moon is about" in out  # the pool was filled by routing
    assert "fact-checker: claim 'Moon gravity' is backed by" in out
    assert "restored 'researcher': paused=True, 1 turns queued, 1 notes" in out
    # The restored agent answers from the note and the fact-checker's verdict.
    assert "researcher [answer] Why are there tides?" in out
    assert out.rstrip().endswith("]")
    assert done.stderr == ""


# A fresh user's environment: no database chosen for the command line.
_ENV = {key: value for key, value in os.environ.items() if key != "PYGENTS_CTX_DB"}


def _run(cwd: Path, *command: str) -> str:
    done = subprocess.run(
        [sys.executable, *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=cwd,
        env=_ENV,
    )
    assert done.stderr == ""
    return done.stdout


def _demo(cwd: Path, *flags: str) -> str:
    return _run(cwd, str(ROOT / "examples" / "demo.py"), *flags)


def test_demo_persists_in_sqlite_and_the_second_run_continues(tmp_path: Path) -> None:
    first = _demo(tmp_path)
    assert f"transcript: {tmp_path / 'pygents_ctx.db'}" in first
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "pygents_ctx.agent.json",
        "pygents_ctx.db",
    ]
    assert "starting a new session" in first
    assert "step  1  window  48/250 tokens,  1 of  1 messages" in first
    assert "        -> search(query='tides power')\n        <- search: 41 chars" in first
    assert "answer: Tides come mostly from the Moon's gravity" in first
    assert "done: 8 messages stored, documents ['tides-101', 'tidal-power']" in first

    second = _demo(tmp_path)
    assert "continuing the stored session: 8 messages, 2 documents in the pool" in second
    assert "answer: Offshore wind is cheaper today" in second
    # The history outgrew the budget: the window left older messages out.
    assert "9 of 13 messages" in second
    assert "done: 14 messages stored" in second

    fresh = _demo(tmp_path, "--fresh")
    assert "starting a new session" in fresh
    assert "done: 8 messages stored" in fresh


def test_the_command_line_reads_the_demos_session_right_after_it(tmp_path: Path) -> None:
    _demo(tmp_path)

    listed = _run(tmp_path, "-m", "pygents_ctx", "sessions")
    assert listed.splitlines()[1].startswith("research-demo         8")
    window = _run(tmp_path, "-m", "pygents_ctx", "window", "research-demo")
    assert "window: 8 of 8 messages" in window
    assert window.splitlines()[-1].startswith(
        "strategy: stable (StableWindow(max_tokens=24000, low_water=0.5))"
    )


def test_a_copied_transcript_alone_is_continued_and_said_so(tmp_path: Path) -> None:
    _demo(tmp_path)
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(tmp_path / "pygents_ctx.db", copy / "pygents_ctx.db")  # not the .agent.json

    second = _demo(copy)

    assert "starting a new session" not in second
    assert (
        "continuing the stored session: 8 messages; no saved agent state "
        "(pygents_ctx.agent.json), so its pool and notes start empty"
    ) in second
    assert "question: How does tidal power compare with offshore wind?" in second
    assert "done: 14 messages stored, documents ['wind-vs-tide']" in second


def test_demo_streams_live_in_a_terminal(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        stdout=follower,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=_ENV,
    ) as process:
        os.close(follower)
        out = _read_all(leader)
        assert process.wait(timeout=60) == 0
    text = out.replace("\r\n", "\n")
    assert "step  1  [####................] window  48/250 tokens" in text
    # The replies' text, written as it came, on its own line under its step.
    assert "        Let me search the library.\n        -> search(query='tides power')" in text


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode()


async def test_demo_runs_against_an_openai_compatible_server(tmp_path: Path) -> None:
    server = await FakeAPI().start()
    server.script(
        sse_reply(chat_chunks(["Searching."], [("c1", "search", ['{"query": "tides"}'])])),
        sse_reply(chat_chunks(["The Moon, ", "mostly."])),
    )
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "examples" / "demo.py"),
            "--base-url",
            f"{server.url}/v1",
            "--model",
            "local-model",
            "--api-key-env",
            "DEMO_TEST_KEY",
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**_ENV, "DEMO_TEST_KEY": "secret"},
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
    finally:
        await server.close()

    assert process.returncode == 0, err.decode()
    assert "        -> search(query='tides')\n        <- search: " in out.decode()
    assert "answer: The Moon, mostly." in out.decode()
    first = server.requests[0]
    assert first.body["model"] == "local-model"
    assert first.headers["authorization"] == "Bearer secret"
    assert first.body["messages"][0]["role"] == "system"  # the demo's instructions
