"""``kstack topics``, ``kstack fail-connector`` and ``kstack log-recovery`` on the real local stack:
the demo's data, a Connect incident and a broker in log recovery, read back from Kafka, from
Connect's REST API and from the broker's JMX exporter, not from the command's output."""

from __future__ import annotations

import re

import requests

from kafka_runbooks.probes import RECOVERY, STARTING
from kafka_runbooks_dev.localstack.cli import main as kstack
from kafka_runbooks_dev.localstack.incidents import (
    DEMO_TOPICS,
    delete_recovery_topic,
    recovery_topic,
    segments_on_disk,
)
from tests.helpers import wait_until

#: segments the test's broker recovers: measured on 2 cores, see docs/local-stack.md
SEGMENTS = 1000


def test_kstack_topics_creates_the_demo_topics_with_their_records(local_stack, admin):
    from confluent_kafka import Consumer, TopicPartition

    assert kstack(["--home", str(local_stack.home), "topics", "--records", "300"]) == 0
    assert kstack(["--home", str(local_stack.home), "topics", "--records", "300"]) == 0  # idempotent
    consumer = Consumer({"bootstrap.servers": local_stack.bootstrap_servers, "group.id": "t-kstack"})
    try:
        for topic, partitions in DEMO_TOPICS.items():
            ends = [
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)
            ]
            assert sum(ends) == 300, (topic, ends)
    finally:
        consumer.close()
    partitions = admin.describe_partitions(list(DEMO_TOPICS))
    assert len(partitions) == sum(DEMO_TOPICS.values())
    assert {len(p.replicas) for p in partitions} == {3}


def test_kstack_fail_connector_leaves_a_failed_task_that_connect_reports(local_stack, connect):
    # `connect`: on a release whose file connectors are not served, fails naming the jar
    url = local_stack.connect_url
    name = "t-kstack-failing-sink"
    assert kstack(["--home", str(local_stack.home), "topics", "--records", "10"]) == 0
    try:
        assert kstack(["--home", str(local_stack.home), "fail-connector", "--name", name]) == 0
        status = requests.get(f"{url}/connectors/{name}/status", timeout=30).json()
        assert [t["state"] for t in status["tasks"]] == ["FAILED"], status
        assert "no-such-folder" in status["tasks"][0]["trace"], status["tasks"][0]["trace"][:500]
    finally:
        requests.delete(f"{url}/connectors/{name}", timeout=30)


def test_kstack_log_recovery_holds_the_broker_in_recovery_then_it_runs_with_its_data(
    restore_stack, admin, capsys
):
    """``kstack log-recovery`` kills a broker with thousands of segments to recover and starts it:
    the restart runbook's own probe (the broker's JMX exporter) must see it recovering (not
    RUNNING, recovery gauges counting logs or segments), then RUNNING, and its only replica of
    the incident's topic must serve every record it held before the kill. Meanwhile the Kafka
    page's live read says it is in log recovery, with what is left (issue #39 point 5)."""
    from kafka_runbooks.console import read_live
    from kafka_runbooks.console_states import BrokerStates
    from kafka_runbooks.probes import PrometheusProbe

    stack, broker = restore_stack, 4
    topic = recovery_topic(broker)
    probe = PrometheusProbe(endpoints={broker: stack.node(broker).metrics_url})
    pid_before = stack.pid(broker)
    try:
        home = str(stack.home)
        assert (
            kstack(["--home", home, "log-recovery", str(broker), "--segments", str(SEGMENTS), "--no-wait"])
            == 0
        )
        records = int(re.search(r"\((\d+) records\)", capsys.readouterr().out).group(1))
        seen = wait_until(
            lambda: _recovering(probe.read(broker)), 120, 0.2, f"broker {broker} seen recovering"
        )
        assert seen.state in (STARTING, RECOVERY) and stack.pid(broker) not in (None, pid_before), seen
        live = wait_until(
            lambda: _said_recovering(read_live(admin, BrokerStates(probe)), broker),
            60,
            0.2,
            f"the live read saying broker {broker} is in log recovery",
        )
        row = next(b for b in live["brokers"] if b["broker_id"] == broker)
        assert "segments still to recover" in row["state"] and row["broker_state"]["state"] in (
            STARTING,
            RECOVERY,
        )
        wait_until(
            lambda: probe.read(broker).running, 300, 0.5, f"broker {broker} RUNNING after its recovery"
        )
        assert segments_on_disk(stack, broker, topic) >= SEGMENTS
        assert records >= SEGMENTS and _read_back(stack.bootstrap_servers, topic) == records
    finally:
        delete_recovery_topic(stack, broker)


def _said_recovering(live, broker):
    """The live read when it counts ``broker`` in log recovery (row and tile), else None."""
    row = next((b for b in live["brokers"] if b["broker_id"] == broker), {})
    recovering = "in log recovery" in str(row.get("state")) and live["counts"].get("in_log_recovery", 0) >= 1
    return live if recovering else None


def _recovering(reading):
    """The reading when it shows log recovery with counts (never a reading without them)."""
    counts = (reading.remaining_logs or 0) + (reading.remaining_segments or 0)
    return reading if reading.recovering and reading.counts_known and counts > 0 else None


def _read_back(bootstrap: str, topic: str) -> int:
    """Every record of the topic's one partition, read from offset 0 (its end offset must match)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t-kstack-recovery"})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        read = 0
        while read < end:
            batch = consumer.consume(1000, timeout=30)
            assert batch, f"no records after offset {read} of {end}"
            assert not any(m.error() for m in batch), [m.error() for m in batch if m.error()][:1]
            read += len(batch)
        return read if read == end else -1
    finally:
        consumer.close()
