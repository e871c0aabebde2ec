"""The admin facade's config requests: DescribeConfigs and IncrementalAlterConfigs.

A group of :class:`kafka_runbooks.admin.ClusterAdmin`'s requests in a class of its own (the
facade inherits it), over the same lazily built client and retry rule: the topics' effective
``min.insync.replicas``, the values set on a broker or topic itself, the effective values a
broker reports (the evidence room's thresholds), and config changes (throttles, cordons).
"""

from __future__ import annotations

import logging
import time

from kafka_runbooks.admin_errors import map_client_errors, rpc
from kafka_runbooks.errors import AdminError, KafkaRunbookError, NotAuthorized
from kafka_runbooks.evidence.features import ClusterFeatures
from kafka_runbooks.evidence.settings import ClusterTimeouts, read_timeouts

log = logging.getLogger(__name__)
TIMEOUTS_TTL_S = 60.0  # a cluster's failure-detection settings are read at most once a minute


class ConfigRequests:
    """DescribeConfigs and IncrementalAlterConfigs, for :class:`~kafka_runbooks.admin.ClusterAdmin`
    (which gives ``_kafka_python``, ``_retry`` and ``not_answering``)."""

    @rpc("DescribeConfigs")
    def min_insync_replicas(self, topics: list[str], batch: int = 500) -> dict[str, int]:
        """Each topic's effective ``min.insync.replicas`` (topic override or cluster default)."""
        out: dict[str, int] = {}
        for i in range(0, len(topics), batch):
            chunk = topics[i : i + batch]
            configs = self._retry(
                "DescribeConfigs",
                lambda chunk=chunk: self._kafka_python.topic_configs(chunk, ["min.insync.replicas"]),
            )
            for topic in chunk:
                value = configs.get(topic, {}).get("min.insync.replicas")
                if value is None:
                    raise AdminError(f"could not read min.insync.replicas of topic {topic!r}")
                out[topic] = int(value)
        return out

    @rpc("DescribeConfigs")
    def describe_config_values(
        self, resource_type: str, names: list[str], keys: list[str], asked_of: int | None = None
    ) -> dict[str, dict[str, str | None]]:
        """Values of ``keys`` set on each resource itself (``resource_type`` "broker" or
        "topic"); defaults and static settings read as absent. Topics are asked of ``asked_of``
        where given (its own copy of the metadata, which may lag another broker's), else of any
        broker; a broker's configs always of that broker."""
        from kafka_runbooks._kafka_python import describe_config_values

        return describe_config_values(self._kafka_python, resource_type, names, keys, asked_of)

    @rpc("IncrementalAlterConfigs")
    def incremental_alter_configs(
        self, resource_type: str, changes: dict[str, dict[str, tuple[str, str | None]]]
    ) -> dict[str, str]:
        """IncrementalAlterConfigs: ``changes`` = {resource name: {key: (op, value)}}, op SET,
        DELETE, APPEND or SUBTRACT; per resource "OK" or the error."""
        from kafka_runbooks._kafka_python import incremental_alter_configs

        return incremental_alter_configs(self._kafka_python, resource_type, changes)

    def broker_configs(
        self, broker_ids: list[int], keys: list[str]
    ) -> tuple[dict[int, dict[str, str | None]], dict[int, str]]:
        """Effective values of ``keys`` per broker (DescribeConfigs, asked of each broker), and the
        brokers that could not answer with why: one silent broker does not hide the others."""
        from kafka_runbooks._kafka_python import effective_broker_configs

        values: dict[int, dict[str, str | None]] = {}
        errors: dict[int, str] = {}
        for broker_id in broker_ids:
            try:
                with map_client_errors("DescribeConfigs", f"broker {broker_id}"):
                    values[broker_id] = effective_broker_configs(self._kafka_python, broker_id, keys)
            except NotAuthorized:
                raise  # the principal's, not the broker's: every broker would refuse it
            except KafkaRunbookError as exc:
                errors[broker_id] = self.not_answering().get(broker_id) or f"{type(exc).__name__}: {exc}"
        return values, errors

    @rpc("ApiVersions")
    def describe_features(self) -> ClusterFeatures:
        """The features the cluster finalized and the RPC versions a broker advertises
        (:mod:`kafka_runbooks.evidence.features`): what a runbook asks before relying on one."""
        finalized, supported, apis = self._retry(
            "ApiVersions", lambda: self._kafka_python.describe_features()
        )
        return ClusterFeatures(finalized, supported, apis, source=f"ApiVersions of {self.bootstrap_servers}")

    def cluster_timeouts(self) -> ClusterTimeouts:
        """``broker.session.timeout.ms`` and ``controller.quorum.fetch.timeout.ms`` as the cluster
        has them (:mod:`kafka_runbooks.evidence.settings`), read again after ``TIMEOUTS_TTL_S``;
        SafetyRefusal when no broker says."""
        cached = getattr(self, "_timeouts", None)
        if cached is not None and time.monotonic() - cached[0] < TIMEOUTS_TTL_S:
            return cached[1]
        timeouts = read_timeouts(self)
        self._timeouts = (time.monotonic(), timeouts)
        return timeouts

    def _fetch_timeout_ms(self) -> int | None:
        """The cluster's controller.quorum.fetch.timeout.ms, or None when no broker said (unknown)."""
        try:
            return self.cluster_timeouts().quorum_fetch_timeout_ms
        except NotAuthorized:
            raise  # a missing ACL is said, never read as "unknown"
        except KafkaRunbookError as exc:
            log.warning("controller.quorum.fetch.timeout.ms not read: %s", exc)
            return None
