"""Every ```python block in the docs runs.

The blocks of one page run in order in one namespace, inside one event loop,
so a later block can use what an earlier one defined and top-level `await`
works, as it would in an async REPL. The namespace is a module in
`sys.modules` while the page runs, as a user's script is, so that type hints
of the classes it defines resolve (dataclasses and tools read them).
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

GUIDES = Path(__file__).resolve().parent.parent / "guides"
# A fence opens with ```python (nothing else on the line) and closes with ```.
_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def _blocks(page: Path) -> list[str]:
    return _BLOCK.findall(page.read_text(encoding="utf-8"))


PAGES = sorted(p for p in GUIDES.rglob("*.md") if _blocks(p))


async def _run_blocks(page: Path) -> None:
    module = types.ModuleType(f"guides.{page.stem}")
    namespace: dict[str, Any] = module.__dict__
    sys.modules[module.__name__] = module
    try:
        for number, source in enumerate(_blocks(page), start=1):
            code = compile(
                source,
                f"{page.relative_to(GUIDES)} (block {number})",
                "exec",
                flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            )
            result = eval(code, namespace)
            if inspect.iscoroutine(result):
                await result
    finally:
        del sys.modules[module.__name__]


def test_most_pages_have_examples() -> None:
    assert len(PAGES) >= 5, [str(p) for p in PAGES]


# Pages whose examples read a setting from the environment, as apps do: the variable,
# and the fixture that gives its value here.
SETTINGS = {"guides/durable-runs.md": ("DBOS_DATABASE_URL", "dbos_system_database")}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(GUIDES)) for p in PAGES])
def test_page_examples_run(
    page: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    setting = SETTINGS.get(str(page.relative_to(GUIDES)))
    if setting is not None:
        variable, fixture = setting
        monkeypatch.setenv(variable, request.getfixturevalue(fixture))
    asyncio.run(_run_blocks(page))
