"""The admin facade reads what the runbooks decide on, from the real cluster."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import ClusterUnreachable
from kafka_runbooks.snapshot import write_snapshot
from tests.helpers import create_topic, produce, unique_topic, wait_until


def test_partitions_carry_leader_epoch_isr_and_effective_min_isr(admin, kafka_stack):
    default_topic = unique_topic("facade-default")
    strict_topic = unique_topic("facade-strict")
    create_topic(kafka_stack.bootstrap_servers, default_topic, 3, 3)
    create_topic(kafka_stack.bootstrap_servers, strict_topic, 2, 3, config={"min.insync.replicas": "3"})

    # the facade may ask a broker that has not applied the new topics yet: wait for it to catch up
    def described():
        found = {(p.topic, p.partition): p for p in admin.describe_partitions([default_topic, strict_topic])}
        return found if len(found) == 5 else None

    parts = wait_until(described, 30, 0.5, "both new topics described")
    assert len(parts) == 5
    p0 = parts[(default_topic, 0)]
    assert p0.replication_factor == 3 and set(p0.isr) == set(p0.replicas)
    assert p0.leader in p0.replicas and p0.leader_epoch >= 0
    assert p0.min_insync_replicas == 2
    assert parts[(strict_topic, 1)].min_insync_replicas == 3


def test_rack_aware_placement_spans_both_racks(admin, kafka_stack):
    topic = unique_topic("facade-racks")
    create_topic(kafka_stack.bootstrap_servers, topic, 6, 3)
    brokers = admin.describe_brokers()
    for p in admin.describe_partitions([topic]):
        assert {brokers[r].rack for r in p.replicas} == {"rack-a", "rack-b"}


def test_log_dir_sizes_and_snapshot_rows(admin, kafka_stack, tmp_path):
    topic = unique_topic("facade-sizes")
    create_topic(kafka_stack.bootstrap_servers, topic, 1, 3)
    assert produce(kafka_stack.bootstrap_servers, topic, 500, size=200) == 500
    state = wait_until(
        lambda: (
            (s := admin.read_state())
            and all(r.size_bytes > 100_000 for r in s.log_dirs if r.topic == topic)
            and len([r for r in s.log_dirs if r.topic == topic]) == 3
            and s
        ),
        30,
        what="three replicas with their bytes reported",
    )
    path = write_snapshot(state, tmp_path / "snap", kafka_stack.bootstrap_servers)
    rows = pq.read_table(path / "replicas.parquet").to_pylist()
    assert len(rows) == sum(p.replication_factor for p in state.partitions)
    mine = [r for r in rows if r["topic"] == topic]
    assert len(mine) == 3
    assert sum(r["is_leader"] for r in mine) == 1
    assert [r["replica_index"] for r in sorted(mine, key=lambda r: r["replica_index"])] == [0, 1, 2]
    assert all(r["size_bytes"] > 100_000 and r["in_isr"] and r["broker_alive"] for r in mine)
    assert all(r["min_insync_replicas"] == 2 for r in mine)
    brokers = pq.read_table(path / "brokers.parquet").to_pylist()
    assert sorted(b["broker_id"] for b in brokers) == [1, 2, 3, 4]


def test_a_dead_broker_is_in_the_snapshot_as_dead(restore_stack, admin):
    stack = restore_stack
    topic = unique_topic("facade-dead")
    create_topic(stack.bootstrap_servers, topic, 1, 2, assignment={0: [3, 1]})
    stack.kill(3)
    state = wait_until(
        lambda: (s := admin.read_state()) and not s.is_available(3) and s, 30, what="broker 3 unavailable"
    )
    assert state.brokers[3].available is False
    assert 3 in state.log_dir_errors or all(r.broker_id != 3 for r in state.log_dirs)
    p = next(p for p in state.partitions if p.topic == topic)
    wait_until(
        lambda: 3 not in next(x for x in admin.describe_partitions([topic])).isr, 30, what="ISR shrink"
    )
    assert p in state.hosted_by(3)


def test_unreachable_cluster_is_a_clear_error():
    with pytest.raises(ClusterUnreachable, match="nothing listens at 127.0.0.1:1: every bootstrap server"):
        ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"}, timeout_s=3).read_state()


def test_a_hung_bootstrap_server_does_not_hide_the_live_ones(kafka_stack):
    import socket

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)  # the kernel accepts connections; nothing ever answers them
    servers = f"127.0.0.1:{hung.getsockname()[1]},{kafka_stack.bootstrap_servers.split(',')[0]}"
    try:
        with ClusterAdmin({"bootstrap.servers": servers}, timeout_s=5) as client:
            assert sorted(client.describe_brokers()) == [1, 2, 3, 4]
    finally:
        hung.close()


# A read that waits longer than this for the frozen broker has waited for it to be resumed:
# the facade's attempts are a third of its 30 s call timeout, the reads before this fix
# waited the whole 30 s on the one broker they had picked.
FROZEN_SAFETY_S = 25


def test_a_frozen_broker_does_not_block_cluster_wide_reads(restore_stack):
    """Broker 1 is SIGSTOPped (its sockets stay open, nothing answers). It is the only
    bootstrap server and the only broker the client is connected to, so every client picks
    it first; the reads still answer, completely for brokers 2-4, before anyone resumes it,
    and name broker 1 as the one that accepted the connection but did not answer."""
    import threading

    stack = restore_stack
    frozen = 1
    topic = unique_topic("facade-frozen")
    create_topic(stack.bootstrap_servers, topic, 2, 3, assignment={0: [2, 3, 4], 1: [frozen, 2, 3]})
    assert produce(stack.bootstrap_servers, topic, 50, size=100) == 50
    with ClusterAdmin({"bootstrap.servers": stack.node(frozen).address}, timeout_s=30) as client:
        client.describe_log_dirs([frozen])  # the client's one open connection: to the broker to freeze
        returned = threading.Event()
        resumed_by_watchdog = threading.Event()

        def watchdog():
            if not returned.wait(FROZEN_SAFETY_S):
                resumed_by_watchdog.set()
            stack.thaw(frozen)

        stack.freeze(frozen)
        guard = threading.Thread(target=watchdog, daemon=True)
        guard.start()
        try:
            state = client.read_state()
            client._kafka_python._client._controller_id = frozen  # the cached "controller" is the frozen one
            reassignments = client.list_reassignments()
        finally:
            returned.set()
            guard.join()
            stack.thaw(frozen)
        assert not resumed_by_watchdog.is_set(), "the reads waited until the frozen broker was resumed"
        not_answering = client.not_answering()
    assert not_answering == {frozen: "broker 1 accepted the connection but did not answer within 10 s"}
    if state.brokers[frozen].alive:  # listed live when read: its log dirs were asked, and it is named
        assert state.log_dir_errors == {frozen: not_answering[frozen]}
    else:  # frozen past broker.session.timeout.ms, fenced, and not listed (DescribeCluster before v2,
        # Kafka 3.9): the cluster itself says it is not live, so its log dirs are not asked
        assert state.log_dir_errors == {} and not state.brokers[frozen].alive
    assert sorted(state.brokers) == [1, 2, 3, 4] and state.quorum.leader_id >= 0
    mine = {(p.partition, p.replicas) for p in state.partitions if p.topic == topic}
    assert mine == {(0, (2, 3, 4)), (1, (frozen, 2, 3))}
    sized = sorted((r.broker_id, r.partition) for r in state.log_dirs if r.topic == topic)
    assert sized == [(2, 0), (2, 1), (3, 0), (3, 1), (4, 0)]
    assert all((t, p) != (topic, 0) for t, p in reassignments)
