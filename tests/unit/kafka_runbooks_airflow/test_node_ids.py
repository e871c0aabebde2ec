"""Unknown node ids are refused in the run's first task with what the cluster has (issue #39 point 3):
once a restart's ``node_ids`` or a controller replacement's ``remove_voters`` naming no node of the
cluster was accepted by the form and refused 10-18 s later, after the lease."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks import decisions
from kafka_runbooks.model import Quorum, QuorumMember
from kafka_runbooks_airflow.hooks import kafka_admin
from kafka_runbooks_airflow.inputs import refuse_unknown_node_ids


def _member(node: int) -> QuorumMember:
    return QuorumMember(node, 10, 1, 1)


class Cluster:
    """DescribeQuorum, DescribeCluster and the partitions' replicas as the admin facade answers them."""

    def __init__(self, replicas=()):
        self.reads: list[str] = []
        self.replicas = replicas

    def describe_quorum(self):
        self.reads.append("quorum")
        return Quorum(9001, 3, 10, tuple(map(_member, (9001, 9002, 9003))), tuple(map(_member, (1, 2))))

    def describe_brokers(self):
        self.reads.append("brokers")
        return {1: None, 2: None}

    def describe_partitions(self):
        self.reads.append("partitions")
        return [SimpleNamespace(replicas=list(r)) for r in self.replicas]

    def close(self):
        self.reads.append("closed")


@pytest.fixture
def cluster(monkeypatch):
    found = Cluster(replicas=[(1, 4)])  # broker 4 is down and unlisted, a replica still names it
    monkeypatch.setattr(kafka_admin, "KafkaAdminHook", lambda kafka_config_id: SimpleNamespace(admin=found))
    return found


def test_a_node_id_the_cluster_has_nowhere_is_refused_with_the_ids_it_has(cluster):
    with pytest.raises(AirflowFailException) as refused:
        refuse_unknown_node_ids("kafka_default", "remove_voters", [9, 9003], "kafka_runbooks.test")
    message = str(refused.value)
    assert "remove_voters: node id(s) [9] the cluster does not have" in message
    assert "its voters: [9001, 9002, 9003]" in message and "other nodes: [1, 2, 4]" in message
    refusal = [r for r in decisions.made() if r.decision.startswith("refuse")]
    assert refusal and "[9]" in refusal[-1].reason, "the refusal is the run's decision record"
    assert cluster.reads[-1] == "closed"


def test_known_ids_pass_and_nothing_named_reads_nothing(cluster):
    refuse_unknown_node_ids("kafka_default", "node_ids", [1, 9002], "kafka_runbooks.test")
    refuse_unknown_node_ids("kafka_default", "node_ids", [4], "kafka_runbooks.test")  # down, in a replica
    reads = list(cluster.reads)
    refuse_unknown_node_ids("kafka_default", "node_ids", None, "kafka_runbooks.test")
    assert cluster.reads == reads
