"""A run is never started into a paused DAG, where it would wait unseen (real Airflow, REST).

The starter uses the operator the sweeps use to start runbooks; the target is paused at
creation. The refusal must be a failed task with a decision record naming the DAG, and no
run queued in the target; once the target is unpaused the same starter starts the run.
"""

from __future__ import annotations

import pytest

STARTER = "e2e_paused_target_starter"
TARGET = "e2e_paused_target"
pytestmark = pytest.mark.timeout(600)


def _target_runs(airflow) -> list[dict]:
    return airflow.api("GET", f"/dags/{TARGET}/dagRuns")["dag_runs"]


def test_a_sweep_never_starts_a_run_into_a_paused_dag(airflow_local):
    airflow_local.wait_for_dag(STARTER)
    assert airflow_local.wait_for_dag(TARGET)["is_paused"] is True

    refused = airflow_local.trigger(STARTER)
    assert airflow_local.wait_for_run(STARTER, refused) == "failed"
    assert airflow_local.task_instance(STARTER, refused, "start_target")["state"] == "failed"
    log = airflow_local.task_log_text(STARTER, refused, "start_target")
    assert "not started: e2e_paused_target is paused" in log
    assert _target_runs(airflow_local) == []
    assert airflow_local.dag(TARGET)["is_paused"] is True

    airflow_local.unpause(TARGET)
    started = airflow_local.trigger(STARTER)
    assert airflow_local.wait_for_run(STARTER, started) == "success"
    runs = _target_runs(airflow_local)
    assert [r["dag_run_id"] for r in runs] == [f"{started}__target"]
    assert airflow_local.wait_for_run(TARGET, runs[0]["dag_run_id"]) == "success"
