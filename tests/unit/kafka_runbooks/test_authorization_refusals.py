"""Refusals by the brokers' authorizer are refusals, never empty answers (issue #38, 2).

kafka-python drops some answers' error codes: DescribeLogDirs' top-level code (v3+: a principal
without DESCRIBE on the cluster gets CLUSTER_AUTHORIZATION_FAILED and no results, read as a broker
with no log dirs), DescribeConfigs' per-resource code (a refused broker or topic read as one
without configs). DescribeTopicPartitions' per-topic TOPIC_AUTHORIZATION_FAILED was read as a
topic deleted since it was listed. The fakes answer as Kafka and kafka-python do (the public
methods drop the codes, the connection manager hands back the raw answers); each refusal leaves
the facade as ``NotAuthorized`` naming the request and the operation it needs.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kafka.admin import KafkaAdminClient

from kafka_runbooks import errors
from kafka_runbooks._kafka_python import KafkaPythonClient
from kafka_runbooks.admin import ClusterAdmin

REFUSED = getattr(errors, "NotAuthorized", errors.KafkaRunbookError)


class Manager:
    """kafka-python's connection manager: ``send`` answers with ``answer(request, node_id)``."""

    def __init__(self, answer):
        self.answer, self.sent = answer, []

    async def send(self, request, node_id=None, request_timeout_ms=None):
        self.sent.append((type(request).__name__, node_id))
        return self.answer(request, node_id)

    def run(self, fn, *args):
        return asyncio.run(fn(*args))


def _admin_over(kafka_python_admin) -> ClusterAdmin:
    client = KafkaPythonClient.__new__(KafkaPythonClient)
    client._client, client.suspects = kafka_python_admin, {}
    admin = ClusterAdmin({"bootstrap.servers": "b:9092"})
    admin.__dict__["_kafka_python"] = client
    return admin


def test_describe_log_dirs_refused_is_not_authorized_not_a_broker_without_dirs():
    """v3+ answers a principal without DESCRIBE on the cluster with CLUSTER_AUTHORIZATION_FAILED and no
    results; kafka-python's describe_log_dirs drops the code, and the dirs read as none."""
    manager = Manager(lambda request, node: SimpleNamespace(error_code=31, results=[]))
    # kafka-python's own describe_log_dirs: the results only, the code dropped
    kafka_python = SimpleNamespace(
        _manager=manager, describe_log_dirs=lambda brokers: [{"broker": brokers[0], "log_dirs": []}]
    )
    admin = _admin_over(kafka_python)
    with pytest.raises(
        REFUSED, match="DescribeLogDirs on b:9092 refused: the principal lacks DESCRIBE on the cluster"
    ):
        admin.describe_log_dir_states([1, 2])
    assert manager.sent == [("DescribeLogDirsRequest", 1)]  # the first refusal ends it


def test_describe_configs_refused_names_the_broker_and_the_operation():
    """A refused resource comes back with its error code and no configs (kafka-python drops the code)."""

    def answer(request, node):
        return SimpleNamespace(
            results=[SimpleNamespace(error_code=31, resource_type=4, resource_name=str(node), configs=[])]
        )

    def describe_configs(resources, config_filter="modified"):  # kafka-python's: the code dropped
        return {"broker": {r.name: {} for r in resources}}

    fake = SimpleNamespace(
        describe_configs=describe_configs,
        _manager=Manager(answer),
        _group_config_resources=KafkaAdminClient._group_config_resources,
        _describe_configs_request=KafkaAdminClient._describe_configs_request,
        _describe_configs_process_responses=KafkaAdminClient._describe_configs_process_responses,
    )
    fake._manager.cluster = SimpleNamespace(broker_metadata=lambda b: object())
    admin = _admin_over(fake)
    with pytest.raises(REFUSED) as raised:
        admin.broker_configs([2], ["broker.session.timeout.ms"])
    assert str(raised.value).startswith(
        "DescribeConfigs on broker 2 refused: the principal lacks DESCRIBE_CONFIGS on the cluster"
    )


def test_a_topic_refused_by_describe_topic_partitions_is_not_read_as_deleted():
    def describe_topic_partitions(topics, response_partition_limit, cursor):
        return {"topics": [{"name": "t", "error_code": 29, "partitions": []}], "next_cursor": None}

    admin = _admin_over(SimpleNamespace(describe_topic_partitions=describe_topic_partitions))
    with pytest.raises(REFUSED, match="lacks DESCRIBE on the topic"):
        admin.describe_topic_partitions(["t"])


def test_a_topic_whose_configs_are_refused_is_a_refusal_not_a_topic_without_min_isr():
    """DescribeConfigs of a topic the principal may not DESCRIBE_CONFIGS: error 29 for that resource."""

    def answer(request, node):
        return SimpleNamespace(
            results=[SimpleNamespace(error_code=29, resource_type=2, resource_name="t", configs=[])]
        )

    def describe_configs(resources, config_filter="modified"):  # kafka-python's: the code dropped
        return {"topic": {r.name: {} for r in resources}}

    fake = SimpleNamespace(
        describe_configs=describe_configs,
        _manager=Manager(answer),
        _group_config_resources=KafkaAdminClient._group_config_resources,
        _describe_configs_request=KafkaAdminClient._describe_configs_request,
        _describe_configs_process_responses=KafkaAdminClient._describe_configs_process_responses,
    )
    admin = _admin_over(fake)
    with pytest.raises(
        REFUSED, match="DescribeConfigs on b:9092 refused: the principal lacks DESCRIBE_CONFIGS on the topic"
    ):
        admin.min_insync_replicas(["t"])
