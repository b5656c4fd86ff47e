"""Every install line the docs show works as written: from a checkout, with extras the project has.

pygents-ctx is not on PyPI, so `pip install pygents-ctx` (or any name of it)
fails; the docs install from a checkout (`pip install -e '.[extra]'`) or the
wheel `make dist` builds, and each extra named must be one pyproject.toml declares.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "guides").rglob("*.md"))]
DOCS += sorted((ROOT / "examples").rglob("*.md"))
SOURCES = sorted((ROOT / "pygents_ctx").rglob("*.py"))  # docstrings and error messages
EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
)


def _install_lines() -> list[tuple[str, str]]:
    found = []
    for path in DOCS + SOURCES:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"pip\s+install\s+([^`\n]*)", text):
            found.append((f"{path.relative_to(ROOT)}", match.group(1)))
    return found


def test_the_docs_install_from_a_checkout_or_the_wheel_never_from_the_index() -> None:
    lines = _install_lines()
    wrong = [
        (where, line)
        for where, line in lines
        if re.search(r"""['"]?pygents[-_]ctx\b""", line) and "dist/" not in line
    ]

    assert len(lines) > 10
    assert wrong == []


def test_every_extra_the_docs_name_is_declared() -> None:
    named = {
        (where, extra.strip())
        for where, line in _install_lines()
        for group in re.findall(r"(?:'\.|\.whl)\[([a-z0-9,\s-]+)\]", line)
        for extra in group.split(",")
    }

    assert {extra for _, extra in named} >= {"openai", "postgres", "service"}
    assert [(where, extra) for where, extra in sorted(named) if extra not in EXTRAS] == []
