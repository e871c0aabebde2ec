"""Small helpers shared by integration tests, end-to-end tests and benchmarks."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from kafka_runbooks.admin import ClusterAdmin

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float = 60.0, interval: float = 0.5, what: str = "") -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or check}; last value: {last!r}")


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 3,
    replication_factor: int = 3,
    assignment: dict[int, list[int]] | None = None,
    config: dict[str, str] | None = None,
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if assignment:
        # confluent-kafka 2.16 rejects every NewTopic with a replica_assignment
        # ("default partition count and a replica assignment are mutually exclusive").
        from kafka.admin import KafkaAdminClient
        from kafka.admin import NewTopic as KpNewTopic

        kp = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
        try:
            kp.create_topics(
                [KpNewTopic(name, -1, -1, replica_assignments=assignment, topic_configs=config or {})]
            )
        finally:
            kp.close()
    else:
        topic = NewTopic(name, partitions, replication_factor, config=config or {})
        admin.create_topics([topic])[name].result(30)
    wait_until(lambda: name in admin.list_topics(timeout=10).topics, 30, what=f"topic {name}")


def produce(bootstrap: str, topic: str, count: int, partition: int | None = None, size: int = 100) -> int:
    """Produce ``count`` messages with acks=all; returns how many were acknowledged."""
    from confluent_kafka import Producer

    acked = 0

    def on_delivery(err, _msg):
        nonlocal acked
        if err is None:
            acked += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    payload = b"x" * size
    for i in range(count):
        kwargs = {"partition": partition} if partition is not None else {}
        producer.produce(topic, payload, key=str(i).encode(), on_delivery=on_delivery, **kwargs)
        producer.poll(0)
    producer.flush(60)
    return acked


def cluster_healthy(admin: ClusterAdmin) -> bool:
    """Nothing offline or under-replicated and every broker available."""
    state = admin.read_state(include_log_dirs=False)
    return (
        not state.offline()
        and not state.under_replicated()
        and all(b.available for b in state.brokers.values())
    )


def restore_cluster(stack, admin: ClusterAdmin, topics: list[str], timeout: float = 180) -> None:
    """Delete the scenario topics, restart whatever is down, wait for a healthy cluster.

    Topics go first: a broker that was killed with thousands of their partitions would
    otherwise have to recover all of those logs (in the stack's 512 MiB heap) on restart.
    """
    from confluent_kafka.admin import AdminClient

    if topics:
        client = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
        for future in client.delete_topics(topics, operation_timeout=60).values():
            with contextlib.suppress(Exception):  # already gone
                future.result(90)
    for status in stack.status():
        if not status.running:
            stack.start_node(status.name)
    stack.wait_ready([s.name for s in stack.status()], timeout)
    wait_until(lambda: cluster_healthy(admin), timeout, 1, "a fully replicated cluster after the scenario")
