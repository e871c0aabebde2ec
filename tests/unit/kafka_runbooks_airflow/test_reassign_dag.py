"""The reassigning runbooks' shared trigger-form params (kafka_runbooks_airflow.reassign_dag).

Each default lives once, in the request (``kafka_runbooks.failed_broker.request``) or the
decommission's disk ceiling; the forms show it and the request reads the form's value back to
the same number, so a form left as it is asks for exactly the default.
"""

from __future__ import annotations

from kafka_runbooks.failed_broker import request
from kafka_runbooks.failed_broker.decommission import (
    DEFAULT_MAX_DISK_USAGE_PERCENT,
    build_decommission_request,
)
from kafka_runbooks_airflow.failed_broker import SWEEP_DEFAULTS
from kafka_runbooks_airflow.reassign_dag import chunk_params, disk_ceiling_param

CHUNK_FIELDS = ("max_partitions_per_chunk", "max_bytes_per_chunk", "throttle_bytes_per_sec")


def test_the_forms_and_the_sweep_default_to_the_requests_constants():
    """A form left as it is, the sweep's defaults and an empty conf ask for the same chunks."""
    form = {name: p.value for name, p in chunk_params("drained").items()}
    form["max_disk_usage_percent"] = disk_ceiling_param().value
    from_form = build_decommission_request({**form, "broker_ids": "4"})
    assert {f: getattr(from_form, f) for f in CHUNK_FIELDS} == {
        "max_partitions_per_chunk": request.DEFAULT_MAX_PARTITIONS_PER_CHUNK,
        "max_bytes_per_chunk": request.DEFAULT_MAX_BYTES_PER_CHUNK,
        "throttle_bytes_per_sec": request.DEFAULT_THROTTLE_BYTES_PER_SEC,
    }
    assert {f: SWEEP_DEFAULTS[f] for f in CHUNK_FIELDS} == {f: getattr(from_form, f) for f in CHUNK_FIELDS}
    assert from_form.max_disk_usage_percent == DEFAULT_MAX_DISK_USAGE_PERCENT
    assert form["max_bytes_per_chunk"] == "1 GiB" and form["throttle_bytes_per_sec"] == "50 MiB"


def test_without_a_moved_brokers_name_there_is_no_receivers_param():
    """The rebalance picks its receivers by its mode: its form has no receivers field to ignore."""
    assert "receivers" not in chunk_params(None)
    assert list(chunk_params("failed"))[0] == "receivers"
    assert list(chunk_params(None)) == list(chunk_params("failed"))[1:]


def test_the_election_param_says_after_what_it_elects():
    """The heal's form says 'after healing', the planned moves' 'after the moves'."""
    healing = chunk_params("failed", elect_after="healing")["elect_preferred_leaders"].description
    moves = chunk_params("drained")["elect_preferred_leaders"].description
    assert healing.startswith("On: after healing, elect the preferred leaders")
    assert moves.startswith("On: after the moves, elect the preferred leaders")


REASSIGNING_DAGS = (
    "kafka_failed_broker_reassignment",
    "kafka_broker_decommission",
    "kafka_log_dir_failure",
    "kafka_rebalance",
)


def _wiring(dag_id: str) -> tuple[dict, set[str]]:
    """task id -> (class, upstream, trigger rule), and the modules of its Python tasks' functions."""
    from pathlib import Path

    from airflow.dag_processing.dagbag import DagBag

    path = Path(__file__).resolve().parents[3] / "dags" / f"{dag_id}.py"
    bag = DagBag(dag_folder=str(path), safe_mode=False)
    assert bag.import_errors == {}
    tasks = bag.dags[dag_id].tasks
    wiring = {t.task_id: (type(t).__name__, sorted(t.upstream_task_ids), t.trigger_rule) for t in tasks}
    modules = {t.python_callable.__module__ for t in tasks if hasattr(t, "python_callable")}
    return wiring, modules


def test_every_reassigning_dag_runs_the_one_pipeline_reassign_dag_builds():
    """The heal, the decommission, the log-dir failure and the rebalance differ only in the
    functions their tasks call: a fix to the wiring (a trigger rule, the lease's teardown)
    lands in all four, because no DAG builds its own copy of the tasks."""
    wirings = {dag_id: _wiring(dag_id) for dag_id in REASSIGNING_DAGS}
    heal, modules = wirings["kafka_failed_broker_reassignment"]
    assert modules == {"kafka_runbooks_airflow.reassign_dag", "kafka_runbooks_airflow.sensors.lease"}
    for dag_id, (wiring, its_modules) in wirings.items():
        assert (wiring, its_modules) == (heal, modules), dag_id
