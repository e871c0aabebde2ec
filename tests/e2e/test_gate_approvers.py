"""KAFKA_RUNBOOKS_APPROVERS on a real Airflow 3.3: a user who may edit the run but is not an
approver is refused at kafka_broker_restart's gate (HTTP 403) and the gate keeps waiting;
the approver's answer is taken, recorded under the approver's name, and a rejection
fails the run and restarts nothing."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
import requests

DAG_ID = "kafka_broker_restart"
OTHER_USER = "kafka-observer"  # SimpleAuthManager role "user": may trigger and edit runs
pytestmark = pytest.mark.timeout(600)


def _token(airflow, user: str) -> str:
    passwords = json.loads((airflow.home / "simple_auth_manager_passwords.json.generated").read_text())
    resp = requests.post(
        f"{airflow.base_url}/auth/token", json={"username": user, "password": passwords[user]}, timeout=90
    )
    resp.raise_for_status()
    return resp.json()["access_token"]


def test_only_the_approvers_may_answer_the_restart_gate(airflow_local, local_stack):
    pid_before = local_stack.pid(1)
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    run_id = airflow_local.trigger(
        DAG_ID, {"node_ids": "1", "reason": "approvers end to end", "operation_timeout_s": 30}
    )
    request = airflow_local.wait_for_approval(DAG_ID, run_id, "approval_gate", timeout=240)
    assert [u["id"] for u in request["assigned_users"]] == ["admin"]

    path = (
        f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/approval_gate/-1/hitlDetails"
    )
    refused = requests.patch(
        f"{airflow_local.base_url}{path}",
        headers={"Authorization": f"Bearer {_token(airflow_local, OTHER_USER)}"},
        json={"chosen_options": ["Approve"], "params_input": {}},
        timeout=90,
    )
    assert refused.status_code == 403, refused.text
    assert "not a respondent" in refused.text
    waiting = airflow_local.api("GET", path[len("/api/v2") :])
    assert waiting["response_received"] is False
    assert airflow_local.task_instance(DAG_ID, run_id, "approval_gate")["state"] == "awaiting_input"

    answered = airflow_local.answer(DAG_ID, run_id, "approval_gate", ["Reject"])
    assert answered["responded_by"]["id"] == "admin" and answered["chosen_options"] == ["Reject"]
    state = airflow_local.wait_for_run(DAG_ID, run_id, timeout=300)
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(DAG_ID, run_id)}
    assert state == "failed", states  # a rejection fails the run
    assert states["rolling_restart"] == "upstream_failed", states
    assert local_stack.pid(1) == pid_before  # rejected: broker 1 was not restarted
