"""After the restart request: the node back (``wait_back``) and back in sync (``wait_isr``).

Back only on restart evidence changed since just before the request, then ready again; a
controller only on quorum progress its new process alone can make. In sync when it is in
every ISR it was in before its restart (partitions it is being added to are followed, not
waited for). A node still starting is waited for, never restarted again.
"""

from __future__ import annotations

from collections.abc import Callable

from kafka_runbooks.evidence import silent_brokers
from kafka_runbooks.probes import BrokerStateReading
from kafka_runbooks.restart.backends import restart_observed
from kafka_runbooks.restart.observe import NodeObserver
from kafka_runbooks.restart.progress import (
    BROKER,
    CONTROLLER,
    DONE,
    WAIT_ISR,
    NodeProgress,
    NodeWork,
    RollFailed,
    RollOptions,
    RollState,
)
from kafka_runbooks.restart.quorum import QuorumReadings
from kafka_runbooks.restart.states import WAIT_STARTING, assess


class RejoinWatch(NodeWork):
    """The ``wait_back`` and ``wait_isr`` phases of a node whose restart was requested."""

    def __init__(
        self,
        observer: NodeObserver,
        quorum: QuorumReadings,
        checkpoint: Callable[[RollState], None],
        clock=None,
        logger=None,
    ) -> None:
        super().__init__(clock, logger)
        self.observer = observer
        self.quorum = quorum
        self.checkpoint = checkpoint

    def wait_back(self, state: RollState, node: NodeProgress) -> None:
        """Wait for restart evidence changed since the request, then for the node to be ready
        (a controller: for quorum progress only its new process can make)."""
        opts = state.options
        ready, facts, reading = self.observer.observe(node.node_id, node.role, node.quorum_offset_at_restart)
        self.observer.remember_counts(node, reading)
        evidence = self.observer.evidence(node.node_id, reading)
        node.last_evidence = evidence
        restarted, why = restart_observed(node.evidence_before, evidence)
        if node.role == CONTROLLER and node.quorum_offset_at_restart is None:
            ready = False  # no offset to pass yet: the answer above may be the old process's
            if restarted:
                self.mark_quorum_offset(state, node)
        facts["restart_evidence"] = evidence
        facts["restart_observed"] = why
        if restarted and not node.restart_observed:
            node.restart_observed = why
            self._record(
                "restart",
                node,
                "restarted",
                f"observed: {why}",
                observed={"evidence_before": node.evidence_before, "evidence_now": evidence},
            )
        if restarted and ready:
            self._record("readiness", node, "back", f"restarted ({why}) and ready again", observed=facts)
            self._enter(node, WAIT_ISR)
            return
        if not restarted:
            self._record("readiness", node, "wait", f"restart not observed yet: {why}", observed=facts)
        elif assess(reading).kind == WAIT_STARTING:
            node.last_reading = reading.as_dict()
            self._record(
                "broker-state",
                node,
                "starting: waiting, never restarting it again",
                f"restarted ({why}), state {assess(reading).state_name}, {self.observer.counts_text(node, reading)}; "
                "a restart now would send it back to the start of its log recovery",
                observed=facts,
            )
        else:
            self._record("readiness", node, "wait", f"restarted ({why}), not ready yet", observed=facts)
        if self._elapsed_s(node) >= opts.operation_timeout_s:
            node.attempts += 1
            node.phase_since_ms = self.clock()
            if node.attempts >= opts.max_attempts:
                raise RollFailed(self._not_back_reason(node, reading, restarted, why))

    def mark_quorum_offset(self, state: RollState, node: NodeProgress) -> None:
        """Once the new process is seen, record the leader's log end offset: the old process is
        gone, so only the new one can be reported fetching past it. Checkpointed at once."""
        offset, leader_id = self.quorum.leader_log_end()
        if offset is None:
            self._record("readiness", node, "wait", "the quorum leader's log end offset is unknown now")
            return
        node.quorum_offset_at_restart = offset
        self.checkpoint(state)
        self._record(
            "readiness",
            node,
            "wait for quorum progress",
            f"new process seen; back once the quorum leader {leader_id} reports it fetching "
            f"past offset {offset} of the metadata log",
            observed={"leader": leader_id, "leader_log_end_offset": offset},
        )

    def wait_isr(self, state: RollState, node: NodeProgress) -> None:
        """Done when the node is back in every ISR it was in and, a broker, answers a request itself
        (the ISR alone keeps a broker that died right after rejoining); a controller: caught up with
        the quorum."""
        opts = state.options
        if node.role == CONTROLLER and node.quorum_offset_at_restart is None:
            self.mark_quorum_offset(state, node)  # a state file from before the offset was kept
        missing, following = self._missing_from_isr(node, opts)
        silent = (
            silent_brokers(self.observer.admin, [node.node_id]) if node.role == BROKER and not missing else {}
        )
        if silent:  # the ISR keeps a broker that died a moment ago until its session times out
            self._not_answering(node, opts, silent[node.node_id])
            return
        if not missing:
            self._record(
                "isr",
                node,
                "done",
                "back in the ISR of every partition it was in the ISR of before its restart"
                + (
                    f"; adding replica of {following['adding']} partition(s) being reassigned: "
                    f"{following['caught_up']} caught up, {len(following['catching_up'])} still catching up"
                    if following.get("adding")
                    else ""
                )
                if node.role == BROKER
                else "caught up with the metadata quorum",
                observed=following or None,
            )
            self._enter(node, DONE)
            return
        if self._elapsed_s(node) >= opts.operation_timeout_s * max(1, opts.max_attempts):
            raise RollFailed(
                f"{node.role} {node.node_id} is not back in the ISR of {len(missing)} partition(s) "
                f"it was in before its restart: {missing[:20]}"
            )
        self._record(
            "isr",
            node,
            "wait",
            f"not yet back in the ISR of {len(missing)} partition(s) it was in before its restart",
            observed={"partitions": missing[:20], **following},
        )

    def _not_answering(self, node: NodeProgress, opts: RollOptions, why: str) -> None:
        """Back in its ISRs by the metadata but silent itself: wait (it may be a blip), then give up."""
        if self._elapsed_s(node) >= opts.operation_timeout_s * max(1, opts.max_attempts):
            raise RollFailed(f"broker {node.node_id} is back in its ISRs but does not answer itself: {why}")
        self._record(
            "isr",
            node,
            "wait",
            f"back in its ISRs by the metadata, but it does not answer itself ({why}): the ISR keeps a "
            "broker that just died until its session times out",
            observed={"not_answering": why},
        )

    def _not_back_reason(
        self, node: NodeProgress, reading: BrokerStateReading | None, restarted: bool, why: str
    ) -> str:
        waited = f"{node.attempts} timeouts"
        if not restarted:
            return (
                f"{node.role} {node.node_id}: its restart was requested but never observed ({waited}): {why}; "
                f"evidence before the request {node.evidence_before}, last seen {node.last_evidence}"
            )
        if assess(reading).kind == WAIT_STARTING:
            return (
                f"broker {node.node_id} {self.observer.starting_headline(node, reading)} after its restart "
                f"(state {assess(reading).state_name}): {self.observer.counts_text(node, reading)}; "
                "not restarting it again"
            )
        return f"{node.role} {node.node_id} was restarted ({why}) but did not become ready ({waited})"

    def _missing_from_isr(self, node: NodeProgress, opts: RollOptions) -> tuple[list[str], dict]:
        """Partitions whose ISR it was in before its restart and is not in now, and how the
        partitions it is being added to (not in their ISR before) are getting on."""
        if node.role == CONTROLLER:
            if node.quorum_offset_at_restart is None:  # not recorded yet: nothing proves it is back
                return ["__cluster_metadata-0"], {}
            ready, _, _ = self.observer.observe(node.node_id, node.role, node.quorum_offset_at_restart)
            return ([] if ready else ["__cluster_metadata-0"]), {}
        me = node.node_id
        hosted = self.observer.cluster_state().hosted_by(me)
        before = None if node.isr_before is None else set(node.isr_before)

        def was_in_isr(p) -> bool:
            # a state file from before isr_before was kept: every partition it does not join as an adding replica
            """Whether the node was in ``p``'s ISR before its restart (as recorded, or for older state
            files: not an adding replica)."""
            return p.name in before if before is not None else me not in p.adding_replicas

        missing = [p.name for p in hosted if p.has_leader and was_in_isr(p) and me not in p.isr]
        adding = [p for p in hosted if me in p.adding_replicas and not was_in_isr(p)]
        following = {}
        if adding:
            following = {
                "adding": len(adding),
                "caught_up": sum(1 for p in adding if me in p.isr),
                "catching_up": [p.name for p in adding if me not in p.isr][:20],
            }
        return missing, following
