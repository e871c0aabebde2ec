"""The admin facade: every RPC the runbooks send to a cluster goes through ``ClusterAdmin``.

It answers "what does the cluster look like now" and carries out the writes the
runbooks decide (reassignments, replica reorders, leader elections, throttle configs).
Every RPC goes through kafka-python, in the private :mod:`kafka_runbooks._kafka_python`,
which nothing else imports: it is the client that lets the facade choose the broker a
request goes to (librdkafka's metadata call asks one broker and does not try another
within its deadline, so one frozen broker failed a whole read). The retry and fail-over
rules live here, in two methods, on one per-attempt deadline:

- every attempt has ``attempt_timeout_s`` (a third of the call's ``timeout_s``): a broker
  that accepts connections but does not answer (SIGSTOP, a long GC pause, a half-open
  connection) costs one attempt, becomes a suspect that the next attempts skip, and is
  reported in words (``not_answering``: "broker 2 accepted the connection but did not
  answer within 5 s");

- ``_retry``: a read that failed with a retriable error (connection lost, node not
  ready, request timed out) is tried again, on another broker when it can; after the
  last attempt it is ``ClusterUnreachable``.
- ``_to_controller``: a request kafka-python sends to the broker it cached as "the
  controller" (under KRaft any broker from metadata) forgets that broker after any
  failure, so a retry goes to a live one.
- bootstrap (``_kafka_python``): a bootstrap server that refuses connections has no broker
  behind it and gets no attempt; a cluster whose every server refuses for one attempt's
  deadline is ``ClusterUnreachable`` ("nothing listens at ..."), see
  :mod:`kafka_runbooks.bootstrap`.

Errors leave the facade in the library's tree (``kafka_runbooks.errors``): a client
library's error is translated once, as it leaves a public method (``_rpc``), into
``ClusterUnreachable`` (nothing answered) or ``AdminError`` (the cluster answered with an
error), with the original chained; nothing outside this module catches kafka-python or
confluent-kafka errors.

Clients are built on first use, so constructing a facade never touches the network.
Calls on many resources follow the futures-per-resource pattern: one failed topic or
broker is reported by name, and does not hide the answers for the others.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import cached_property
from typing import Any

from kafka_runbooks import retries
from kafka_runbooks.admin_configs import ConfigRequests
from kafka_runbooks.admin_errors import map_client_errors, rpc
from kafka_runbooks.admin_reads import ScopedReads
from kafka_runbooks.bootstrap import bootstrap_servers, until_one_listens
from kafka_runbooks.client_config import redact, require_bootstrap
from kafka_runbooks.errors import ClusterUnreachable
from kafka_runbooks.model import Broker, ClusterState, LogDir, PartitionState, Quorum
from kafka_runbooks.quiet_logs import quiet_client_logs

log = logging.getLogger(__name__)


class ClusterAdmin(ConfigRequests, ScopedReads):
    def __init__(self, config: dict[str, Any], timeout_s: float = 30.0) -> None:
        self.config = dict(config)
        self.bootstrap_servers = require_bootstrap(self.config)
        self.timeout_s = timeout_s
        # one attempt's deadline: a frozen broker costs a third of the call, then another broker is asked
        self.attempt_timeout_s = max(1.0, timeout_s / 3)
        quiet_client_logs()  # refused connections to a broker being worked on are not ERRORs

    def __repr__(self) -> str:
        return f"ClusterAdmin({redact(self.config)})"

    # Lazily built clients ------------------------------------------------------
    @cached_property
    def _kafka_python(self):
        """kafka-python's client (private to the facade), one attempt's deadline per request.

        Bootstrap servers that refuse connections (nothing listens there) are left out; when
        every one refuses for one attempt's deadline the cluster is ``ClusterUnreachable`` at
        once, instead of a bootstrap deadline for all of them and another for each alone.
        """
        servers = bootstrap_servers(self.bootstrap_servers)
        seen = until_one_listens(servers, self.attempt_timeout_s)
        if not seen.others:
            raise ClusterUnreachable(
                f"nothing listens at {self.bootstrap_servers}: every bootstrap server refused the "
                f"connection for {self.attempt_timeout_s:.0f} s (the cluster is down or not there)"
            )
        refused = "".join(f"; {server} refused the connection" for server in seen.refused)
        return self._bootstrap(list(seen.others), refused)

    def _bootstrap(self, servers: list[str], refused: str):
        """Bootstrap through ``servers`` together, then (if more than one) through each alone:
        kafka-python can stay stuck on a bootstrap server that accepts connections but never
        answers (a hung broker: exactly when runbooks run)."""
        from kafka.errors import KafkaError

        from kafka_runbooks._kafka_python import KafkaPythonClient

        attempt_ms = int(self.attempt_timeout_s * 1000)
        suspect_ms = int(self.timeout_s * 1000)
        first_error: KafkaError | None = None
        for group in [servers] + ([[s] for s in servers] if len(servers) > 1 else []):
            try:
                return KafkaPythonClient(
                    {**self.config, "bootstrap.servers": ",".join(group)},
                    request_timeout_ms=attempt_ms,
                    suspect_ms=suspect_ms,
                )
            except KafkaError as exc:
                first_error = first_error or exc
                log.info("bootstrap through %s failed: %s", ",".join(group), exc)
        raise ClusterUnreachable(
            f"no broker of {self.bootstrap_servers} answered "
            f"({type(first_error).__name__}: {first_error}){refused}"
        ) from first_error

    def close(self) -> None:
        """Close the kafka-python client if one was opened (it is created on first use)."""
        if "_kafka_python" in self.__dict__:
            self._kafka_python.close()

    def __enter__(self) -> ClusterAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Reads -------------------------------------------------------------------
    def not_answering(self) -> dict[int, str]:
        """Brokers skipped because they let a request time out, each with the fact in words ("broker 2
        accepted the connection but did not answer within 5 s"); empty before the first call."""
        if "_kafka_python" not in self.__dict__:
            return {}
        return dict(sorted(getattr(self._kafka_python, "suspects", {}).items()))

    @rpc("DescribeCluster")
    def ping(self) -> str:
        """Cluster id, or ClusterUnreachable: the check every runbook makes before acting."""
        cluster_id, _ = self._retry("DescribeCluster", lambda: self._kafka_python.describe_cluster())
        return cluster_id

    @rpc("DescribeCluster")
    def describe_brokers(self) -> dict[int, Broker]:
        """DescribeCluster: the registered brokers by id (with rack and fenced state), retried on another
        broker when one dies."""
        _, brokers = self._retry("DescribeCluster", lambda: self._kafka_python.describe_cluster())
        return {b.broker_id: b for b in brokers}

    def broker_answers(self, broker_id: int, timeout_s: float = 5.0) -> str | None:
        """None if the broker answers a request on its own listener now, else why not. Asked of it,
        never of another: a KRaft broker accepts connections only once unfenced, so an answer says
        its current process is registered and serving, which DescribeCluster cannot say while a
        crashed process's registration lives (unfenced until its session times out)."""
        from kafka_runbooks._kafka_python import node_answers

        try:
            with map_client_errors("Metadata", f"broker {broker_id}"):
                node_answers(self._kafka_python, broker_id, int(timeout_s * 1000))
        except Exception as exc:  # whatever kept the answer away, the broker did not answer
            return f"{type(exc).__name__}: {exc}"
        return None

    @rpc("DescribeQuorum")
    def describe_quorum(self) -> Quorum:
        """DescribeQuorum: the KRaft metadata quorum as its leader reports it (timestamps on the leader's
        clock), with the cluster's controller.quorum.fetch.timeout.ms the evidence room judges it by."""
        answer = self._retry("DescribeQuorum", lambda: self._kafka_python.describe_quorum())
        return replace(answer, fetch_timeout_ms=self._fetch_timeout_ms())

    @rpc("Metadata")
    def list_topics(self, include_internal: bool = True) -> list[str]:
        """Metadata: every topic name, sorted; ``include_internal=False`` drops the ``__``-prefixed
        internal topics."""
        names = self._retry("Metadata", lambda: self._kafka_python.topic_names())
        return sorted(t for t in names if include_internal or not t.startswith("__"))

    @rpc("DescribeTopicPartitions")
    def describe_partitions(self, topics: list[str] | None = None) -> list[PartitionState]:
        """Every partition of ``topics`` (all when None) with its effective min ISR."""
        topics = self.list_topics() if topics is None else list(topics)
        parts = self.describe_topic_partitions(topics)
        min_isr = self.min_insync_replicas(sorted({p.topic for p in parts}))
        return [PartitionState(**{**p.__dict__, "min_insync_replicas": min_isr[p.topic]}) for p in parts]

    @rpc("ListPartitionReassignments")
    def list_reassignments(self, attempts: int = 4) -> dict[tuple[str, int], dict[str, list[int]]]:
        """Reassignments in flight: (topic, partition) -> replicas, adding, removing.

        kafka-python sends this to the broker it cached as "the controller" and raises
        UnknownBrokerIdError (not retriable) once that broker is gone, e.g. the one a
        rolling restart just restarted (seen on the real stack). The cached node is
        forgotten on failure, so another attempt goes to a live broker.
        """
        from kafka.errors import KafkaError

        from kafka_runbooks._kafka_python import list_reassignments

        send = self._once_to_controller
        policy = retries.linear(attempts, 0.5, retry_on=(KafkaError,))
        try:
            return policy.call(
                "ListPartitionReassignments",
                lambda: self._retry(
                    "ListPartitionReassignments", lambda: list_reassignments(self._kafka_python, send)
                ),
            )
        except KafkaError as exc:
            raise ClusterUnreachable(
                f"ListPartitionReassignments on {self.bootstrap_servers} failed after "
                f"{attempts} attempts: {type(exc).__name__}: {exc}"
            ) from exc

    @rpc("DescribeTopicPartitions")
    def describe_topic_partitions(self, topics: list[str]) -> list[PartitionState]:
        """Leader, epoch, replicas, ISR and ELR of every partition of ``topics``, as the
        metadata has them (``min_insync_replicas`` not read: see ``describe_partitions``)."""
        return self._retry(
            "DescribeTopicPartitions", lambda: self._kafka_python.describe_partitions(list(topics))
        )

    @rpc("ApiVersions")
    def elect_leaders_versions(self) -> tuple[int, int] | None:
        """(min, max) ElectLeaders versions the connected broker advertises, None if absent
        (v3+ carries a designated leader, KIP-966)."""
        from kafka_runbooks._kafka_python import ELECT_LEADERS_API_KEY

        return self._retry(
            "ApiVersions", lambda: self._kafka_python.advertised_api_versions(ELECT_LEADERS_API_KEY)
        )

    @rpc("ListOffsets")
    def list_replica_log_ends(
        self, by_broker: dict[int, list[tuple[str, int]]], timeout_ms: int, batch: int | None = None
    ) -> tuple[dict[int, list[tuple[str, int, int, int, int | None]] | Exception], int]:
        """Each broker's own log end offset and newest epoch for its replicas (ListOffsets
        with replica id -2): per broker rows or the exception its requests failed with, and
        the number of requests sent (``_kafka_python.list_replica_log_ends`` says how)."""
        from kafka_runbooks._kafka_python import list_replica_log_ends

        return self._retry(
            "ListOffsets",
            lambda: list_replica_log_ends(self._kafka_python, by_broker, timeout_ms=timeout_ms, batch=batch),
        )

    # Writes --------------------------------------------------------------------
    @rpc("AlterPartitionReassignments")
    def alter_partition_reassignments(
        self, targets: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], str | None]:
        """Start (target replicas) or cancel (None) reassignments; per partition None
        (accepted) or the error's name. One attempt: the caller reads back what happened."""
        from kafka_runbooks._kafka_python import alter_reassignments

        return alter_reassignments(self._kafka_python, targets, self._once_to_controller)

    @rpc("AlterPartitionReassignments")
    def reorder_replicas(self, orders: dict[tuple[str, int], list[int]]) -> dict[tuple[str, int], str | None]:
        """The same replica sets in a new order (AlterPartitionReassignments); per partition
        None (accepted) or the error's name. Fails over to a live broker."""
        from kafka_runbooks._kafka_python import reorder_replicas

        return reorder_replicas(self._kafka_python, orders, self._to_controller)

    @rpc("ElectLeaders")
    def elect_unclean(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        """ElectLeaders(UNCLEAN); per partition None (elected or not needed) or the error.
        Fails over to a live broker."""
        from kafka_runbooks._kafka_python import elect_unclean

        return elect_unclean(self._kafka_python, list(partitions), self._to_controller)

    @rpc("ElectLeaders")
    def elect_preferred(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        """ElectLeaders(PREFERRED); per partition None (elected) or the error's name
        (``ElectionNotNeededError`` when the preferred replica already leads)."""
        from kafka_runbooks._kafka_python import elect_preferred

        return self._retry("ElectLeaders", lambda: elect_preferred(self._kafka_python, list(partitions)))

    # State ---------------------------------------------------------------------
    @rpc("reading the cluster state")
    def read_state(self, topics: list[str] | None = None, include_log_dirs: bool = True) -> ClusterState:
        """One consistent-enough read of brokers, quorum, partitions and (optionally) sizes."""
        cluster_id = self.ping()
        taken_at_ms = int(time.time() * 1000)
        brokers = self.describe_brokers()
        quorum = self.describe_quorum()
        partitions = self.describe_partitions(topics)
        for p in partitions:
            for replica in p.replicas:
                if replica not in brokers:
                    brokers[replica] = Broker(broker_id=replica, alive=False)
        log_dir_states: dict[int, tuple[LogDir, ...]] = {}
        log_dir_errors: dict[int, str] = {}
        if include_log_dirs:
            live = sorted(b.broker_id for b in brokers.values() if b.alive)
            log_dir_states, log_dir_errors = self.describe_log_dir_states(live)
        log_dirs = [r for dirs in log_dir_states.values() for d in dirs for r in d.replicas]
        return ClusterState(
            cluster_id=cluster_id,
            brokers=dict(sorted(brokers.items())),
            quorum=quorum,
            partitions=partitions,
            log_dirs=log_dirs,
            log_dir_errors=log_dir_errors,
            taken_at_ms=taken_at_ms,
            log_dir_states=log_dir_states,
        )

    # The retry and fail-over rules ----------------------------------------------
    def _retry(self, what: str, fn, attempts: int = 4):
        """Run a kafka-python call, retrying retriable errors (on another broker when it can).

        kafka-python sends to one node it picked earlier and fails at once when that
        node has just died; a broker failure is exactly when runbooks read the cluster,
        so a dead node must cost a retry, not the run.
        """
        from kafka.errors import RetriableError

        try:
            return retries.linear(attempts, 0.5, retry_on=(RetriableError,)).call(what, fn)
        except RetriableError as exc:  # connection lost, node not ready, request timed out...
            facts = "".join(f"; {fact}" for fact in self.not_answering().values())
            raise ClusterUnreachable(
                f"{what} on {self.bootstrap_servers} failed after {attempts} attempts: {exc}{facts}"
            ) from exc

    def _to_controller(self, what: str, fn, attempts: int = 4, sleep=None):
        """Run a request kafka-python sends to "the controller", failing over to a live broker.

        Under KRaft kafka-python's "controller" is a broker id it picked from metadata and
        cached; once that broker dies every call fails (``UnknownBrokerIdError``, not marked
        retriable, or a connection error). After any failure forget the cached id so the
        next attempt asks the metadata for a live one, and wait (0.5 s, 1 s, 2 s...) first:
        the cluster needs a moment to stop naming a broker that has just died. The last
        failure is raised as it came: the callers report it per partition.
        """
        return retries.exponential(attempts, 0.5, 5.0).call(
            what, fn, after_failure=lambda exc: self._kafka_python.forget_controller(), sleep=sleep
        )

    def _once_to_controller(self, what: str, fn):
        """One attempt at a controller request; a failure forgets the cached controller, so
        whoever tries again (the caller, or ``list_reassignments``' loop) reaches a live one."""
        return self._to_controller(what, fn, attempts=1)
