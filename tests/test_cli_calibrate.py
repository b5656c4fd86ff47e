"""`pygents-ctx calibrate`: the fit of the token estimate, from the usage records in a database.

The records are a `ModelLoop`'s, made against the stand-in provider of
`tests/context/test_token_calibration.py` (cl100k_base and 350 tokens a call)
and kept in a SQLite store, one session per conversation.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pygents_ctx import (
    EstimatedTokenCounter,
    FitTokens,
    TiktokenCounter,
    Usage,
    UsageRecord,
    calibrate,
)
from pygents_ctx.cli import main
from pygents_ctx.context.stores import SQLiteContextStore, connect
from tests.context.test_token_calibration import CL100K, run_conversations

OLD = "2000-01-01T00:00:00+00:00"  # when the other model's record was made


async def _fill(path: Path) -> list[UsageRecord]:
    async with connect(path) as conn:
        records = await run_conversations(
            range(8),
            TiktokenCounter.from_file(CL100K),
            EstimatedTokenCounter(),
            store_of=lambda number: SQLiteContextStore(conn, session_id=f"conversation-{number}"),
        )
        other = UsageRecord(
            Usage(5_000, 10), model="other-model", estimated_input_tokens=4_000,
            created_at=OLD,
        )  # fmt: skip
        await SQLiteContextStore(conn, session_id="conversation-0").record_usage(other)
        return records


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[UsageRecord]]:
    """A database of eight conversations' records, and one call of another model."""
    path = tmp_path_factory.mktemp("calibrate") / "ctx.db"
    return path, asyncio.run(_fill(path))


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_calibrate_prints_the_fit_and_the_python_that_uses_it(
    recorded: tuple[Path, list[UsageRecord]],
) -> None:
    path, records = recorded
    env = {key: value for key, value in os.environ.items() if key != "PYGENTS_CTX_DB"}
    command = [sys.executable, "-m", "pygents_ctx", "--db", str(path), "calibrate"]
    result = subprocess.run(
        [*command, "--model", "stand-in-1"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    expected = calibrate(records)
    lines = result.stdout.splitlines()
    assert lines[0] == f"{len(records)} model calls of stand-in-1 in {path}"
    assert lines[1] == (
        f"scale {expected.scale:.4f}, overhead {expected.overhead:.0f} tokens a call"
    )
    assert f"mean {expected.mean_error_before:.1f}%" in lines[2]
    assert f"mean {expected.mean_error_after:.1f}%" in lines[3]
    python = lines[6].strip()
    strategy = eval(  # the line is meant to be pasted into a program
        python,
        {
            "FitTokens": FitTokens,
            "EstimatedTokenCounter": EstimatedTokenCounter,
            "MAX_TOKENS": 8000,
        },
    )
    assert isinstance(strategy, FitTokens)
    assert strategy.budget == 8000 - expected.reserve_tokens
    assert 300 < expected.reserve_tokens < 400  # the stand-in's 350 tokens a call
    assert lines[-1].strip().startswith("pygents-ctx calibrate --model stand-in-1 --since DATE")


def test_calibrate_json_is_the_fit_of_one_session_or_of_all(
    recorded: tuple[Path, list[UsageRecord]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, records = recorded

    code, out, _ = run_main(capsys, "--db", path, "--json", "calibrate", "--model", "stand-in-1")
    assert code == 0
    fit = json.loads(out)
    expected = calibrate(records)
    assert fit["records"] == expected.records == len(records)
    assert math.isclose(fit["scale"], expected.scale)
    assert math.isclose(fit["overhead"], expected.overhead)
    assert fit["reserve_tokens"] == expected.reserve_tokens
    assert fit["mean_error_after"] < 5 < 10 < fit["mean_error_before"]

    # One session (a prefix of its id will do); conversation 3 reads four documents.
    code, out, _ = run_main(capsys, "--db", path, "--json", "calibrate", "conversation-3")
    assert code == 0
    assert json.loads(out)["records"] == 5

    # Records estimated with a scaled counter: the counter to use is scaled further.
    code, out, _ = run_main(
        capsys, "--db", path, "--json", "calibrate", "--model", "stand-in-1",
        "--counter-scale", "2",
    )  # fmt: skip
    assert code == 0
    assert math.isclose(json.loads(out)["counter_scale"], 2 * expected.scale)


def test_several_models_need_model_and_since_leaves_out_older_records(
    recorded: tuple[Path, list[UsageRecord]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, records = recorded

    code, out, err = run_main(capsys, "--db", path, "calibrate")
    assert code == 1
    assert out == ""
    assert "2 models ['other-model', 'stand-in-1']" in err
    assert "--model NAME" in err
    assert f"{len(records) + 1} records read from {path}" in err

    # Since the day after the other model's record: the loop's records alone.
    code, out, err = run_main(capsys, "--db", path, "--json", "calibrate", "--since", "2000-01-02")
    assert code == 0, err
    assert json.loads(out)["records"] == len(records)


def test_bad_input_is_an_error_that_names_the_fix(
    recorded: tuple[Path, list[UsageRecord]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, _ = recorded

    code, _, err = run_main(capsys, "--db", path, "calibrate", "--since", "yesterday")
    assert code == 2
    assert "--since: must be an ISO 8601 date" in err
    code, _, err = run_main(capsys, "--db", path, "calibrate", "--counter-scale", "-1")
    assert code == 2
    assert "--counter-scale: must be a positive number" in err
    code, _, err = run_main(capsys, "--db", path, "calibrate", "no-such-session")
    assert code == 1
    assert "no session 'no-such-session'" in err
    code, _, err = run_main(capsys, "--db", path, "calibrate", "--model", "nobody")
    assert code == 1
    assert "no usage record of model 'nobody'" in err
    code, _, err = run_main(capsys, "--db", tmp_path / "missing.db", "calibrate")
    assert code == 1
    assert "no database at" in err
    assert not (tmp_path / "missing.db").exists()
