"""The admin facade's reads whose answer is scoped: by the broker asked, or by the principal asking.

A group of :class:`kafka_runbooks.admin.ClusterAdmin`'s requests in a class of its own (the facade
inherits it, as it does ``admin_configs.ConfigRequests``), over the same lazily built client:

- each broker's log dirs (DescribeLogDirs, asked of that broker): one broker that cannot answer
  is an error entry, never a failure of the others; a refusal by the authorizer is the
  principal's, not the broker's, and is raised (``NotAuthorized``);
- a topic's records read from a mark (the Connect workers' status topic, read back after a
  restart): a consumer of no group, partitions assigned, nothing committed;
- what the connection's principal may do (KIP-430 authorized operations, in DescribeCluster's and
  Metadata's answers): what ``kafka_runbooks.acls`` checks a runbook's ACLs against. The
  brokers' own authorizer answers (super users, deny rules, wildcard and prefixed ACLs included),
  so the check needs neither the principal's name nor DescribeAcls.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kafka_runbooks.admin_errors import rpc
from kafka_runbooks.model import LogDir, LogDirReplica

log = logging.getLogger(__name__)

# a Metadata request for a topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION to a
# principal with DESCRIBE on every topic, TOPIC_AUTHORIZATION_FAILED to one without it
PROBE_TOPIC = "__kafka_runbooks_acl_probe"


@dataclass(frozen=True)
class AuthorizedOperations:
    """What the brokers' authorizer says the connection's principal may do.

    ``cluster``: the operations on the cluster (None when the broker did not say: no KIP-430).
    ``topics``: per topic asked about, its operations, or None when the principal may not even
    DESCRIBE it (refused); a topic that does not exist is absent. ``every_topic_described``: whether
    the principal may DESCRIBE a topic it has never seen (DESCRIBE on every topic), None if not asked.
    """

    cluster: frozenset[str] | None
    topics: dict[str, frozenset[str] | None] = field(default_factory=dict)
    every_topic_described: bool | None = None
    source: str = ""


class ScopedReads:
    """DescribeLogDirs per broker and the principal's authorized operations, for
    :class:`~kafka_runbooks.admin.ClusterAdmin` (which gives ``_kafka_python`` and ``not_answering``)."""

    @rpc("DescribeLogDirs")
    def describe_log_dirs(self, broker_ids: list[int]) -> tuple[list[LogDirReplica], dict[int, str]]:
        """Replica sizes per broker; a broker that cannot answer is an error entry, not a failure."""
        states, errors = self.describe_log_dir_states(broker_ids)
        return [r for dirs in states.values() for d in dirs for r in d.replicas], errors

    @rpc("DescribeLogDirs")
    def describe_log_dir_states(
        self, broker_ids: list[int], replicas: bool = True
    ) -> tuple[dict[int, tuple[LogDir, ...]], dict[int, str]]:
        """Every log dir per broker, failed ones with their error code (DescribeLogDirs); a broker
        that cannot answer is an error entry (its dirs unknown), not a failure; a refusal by the
        authorizer is raised (every broker would say it: the principal lacks DESCRIBE on the cluster)."""
        from kafka.errors import AuthorizationError

        states: dict[int, tuple[LogDir, ...]] = {}
        errors: dict[int, str] = {}
        for broker_id in broker_ids:
            try:
                states[broker_id] = self._kafka_python.describe_log_dir_states(broker_id, replicas)
            except AuthorizationError:
                raise  # the principal's, not the broker's: NotAuthorized at the boundary
            except Exception as exc:  # one broker's failure must not hide the others'
                # a suspect fails at once (NodeNotReadyError): the reason is why it is one
                suspect = self.not_answering().get(broker_id)
                errors[broker_id] = suspect or f"{type(exc).__name__}: {exc}"
                log.warning("broker %s did not describe its log dirs: %s", broker_id, errors[broker_id])
        return states, errors

    @rpc("ListOffsets")
    def topic_end_offsets(self, topic: str) -> dict[int, int]:
        """The topic's end offset per partition now: a mark, what is written after it is news."""
        from kafka_runbooks import _kafka_python

        return _kafka_python.end_offsets(self.config, topic, int(self.attempt_timeout_s * 1000))

    @rpc("Fetch")
    def values_since(
        self, topic: str, since: dict[int, int], keys: set[str]
    ) -> dict[str, list[bytes | None]]:
        """The values written under ``keys`` after the mark ``since``, oldest first (None: a tombstone)."""
        from kafka_runbooks import _kafka_python

        return _kafka_python.values_since(
            self.config, topic, since, set(keys), int(self.attempt_timeout_s * 1000)
        )

    @rpc("DescribeCluster")
    def authorized_operations(self, topics: list[str] | None = None) -> AuthorizedOperations:
        """What the principal may do on the cluster (DescribeCluster) and on ``topics`` (Metadata;
        None: every topic it can see, and whether it may DESCRIBE a topic it has never seen)."""
        kp = self._kafka_python
        cluster = kp.cluster_authorized_operations()
        asked = None if topics is None else sorted(set(topics))
        per_topic = kp.topic_authorized_operations(asked) if asked != [] else {}
        every = None
        if topics is None:
            every = kp.topic_authorized_operations([PROBE_TOPIC]).get(PROBE_TOPIC, frozenset()) is not None
        return AuthorizedOperations(
            cluster, per_topic, every, source=f"DescribeCluster and Metadata of {self.bootstrap_servers}"
        )
