"""Two real clusters, one real Airflow: the per-cluster lease and the fleet sweeps.

Cluster A is the session's stack (``kafka_default``); cluster B is a second, smaller local
stack started here (``KR_TEST_SECOND_PORT_BASE``, default 31000) and added to the running
Airflow as connections over REST, the way an operator adds a cluster.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafka_runbooks.approval import REJECT_OPTION
from kafka_runbooks_dev.localstack import LocalStack, Topology
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
RESTART = "kafka_broker_restart"
CLUSTER_B = "kafka_fleet_b"
pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="module")
def cluster_b(airflow_local, kafka_stack):
    """A second stack (2 brokers, 1 controller, no Connect), known to Airflow as ``kafka_fleet_b``."""
    home = ROOT / ".stack" / "fleet-b"
    stack = LocalStack(
        home=home,
        topology=Topology(
            brokers=2,
            controllers=1,
            connect=False,
            port_base=int(os.environ.get("KR_TEST_SECOND_PORT_BASE", "31000")),
        ),
    )
    stack.destroy()
    names = {
        CLUSTER_B: "kafka_default",
        f"{CLUSTER_B}_probe": "kafka_broker_probe_default",
        f"{CLUSTER_B}_restart": "kafka_restart_default",
    }
    try:
        stack.start(timeout=float(os.environ.get("KR_TEST_STACK_START_TIMEOUT", "900")))
        conns = stack.airflow_connections()
        for ours, theirs in names.items():
            conn = conns[theirs]
            airflow_local.api(
                "POST",
                "/connections",
                json={
                    "connection_id": ours,
                    "conn_type": conn["conn_type"],
                    "extra": json.dumps(conn["extra"]),
                },
            )
        yield stack
    finally:
        for ours in names:
            try:
                airflow_local.request("DELETE", f"/api/v2/connections/{ours}")
            except Exception:  # never created (the stack did not start)
                pass
        stack.stop()


def _restart(airflow_local, cluster: str, suffix: str = "", **conf) -> str:
    return airflow_local.trigger(
        RESTART,
        {
            "node_ids": "1",
            "reason": "lease test: never approved",
            "kafka_config_id": cluster,
            "probe_conn_id": f"{cluster}_probe" if cluster == CLUSTER_B else "kafka_broker_probe_default",
            "restart_conn_id": f"{cluster}_restart" if cluster == CLUSTER_B else "kafka_restart_default",
            **conf,
        },
    )


def _lease_file(airflow_local, cluster: str) -> Path:
    return airflow_local.home / "kafka_runbooks" / "state" / "leases" / f"{cluster}.json"


def _log(airflow_local, run_id: str, task_id: str, try_number: int = 1) -> str:
    return airflow_local.task_log_text(RESTART, run_id, task_id, try_number)


def test_a_restart_waits_for_the_lease_of_its_cluster_and_not_for_another_cluster(airflow_local, cluster_b):
    """A holds A's lease at its gate; a second restart on A fails (``fail``) or waits
    (``wait``, reschedule mode) naming the holder; a restart on B proceeds to its gate at
    once; rejecting A's gate releases A (the teardown) and the waiting run goes on."""
    holder = _restart(airflow_local, "kafka_default")
    airflow_local.wait_for_approval(RESTART, holder, "approval_gate", timeout=600)
    lease = json.loads(_lease_file(airflow_local, "kafka_default").read_text())
    assert (lease["dag_id"], lease["run_id"]) == (RESTART, holder)

    refused = _restart(airflow_local, "kafka_default", on_lease_held="fail")
    assert airflow_local.wait_for_run(RESTART, refused, timeout=600) == "failed"
    states = {t["task_id"]: t["state"] for t in airflow_local.task_instances(RESTART, refused)}
    assert states["acquire_lease"] == "failed" and states["plan_restart"] in ("upstream_failed", None)
    assert f"held by {RESTART} run {holder} since" in _log(airflow_local, refused, "acquire_lease")

    waiting = _restart(airflow_local, "kafka_default", on_lease_held="wait")
    airflow_local.wait_for_task_state(RESTART, waiting, "acquire_lease", "up_for_reschedule", timeout=600)
    assert f"wait for the lease because cluster kafka_default is held by {RESTART} run {holder}" in _log(
        airflow_local, waiting, "acquire_lease"
    )

    other = _restart(airflow_local, CLUSTER_B)
    airflow_local.wait_for_approval(RESTART, other, "approval_gate", timeout=600)
    assert json.loads(_lease_file(airflow_local, CLUSTER_B).read_text())["run_id"] == other
    # still waiting: B's run did not free A
    assert airflow_local.task_instance(RESTART, waiting, "acquire_lease")["state"] in (
        "up_for_reschedule",
        "queued",
        "scheduled",
        "running",
    )

    airflow_local.answer(RESTART, holder, "approval_gate", [REJECT_OPTION])
    assert airflow_local.wait_for_run(RESTART, holder, timeout=600) == "failed"
    airflow_local.wait_for_task_state(RESTART, holder, "release_lease", "success", timeout=600)
    airflow_local.wait_for_approval(RESTART, waiting, "approval_gate", timeout=900)
    lease = json.loads(_lease_file(airflow_local, "kafka_default").read_text())
    assert lease["run_id"] == waiting

    for run_id in (waiting, other):
        airflow_local.answer(RESTART, run_id, "approval_gate", [REJECT_OPTION])
    for run_id in (waiting, other):
        assert airflow_local.wait_for_run(RESTART, run_id, timeout=600) == "failed"
        airflow_local.wait_for_task_state(RESTART, run_id, "release_lease", "success", timeout=600)
    wait_until(
        lambda: (
            not _lease_file(airflow_local, "kafka_default").exists()
            and not _lease_file(airflow_local, CLUSTER_B).exists()
        ),
        60,
        what="both leases released by the teardowns",
    )


