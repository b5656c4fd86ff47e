"""The examples in the package's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import pygents_ctx

FINDER = doctest.DocTestFinder(exclude_empty=True)


def _modules() -> list[ModuleType]:
    names = [pygents_ctx.__name__] + [
        info.name for info in pkgutil.walk_packages(pygents_ctx.__path__, "pygents_ctx.")
    ]
    return [importlib.import_module(name) for name in names]


def _examples(module: ModuleType) -> list[doctest.DocTest]:
    return [test for test in FINDER.find(module) if test.examples]


MODULES_WITH_EXAMPLES = [module for module in _modules() if _examples(module)]


def test_the_docs_have_examples_to_run() -> None:
    assert MODULES_WITH_EXAMPLES


# A plain `def`: the examples call asyncio.run(), which needs no running event loop.
@pytest.mark.parametrize("module", MODULES_WITH_EXAMPLES, ids=lambda m: m.__name__)
def test_docstring_examples_pass(module: ModuleType) -> None:
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)

    for test in _examples(module):
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)

    assert results.attempted > 0
    assert results.failed == 0, "".join(report)
