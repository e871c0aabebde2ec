"""Choose, per offline partition, the replica to elect: newest epoch, then longest log.

The KIP's rule: a replica whose log holds records of a newer leader epoch beats a longer
log that ends in an older epoch (that longer tail diverged: it was written by a leader
that a later leader replaced). The epoch used is each replica's *newest epoch*, read
from its own log (see :mod:`.loginfo`); where it is unknown for a candidate, the choice
is by log end offset only and the reason says so.

Ties go to the replica that comes first in the assignment (the one Kafka's own election
would prefer among equals), so the choice is deterministic and reorders nothing it need
not. A replica is a candidate only if its broker is registered, unfenced and answered.

What a choice costs, per replica: the offsets it holds beyond the chosen replica's log
end, which its broker truncates once it follows the chosen leader. When its newest epoch
is older than the chosen one's, its log may have diverged before the chosen log's end,
and it loses more than that: the figure is then a lower bound (``at_least``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kafka_runbooks.model import Broker, PartitionState
from kafka_runbooks.unclean.loginfo import GatherResult


@dataclass(frozen=True)
class ReplicaRow:
    broker_id: int
    newest_epoch: int | None  # None: unknown (no answer, or no record to read it from)
    log_end_offset: int | None
    candidate: bool
    note: str  # "ok" or why it is not a candidate
    truncated_if_chosen_stands: int | None  # offsets beyond the chosen replica's log end
    at_least: bool = False  # its log may have diverged earlier: it loses at least that many


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
    longest_log_end_offset: int | None = None  # among replicas that answered
    loss_vs_longest: int | None = None  # offsets of the longest log the choice does not keep
    kafka_pick_loss_vs_longest: int | None = None  # the same for Kafka's own unclean election
    epoch_known: bool = False  # every candidate's newest epoch was read

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
        fields = {k: v for k, v in d.items() if k in Choice.__dataclass_fields__}
        fields["replicas"] = tuple(d["replicas"])
        fields["rows"] = tuple(ReplicaRow(**r) for r in d["rows"])
        return Choice(**fields)


def _cost(info, best) -> tuple[int | None, bool]:
    """Offsets ``info``'s replica holds beyond ``best``'s log end, and whether that is a lower bound."""
    if best is None or not info.answered:
        return None, False
    beyond = max(0, info.log_end_offset - best.log_end_offset)
    if info.broker_id == best.broker_id:
        return 0, False
    older = info.newest_epoch is None or best.newest_epoch is None or info.newest_epoch < best.newest_epoch
    # Same newest epoch: both logs are prefixes of that epoch's leader's log, no divergence.
    return beyond, older and info.log_end_offset > 0


def _reason(best, candidates, epoch_known: bool) -> str:
    if best is None:
        return "no candidate: no replica on a live, unfenced broker answered with its log end offset"
    longer = [c for c in candidates if c.log_end_offset > best.log_end_offset]
    if not epoch_known:
        unknown = sorted(c.broker_id for c in candidates if c.newest_epoch is None)
        return (
            f"replica on broker {best.broker_id} has the longest log among the candidates "
            f"(log end offset {best.log_end_offset}); chosen by log end offset only: epoch unknown "
            f"for broker(s) {', '.join(map(str, unknown))}"
        )
    if longer:
        others = ", ".join(
            f"broker {c.broker_id}: epoch {c.newest_epoch}, log end offset {c.log_end_offset}" for c in longer
        )
        return (
            f"replica on broker {best.broker_id} holds records of leader epoch {best.newest_epoch}, "
            f"newer than the newest record of every longer log ({others}); a newer epoch beats a "
            f"longer log that ended in an older one (log end offset {best.log_end_offset})"
        )
    return (
        f"replica on broker {best.broker_id} has the longest log among the candidates "
        f"(log end offset {best.log_end_offset}) and records of the newest epoch seen ({best.newest_epoch})"
    )


def choose(partition: PartitionState, gathered: GatherResult, brokers: dict[int, Broker]) -> Choice:
    infos = gathered.for_partition(partition.topic, partition.partition, partition.replicas)
    candidates = [
        info
        for info in infos
        if info.answered and brokers.get(info.broker_id) is not None and brokers[info.broker_id].available
    ]
    epoch_known = bool(candidates) and all(c.newest_epoch is not None for c in candidates)
    position = {info.broker_id: i for i, info in enumerate(infos)}

    def rank(info):
        epoch = info.newest_epoch if epoch_known else 0
        return (-epoch, -info.log_end_offset, position[info.broker_id])

    ordered = sorted(candidates, key=rank)
    best = ordered[0] if ordered else None
    rows = []
    for info in infos:
        broker = brokers.get(info.broker_id)
        if info.error:
            note = info.error
        elif broker is None or not broker.available:
            note = "broker not available"
        else:
            note = "ok"
        lost, at_least = _cost(info, best)
        rows.append(
            ReplicaRow(
                info.broker_id,
                info.newest_epoch,
                info.log_end_offset,
                info in candidates,
                note,
                lost,
                at_least,
            )
        )
    reason = _reason(best, candidates, epoch_known)
    if len(ordered) > 1 and rank(ordered[0])[:2] == rank(ordered[1])[:2]:
        reason += f"; tie with broker {ordered[1].broker_id}, broken by assignment order"
    answered = [i for i in infos if i.answered]
    longest = max((i.log_end_offset for i in answered), default=None)
    kafka_pick = next((b for b in partition.replicas if brokers.get(b) and brokers[b].available), None)
    pick_info = next((i for i in answered if i.broker_id == kafka_pick), None)
    return Choice(
        topic=partition.topic,
        partition=partition.partition,
        replicas=partition.replicas,
        leader_epoch=partition.leader_epoch,
        rows=tuple(rows),
        chosen=best.broker_id if best else None,
        reason=reason,
        kafka_unclean_pick=kafka_pick,
        longest_log_end_offset=longest,
        loss_vs_longest=None if best is None or longest is None else longest - best.log_end_offset,
        kafka_pick_loss_vs_longest=(
            None if pick_info is None or longest is None else longest - pick_info.log_end_offset
        ),
        epoch_known=epoch_known,
    )
