# Set-up and everyday commands. Only Python 3.11+, pip and make are needed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint bench fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/switchboard dev

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy tenancy api jobs integrations cli
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy tenancy api jobs integrations cli
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m bench.provisioning
	$(BIN)/python -m bench.migrate
	$(BIN)/python -m bench.contacts
	$(BIN)/python -m bench.campaigns

# The long fuzzing: 1000 examples per operation and long stateful scenarios (the test pass
# runs the same tests with fewer examples).
fuzz: $(STAMP)
	$(BIN)/python -m pytest tests/fuzz -q -m 'fuzz_long or not fuzz_long'

clean:
	rm -rf $(VENV) .data
