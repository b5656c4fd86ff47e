"""Run a Markdown file's Python blocks in order, in one namespace and one event loop.

Top-level `await` works, as in `python -m asyncio`. `tests/test_readme.py` loads
this file by path for the README's examples, and `.ci/dist_check.py` runs it as
a script inside a fresh virtualenv, which has neither the repository on its path
nor the test dependencies: so it needs only the standard library.

Usage: python .ci/readme_blocks.py FILE.md
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
from pathlib import Path
from typing import Any

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[str]:
    """The source of each ```python block of a Markdown text, in order."""
    return PYTHON_BLOCK.findall(text)


async def run_blocks(blocks: list[str], namespace: dict[str, Any], name: str) -> None:
    """Run `blocks` in order in `namespace`; tracebacks name `name` and the block's number."""
    for number, source in enumerate(blocks, start=1):
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        code = compile(source, f"{name} (block {number})", "exec", flags=flags)
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            await result


if __name__ == "__main__":
    path = Path(sys.argv[1])
    found = python_blocks(path.read_text(encoding="utf-8"))
    asyncio.run(run_blocks(found, {"__name__": "readme"}, path.name))
    print(f"the {len(found)} Python blocks of {path.name} ran")