HEALTH = "kafka_cluster_health"
FAILED_SWEEP = "kafka_failed_broker_sweep"
METADATA_SWEEP = "kafka_metadata_error_sweep"
FLEET = ["kafka_default", CLUSTER_B]


@pytest.fixture
def fleet_variable(airflow_local):
    """The deployment names both clusters (Variable kafka_runbooks_clusters), as an operator would."""
    body = {"key": "kafka_runbooks_clusters", "value": ",".join(FLEET)}
    airflow_local.api("POST", "/variables", json=body)
    yield
    airflow_local.request("DELETE", "/api/v2/variables/kafka_runbooks_clusters")


def _instances(airflow_local, dag_id: str, run_id: str, task_id: str) -> dict[int, str]:
    return {
        ti["map_index"]: ti["state"]
        for ti in airflow_local.task_instances(dag_id, run_id)
        if ti["task_id"] == task_id
    }


def test_one_airflow_sweeps_both_clusters_and_a_dead_one_fails_alone(
    airflow_local, cluster_b, fleet_variable
):
    """Both clusters' mapped groups report (each report names its cluster); with cluster B
    stopped, B's instance fails and A's still succeeds."""
    reports = airflow_local.home / "kafka_runbooks" / "reports" / "cluster_health" / "by_connection"
    metadata_reports = airflow_local.home / "kafka_runbooks" / "reports" / "metadata_errors" / "by_connection"
    # the three DAGs run side by side, as the deployment schedules them: the health run's Spark
    # job is the long one and the sweeps need not wait for it
    run = airflow_local.trigger(HEALTH, {"max_listed": 50})
    sweep = airflow_local.trigger(FAILED_SWEEP, {})
    metadata = airflow_local.trigger(METADATA_SWEEP, {})
    assert airflow_local.wait_for_run(HEALTH, run, timeout=1800) == "success"
    assert _instances(airflow_local, HEALTH, run, "cluster.publish_report") == {0: "success", 1: "success"}
    for index, cluster in enumerate(FLEET):
        report = json.loads((reports / f"{cluster}.json").read_text())
        assert report["kafka_config_id"] == cluster
        log = airflow_local.task_log_text(HEALTH, run, "cluster.snapshot_cluster", map_index=index)
        assert f"/{cluster}" in log  # the snapshot folder names its cluster
    b_brokers = {b["broker_id"] for b in json.loads((reports / f"{CLUSTER_B}.json").read_text())["brokers"]}
    assert b_brokers == {1, 2}  # B's own brokers, not A's four

    assert airflow_local.wait_for_run(FAILED_SWEEP, sweep, timeout=600) == "success"
    for index, cluster in enumerate(FLEET):
        log = airflow_local.task_log_text(FAILED_SWEEP, sweep, "cluster.sweep", map_index=index)
        # nothing failed, so no decision: the returned value names the cluster in the run it would start
        assert f"'run_id': 'sweep__{cluster}__" in log
        state_file = airflow_local.home / "kafka_runbooks" / "state" / "failed_brokers" / f"{cluster}.json"
        assert json.loads(state_file.read_text())["cluster"] == cluster

    # the metadata-error sweep: one group per cluster, each read through its own probe
    # connection (B's nodes are B's three, not A's seven), each report naming its cluster
    assert airflow_local.wait_for_run(METADATA_SWEEP, metadata, timeout=600) == "success"
    assert _instances(airflow_local, METADATA_SWEEP, metadata, "cluster.sweep") == {
        0: "success",
        1: "success",
    }
    b_nodes = {
        int(n) for n in cluster_b.airflow_connections()["kafka_broker_probe_default"]["extra"]["endpoints"]
    }
    for cluster, nodes in (("kafka_default", 7), (CLUSTER_B, len(b_nodes))):
        report = json.loads((metadata_reports / f"{cluster}.json").read_text())
        assert report["kafka_config_id"] == cluster and report["run_id"] == metadata
        assert len(report["summary"]["healthy"]) == nodes, report["summary"]
    assert (
        set(json.loads((metadata_reports / f"{CLUSTER_B}.json").read_text())["summary"]["healthy"]) == b_nodes
    )

    # cluster B goes away: its mapped instance fails (and so the run, so alerts fire), A's
    # still sweeps and records its state (the health DAG's groups are mapped the same way;
    # its Spark job takes minutes per cluster on this machine, so it is run once above)
    # gone as a crash leaves it (kill -9): a controlled shutdown of its brokers, then its controller,
    # was seconds of waiting that told the sweeps nothing more (nothing listens either way)
    for node in (*cluster_b.topology.broker_nodes, *cluster_b.topology.controller_nodes):
        cluster_b.kill(node.name)
    state_a = airflow_local.home / "kafka_runbooks" / "state" / "failed_brokers" / "kafka_default.json"
    before = state_a.stat().st_mtime_ns
    # both sweeps at once: B's groups spend their time waiting for B to listen, side by side
    sweep = airflow_local.trigger(FAILED_SWEEP, {})
    metadata = airflow_local.trigger(METADATA_SWEEP, {})
    assert airflow_local.wait_for_run(FAILED_SWEEP, sweep, timeout=600) == "failed"
    assert _instances(airflow_local, FAILED_SWEEP, sweep, "cluster.sweep") == {0: "success", 1: "failed"}
    assert state_a.stat().st_mtime_ns > before
    log = airflow_local.task_log_text(FAILED_SWEEP, sweep, "cluster.sweep", map_index=0)
    assert "'run_id': 'sweep__kafka_default__" in log and "'brokers': 4" in log
    # nothing listens at B's bootstrap servers: said so, after one attempt's deadline, not three
    b_log = airflow_local.task_log_text(FAILED_SWEEP, sweep, "cluster.sweep", map_index=1)
    assert "every bootstrap server refused the connection" in b_log, b_log[-2000:]

    # and B's metadata-error group: B unreachable is B's alert (its raise_alerts fails), A's
    # group sweeps and writes its report as before
    assert airflow_local.wait_for_run(METADATA_SWEEP, metadata, timeout=600) == "failed"
    assert _instances(airflow_local, METADATA_SWEEP, metadata, "cluster.raise_alerts") == {
        0: "success",
        1: "failed",
    }
    assert json.loads((metadata_reports / "kafka_default.json").read_text())["run_id"] == metadata
    b_report = json.loads((metadata_reports / f"{CLUSTER_B}.json").read_text())
    assert b_report["run_id"] == metadata and b_report["alerts"], b_report
