"""The outside watcher: DescribeQuorum and the watched partitions every 200 ms, from its own thread
and its own clients, never through the runbook's.

Each sample keeps the time (this process's monotonic clock: the watcher compares only its own
samples with each other and with the fault log, which the same clock stamps), the quorum leader
(None: the read failed, unknown; -1: the answer names no leader) and, per watched partition, its
leader, replicas, ISR and the reassignment in flight. A read that fails is kept as such: an
unanswered read is unknown, never "fine".
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from kafka_runbooks.admin import ClusterAdmin

INTERVAL_S = 0.2


@dataclass(frozen=True)
class PartitionSeen:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class Sample:
    at: float
    leader: int | None  # the quorum leader; -1: none named; None: the read failed (unknown)
    partitions: dict[str, PartitionSeen] | None = None  # None: the read failed
    voters: tuple[int, ...] = ()
    error: str | None = None


@dataclass
class Watch:
    """Everything the watcher saw, for the invariants."""

    samples: list[Sample] = field(default_factory=list)
    reassigning: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)  # (at, partitions)
    pids: list[tuple[float, dict[int, int | None]]] = field(default_factory=list)  # (at, node -> pid)


class Watcher(threading.Thread):
    """Polls until :meth:`stop`; reassignments in flight are read every ``reassign_every`` samples."""

    def __init__(self, bootstrap: str, topics: list[str], reassign_every: int = 5, pids=None) -> None:
        super().__init__(daemon=True, name="chaos-watcher")
        self.pids = pids  # () -> {node id: pid}: which process each node runs (a restart changes it)
        self.admin = ClusterAdmin({"bootstrap.servers": bootstrap}, timeout_s=3)
        self.topics = list(topics)
        self.reassign_every = reassign_every
        self.seen = Watch()
        self._done = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._done.wait(INTERVAL_S):
            self.seen.samples.append(self._sample())
            n += 1
            if n % self.reassign_every == 0:
                self._reassignments()
                if self.pids is not None:
                    self.seen.pids.append((time.monotonic(), self.pids()))

    def _sample(self) -> Sample:
        at = time.monotonic()
        try:
            quorum = self.admin.describe_quorum()
            leader, voters = quorum.leader_id, tuple(sorted(v.node_id for v in quorum.voters))
        except Exception as exc:  # unknown, never "no leader"
            return Sample(at, None, self._partitions(), error=f"DescribeQuorum: {type(exc).__name__}: {exc}")
        return Sample(at, leader, self._partitions(), voters)

    def _partitions(self) -> dict[str, PartitionSeen] | None:
        try:
            parts = self.admin.describe_topic_partitions(self.topics)
        except Exception:
            return None
        return {p.name: PartitionSeen(p.leader, p.replicas, p.isr) for p in parts}

    def _reassignments(self) -> None:
        try:
            inflight = self.admin.list_reassignments(attempts=1)
        except Exception:
            return
        names = tuple(sorted(f"{t}-{p}" for t, p in inflight if t in self.topics))
        if names:
            self.seen.reassigning.append((time.monotonic(), names))

    def stop(self) -> Watch:
        """End the polling and close its client; the samples stay."""
        self._done.set()
        self.join(15)
        self.admin.close()
        return self.seen
