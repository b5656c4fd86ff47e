"""The virtualenv in which the head-to-head runs: Python 3.12+, pygents 0.7.0 and this checkout.

pygents needs Python >= 3.12, so `python -m bench --peer` started on another
Python builds `bench/.peer/` (ignored by git) from the first Python 3.12 it
finds, installs both packages there, and runs itself again inside it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "bench" / ".peer"
PEER = "pygents==0.7.0"


class PeerUnavailable(RuntimeError):
    """The peer cannot be set up here; the message says why."""


def has_peer() -> bool:
    """Whether this interpreter can import pygents (then the head-to-head runs here)."""
    try:
        import pygents  # noqa: F401
    except ImportError:
        return False
    return True


def _candidates() -> list[str]:
    """Pythons that may be 3.12+, 3.12 first (the version the issue measures on)."""
    home = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    found: list[str | None] = []
    for minor in (12, 13):
        found.append(shutil.which(f"python3.{minor}"))
        found += sorted(glob.glob(f"{home}/versions/3.{minor}*/bin/python3.{minor}"), reverse=True)
    return [c for c in found if c]


def _works(python: str) -> bool:
    # pyenv shims exist for every version but fail unless that version is active.
    check = "import sys; sys.exit(not (3, 12) <= sys.version_info[:2] < (4, 0))"
    try:
        done = subprocess.run([python, "-c", check], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def ensure() -> Path:
    """The peer virtualenv's python, built and installed on first use.

    Raises:
        PeerUnavailable: No Python 3.12+ here, or pip could not install pygents.
    """
    return built_venv(VENV, [PEER, "-e", str(ROOT)], "the peer")


def built_venv(venv: Path, install: list[str], what: str) -> Path:
    """The python of `venv`, made from the first Python 3.12+ found and given `install`
    (pip's arguments) on first use, and again when pyproject.toml changes.

    Raises:
        PeerUnavailable: No Python 3.12+ here, or pip failed.
    """
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    pyproject = ROOT / "pyproject.toml"
    if python.exists() and stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
        return python
    base = next((c for c in _candidates() if _works(c)), None)
    if base is None:
        raise PeerUnavailable(f"{what} needs Python >= 3.12, and none was found on this machine")
    print(f"setting up {what}'s virtualenv {venv.relative_to(ROOT)} with {base} ...", flush=True)
    steps = [
        [base, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", *install],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise PeerUnavailable(f"`{' '.join(step[:6])} ...` failed: {' | '.join(tail)}")
    stamp.touch()
    return python


def run_inside(args: list[str]) -> int:
    """Run `python -m bench ARGS` in the peer virtualenv; its exit status."""
    python = ensure()
    return subprocess.run([str(python), "-m", "bench", *args], cwd=ROOT).returncode


if __name__ == "__main__":  # pragma: no cover - a manual check
    print(ensure())
    sys.exit(0)
