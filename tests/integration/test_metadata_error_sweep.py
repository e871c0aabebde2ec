"""The metadata-error sweep against the real local stack's nodes and their JMX exporters."""

from __future__ import annotations

import logging

import pytest
import requests

from kafka_runbooks.metadata_errors.endpoints import MetricsEndpoints
from kafka_runbooks.metadata_errors.state import MetadataErrorStateStore
from kafka_runbooks.metadata_errors.sweep import FLAGGED, HEALTHY, UNKNOWN, SweepOptions, run_sweep
from tests.helpers import wait_until
from tests.metadata_helpers import (
    APPLY,
    CONTROLLER,
    LOAD,
    PROCESS_START,
    ExpositionServer,
    counter,
    record,
    with_counter,
)

log = logging.getLogger(__name__)


@pytest.fixture
def stack_endpoints(local_stack) -> dict[str, str]:
    """The stack's probe connection extras: every node's real metrics URL."""
    return dict(local_stack.airflow_connections()["kafka_broker_probe_default"]["extra"]["endpoints"])


def sweep(admin, endpoints: dict[str, str], store, run_id: str, active=None, **options) -> dict:
    return run_sweep(
        admin,
        MetricsEndpoints(endpoints=endpoints, timeout_s=10),
        store,
        SweepOptions(**options),
        run_id,
        is_run_active=active,
        logger=log,
    )


def test_every_real_node_is_read_with_the_shipped_names(local_stack, admin, stack_endpoints, tmp_path):
    store = MetadataErrorStateStore("kafka_default", tmp_path)
    report = sweep(admin, stack_endpoints, store, "real-1")
    nodes = {r["node_id"]: r for r in report["nodes"]}
    brokers = [n.node_id for n in local_stack.topology.broker_nodes]
    controllers = [n.node_id for n in local_stack.topology.controller_nodes]
    assert sorted(nodes) == sorted(brokers + controllers)
    assert report["summary"]["healthy"] == sorted(brokers + controllers), report["summary"]
    for node_id in brokers:
        row = nodes[node_id]
        assert row["roles"] == ["broker"] and "DescribeCluster" in row["sources"]
        assert row["metric_names"] == {"metadata_load_errors": LOAD, "metadata_apply_errors": APPLY}
        assert row["broker_state_name"] == "RUNNING"
        assert row["counters"] == {"metadata_load_errors": 0.0, "metadata_apply_errors": 0.0}
    for node_id in controllers:
        row = nodes[node_id]
        assert row["roles"] == ["controller"] and "DescribeQuorum voter" in row["sources"]
        assert row["metric_names"] == {"controller_metadata_errors": CONTROLLER}
        assert row["counters"] == {"controller_metadata_errors": 0.0}
    leader = admin.describe_quorum().leader_id
    assert report["active_controller"] == leader and report["active_controller_by_metrics"] == [leader]
    assert report["restart_requests"] == [] and report["controller_escalation"] is None
    assert report["alerts"] == []
    # a second sweep compares with the first: unchanged, still healthy
    again = sweep(admin, stack_endpoints, store, "real-2")
    assert {r["change"] for r in again["nodes"]} == {"unchanged"}
    assert again["summary"]["healthy"] == report["summary"]["healthy"]


def test_a_node_with_increasing_counters_is_flagged_and_a_drop_is_rebased(
    local_stack, admin, stack_endpoints, tmp_path
):
    store = MetadataErrorStateStore("kafka_default", tmp_path)
    broker = local_stack.topology.broker_nodes[1].node_id
    real = record(stack_endpoints[str(broker)])
    start = counter(real, APPLY)
    server = ExpositionServer(real)
    endpoints = {**stack_endpoints, str(broker): server.url}
    active_runs: set[str] = set()
    try:
        base = sweep(admin, endpoints, store, "inc-1", active=lambda _dag, run: run in active_runs)
        assert base["summary"]["healthy"] == sorted(int(k) for k in endpoints)
        server.text = with_counter(real, APPLY, start + 3)
        flagged = sweep(admin, endpoints, store, "inc-2", active=lambda _dag, run: run in active_runs)
        row = next(r for r in flagged["nodes"] if r["node_id"] == broker)
        assert row["status"] == FLAGGED and row["increased"] == {"metadata_apply_errors": [start, start + 3]}
        assert flagged["summary"]["flagged"] == [broker]
        [request] = flagged["restart_requests"]
        assert request["conf"]["node_ids"] == str(broker) and request["conf"]["require_approval"] is True
        assert (
            APPLY in request["conf"]["reason"]
            and f"{int(start)} -> {int(start + 3)}" in request["conf"]["reason"]
        )
        # still going up while the restart run it started is active: no second run
        active_runs.add(request["trigger_run_id"])
        server.text = with_counter(real, APPLY, start + 5)
        busy = sweep(admin, endpoints, store, "inc-3", active=lambda _dag, run: run in active_runs)
        assert busy["restart_requests"] == []
        row = next(r for r in busy["nodes"] if r["node_id"] == broker)
        assert row["status"] == FLAGGED and "still active" in row["action"]
        # the node restarted: its counter went down, re-based and not flagged
        server.text = with_counter(real, APPLY, start)
        rebased = sweep(admin, endpoints, store, "inc-4", active=lambda _dag, run: run in active_runs)
        row = next(r for r in rebased["nodes"] if r["node_id"] == broker)
        assert row["status"] == HEALTHY and row["rebased"] == {"metadata_apply_errors": [start + 5, start]}
        assert rebased["restart_requests"] == []
        assert store.load()[broker].counters["metadata_apply_errors"] == start
    finally:
        server.stop()
    assert server.requests == 4


