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
