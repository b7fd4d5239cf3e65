# Two entry points for a fresh machine: `make demo` and `make test`. Each creates .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test faults lint install clean bench

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch is pinned and installed first: any other spec resolves to the multi-GB CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/convmon demo

test: $(STAMP)
	$(BIN)/ruff check monitor distill tests
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not faults"

# The delivery fault suite (docs/reliability.md): >= 2,000 conversations per fault, read back per id and
# counted through a real Prometheus; tables in var/faults/. About 15 minutes on 2 cores; .ci/run runs it.
faults: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m faults -rxX --durations=0 tests/reliability

# Reruns every benchmark (about 40 minutes on 2 cores) and rewrites docs/benchmarks.md.
bench: $(STAMP)
	$(BIN)/convmon bench report --run

lint: $(STAMP)
	$(BIN)/ruff check monitor distill tests

clean:
	rm -rf $(VENV) var
