"""The README's set-up commands and examples stay true.

Its ```python blocks run in order in one namespace, inside one event loop (top-level
`await`, as in `python -m asyncio`), in a fresh folder; what they print is what their
comments say they print.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import AgentRegistry, HookRegistry, ToolRegistry

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"^```python\n(.*?)^```", README, re.S | re.M)
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


async def _run(blocks: list[str], namespace: dict[str, Any]) -> None:
    for number, source in enumerate(blocks, start=1):
        code = compile(
            source, f"README.md (block {number})", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        )
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            await result


def test_examples_run_and_print_what_they_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert len(BLOCKS) >= 4  # the first agent and the three context examples
    monkeypatch.chdir(tmp_path)
    ToolRegistry.clear()
    AgentRegistry.clear()
    HookRegistry.clear()

    asyncio.run(_run(BLOCKS, {"__name__": "readme"}))

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
            await _run(BLOCKS[:1], namespace)
        from pygents_ctx.context.stores import SQLiteContextStore, connect

        async with connect("chats.db") as conn:
            history = await SQLiteContextStore(conn, session_id="ada").get_history()
        return [message.role for message in history]

    # Each run adds the question, the tool call, its result and the answer.
    assert asyncio.run(twice()) == ["user", "assistant", "user", "assistant"] * 2
