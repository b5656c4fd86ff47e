"""The package's layers point one way, and its modules import each other in no cycle.

The layers, bottom to top, and which ones each may import, are written out in
CONTRIBUTING.md; `LAYERS` below is that table. Every import statement counts:
at module level, inside a function, and under `if TYPE_CHECKING:` (a type named
from a higher layer is a dependency all the same: use a small Protocol, or a
registration the higher layer fills in).

Cycles are looked for over the imports plus what Python runs implicitly:
importing `a.b.c` first runs the package `a.b` (its `__init__`), so a module
outside `a.b` that imports `a.b.c` depends on everything `a/b/__init__.py`
imports. (A module inside `a.b` does not: its package has run before it. The
root package, which every module is inside, never counts.)
"""

from __future__ import annotations

import ast
import fnmatch
import textwrap
from collections import deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pygents_ctx"


@dataclass(frozen=True)
class Layer:
    """Modules (dotted-name patterns) and the layers below them they may import."""

    modules: tuple[str, ...]
    may_import: tuple[str, ...]


# The layers the agent builds on, which know nothing of it.
_RUNTIME = ("primitives", "hooks", "containers", "tools and turns", "stores and strategies")

# Bottom to top. A module may import its own layer and the layers listed.
LAYERS: dict[str, Layer] = {
    "primitives": Layer(
        (
            "pygents_ctx.errors",
            "pygents_ctx._json",
            "pygents_ctx._checks",
            "pygents_ctx._clock",
            "pygents_ctx._resources",
            "pygents_ctx._suggest",
            "pygents_ctx.context.items",
            "pygents_ctx.context.messages",
            "pygents_ctx.context.tokens",
            "pygents_ctx.context.usage",
            "pygents_ctx.context.selection",
            "pygents_ctx.context._shared",
            "pygents_ctx.context.wire",
            "pygents_ctx.context.wire.*",
        ),
        (),
    ),
    "hooks": Layer(
        ("pygents_ctx.hooks", "pygents_ctx.hooks.*"),
        ("primitives",),
    ),
    "containers": Layer(
        ("pygents_ctx.context", "pygents_ctx.context.queue", "pygents_ctx.context.pool"),
        ("primitives", "hooks"),
    ),
    "tools and turns": Layer(
        ("pygents_ctx.tools", "pygents_ctx.tools.*", "pygents_ctx.turns", "pygents_ctx.turns.*"),
        ("primitives", "hooks"),
    ),
    "stores and strategies": Layer(
        (
            "pygents_ctx.context.stores",
            "pygents_ctx.context.stores.*",
            "pygents_ctx.context.strategies",
            "pygents_ctx.context.strategies.*",
            "pygents_ctx.context.config",
        ),
        ("primitives",),
    ),
    "agent": Layer(
        ("pygents_ctx.agent", "pygents_ctx.agent.*", "pygents_ctx.registry"),
        _RUNTIME,
    ),
    "memory": Layer(
        ("pygents_ctx.memory", "pygents_ctx.memory.*"),
        ("primitives", "stores and strategies"),
    ),
    "model": Layer(
        ("pygents_ctx.model", "pygents_ctx.model.*", "pygents_ctx.testing"),
        # memory: the loop offloads tool results too large for the window to a blob store.
        (*_RUNTIME, "agent", "memory"),
    ),
    "public names": Layer(("pygents_ctx",), (*_RUNTIME, "agent", "memory", "model")),
    # Bridges to optional libraries (MCP, OpenTelemetry), imported by name, never by the
    # package itself.
    "integrations": Layer(
        ("pygents_ctx.integrations", "pygents_ctx.integrations.*"),
        (*_RUNTIME, "agent", "memory", "model", "public names"),
    ),
    "command line": Layer(
        ("pygents_ctx.cli", "pygents_ctx.cli.*", "pygents_ctx.__main__"),
        (*_RUNTIME, "agent", "memory", "model", "public names", "integrations"),
    ),
}


