"""kafka_broker_restart's gate on a real Airflow 3.3: an approval is a record bound to the
plan shown, and no Airflow path gets past the gate without one.

Walked here: Reject (the run fails, nothing restarted); clear only the roll after Reject
(it does not run); mark the gate success by hand and clear the roll (the roll runs and
refuses); clear the whole run (the gate asks again, nothing restarted until approved,
then the approved roll restarts the node); no answer within the timeout (the run fails);
require_approval=false (refused, unless the Variable allows it); four-eyes (the
triggering user's approval does not count). "Nothing restarted" is read from the node's
process: same pid, same kernel start time.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from kafka_runbooks.approval import APPROVE_OPTION, REJECT_OPTION
from tests.helpers import wait_until

DAG_ID = "kafka_broker_restart"
GATE = "approval_gate"
ROLL = "rolling_restart"
OTHER_USER = "kafka-observer"  # SimpleAuthManager role "user": may trigger and edit runs
pytestmark = pytest.mark.timeout(900)


def process_of(stack, node_id: int) -> tuple[int, int]:
    """(pid, start time in clock ticks since boot) of the node's JVM: changes on any restart."""
    pid = stack.pid(node_id)
    assert pid, f"node {node_id} is not running"
    stat = Path(f"/proc/{pid}/stat").read_text()
    return pid, int(stat.rsplit(")", 1)[1].split()[19])


def states(airflow, run_id: str) -> dict[str, str | None]:
    return {ti["task_id"]: ti["state"] for ti in airflow.task_instances(DAG_ID, run_id)}


def gate_record(airflow, run_id: str) -> dict:
    path = airflow._ti_path(DAG_ID, run_id, GATE)
    value = airflow.api("GET", f"{path}/xcomEntries/approval", params={"deserialize": "true"})["value"]
    return value if isinstance(value, dict) else json.loads(value)


def clear(airflow, run_id: str, task_ids: list[str] | None = None) -> None:
    """Clear the given tasks (only them), or the whole run; wait until the run runs again."""
    body = {"dry_run": False, "dag_run_id": run_id, "only_failed": False, "reset_dag_runs": True}
    if task_ids:
        body |= {"task_ids": task_ids, "include_downstream": False, "include_upstream": False}
    airflow.api("POST", f"/dags/{DAG_ID}/clearTaskInstances", json=body)
    wait_until(lambda: airflow.dag_run(DAG_ID, run_id)["state"] != "failed", 60, 1, "the run re-queued")


def set_variable(airflow, key: str, value: str | None) -> None:
    if value is None:
        try:
            airflow.request("DELETE", f"/api/v2/variables/{key}")  # 204, no body
        except Exception as exc:  # not set: nothing to delete
            if getattr(exc, "status", None) != 404:
                raise
        return
    try:
        airflow.api("PATCH", f"/variables/{key}", json={"key": key, "value": value})
    except Exception as exc:
        if getattr(exc, "status", None) != 404:
            raise
        airflow.api("POST", "/variables", json={"key": key, "value": value})


def token_of(airflow, user: str) -> str:
    passwords = json.loads((airflow.home / "simple_auth_manager_passwords.json.generated").read_text())
    resp = requests.post(
        f"{airflow.base_url}/auth/token", json={"username": user, "password": passwords[user]}, timeout=90
    )
    resp.raise_for_status()
    return resp.json()["access_token"]


def trigger(airflow, conf: dict, as_user: str | None = None) -> str:
    if as_user is None:
        return airflow.trigger(DAG_ID, conf)
    airflow.unpause(DAG_ID)
    resp = requests.post(
        f"{airflow.base_url}/api/v2/dags/{DAG_ID}/dagRuns",
        headers={"Authorization": f"Bearer {token_of(airflow, as_user)}"},
        json={"logical_date": None, "conf": conf},
        timeout=90,
    )
    assert resp.status_code == 200, resp.text
    return resp.json()["dag_run_id"]


def conf(node: int, **extra) -> dict:
    return {
        "node_ids": str(node),
        "reason": "approval records end to end",
        "operation_timeout_s": 120,
        **extra,
    }


