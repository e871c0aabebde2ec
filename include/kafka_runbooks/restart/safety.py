"""Availability rules: may this node be restarted right now without hurting clients?

A broker restart removes its replicas from every ISR it is in. If that takes any
partition below ``min.insync.replicas``, producers with ``acks=all`` are rejected until
it returns. The rules are Strimzi's KafkaRoller's (and Cruise Control's):

- never while a partition the broker hosts already has ISR < min ISR;
- never while a partition it hosts has ISR == min ISR *and* the broker is in that ISR;
- topics whose replication factor is at or below min ISR are ignored (they can never
  tolerate a restart; refusing forever would block every roll).

A KRaft controller may restart only while a majority of all voters, not counting it,
are caught up by the quorum leader's own clock: then the quorum keeps committing while
it is away, and two voters are never away at once.

During a reassignment a partition's replica list holds both the replicas being added
and those being removed, so its length is neither the replication factor before nor
after. Kafka's own under-replicated count uses the factor before (replicas minus
adding); the rule that ignores topics with RF <= min ISR uses the larger of the two
(before, and after = replicas minus removing): a move of an RF-2 topic stays an RF-2
topic, and a reassignment that lowers the RF is judged by the RF it still has. Removing
replicas in the ISR count: they stay in it until every target replica is in the ISR,
which cannot happen while the restarted broker (a target) is away.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_runbooks.evidence import QuorumView
from kafka_runbooks.model import ClusterState, PartitionState, Quorum


def rf_before(p: PartitionState) -> int:
    """The replication factor before the reassignment (all of it if there is none)."""
    return len([r for r in p.replicas if r not in p.adding_replicas])


def rf_after(p: PartitionState) -> int:
    """The replication factor once the reassignment completes."""
    return len([r for r in p.replicas if r not in p.removing_replicas])


def effective_rf(p: PartitionState) -> int:
    """What the min-ISR rules compare with: the larger of the factor before and after."""
    return max(rf_before(p), rf_after(p))


def under_replicated(p: PartitionState) -> bool:
    """Kafka's definition: fewer in the ISR than the replicas it had before any reassignment."""
    return p.has_leader and len(p.isr) < rf_before(p)


def at_min_isr(p: PartitionState) -> bool:
    """One more replica out of the ISR and acks=all producers are refused (False where the min ISR
    was not read: callers that must act refuse such partitions through ``broker_blockers``)."""
    m = p.min_insync_replicas
    return m is not None and p.has_leader and len(p.isr) == m and effective_rf(p) > m


def with_reassignments(state: ClusterState, inflight: dict) -> ClusterState:
    """The state with each partition's adding and removing replicas filled in.

    ``inflight`` is ``ClusterAdmin.list_reassignments()``. It can be ahead of the
    broker metadata (FIELD_NOTES): only replicas the metadata lists are kept.
    """
    from dataclasses import replace

    if not inflight:
        return state
    parts = []
    for p in state.partitions:
        entry = inflight.get((p.topic, p.partition))
        if entry:
            p = replace(
                p,
                adding_replicas=tuple(r for r in entry.get("adding", ()) if r in p.replicas),
                removing_replicas=tuple(r for r in entry.get("removing", ()) if r in p.replicas),
            )
        parts.append(p)
    return replace(state, partitions=parts)


@dataclass(frozen=True)
class Verdict:
    node_id: int
    safe: bool
    reasons: tuple[str, ...] = ()
    observed: dict = field(default_factory=dict)


def broker_blockers(
    partitions: list[PartitionState], broker_id: int, silent: Mapping[int, str] | None = None
) -> list[str]:
    """Why restarting ``broker_id`` would take a partition below min ISR (empty: it would not).

    ``silent``: brokers that did not answer a request on their own listener, with why. They are
    not counted in any ISR: a broker that died without a controlled shutdown stays in its ISRs
    (and registered, unfenced) until its session times out, so the ISR alone would count it."""
    silent = silent or {}
    blockers = []
    for p in partitions:
        if broker_id not in p.replicas:
            continue
        if p.min_insync_replicas is None:
            blockers.append(f"{p.name}: min.insync.replicas was not read, so the restart's effect is unknown")
            continue
        if effective_rf(p) <= p.min_insync_replicas:
            continue
        gone = [b for b in p.isr if b in silent and b != broker_id]
        isr = len(p.isr) - len(gone)
        shown = f"ISR {list(p.isr)}" + (f" (broker(s) {gone} do not answer themselves)" if gone else "")
        if isr < p.min_insync_replicas:
            blockers.append(f"{p.name}: {shown} is already below min.insync.replicas={p.min_insync_replicas}")
        elif isr == p.min_insync_replicas and broker_id in p.isr:
            blockers.append(
                f"{p.name}: {shown} is at min.insync.replicas={p.min_insync_replicas} "
                f"and includes broker {broker_id}"
            )
    return blockers


