"""The README's set-up commands and examples stay true.

Its ```python blocks run in order in one namespace, inside one event loop (top-level
`await`, as in `python -m asyncio`), in a fresh folder; what they print is what their
comments say they print.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import AgentRegistry, HookRegistry, ToolRegistry

ROOT = Path(__file__).resolve().parents[1]
# One runner of Markdown blocks, shared with `make dist` (.ci/dist_check.py), which runs
# it as a script where the repository is not importable.
_spec = importlib.util.spec_from_file_location("readme_blocks", ROOT / ".ci" / "readme_blocks.py")
assert _spec is not None
assert _spec.loader is not None
readme_blocks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_blocks)

README = (ROOT / "README.md").read_text()
BLOCKS = readme_blocks.python_blocks(README)
PRINTED = re.compile(r"^print\(.*\)  # (.*)$", re.M)


def test_setup_shows_the_two_make_commands_first() -> None:
    first_block = re.search(r"```\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]


def test_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 200


def test_first_agent_is_a_model_loop_on_a_stored_session() -> None:
    first = BLOCKS[0]
    assert "Assistant(" in first
    assert "session=" in first
    # The agent itself, after its tool and the scripted model: at most 8 lines.
    agent_lines = [line for line in first.split("model = ", 1)[1].splitlines()[1:] if line]
    assert len(agent_lines) <= 8, agent_lines


def test_examples_run_and_print_what_they_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert len(BLOCKS) >= 4  # the first agent and the three context examples
    monkeypatch.chdir(tmp_path)
    ToolRegistry.clear()
    AgentRegistry.clear()
    HookRegistry.clear()

    asyncio.run(readme_blocks.run_blocks(BLOCKS, {"__name__": "readme"}, "README.md"))

    claimed = [line for block in BLOCKS for line in PRINTED.findall(block)]
    assert capsys.readouterr().out.splitlines() == claimed
    assert (tmp_path / "chats.db").exists()  # the conversation is stored on disk


def test_the_stored_session_continues_in_a_second_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    async def twice() -> list[str]:
        for _ in range(2):
            ToolRegistry.clear()
            AgentRegistry.clear()
            namespace: dict[str, Any] = {"__name__": "readme"}
            await readme_blocks.run_blocks(BLOCKS[:1], namespace, "README.md")
        from pygents_ctx.context.stores import SQLiteContextStore, connect

        async with connect("chats.db") as conn:
            history = await SQLiteContextStore(conn, session_id="ada").get_history()
        return [message.role for message in history]

    # Each run adds the question, the tool call, its result and the answer.
    assert asyncio.run(twice()) == ["user", "assistant", "user", "assistant"] * 2
