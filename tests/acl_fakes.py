"""What a cluster's authorizer answers (KIP-430 authorized operations), for the unit tests' fakes.

A cluster without an authorizer answers every operation a resource supports as allowed (Kafka's
``AuthHelper.authorizedOperations`` with no authorizer: the supported operations), and so does
a super user's connection: :func:`no_authorizer` is that answer. :func:`granted` is a principal's
answer with only the ACLs given (a cluster with the StandardAuthorizer and
``allow.everyone.if.no.acl.found=false``).
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka_runbooks.acl_table import CLUSTER, TOPIC, Acl
from kafka_runbooks.admin_reads import AuthorizedOperations

# the operations Kafka supports on each (AclEntry.supportedOperations)
CLUSTER_OPERATIONS = frozenset(
    {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
)
TOPIC_OPERATIONS = frozenset(
    {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
)


def no_authorizer(topics: Iterable[str] | None, existing: Iterable[str] = ()) -> AuthorizedOperations:
    """No authorizer: every supported operation on the cluster and on each topic asked about that
    exists (``existing``; None asks every one), and any topic may be described."""
    names = (
        set(existing) if topics is None else set(topics) & set(existing) if existing else set(topics or ())
    )
    return AuthorizedOperations(
        CLUSTER_OPERATIONS,
        {t: TOPIC_OPERATIONS for t in sorted(names)},
        True if topics is None else None,
        source="a cluster without an authorizer",
    )


def granted(acls: Iterable[Acl], topics: Iterable[str]) -> AuthorizedOperations:
    """A principal holding only ``acls`` (TOPIC ones on every topic): the cluster's operations, each
    of ``topics``' (None: refused DESCRIBE), and whether it may describe a topic never seen."""
    held = set(acls)
    cluster = frozenset(a.operation for a in held if a.resource == CLUSTER)
    on_topics = frozenset(a.operation for a in held if a.resource == TOPIC)
    # DESCRIBE is implied by READ, WRITE, DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS (Kafka's rule)
    describes = "DESCRIBE" in on_topics or bool(on_topics & {"READ", "WRITE", "DELETE", "ALTER"})
    if describes:
        on_topics |= {"DESCRIBE"}
    if "ALTER_CONFIGS" in on_topics:
        on_topics |= {"DESCRIBE_CONFIGS"}
    if "DESCRIBE" not in cluster and cluster & {"ALTER"}:
        cluster |= {"DESCRIBE"}
    if "ALTER_CONFIGS" in cluster:
        cluster |= {"DESCRIBE_CONFIGS"}
    if "DESCRIBE" not in cluster:
        cluster = frozenset()  # DescribeCluster tells a principal without DESCRIBE nothing
    return AuthorizedOperations(
        cluster,
        {t: (on_topics if describes else None) for t in topics},
        describes,
        source="a fake authorizer",
    )
