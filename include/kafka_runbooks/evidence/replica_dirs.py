"""Is this broker's replica on a failed log dir? Its own DescribeLogDirs answer and the controller's word.

Two answers speak of a live broker's replicas and its directories (JBOD, KIP-112; KIP-858 in
KRaft): the broker's own **DescribeLogDirs** (each dir online or with an error, the logs each
online dir holds, a future log of an intra-broker move flagged ``is_future``) and the
controller's **OfflineReplicas** of each partition (Metadata / DescribeTopicPartitions: the
replicas the cluster itself treats as offline).

The rule, one for the runbook, the failed-broker sweep and the health report:

- **healthy** on the broker: its *current* log (never a future one: the log a replica serves from
  is the current one; the future log of a move sits beside it until the move completes) is in an
  online dir, and the controller's offline replicas do not name the broker;
- **offline** (on a failed dir): the controller names the broker offline for the partition, or
  the broker has an offline dir and no online dir holds the replica's current log (a future log in
  a healthy dir does not make it healthy: its current log sat in the failed dir);
- **not listed**: neither (the broker has no offline dir, the controller names it not, and no dir
  lists it yet, e.g. a replica being added): not healthy, and no failed dir to blame.

Where the two answers disagree (the dirs hold its current log while the controller names it
offline, or the other way round), the replica is offline: the cluster's own word wins over a
listing, and the judgement keeps what each answer said, for the record. A broker whose dirs were
not read has no judgement here (unknown, never "healthy").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks.model import ClusterState, LogDir, PartitionState

Key = tuple[str, int]


@dataclass(frozen=True)
class ReplicaDirs:
    """One live broker's replicas (the metadata's), each judged by the rule above."""

    broker_id: int
    offline_dirs: tuple[str, ...]  # dirs its DescribeLogDirs answers with an error
    healthy: tuple[Key, ...] = ()
    offline: tuple[Key, ...] = ()
    not_listed: tuple[Key, ...] = ()
    # partition name -> what each answer said, where they disagree (the replica is offline)
    disagreements: dict[str, dict[str, str]] = field(default_factory=dict)
    # the offline replicas the controller names (its own word, agreeing or not)
    named_by_controller: tuple[str, ...] = ()

    @property
    def offline_names(self) -> list[str]:
        """The offline replicas as ``topic-partition``, sorted (what reports list)."""
        return [f"{t}-{p}" for t, p in self.offline]

    def facts(self, limit: int = 20) -> dict[str, Any]:
        """What both answers said, for a decision record: the disagreements and the controller's
        offline replicas cut to ``limit``, their counts whole."""
        disagree = dict(sorted(self.disagreements.items())[:limit])
        return {
            "offline_replicas_named_by_controller": list(self.named_by_controller[:limit]),
            "offline_replicas_named_by_controller_count": len(self.named_by_controller),
            "disagreements": disagree,
            "disagreements_count": len(self.disagreements),
        }


def _what_dirs_say(current: str | None, future: str | None, any_offline: bool) -> str:
    """DescribeLogDirs' word on one replica, in words."""
    if current is not None:
        return f"its current log is in online dir {current}"
    if future is not None:
        return (
            f"only the future log of an intra-broker move is in online dir {future}; no online dir holds "
            "its current log"
        )
    return "no online dir holds its log" + (" (the broker has an offline dir)" if any_offline else "")


def judge_replica_dirs(state: ClusterState, broker: int) -> ReplicaDirs | None:
    """The broker's replicas judged by its own DescribeLogDirs answer and the controller's offline
    replicas; None when its dirs were not read (unknown: never judged healthy)."""
    dirs = state.log_dir_states.get(broker)
    if dirs is None:
        return None
    offline_dirs = tuple(sorted(d.path for d in dirs if not d.online))
    index = _index(dirs)
    out: dict[str, list[Key]] = {"healthy": [], "offline": [], "not_listed": []}
    disagreements: dict[str, dict[str, str]] = {}
    named: list[str] = []
    for p in sorted(state.partitions, key=lambda q: (q.topic, q.partition)):
        if broker not in p.replicas:
            continue
        key = (p.topic, p.partition)
        current, future = index.get((key, False)), index.get((key, True))
        by_controller = _named_offline(p, broker)
        if by_controller:
            named.append(p.name)
        verdict = _verdict(current is not None, by_controller, bool(offline_dirs))
        out[verdict].append(key)
        if by_controller == (current is not None) and (by_controller or offline_dirs):
            disagreements[p.name] = {
                "describe_log_dirs": _what_dirs_say(current, future, bool(offline_dirs)),
                "offline_replicas": "names this broker offline"
                if by_controller
                else "does not name this broker offline",
            }
    return ReplicaDirs(
        broker_id=broker,
        offline_dirs=offline_dirs,
        healthy=tuple(out["healthy"]),
        offline=tuple(out["offline"]),
        not_listed=tuple(out["not_listed"]),
        disagreements=disagreements,
        named_by_controller=tuple(named),
    )


def _index(dirs: tuple[LogDir, ...]) -> dict[tuple[Key, bool], str]:
    """(replica, is future) -> the online dir that lists it (one pass over the answer)."""
    out: dict[tuple[Key, bool], str] = {}
    for d in dirs:
        if d.online:
            for r in d.replicas:
                out.setdefault(((r.topic, r.partition), r.is_future), d.path)
    return out


def _named_offline(partition: PartitionState, broker: int) -> bool:
    """Whether the controller's OfflineReplicas of the partition names the broker."""
    return broker in partition.offline_replicas


def _verdict(current_online: bool, by_controller: bool, any_offline_dir: bool) -> str:
    """healthy / offline / not_listed, by the rule of this module."""
    if by_controller:
        return "offline"  # the cluster's own word, whatever a listing says
    if current_online:
        return "healthy"
    return "offline" if any_offline_dir else "not_listed"
