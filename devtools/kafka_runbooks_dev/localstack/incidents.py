"""Something to fix on the local stack: demo topics with data, and incidents the runbooks exist for.

A newcomer cannot try a runbook on an empty, healthy cluster, and should not need Kafka's
internals to break one. These helpers do it the way it happens in production (real
topics, real records, a real connector whose task fails), through Kafka's own clients and
Connect's REST API, so every runbook then reads the incident from the cluster itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import requests

from kafka_runbooks_dev.localstack.stack import LocalStack, StackError
from kafka_runbooks_dev.localstack.topology import BROKER

DEMO_TOPICS = {"demo-orders": 6, "demo-payments": 3}
FAILING_CONNECTOR = "demo-failing-sink"
#: Kafka's per-log-dir file of recovery points (LogManager.RECOVERY_POINT_CHECKPOINT_FILE)
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
#: segments the log-recovery incident gives its broker to recover (see docs/local-stack.md for
#: what this costs and how long the recovery then lasts on 2 cores)
RECOVERY_SEGMENTS = 4000


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


@dataclass(frozen=True)
class LogRecovery:
    broker: int
    topic: str  # one partition, its only replica on ``broker``
    segments: int  # the partition's segments on the broker's disk when it was killed
    records: int  # the partition's end offset, read from the broker just before the kill
    pid: int | None  # the broker's new process, recovering


def recovery_topic(broker: int) -> str:
    return f"demo-recovery-broker-{broker}"


def hold_in_log_recovery(stack: LocalStack, ref: str | int, segments: int = RECOVERY_SEGMENTS) -> LogRecovery:
    """A broker killed (-9) with ``segments`` log segments to recover, started again: it loads
    and recovers them before it serves, long enough to watch the restart runbook wait for it.

    Its own topic (one partition, its only replica on the broker) is given that many segments
    (``segment.ms=1`` and records 2 ms apart: a segment per record batch; tiny, so it is the
    number of segments, not bytes, that costs, as on brokers with many partitions), then the
    broker is killed and its recovery points for that topic are dropped from its
    ``recovery-point-offset-checkpoint``: as if it crashed before its next checkpoint (every
    ``log.flush.offset.checkpoint.interval.ms``, 60 s by default), which a kill -9 alone leaves
    to chance. Kafka then recovers every segment of the topic, one by one; the others keep
    their recovery points."""
    node = stack.node(ref)
    if node.role != BROKER or not stack.is_ready(node.name):
        raise StackError(f"{node.name} is not a running broker: start it first (kstack start-node)")
    topic = recovery_topic(node.node_id)
    _ensure_recovery_topic(stack.bootstrap_servers, topic, node.node_id)
    have = _fill_segments(stack, node, topic, segments)
    records = _records(stack.bootstrap_servers, topic, 1)
    stack.kill(node.name)
    try:
        for log_dir in stack.log_dirs(node):
            _forget_recovery_points(log_dir, topic)
    finally:  # never leave the broker down
        stack.start_node(node.name)
    return LogRecovery(node.node_id, topic, have, records, stack.pid(node.name))


def _ensure_recovery_topic(bootstrap: str, topic: str, broker: int) -> None:
    """The incident's topic, created once: later incidents on the broker reuse its segments."""
    from confluent_kafka.admin import AdminClient

    from kafka_runbooks_dev.helpers import create_topic

    if topic not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics:
        config = {"segment.ms": "1", "retention.ms": "-1", "min.insync.replicas": "1"}
        create_topic(bootstrap, topic, assignment={0: [broker]}, config=config)
    _wait_for_leaders(AdminClient({"bootstrap.servers": bootstrap}), [topic])


def segments_on_disk(stack: LocalStack, ref: str | int, topic: str) -> int:
    """The partition's segment files (``*.log``) in the broker's log dirs."""
    node = stack.node(ref)
    return sum(len(list((d / f"{topic}-0").glob("*.log"))) for d in stack.log_dirs(node))


def _fill_segments(stack: LocalStack, node, topic: str, segments: int, rounds: int = 5) -> int:
    """Records until the partition has ``segments`` segments on disk; how many it has then.

    With ``segment.ms=1`` the broker rolls a segment when a batch's timestamp is more than 1 ms
    past the segment's first one: one record per batch, 2 ms apart (by their timestamps, not
    by the clock), is one segment per record. Counted on disk, and again if short."""
    have = segments_on_disk(stack, node.name, topic)
    for _ in range(rounds):
        if have >= segments:
            return have
        _produce_one_per_batch(stack.bootstrap_servers, topic, segments - have)
        have = segments_on_disk(stack, node.name, topic)
    raise StackError(f"{topic} has {have} segments on {node.name}, not {segments}")


def _produce_one_per_batch(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.num.messages": 1}
    )
    failed: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failed.append(str(error))

    first_ms = int(time.time() * 1000)
    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic, b"r" * 100, partition=0, timestamp=first_ms + 2 * i, on_delivery=delivered
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) or failed:
        raise StackError(f"records for {topic} not acknowledged within 120 s: {failed[:1] or 'still queued'}")


def _forget_recovery_points(log_dir: Path, topic: str) -> None:
    """Drop ``topic``'s lines from a stopped broker's recovery-point checkpoint (format: version,
    count, then ``topic partition offset`` lines), written aside then renamed, as Kafka does."""
    path = log_dir / RECOVERY_POINT_CHECKPOINT
    lines = path.read_text().splitlines() if path.exists() else []
    if len(lines) < 2:  # none yet (Kafka creates it empty at start-up): every log recovers from 0
        return
    version, _count, *entries = lines
    kept = [line for line in entries if line.split(" ")[0] != topic]
    aside = path.with_name(path.name + ".tmp")
    aside.write_text("\n".join([version, str(len(kept)), *kept]) + "\n")
    aside.replace(path)


def watch_recovery(stack: LocalStack, ref: str | int, timeout: float = 900.0, interval: float = 1.0):
    """The broker's state as the restart runbook's probe reads it (its JMX exporter), every
    ``interval`` seconds, until it reads RUNNING (yielded last); StackError after ``timeout``."""
    from kafka_runbooks.probes import PrometheusProbe

    node = stack.node(ref)
    probe = PrometheusProbe(endpoints={node.node_id: node.metrics_url})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reading = probe.read(node.node_id)
        yield reading
        if reading.running:
            return
        time.sleep(interval)
    raise StackError(f"{node.name} is not RUNNING after {timeout:.0f} s")


def delete_recovery_topic(stack: LocalStack, broker: int, timeout: float = 60.0) -> None:
    """Deleted, and gone from the metadata the brokers answer: a next incident started while a
    broker still lists it would take the dying topic for its own."""
    from confluent_kafka.admin import AdminClient

    topic = recovery_topic(broker)
    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    if topic in admin.list_topics(timeout=30).topics:
        admin.delete_topics([topic], request_timeout=60)[topic].result(60)
    deadline = time.monotonic() + timeout
    while topic in admin.list_topics(timeout=30).topics:
        if time.monotonic() > deadline:
            raise StackError(f"{topic} is still listed {timeout:.0f} s after its deletion")
        time.sleep(0.5)
