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

Clean before unclean, from the controller's own record (KIP-966), judged by the evidence room
(:func:`kafka_runbooks.evidence.committed_holders`): the replicas in the ISR or the ELR hold
every committed record. The last known ELR does not: Kafka's controller drops a replica that
shut down uncleanly from the ELR (its unflushed, acknowledged tail may be gone) and counts
electing from the last known ELR as an unclean election. Where a clean replica answers, only
they are candidates (no acknowledged record is lost). Where they exist but none answers,
the answer is the clean path (bring one back, Kafka elects it) and no replica is chosen,
unless the operator explicitly allows losing committed records (``allow_committed_loss``);
the longest live log is then what is offered, named as lacking committed records. The
loss against the committed offset is never stated as 0 unless the chosen replica is one
of those that hold every committed record: the committed offset lives on the replicas
that did not answer, so it is "unknown", with what the table does know beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kafka_runbooks.evidence import committed_holders, last_known_elr
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
    # KIP-966: replicas the controller records as holding every committed record (ISR, ELR; never
    # the last known ELR), in assignment order; empty = the controller names none
    clean_replicas: tuple[int, ...] = ()
    chosen_is_clean: bool = False  # the chosen replica is one of clean_replicas: nothing committed is lost
    clean_path: str = ""  # what to do instead of an unclean election (a clean replica exists, none answered)
    unclean_option: int | None = None  # longest live log lacking committed records (offered only if allowed)
    committed_loss: str = (
        ""  # acknowledged records the choice (or the option) loses, in words; never "0" unless clean
    )

    @property
    def name(self) -> str:
        """``topic-partition``, the name Kafka's tools and logs use."""
        return f"{self.topic}-{self.partition}"

    def row(self, broker_id: int) -> ReplicaRow | None:
        """What broker ``broker_id`` reported for this partition, or None when it reported nothing
        (unknown, not empty)."""
        return next((r for r in self.rows if r.broker_id == broker_id), None)

    def as_dict(self) -> dict:
        """The choice as JSON for the run's files and the approval (read back by :meth:`from_dict`)."""
        d = asdict(self)
        d["replicas"] = list(self.replicas)
        d["rows"] = [asdict(r) for r in self.rows]
        return d

    @staticmethod
    def from_dict(d: dict) -> Choice:
        """Read a choice written by :meth:`as_dict`; fields it does not know are ignored, a missing
        ``clean_replicas`` is none."""
        fields = {k: v for k, v in d.items() if k in Choice.__dataclass_fields__}
        fields["replicas"] = tuple(d["replicas"])
        fields["rows"] = tuple(ReplicaRow(**r) for r in d["rows"])
        fields["clean_replicas"] = tuple(d.get("clean_replicas") or ())
        return Choice(**fields)

    @property
    def loses_committed(self) -> bool:
        """Electing the chosen replica may lose acknowledged records (it is not known to hold them all)."""
        return self.chosen is not None and not self.chosen_is_clean


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


def clean_replicas(partition: PartitionState) -> tuple[int, ...]:
    """Replicas the controller records as holding every committed record (ISR, ELR: KIP-966), in
    assignment order (the evidence room's rule). A replica left out is not known to hold them."""
    return committed_holders(partition)


def _committed_loss(
    best, clean: tuple[int, ...], infos, hints: tuple[int, ...] = (), no_elr: str | None = None
) -> str:
    """The acknowledged records the election of ``best`` loses, in words; "0" only for a clean replica.

    The committed offset is on the clean replicas; when none of them answered it is unknown,
    and what the longest answered clean log (if any) holds beyond ``best`` is said as a bound.
    """
    if best is None:
        return "nothing elected"
    if best.broker_id in clean:
        return f"0: broker {best.broker_id} holds every committed record (ISR/ELR)"
    if not clean:
        hint = (
            f"; broker {best.broker_id} is only in the last known ELR (it left uncleanly: its unflushed "
            "acknowledged tail may be gone)"
            if best.broker_id in hints
            else ""
        )
        named = no_elr or "the controller names no replica holding every committed record"
        return f"unknown: {named}" + hint
    answered = [i for i in infos if i.broker_id in clean and i.answered]
    beyond = max((i.log_end_offset - best.log_end_offset for i in answered), default=None)
    bound = f"; up to {beyond} (what a clean replica holds beyond it)" if beyond is not None else ""
    return (
        f"unknown, may be above 0: broker(s) {', '.join(map(str, clean))} hold every committed record "
        f"and did not answer; the committed offset is not known{bound}"
    )


def _clean_path(partition: PartitionState, clean: tuple[int, ...], brokers: dict[int, Broker]) -> str:
    """What to do instead of an unclean election when the clean replicas exist but none answered."""
    states = ", ".join(f"{b} ({_broker_state(brokers.get(b))})" for b in clean)
    return (
        f"CLEAN PATH: broker(s) {states} hold every committed record of {partition.name} "
        "(ISR/ELR). Bring one back: after a clean shutdown it stays in the ELR and "
        "the controller elects it by itself; re-run this runbook once it is up. Electing another "
        "replica loses acknowledged records: only with allow_committed_loss"
    )


