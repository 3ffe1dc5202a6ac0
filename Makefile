# Two commands do all the set-up: `make run` (the REPL on the embedded demo
# database) and `make test` (the whole suite, and the manual built strictly).
# Both build .venv on first use. `make docs` builds the manual into site/,
# `make docs-serve` serves it while it is edited.
PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
export NUMBA_CACHE_DIR := $(CURDIR)/.numba_cache
SITE := site
# Material for MkDocs prints a banner about MkDocs 2 on every build; the build is the same.
export NO_MKDOCS_2_WARNING := 1

.PHONY: run test warm docs docs-serve lint bench clean

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The compiled kernels, into the compile cache of this version of the sources (a few
# seconds when they are there already; a minute on 2 cores when they are not).
warm: $(STAMP)
	@$(VENV)/bin/matchsql warm-up --quiet --if-needed

run: warm
	$(VENV)/bin/matchsql

test: warm
	$(VENV)/bin/ruff check matchsql tests bench examples
	$(VENV)/bin/ruff format --check matchsql tests bench examples
	$(VENV)/bin/mypy
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup tests
	$(VENV)/bin/mkdocs build --strict --site-dir $(SITE)

# The checks of `make test` that need no test run (and what pre-commit runs on a commit).
lint: $(STAMP)
	$(VENV)/bin/ruff check matchsql tests bench examples
	$(VENV)/bin/ruff format --check matchsql tests bench examples
	$(VENV)/bin/mypy

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir $(SITE)

docs-serve: $(STAMP)
	$(VENV)/bin/mkdocs serve

bench: $(STAMP)
	$(VENV)/bin/python -m bench

clean:
	rm -rf $(VENV) .numba_cache .pytest_cache .hypothesis $(SITE)
