"""The README's example and set-up commands stay true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_setup_shows_the_two_make_commands_first() -> None:
    first_block = re.search(r"```\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]


def test_example_runs_and_prints_what_it_claims(capsys: pytest.CaptureFixture[str]) -> None:
    example = re.search(r"```python\n(.*?)```", README, re.S)
    assert example is not None
    exec(compile(example.group(1), "README.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out == ("recall -> tides follow the Moon; the Sun helps a little\n")
