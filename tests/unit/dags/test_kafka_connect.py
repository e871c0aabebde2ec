"""The two Connect DAGs: shape, and params that refuse bad input before any task runs."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

from kafka_runbooks_airflow.connect import conn_ids_from_params

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


def test_the_fleet_still_reads_the_runs_connect_conn_ids():
    """fleet.connect_fleet reads the run's list through the glue; the request's checks apply."""
    assert conn_ids_from_params({"connect_conn_ids": ["a", "a", " b "]}) == ["a", "b"]
    with pytest.raises(ValueError, match="connect_conn_ids"):
        conn_ids_from_params({"connect_conn_ids": []})


BUILDERS = {"restart_request", "sweep_request"}


def test_the_connect_tasks_read_the_request_never_the_params():
    """Each task body hands the run's params straight to its request builder and reads nothing else
    of them; only the typed request crosses into the glue (issue #26). ``restart`` reads none: its
    request comes from check_request's XCom."""
    bodies = {}
    for dag_file in ("kafka_connect_restart.py", "kafka_connect_autorestart.py"):
        tree = ast.parse((ROOT / "dags" / dag_file).read_text())
        bodies.update({n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)})
    for name in ("check_request", "restart", "sweep", "raise_alerts"):
        assert _params_uses(bodies[name]) == [], f"{name} reads the params beside its request"
    built = {
        name: _builders_called(bodies[name]) for name in ("check_request", "restart", "sweep", "raise_alerts")
    }
    assert built == {
        "check_request": ["restart_request"],
        "restart": [],
        "sweep": ["sweep_request"],
        "raise_alerts": ["sweep_request"],
    }


def _is_params(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "params"
    return isinstance(node, ast.Subscript) and getattr(node.slice, "value", None) == "params"


def _builders_called(function: ast.FunctionDef) -> list[str]:
    return [
        n.func.id
        for n in ast.walk(function)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in BUILDERS
    ]


def _params_uses(function: ast.FunctionDef) -> list[str]:
    """Every read of the run's params in a task body that is not handed straight to a builder."""
    handed = {
        id(a)
        for n in ast.walk(function)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in BUILDERS
        for a in n.args
    }
    return [ast.unparse(n) for n in ast.walk(function) if _is_params(n) and id(n) not in handed]
