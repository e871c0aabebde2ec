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


def test_the_stop_page_headline_and_lines_come_from_the_stops_own_result():
    """One headline from the same result as each state's line, each line named by what its state
    holds (the adopted moves of an earlier run, or the run's plan), in the Kafka page's look."""
    from kafka_runbooks_airflow.console_app import stop_result_html

    result = {
        "request": {"by": "alice", "reason": "window <over>"},
        "headline": "Stopped",
        "states": {
            "adopt-state.json": {"line": "NOTHING TO STOP (stopped by alice: x): 1 of 1 chunk(s) done"},
            "exec-state.json": {"line": "STOPPED (stopped by alice: x): 3 of 9 chunk(s) done"},
        },
    }
    title, body = stop_result_html(result)
    assert title == "Stopped"
    assert "moves adopted from an earlier run: NOTHING TO STOP" in body
    assert "this run&#x27;s plan: STOPPED" in body and "window &lt;over&gt;" in body
    handed = stop_result_html({**result, "states": {"exec-state.json": {"taken_over": "claimed by r"}}})
    assert "claimed by r" in handed[1]
