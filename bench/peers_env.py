"""The virtualenv in which `python -m bench --peers` runs: Python 3.12, the peers and this checkout.

Like `bench/peer_env.py` (whose `built_venv` it uses), it is made on first
use under `bench/.peers/` (ignored by git) and re-made when pyproject.toml
changes. It holds what a user would pick instead of pygents_ctx for memory and
history: the OpenAI Agents SDK (`SQLiteSession`, and its SQLAlchemy session
with the asyncpg driver), axio-context-sqlite, langgraph-checkpoint-sqlite,
pydantic-ai, numpy and sqlite-vec; and this checkout with its `langgraph` extra,
for our checkpointer's rows beside langgraph-checkpoint-sqlite's.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from bench.peer_env import ROOT, built_venv

__all__ = ["PEERS", "ensure", "has_peers", "run_inside"]

VENV = ROOT / "bench" / ".peers"
PEERS = [
    "openai-agents[sqlalchemy]==0.24.0",
    "asyncpg",
    "axio-context-sqlite",
    "langgraph-checkpoint-sqlite==3.1.2",
    "pydantic-ai-slim==2.78.0",
    "numpy",
    "sqlite-vec",
]


# One module of each peer, as the bench imports them.
PEER_MODULES = (
    "agents",
    "asyncpg",
    "axio_context_sqlite",
    "langgraph.checkpoint.sqlite",
    "pydantic_ai",
    "numpy",
    "sqlite_vec",
)


def has_peers() -> bool:
    """Whether this interpreter can import every peer (then the bench runs here).

    The development virtualenv has some of them (openai-agents, numpy) but not
    all, so each is checked: with one missing the bench runs in its own.
    """
    for name in PEER_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except ModuleNotFoundError:  # a parent package of the name is missing
            return False
    return True


def ensure() -> Path:
    """The peers virtualenv's python, built and installed on first use.

    Raises:
        PeerUnavailable: No Python 3.12+ here, or pip could not install a peer.
    """
    return built_venv(VENV, [*PEERS, "-e", f"{ROOT}[postgres,langgraph]"], "the peers")


def run_inside(args: list[str]) -> int:
    """Run `python -m bench ARGS` in the peers virtualenv; its exit status."""
    python = ensure()
    return subprocess.run([str(python), "-m", "bench", *args], cwd=ROOT).returncode
