"""Peak RSS of `pygents-ctx import` and `export` of a large session file.

The file (`messages` short user and assistant messages, about 60 bytes each as
compact JSON, so a million messages is about 60 MB) is written a message at a
time; each command then runs in a fresh Python process, which reports its own
peak resident set size (`resource.getrusage`, the whole process: interpreter,
imports, SQLite's cache and all). The baseline is a process that only imports
the command line, so the difference is what the transfer itself holds.

Run alone: `python -m bench.transfer [MESSAGES]`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

__all__ = ["peak_rss", "transfer_rows", "write_session_file"]

_MEASURE = """
import resource, sys
from pygents_ctx.cli import main
code = main(sys.argv[1:]) if len(sys.argv) > 1 else 0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB on Linux
print(peak * 1024, file=sys.stderr)
sys.exit(code)
"""


def write_session_file(path: Path, messages: int) -> int:
    """Write a session file of `messages` messages to `path`, one at a time; its size."""
    with path.open("wb") as out:
        out.write(b'{"version": 3, "session_id": "big", "messages": [')
        for index in range(messages):
            role = "user" if index % 2 == 0 else "assistant"
            message = {"role": role, "content": [{"type": "text", "text": f"message {index}"}]}
            out.write((b"," if index else b"") + orjson.dumps(message))
        out.write(b"]}\n")
    return path.stat().st_size


def peak_rss(*args: str) -> int:
    """The peak RSS, in bytes, of a fresh process running `pygents-ctx ARGS` (none: just import)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pygents-ctx {' '.join(args)} failed: {done.stderr[-2000:]}")
    return int(done.stderr.strip().splitlines()[-1])


def transfer_rows(messages: int) -> list[tuple[str, int]]:
    """(name, bytes) rows: the file's size, and the peak RSS of a baseline, import and export."""
    with tempfile.TemporaryDirectory() as tmp:
        source, db, target = Path(tmp) / "in.json", Path(tmp) / "ctx.db", Path(tmp) / "out.json"
        size = write_session_file(source, messages)
        baseline = peak_rss()
        imported = peak_rss("--db", str(db), "import", str(source))
        exported = peak_rss("--db", str(db), "export", "big", "-o", str(target))
    return [
        (f"session file of {messages:,} messages: size", size),
        ("python + pygents_ctx.cli imported: peak RSS (baseline)", baseline),
        (f"import of {messages:,} messages: peak RSS", imported),
        (f"export of {messages:,} messages: peak RSS", exported),
    ]


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    for name, value in transfer_rows(count):
        print(f"{name:<62} {value / 2**20:>10,.1f} MB")