def test_reject_fails_the_run_and_no_clear_gets_past_the_gate(airflow_local, restore_stack):
    stack = restore_stack
    before = process_of(stack, 1)
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    run_id = trigger(airflow_local, conf(1))
    request = airflow_local.wait_for_approval(DAG_ID, run_id, GATE, timeout=300)
    assert "Plan digest:" in request["body"] and "sha256:" in request["body"]
    first_digest = request["body"].split("`sha256:")[1].split("`")[0]

    # Reject: the run fails, the roll never starts (today's main: gate success, run success)
    airflow_local.answer(DAG_ID, run_id, GATE, [REJECT_OPTION])
    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=300) == "failed"
    assert states(airflow_local, run_id) == {
        "check_input": "success",
        "acquire_lease": "success",  # the cluster's lease, given back by the teardown below
        "release_lease": "success",
        "plan_restart": "success",
        GATE: "failed",
        ROLL: "upstream_failed",
    }
    assert "rejected by admin" in airflow_local.task_log_text(DAG_ID, run_id, GATE)
    record = gate_record(airflow_local, run_id)
    assert record["outcome"] == "rejected" and record["by"]["id"] == "admin"
    assert record["triggered_by"] == "admin" and record["digest"] == f"sha256:{first_digest}"

    # clear only the roll: its gate failed, so it does not run
    clear(airflow_local, run_id, [ROLL])
    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=300) == "failed"
    assert airflow_local.task_instance(DAG_ID, run_id, ROLL)["state"] == "upstream_failed"

    # mark the rejected gate success by hand: Airflow 3.3 itself clears the failed and
    # upstream_failed tasks downstream of it and re-queues the run (set_task_instance_state),
    # so the roll runs at once, and refuses. (A Clear of the roll right after the PATCH raced
    # the scheduler under load: it replaced the task instance the executor had just queued,
    # whose start then failed with 'Task Instance not found' and an empty log.)
    airflow_local.api(
        "PATCH",
        f"/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/{GATE}",
        json={"new_state": "success"},
    )
    wait_until(
        lambda: (
            (ti := airflow_local.task_instance(DAG_ID, run_id, ROLL))["try_number"] >= 1
            and ti["state"] in ("failed", "success")
        ),
        300,
        1,
        "the roll ran after the gate was marked success",
    )
    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=300) == "failed"
    roll = airflow_local.task_instance(DAG_ID, run_id, ROLL)
    assert roll["state"] == "failed" and roll["try_number"] >= 1
    log = airflow_local.task_log_text(DAG_ID, run_id, ROLL, try_number=roll["try_number"])
    assert "DECISION approval [rolling_restart]: refuse to act" in log and "'rejected'" in log, log[-3000:]
    assert "restarted because" not in log
    assert process_of(stack, 1) == before  # nothing restarted

    # clear the whole run: the roll is resumed from its state file (the same plan, the same
    # digest) and the gate asks again; its earlier answer is gone
    clear(airflow_local, run_id)
    request = airflow_local.wait_for_approval(DAG_ID, run_id, GATE, timeout=300)
    assert request["response_received"] is False
    assert f"`sha256:{first_digest}`" in request["body"]
    assert airflow_local.task_instance(DAG_ID, run_id, ROLL)["state"] is None
    assert process_of(stack, 1) == before  # nothing restarted while it waits

    # approved: the roll acts on the approved plan and restarts the node
    airflow_local.answer(DAG_ID, run_id, GATE, [APPROVE_OPTION])
    state = airflow_local.wait_for_run(DAG_ID, run_id, timeout=600)
    log = airflow_local.task_log_text(
        DAG_ID, run_id, ROLL, try_number=airflow_local.task_instance(DAG_ID, run_id, ROLL)["try_number"]
    )
    assert state == "success", f"{states(airflow_local, run_id)}\n{log[-4000:]}"
    assert "DECISION approval [rolling_restart]: act on the approved plan" in log
    record = gate_record(airflow_local, run_id)
    assert record["outcome"] == "approved" and record["digest"] == f"sha256:{first_digest}"
    assert process_of(stack, 1) != before  # restarted, after the approval


def test_an_unanswered_gate_fails_the_run_and_restarts_nothing(airflow_local, local_stack):
    before = process_of(local_stack, 1)
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    # the shortest wait this test can still see parked (awaiting_input, and the scheduler's report
    # of it) before it times out: seen within ~1-3 s of the gate's start, and polled every 0.5 s
    run_id = trigger(airflow_local, conf(1, approval_timeout_s=10))
    airflow_local.wait_for_approval(DAG_ID, run_id, GATE, timeout=300)
    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=300) == "failed"
    assert states(airflow_local, run_id) == {
        "check_input": "success",
        "acquire_lease": "success",  # the cluster's lease, given back by the teardown below
        "release_lease": "success",
        "plan_restart": "success",
        GATE: "failed",
        ROLL: "upstream_failed",
    }
    assert "not approved within 0:00:10" in airflow_local.task_log_text(DAG_ID, run_id, GATE)
    assert gate_record(airflow_local, run_id)["outcome"] == "timed_out"
    assert process_of(local_stack, 1) == before


