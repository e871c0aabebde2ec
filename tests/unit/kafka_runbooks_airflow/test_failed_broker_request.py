"""The reassigning runbooks build their typed request once; their cluster work takes that (issue #26).

The reassigning DAGs' shared builder (``reassign_dag``) has its validate task build the runbook's
request once (``ReassignmentRunbook.request``: the heal's ``reassign_request``, the decommission's,
the log-dir failure's, the rebalance's) and hand it with the cluster's ``kafka_config_id`` to the
runbook's ``validate`` (over ``validate_request``); ``verify`` takes validate's checked request
and the cluster (default ``verify_reassignment``). A function past that point that indexed the
params again could see a value the request judged differently.
"""

from __future__ import annotations

import pytest

import kafka_runbooks_airflow.failed_broker as glue
from tests.unit.dags.test_reassign_callables import REASSIGNING, _runbook
from tests.unit.kafka_runbooks_airflow.glue_source import callers_of, functions, params_reads


def test_validating_against_the_cluster_reads_the_request_not_the_params():
    for name in ("validate_request", "_read_for_validate"):
        function = functions(glue)[name]
        assert params_reads(function) == [], f"{name} reads the params"
        assert [a.arg for a in function.args.args][:2] == ["request", "kafka_config_id"]


def test_verifying_reads_the_checked_request_and_the_cluster_not_the_params():
    """After the moves, what the run asked for is validate's checked XCom (the request as a dict);
    of the params only the cluster is taken, once, by the task's adapter ``verify`` (the election is
    no longer verify's: it is made in ``execute_chunks``, ``leader_moves``)."""
    for name in ("verify_reassignment",):
        function = functions(glue)[name]
        assert params_reads(function) == [], f"{name} reads the params"
        assert "kafka_config_id" in [a.arg for a in function.args.args]


def test_the_request_is_built_in_one_place():
    """``reassign_request`` is the only caller of the library's parser in the glue."""
    assert callers_of(glue, "build_request") == ["reassign_request"]


# ------------------------------------------------------------------ the reassigning runbooks' glue

GLUE_MODULES = ("failed_broker", "decommission", "log_dir_failure", "rebalance")
# who may still take the params: the request builders, the inputs checked before the lease, the
# sweep's settings and the stop's request (each the parser of its task's params)
PARAMS_TAKERS = {
    "failed_broker": {"reassign_request", "sweep_settings", "checked_sweep_settings", "request_stop"},
    "decommission": {"check_input", "decommission_request"},
    "log_dir_failure": {"check_input", "log_dir_request"},
    "rebalance": {"check_input", "rebalance_request"},
}


def _glue(name: str):
    import importlib

    return importlib.import_module(f"kafka_runbooks_airflow.{name}")


def _takers(module) -> set[str]:
    """The module's functions (nested ones too) with a ``params`` argument or a ``params`` read."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(module.__file__).read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and ("params" in [a.arg for a in node.args.args] or params_reads(node))
    }


def test_past_the_request_builders_no_reassigning_glue_takes_the_params():
    """The validate task builds the run's request once (the runbook's ``request``) and hands it on
    with the cluster; verify and the cleanup take validate's checked request and the cluster; the
    sweep takes its settings read once. Before, validate, verify, the cleanup, the rebalance's
    election and the sweep each took the params and indexed the cluster again."""
    for name in GLUE_MODULES:
        assert _takers(_glue(name)) == PARAMS_TAKERS[name], name


def test_each_reassigning_dag_names_the_request_its_validate_task_builds():
    """The builder's validate task calls ``request`` then ``validate(request, kafka_config_id, ...)``;
    verify defaults to the heal's ``verify_reassignment(checked, kafka_config_id, ...)``."""
    import inspect

    from kafka_runbooks_airflow.reassign_dag import ReassignmentRunbook, call

    assert ReassignmentRunbook.__dataclass_fields__["verify"].default.endswith(":verify_reassignment")
    builders = {
        "failed_broker": ("reassign_request", {"failed_brokers": "4"}, "failed_brokers"),
        "decommission": ("decommission_request", {"broker_ids": "4"}, "failed_brokers"),
        "log_dir_failure": ("log_dir_request", {"broker_id": 4}, "broker_id"),
        "rebalance": ("rebalance_request", {"mode": "add-brokers", "new_brokers": "4"}, "reassign"),
    }
    for name, (builder, params, field) in builders.items():
        request = call(f"kafka_runbooks_airflow.{name}:{builder}", {"kafka_config_id": "k", **params})
        assert hasattr(request, field), name
        validate = inspect.signature(_glue(name).validate).parameters
        assert list(validate)[1:4] == ["kafka_config_id", "dag_id", "run_id"], name
    for name in ("log_dir_failure", "rebalance"):
        assert list(inspect.signature(_glue(name).verify).parameters)[:2] == ["checked", "kafka_config_id"]