@dataclass(frozen=True)
class Import:
    """One import statement's dependency of `importer` on `target` (both modules)."""

    importer: str
    target: str
    path: str  # the importer's file, relative to the root
    line: int
    where: str  # "", " (inside a function)" or " (under TYPE_CHECKING)"
    via: str = ""  # for a package Python runs first: the module named in the statement

    def __str__(self) -> str:
        if self.via:
            return f"{self.path}:{self.line}{self.where} imports {self.via}, running {self.target}"
        return f"{self.path}:{self.line}{self.where} imports {self.target}"


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` (under `root`) by dotted name; a package is its __init__."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement in `tree`, with where it sits (see `Import.where`)."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, where))
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = where or " (inside a function)"
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    visit_one(statement, where or " (under TYPE_CHECKING)")
                for statement in child.orelse:
                    visit_one(statement, where)
                continue
            visit(child, inner)

    def visit_one(statement: ast.stmt, where: str) -> None:
        wrapper = ast.Module(body=[statement], type_ignores=[])
        visit(wrapper, where)

    visit(tree, "")
    return found


def imports_of(root: Path, package: str) -> list[Import]:
    """Every dependency of a module of `package` on another, one per imported module."""
    modules = modules_of(root, package)
    found = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        relative = path.relative_to(root).as_posix()
        for statement, where in _statements(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(statement, ast.Import):
                targets = [alias.name for alias in statement.names]
            else:
                base = statement.module or ""
                if statement.level:
                    parts = name.split(".") if is_package else name.split(".")[:-1]
                    parts = parts[: len(parts) - statement.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                # `from a import b` imports the module `a.b` when there is one.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in statement.names
                ]
            for target in dict.fromkeys(targets):
                if target in modules and target != name:
                    found.append(Import(name, target, relative, statement.lineno, where))
    return found


def layer_of(module: str, layers: dict[str, Layer]) -> str | None:
    """The layer whose patterns match `module`, None if none does.

    Raises:
        ValueError: More than one layer claims it.
    """
    claims = [
        layer
        for layer, spec in layers.items()
        if any(fnmatch.fnmatchcase(module, pattern) for pattern in spec.modules)
    ]
    if len(claims) > 1:
        raise ValueError(f"{module} is in several layers: {claims}")
    return claims[0] if claims else None


def layer_violations(imports: list[Import], layers: dict[str, Layer]) -> list[str]:
    """Each import of a module in a layer its importer's layer may not import."""
    found = []
    for imp in imports:
        mine, theirs = layer_of(imp.importer, layers), layer_of(imp.target, layers)
        if mine is None or theirs is None or theirs == mine:
            continue
        allowed = layers[mine].may_import
        if theirs not in allowed:
            found.append(
                f"{imp}, but layer {mine!r} may not import layer {theirs!r} (it may import "
                f"{', '.join(map(repr, allowed)) or 'nothing below it'}); depend on a "
                "Protocol or a registration the higher layer fills in (see CONTRIBUTING.md)"
            )
    return found


def _runs_first(imp: Import) -> list[str]:
    """The packages Python runs before `imp.target` (the root aside) that `imp.importer`
    is not inside."""
    parts = imp.target.split(".")
    ancestors = [".".join(parts[:n]) for n in range(2, len(parts))]
    return [p for p in ancestors if imp.importer != p and not imp.importer.startswith(p + ".")]


def import_cycles(imports: list[Import]) -> list[str]:
    """Each set of modules that import each other, with the imports that join them."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports:
        edges.setdefault(imp.importer, {}).setdefault(imp.target, imp)
        for parent in _runs_first(imp):
            implicit = Import(imp.importer, parent, imp.path, imp.line, imp.where, imp.target)
            edges.setdefault(imp.importer, {}).setdefault(parent, implicit)
    cycles = []
    for component in _strongly_connected(edges):
        path = _one_way_around(min(component), edges, set(component))
        cycles.append(
            f"import cycle among {', '.join(sorted(component))}; one way around it:\n    "
            + "\n    ".join(map(str, path))
        )
    return cycles


def _one_way_around(
    start: str, edges: dict[str, dict[str, Import]], members: set[str]
) -> list[Import]:
    """The imports of a shortest cycle from `start` back to it, within `members`."""
    reached: dict[str, Import] = {}  # each module, by the import it was first reached through
    frontier = deque([start])
    while start not in reached:
        node = frontier.popleft()
        for target, imp in sorted(edges.get(node, {}).items()):
            if target in members and target not in reached:
                reached[target] = imp
                frontier.append(target)
    path = [reached[start]]
    while path[-1].importer != start:
        path.append(reached[path[-1].importer])
    return path[::-1]


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's algorithm, without recursion; components of one node without a self-loop
    are left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    nodes = sorted(set(edges) | {t for targets in edges.values() for t in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


# -- the package -----------------------------------------------------------------


MODULES = modules_of(ROOT, PACKAGE)
IMPORTS = imports_of(ROOT, PACKAGE)


def test_every_module_is_in_exactly_one_layer() -> None:
    unplaced = [name for name in MODULES if layer_of(name, LAYERS) is None]

    assert unplaced == [], (
        "put these modules in a layer (LAYERS in tests/test_layers.py, and the table in "
        f"CONTRIBUTING.md): {unplaced}"
    )


def test_every_layer_pattern_names_a_module() -> None:
    stale = [
        pattern
        for spec in LAYERS.values()
        for pattern in spec.modules
        if not any(fnmatch.fnmatchcase(name, pattern) for name in MODULES)
    ]

    assert stale == []


def test_layers_only_import_the_layers_below_them() -> None:
    violations = layer_violations(IMPORTS, LAYERS)

    assert not violations, "\n" + "\n".join(violations)


def test_no_module_imports_itself_back() -> None:
    cycles = import_cycles(IMPORTS)

    assert not cycles, "\n" + "\n".join(cycles)


def test_the_walk_sees_the_package_imports() -> None:
    # Guards the checks above against passing on nothing (the small package below
    # shows that the walk sees imports inside functions too).
    found = {(imp.importer, imp.target, imp.where) for imp in IMPORTS}

    assert ("pygents_ctx.turns._turn", "pygents_ctx.tools", "") in found
    assert ("pygents_ctx.agent._run_state", "pygents_ctx.turns", " (under TYPE_CHECKING)") in found


# -- the checks themselves, on a small package made for them ------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> list[Import]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return imports_of(tmp_path, "pkg")


TWO_LAYERS = {
    "low": Layer(("pkg.low", "pkg.low_*"), ()),
    "high": Layer(("pkg", "pkg.high", "pkg.sub", "pkg.sub.*"), ("low",)),
}


def test_an_import_inside_a_function_of_a_higher_layer_is_reported(tmp_path: Path) -> None:
    imports = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/high.py": "from pkg import low\n",
            "pkg/low.py": "def f():\n    from pkg.high import thing\n",
        },
    )

    (violation,) = layer_violations(imports, TWO_LAYERS)

    assert violation.startswith("pkg/low.py:2 (inside a function) imports pkg.high, but layer")
    assert "'low' may not import layer 'high'" in violation


def test_a_type_checking_import_of_a_higher_layer_is_reported(tmp_path: Path) -> None:
    imports = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/high.py": "",
            "pkg/low.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    import pkg.high\n",
        },
    )

    (violation,) = layer_violations(imports, TWO_LAYERS)

    assert violation.startswith("pkg/low.py:3 (under TYPE_CHECKING) imports pkg.high")


def test_a_cycle_is_reported_with_the_imports_that_close_it(tmp_path: Path) -> None:
    imports = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "from pkg.low_b import x\n",
            "pkg/low_b.py": "def f():\n    from pkg import low\n",
        },
    )

    (cycle,) = import_cycles(imports)

    assert cycle.splitlines() == [
        "import cycle among pkg.low, pkg.low_b; one way around it:",
        "    pkg/low.py:1 imports pkg.low_b",
        "    pkg/low_b.py:2 (inside a function) imports pkg.low",
    ]


def test_a_package_that_runs_first_closes_a_cycle(tmp_path: Path) -> None:
    # pkg.low imports pkg.sub.leaf, so Python runs pkg/sub/__init__.py first, which
    # imports pkg.low back: a cycle though no module names the other's importer.
    imports = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "from pkg.sub.leaf import x\n",
            "pkg/sub/__init__.py": "from pkg.sub.user import y\n",
            "pkg/sub/leaf.py": "",
            "pkg/sub/user.py": "from pkg import low\n",
        },
    )

    (cycle,) = import_cycles(imports)

    assert cycle.splitlines() == [
        "import cycle among pkg.low, pkg.sub, pkg.sub.user; one way around it:",
        "    pkg/low.py:1 imports pkg.sub.leaf, running pkg.sub",
        "    pkg/sub/__init__.py:1 imports pkg.sub.user",
        "    pkg/sub/user.py:1 imports pkg.low",
    ]


def test_siblings_inside_a_package_that_imports_them_are_no_cycle(tmp_path: Path) -> None:
    imports = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.sub import a\n",
            "pkg/sub/__init__.py": "from pkg.sub.a import x\nfrom pkg.sub.b import y\n",
            "pkg/sub/a.py": "from pkg.sub.b import y\n",
            "pkg/sub/b.py": "",
        },
    )

    assert import_cycles(imports) == []


def test_a_relative_import_is_resolved(tmp_path: Path) -> None:
    imports = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/high.py": "",
            "pkg/sub/__init__.py": "from .. import high\nfrom . import leaf\n",
            "pkg/sub/leaf.py": "from ..low import z\n",
            "pkg/low.py": "",
        },
    )

    assert sorted((i.importer, i.target) for i in imports) == [
        ("pkg.sub", "pkg.high"),
        ("pkg.sub", "pkg.sub.leaf"),
        ("pkg.sub.leaf", "pkg.low"),
    ]
