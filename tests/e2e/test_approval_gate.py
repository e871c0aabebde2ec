"""An approval gate holds a run until someone answers it through the REST API.

Drives tests/e2e/dags/gated_approval_check.py on a real Airflow: before_gate >> approval_gate
(ApprovalOperator) >> after_gate, where after_gate logs a marker line with its run id.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kafka_runbooks_dev.localstack.airflow import AirflowLocal

DAG_ID = "e2e_gated_approval_check"
GATE = "approval_gate"
AFTER = "after_gate"
AFTER_GATE_MARKER = "E2E-AFTER-GATE-RAN"  # logged by after_gate, see the DAG file


def _start_gated_run(airflow: AirflowLocal) -> str:
    """Trigger a run and return its id once the gate waits, alone, for an answer."""
    airflow.wait_for_dag(DAG_ID, timeout=60)
    assert not [e for e in airflow.import_errors() if "gated_approval_check" in e["filename"]]
    run_id = airflow.trigger(DAG_ID, {"e2e_id": uuid.uuid4().hex})
    request = airflow.wait_for_approval(DAG_ID, run_id, GATE, timeout=120)
    assert request["options"] == ["Approve", "Reject"]
    assert request["response_received"] is False

    pending = {
        (p["task_instance"]["dag_run_id"], p["task_instance"]["task_id"])
        for p in airflow.pending_approvals(DAG_ID)
    }
    assert (run_id, GATE) in pending
    states = {ti["task_id"]: ti["state"] for ti in airflow.task_instances(DAG_ID, run_id)}
    assert states["before_gate"] == "success"
    assert states[AFTER] is None  # not even scheduled while the gate waits
    assert airflow.dag_run(DAG_ID, run_id)["state"] == "running"
    return run_id


def _answer(airflow: AirflowLocal, run_id: str, option: str) -> None:
    response = airflow.answer(DAG_ID, run_id, GATE, [option])
    assert response["chosen_options"] == [option]
    assert response["responded_by"]["name"] == "admin"
    assert run_id not in {p["task_instance"]["dag_run_id"] for p in airflow.pending_approvals(DAG_ID)}


@pytest.mark.timeout(480)  # includes starting Airflow when this test runs first
def test_approved_gate_lets_the_run_continue(airflow_local: AirflowLocal) -> None:
    started = time.monotonic()
    run_id = _start_gated_run(airflow_local)

    _answer(airflow_local, run_id, "Approve")

    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=120) == "success"
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(DAG_ID, run_id)}
    assert states == {"before_gate": "success", GATE: "success", AFTER: "success"}
    log = airflow_local.task_log_text(DAG_ID, run_id, AFTER)
    assert f"{AFTER_GATE_MARKER} run_id={run_id}" in log
    assert any(
        r.get("event", "").startswith(AFTER_GATE_MARKER)
        for r in airflow_local.task_log(DAG_ID, run_id, AFTER)
    )
    gate_log = airflow_local.task_log_text(DAG_ID, run_id, GATE)
    assert "Approved. Proceeding with downstream tasks" in gate_log
    print(f"\napproved run took {time.monotonic() - started:.1f}s")


@pytest.mark.timeout(480)  # includes starting Airflow when this test runs first
def test_rejected_gate_skips_the_work_after_it(airflow_local: AirflowLocal) -> None:
    started = time.monotonic()
    run_id = _start_gated_run(airflow_local)

    _answer(airflow_local, run_id, "Reject")

    # ApprovalOperator without fail_on_reject: the gate itself succeeds (an answer was given),
    # the task after it is skipped, and so the run ends "success", not "failed".
    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=120) == "success"
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(DAG_ID, run_id)}
    assert states == {"before_gate": "success", GATE: "success", AFTER: "skipped"}
    after = airflow_local.task_instance(DAG_ID, run_id, AFTER)
    assert after["try_number"] == 0  # never started
    gate_log = airflow_local.task_log_text(DAG_ID, run_id, GATE)
    assert "Skipping downstream tasks" in gate_log
    assert AFTER_GATE_MARKER not in gate_log
    print(f"\nrejected run took {time.monotonic() - started:.1f}s")
