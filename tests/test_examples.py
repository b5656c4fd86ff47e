"""The examples run as a user would run them, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_chains_branches_saves_and_finishes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
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
