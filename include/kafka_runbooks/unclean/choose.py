"""Choose, per offline partition, the replica to elect: highest leader epoch, then longest log.

Ties go to the replica that comes first in the assignment (the one Kafka's own election
would prefer among equals), so the choice is deterministic and reorders nothing it need
not. A replica is a candidate only if its broker is registered, unfenced and answered.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kafka_runbooks.model import Broker, PartitionState
from kafka_runbooks.unclean.loginfo import GatherResult


@dataclass(frozen=True)
class ReplicaRow:
    broker_id: int
    leader_epoch: int | None
    log_end_offset: int | None
    candidate: bool
    note: str  # "ok" or why it is not a candidate
    offsets_lost_vs_choice: int | None  # what electing it would lose against the choice


@dataclass(frozen=True)
class Choice:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader_epoch: int  # the partition's epoch in the cluster metadata when planned
    rows: tuple[ReplicaRow, ...]
    chosen: int | None
    reason: str
    kafka_unclean_pick: int | None  # first live replica in assignment order

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def row(self, broker_id: int) -> ReplicaRow | None:
        return next((r for r in self.rows if r.broker_id == broker_id), None)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["replicas"] = list(self.replicas)
        d["rows"] = [asdict(r) for r in self.rows]
        return d

    @staticmethod
    def from_dict(d: dict) -> Choice:
        return Choice(
            topic=d["topic"],
            partition=d["partition"],
            replicas=tuple(d["replicas"]),
            leader_epoch=d["leader_epoch"],
            rows=tuple(ReplicaRow(**r) for r in d["rows"]),
            chosen=d["chosen"],
            reason=d["reason"],
            kafka_unclean_pick=d["kafka_unclean_pick"],
        )


def choose(partition: PartitionState, gathered: GatherResult, brokers: dict[int, Broker]) -> Choice:
    infos = gathered.for_partition(partition.topic, partition.partition, partition.replicas)
    candidates = []
    for position, info in enumerate(infos):
        broker = brokers.get(info.broker_id)
        if info.answered and broker is not None and broker.available:
            candidates.append((-(info.leader_epoch or 0), -info.log_end_offset, position, info))
    candidates.sort(key=lambda c: c[:3])
    best = candidates[0][3] if candidates else None
    rows = []
    for info in infos:
        broker = brokers.get(info.broker_id)
        is_candidate = best is not None and any(c[3] is info for c in candidates)
        if info.error:
            note = info.error
        elif broker is None or not broker.available:
            note = "broker not available"
        else:
            note = "ok"
        lost = None
        if best is not None and info.answered:
            lost = max(0, best.log_end_offset - info.log_end_offset)
        rows.append(
            ReplicaRow(info.broker_id, info.leader_epoch, info.log_end_offset, is_candidate, note, lost)
        )
    kafka_pick = next((b for b in partition.replicas if brokers.get(b) and brokers[b].available), None)
    if best is None:
        reason = "no candidate: no replica on a live, unfenced broker answered with its log end offset"
    else:
        reason = (
            f"replica on broker {best.broker_id} has the highest leader epoch ({best.leader_epoch}) "
            f"and the longest log among them (log end offset {best.log_end_offset})"
        )
        if len(candidates) > 1 and candidates[0][:2] == candidates[1][:2]:
            reason += f"; tie with broker {candidates[1][3].broker_id}, broken by assignment order"
    return Choice(
        topic=partition.topic,
        partition=partition.partition,
        replicas=partition.replicas,
        leader_epoch=partition.leader_epoch,
        rows=tuple(rows),
        chosen=best.broker_id if best else None,
        reason=reason,
        kafka_unclean_pick=kafka_pick,
    )
