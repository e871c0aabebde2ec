"""kafka_metadata_error_sweep through a real Airflow, against the real stack's nodes.

Run by run (each builds on the last sweep's state): all real nodes healthy; then broker
2 and the active controller served from recorded expositions with raised counters (a
restart run is created for the broker; the controller is reported); then both rise again
(no second run while the broker's waits; a person is asked about the controller, answers
"Restart it (last)", a restart run is created for it); then the broker's counter drops
(re-based) and the controller's endpoint is down (unknown). Every restart run is rejected
at its own approval gate: nothing is restarted.
"""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.approval import REJECT_OPTION
from kafka_runbooks.paths import safe_name
from tests.metadata_helpers import APPLY, CONTROLLER, ExpositionServer, counter, record, with_counter

SWEEP = "kafka_metadata_error_sweep"
RESTART = "kafka_broker_restart"
CONN_ID = "kafka_metrics_e2e"
pytestmark = pytest.mark.timeout(900)


def report_of(airflow_local, run_id: str) -> dict:
    """The report of the run's one cluster (map index 0 of the mapped ``cluster`` group)."""
    path = airflow_local._ti_path(SWEEP, run_id, "cluster.sweep")
    params = {"deserialize": "true", "map_index": 0}
    report = airflow_local.api("GET", f"{path}/xcomEntries/report", params=params)["value"]
    return report if isinstance(report, dict) else json.loads(report)


def rows(report: dict) -> dict[int, dict]:
    return {r["node_id"]: r for r in report["nodes"]}


def reject_restart_run(airflow_local, run_id: str, node_id: int) -> None:
    """The restart run for that node waits at its gate (maybe behind another run): reject it."""
    run = airflow_local.dag_run(RESTART, run_id)
    assert run["conf"]["node_ids"] == str(node_id) and run["conf"]["require_approval"] is True
    airflow_local.wait_for_approval(RESTART, run_id, "approval_gate", timeout=300)
    airflow_local.answer(RESTART, run_id, "approval_gate", [REJECT_OPTION])
    assert airflow_local.wait_for_run(RESTART, run_id, timeout=300) == "failed"  # rejected
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(RESTART, run_id)}
    assert states["approval_gate"] == "failed" and states["rolling_restart"] == "upstream_failed", states


