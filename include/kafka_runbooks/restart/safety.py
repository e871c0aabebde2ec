"""Availability rules: may this node be restarted right now without hurting clients?

A broker restart removes its replicas from every ISR it is in. If that takes any
partition below ``min.insync.replicas``, producers with ``acks=all`` are rejected until
it returns. The rules are Strimzi's KafkaRoller's (and Cruise Control's):

- never while a partition the broker hosts already has ISR < min ISR;
- never while a partition it hosts has ISR == min ISR *and* the broker is in that ISR;
- topics whose replication factor is at or below min ISR are ignored (they can never
  tolerate a restart; refusing forever would block every roll).

A KRaft controller may restart only while a majority of all voters, not counting it,
are caught up: then the quorum keeps committing while it is away.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_runbooks.model import ClusterState, PartitionState, Quorum


@dataclass(frozen=True)
class Verdict:
    node_id: int
    safe: bool
    reasons: tuple[str, ...] = ()
    observed: dict = field(default_factory=dict)


def broker_blockers(partitions: list[PartitionState], broker_id: int) -> list[str]:
    """Why restarting ``broker_id`` would take a partition below min ISR (empty: it would not)."""
    blockers = []
    for p in partitions:
        if broker_id not in p.replicas or p.replication_factor <= p.min_insync_replicas:
            continue
        isr = len(p.isr)
        if isr < p.min_insync_replicas:
            blockers.append(
                f"{p.name}: ISR {list(p.isr)} is already below min.insync.replicas={p.min_insync_replicas}"
            )
        elif isr == p.min_insync_replicas and broker_id in p.isr:
            blockers.append(
                f"{p.name}: ISR {list(p.isr)} is at min.insync.replicas={p.min_insync_replicas} "
                f"and includes broker {broker_id}"
            )
    return blockers


def broker_verdict(state: ClusterState, broker_id: int, max_listed: int = 20) -> Verdict:
    hosted = state.hosted_by(broker_id)
    blockers = broker_blockers(hosted, broker_id)
    return Verdict(
        broker_id,
        safe=not blockers,
        reasons=tuple(blockers[:max_listed])
        + ((f"... and {len(blockers) - max_listed} more",) if len(blockers) > max_listed else ()),
        observed={"partitions_hosted": len(hosted), "blocking_partitions": len(blockers)},
    )


def controller_verdict(quorum: Quorum, node_id: int, now_ms: int, max_lag_ms: int = 5_000) -> Verdict:
    voters = [v.node_id for v in quorum.voters]
    caught_up_others = [v for v in quorum.caught_up_voters(now_ms, max_lag_ms) if v != node_id]
    needed = len(voters) // 2 + 1
    safe = len(caught_up_others) >= needed
    reasons = (
        ()
        if safe
        else (
            f"only {len(caught_up_others)} other voter(s) {caught_up_others} are caught up; "
            f"the quorum of {len(voters)} needs {needed} while controller {node_id} restarts",
        )
    )
    return Verdict(
        node_id,
        safe,
        reasons,
        observed={"voters": voters, "caught_up_others": caught_up_others, "leader": quorum.leader_id},
    )


def restart_order(nodes: list[int], ready: dict[int, bool], active_controller: int | None) -> list[int]:
    """Unready nodes first (they are down anyway), then ready ones, the active controller last."""

    def key(node_id: int) -> tuple[int, int, int]:
        return (1 if node_id == active_controller else 0, 1 if ready.get(node_id, False) else 0, node_id)

    return sorted(dict.fromkeys(nodes), key=key)
