"""The safety check just before a node is restarted: availability must hold without it.

A broker: no partition it hosts would drop below min.insync.replicas, counting in its ISRs only
the brokers that answer a request themselves; a controller: a
majority of all voters stays caught up without it, by the quorum leader's clock; and the
active controller never restarts beside another node in flight. Unsafe: wait, and after
the operation timeout give up (the roll fails, nothing was restarted).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kafka_runbooks.restart.observe import NodeObserver
from kafka_runbooks.restart.progress import (
    BROKER,
    CONTROLLER,
    RESTART,
    NodeProgress,
    NodeWork,
    RollFailed,
    RollState,
)
from kafka_runbooks.restart.quorum import QuorumReadings
from kafka_runbooks.restart.safety import broker_verdict, controller_verdict


class AvailabilityCheck(NodeWork):
    """The ``check_availability`` phase: moves a node to ``restart`` only when it is safe."""

    def __init__(self, observer: NodeObserver, quorum: QuorumReadings, clock=None, logger=None) -> None:
        super().__init__(clock, logger)
        self.observer = observer
        self.quorum = quorum

    def check(self, state: RollState, node: NodeProgress) -> None:
        """Restart only when availability holds without the node; wait, then give up, otherwise."""
        opts = state.options
        if node.role == BROKER:
            cluster = self.observer.cluster_state()
            verdict = broker_verdict(cluster, node.node_id, self._silent_isr_members(cluster, node.node_id))
            node.isr_before = sorted(p.name for p in cluster.hosted_by(node.node_id) if node.node_id in p.isr)
        else:
            quorum = self.quorum.describe()
            verdict = controller_verdict(quorum, node.node_id, self.quorum.voters_down(quorum, node.node_id))
        verdict = self._alone_if_leading(state, node, verdict)
        if verdict.safe:
            self._record(
                "availability",
                node,
                "safe to restart",
                "no partition it hosts would drop below min.insync.replicas"
                if node.role == BROKER
                else "a majority of all voters stays caught up without it (by the leader's clock)",
                observed=verdict.observed,
            )
            self._enter(node, RESTART)
            return
        if self._elapsed_s(node) < opts.operation_timeout_s:
            self._record(
                "availability",
                node,
                "wait",
                "; ".join(verdict.reasons),
                observed=verdict.observed,
                level=logging.WARNING,
            )
            return
        self._record(
            "availability",
            node,
            "give up",
            "; ".join(verdict.reasons),
            observed=verdict.observed,
            level=logging.ERROR,
        )
        raise RollFailed(
            f"{node.role} {node.node_id} was not restarted: restarting it would hurt availability "
            f"for {opts.operation_timeout_s:.0f}s: " + "; ".join(verdict.reasons)
        )

    def _silent_isr_members(self, cluster, node_id: int) -> dict[int, str]:
        """The other brokers in the ISRs of the node's partitions that do not answer a request on
        their own listener, with why: a broker that died without a controlled shutdown keeps its
        place in those ISRs until its session times out, and restarting the node beside it would
        take them below min ISR. Asked of each broker itself, once per check."""
        others = sorted({b for p in cluster.hosted_by(node_id) for b in p.isr if b != node_id})
        answers = {b: self.observer.admin.broker_answers(b) for b in others}
        return {b: why for b, why in answers.items() if why is not None}

    def _alone_if_leading(self, state: RollState, node: NodeProgress, verdict):
        """The active controller restarts with no other node in flight, whatever the plan's lanes
        said: a broker's controlled shutdown and registration need it, and leadership can move
        after the plan (the roll is then stricter than planned, never looser). Read only when
        another node is in flight; a quorum with no known leader counts as the worst case."""
        others = [n for n in state.in_flight() if n is not node]
        if not verdict.safe or not others:
            return verdict
        if node.role == BROKER and all(n.role != CONTROLLER for n in others):
            return verdict
        leader = self.quorum.leader_id()
        known = leader is not None
        controllers = [n.node_id for n in [node, *others] if n.role == CONTROLLER]
        if known and leader not in controllers:
            return verdict
        who = f"controller {leader} leads the quorum" if known else "the quorum leader is unknown"
        return replace(
            verdict,
            safe=False,
            reasons=(
                f"{who}: the active controller restarts only with no other node in flight "
                f"(in flight: {[n.node_id for n in others]})",
            ),
        )
