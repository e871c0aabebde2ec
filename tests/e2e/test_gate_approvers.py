"""KAFKA_RUNBOOKS_APPROVERS on a real Airflow 3.3: a user who may edit the run but is not an
approver is refused at kafka_broker_restart's gate (HTTP 403) and the gate keeps waiting;
the approver's answer is taken, recorded under the approver's name, and a rejection
fails the run and restarts nothing."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
import requests

from kafka_runbooks.approval import APPROVE_OPTION, REJECT_OPTION

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
        json={"chosen_options": [APPROVE_OPTION], "params_input": {}},
        timeout=90,
    )
    assert refused.status_code == 403, refused.text
    assert "not a respondent" in refused.text
    waiting = airflow_local.api("GET", path[len("/api/v2") :])
    assert waiting["response_received"] is False
    assert airflow_local.task_instance(DAG_ID, run_id, "approval_gate")["state"] == "awaiting_input"

    answered = airflow_local.answer(DAG_ID, run_id, "approval_gate", [REJECT_OPTION])
    assert answered["responded_by"]["id"] == "admin" and answered["chosen_options"] == [REJECT_OPTION]
    state = airflow_local.wait_for_run(DAG_ID, run_id, timeout=300)
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(DAG_ID, run_id)}
    assert state == "failed", states  # a rejection fails the run
    assert states["rolling_restart"] == "upstream_failed", states
    assert local_stack.pid(1) == pid_before  # rejected: broker 1 was not restarted


SWEEP = "kafka_metadata_error_sweep"
SWEEP_GATE = "cluster.controller_decision"
SWEEP_TRIGGER = "cluster.restart_active_controller"
CHAIN_METRICS_CONN = "kafka_metrics_chain_e2e"


def _trigger_as(airflow, dag_id: str, conf: dict, user: str) -> str:
    airflow.unpause(dag_id)
    resp = requests.post(
        f"{airflow.base_url}/api/v2/dags/{dag_id}/dagRuns",
        headers={"Authorization": f"Bearer {_token(airflow, user)}"},
        json={"logical_date": None, "conf": conf},
        timeout=90,
    )
    assert resp.status_code == 200, resp.text
    return resp.json()["dag_run_id"]


def _xcom(airflow, dag_id: str, run_id: str, task_id: str, key: str, map_index: int = -1) -> dict:
    params = {"deserialize": "true", **({"map_index": map_index} if map_index >= 0 else {})}
    path = f"{airflow._ti_path(dag_id, run_id, task_id)}/xcomEntries/{key}"
    value = airflow.api("GET", path, params=params)["value"]
    return value if isinstance(value, dict) else json.loads(value)


def test_the_approver_of_a_sweep_decision_cannot_approve_the_run_it_started_nor_reuse_it_later(
    airflow_local, local_stack, admin
):
    """Four-eyes on. kafka-observer starts the metadata sweep; admin answers its controller gate
    "Restart it"; the restart run that starts gets the sweep's triggering user (kafka-observer),
    so only the chain in its conf (verified against the sweep gate's record) refuses admin's
    approval there. Then, with the approval lifetime set to 1 s, a clear of the sweep's trigger
    task alone fails: approved at X, expired after 1 s. The active controller is never restarted."""
    from tests.e2e.test_approval_records import process_of, set_variable
    from tests.helpers import wait_until
    from tests.metadata_helpers import CONTROLLER, ExpositionServer, counter, record, with_counter

    airflow_local.wait_for_dag(SWEEP, timeout=180)
    airflow_local.wait_for_dag(DAG_ID, timeout=180)
    airflow_local.unpause(DAG_ID)  # the run the sweep starts must reach its gate
    leader = admin.describe_quorum().leader_id
    before = process_of(local_stack, leader)
    endpoints = dict(local_stack.airflow_connections()["kafka_broker_probe_default"]["extra"]["endpoints"])
    leader_real = record(endpoints[str(leader)])
    ctl0 = counter(leader_real, CONTROLLER)
    leader_srv = ExpositionServer(with_counter(leader_real, CONTROLLER, ctl0))
    extra = {"kind": "prometheus", "endpoints": {**endpoints, str(leader): leader_srv.url}}
    airflow_local.api(
        "POST",
        "/connections",
        json={"connection_id": CHAIN_METRICS_CONN, "conn_type": "generic", "extra": json.dumps(extra)},
    )
    set_variable(airflow_local, "kafka_runbooks_four_eyes", "true")
    try:
        conf = {
            "metrics_conn_id": CHAIN_METRICS_CONN,
            "restart_brokers": False,
            "controller_escalate_after": 1,
            "fail_on_alert": False,
        }
        based = _trigger_as(airflow_local, SWEEP, conf, OTHER_USER)  # the controller's counter, as it is
        assert airflow_local.wait_for_run(SWEEP, based, timeout=300) == "success"
        leader_srv.text = with_counter(leader_real, CONTROLLER, ctl0 + 1)
        sweep_run = _trigger_as(airflow_local, SWEEP, conf, OTHER_USER)
        airflow_local.wait_for_approval(SWEEP, sweep_run, SWEEP_GATE, timeout=300, map_index=0)
        airflow_local.answer(SWEEP, sweep_run, SWEEP_GATE, ["Restart it (last)"], map_index=0)
        assert airflow_local.wait_for_run(SWEEP, sweep_run, timeout=300) == "success"
        decided = _xcom(airflow_local, SWEEP, sweep_run, SWEEP_GATE, "approval", 0)
        assert decided["outcome"] == "approved" and decided["by"]["id"] == "admin"

        # the started run: the sweep's triggering user, and the chain bound in its conf
        escalation = _xcom(airflow_local, SWEEP, sweep_run, "cluster.sweep", "controller_escalation", 0)
        child = escalation["trigger_run_id"]
        run = airflow_local.dag_run(DAG_ID, child)
        assert run["triggering_user_name"] == OTHER_USER, run
        [upstream] = run["conf"]["upstream_approvals"]
        assert (upstream["user"]["id"], upstream["at"]) == ("admin", decided["at"])
        assert (upstream["dag_id"], upstream["run_id"], upstream["task_id"]) == (SWEEP, sweep_run, SWEEP_GATE)
        request = airflow_local.wait_for_approval(DAG_ID, child, "approval_gate", timeout=300)
        assert f"**Triggered by:** {OTHER_USER}" in request["body"]
        airflow_local.answer(DAG_ID, child, "approval_gate", [APPROVE_OPTION])
        wait_until(
            lambda: (
                airflow_local.task_instance(DAG_ID, child, "approval_gate")["state"] in ("success", "failed")
            ),
            120,
            1,
            "the restart gate took the answer",
        )
        assert airflow_local.task_instance(DAG_ID, child, "approval_gate")["state"] == "failed"
        refused = _xcom(airflow_local, DAG_ID, child, "approval_gate", "approval")
        assert refused["outcome"] == "refused" and refused["by"]["id"] == "admin"
        assert "admin approved the decision that started this run" in refused["reason"]
        assert airflow_local.wait_for_run(DAG_ID, child, timeout=300) == "failed"
        log = airflow_local.task_log_text(DAG_ID, child, "approval_gate")
        assert "DECISION approval [approval_gate]: refused because four-eyes is on and admin approved" in log

        # the sweep's trigger task cleared alone, after its approval expired: refused, with why
        set_variable(airflow_local, "kafka_runbooks_approval_max_age_s", "1")
        body = {
            "dry_run": False,
            "dag_run_id": sweep_run,
            "only_failed": False,
            "reset_dag_runs": True,
            "task_ids": [[SWEEP_TRIGGER, 0]],
            "include_downstream": False,
            "include_upstream": False,
        }
        airflow_local.api("POST", f"/dags/{SWEEP}/clearTaskInstances", json=body)
        airflow_local.wait_for_task_state(SWEEP, sweep_run, SWEEP_TRIGGER, "failed", timeout=300, map_index=0)
        log = airflow_local.task_log_text(SWEEP, sweep_run, SWEEP_TRIGGER, try_number=2, map_index=0)
        assert "refuse to act because approved at " in log and ", expired after 0:00:01" in log
        assert process_of(local_stack, leader) == before  # the active controller was never restarted
    finally:
        leader_srv.stop()
        set_variable(airflow_local, "kafka_runbooks_four_eyes", None)
        set_variable(airflow_local, "kafka_runbooks_approval_max_age_s", None)
        airflow_local.request("DELETE", f"/api/v2/connections/{CHAIN_METRICS_CONN}")
