"""Every DAG imports cleanly, is documented, owned, tagged, takes validated params,
and touches no network while it is parsed."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DAG_FOLDERS = [ROOT / "dags", ROOT / "tests" / "e2e" / "dags"]


class NetworkAtParseTime(AssertionError):
    pass


@pytest.fixture(scope="module")
def dagbags():
    from airflow.dag_processing.dagbag import DagBag

    attempts: list[str] = []

    def refuse(*args, **kwargs):
        attempts.append(repr(args[:2]))
        raise NetworkAtParseTime(f"network call while parsing DAGs: {args[:2]!r}")

    mp = pytest.MonkeyPatch()
    mp.setattr(socket.socket, "connect", refuse)
    mp.setattr(socket.socket, "connect_ex", refuse)
    mp.setattr(socket, "getaddrinfo", refuse)
    mp.setattr(socket, "create_connection", refuse)
    try:
        bags = [DagBag(dag_folder=str(folder), safe_mode=False) for folder in DAG_FOLDERS]
    finally:
        mp.undo()
    return bags, attempts


def _dags(dagbags):
    bags, _ = dagbags
    return [dag for bag in bags for dag in bag.dags.values()]


def test_no_import_errors_and_no_network(dagbags):
    bags, attempts = dagbags
    errors = {k: v for bag in bags for k, v in bag.import_errors.items()}
    assert errors == {}
    assert attempts == []


def test_the_expected_dags_are_there(dagbags):
    ids = {d.dag_id for d in _dags(dagbags)}
    assert {
        "kafka_cluster_health",
        "kafka_broker_restart",
        "kafka_connect_autorestart",
        "kafka_connect_restart",
        "kafka_failed_broker_sweep",
        "kafka_failed_broker_reassignment",
        "kafka_metadata_error_sweep",
        "kafka_reassignment_stop",
        "e2e_gated_approval_check",
    } <= ids


def test_every_dag_is_owned_tagged_documented(dagbags):
    for dag in _dags(dagbags):
        assert dag.doc_md and len(dag.doc_md.strip()) > 40, f"{dag.dag_id} has no doc"
        assert dag.tags, f"{dag.dag_id} has no tags"
        owners = {t.owner for t in dag.tasks}
        assert owners and "airflow" not in owners, f"{dag.dag_id} tasks have no owner: {owners}"


def test_every_param_is_typed_and_its_default_validates(dagbags):
    """Typed (a ``type`` or an ``anyOf`` of types), documented, and the defaults validate,
    except required params without a default (the form marks them, Trigger waits for them)."""
    for dag in _dags(dagbags):
        for name in dag.params:
            param = dag.params.get_param(name)
            schema = param.schema
            assert schema.get("type") or schema.get("anyOf"), f"{dag.dag_id}.{name} has no type"
            assert param.description or schema.get("description"), f"{dag.dag_id}.{name} undocumented"
            if param.value is None and schema.get("type") and "null" not in schema["type"]:
                continue  # required: no default on purpose (e.g. which nodes to restart)
            param.resolve()


def test_kafka_cluster_health_never_acts(dagbags):
    dag = next(d for d in _dags(dagbags) if d.dag_id == "kafka_cluster_health")
    assert [t.task_id for t in dag.topological_sort()] == [
        "health_settings",
        "clusters",
        "cluster.snapshot_cluster",
        "cluster.spark_args",
        "cluster.analyse_health",
        "cluster.publish_report",
        "cluster.start_rebalance",  # the proposal: skipped unless start_rebalance is on (off by default)
    ]
    assert "read-only" in dag.tags
    assert dag.max_active_runs == 1


def test_kafka_broker_restart_gates_before_acting(dagbags):
    dag = next(d for d in _dags(dagbags) if d.dag_id == "kafka_broker_restart")
    gate = dag.get_task("approval_gate")
    roll = dag.get_task("rolling_restart")
    assert gate.task_id in roll.upstream_task_ids
    assert roll.mode == "reschedule"  # no worker slot held while it waits
    assert dag.params["require_approval"] is True and dag.params["allow_force_restart"] is False


def test_manual_runbooks_ship_unpaused_and_sweeps_paused(dagbags):
    """A manual runbook acts only past its gate, so it ships unpaused: a run started into a
    paused DAG waits in the queue unseen (a sweep's heal, or a form's "Trigger" with the
    "Unpause" box cleared). A scheduled sweep acts on its own, so it waits for an operator."""
    dags = {d.dag_id: d for d in _dags(dagbags) if d.dag_id.startswith("kafka_")}
    paused = {dag_id for dag_id, d in dags.items() if d.is_paused_upon_creation is not False}
    # on a clock: the alert intake's asset schedule runs it only on an authenticated post's event
    scheduled = {
        dag_id
        for dag_id, d in dags.items()
        if d.timetable.can_be_scheduled and not d.timetable.asset_condition
    }
    assert paused == {
        "kafka_cluster_health",
        "kafka_connect_autorestart",
        "kafka_failed_broker_sweep",
        "kafka_metadata_error_sweep",
    }
    assert not (set(dags) - paused) & scheduled


def test_every_dag_that_moves_replicas_in_chunks_is_reachable_by_the_stop_and_the_sweeps(dagbags):
    """A DAG with the chunked executor's task must be in the one list the stop request, the
    Kafka page's Stop link and progress, and the sweeps' one-reassignment-per-cluster rule
    read: kafka_rebalance was missing from it, so a sweep could start a heal beside a rebalance
    and Stop never reached one."""
    from kafka_runbooks.failed_broker import REASSIGNING_DAG_IDS

    chunked = {d.dag_id for d in _dags(dagbags) if "execute_chunks" in d.task_ids}
    assert chunked and chunked == set(REASSIGNING_DAG_IDS)
