# Two commands do all the set-up: `make run` (the REPL on the embedded demo
# database) and `make test` (the whole suite). Both build .venv on first use.
PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
export NUMBA_CACHE_DIR := $(CURDIR)/.numba_cache

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/matchsql

test: $(STAMP)
	$(VENV)/bin/ruff check matchsql tests bench examples
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup tests

bench: $(STAMP)
	$(VENV)/bin/python -m bench

clean:
	rm -rf $(VENV) .numba_cache .pytest_cache .hypothesis
