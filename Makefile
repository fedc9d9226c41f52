# make run       : install what is missing, run the quick comparison on this host, print the report
# make test      : install what is missing, run the whole test suite (lint, unit + real integration
#                  tests, side by side where safe: tools/run-tests, tests/README.md); what CI runs
# make test-fast : the inner loop, under 5 minutes: lint, type check, the unit and web tests that
#                  need no root runtime (-m 'not integration')
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
FAST_WORKERS ?= 2

.PHONY: run test test-fast fast-tests prepare-tests deps venv unit lint clean-state

run: deps venv
	$(BIN)/virtbench run --quick

# the Python environment and the test-only Debian packages (chromium, PostgreSQL, qemu-user...) at once
test: deps
	$(MAKE) --no-print-directory --output-sync=target -j2 venv prepare-tests
	tools/run-tests $(PYTEST_ARGS)

prepare-tests:
	tools/prepare-tests

test-fast: venv
	$(MAKE) --no-print-directory --output-sync=target -j2 lint fast-tests

# a short --basetemp: xdist's per-worker tmp_path under pytest's default one is too long for a Unix socket path
fast-tests: venv
	t=$$(mktemp -d /tmp/vbfXXXX) && $(BIN)/python -m pytest -q -p no:cacheprovider -n $(FAST_WORKERS) --basetemp=$$t \
	  -m "not integration" tests/unit tests/web $(PYTEST_ARGS); rc=$$?; rm -rf --one-file-system $$t; exit $$rc

# ruff (style, import order) and mypy (config in pyproject.toml) with zero findings; the
# structural rules (layering, cycles, SQL only in store/, plugin names) are tests/unit/test_structure.py.
lint: venv
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

unit: venv
	$(BIN)/python -m pytest -q tests/unit

deps:
	tools/install-debian-deps

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.lock pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e '.[web,figures,parquet,postgres,kubernetes,test]'
	touch $@

clean-state:
	$(BIN)/virtbench cleanup
