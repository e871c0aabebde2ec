"""The admin facade owns every RPC and its fail-over rules: nothing else talks to kafka-python."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from kafka.errors import KafkaConnectionError, UnknownBrokerIdError

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import AdminError, ClusterUnreachable

ROOT = Path(__file__).resolve().parents[3]


class FakeKafkaPython:
    """Stands in for the private kafka-python client: counts forgotten controllers."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.forgotten = 0
        self.asked = []

    def forget_controller(self):
        self.forgotten += 1

    def alter_partition_reassignments(self, request):
        self.asked.append(dict(request))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict.fromkeys(request)


def _admin(client, monkeypatch) -> ClusterAdmin:
    monkeypatch.setattr("time.sleep", lambda s: None)
    admin = ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"})
    # the private module's functions reach kafka-python through ``client._client``
    admin.__dict__["_kafka_python"] = type(
        "Client", (), {"_client": client, "forget_controller": lambda self: client.forget_controller()}
    )()
    return admin


def test_a_reorder_fails_over_when_the_cached_controller_broker_is_gone(monkeypatch):
    client = FakeKafkaPython([UnknownBrokerIdError(3), "ok"])
    admin = _admin(client, monkeypatch)
    assert admin.reorder_replicas({("t", 0): [2, 1]}) == {("t", 0): None}
    assert client.forgotten == 1 and len(client.asked) == 2


def test_a_reorder_gives_up_after_four_attempts_with_the_last_error(monkeypatch):
    client = FakeKafkaPython([KafkaConnectionError("refused")] * 4)
    admin = _admin(client, monkeypatch)
    with pytest.raises(ClusterUnreachable, match="KafkaConnectionError: .*refused") as raised:
        admin.reorder_replicas({("t", 0): [2, 1]})
    assert isinstance(raised.value.__cause__, KafkaConnectionError)
    assert client.forgotten == 4


def test_submitting_a_reassignment_is_tried_once_and_forgets_the_controller(monkeypatch):
    """A submission is never sent twice by the facade: the runbook reads back what happened."""
    client = FakeKafkaPython([UnknownBrokerIdError(3), "ok"])
    admin = _admin(client, monkeypatch)
    with pytest.raises(
        AdminError, match="AlterPartitionReassignments on 127.0.0.1:1 failed: UnknownBrokerIdError"
    ):
        admin.alter_partition_reassignments({("t", 0): [1, 2, 3]})
    assert client.forgotten == 1 and len(client.asked) == 1


def test_a_read_retries_retriable_errors_then_is_cluster_unreachable(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    admin = ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"})
    calls = []

    def describe(topics):
        calls.append(topics)
        raise KafkaConnectionError("refused")

    admin.__dict__["_kafka_python"] = type("Client", (), {"describe_partitions": staticmethod(describe)})()
    with pytest.raises(ClusterUnreachable, match="DescribeTopicPartitions on 127.0.0.1:1 failed after 4"):
        admin.describe_topic_partitions(["t"])
    assert len(calls) == 4


def test_only_the_facade_imports_the_kafka_python_module():
    offenders = []
    for folder in ("include", "plugins", "dags", "devtools", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            if (
                path.name in ("admin.py", "admin_configs.py", "admin_reads.py", "_kafka_python.py")
                and path.parent.name == "kafka_runbooks"
            ):
                continue
            text = path.read_text()
            for node in ast.walk(ast.parse(text)):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                if any("_kafka_python" in n or "kafka_python_gaps" in n for n in names):
                    offenders.append(str(path.relative_to(ROOT)))
            if "._kafka_python" in text or ".gaps." in text or "_gap_call" in text:
                offenders.append(str(path.relative_to(ROOT)))
    assert sorted(set(offenders)) == []