def test_ungated_runs_are_refused_unless_the_deployment_allows_them(airflow_local, restore_stack):
    stack = restore_stack
    before = process_of(stack, 2)
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    set_variable(airflow_local, "kafka_runbooks_allow_ungated", None)
    run_id = trigger(airflow_local, conf(2, require_approval=False))
    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=300) == "failed"
    assert states(airflow_local, run_id) == {
        "check_input": "failed",  # refused before the run waits for the cluster's lease
        "acquire_lease": "upstream_failed",
        "release_lease": "upstream_failed",
        "plan_restart": "upstream_failed",
        GATE: "upstream_failed",
        ROLL: "upstream_failed",
    }
    log = airflow_local.task_log_text(DAG_ID, run_id, "check_input")
    assert "DECISION approval [kafka_broker_restart]: refuse the run" in log
    assert (
        "require_approval=false is not allowed" in log and "DECISION plan" not in log
    )  # before any cluster read
    assert process_of(stack, 2) == before

    set_variable(airflow_local, "kafka_runbooks_allow_ungated", "true")
    try:
        run_id = trigger(airflow_local, conf(2, require_approval=False))
        state = airflow_local.wait_for_run(DAG_ID, run_id, timeout=600)
        log = airflow_local.task_log_text(DAG_ID, run_id, ROLL)
        assert state == "success", f"{states(airflow_local, run_id)}\n{log[-4000:]}"
    finally:
        set_variable(airflow_local, "kafka_runbooks_allow_ungated", None)
    assert run_id not in {p["task_instance"]["dag_run_id"] for p in airflow_local.pending_approvals(DAG_ID)}
    record = gate_record(airflow_local, run_id)
    assert record["outcome"] == "not_required" and "Variable kafka_runbooks_allow_ungated" in record["reason"]
    assert "DECISION approval [rolling_restart]: act on the approved plan" in log
    assert process_of(stack, 2) != before  # the deployment allowed it: restarted without asking


def test_four_eyes_the_triggering_user_cannot_approve(airflow_local, restore_stack):
    stack = restore_stack
    before = process_of(stack, 3)
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    set_variable(airflow_local, "kafka_runbooks_four_eyes", "true")
    try:
        run_id = trigger(airflow_local, conf(3))  # triggered by admin
        request = airflow_local.wait_for_approval(DAG_ID, run_id, GATE, timeout=300)
        assert "Four-eyes is on" in request["body"]
        airflow_local.answer(DAG_ID, run_id, GATE, [APPROVE_OPTION])  # ... and approved by admin
        assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=300) == "failed"
        assert states(airflow_local, run_id)[ROLL] == "upstream_failed"
        record = gate_record(airflow_local, run_id)
        assert (
            record["outcome"] == "refused"
            and record["by"]["id"] == "admin"
            and record["triggered_by"] == "admin"
        )
        assert "four-eyes is on and admin triggered this run" in airflow_local.task_log_text(
            DAG_ID, run_id, GATE
        )
        assert process_of(stack, 3) == before

        # triggered by someone else: admin's approval counts, and the record names both
        run_id = trigger(airflow_local, conf(3), as_user=OTHER_USER)
        assert airflow_local.dag_run(DAG_ID, run_id)["triggering_user_name"] == OTHER_USER
        airflow_local.wait_for_approval(DAG_ID, run_id, GATE, timeout=300)
        airflow_local.answer(DAG_ID, run_id, GATE, [APPROVE_OPTION])
        state = airflow_local.wait_for_run(DAG_ID, run_id, timeout=600)
        assert state == "success", states(airflow_local, run_id)
    finally:
        set_variable(airflow_local, "kafka_runbooks_four_eyes", None)
    record = gate_record(airflow_local, run_id)
    assert (
        record["outcome"] == "approved"
        and record["by"]["id"] == "admin"
        and record["triggered_by"] == OTHER_USER
    )
    assert process_of(stack, 3) != before


def test_evidence_changed_while_the_gate_waited_voids_the_approval(airflow_local, local_stack):
    """The digest covers the availability evidence the gate showed (today's main: only order,
    roles, options): evidence rewritten while the gate waits (a re-plan, a hand edit) makes
    the approval count for nothing, and nothing is restarted."""
    from kafka_runbooks.paths import safe_name

    before = process_of(local_stack, 1)
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    run_id = trigger(airflow_local, conf(1))
    request = airflow_local.wait_for_approval(DAG_ID, run_id, GATE, timeout=300)
    shown = request["body"].split("`sha256:")[1].split("`")[0]
    path = airflow_local.home / "kafka_runbooks" / "restart" / DAG_ID / safe_name(run_id) / "roll-state.json"
    state = json.loads(path.read_text())
    assert state["gate_rows"], state  # the evidence the gate showed
    state["gate_rows"][0] = {**state["gate_rows"][0], "edited": "after the question was asked"}
    path.write_text(json.dumps(state))
    airflow_local.answer(DAG_ID, run_id, GATE, [APPROVE_OPTION])
    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=300) == "failed"
    assert states(airflow_local, run_id)[ROLL] == "upstream_failed"
    log = airflow_local.task_log_text(DAG_ID, run_id, GATE)
    assert f"the plan changed while the gate waited (shown sha256:{shown}" in log, log[-3000:]
    assert process_of(local_stack, 1) == before  # nothing restarted
