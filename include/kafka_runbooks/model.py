"""The cluster as the runbooks see it: brokers, the KRaft quorum, partitions.

Plain dataclasses, built by the admin facade and read by safety rules and planners.
A broker that appears in replica assignments but is not registered is still a Broker
here (``alive=False``): that is exactly the broker a runbook has to reason about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NO_LEADER = -1


@dataclass(frozen=True)
class Broker:
    broker_id: int
    host: str | None = None
    port: int | None = None
    rack: str | None = None
    alive: bool = True
    fenced: bool = False

    @property
    def available(self) -> bool:
        """Registered and unfenced: it can lead and follow partitions."""
        return self.alive and not self.fenced


@dataclass(frozen=True)
class QuorumMember:
    node_id: int
    log_end_offset: int
    last_caught_up_ms: int | None
    last_fetch_ms: int | None
    # KIP-853 (DescribeQuorum v2): the replica's metadata log directory id in Kafka's own form
    # (base64url, as kafka-storage and kafka-metadata-quorum print it); None before v2
    directory_id: str | None = None


@dataclass(frozen=True)
class Quorum:
    """The KRaft metadata quorum (``__cluster_metadata``) as DescribeQuorum reports it."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumMember, ...]
    observers: tuple[QuorumMember, ...]
    # controller node id -> host of its listener (DescribeQuorum v2, Kafka >= 3.8; else empty)
    hosts: dict[int, str] = field(default_factory=dict, hash=False, compare=False)
    # the cluster's controller.quorum.fetch.timeout.ms, read beside the answer by the admin facade:
    # what the evidence room judges catch-up by (None: not read, every member's catch-up unknown)
    fetch_timeout_ms: int | None = field(default=None, compare=False)

    @property
    def active_controller(self) -> int:
        """The node id of the quorum leader: in KRaft the active controller is the metadata quorum's
        leader."""
        return self.leader_id

    @property
    def leader(self) -> QuorumMember | None:
        """The leader's own entry: Kafka's LeaderState fills its timestamps with its own clock."""
        return next((v for v in self.voters if v.node_id == self.leader_id), None)


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    # the topic's effective min.insync.replicas (DescribeConfigs); None = not read: every rule
    # that needs it says "unknown", never judges against a guessed 1
    min_insync_replicas: int | None = None
    # a reassignment in flight (ListPartitionReassignments); ``replicas`` holds both sets
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        """``topic-partition``, the name Kafka's tools and logs use."""
        return f"{self.topic}-{self.partition}"

    @property
    def replication_factor(self) -> int:
        """Replicas in the assignment; during a reassignment this counts adding replicas too."""
        return len(self.replicas)

    @property
    def preferred_leader(self) -> int | None:
        """The first assigned replica (what preferred-leader election elects); None with no replicas."""
        return self.replicas[0] if self.replicas else None

    @property
    def has_leader(self) -> bool:
        """Whether the metadata names a leader (-1 means none); it may still be a broker that is gone."""
        return self.leader != NO_LEADER


@dataclass(frozen=True)
class LogDirReplica:
    broker_id: int
    topic: str
    partition: int
    size_bytes: int
    log_dir: str
    offset_lag: int = 0
    is_future: bool = False


@dataclass(frozen=True)
class LogDir:
    """One log directory of one broker as its DescribeLogDirs answer has it. A directory that
    failed (an I/O error: Kafka marks it offline) answers with an error code and no replicas."""

    broker_id: int
    path: str
    error_code: int
    replicas: tuple[LogDirReplica, ...] = ()
    total_bytes: int | None = None
    usable_bytes: int | None = None

    @property
    def online(self) -> bool:
        """Whether DescribeLogDirs reported the dir without an error (a failed dir reports
        KAFKA_STORAGE_ERROR)."""
        return self.error_code == 0


@dataclass
class ClusterState:
    """Everything a sweep needs to judge the cluster, read in one pass."""

    cluster_id: str | None
    brokers: dict[int, Broker]
    quorum: Quorum | None
    partitions: list[PartitionState]
    log_dirs: list[LogDirReplica] = field(default_factory=list)
    log_dir_errors: dict[int, str] = field(default_factory=dict)
    taken_at_ms: int = 0
    # every directory of every broker that answered DescribeLogDirs, failed ones included
    log_dir_states: dict[int, tuple[LogDir, ...]] = field(default_factory=dict)
    # what the cluster finalized (evidence.features.ClusterFeatures), read beside the state where a
    # report shows it; None: not read
    features: Any = None

    @property
    def active_controller(self) -> int | None:
        """The active controller's node id, or None when the quorum was not read (unknown, not absent)."""
        return self.quorum.leader_id if self.quorum else None

    def alive_broker_ids(self) -> list[int]:
        """Registered, unfenced brokers, sorted: the ones that can take replicas and leadership."""
        return sorted(b.broker_id for b in self.brokers.values() if b.available)

    def is_available(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is registered and unfenced; an id the metadata does not list is not."""
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.available

    def hosted_by(self, broker_id: int) -> list[PartitionState]:
        """Partitions with ``broker_id`` in their assignment, whether or not it is in the ISR."""
        return [p for p in self.partitions if broker_id in p.replicas]

    def offline(self) -> list[PartitionState]:
        """No leader, or a leader the cluster no longer has."""
        return [p for p in self.partitions if not p.has_leader or not self.is_available(p.leader)]

    def under_replicated(self) -> list[PartitionState]:
        """Partitions with a live leader and an ISR smaller than the assignment (offline ones are counted
        apart)."""
        offline = {p.name for p in self.offline()}
        return [p for p in self.partitions if p.name not in offline and len(p.isr) < p.replication_factor]

    def under_min_isr(self) -> list[PartitionState]:
        """Partitions with a live leader and fewer in-sync replicas than their ``min_insync_replicas``
        (acks=all producers are refused there); a partition whose min ISR was not read is in neither
        this list nor its complement: see ``min_isr_unknown``."""
        offline = {p.name for p in self.offline()}
        return [
            p
            for p in self.partitions
            if p.name not in offline
            and p.min_insync_replicas is not None
            and len(p.isr) < p.min_insync_replicas
        ]

    def min_isr_unknown(self) -> list[PartitionState]:
        """Partitions whose min.insync.replicas was not read: no min-ISR rule can judge them."""
        return [p for p in self.partitions if p.min_insync_replicas is None]
