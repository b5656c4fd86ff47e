"""Every public name of pygents has a differential test or a documented difference."""

from __future__ import annotations

import importlib
import inspect
import re
import unicodedata
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.compat.conftest import load_pygents
from tests.compat.differences import DIFFERENCES

HERE = Path(__file__).parent
MIGRATION_PAGE = HERE.parents[1] / "guides" / "guides" / "migrating-from-pygents.md"
# pygents has three tool classes; pygents_ctx has one, `Tool`, which covers them.
SAME_MEMBERS_AS = {"AsyncGenTool": "Tool", "BaseTool": "Tool"}


def _samples(m: ModuleType) -> dict[str, Any]:
    """An instance of each pygents class whose instances have attributes of their own."""

    @m.tool
    async def sample_tool(x: int = 1) -> int:
        return x

    @m.tool
    async def sample_generator(n: int = 1) -> Any:
        yield n

    async def sample_hook(*args: Any) -> None:
        pass

    made = m.HookRegistry.wrap(sample_hook, m.TurnHook.BEFORE_RUN)
    return {
        "Tool": sample_tool,
        "AsyncGenTool": sample_generator,
        "Turn": m.Turn("sample_tool"),
        "Agent": m.Agent("sample", "d", [sample_tool]),
        "ContextQueue": m.ContextQueue(limit=1),
        "ContextPool": m.ContextPool(),
        "ContextItem": m.ContextItem(content=1),
        "Hook": made,
        "HookMetadata": made.metadata,
        "ToolMetadata": sample_tool.metadata,
    }


def _public(names: list[str]) -> Iterator[str]:
    return (n for n in names if not n.startswith("_"))


def pygents_public_names() -> set[str]:
    """Top-level names, and members of the classes (instance attributes included)."""
    m = load_pygents()
    names = set(_public(dir(m)))
    for name in list(names):
        obj = getattr(m, name)
        if inspect.isclass(obj) and not issubclass(obj, (Enum, BaseException)):
            names |= {f"{name}.{member}" for member in _public(dir(obj))}
    try:
        for name, sample in _samples(m).items():
            names |= {f"{name}.{member}" for member in _public(dir(sample))}
    finally:
        for registry in (m.ToolRegistry, m.AgentRegistry, m.HookRegistry):
            registry.clear()
    return names


def covered_names() -> set[str]:
    """Every name a differential test declares with `@covers`."""
    names: set[str] = set()
    for path in sorted(HERE.glob("test_*.py")):
        module = importlib.import_module(f"tests.compat.{path.stem}")
        for attribute in vars(module).values():
            for mark in getattr(attribute, "pytestmark", []):
                if mark.name == "covers":
                    names.update(mark.args)
    return names


def documented_names() -> set[str]:
    return {name for difference in DIFFERENCES.values() for name in difference.names}


def _slug(heading: str) -> str:
    # What the docs' table of contents makes of a heading (Python-Markdown's slugify).
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_every_public_name_of_pygents_is_covered_or_documented() -> None:
    covered = covered_names()
    accounted = covered | documented_names()

    def is_accounted(name: str) -> bool:
        owner, _, member = name.partition(".")
        alias = SAME_MEMBERS_AS.get(owner)
        return name in accounted or (alias is not None and f"{alias}.{member}" in accounted)

    missing = sorted(name for name in pygents_public_names() if not is_accounted(name))

    assert missing == [], (
        f"pygents public names without a differential test (@covers) or an entry in "
        f"differences.py: {missing}"
    )


def test_covered_and_documented_names_exist_in_pygents() -> None:
    public = pygents_public_names()

    assert sorted((covered_names() | documented_names()) - public) == []


def test_every_difference_has_its_section_on_the_migration_page() -> None:
    headings = re.findall(r"^#{2,4} (.+)$", MIGRATION_PAGE.read_text(), flags=re.MULTILINE)
    slugs = {_slug(h) for h in headings}

    missing = [d.heading for d in DIFFERENCES.values() if _slug(d.heading) not in slugs]

    assert missing == []


def test_every_difference_is_shown_by_a_test() -> None:
    shown: set[str] = set()
    for path in sorted(HERE.glob("test_*.py")):
        module = importlib.import_module(f"tests.compat.{path.stem}")
        for attribute in vars(module).values():
            for mark in getattr(attribute, "pytestmark", []):
                if mark.name == "shows":
                    shown.update(mark.args)

    assert sorted(set(DIFFERENCES) - shown) == []
    assert sorted(shown - set(DIFFERENCES)) == []
