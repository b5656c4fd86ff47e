"""pygents' own test suite, run against pygents 0.7.0 and against pygents_ctx.

    python -m bench.pygents_suite --tests PATH [--show-failures]

PATH is a directory of pygents' public tests (its repository's `tests/`, with
`conftest.py`, `unit/` and `integration/`): they are not vendored here, since
they are another project's code. Get them from pygents' repository
(github.com/paulomtts/pygents) and pass the directory; `PYGENTS_TESTS` in the
environment works as well.

The suite runs twice in this Python (3.12 or newer, with the `dev` extra, which
pins pygents 0.7.0): once against pygents itself, once with `import pygents`
answered by pygents_ctx through a shim package made in a temporary directory
(`pygents.agent`, `.context`, `.errors`, `.hooks`, `.registry` map to their
namesakes, `pygents.tool` to `pygents_ctx.tools`, `pygents.turn` to
`pygents_ctx.turns`; pygents' internal `utils` module has no counterpart, and a
private name a test imports (`pygents.context._current_context_queue`) imports
as a placeholder that fails the test when used, so that only the tests using it
fail, not every test of its module; pygents' conftest.py
empties a private attribute, `HookRegistry._global_hooks`, before each test,
which the shim run does with `HookRegistry.clear_globals()`). The
repository's history holds tests written for other pygents versions too
(`pygents.context_queue` and `pygents.context_pool` became `pygents.context`,
and both runs get those two names as aliases); the suite counted is the tests
that pass on pygents 0.7.0, and the report is how many of them pass on
pygents_ctx. Each failing test is listed with the first line of its error, to
be fixed or documented on guides/guides/migrating-from-pygents.md.

A second figure leaves out the tests that reach into pygents' private names
(`agent._queue`, `ToolRegistry._registry`, `HookRegistry._global_hooks`,
`pygents.utils`), which have no counterpart by design: it is how many of the
tests written against pygents' public names alone pass. A test counts as
private when its source (its function, the fixtures it names and the helpers
of its module it calls) reads an attribute starting with one underscore or
imports a private name of pygents, or when it fails on such a name.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# pygents' modules and where pygents_ctx keeps the same names.
MODULES = {
    "agent": "pygents_ctx.agent",
    "context": "pygents_ctx.context",
    "errors": "pygents_ctx.errors",
    "hooks": "pygents_ctx.hooks",
    "registry": "pygents_ctx.registry",
    "tool": "pygents_ctx.tools",
    "turn": "pygents_ctx.turns",
    # earlier pygents module names, both now `pygents.context`
    "context_queue": "pygents_ctx.context",
    "context_pool": "pygents_ctx.context",
}

# Helpers of pygents that its tests import by name though they are not public.
PRIVATE_HELPERS = ("inject_context_deps", "serialize_hooks_by_type")

SHIM = '''"""`import pygents` answered by pygents_ctx (made by bench.pygents_suite)."""
import importlib
import sys
import types

import pygents_ctx
from pygents_ctx import *  # noqa: F403

# Helpers of pygents that its tests import by name though they are not public.
PRIVATE = {{{helpers}}}


class PrivateName:
    """A private name of pygents: importing it works, using it fails the test."""

    def __init__(self, name):
        object.__setattr__(self, "name", name)

    def __call__(self, *args, **kwargs):
        raise AttributeError(f"pygents' private name {{self.name!r}}: no counterpart")

    def __getattr__(self, attribute):
        raise AttributeError(f"pygents' private name {{self.name!r}}: no counterpart")


def face(name, target):
    """A module with `target`'s public names; pygents' private ones as PrivateName."""
    module = types.ModuleType(name)
    public = importlib.import_module(target)
    module.__dict__.update((k, v) for k, v in vars(public).items() if not k.startswith("_"))

    def missing(attribute):
        if attribute in PRIVATE or (attribute[:1] == "_" and attribute[:2] != "__"):
            return PrivateName(name + "." + attribute)
        raise AttributeError(f"module {{name!r}} has no attribute {{attribute!r}}")

    module.__getattr__ = missing
    return module


for _name, _target in {modules!r}.items():
    _module = face(__name__ + "." + _name, _target)
    sys.modules[__name__ + "." + _name] = _module
    globals()[_name] = _module
'''

# For the run against pygents_ctx: what pygents' conftest.py does before each test
# (`HookRegistry._global_hooks = []`, a private attribute) done through the public API.
CLEAR_GLOBALS = '''"""Each test starts without global hooks, as pygents' conftest.py arranges."""
import pytest

