# Every target builds the virtualenv it needs, so a fresh machine with only
# Python and pip can run `make demo` and `make test` directly.

PYTHON ?= python3
VENV ?= .venv

BIN := $(VENV)/bin
# Stamps: reinstall whenever pyproject.toml changes. The demo needs the package
# alone; the tests, the checks and the docs need their extras.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs

# The differential tests against pygents 0.7.0 need Python 3.12+: when $(PYTHON)
# is older, `make test` runs them on the first 3.12 or 3.13 found here, in a
# virtualenv of their own with the `test` extra.
COMPAT_PYTHON ?= $(shell .ci/find-python 3.12 3.13)
COMPAT_VENV ?= .venv-compat
COMPAT_STAMP := $(COMPAT_VENV)/.installed
PYTHON_HAS_PYGENTS := $(shell $(PYTHON) -c 'import sys; print(int(sys.version_info >= (3, 12)))')

# Test processes: pytest-xdist spreads the suite over the machine's cores (each
# worker starts its own PostgreSQL server and uses its own files and ports).
WORKERS ?= auto

.DEFAULT_GOAL := help

.PHONY: help test pytest suite compat check fmt demo docs dist bench clean postgres

help:
	@echo "make demo    run the example agent (examples/demo.py)"
	@echo "make test    lint, format check, mypy --strict, tests with branch coverage"
	@echo "make pytest  tests with branch coverage only"
	@echo "make suite   tests only, no coverage (CI's other Pythons)"
	@echo "make compat  the differential tests against pygents 0.7.0 (on Python 3.12+)"
	@echo "make check   ruff lint, format check and mypy --strict only"
	@echo "make fmt     format and autofix with ruff"
	@echo "make docs    build the docs site (mkdocs build --strict)"
	@echo "make dist    build the sdist and wheel into dist/, install the wheel with"
	@echo "             every extra in a fresh virtualenv and run the demo with it"
	@echo "make bench   run the benchmarks, then the head-to-head with pygents (--peer)"
	@echo "make clean   remove virtualenvs, caches, site/ and coverage data"
	@echo ""
	@echo "Variables: PYTHON=$(PYTHON) VENV=$(VENV)"

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e .
	@touch $@

$(DEV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@ $(RUN_STAMP)

$(COMPAT_STAMP): pyproject.toml
	$(COMPAT_PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/pip install -q -e '.[test]'
	@touch $@

$(DOCS_STAMP): pyproject.toml $(DEV_STAMP)
	$(BIN)/pip install -q -e '.[dev,docs]'
	@touch $@

define CHECKS
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict pygents_ctx
endef

# The coverage gate (fail_under) lives in pyproject.toml; coverage measures the
# xdist workers too, and `combine` joins their data (see [tool.coverage.run]).
define TESTS
	rm -f .coverage .coverage.*
	$(BIN)/coverage run -m pytest -n $(WORKERS)
	$(BIN)/coverage combine -q
	$(BIN)/coverage report
endef

# The PostgreSQL stores' tests need the server binaries, the vector store's the
# pgvector extension, and the viewer's browser tests Chromium; each is installed
# when missing.
postgres:
	@.ci/postgres
	@.ci/pgvector
	@.ci/chromium

test: $(DEV_STAMP) postgres
	$(CHECKS)
	$(TESTS)
	@$(MAKE) --no-print-directory compat

pytest: $(DEV_STAMP) postgres
	$(TESTS)

# The suite without coverage: CI measures coverage once, on the default python3,
# and only runs the tests on the other supported Pythons.
suite: $(DEV_STAMP) postgres
	$(BIN)/python -m pytest -n $(WORKERS)

compat:
ifeq ($(PYTHON_HAS_PYGENTS),1)
	@echo "The differential tests against pygents ran with the suite (Python 3.12+)."
else ifeq ($(COMPAT_PYTHON),)
	@echo "The differential tests against pygents 0.7.0 did not run: they need Python 3.12 or 3.13, and this machine has neither."
else
	@echo "The differential tests against pygents 0.7.0, on $(COMPAT_PYTHON):"
	@$(MAKE) --no-print-directory $(COMPAT_STAMP)
	$(COMPAT_VENV)/bin/python -m pytest tests/compat -q -n $(WORKERS)
endif

check: $(DEV_STAMP)
	$(CHECKS)

fmt: $(DEV_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: $(RUN_STAMP)
	$(BIN)/python examples/demo.py

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

dist: $(DEV_STAMP)
	$(BIN)/python .ci/dist_check.py dist

bench: $(DEV_STAMP)
	$(BIN)/python -m bench
	$(BIN)/python -m bench --peer

clean:
	rm -rf $(VENV) .venv .venv-* site htmlcov .coverage .coverage.* coverage.xml \
		.pytest_cache .mypy_cache .ruff_cache .hypothesis dist build *.egg-info
	find . -name __pycache__ -type d -not -path './.venv*' -prune -exec rm -rf {} +
