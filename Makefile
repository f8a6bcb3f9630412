# The two set-up commands. Each creates .venv when it is missing and installs the
# project (editable) from pyproject.toml: `make demo` the package alone, what the demo
# needs; `make test` (and the other targets) with its dev extras. One stamp each.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed-dev

.PHONY: demo test test-fast lint docs bench

$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

# The dev extras include the package, so they satisfy the demo's stamp too.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/runner demo

lint: $(STAMP)
	$(BIN)/ruff check runner tests bench
	$(BIN)/mypy runner
	$(BIN)/mypy --strict tests bench

# The docs site (mkdocs-material) into site/; --strict fails on a broken link or anchor.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test: lint docs
	$(BIN)/pytest

# The suite without the tests marked `process` (those that start or kill a process: the
# installed CLI, mypy, forks, SIGKILL, the worker pool), and without lint: a quick loop
# while working. `make test` (what CI runs) still runs lint and every test.
test-fast: $(STAMP)
	$(BIN)/pytest -m "not process"

bench: $(STAMP)
	$(BIN)/python bench/loop.py
