"""Helpers for the Kafka Connect tests: connectors that fail for a reason outside them,
and the worker's own record of task restarts (its status topic)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from kafka_runbooks.connect.client import ConnectClient, ConnectError, ConnectorStatus
from kafka_runbooks_dev.localstack.node_config import CONNECT_STATUS_TOPIC as STATUS_TOPIC

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
CONFIG_TOPIC = "connect-configs"  # the local stack's config.storage.topic
SETTLE_S = 180.0
"""How long a test waits for the worker to act on a connector. A new connector was still without a
status after 60 s once in make test (CI, Dec 3: both lanes busy, the machine at load ~20), with no
error to show for it: the bound is for a worker slowed by load, the wait itself is on its status."""
LOG_TAIL_LINES = 60


class WorkerClient(ConnectClient):
    """The tests' client of the stack's Connect worker: a wait that times out says what the worker
    logged meanwhile, so a slow rebalance and a broken connector can be told apart afterwards."""

    def __init__(self, url: str, log_file: Path | None, **kwargs) -> None:
        super().__init__(url, **kwargs)
        self.log_file = log_file
        self.created: list[str] = []

    def wait_for(self, name, predicate, timeout_s: float = SETTLE_S, interval_s: float = 0.5):
        """ConnectClient.wait_for, bounded by SETTLE_S unless told; its timeout carries the log tail."""
        try:
            return super().wait_for(name, predicate, timeout_s, interval_s)
        except ConnectError as exc:
            raise ConnectError(f"{exc}\n{self._log_tail()}") from exc

    def _log_tail(self) -> str:
        if self.log_file is None or not self.log_file.exists():
            return "(no worker log here: an external Connect cluster)"
        lines = self.log_file.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        return f"--- the worker's log tail ({self.log_file}):\n" + "\n".join(lines)


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def file_sink(client: ConnectClient, name: str, target: Path, topic: str, tasks: int = 1) -> None:
    """A file sink; its tasks FAIL at start while ``target``'s folder does not exist."""
    client.put_connector(
        name, {"connector.class": SINK, "tasks.max": str(tasks), "topics": topic, "file": str(target)}
    )


def create_by_post(client: ConnectClient, name: str, config: dict[str, str]) -> None:
    """Create with ``POST /connectors`` (the name in the body): the only way to create a
    connector whose name Connect's per-connector paths cannot carry (``/``, ``%``)."""
    resp = client._request("POST", "/connectors", json={"name": name, "config": config})
    assert resp.status_code == 201, resp.text


def refuses_ambiguous_paths(client: ConnectClient, name: str) -> bool:
    """Whether this worker's REST server refuses ``name`` in a path (``400 Ambiguous URI path ...``:
    Jetty 12, Connect 4.x); Connect 3.9's Jetty 9.4 serves ``%2F`` and ``%25`` like any other name.
    Asked of the worker itself, never inferred from its version."""
    from urllib.parse import quote

    resp = client._request("GET", f"/connectors/{quote(name, safe='')}/status")
    return resp.status_code == 400 and "Ambiguous URI" in resp.text


def remove_by_tombstones(bootstrap: str, name: str) -> None:
    """Delete a connector the way ``DELETE /connectors/{name}`` does inside Connect: null
    values for ``connector-<name>`` and ``target-state-<name>`` in the config topic. The
    way out for a name the REST API cannot address (seen to work on Connect 4.3.1)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for key in (f"connector-{name}", f"target-state-{name}"):
        producer.produce(CONFIG_TOPIC, key=key.encode(), value=None)
    assert producer.flush(30) == 0, "tombstones not delivered"


def refusing_source(client: ConnectClient, name: str, topic: str, source_file: Path) -> None:
    """A file source whose connector instance cannot start: its own offsets topic needs an
    admin client, and the admin override's bootstrap is not a URL. Creation passes
    validation; every start throws, so the old restart call answers
    ``500 Failed to start connector`` (seen on Connect 4.3.1)."""
    client.put_connector(
        name,
        {
            "connector.class": SOURCE,
            "tasks.max": "1",
            "topic": topic,
            "file": str(source_file),
            "offsets.storage.topic": f"{name}-offsets",
            "admin.override.bootstrap.servers": "not-a-url",
        },
    )


def listed(client: ConnectClient, name: str) -> ConnectorStatus | None:
    """The connector as the listing call shows it (the only view of an unaddressable name)."""
    return client.list_connectors().get(name)


def connector_failed(status: ConnectorStatus) -> bool:
    return status.state == "FAILED"


def task_failed(status: ConnectorStatus) -> bool:
    return bool(status.tasks) and all(t.state == "FAILED" for t in status.tasks)


def all_running(tasks: int):
    def check(status: ConnectorStatus) -> bool:
        return (
            status.state == "RUNNING"
            and len(status.tasks) == tasks
            and all(t.state == "RUNNING" for t in status.tasks)
        )

    return check


def status_records(bootstrap: str, key: str) -> list[dict]:
    """Every record the worker wrote to its status topic under ``key``
    (e.g. ``status-task-<connector>-<id>``), oldest first. A task restart writes
    UNASSIGNED then RUNNING (seen on Connect 4.3.1)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kr-test-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    try:
        parts = consumer.list_topics(STATUS_TOPIC, timeout=10).topics[STATUS_TOPIC].partitions
        ends = {}
        for p in parts:
            lo, hi = consumer.get_watermark_offsets(TopicPartition(STATUS_TOPIC, p), timeout=10)
            if hi > lo:
                ends[p] = (lo, hi)
        consumer.assign([TopicPartition(STATUS_TOPIC, p, lo) for p, (lo, _) in ends.items()])
        pending = {p for p in ends}
        out = []
        while pending:
            msg = consumer.poll(10)
            if msg is None:
                raise AssertionError(f"status topic: no record within 10 s, partitions left {pending}")
            if msg.error():
                continue
            if msg.key() and msg.key().decode() == key and msg.value():
                out.append(json.loads(msg.value()))
            if msg.offset() >= ends[msg.partition()][1] - 1:
                pending.discard(msg.partition())
        return out
    finally:
        consumer.close()
