"""Who may press Stop on a run (the same people as its gate) and which runs it applies to."""

from __future__ import annotations

from kafka_runbooks_airflow.console_app import REASSIGN_DAG_ID, stop_refusal


def test_only_editors_of_the_runs_and_the_gates_approvers_may_stop():
    assert stop_refusal(REASSIGN_DAG_ID, "running", True, None, "bob") is None
    assert stop_refusal(REASSIGN_DAG_ID, "running", True, ["alice"], "alice") is None
    assert "approvers" in stop_refusal(REASSIGN_DAG_ID, "running", True, ["alice"], "bob")
    assert "may not edit" in stop_refusal(REASSIGN_DAG_ID, "running", False, None, "bob")
    assert "may not edit" in stop_refusal(REASSIGN_DAG_ID, "running", False, ["bob"], "bob")


def test_only_a_reassignment_run_that_goes_on_is_stopped():
    assert "nothing to stop" in stop_refusal(REASSIGN_DAG_ID, "failed", True, None, "bob")
    assert stop_refusal(REASSIGN_DAG_ID, None, True, None, "bob") == "no such run"
    assert "only" in stop_refusal("kafka_cluster_health", "running", True, None, "bob")
    assert stop_refusal(REASSIGN_DAG_ID, "queued", True, None, "bob") is None
    assert stop_refusal("kafka_broker_decommission", "running", True, None, "bob") is None  # same executor
    assert stop_refusal("kafka_log_dir_failure", "running", True, None, "bob") is None  # same executor
