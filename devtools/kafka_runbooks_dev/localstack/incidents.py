"""Something to fix on the local stack: demo topics with data, and incidents the runbooks exist for.

A newcomer cannot try a runbook on an empty, healthy cluster, and should not need Kafka's
internals to break one. These helpers do it the way it happens in production (real
topics, real records, a real connector whose task fails), through Kafka's own clients and
Connect's REST API, so every runbook then reads the incident from the cluster itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import requests

from kafka_runbooks_dev.localstack.stack import LocalStack, StackError

DEMO_TOPICS = {"demo-orders": 6, "demo-payments": 3}
FAILING_CONNECTOR = "demo-failing-sink"


@dataclass(frozen=True)
class TopicData:
    topic: str
    partitions: int
    records: int  # in the topic after the call (sum of the end offsets)


def create_demo_topics(stack: LocalStack, records: int = 2000) -> list[TopicData]:
    """The demo's topics (replication factor 3), each filled up to ``records`` records; idempotent."""
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = stack.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    missing = [t for t in DEMO_TOPICS if t not in admin.list_topics(timeout=30).topics]
    if missing:
        futures = admin.create_topics([NewTopic(t, DEMO_TOPICS[t], 3) for t in missing], request_timeout=60)
        for future in futures.values():
            future.result(timeout=60)
    _wait_for_leaders(admin, list(DEMO_TOPICS))
    result = []
    for topic, partitions in DEMO_TOPICS.items():
        _produce(bs, topic, _records(bs, topic, partitions), records)
        result.append(TopicData(topic, partitions, _records(bs, topic, partitions)))
    return result


def _wait_for_leaders(admin, topics: list[str], timeout: float = 60.0) -> None:
    """Until every partition of ``topics`` has a leader: records sent before that to a topic just
    created are failed by the client (unknown topic), not queued."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        known = admin.list_topics(timeout=30).topics
        if all(
            t in known and known[t].partitions and all(p.leader >= 0 for p in known[t].partitions.values())
            for t in topics
        ):
            return
        time.sleep(0.5)
    raise StackError(f"the partitions of {topics} have no leader after {timeout:.0f} s")


def _produce(bootstrap: str, topic: str, first: int, end: int) -> None:
    """Records ``first`` .. ``end`` - 1, each acknowledged by all in-sync replicas; a failed one is an error."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    failed: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failed.append(str(error))

    for i in range(first, end):
        value = f"{topic} record {i}".encode() * 8
        producer.produce(topic, key=f"key-{i}".encode(), value=value, on_delivery=delivered)
        producer.poll(0)
    if producer.flush(60) or failed:
        raise StackError(f"records for {topic} not acknowledged within 60 s: {failed[:1] or 'still queued'}")


def _records(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> int:
    """Sum of the partitions' end offsets, as the leaders answer it (0 for a topic just created).

    Right after CreateTopics the client's metadata can name a leader that does not know yet it
    leads (seen: NOT_LEADER_FOR_PARTITION, Unknown partition): asked again until ``timeout``."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "kstack-count", "enable.auto.commit": False}
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                return sum(
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                    for p in range(partitions)
                )
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise StackError(f"no end offsets for {topic} within {timeout:.0f} s: {exc}") from None
                time.sleep(1)
    finally:
        consumer.close()


def fail_connector(stack: LocalStack, name: str = FAILING_CONNECTOR, timeout: float = 60.0) -> dict:
    """A file sink whose task fails at start (its file's folder does not exist): a FAILED task for
    ``kafka_connect_restart`` / ``kafka_connect_autorestart``. Returns Connect's status once the task
    reads FAILED; a restart fails the same way until the file's folder exists."""
    url = stack.connect_url
    if not url:
        raise StackError("this stack has no Connect worker (KR_STACK_CONNECT=0)")
    config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "topics": next(iter(DEMO_TOPICS)),
        "file": str(stack.home / "no-such-folder" / f"{name}.txt"),
    }
    answer = requests.put(f"{url}/connectors/{name}/config", json=config, timeout=30)
    if answer.status_code not in (200, 201):
        raise StackError(f"Connect refused the connector {name}: {answer.status_code} {answer.text}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = requests.get(f"{url}/connectors/{name}/status", timeout=30)
        tasks = status.json().get("tasks", []) if status.ok else []
        if any(t.get("state") == "FAILED" for t in tasks):
            return status.json()
        time.sleep(1)
    raise StackError(f"the task of {name} did not read FAILED within {timeout:.0f} s")