def broker_verdict(
    state: ClusterState, broker_id: int, silent: Mapping[int, str] | None = None, max_listed: int = 20
) -> Verdict:
    """Whether restarting ``broker_id`` would take a partition below min ISR: the blockers (first
    ``max_listed``) and what was counted; ``silent`` as in :func:`broker_blockers`."""
    hosted = state.hosted_by(broker_id)
    blockers = broker_blockers(hosted, broker_id, silent)
    return Verdict(
        broker_id,
        safe=not blockers,
        reasons=tuple(blockers[:max_listed])
        + ((f"... and {len(blockers) - max_listed} more",) if len(blockers) > max_listed else ()),
        observed={
            "partitions_hosted": len(hosted),
            "leaders": sum(1 for p in hosted if p.leader == broker_id),
            "in_isr": sum(1 for p in hosted if broker_id in p.isr),
            "adding_replica_of": sum(1 for p in hosted if broker_id in p.adding_replicas),
            "removing_replica_of": sum(1 for p in hosted if broker_id in p.removing_replicas),
            "under_replicated": sum(1 for p in hosted if under_replicated(p)),
            "at_min_isr": sum(1 for p in hosted if at_min_isr(p)),
            "blocking_partitions": len(blockers),
            "not_answering": dict(sorted((silent or {}).items())),
        },
    )


def controller_verdict(quorum: Quorum, node_id: int, down: frozenset[int] = frozenset()) -> Verdict:
    """May controller ``node_id`` go away now? Only while a majority of all voters stays
    caught up without it, so the quorum keeps committing: never two voters away at once.

    Caught up is the evidence room's rule (:class:`kafka_runbooks.evidence.QuorumView`: fetch and
    catch-up within the cluster's fetch timeout, by the leader's clock alone), never the worker's
    clock; a voter whose state is unknown, or whose process the back end says is down, is not.
    """
    view = QuorumView(quorum)
    judged = view.voters()
    voters = [v.node_id for v in quorum.voters]
    caught_up_others = sorted(v for v in view.caught_up_voters() if v != node_id and v not in down)
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
        observed={
            "voters": voters,
            "caught_up_others": caught_up_others,
            "leader": quorum.leader_id,
            "leader_now": view.now.isoformat(),
            "fetch_timeout_ms": view.fetch_timeout_ms,
            "process_down": sorted(down),
            "lag_ms": judged[node_id].caught_up_ms_ago if node_id in judged else None,
            "others_lag_ms": {str(v): judged[v].caught_up_ms_ago for v in voters if v != node_id},
            "others": {str(v): judged[v].why for v in voters if v != node_id},
        },
    )


def restart_order(nodes: list[int], ready: dict[int, bool], active_controller: int | None) -> list[int]:
    """Unready nodes first (they are down anyway), then ready ones, the active controller last."""

    def key(node_id: int) -> tuple[int, int, int]:
        """Sort key: the active controller last, ready nodes after unready ones (unknown counts as
        unready), then by id."""
        return (1 if node_id == active_controller else 0, 1 if ready.get(node_id, False) else 0, node_id)

    return sorted(dict.fromkeys(nodes), key=key)


def _cell(value) -> str:
    """One Markdown table cell: pipes escaped, line breaks folded."""
    return str(value).replace("|", "\\|").replace("\n", " ")


#: a gate row's lane (``restart.lanes``) as the approver reads it; rows without one: alone
_LANE_CELL = {
    "broker": "beside a follower controller (broker lane)",
    "controller": "beside a broker (controller lane)",
    None: "alone",
    "alone": "alone",
}


def _row_value(position: int, row: dict, key: str):
    """One cell's value: the row's position, its lane in words, or the row's own field."""
    if key == "position":
        return position
    if key == "lane":
        return _LANE_CELL.get(row.get("lane"), row.get("lane"))
    return row.get(key, "")


def gate_markdown(rows: list[dict]) -> str:
    """The approval gate's evidence: one table row per node, in restart order, with whether it
    restarts alone or side by side with a node of the other lane.

    A Markdown table because the Airflow UI renders tables in a gate's body but folds a
    fenced code block into one line (FIELD_NOTES, Airflow 3.3.2).
    """
    header = (
        "| # | node | role | partitions hosted | leaders | under-replicated now | at min ISR now "
        "| in a reassignment | controller lag (ms) | restart safe now? | restarts |"
    )
    lines = [header, "|" + "---|" * 11]
    for i, row in enumerate(rows, 1):
        lines.append(
            "| "
            + " | ".join(
                _cell(_row_value(i, row, k))
                for k in (
                    "position",
                    "node",
                    "role",
                    "partitions_hosted",
                    "leaders",
                    "under_replicated",
                    "at_min_isr",
                    "reassigning",
                    "controller_lag",
                    "verdict",
                    "lane",
                )
            )
            + " |"
        )
    return "\n".join(lines)
