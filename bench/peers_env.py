"""The virtualenv in which `python -m bench --peers` runs: Python 3.12, the peers and this checkout.

Like `bench/peer_env.py` (whose Python finder it shares), it is made on first
use under `bench/.peers/` (ignored by git) and re-made when pyproject.toml
changes. It holds what a user would pick instead of pygents_ctx for memory and
history: the OpenAI Agents SDK (`SQLiteSession`, and its SQLAlchemy session
with the asyncpg driver), axio-context-sqlite, langgraph-checkpoint-sqlite,
numpy and sqlite-vec.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.peer_env import ROOT, PeerUnavailable, _candidates, _works

__all__ = ["PEERS", "ensure", "has_peers", "run_inside"]

VENV = ROOT / "bench" / ".peers"
PEERS = [
    "openai-agents[sqlalchemy]==0.24.0",
    "asyncpg",
    "axio-context-sqlite",
    "langgraph-checkpoint-sqlite",
    "numpy",
    "sqlite-vec",
]
_STAMP = VENV / ".installed"


def has_peers() -> bool:
    """Whether this interpreter can import every peer (then the bench runs here)."""
    try:
        import agents  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def ensure() -> Path:
    """The peers virtualenv's python, built and installed on first use.

    Raises:
        PeerUnavailable: No Python 3.12+ here, or pip could not install a peer.
    """
    python = VENV / "bin" / "python"
    pyproject = ROOT / "pyproject.toml"
    if python.exists() and _STAMP.exists() and _STAMP.stat().st_mtime >= pyproject.stat().st_mtime:
        return python
    base = next((c for c in _candidates() if _works(c)), None)
    if base is None:
        raise PeerUnavailable("the peers need Python >= 3.12, and none was found here")
    print(f"setting up the peers virtualenv {VENV.relative_to(ROOT)} with {base} ...", flush=True)
    steps = [
        [base, "-m", "venv", str(VENV)],
        [str(python), "-m", "pip", "install", "-q", *PEERS, "-e", f"{ROOT}[postgres]"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise PeerUnavailable(f"`{' '.join(step[:4])} ...` failed: {' | '.join(tail)}")
    _STAMP.touch()
    return python


def run_inside(args: list[str]) -> int:
    """Run `python -m bench ARGS` in the peers virtualenv; its exit status."""
    python = ensure()
    return subprocess.run([str(python), "-m", "bench", *args], cwd=ROOT).returncode
