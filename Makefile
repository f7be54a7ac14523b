# agentrt: `make demo` runs a real session offline; `make test` runs the test suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test typecheck docs install dev worker chaos soak bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/agentrt demo --source .

# The tests run in PYTEST_WORKERS processes (pytest-xdist), each with its own Temporal dev server and
# store. Tests go out in collection order, so the replay test (marked replay_last) goes last and
# replays what every process recorded (tests/_recorded.py); the tests of a module that share a
# module-scoped fixture go to one process (tests/conftest.py). PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 4

test: typecheck docs
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# pyright over the product, "basic" mode ([tool.pyright] in pyproject.toml): it checks the folders
# through build/pyright/agentrt, a link to the repository root, as that is how `agentrt.*` resolves.
typecheck: $(STAMP)
	mkdir -p build/pyright
	ln -sfn ../.. build/pyright/agentrt
	$(BIN)/pyright

# The documentation site (mkdocs.yml): strict, so a broken link or a page missing from the nav fails.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# The big chaos run, by hand (15-25 minutes): 50 sessions, 200 worker kills, 10 server restarts.
chaos: $(STAMP)
	$(BIN)/python -m bench.chaos --sessions 50 --kills 200 --server-restarts 10

# An hour of sessions with the worker SIGKILLed every 4 minutes, footprints sampled every minute (bench/soak.py);
# `.venv/bin/python -m bench.soak --minutes 10` is the short form.
soak: $(STAMP)
	$(BIN)/python -m bench.soak

# The short form of every performance benchmark and one table of their results, by hand (about 12 minutes).
bench: $(STAMP)
	$(BIN)/python -m bench.suite

dev: $(STAMP)
	$(BIN)/agentrt dev

worker: $(STAMP)
	$(BIN)/agentrt worker

clean:
	rm -rf .agentrt .pytest_cache .hypothesis build/pyright build/site
