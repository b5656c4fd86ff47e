"""The examples run as a user would run them, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def _demo(cwd: Path, *flags: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=cwd,
    )
    assert done.stderr == ""
    return done.stdout


def test_demo_persists_in_sqlite_and_the_second_run_continues(tmp_path: Path) -> None:
    first = _demo(tmp_path)
    assert f"transcript: {tmp_path / 'pygents_demo.db'}" in first
    assert "starting a new session" in first
    assert (
        "step  1  window  19/250 tokens,  1 of  1 messages  -> search(query='tides power')" in first
    )
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
