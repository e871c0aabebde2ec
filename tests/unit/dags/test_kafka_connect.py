"""The two Connect DAGs: shape, and params that refuse bad input before any task runs."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kafka_runbooks_airflow.connect import check_restart_request, conn_ids_from_params, policy_from_params

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def dags():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"), safe_mode=False)
    assert not bag.import_errors
    return bag.dags


def _validate(dag, conf):
    params = copy.deepcopy(dag.params)
    for key, value in conf.items():
        params[key] = value
    params.validate()


def test_autorestart_shape(dags):
    dag = dags["kafka_connect_autorestart"]
    assert [t.task_id for t in dag.topological_sort()] == [
        "clusters",
        "cluster.sweep",
        "cluster.raise_alerts",
    ]
    assert dag.max_active_runs == 1 and "remediation" in dag.tags
    _validate(dag, {"max_restarts": None, "exclude": ["mm2-*"], "minute_seconds": 0.5})


@pytest.mark.parametrize(
    "conf",
    [{"max_restarts": -1}, {"connect_conn_ids": []}, {"minute_seconds": 0}, {"exclude": [""]}],
)
def test_autorestart_refuses_bad_params(dags, conf):
    with pytest.raises(Exception, match="Invalid input for param"):
        _validate(dags["kafka_connect_autorestart"], conf)


def test_restart_shape_and_params(dags):
    dag = dags["kafka_connect_restart"]
    assert [t.task_id for t in dag.topological_sort()] == ["check_request", "restart"]
    assert dag.schedule is None
    _validate(dag, {"connector": "c", "scope": "tasks", "task_ids": [0, 1]})
    for bad in ({"scope": "everything"}, {"task_ids": [-1]}):
        with pytest.raises(Exception, match="Invalid input for param"):
            _validate(dag, bad)


def test_task_side_checks():
    assert policy_from_params({"max_restarts": None, "minute_seconds": 1}).max_restarts is None
    with pytest.raises(ValueError, match="minute_seconds"):
        policy_from_params({"minute_seconds": 0})
    assert conn_ids_from_params({"connect_conn_ids": ["a", "a", " b "]}) == ["a", "b"]
    with pytest.raises(ValueError, match="connect_conn_ids"):
        conn_ids_from_params({"connect_conn_ids": []})
    with pytest.raises(ValueError, match="connector's name"):
        check_restart_request({"connect_conn_id": "x", "connector": "", "scope": "failed", "task_ids": []})
    ok = check_restart_request({"connect_conn_id": "x", "connector": "c", "scope": "tasks", "task_ids": [1]})
    assert ok == {"connect_conn_id": "x", "connector": "c", "scope": "tasks", "task_ids": [1]}
