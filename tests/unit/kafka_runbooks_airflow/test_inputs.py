"""Bad input fails a disruptive runbook's run at once, before it waits for the cluster's lease.

Today's main took the lease first (``acquire_lease`` was the first task) and validated the
params in the planning task after it: a run with a typo in its node list, or naming a
connection that does not exist, could wait hours behind another runbook before saying so.
"""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks import approval as rules
from tests.unit.kafka_runbooks_airflow.test_gate import _dag

LEASED = {
    "kafka_broker_restart": ("kafka_config_id", "probe_conn_id", "restart_conn_id"),
    "kafka_unclean_recovery": ("kafka_config_id",),
    "kafka_failed_broker_reassignment": ("kafka_config_id",),
}


@pytest.mark.parametrize("dag_id", sorted(LEASED))
def test_the_input_is_checked_before_the_lease_and_nothing_comes_before_the_check(dag_id):
    dag = _dag(dag_id)
    check, acquire = dag.get_task("check_input"), dag.get_task("acquire_lease")
    assert acquire.upstream_task_ids == {"check_input"}
    assert check.upstream_task_ids == set()
    assert [t.task_id for t in dag.roots] == ["check_input"]


@pytest.fixture
def conns(monkeypatch, tmp_path):
    """Connections as Airflow reads them from the environment; an allow-nothing approval policy."""
    from kafka_runbooks_airflow import gate

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    for name in ("kafka_a", "probe_a", "restart_a"):
        monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", '{"conn_type": "generic"}')
    monkeypatch.setattr(gate, "load_policy", lambda: rules.load_policy({}.get, {}))
    from types import SimpleNamespace

    from kafka_runbooks_airflow.hooks import kafka_admin
    from tests.unit.kafka_runbooks_airflow.test_node_ids import Cluster

    monkeypatch.setattr(
        kafka_admin, "KafkaAdminHook", lambda kafka_config_id: SimpleNamespace(admin=Cluster())
    )


RESTART = {
    "node_ids": "1, 2",
    "reason": "planned",
    "operation_timeout_s": 300,
    "max_attempts": 10,
    "require_approval": True,
    "dry_run": False,
    "on_lease_held": "wait",
    "kafka_config_id": "kafka_a",
    "probe_conn_id": "probe_a",
    "restart_conn_id": "restart_a",
}


def _check(params: dict):
    from kafka_runbooks_airflow.inputs import check_runbook_input

    return check_runbook_input("kafka_broker_restart", "manual__1", params)


def test_a_restart_naming_a_node_the_cluster_does_not_have_is_refused_first(conns):
    with pytest.raises(Exception, match=r"node_ids: node id\(s\) \[7\] the cluster does not have"):
        _check({**RESTART, "node_ids": "1, 7"})


def test_valid_input_passes_and_names_the_connections(conns):
    assert _check(RESTART) == {
        "kafka_config_id": "kafka_a",
        "probe_conn_id": "probe_a",
        "restart_conn_id": "restart_a",
    }
    assert _check({**RESTART, "probe_conn_id": None})["probe_conn_id"] is None  # no probe: allowed


@pytest.mark.parametrize(
    "change, said",
    [
        ({"node_ids": "1;2"}, "not node ids"),
        ({"node_ids": ""}, "no node ids"),
        ({"reason": " x "}, "at least 3 characters"),
        ({"max_attempts": 0}, "max_attempts must be at least 1"),
        ({"operation_timeout_s": "soon"}, "operation_timeout_s must be a duration such as 90s, 10m or 1h"),
        ({"on_lease_held": "queue"}, "on_lease_held must be 'wait' or 'fail'"),
        ({"restart_conn_id": "restart_b"}, "restart_conn_id='restart_b'"),
        ({"kafka_config_id": "kafka_typo"}, "kafka_config_id='kafka_typo'"),
        ({"require_approval": False}, "ungated"),
        # the old name, read as an unknown key, would send the run to kafka_default
        ({"kafka_conn_id": "kafka_b"}, "kafka_conn_id is now kafka_config_id"),
    ],
)
def test_bad_input_is_a_decision_and_a_failed_run(conns, caplog, change, said):
    from airflow.sdk.exceptions import AirflowFailException

    with (
        caplog.at_level(logging.INFO),
        pytest.raises(AirflowFailException, match="nothing was done") as failed,
    ):
        _check({**RESTART, **change})
    records = [r.getMessage() for r in caplog.records if "DECISION" in r.getMessage()]
    assert any("refuse the run" in m and said in m for m in records) or said in str(failed.value), records
    assert not any("take the cluster's lease" in m for m in records)


@pytest.mark.parametrize(
    "dag_id, params",
    [
        ("kafka_unclean_recovery", {"mode": "elect_everything"}),
        ("kafka_failed_broker_reassignment", {"failed_brokers": "4;5"}),
    ],
)
def test_the_other_runbooks_refuse_bad_params_before_the_lease(conns, dag_id, params):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.inputs import check_runbook_input

    with pytest.raises(AirflowFailException, match="bad input, nothing was done"):
        check_runbook_input(dag_id, "manual__1", {"kafka_config_id": "kafka_a", **params})
    valid = {"all_offline_partitions": True} if dag_id == "kafka_unclean_recovery" else {}
    assert check_runbook_input(dag_id, "manual__1", {"kafka_config_id": "kafka_a", **valid}) == {
        "kafka_config_id": "kafka_a"
    }
    with pytest.raises(AirflowFailException, match="no connection kafka_config_id='kafka_typo'"):
        check_runbook_input(dag_id, "manual__1", {"kafka_config_id": "kafka_typo", **valid})


def test_every_form_takes_its_kafka_cluster_default_from_the_fleet():
    """One default for the forms' Kafka connection, the id the sweeps' cluster list falls back to."""
    from kafka_runbooks.fleet import DEFAULT_CLUSTER
    from kafka_runbooks_airflow.inputs import kafka_config_param

    param = kafka_config_param("the cluster whose reassignment is stopped")
    assert param.value == DEFAULT_CLUSTER == "kafka_default"
    assert param.description == "the cluster whose reassignment is stopped"
    assert (param.schema["type"], param.schema["minLength"]) == ("string", 1)
    assert (
        kafka_config_param().description
        == "Airflow connection id of the Kafka cluster (Admin > Connections)."
    )


def test_a_sweep_given_the_old_cluster_list_name_refuses_before_reading_anything(monkeypatch):
    from airflow.sdk import Variable

    from kafka_runbooks.errors import BadInput
    from kafka_runbooks_airflow.fleet import fleet_clusters

    monkeypatch.setattr(Variable, "get", lambda *a, **k: pytest.fail("read the fleet setting"))
    with pytest.raises(BadInput, match="kafka_conn_ids is now kafka_config_ids"):
        fleet_clusters({"kafka_conn_ids": ["kafka_b"], "kafka_config_ids": None})


def test_a_stop_asked_under_the_old_cluster_name_is_refused_and_writes_nothing(tmp_path, monkeypatch, caplog):
    """The stop runbook's conf under the old name would otherwise stop kafka_default's moves."""
    from kafka_runbooks.errors import BadInput
    from kafka_runbooks_airflow.failed_broker import request_stop

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    params = {"kafka_config_id": "kafka_default", "kafka_conn_id": "kafka_eu1", "reason": "wrong disk"}
    with caplog.at_level(logging.INFO), pytest.raises(BadInput, match="kafka_conn_id is now kafka_config_id"):
        request_stop(params, "manual__1", "alice", 1)
    assert any("refuse the stop" in r.getMessage() for r in caplog.records)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # no stop request written anywhere
