# The two commands of the README: `make demo` and `make test`. Both set up what they
# need on a fresh machine (venv, Python packages, Kafka jars from Maven Central).
.PHONY: setup demo stop test test-matrix lint format stack-start stack-stop chaos

VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

setup:
	@bash scripts/bootstrap.sh

demo:
	@bash scripts/bootstrap.sh --alerting
	@$(PY) scripts/demo.py start

stop:
	@$(PY) scripts/demo.py stop

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# the whole suite; KR_KAFKA_VERSION=3.9.2 (or a line: 4.0) runs it on another Kafka release
SUITE := -m pytest -p no:cacheprovider -n 2 --timeout=900 --durations=30 tests

test: lint
	@bash scripts/bootstrap.sh --browser
	$(PY) $(SUITE) --kafka-compat

# The whole suite once per supported Kafka release, one after the other, then passed/failed per
# release; fails if any failed (hours). RELEASES=3.9,4.4.0 runs some (docs/testing.md, "Kafka releases").
test-matrix: lint
	@bash scripts/bootstrap.sh --browser
	$(PY) -m kafka_runbooks_dev.localstack.matrix $(if $(RELEASES),--releases $(RELEASES)) -- $(PY) $(SUITE)

# The fault campaign (issue #37): every disruptive runbook under seeded random faults, judged from
# outside. RUNBOOKS=restart,heal,... SEEDS=1-20 (default 1-5); REPLAY=FILE:LINE replays one record.
chaos: setup
	$(PY) bench/chaos.py $(if $(RUNBOOKS),--runbooks $(RUNBOOKS)) $(if $(SEEDS),--seeds $(SEEDS)) $(if $(REPLAY),--replay $(REPLAY)) $(if $(RESULTS),--results $(RESULTS))
