"""``kstack topics`` and ``kstack fail-connector`` on the real local stack: the demo's data and a
Connect incident, read back from Kafka and from Connect's REST API, not from the command's output."""

from __future__ import annotations

import requests

from kafka_runbooks_dev.localstack.cli import main as kstack
from kafka_runbooks_dev.localstack.incidents import DEMO_TOPICS


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


def test_kstack_fail_connector_leaves_a_failed_task_that_connect_reports(local_stack):
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
