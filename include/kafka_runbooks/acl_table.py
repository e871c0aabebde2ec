"""The ACLs the runbooks need, as data: one table for the check, the error messages and the docs.

Two facts make it: which ACL each request the runbooks send needs on a cluster with an
authorizer (:data:`REQUESTS`, as Kafka's brokers authorize them), and which requests each
runbook sends (:data:`RUNBOOK_REQUESTS`). A runbook's ACLs are the union over its requests
(:func:`needs`). ``kafka_runbooks.acls`` checks them up front, ``errors.NotAuthorized`` names
the one a refused request lacked (:func:`operation_for`), the local stack's secured mode grants
exactly :func:`all_needed` to its ``runbooks`` principal, and ``tests/unit/docs`` holds
docs/production.md's list equal to :func:`needs`. No imports: ``errors`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

CLUSTER = "CLUSTER"
TOPIC = "TOPIC"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name in Kafka's ACLs
EVERY_TOPIC = "*"  # LITERAL '*': every topic, the runbooks read and move any of them


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW ACL of the runbooks' principal: an operation on the cluster or on every topic."""

    resource: str  # CLUSTER or TOPIC
    operation: str  # Kafka's AclOperation name: DESCRIBE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS

    @property
    def resource_name(self) -> str:
        """The resource's name in the ACL (the cluster's fixed name, or ``*`` for every topic)."""
        return CLUSTER_NAME if self.resource == CLUSTER else EVERY_TOPIC

    def __str__(self) -> str:
        where = "the cluster" if self.resource == CLUSTER else "every topic (TOPIC '*')"
        return f"{self.operation} on {where}"


# Request -> {resource type: operation}: what the brokers (KafkaApis) check for each request the
# runbooks send. A request over both kinds (config reads and writes on BROKER and TOPIC resources)
# needs both. ApiVersions and a Metadata request for no topic need nothing.
REQUESTS: dict[str, dict[str, str]] = {
    # a topic without DESCRIBE is left out of the answer: the runbooks would not see it at all
    "Metadata": {TOPIC: "DESCRIBE"},
    # the brokers need nothing; the cluster's authorized operations (what the check reads) need DESCRIBE
    "DescribeCluster": {CLUSTER: "DESCRIBE"},
    "DescribeTopicPartitions": {TOPIC: "DESCRIBE"},
    "DescribeConfigs": {TOPIC: "DESCRIBE_CONFIGS", CLUSTER: "DESCRIBE_CONFIGS"},
    "DescribeQuorum": {CLUSTER: "DESCRIBE"},
    "DescribeLogDirs": {CLUSTER: "DESCRIBE"},
    "ListPartitionReassignments": {CLUSTER: "DESCRIBE"},
    "ListOffsets": {TOPIC: "DESCRIBE"},
    "AlterPartitionReassignments": {CLUSTER: "ALTER"},
    "ElectLeaders": {CLUSTER: "ALTER"},
    "IncrementalAlterConfigs": {TOPIC: "ALTER_CONFIGS", CLUSTER: "ALTER_CONFIGS"},
    "AddRaftVoter": {CLUSTER: "ALTER"},
    "RemoveRaftVoter": {CLUSTER: "ALTER"},
}

# what every runbook that reads the cluster's state sends (ClusterAdmin.read_state and the
# evidence room's settings: topics' min.insync.replicas, brokers' session and quorum timeouts)
READS = (
    "Metadata",
    "DescribeCluster",
    "DescribeTopicPartitions",
    "DescribeConfigs",
    "DescribeQuorum",
    "DescribeLogDirs",
)
_REASSIGNING = (*READS, "ListPartitionReassignments", "AlterPartitionReassignments", "ElectLeaders")

RUNBOOK_REQUESTS: dict[str, tuple[str, ...]] = {
    "kafka_cluster_health": (*READS, "ListPartitionReassignments"),
    "kafka_broker_restart": (*READS, "ListPartitionReassignments"),
    "kafka_unclean_recovery": (*READS, "ListOffsets", "AlterPartitionReassignments", "ElectLeaders"),
    "kafka_failed_broker_sweep": READS,
    "kafka_failed_broker_reassignment": (*_REASSIGNING, "IncrementalAlterConfigs"),
    "kafka_broker_decommission": (*_REASSIGNING, "IncrementalAlterConfigs"),
    "kafka_rebalance": (*_REASSIGNING, "IncrementalAlterConfigs"),
    "kafka_log_dir_failure": (*_REASSIGNING, "IncrementalAlterConfigs"),
    "kafka_reassignment_stop": (
        *READS,
        "ListPartitionReassignments",
        "AlterPartitionReassignments",
        "IncrementalAlterConfigs",
    ),
    "kafka_metadata_error_sweep": ("DescribeCluster", "DescribeQuorum"),
    "kafka_controller_replace": (*READS, "AddRaftVoter", "RemoveRaftVoter"),
    # Kafka Connect's REST API only: no Kafka ACL
    "kafka_connect_autorestart": (),
    "kafka_connect_restart": (),
    "kafka_alert_intake": (),  # reads only Airflow: the sweeps it starts send their own requests
}


# Kafka's authorizers imply some operations from others, on any resource (AclAuthorizer and
# StandardAuthorizer alike): an ACL for one of these grants the operation too, and removing the
# operation's own ACL alone takes nothing away from a principal that holds one of them
IMPLIED_BY: dict[str, tuple[str, ...]] = {
    "DESCRIBE": ("READ", "WRITE", "DELETE", "ALTER"),
    "DESCRIBE_CONFIGS": ("ALTER_CONFIGS",),
}


def granting(acl: Acl, held: list[Acl]) -> list[Acl]:
    """The ACLs of ``held`` that give ``acl``'s operation: its own, and those that imply it."""
    return [
        a
        for a in held
        if a.resource == acl.resource and (a == acl or a.operation in IMPLIED_BY.get(acl.operation, ()))
    ]


def acls_of(request: str) -> set[Acl]:
    """The ACLs one request needs (empty for a request the table does not know)."""
    return {Acl(kind, operation) for kind, operation in REQUESTS.get(request, {}).items()}


def needs(runbook: str) -> dict[Acl, tuple[str, ...]]:
    """The ACLs ``runbook`` needs, each with the requests that need it; KeyError for an unknown
    runbook (a runbook added without its row here is a bug the unit tests catch)."""
    out: dict[Acl, list[str]] = {}
    for request in RUNBOOK_REQUESTS[runbook]:
        for acl in sorted(acls_of(request)):
            out.setdefault(acl, []).append(request)
    return {acl: tuple(requests) for acl, requests in sorted(out.items())}


def all_needed() -> list[Acl]:
    """Every ACL some runbook needs: what one principal for all of them is granted."""
    return sorted({acl for runbook in RUNBOOK_REQUESTS for acl in needs(runbook)})


def operation_for(request: str, resource: str) -> str | None:
    """The operation ``request`` needs on a ``resource`` kind (CLUSTER, TOPIC), None if not known."""
    return REQUESTS.get(request, {}).get(resource)