from pygents_ctx import HookRegistry


@pytest.fixture(autouse=True)
def _no_global_hooks():
    HookRegistry.clear_globals()
    yield
    HookRegistry.clear_globals()
'''

# For the run against pygents itself: the two earlier module names.
ALIASES = '''"""Earlier pygents module names as aliases of pygents.context."""
import sys

import pygents.context

sys.modules["pygents.context_queue"] = pygents.context
sys.modules["pygents.context_pool"] = pygents.context
'''


# A failure caused by a test using a private name of pygents (`agent._queue`,
# `ToolRegistry._registry`, `pygents.context._current_context_queue`, pygents.utils).
PRIVATE_USE = re.compile(r"attribute '_\w+'|private name|No module named 'pygents\.utils'")


def _is_private(name: str) -> bool:
    """A private name: one leading underscore (`_queue`), not a dunder (`__name__`)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports(node: ast.AST) -> set[str]:
    """The names the imports under `node` bind to private names of pygents."""
    names: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.ImportFrom) and (child.module or "").startswith("pygents"):
            for alias in child.names:
                if (
                    child.module == "pygents.utils"
                    or _is_private(alias.name)
                    or alias.name in PRIVATE_HELPERS
                ):
                    names.add(alias.asname or alias.name)
        elif isinstance(child, ast.Import):
            utils = (alias for alias in child.names if alias.name == "pygents.utils")
            names.update(alias.asname or alias.name for alias in utils)
    return names


def _reads_private(node: ast.AST, imported: set[str]) -> bool:
    """Whether the code under `node` uses a private name of pygents (or of its objects):
    an attribute starting with one underscore, a private import, or a name in `imported`
    (those its module imported privately)."""
    if _private_imports(node):
        return True
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute) and _is_private(child.attr):
            return True
        if isinstance(child, ast.Name) and child.id in imported:
            return True
    return False


class Sources:
    """pygents' test files, parsed once, to tell which tests use private names."""

    def __init__(self, tests: Path) -> None:
        self.tests = tests
        self._modules: dict[Path, dict[str, ast.AST]] = {}
        self._imported: dict[Path, set[str]] = {}

    def _definitions(self, path: Path) -> dict[str, ast.AST]:
        """The module-level functions and classes of `path` (and tests in classes), by name."""
        if path not in self._modules:
            found: dict[str, ast.AST] = {}
            self._imported[path] = set()
            if path.is_file():
                module = ast.parse(path.read_text(encoding="utf-8"))
                imports = [n for n in module.body if isinstance(n, (ast.Import, ast.ImportFrom))]
                self._imported[path] = _private_imports(ast.Module(imports, type_ignores=[]))
                for node in module.body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        found[node.name] = node
                    if isinstance(node, ast.ClassDef):
                        for member in node.body:
                            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                                found.setdefault(member.name, member)
            self._modules[path] = found
        return self._modules[path]

    def uses_private(self, test_id: str) -> bool:
        """Whether the test `classname::name` (as the JUnit report names it) uses one."""
        classname, name = test_id.split("::", 1)
        parts = classname.split(".")
        path = next(
            (
                candidate
                for end in range(len(parts), 0, -1)
                if (candidate := self.tests.joinpath(*parts[:end]).with_suffix(".py")).is_file()
            ),
            None,
        )
        if path is None:
            return False
        # Where its fixtures can come from: its module, then each conftest.py above it.
        scopes = [self._definitions(path)] + [
            self._definitions(folder / "conftest.py")
            for folder in path.parents
            if folder == self.tests or self.tests in folder.parents
        ]
        local, imported = scopes[0], self._imported[path]
        todo = [local.get(name.split("[", 1)[0])]
        seen: set[int] = set()
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if _reads_private(node, imported):
                return True
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for argument in node.args.args:  # fixtures, by the parameter's name
                    todo.append(next((s[argument.arg] for s in scopes if argument.arg in s), None))
            todo.extend(  # the helpers of its module it calls
                local.get(child.id) for child in ast.walk(node) if isinstance(child, ast.Name)
            )
        return False


def run(tests: Path, path_entry: Path, report: Path, plugin: str | None) -> dict[str, str]:
    """Run the suite with `path_entry` first on the path; test id -> outcome and message."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(path_entry), str(ROOT)])
    options = (
        "-q -n 0 -p no:cacheprovider -p no:randomly -o addopts= --continue-on-collection-errors"
    )
    command = [sys.executable, "-m", "pytest", str(tests), *options.split()]
    command += [f"--junitxml={report}", f"--rootdir={tests}"]
    if plugin:
        command += ["-p", plugin]
    subprocess.run(
        command,
        env=env,
        cwd=tests,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    results: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                message = (child.get("message") or "").strip().splitlines()
                outcome = "failed: " + (message[0][:160] if message else child.tag)
            elif child.tag == "skipped":
                outcome = "skipped"
        results[name] = outcome
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tests",
        default=os.environ.get("PYGENTS_TESTS"),
        help="pygents' tests/ directory (or PYGENTS_TESTS)",
    )
    parser.add_argument(
        "--show-failures",
        action="store_true",
        help="list each test pygents passes and pygents_ctx fails",
    )
    args = parser.parse_args(argv)
    if not args.tests:
        parser.error("pass --tests PATH (pygents' tests/ directory) or set PYGENTS_TESTS")
    tests = Path(args.tests).resolve()
    if not tests.is_dir():
        parser.error(f"--tests {tests}: no such directory")
    if sys.version_info < (3, 12):
        parser.error("pygents 0.7.0 needs Python 3.12 or newer")
    from importlib.metadata import version

    if version("pygents") != "0.7.0":
        parser.error(f"pygents 0.7.0 expected, found {version('pygents')}")

    with tempfile.TemporaryDirectory(prefix="pygents-suite-") as tmp:
        work = Path(tmp)
        (work / "real").mkdir()
        (work / "real" / "pygents_suite_aliases.py").write_text(ALIASES)
        (work / "shim" / "pygents").mkdir(parents=True)
        shim = SHIM.format(modules=MODULES, helpers=", ".join(map(repr, sorted(PRIVATE_HELPERS))))
        (work / "shim" / "pygents" / "__init__.py").write_text(shim)
        (work / "shim" / "pygents_suite_globals.py").write_text(CLEAR_GLOBALS)
        on_pygents = run(tests, work / "real", work / "real.xml", "pygents_suite_aliases")
        on_ctx = run(tests, work / "shim", work / "shim.xml", "pygents_suite_globals")

    suite = sorted(name for name, outcome in on_pygents.items() if outcome == "passed")
    failing = {name: on_ctx.get(name, "not run") for name in suite}
    failing = {name: outcome for name, outcome in failing.items() if outcome != "passed"}
    passed = len(suite) - len(failing)
    print(f"pygents' tests collected: {len(on_pygents)}; passing on pygents 0.7.0: {len(suite)}")
    share = 100 * passed / len(suite) if suite else 0.0
    print(f"passing on pygents_ctx: {passed}/{len(suite)} ({share:.1f}%)")
    sources = Sources(tests)
    private = {
        name
        for name in suite
        if sources.uses_private(name) or PRIVATE_USE.search(failing.get(name, ""))
    }
    public = [name for name in suite if name not in private]
    public_passed = sum(name not in failing for name in public)
    share = 100 * public_passed / len(public) if public else 0.0
    print(
        f"of the {len(public)} using pygents' public names alone: {public_passed} pass "
        f"({share:.1f}%)"
    )
    print(
        f"of the {len(failing)} failing, {len(private & failing.keys())} reach into pygents' "
        f"private names (an attribute or name starting with '_', pygents.utils)"
    )
    if args.show_failures:
        for private_ones in (False, True):
            shown = sorted(n for n in failing if (n in private) is private_ones)
            if shown:
                print("using private names:" if private_ones else "using public names alone:")
            for name in shown:
                print(f"  {name}\n      {failing[name]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