def _broker_state(broker: Broker | None) -> str:
    """A replica's broker in words, from its registration (whether it serves is its own answer)."""
    if broker is None or not broker.alive:
        return "down"
    return "not answering" if broker.available else "fenced"


def _rows(infos, candidates, best, brokers) -> tuple[ReplicaRow, ...]:
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
    return tuple(rows)


def _rank_candidates(candidates, infos):
    """Candidates best first (newest epoch when every one is known, longest log, assignment order)."""
    epoch_known = bool(candidates) and all(c.newest_epoch is not None for c in candidates)
    position = {info.broker_id: i for i, info in enumerate(infos)}

    def rank(info):
        """Sort key, best first: newest leader epoch (only when every candidate's is known), longest log,
        assignment order."""
        epoch = info.newest_epoch if epoch_known else 0
        return (-epoch, -info.log_end_offset, position[info.broker_id])

    return sorted(candidates, key=rank), rank, epoch_known


def _choice_reason(partition, option, best, ordered, rank, sets, epoch_known: bool) -> str:
    """Why this replica (or none): clean first, the withheld option named with what it lacks."""
    clean, clean_live, live = sets
    reason = _reason(option, clean_live or live, epoch_known)
    if clean_live:
        reason = f"holds every committed record (ISR/ELR {list(clean)}); " + reason
    elif option is not None and best is None:
        lacking = "not known to hold every committed record" if not clean else "lacks committed records"
        path = _clean_path_short(partition, clean)
        reason = path + (
            f"; the longest live log (broker {option.broker_id}) {lacking}: "
            "not chosen without allow_committed_loss"
        )
    if best is not None and len(ordered) > 1 and rank(ordered[0])[:2] == rank(ordered[1])[:2]:
        reason += f"; tie with broker {ordered[1].broker_id}, broken by assignment order"
    return reason


def _clean_path_short(partition, clean) -> str:
    if clean:
        return f"clean path: broker(s) {', '.join(map(str, clean))} hold every committed record and did not answer"
    return f"no replica is known to hold every committed record of {partition.name}"


def choose(
    partition: PartitionState,
    gathered: GatherResult,
    brokers: dict[int, Broker],
    allow_committed_loss: bool = False,
    no_elr: str | None = None,
) -> Choice:
    """The replica to elect: a clean one if any answered; else the clean path, or (only when the
    operator allows losing committed records) the best live log, named as lacking them. ``no_elr``:
    what to say where the cluster keeps no ELR (:func:`kafka_runbooks.evidence.no_elr_words`), so a
    partition with no clean replica named is "unknown", never "none are clean"."""
    infos = gathered.for_partition(partition.topic, partition.partition, partition.replicas)
    live = [i for i in infos if i.answered and brokers.get(i.broker_id) and brokers[i.broker_id].available]
    clean = clean_replicas(partition)
    clean_live = [i for i in live if i.broker_id in clean]
    ordered, rank, epoch_known = _rank_candidates(clean_live or live, infos)
    option = ordered[0] if ordered else None
    clean_path = _clean_path(partition, clean, brokers) if clean and not clean_live else ""
    withheld = option is not None and not clean_live and not allow_committed_loss
    best = None if withheld else option
    candidates = [] if withheld else (clean_live or live)
    reason = _choice_reason(partition, option, best, ordered, rank, (clean, clean_live, live), epoch_known)
    answered = [i for i in infos if i.answered]
    longest = max((i.log_end_offset for i in answered), default=None)
    kafka_pick = next((b for b in partition.replicas if brokers.get(b) and brokers[b].available), None)
    pick_info = next((i for i in answered if i.broker_id == kafka_pick), None)
    return Choice(
        topic=partition.topic,
        partition=partition.partition,
        replicas=partition.replicas,
        leader_epoch=partition.leader_epoch,
        rows=_rows(infos, candidates, best, brokers),
        chosen=best.broker_id if best else None,
        reason=reason,
        kafka_unclean_pick=kafka_pick,
        longest_log_end_offset=longest,
        loss_vs_longest=None if best is None or longest is None else longest - best.log_end_offset,
        kafka_pick_loss_vs_longest=(
            None if pick_info is None or longest is None else longest - pick_info.log_end_offset
        ),
        epoch_known=epoch_known,
        clean_replicas=clean,
        chosen_is_clean=best is not None and best.broker_id in clean,
        clean_path=clean_path,
        unclean_option=option.broker_id if option is not None and option.broker_id not in clean else None,
        committed_loss=_committed_loss(option, clean, infos, last_known_elr(partition), no_elr),
    )
