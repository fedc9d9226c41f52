# make run  : install what is missing, run the quick comparison on this host, print the report
# make test : install what is missing, run the test suite (unit + real integration tests)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test deps venv unit lint clean-state

run: deps venv
	$(BIN)/virtbench run --quick

test: deps venv lint
	tools/prepare-tests
	url="$$(tools/start-postgres)" && [ -n "$$url" ] && \
	VIRTBENCH_TEST_PG_URL="$$url" $(BIN)/python -m pytest -ra -q $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check src tests benchmarks

unit: venv
	$(BIN)/python -m pytest -q tests/unit

deps:
	tools/install-debian-deps

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.lock pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

clean-state:
	$(BIN)/virtbench cleanup
