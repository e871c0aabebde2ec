# The two commands of the README: `make demo` and `make test`. Both set up what they
# need on a fresh machine (venv, Python packages, Kafka jars from Maven Central).
.PHONY: setup demo stop test lint format stack-start stack-stop chaos

VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

setup:
	@bash scripts/bootstrap.sh

demo: setup
	@$(PY) scripts/demo.py start

stop:
	@$(PY) scripts/demo.py stop

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: lint
	@bash scripts/bootstrap.sh --browser
	$(PY) -m pytest -p no:cacheprovider -n 2 --timeout=900 --durations=30 tests

# The fault campaign (issue #37): every disruptive runbook under seeded random faults, judged from
# outside. RUNBOOKS=restart,heal,... SEEDS=1-20 (default 1-5); REPLAY=FILE:LINE replays one record.
chaos: setup
	$(PY) bench/chaos.py $(if $(RUNBOOKS),--runbooks $(RUNBOOKS)) $(if $(SEEDS),--seeds $(SEEDS)) $(if $(REPLAY),--replay $(REPLAY)) $(if $(RESULTS),--results $(RESULTS))
