"""The runbooks' ACLs (issue #38, 2): one table, checked up front against the authorizer's own
answer, and the refusals the brokers send read as refusals, never as empty answers.

The fakes answer as Kafka does: KIP-430 authorized operations as a bit field (bit n = AclOperation
n), INT32_MIN when not asked; DescribeLogDirs' top-level error code (v3+) with no results;
DescribeConfigs' per-resource error code with no configs; DescribeTopicPartitions' per-topic code.
On real brokers: tests/integration/test_secured_stack.py.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from kafka_runbooks import acl_table, acls
from kafka_runbooks._kafka_python import _operations
from kafka_runbooks.acl_table import CLUSTER, TOPIC, Acl
from kafka_runbooks.errors import NotAuthorized, SafetyRefusal
from tests.acl_fakes import granted, no_authorizer

ROOT = Path(__file__).resolve().parents[3]
TABLE_ACLS = [
    Acl(CLUSTER, "ALTER"),
    Acl(CLUSTER, "ALTER_CONFIGS"),
    Acl(CLUSTER, "DESCRIBE"),
    Acl(CLUSTER, "DESCRIBE_CONFIGS"),
    Acl(TOPIC, "ALTER_CONFIGS"),
    Acl(TOPIC, "DESCRIBE"),
    Acl(TOPIC, "DESCRIBE_CONFIGS"),
]


class Admin:
    """The facade's authorized-operations read, answering ``answer(topics)``; every call kept."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def authorized_operations(self, topics=None):
        self.calls.append(("authorized_operations", topics))
        return self.answer(topics)


def _dag_ids() -> set[str]:
    ids = set()
    for path in (ROOT / "dags").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "dag_id"
                and isinstance(node.value, ast.Constant)
            ):
                ids.add(node.value.value)
    return ids


def test_the_table_has_a_row_for_every_runbook_and_knows_every_request_it_names():
    assert set(acl_table.RUNBOOK_REQUESTS) == _dag_ids()
    named = {r for requests in acl_table.RUNBOOK_REQUESTS.values() for r in requests}
    assert named <= set(acl_table.REQUESTS)
    assert acl_table.all_needed() == TABLE_ACLS
    heal = acl_table.needs("kafka_failed_broker_reassignment")
    assert heal[Acl(CLUSTER, "ALTER")] == ("AlterPartitionReassignments", "ElectLeaders")
    assert heal[Acl(TOPIC, "ALTER_CONFIGS")] == ("IncrementalAlterConfigs",)
    assert acl_table.needs("kafka_connect_restart") == {}


def test_a_principal_with_every_acl_passes_with_a_decision_record(caplog):
    admin = Admin(lambda topics: granted(TABLE_ACLS, topics or ["t"]))
    with caplog.at_level(logging.INFO):
        acls.require(admin, "kafka_failed_broker_reassignment", subject="kafka_default")
    assert admin.calls == [("authorized_operations", None)]
    assert "DECISION acl check [kafka_default]: granted" in caplog.text


def test_no_authorizer_and_a_super_user_pass():
    acls.require(Admin(lambda topics: no_authorizer(topics, ["t"])), "kafka_rebalance")


@pytest.mark.parametrize("lacking", TABLE_ACLS, ids=str)
def test_each_missing_acl_is_refused_naming_the_operation_and_the_resource(lacking, caplog):
    """The heal needs all seven: without any one (its own ACL and those that imply it: ALTER gives
    DESCRIBE, ALTER_CONFIGS gives DESCRIBE_CONFIGS), the check refuses before anything else is sent."""
    held = [a for a in TABLE_ACLS if a not in acl_table.granting(lacking, TABLE_ACLS)]
    admin = Admin(lambda topics: granted(held, topics or ["t-0"]))
    with caplog.at_level(logging.INFO), pytest.raises(NotAuthorized) as raised:
        acls.require(admin, "kafka_failed_broker_reassignment", topics=["t-0"])
    refusal = raised.value
    assert isinstance(refusal, SafetyRefusal)
    where = "the cluster" if lacking.resource == CLUSTER else "TOPIC t-0"
    assert f"lacks {lacking.operation} on {where}" in str(
        refusal
    ) or f"; {lacking.operation} on {where}" in str(refusal), str(refusal)
    assert str(refusal).startswith("kafka_failed_broker_reassignment refused before any write")
    assert admin.calls == [("authorized_operations", ["t-0"])]
    assert "DECISION acl check [kafka_failed_broker_reassignment]: refuse" in caplog.text


def test_an_implied_operation_needs_no_acl_of_its_own():
    """A principal with ALTER_CONFIGS on the topics may describe their configs (Kafka implies it):
    removing TOPIC DESCRIBE_CONFIGS alone is refused nothing."""
    held = [a for a in TABLE_ACLS if a != Acl(TOPIC, "DESCRIBE_CONFIGS")]
    acls.require(Admin(lambda topics: granted(held, topics or ["t"])), "kafka_failed_broker_reassignment")


def test_a_principal_that_may_describe_no_topic_is_refused_describe_on_every_topic():
    """Metadata hides topics the principal may not describe: seeing none is not 'no topics'."""
    held = [a for a in TABLE_ACLS if a.resource == CLUSTER]
    with pytest.raises(NotAuthorized, match=r"lacks DESCRIBE on every topic \(TOPIC '\*'\)"):
        acls.require(Admin(lambda topics: granted(held, [])), "kafka_cluster_health")


def test_a_broker_that_does_not_say_its_cluster_operations_is_not_refused_for_them():
    """No KIP-430 answer (None): the cluster's ACLs are not judged; the brokers refuse if need be."""
    answer = lambda topics: acls.AuthorizedOperations(None, {}, True)  # noqa: E731
    acls.require(Admin(answer), "kafka_unclean_recovery")


def test_operations_are_read_from_the_wire_bit_field():
    # ALTER (7), DESCRIBE (8), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11)
    assert _operations((1 << 7) | (1 << 8) | (1 << 10) | (1 << 11)) == {
        "ALTER",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
    }
    assert _operations(-(2**31)) is None and _operations(None) is None
    assert _operations(0) == frozenset()


def test_the_answers_are_read_as_kafka_python_gives_them():
    """kafka-python 3.0.12's DescribeCluster and Metadata answers (shapes copied from a real broker
    with the StandardAuthorizer): the operations are under ``authorized_operations``, as names."""
    from kafka_runbooks._kafka_python import KafkaPythonClient

    class Client:
        def describe_cluster(self):
            return {"cluster_id": "c", "authorized_operations": ["DESCRIBE", "ALTER"]}

        def describe_topics(self, topics):
            return [
                {"error_code": 0, "name": "t", "authorized_operations": ["DESCRIBE", "ALTER_CONFIGS"]},
                {"error_code": 29, "name": "hidden", "authorized_operations": None},
                {"error_code": 3, "name": "gone", "authorized_operations": ["DESCRIBE"]},
            ]

    kp = KafkaPythonClient.__new__(KafkaPythonClient)
    kp._client = Client()
    assert kp.cluster_authorized_operations() == {"DESCRIBE", "ALTER"}
    assert kp.topic_authorized_operations(None) == {"t": {"DESCRIBE", "ALTER_CONFIGS"}, "hidden": None}
