"""Every glue function a reassigning DAG names exists.

The reassigning DAGs name their glue as ``"module:function"`` strings, imported only when a task
runs (DAG parsing imports nothing more), so a renamed function passes every parse and fails the
run: the heal's verify_result failed with AttributeError after all its chunks were moved, once
``failed_broker.verify`` was gone and the DAG still named it.
"""

from __future__ import annotations

import importlib
import runpy
from pathlib import Path

import pytest

from kafka_runbooks_airflow import reassign_dag

DAGS = Path(__file__).resolve().parents[3] / "dags"
#: the runbook's fields that name ``"module:function"`` glue (the rest is Jinja and flags)
GLUE_FIELDS = ("check_input", "request", "validate", "review_plan", "verify")
REASSIGNING = sorted(p for p in DAGS.glob("*.py") if "reassignment_tasks(" in p.read_text())


def _runbook(path: Path, monkeypatch) -> reassign_dag.ReassignmentRunbook:
    """The runbook the DAG file hands to ``reassignment_tasks`` (caught, no tasks built)."""
    seen: list[reassign_dag.ReassignmentRunbook] = []
    monkeypatch.setattr(reassign_dag, "reassignment_tasks", lambda runbook, *args: seen.append(runbook))
    runpy.run_path(str(path))
    [runbook] = seen
    return runbook


def test_the_reassigning_dags_are_found():
    names = {p.stem for p in REASSIGNING}
    assert {"kafka_failed_broker_reassignment", "kafka_log_dir_failure", "kafka_rebalance"} <= names


@pytest.mark.parametrize("path", REASSIGNING, ids=lambda p: p.stem)
def test_every_named_glue_function_exists(path, monkeypatch):
    runbook = _runbook(path, monkeypatch)
    named = {name: getattr(runbook, name) for name in GLUE_FIELDS}
    missing = {
        field: target
        for field, target in named.items()
        if not callable(
            getattr(importlib.import_module(target.partition(":")[0]), target.partition(":")[2], None)
        )
    }
    assert missing == {}, f"{path.name} names glue that does not exist: {missing}"
