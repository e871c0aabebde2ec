"""Small helpers shared by integration and end-to-end tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

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
