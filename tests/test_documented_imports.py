"""Every import of `pygents_ctx` the documentation shows works.

The imports are collected from the guides, the README, the examples and the
package's docstrings each time the tests run, so a module that moves (or a
name that leaves a module) fails here until the documentation or a re-export
follows it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pygents_ctx"

# `from pygents_ctx... import a, b as c` (parenthesized over several lines or not) and
# `import pygents_ctx...`, anywhere in a line: after a doctest prompt, in prose.
_FROM = re.compile(
    r"\bfrom\s+(pygents_ctx(?:\.\w+)*)\s+import\s+(\([^)]*\)|[\w ,]+(?:\\\n[\w ,]+)*)"
)
_IMPORT = re.compile(r"(?:^|[\s;`>])import\s+(pygents_ctx(?:\.\w+)*)")
_CONTINUATION = re.compile(r"^\s*(?:\.\.\.|>>>) ?", re.MULTILINE)


@dataclass(frozen=True)
class DocumentedImport:
    """One import the documentation shows: the module and the names taken from it."""

    where: str
    module: str
    names: tuple[str, ...]

    def __str__(self) -> str:
        if not self.names:
            return f"{self.where}: import {self.module}"
        return f"{self.where}: from {self.module} import {', '.join(self.names)}"


def imports_in(text: str, where: str) -> list[DocumentedImport]:
    """The `pygents_ctx` imports in `text` (doctest prompts inside parentheses allowed)."""
    found = []
    for match in _FROM.finditer(text):
        listed = re.sub(r"#[^\n]*", "", _CONTINUATION.sub("", match.group(2))).strip("()")
        names = [
            name.split(" as ")[0].strip()
            for name in listed.replace("\\\n", " ").split(",")
            if name.strip()
        ]
        line = text.count("\n", 0, match.start()) + 1
        found.append(DocumentedImport(f"{where}:{line}", match.group(1), tuple(names)))
    for match in _IMPORT.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        found.append(DocumentedImport(f"{where}:{line}", match.group(1), ()))
    return found


def _docstrings(path: Path) -> list[tuple[int, str]]:
    """Each docstring of a module (its own, its classes' and functions'), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                found.append((node.body[0].lineno, doc))
    return found


def documented_imports() -> list[DocumentedImport]:
    found: list[DocumentedImport] = []
    documents = [
        *sorted((ROOT / "guides").rglob("*.md")),
        ROOT / "README.md",
        *sorted((ROOT / "examples").glob("*.py")),
    ]
    for document in documents:
        where = document.relative_to(ROOT).as_posix()
        found += imports_in(document.read_text(encoding="utf-8"), where)
    for source in sorted(PACKAGE.rglob("*.py")):
        where = source.relative_to(ROOT).as_posix()
        for line, doc in _docstrings(source):
            found += [
                DocumentedImport(f"{where}:{line} (docstring)", i.module, i.names)
                for i in imports_in(doc, "")
            ]
    return found


DOCUMENTED = documented_imports()


def test_the_documentation_shows_imports_of_the_package() -> None:
    # Guards the collection: the guides, the examples and the docstrings all show some,
    # of submodules too.
    wheres = {i.where.split(":")[0].split("/")[0] for i in DOCUMENTED}
    modules = {i.module for i in DOCUMENTED}

    assert {"guides", "README.md", "examples", "pygents_ctx"} <= wheres
    assert {"pygents_ctx", "pygents_ctx.context.stores", "pygents_ctx.cli"} <= modules


@pytest.mark.parametrize(
    "documented", sorted(set(DOCUMENTED), key=str), ids=lambda i: f"{i.module}:{i.names}"
)
def test_a_documented_import_works(documented: DocumentedImport) -> None:
    module = importlib.import_module(documented.module)

    missing = [
        name
        for name in documented.names
        if name != "*"
        and not hasattr(module, name)
        and importlib.util.find_spec(f"{documented.module}.{name}") is None
    ]

    assert missing == [], f"{documented}: {missing} cannot be imported from {documented.module}"


def test_the_collection_reads_every_form_the_docs_use() -> None:
    text = """
    >>> from pygents_ctx import (
    ...     Agent,
    ...     Turn as T,  # the turn
    ... )
    from pygents_ctx.context.stores import SQLiteContextStore, connect
    >>> import pygents_ctx.context.wire
    The command line is `import pygents_ctx.cli` away.
    """

    found = [(i.module, i.names) for i in imports_in(text, "x")]

    assert found == [
        ("pygents_ctx", ("Agent", "Turn")),
        ("pygents_ctx.context.stores", ("SQLiteContextStore", "connect")),
        ("pygents_ctx.context.wire", ()),
        ("pygents_ctx.cli", ()),
    ]
