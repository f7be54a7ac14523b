# agentrt: `make demo` runs a real session offline; `make test` runs the test suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install dev worker clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/agentrt demo --source .

test: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

dev: $(STAMP)
	$(BIN)/agentrt dev

worker: $(STAMP)
	$(BIN)/agentrt worker

clean:
	rm -rf .agentrt .pytest_cache .hypothesis