def test_a_bad_rebalance_request_is_refused_once_as_a_decision(caplog):
    import logging

    from airflow.sdk.exceptions import AirflowFailException

    caplog.set_level(logging.INFO)
    with pytest.raises(AirflowFailException, match="needs new_brokers"):
        _glue("rebalance").rebalance_request({"kafka_config_id": "k", "mode": "add-brokers"})
    refusals = [r for r in caplog.records if "DECISION validate: refuse the run" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.ERROR


CONTRACT = {  # ReassignmentRunbook's field -> the glue function's leading parameters
    "check_input": ["dag_id", "run_id", "params"],
    "request": ["params"],
    "validate": [None, "kafka_config_id", "dag_id", "run_id"],  # the request, by any name
    "review_plan": ["checked", "snapshot_info", "dag_id", "run_id"],
    "verify": ["checked", "kafka_config_id", "dag_id", "run_id"],
}


@pytest.mark.parametrize("path", REASSIGNING, ids=lambda p: p.stem)
def test_the_glue_each_reassigning_dag_names_takes_what_the_builder_hands_it(path, monkeypatch):
    """The builder calls each named function with its contract's arguments (the request and the
    cluster, not the params, past the request builder); that each name exists at all is
    ``tests/unit/dags/test_reassign_callables.py``'s check."""
    import importlib
    import inspect

    runbook = _runbook(path, monkeypatch)
    for field, contract in CONTRACT.items():
        module, _, name = getattr(runbook, field).partition(":")
        function = getattr(importlib.import_module(module), name)
        leading = list(inspect.signature(function).parameters)[: len(contract)]
        assert leading == [p or leading[0] for p in contract], (
            f"{path.stem}: {field} {module}:{name}{leading}"
        )


def test_a_review_without_its_upstream_result_fails_the_run_never_skips_it():
    """Found by the fault campaign (heal seed 4): the snapshot task was killed, the review skipped,
    and the skip carried through the gate, the chunks and the verification: a green run that healed
    nothing. The review fails now, naming the task whose log holds the error."""
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.failed_broker import upstream_result_or_skip

    with pytest.raises(AirflowFailException, match="snapshot_cluster did not finish"):
        upstream_result_or_skip(None, "snapshot_cluster", "the snapshot")
    assert upstream_result_or_skip({"path": "x"}, "snapshot_cluster", "the snapshot") == {"path": "x"}


def test_a_run_of_another_cluster_behind_the_same_connection_is_left_alone(monkeypatch, tmp_path):
    """Found by the fault campaign (stop seed 9, round 2): a stop acted on run states that a cluster
    since rebuilt behind the same connection id had left, and put back "replica orders" of them on the
    new cluster (internal topics share their names). A state records the cluster it was planned on."""
    import kafka_runbooks_airflow.failed_broker as glue
    from kafka_runbooks.failed_broker.chunk_state import ChunkState, ExecState

    ours = ExecState(
        "r-ours", [4], 1, [ChunkState(0, {"t:0": [1, 2]}, status="moving", moving=["t:0"])], cluster_id="new"
    )
    theirs = ExecState(
        "r-old", [4], 1, [ChunkState(0, {"u:0": [1, 3]}, status="moving", moving=["u:0"])], cluster_id="old"
    )
    unmarked = ExecState(
        "r-unmarked", [4], 1, [ChunkState(0, {"v:0": [2, 3]}, status="moving", moving=["v:0"])]
    )
    states = {
        tmp_path / "a" / "exec-state.json": ours,
        tmp_path / "b" / "exec-state.json": theirs,
        tmp_path / "c" / "exec-state.json": unmarked,
    }
    monkeypatch.setattr(glue, "state_files", lambda dag_id, cluster=None: list(states))
    monkeypatch.setattr("kafka_runbooks.failed_broker.execute.load_state", lambda path: states[path])
    assert set(glue.owned_in_flight("kafka_failed_broker_reassignment", "k", "new")) == {"t:0", "v:0"}
    assert not ours.of_another_cluster("new") and theirs.of_another_cluster("new")
    assert not unmarked.of_another_cluster("new")  # an older state file counts for any, as before
