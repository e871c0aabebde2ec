"""The admin facade reads what the runbooks decide on, from the real cluster."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from kafka_runbooks.admin import ClusterAdmin, ClusterUnreachable
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
    with pytest.raises(ClusterUnreachable, match="no broker of 127.0.0.1:1 answered"):
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
