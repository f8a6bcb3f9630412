# The two set-up commands. Each creates .venv when it is missing and installs
# the project (editable, with its dev extras) from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint docs bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
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
