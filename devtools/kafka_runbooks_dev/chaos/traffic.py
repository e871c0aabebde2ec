"""An acks=all producer that runs through the whole schedule, and the consumer that checks it.

Every record carries its own sequence number as key and value; the producer keeps what the
cluster acknowledged (partition, offset) per key. Afterwards a consumer reads every partition
from its start to its end offset: an acknowledged key it does not find (or finds at another
offset with another key in its place) is a lost acknowledged record. Idempotence is on, so a
retried send never doubles a key; a send that failed was never acknowledged and is not counted.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class Acked:
    """What the cluster acknowledged (key -> (partition, offset)) and what failed."""

    records: dict[str, tuple[int, int]] = field(default_factory=dict)
    failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class Traffic(threading.Thread):
    """Produce ``rate_per_s`` records a second to ``topic`` with acks=all until :meth:`stop`."""

    def __init__(self, bootstrap: str, topic: str, rate_per_s: float = 40.0) -> None:
        super().__init__(daemon=True, name=f"chaos-traffic-{topic}")
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate_per_s
        self.acked = Acked()
        self._done = threading.Event()
        self._lock = threading.Lock()

    def _on_delivery(self, err, msg) -> None:
        with self._lock:
            if err is None:
                self.acked.records[msg.key().decode()] = (msg.partition(), msg.offset())
            else:
                self.acked.failed += 1
                name = err.name() if hasattr(err, "name") else str(err)
                self.acked.errors[name] = self.acked.errors.get(name, 0) + 1

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 60000,
                "linger.ms": 5,
            }
        )
        seq = 0
        while not self._done.is_set():
            key = str(seq).encode()
            try:
                producer.produce(self.topic, key, key=key, on_delivery=self._on_delivery)
                seq += 1
            except BufferError:
                pass
            producer.poll(1.0 / self.rate)
        producer.flush(90)

    def stop(self) -> Acked:
        """Stop producing, wait for every outstanding delivery report, return what was acknowledged."""
        self._done.set()
        self.join(120)
        return self.acked


def lost_records(
    bootstrap: str, topic: str, acked: Acked, timeout_s: float = 120.0
) -> dict[str, tuple[int, int]]:
    """Acknowledged keys a full read of ``topic`` does not find at their offset: key -> (partition, offset).

    An acknowledgement without an offset (librdkafka's delivery report of an idempotent retry the
    broker answered as a duplicate: the record is in the log, its offset not told; seen in the
    campaign as ``(3, None)``) is found by its key anywhere in its partition."""
    seen = read_all(bootstrap, topic, timeout_s)
    keys_in = {}
    for (partition, _), key in seen.items():
        keys_in.setdefault(partition, set()).add(key)
    return {
        k: where
        for k, where in acked.records.items()
        if (
            seen.get(where) != k
            if where[1] is not None and where[1] >= 0
            else k not in keys_in.get(where[0], ())
        )
    }


def read_all(bootstrap: str, topic: str, timeout_s: float) -> dict[tuple[int, int], str]:
    """Every record of ``topic``, (partition, offset) -> key, up to each partition's end offset now."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-verify-{time.time_ns()}",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        seen: dict[tuple[int, int], str] = {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(_behind(seen, p, end) for p, end in ends.items()):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen[(msg.partition(), msg.offset())] = msg.key().decode()
        return seen
    finally:
        consumer.close()


def _behind(seen: dict[tuple[int, int], str], partition: int, end: int) -> bool:
    return end > 0 and (partition, end - 1) not in seen


def produce_recorded(
    bootstrap: str, topic: str, count: int, partition: int, prefix: str
) -> dict[str, tuple[int, int]]:
    """``count`` records with acks=all, keys ``<prefix>-<n>``; what the cluster acknowledged, key ->
    (partition, offset): a scenario's records written before the schedule count as acknowledged too."""
    from confluent_kafka import Producer

    acked: dict[str, tuple[int, int]] = {}

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[msg.key().decode()] = (msg.partition(), msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for n in range(count):
        key = f"{prefix}-{n}".encode()
        producer.produce(topic, key, key=key, partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(60)
    return acked
