"""KAFKA_RUNBOOKS_APPROVERS restricts who may answer the destructive runbooks' gates."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_runbooks_airflow.approvers import ENV_VAR, assigned_approvers

ROOT = Path(__file__).resolve().parents[3]
GATES = {
    "kafka_broker_restart": "approval_gate",
    "kafka_unclean_recovery": "approve_elections",
    "kafka_failed_broker_reassignment": "approval_gate",
    "kafka_metadata_error_sweep": "cluster.controller_decision",
}


def test_unset_or_blank_means_no_restriction():
    assert assigned_approvers({}) is None
    assert assigned_approvers({ENV_VAR: " , "}) is None


def test_ids_with_optional_names_in_order_without_duplicates():
    env = {ENV_VAR: "alice:Alice Martin, bob ,alice,carol:"}
    assert assigned_approvers(env) == [
        {"id": "alice", "name": "Alice Martin"},
        {"id": "bob", "name": "bob"},
        {"id": "carol", "name": "carol"},
    ]


def test_an_empty_id_is_refused():
    with pytest.raises(ValueError, match="empty user id"):
        assigned_approvers({ENV_VAR: "alice,:Nobody"})


def _gates(monkeypatch, value: str | None) -> dict[str, object]:
    from airflow.dag_processing.dagbag import DagBag

    if value is None:
        monkeypatch.delenv(ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(ENV_VAR, value)
    found = {}
    for dag_id, task_id in GATES.items():
        bag = DagBag(dag_folder=str(ROOT / "dags" / f"{dag_id}.py"), safe_mode=False)
        assert bag.import_errors == {}
        found[dag_id] = bag.dags[dag_id].get_task(task_id).assigned_users
    return found


def test_the_destructive_gates_take_the_approvers_from_the_environment(monkeypatch):
    gates = _gates(monkeypatch, "kafka-oncall:Kafka on-call,admin")
    expected = [{"id": "kafka-oncall", "name": "Kafka on-call"}, {"id": "admin", "name": "admin"}]
    assert gates == {dag_id: expected for dag_id in GATES}


def test_without_the_setting_the_gates_are_unrestricted(monkeypatch):
    assert _gates(monkeypatch, None) == {dag_id: None for dag_id in GATES}