def test_a_broker_that_restarts_then_fails_again_below_its_old_count_is_flagged(
    restore_stack, admin, stack_endpoints, tmp_path
):
    """3 errors, a real restart of the broker, then 1 error: the 1 is new (issue: it was
    reported "healthy, re-based" because 1 < 3)."""
    stack = restore_stack
    store = MetadataErrorStateStore("kafka_default", tmp_path)
    broker = stack.topology.broker_nodes[-1]
    real_url = stack_endpoints[str(broker.node_id)]
    before = record(real_url)
    started_before = counter(before, PROCESS_START)
    server = ExpositionServer(with_counter(before, APPLY, 3))
    endpoints = {**stack_endpoints, str(broker.node_id): server.url}
    try:
        first = sweep(admin, endpoints, store, "restart-1")
        row = next(r for r in first["nodes"] if r["node_id"] == broker.node_id)
        assert row["status"] == HEALTHY and row["counters"]["metadata_apply_errors"] == 3

        # the broker really restarts: its exporter serves a new process start time and
        # counters that start again from zero
        stack.stop_node(broker.name)
        stack.start_node(broker.name)
        stack.wait_ready([broker.name], 300)
        after = wait_until(lambda: _exposition(real_url), 60, 1, "the restarted broker's exposition")
        assert counter(after, PROCESS_START) > started_before
        assert counter(after, APPLY) == 0.0
        server.text = with_counter(after, APPLY, 1)  # one new error since the restart

        second = sweep(admin, endpoints, store, "restart-2")
        row = next(r for r in second["nodes"] if r["node_id"] == broker.node_id)
        assert row["restarted_since_last_sweep"] is True
        assert row["status"] == FLAGGED and row["increased"] == {"metadata_apply_errors": [0.0, 1.0]}
        [request] = second["restart_requests"]
        assert request["conf"]["node_ids"] == str(broker.node_id)
        assert "0 -> 1" in request["conf"]["reason"] and "since its restart" in request["conf"]["reason"]

        # the restart the sweep asked for happened and no error came since: re-based, healthy
        server.text = with_counter(after, PROCESS_START, counter(after, PROCESS_START) + 60)
        third = sweep(admin, endpoints, store, "restart-3")
        row = next(r for r in third["nodes"] if r["node_id"] == broker.node_id)
        assert row["status"] == HEALTHY and row["rebased"] == {"metadata_apply_errors": [1.0, 0.0]}
        assert third["restart_requests"] == []
    finally:
        server.stop()


def _exposition(url: str) -> str | None:
    try:
        return record(url)
    except requests.RequestException:
        return None


def test_too_many_flagged_brokers_start_no_restart(local_stack, admin, stack_endpoints, tmp_path):
    store = MetadataErrorStateStore("kafka_default", tmp_path)
    brokers = [n.node_id for n in local_stack.topology.broker_nodes][:2]
    servers = {b: ExpositionServer(record(stack_endpoints[str(b)])) for b in brokers}
    endpoints = {**stack_endpoints, **{str(b): s.url for b, s in servers.items()}}
    try:
        sweep(admin, endpoints, store, "many-1", max_flagged_brokers=1)
        for server in servers.values():
            server.text = with_counter(server.text, LOAD, counter(server.text, LOAD) + 1)
        report = sweep(admin, endpoints, store, "many-2", max_flagged_brokers=1)
    finally:
        for server in servers.values():
            server.stop()
    assert report["summary"]["flagged"] == sorted(brokers)
    assert report["restart_requests"] == []
    assert any("brokers flagged at once" in a["alert"] for a in report["alerts"])


