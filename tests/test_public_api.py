"""What `pygents_ctx` exports, and that all of it is documented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import pygents_ctx

PUBLIC_MODULES = [
    "pygents_ctx.agent",
    "pygents_ctx.tools",
    "pygents_ctx.turns",
    "pygents_ctx.hooks",
    "pygents_ctx.registry",
    "pygents_ctx.errors",
    "pygents_ctx.context",
    "pygents_ctx.context.items",
    "pygents_ctx.context.queue",
    "pygents_ctx.context.pool",
    "pygents_ctx.context.messages",
    "pygents_ctx.context.tokens",
    "pygents_ctx.context.wire",
    "pygents_ctx.context.stores",
    "pygents_ctx.context.stores.base",
    "pygents_ctx.context.stores.protocols",
    "pygents_ctx.context.stores.memory",
    "pygents_ctx.context.stores.sqlite",
    "pygents_ctx.context.stores.postgres",
    "pygents_ctx.context.stores.compaction",
    "pygents_ctx.context.stores.search",
    "pygents_ctx.context.config",
    "pygents_ctx.context.usage",
    "pygents_ctx.model",
    "pygents_ctx.model.base",
    "pygents_ctx.model.definitions",
    "pygents_ctx.model.events",
    "pygents_ctx.model.loop",
    "pygents_ctx.model.assistant",
    "pygents_ctx.model.offload",
    "pygents_ctx.model.options",
    "pygents_ctx.model.openai_model",
    "pygents_ctx.model.openai_responses_model",
    "pygents_ctx.model.fallback",
    "pygents_ctx.model.anthropic_model",
    "pygents_ctx.model.retry",
    "pygents_ctx.model.history_search",
    "pygents_ctx.context.strategies",
    "pygents_ctx.context.strategies.base",
    "pygents_ctx.context.strategies.budget",
    "pygents_ctx.context.strategies.compose",
    "pygents_ctx.context.strategies.edits",
    "pygents_ctx.context.strategies.pinned",
    "pygents_ctx.context.strategies.summarize",
    "pygents_ctx.context.strategies.window",
    "pygents_ctx.memory",
    "pygents_ctx.memory.graph",
    "pygents_ctx.memory.graph.base",
    "pygents_ctx.memory.graph.in_memory",
    "pygents_ctx.memory.graph.sqlite",
    "pygents_ctx.memory.graph.postgres",
    "pygents_ctx.memory.blobs",
    "pygents_ctx.memory.blobs.base",
    "pygents_ctx.memory.blobs.in_memory",
    "pygents_ctx.memory.blobs.directory",
    "pygents_ctx.memory.blobs.sqlite",
    "pygents_ctx.memory.blobs.postgres",
    "pygents_ctx.memory.tasks",
    "pygents_ctx.memory.tasks.base",
    "pygents_ctx.memory.tasks.in_memory",
    "pygents_ctx.memory.tasks.sqlite",
    "pygents_ctx.memory.tasks.postgres",
    "pygents_ctx.context.selection",
    "pygents_ctx.memory.embedders",
    "pygents_ctx.memory.selection",
    "pygents_ctx.memory.vectors",
    "pygents_ctx.memory.vectors.base",
    "pygents_ctx.memory.vectors.in_memory",
    "pygents_ctx.memory.vectors.sqlite",
    "pygents_ctx.memory.vectors.postgres",
]
ALL_MODULES = [pygents_ctx.__name__] + [
    info.name for info in pkgutil.walk_packages(pygents_ctx.__path__, "pygents_ctx.")
]
# Type aliases cannot carry a docstring of their own.
NO_DOCSTRING = {"ContentBlock", "HookKind", "LoopEvent", "ModelStreamEvent"}
EXPORTED = [getattr(pygents_ctx, name) for name in pygents_ctx.__all__]
EXPORTED_CLASSES = [obj for obj in EXPORTED if inspect.isclass(obj)]
REFERENCE = Path(__file__).resolve().parents[1] / "guides" / "reference"
PACKAGE_PAGES = [
    "runtime",
    "context",
    "stores",
    "strategies",
    "memory",
    "model",
    "integrations",
    "testing",
]
# Modules documented whole on the reference pages: their own `__all__` is what users import.
OWN_MODULES = [
    "pygents_ctx.testing",
    "pygents_ctx.integrations.mcp",
    "pygents_ctx.integrations.tracing",
    "pygents_ctx.integrations.langgraph",
    "pygents_ctx.integrations.openai_agents",
    "pygents_ctx.integrations.pydantic_ai",
    "pygents_ctx.integrations.dbos",
]


def _isort_order(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_without_duplicates() -> None:
    names = pygents_ctx.__all__

    assert names == sorted(names, key=_isort_order)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", pygents_ctx.__all__)
def test_every_exported_name_is_importable_and_documented(name: str) -> None:
    obj = getattr(importlib.import_module("pygents_ctx"), name)

    if name not in NO_DOCSTRING:
        assert (obj.__doc__ or "").strip(), f"{name} has no docstring"


def test_docstring_allow_list_names_only_exported_names() -> None:
    assert set(pygents_ctx.__all__) >= NO_DOCSTRING


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_everything_a_public_module_exports_is_exported_at_the_top_level(
    module_name: str,
) -> None:
    module = importlib.import_module(module_name)

    missing = [
        name
        for name in module.__all__
        if getattr(pygents_ctx, name, None) is not getattr(module, name)
        or name not in pygents_ctx.__all__
    ]

    assert missing == []


@pytest.mark.parametrize("module_name", ALL_MODULES)
def test_every_module_declares_all(module_name: str) -> None:
    module: ModuleType = importlib.import_module(module_name)

    assert isinstance(module.__dict__.get("__all__"), list)
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.__all__ lists missing {name!r}"


def _own_public_members(cls: type) -> list[tuple[str, Any]]:
    """Public methods and properties that the package (not object/Enum/Generic) defines."""
    members = []
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        owner = next((base for base in cls.__mro__ if name in base.__dict__), None)
        if owner is None or not owner.__module__.startswith("pygents_ctx"):
            continue
        raw = owner.__dict__[name]
        if isinstance(raw, classmethod | staticmethod):
            raw = raw.__func__
        if inspect.isfunction(raw) or isinstance(raw, property):
            members.append((f"{owner.__name__}.{name}", raw))
    return members


@pytest.mark.parametrize("cls", EXPORTED_CLASSES, ids=lambda c: c.__name__)
def test_every_public_method_of_an_exported_class_has_a_docstring(cls: type) -> None:
    undocumented = [
        name for name, raw in _own_public_members(cls) if not (raw.__doc__ or "").strip()
    ]

    assert undocumented == []


def test_classes_with_methods_are_checked() -> None:
    # Guards the walk above: it must find the methods users call.
    from pygents_ctx import Agent, ContextQueue

    assert "Agent.run" in dict(_own_public_members(Agent))
    assert "ContextQueue.limit" in dict(_own_public_members(ContextQueue))


def _directives(page: str) -> list[str]:
    text = (REFERENCE / f"{page}.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    return [line.removeprefix("::: ").strip() for line in lines if line.startswith("::: ")]


def test_reference_has_a_page_per_package_and_an_index() -> None:
    pages = sorted(path.stem for path in REFERENCE.glob("*.md"))

    assert pages == sorted([*PACKAGE_PAGES, "index"])


def test_every_exported_name_is_on_exactly_one_package_page() -> None:
    documented = [
        path.removeprefix("pygents_ctx.")
        for page in PACKAGE_PAGES
        for path in _directives(page)
        if path not in OWN_MODULES
    ]

    assert sorted(documented) == sorted(pygents_ctx.__all__)


def test_modules_of_their_own_are_documented_whole() -> None:
    documented = {path for page in PACKAGE_PAGES for path in _directives(page)}

    assert set(OWN_MODULES) <= documented


@pytest.mark.parametrize("module_name", ["pygents_ctx", *OWN_MODULES])
def test_the_reference_index_links_every_public_name(module_name: str) -> None:
    index = (REFERENCE / "index.md").read_text(encoding="utf-8")
    module = importlib.import_module(module_name)

    unlinked = [name for name in module.__all__ if f"][{module_name}.{name}]" not in index]

    assert unlinked == []
