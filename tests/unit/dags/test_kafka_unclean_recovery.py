"""kafka_unclean_recovery: dry run by default, elections only behind the approval gate."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "kafka_unclean_recovery.py"), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["kafka_unclean_recovery"]


def test_elections_only_after_the_gate(dag):
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    order = [t.task_id for t in dag.topological_sort()]
    assert order == [
        "check_input",
        "acquire_lease",
        "plan_recovery",
        "automated_recovery_requested",
        "approve_elections",
        "run_elections",
        "restore_replica_order",
        "release_lease",
    ]
    gate = dag.get_task("approve_elections")
    assert isinstance(gate, ApprovalOperator) and gate.response_timeout is not None
    assert "approve_elections" in dag.get_task("run_elections").upstream_task_ids


def test_defaults_are_a_dry_run_that_needs_a_selector(dag):
    from kafka_runbooks.unclean.request import RecoveryInputError, build_request

    params = {k: dag.params[k] for k in dag.params}
    assert params["mode"] == "show_replica_info"
    assert (params["recovery_duration_ms"], params["recovery_election_attempts"]) == ("30s", 3)
    with pytest.raises(RecoveryInputError, match="neither"):
        build_request(params)
    request = build_request({**params, "all_offline_partitions": True})
    assert (request.mode, request.recovery_duration_ms) == ("show_replica_info", 30000)
