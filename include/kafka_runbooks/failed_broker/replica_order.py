"""A cancelled move's replica order, judged against its order before the move.

Kafka's cancel (AlterPartitionReassignments with a null target) restores a partition's replica
SET, not its order (4.3.1: [1, 2] moving to [2, 3] comes back as [2, 1]), and the first replica is
the preferred leader. The stop (:mod:`kafka_runbooks.failed_broker.stop`) and the executor's give-up
on a silent receiver (:mod:`kafka_runbooks.failed_broker.chunk_silence`) both read the cancelled
partitions back with these rules and put a known order back with a reorder-only reassignment; an
order not known is never guessed. Here, beside the state's names only, so that both can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_runbooks.failed_broker.chunk_state import key, split


def replicas_of(admin, keys: list[str]) -> dict[str, list[int]]:
    """The replicas, in order, that the metadata names now for ``keys``; a partition of a topic that
    no longer exists is absent."""
    topics = sorted({split(k)[0] for k in keys})
    existing = set(admin.list_topics()) if topics else set()
    parts = admin.describe_partitions([t for t in topics if t in existing]) if topics else []
    wanted = set(keys)
    return {key(p.topic, p.partition): list(p.replicas) for p in parts if key(p.topic, p.partition) in wanted}


@dataclass(frozen=True)
class OrderCheck:
    """Each cancelled partition's replica order against its origin (its replicas before the move, in
    order). Kafka's cancel restores the replica SET, not its order (4.3.1: [1, 2] moving to [2, 3]
    comes back as [2, 1]), and the first replica is the preferred leader."""

    reorder: dict[str, list[int]] = field(default_factory=dict)  # origin's replicas, another order: put back
    in_order: list[str] = field(default_factory=list)
    set_differs: dict[str, list[int]] = field(default_factory=dict)  # not the origin's replicas: left
    origin_unknown: list[str] = field(default_factory=list)  # never guessed: reported
    unknown: list[str] = field(default_factory=list)  # its cancel not confirmed yet: still in flight
    left_alone: list[str] = field(default_factory=list)  # in flight to someone else's target: theirs
    gone: list[str] = field(default_factory=list)  # its topic no longer exists: no order to keep

    @property
    def settled(self) -> bool:
        """Nothing in flight or unread, and every known origin's replica set is back: the read can be
        trusted (a broker's metadata can lag the controller for a moment after the cancel)."""
        return not self.unknown and not self.set_differs


def order_check(
    keys: list[str],
    origins: dict[str, list[int]],
    replicas: dict[str, list[int]],
    inflight: set[str],
    retargeted: frozenset[str] | set[str] = frozenset(),
) -> OrderCheck:
    """Sort the cancelled partitions ``keys`` by how their replicas now (``replicas``, from the
    metadata; a partition missing there has lost its topic) stand against their ``origins``. One in
    flight (``inflight``) is not judged yet; one in flight to someone else's target (``retargeted``)
    is theirs."""
    check = OrderCheck()
    for k in sorted(set(keys)):
        origin, now = origins.get(k), replicas.get(k)
        if origin is None:
            check.origin_unknown.append(k)
        elif k in retargeted:
            check.left_alone.append(k)
        elif k in inflight:
            check.unknown.append(k)
        elif now is None:
            check.gone.append(k)
        elif now == origin:
            check.in_order.append(k)
        elif set(now) == set(origin) and len(now) == len(origin):
            check.reorder[k] = list(origin)
        else:
            check.set_differs[k] = now
    return check
