"""Durable runs under kill -9: a real `ModelLoop` worker process killed at random, restarted.

The harness (`bench/kills.py`, which `python -m bench.kills` runs 1,000 times)
forks a worker that runs model loops with a slow, idempotent `refund` tool
over a few sessions, kills it with SIGKILL at a random moment, and starts the
next one; then it reads every session back. Here a bounded number of kills
per store: nothing finished runs twice, no effect happens twice, no started
call is labelled "not run", and every transcript is one a provider accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench.kills import kill_trials

KILLS = {"sqlite": 60, "postgres": 30}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_worker_killed_at_random_never_repeats_a_step_or_an_effect(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target: Any = (
        str(tmp_path / "kills.db")
        if backend == "sqlite"
        else request.getfixturevalue("postgres").dsn_for("postgres")
    )
    if backend == "postgres":  # a database of its own: other tests use session names too
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS kills")
            conn.execute("CREATE DATABASE kills")
        target = request.getfixturevalue("postgres").dsn_for("kills")
    report = kill_trials(backend, target, tmp_path, KILLS[backend], seed=34)
    assert report.kills == KILLS[backend], report.problems
    assert report.worker_errors == 0, report.problems
    assert report.repeated_tool_calls == 0, report.problems
    assert report.duplicate_effects == 0, report.problems
    assert report.not_run_on_started == 0, report.problems
    assert report.repeated_model_calls == 0, report.problems
    assert report.invalid_transcripts == 0, report.problems
    # Not vacuous, however slow the machine: some calls ran to the end, some were killed inside.
    assert report.finished > 0, report
    assert report.interrupted > 0, report