def test_sweep_reads_every_node_flags_routes_and_reports_unknown(airflow_local, local_stack, admin):
    airflow_local.wait_for_dag(SWEEP, timeout=180)
    airflow_local.wait_for_dag(RESTART, timeout=180)
    airflow_local.unpause(RESTART)  # the runs the sweep starts must reach their gate
    endpoints = dict(local_stack.airflow_connections()["kafka_broker_probe_default"]["extra"]["endpoints"])
    all_nodes = sorted(int(n) for n in endpoints)
    assert len(all_nodes) == 7

    # 1. the real nodes, through the stack's probe connection: all healthy, all in the report
    run1 = airflow_local.trigger(SWEEP, {})
    assert airflow_local.wait_for_run(SWEEP, run1, timeout=300) == "success"
    first = report_of(airflow_local, run1)
    assert first["summary"]["healthy"] == all_nodes, first["summary"]
    assert {r["node_id"]: sorted(r["metric_names"].values()) for r in first["nodes"]}[2] == sorted(
        [APPLY, "kafka_server_broker_metadata_metrics_metadata_load_error_count"]
    )
    latest = airflow_local.home / "kafka_runbooks" / "reports" / "metadata_errors" / "latest.json"
    assert json.loads(latest.read_text())["run_id"] == run1
    events = airflow_local.api("GET", "/assets/events", params={"limit": 100})["asset_events"]
    mine = [e for e in events if e["source_dag_id"] == SWEEP and e["source_run_id"] == run1]
    assert mine and mine[0]["extra"]["summary"]["healthy"] == all_nodes

    # 2. broker 2 and the active controller served from recorded expositions, counters raised
    leader = admin.describe_quorum().leader_id
    broker_real = record(endpoints["2"])
    leader_real = record(endpoints[str(leader)])
    apply0, ctl0 = counter(broker_real, APPLY), counter(leader_real, CONTROLLER)
    broker_srv = ExpositionServer(with_counter(broker_real, APPLY, apply0 + 2))
    leader_srv = ExpositionServer(with_counter(leader_real, CONTROLLER, ctl0 + 1))
    try:
        extra = {
            "kind": "prometheus",
            "endpoints": {**endpoints, "2": broker_srv.url, str(leader): leader_srv.url},
        }
        airflow_local.api(
            "POST",
            "/connections",
            json={"connection_id": CONN_ID, "conn_type": "generic", "extra": json.dumps(extra)},
        )
        conf = {"metrics_conn_id": CONN_ID}
        run2 = airflow_local.trigger(SWEEP, conf)
        assert airflow_local.wait_for_run(SWEEP, run2, timeout=300) == "failed"  # controller alert
        second = report_of(airflow_local, run2)
        assert second["summary"]["flagged"] == sorted([2, leader])
        assert rows(second)[2]["increased"] == {"metadata_apply_errors": [apply0, apply0 + 2]}
        states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(SWEEP, run2)}
        assert states["start_broker_restarts"] == "success" and states["cluster.raise_alerts"] == "failed"
        assert states["cluster.controller_decision"] == "skipped"  # one increase: reported, not escalated
        restart_run = f"metadata_errors__kafka_default__broker_2__{safe_name(run2)}"
        run = airflow_local.dag_run(RESTART, restart_run)
        assert run["conf"]["node_ids"] == "2" and run["conf"]["require_approval"] is True
        assert APPLY in run["conf"]["reason"]
        airflow_local.wait_for_approval(RESTART, restart_run, "approval_gate", timeout=300)

        # 3. broker 2 still going up while its restart run waits: no second run; the active
        #    controller went up again (2nd sweep in a row): a person is asked
        broker_srv.text = with_counter(broker_real, APPLY, apply0 + 5)
        leader_srv.text = with_counter(leader_real, CONTROLLER, ctl0 + 3)
        run3 = airflow_local.trigger(SWEEP, conf)
        gate = "cluster.controller_decision"
        request = airflow_local.wait_for_approval(SWEEP, run3, gate, timeout=300, map_index=0)
        assert f"kafka_default: active controller {leader}" in request["subject"]
        assert request["options"] == ["Restart it (last)", "Leave it"]
        # the sweep has decided (the gate follows its report): nothing is restarted, so the broker's
        # run is rejected at its own gate now, before the controller's run exists. Rejected after the
        # answer, it still held the cluster's lease when the controller's run asked for it: that run
        # waited a whole reschedule (15 s) for a lease given back seconds later
        reject_restart_run(airflow_local, restart_run, 2)
        airflow_local.answer(SWEEP, run3, gate, ["Restart it (last)"], map_index=0)
        assert airflow_local.wait_for_run(SWEEP, run3, timeout=300) == "failed"  # controller alert
        third = report_of(airflow_local, run3)
        assert rows(third)[2]["status"] == "flagged" and third["restart_requests"] == []
        assert f"restart run {restart_run} for it is still active" in rows(third)[2]["action"]
        states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(SWEEP, run3)}
        assert states["cluster.restart_active_controller"] == "success"
        assert states["cluster.leave_active_controller"] == "skipped"
        # the answer is a record with the run: who, and the digest of the escalation shown
        answer = airflow_local.api(
            "GET",
            f"{airflow_local._ti_path(SWEEP, run3, gate)}/xcomEntries/approval",
            params={"deserialize": "true", "map_index": 0},
        )["value"]
        answer = answer if isinstance(answer, dict) else json.loads(answer)
        assert answer["outcome"] == "approved" and answer["by"]["id"] == "admin"
        assert answer["digest"].startswith("sha256:") and answer["digest"] in request["body"]
        assert "DECISION approval" in airflow_local.task_log_text(
            SWEEP, run3, "cluster.restart_active_controller", map_index=0
        )
        controller_run = third["controller_escalation"]["trigger_run_id"]
        assert airflow_local.dag_run(RESTART, controller_run)["conf"]["node_ids"] == str(leader)
        # nothing is restarted: the controller's run is rejected at the restart runbook's own gate too
        reject_restart_run(airflow_local, controller_run, leader)

        # 4. broker 2 restarted (its counter went down: re-based, not flagged); the active
        #    controller's endpoint is down: unknown, never healthy
        broker_srv.text = with_counter(broker_real, APPLY, apply0)
        leader_srv.stop()
        run4 = airflow_local.trigger(SWEEP, conf)
        assert airflow_local.wait_for_run(SWEEP, run4, timeout=300) == "failed"  # unknown node alert
        fourth = report_of(airflow_local, run4)
        assert rows(fourth)[2]["rebased"] == {"metadata_apply_errors": [apply0 + 5, apply0]}
        assert rows(fourth)[2]["status"] == "healthy" and fourth["restart_requests"] == []
        assert fourth["summary"]["unknown"] == [leader] and leader not in fourth["summary"]["healthy"]
        log = airflow_local.task_log_text(SWEEP, run4, "cluster.sweep", map_index=0)
        assert f"DECISION node [controller {leader}]: unknown because its metrics could not be read" in log
    finally:
        broker_srv.stop()
        leader_srv.stop()
