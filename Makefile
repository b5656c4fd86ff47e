# Every target builds the virtualenv it needs, so a fresh machine with only
# Python and pip can run `make demo` and `make test` directly.

PYTHON ?= python3
VENV ?= .venv

BIN := $(VENV)/bin
# Stamps: reinstall whenever pyproject.toml changes.
DEV_STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs

.DEFAULT_GOAL := help

.PHONY: help test pytest check fmt demo docs bench clean postgres

help:
	@echo "make demo    run the example agent (examples/demo.py)"
	@echo "make test    lint, format check, mypy --strict, tests with branch coverage"
	@echo "make pytest  tests with branch coverage only"
	@echo "make check   ruff lint, format check and mypy --strict only"
	@echo "make fmt     format and autofix with ruff"
	@echo "make docs    build the docs site (mkdocs build --strict)"
	@echo "make bench   run the benchmarks, then the head-to-head with pygents (--peer)"
	@echo "make clean   remove virtualenvs, caches, site/ and coverage data"
	@echo ""
	@echo "Variables: PYTHON=$(PYTHON) VENV=$(VENV)"

$(DEV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

$(DOCS_STAMP): pyproject.toml $(DEV_STAMP)
	$(BIN)/pip install -q -e '.[dev,docs]'
	@touch $@

define CHECKS
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict pygents_ctx
endef

# The coverage gate (fail_under) lives in pyproject.toml.
define TESTS
	$(BIN)/coverage run -m pytest
	$(BIN)/coverage report
endef

# The PostgreSQL stores' tests need the server binaries, and the vector store's the
# pgvector extension; each is installed when missing.
postgres:
	@.ci/postgres
	@.ci/pgvector

test: $(DEV_STAMP) postgres
	$(CHECKS)
	$(TESTS)

pytest: $(DEV_STAMP) postgres
	$(TESTS)

check: $(DEV_STAMP)
	$(CHECKS)

fmt: $(DEV_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: $(DEV_STAMP)
	$(BIN)/python examples/demo.py

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(DEV_STAMP)
	$(BIN)/python -m bench
	$(BIN)/python -m bench --peer

clean:
	rm -rf $(VENV) .venv .venv-* site htmlcov .coverage .coverage.* coverage.xml \
		.pytest_cache .mypy_cache .ruff_cache .hypothesis dist build *.egg-info
	find . -name __pycache__ -type d -not -path './.venv*' -prune -exec rm -rf {} +