def test_the_active_controller_that_keeps_failing_is_escalated_once(
    local_stack, admin, stack_endpoints, tmp_path
):
    store = MetadataErrorStateStore("kafka_default", tmp_path)
    leader = admin.describe_quorum().leader_id
    follower = next(n.node_id for n in local_stack.topology.controller_nodes if n.node_id != leader)
    real_leader = record(stack_endpoints[str(leader)])
    real_follower = record(stack_endpoints[str(follower)])
    servers = {leader: ExpositionServer(real_leader), follower: ExpositionServer(real_follower)}
    endpoints = {**stack_endpoints, **{str(n): s.url for n, s in servers.items()}}
    waiting: set[str] = set()

    def bump(node: int, by: int) -> None:
        text = servers[node].text
        servers[node].text = with_counter(text, CONTROLLER, counter(text, CONTROLLER) + by)

    def run(run_id: str) -> dict:
        report = sweep(admin, endpoints, store, run_id, active=lambda _dag, run: run in waiting)
        return report

    try:
        run("ctl-1")
        bump(leader, 1)
        bump(follower, 1)
        first = run("ctl-2")
        rows = {r["node_id"]: r for r in first["nodes"]}
        assert rows[leader]["status"] == FLAGGED and rows[follower]["status"] == FLAGGED
        assert "reported (active controller; increased in 1" in rows[leader]["action"]
        assert rows[follower]["action"] == "reported (not the active controller)"
        assert first["controller_escalation"] is None and first["restart_requests"] == []
        assert {a["node_id"] for a in first["alerts"]} == {leader, follower}
        bump(leader, 2)
        second = run("ctl-3")
        escalation = second["controller_escalation"]
        assert escalation["node_id"] == leader and escalation["streak"] == 2
        assert escalation["conf"] == {
            "node_ids": str(leader),
            "reason": escalation["reason"],
            "require_approval": True,
            # the swept cluster's connections: a restart run of another cluster's defaults would
            # restart that cluster's node with the same id
            "kafka_config_id": "kafka_default",
            "probe_conn_id": "kafka_broker_probe_default",
            "restart_conn_id": "kafka_restart_default",
        }
        assert second["restart_requests"] == []  # a controller is never restarted without a person
        # the question is still open: a further increase does not ask again
        waiting.add("ctl-3")
        bump(leader, 1)
        run("ctl-4")
        bump(leader, 1)
        third = run("ctl-5")
        assert third["controller_escalation"] is None
        row = next(r for r in third["nodes"] if r["node_id"] == leader)
        assert "still waiting for a decision" in row["action"]
    finally:
        for server in servers.values():
            server.stop()


def test_a_node_whose_endpoint_is_down_is_unknown(local_stack, admin, stack_endpoints, tmp_path):
    store = MetadataErrorStateStore("kafka_default", tmp_path)
    broker = local_stack.topology.broker_nodes[0].node_id
    server = ExpositionServer(record(stack_endpoints[str(broker)]))
    endpoints = {**stack_endpoints, str(broker): server.url}
    sweep(admin, endpoints, store, "down-1")
    server.stop()
    report = sweep(admin, endpoints, store, "down-2")
    row = next(r for r in report["nodes"] if r["node_id"] == broker)
    assert row["status"] == UNKNOWN and "ConnectionError" in row["error"]
    assert report["summary"]["unknown"] == [broker] and broker not in report["summary"]["healthy"]
    assert any(a["node_id"] == broker and "unknown" in a["alert"] for a in report["alerts"])
    # the last known values are kept for the next comparison
    assert store.load()[broker].counters == row["previous"]


def test_the_proposals_names_on_a_real_exposition_are_read(local_stack, admin, stack_endpoints, tmp_path):
    store = MetadataErrorStateStore("kafka_default", tmp_path)
    broker = local_stack.topology.broker_nodes[2].node_id
    real = record(stack_endpoints[str(broker)])
    renamed = real.replace(
        "kafka_server_broker_metadata_metrics_metadata_apply_error_count",
        "kafka_server_broker_metadata_metrics_publisher_error_count",
    ).replace(
        "kafka_server_broker_metadata_metrics_metadata_load_error_count",
        "kafka_server_broker_metadata_metrics_listener_batch_load_error_count",
    )
    server = ExpositionServer(renamed)
    try:
        report = sweep(admin, {**stack_endpoints, str(broker): server.url}, store, "names-1")
    finally:
        server.stop()
    row = next(r for r in report["nodes"] if r["node_id"] == broker)
    assert row["status"] == HEALTHY
    assert row["metric_names"] == {
        "metadata_load_errors": "kafka_server_broker_metadata_metrics_listener_batch_load_error_count",
        "metadata_apply_errors": "kafka_server_broker_metadata_metrics_publisher_error_count",
    }


def test_without_the_cluster_the_configured_nodes_are_still_swept(stack_endpoints, tmp_path):
    from kafka_runbooks.admin import ClusterAdmin

    store = MetadataErrorStateStore("kafka_default", tmp_path)
    with ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"}, timeout_s=3) as unreachable:
        report = sweep(unreachable, stack_endpoints, store, "nocluster-1")
    [error] = report["discovery_errors"]  # DescribeQuorum is not tried when no broker answered
    assert error.startswith("DescribeCluster failed: ClusterUnreachable")
    assert report["summary"]["healthy"] == sorted(int(k) for k in stack_endpoints)
    roles = {r["node_id"]: r["roles"] for r in report["nodes"]}
    assert {tuple(v) for v in roles.values()} == {("broker",), ("controller",)}
