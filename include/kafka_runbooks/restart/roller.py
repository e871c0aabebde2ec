"""The rolling-restart state machine: one broker and one follower controller at a time at
most (``restart.lanes``), never below min ISR, never restarting a broker that is recovering
its logs.

Per node: ``wait_ready`` -> ``check_availability`` -> ``restart`` -> ``wait_back`` ->
``wait_isr`` -> ``done``. Each call to :meth:`Roller.step` advances as far as the cluster
allows and returns; the caller (an Airflow sensor in reschedule mode, so no worker slot
is held while waiting) persists the :class:`RollState` between calls, which also makes a
cleared run resume where it stopped. Every observation and decision is a decision record.

- A node not ready after the operation timeout is judged by ``restart.states`` (one
  table): STARTING and RECOVERY mean wait, never force.
- ``wait_back`` ends only on restart evidence that changed since just before the request
  (a process start time, pid or pod UID, container restart count read from the same
  source; the Strimzi annotation gone), never on the request having been sent nor on a
  remote time compared with the worker's clock. A controller is back only on quorum
  progress that only its new process can make: once the new process is seen, the quorum
  leader's log end offset is recorded, and the controller counts as back when the leader
  reports it fetching past that offset (DescribeQuorum keeps the old process's caught-up
  time, and a controller shutting down goes on fetching for a moment).
- ``wait_isr`` waits for the ISRs the node was in before its restart; partitions it is
  being added to by a reassignment are followed as catching up, not waited for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import AdminError
from kafka_runbooks.restart.availability import AvailabilityCheck
from kafka_runbooks.restart.observe import NodeObserver
from kafka_runbooks.restart.planning import RollPlanner

# The roll's state lives in restart.progress; its names are still imported from here by the glue,
# the sensor, the bench and the tests (and stored in state files by value, never by path).
from kafka_runbooks.restart.progress import (  # noqa: F401
    BROKER,
    CHECK,
    CONTROLLER,
    DONE,
    RESTART,
    WAIT_BACK,
    WAIT_ISR,
    WAIT_READY,
    NodeProgress,
    NodeWork,
    RollFailed,
    RollInputError,
    RollOptions,
    RollState,
)
from kafka_runbooks.restart.quorum import QuorumReadings
from kafka_runbooks.restart.rejoin import RejoinWatch
from kafka_runbooks.restart.states import WAIT_STARTING, assess


def parse_node_ids(text: str) -> list[int] | None:
    """``"all"`` -> None (every node); ``"1, 2,9001"`` -> [1, 2, 9001]; anything else is an error."""
    text = (text or "").strip()
    if text.lower() == "all":
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise RollInputError("no node ids given: name the brokers/controllers to restart, or 'all'")
    bad = [p for p in parts if not p.isdigit()]
    if bad:
        raise RollInputError(f"not node ids: {bad} (expected e.g. '1,2,9001' or 'all')")
    return [int(p) for p in parts]


class Roller(NodeWork):
    """Drives the roll one step at a time: plans (:class:`RollPlanner`), waits for each node to be
    ready, checks availability (:class:`AvailabilityCheck`), asks the back end to restart, waits
    for it back and in sync (:class:`RejoinWatch`); reads through :class:`NodeObserver`."""

    def __init__(
        self,
        admin: ClusterAdmin,
        backend,
        probe=None,
        clock: Callable[[], int] | None = None,
        logger: logging.Logger | None = None,
        checkpoint: Callable[[RollState], None] | None = None,
    ) -> None:
        super().__init__(clock, logger or logging.getLogger(__name__))
        self.admin = admin
        self.backend = backend
        self.probe = probe
        self.checkpoint = checkpoint or (lambda state: None)
        self.quorum = QuorumReadings(admin, backend)
        self.observer = NodeObserver(admin, backend, probe, self.quorum, self.clock, self.log)
        self.planner = RollPlanner(admin, self.observer, self.clock, self.log)
        self.availability = AvailabilityCheck(self.observer, self.quorum, self.clock, self.log)
        # through self, so a checkpoint set after construction (tests, the bench) is the one called
        self.rejoin = RejoinWatch(
            self.observer, self.quorum, lambda s: self.checkpoint(s), self.clock, self.log
        )

    def plan(self, node_ids: list[int] | None, reason: str, options: RollOptions) -> RollState:
        """Validate the request against the live cluster and order the nodes; touches nothing."""
        return self.planner.plan(node_ids, reason, options)

    def step(self, state: RollState) -> bool:
        """Advance as far as possible; True once every node is done. Raises RollFailed.

        Each pass advances every node in turn (one, or a broker and a follower controller:
        ``restart.lanes``) by one phase step; it stops at the first pass where none moved."""
        for _ in range(50):  # bounded: each pass either waits (returns) or changes a phase
            turn = state.in_turn()
            if not turn:
                return True
            before = [(node.node_id, node.phase) for node in turn]
            for node in turn:
                try:
                    self._advance(state, node)
                except AdminError as exc:
                    # Reads fail while a node restarts (a controller election, a broker
                    # going away): that is a reason to look again, never to act or give up.
                    self._record(
                        "observe",
                        node,
                        "wait",
                        f"the cluster could not be read: {exc}",
                        level=logging.WARNING,
                    )
                    return False
            if [(node.node_id, node.phase) for node in turn] == before:
                return False
        return state.finished

    def _advance(self, state: RollState, node: NodeProgress) -> None:
        """One step of the node's phase: each phase is a method of its own."""
        step = {
            WAIT_READY: self._wait_ready,
            CHECK: self.availability.check,
            RESTART: self._restart,
            WAIT_BACK: self.rejoin.wait_back,
            WAIT_ISR: self.rejoin.wait_isr,
        }.get(node.phase)
        if step is not None:
            step(state, node)

    def _wait_ready(self, state: RollState, node: NodeProgress) -> None:
        """Wait until the node is ready to be checked (never restart one that is starting)."""
        opts = state.options
        ready, facts, reading = self.observer.observe(node.node_id, node.role, None)
        self.observer.remember_counts(node, reading)
        if ready:
            self._record("readiness", node, "ready", "it can be checked for availability", observed=facts)
            self._enter(node, CHECK)
            return
        if assess(reading).kind == WAIT_STARTING:
            node.last_starting_ms = self.clock()
        if self._elapsed_s(node) < opts.operation_timeout_s:
            self._record(
                "readiness",
                node,
                "wait",
                "not ready yet; waiting up to the operation timeout",
                observed=facts,
            )
            return
        self._not_ready_after_timeout(state, node, facts, reading)

    def _restart(self, state: RollState, node: NodeProgress) -> None:
        """Ask the backend to restart the node, with the evidence it must beat recorded first."""
        self._ask_backend(
            state,
            node,
            force=False,
            dry_run_reason="the run is a dry run",
            reason=f"requested: {state.reason}; it counts as restarted only on evidence that changed "
            "from what was read just before this request",
        )

    def _not_ready_after_timeout(self, state, node, facts, reading) -> None:
        """The table in ``restart.states``: starting -> wait (never force); stuck or
        unknown -> fail, or force-restart if the run allows it; an answer that is no BrokerState
        -> fail, never force."""
        opts = state.options
        self.observer.remember_counts(node, reading)
        verdict = assess(reading)
        if verdict.kind == WAIT_STARTING:
            self._wait_while_starting(state, node, facts, reading, verdict)
            return
        since_starting_s = (self.clock() - node.last_starting_ms) / 1000
        if node.last_starting_ms and since_starting_s < opts.operation_timeout_s:
            # it left STARTING/RECOVERY moments ago (registering, being unfenced): a node
            # is judged stuck only after a whole operation timeout of not starting
            self._record(
                "readiness",
                node,
                "wait",
                f"broker state {verdict.state_name}, but it was starting {since_starting_s:.0f}s ago; "
                "judged stuck only after a whole operation timeout without starting",
                observed=facts,
            )
            return
        if not opts.allow_force_restart or not verdict.may_force:
            why = "force restart is off" if verdict.may_force else verdict.never_force
            self._record(
                "readiness",
                node,
                "give up",
                f"not ready, broker state {verdict.state_name} ({verdict.kind}), and {why}",
                observed=facts,
                level=logging.ERROR,
            )
            raise RollFailed(
                f"{node.role} {node.node_id} did not become ready within {opts.operation_timeout_s:.0f}s "
                f"(broker state: {verdict.state_name}); it is not starting and not in log recovery, "
                + ("and force restart is not allowed" if verdict.may_force else f"and {why}")
            )
        self._ask_backend(
            state,
            node,
            force=True,
            dry_run_reason=f"{verdict.kind}, not starting",
            reason=f"not ready for {opts.operation_timeout_s:.0f}s, broker state {verdict.state_name} "
            f"({verdict.kind}: not starting, not in log recovery), and the run allows force",
            observed=facts,
            level=logging.WARNING,
        )

    def _wait_while_starting(self, state, node, facts, reading, verdict) -> None:
        """A broker still starting (log recovery possible) is never restarted: a restart would send
        it back to the start of its recovery. It gets ``max_attempts`` operation timeouts, then
        the run fails with what the counts showed."""
        opts = state.options
        node.attempts += 1
        node.last_reading = reading.as_dict()
        self._record(
            "broker-state",
            node,
            "do not restart: starting (log recovery possible)",
            f"state {verdict.state_name}, {self.observer.counts_text(node, reading)} "
            f"(attempt {node.attempts} of {opts.max_attempts}); a restart would send it back to "
            "the start of its log recovery",
            observed=facts,
        )
        if node.attempts >= opts.max_attempts:
            raise RollFailed(
                f"broker {node.node_id} {self.observer.starting_headline(node, reading)} "
                f"(state {verdict.state_name}): {self.observer.counts_text(node, reading)} "
                f"after {node.attempts} attempts of {opts.operation_timeout_s:.0f}s; not restarting it"
            )
        node.phase_since_ms = self.clock()

    def _ask_backend(
        self,
        state: RollState,
        node: NodeProgress,
        *,
        force: bool,
        dry_run_reason: str,
        reason: str,
        observed: dict | None = None,
        level: int = logging.INFO,
    ) -> None:
        """The one way a restart or a force-restart is asked for, so both keep the same order:
        a dry run only says it would; otherwise the evidence to beat is recorded and checkpointed
        before the backend is asked, and the request is recorded with that evidence."""
        kind = "force-restart" if force else "restart"
        if state.options.dry_run:
            self._record("restart", node, f"would {kind} (dry run)", dry_run_reason)
            self._enter(node, DONE)
            return
        self._request_restart(state, node)
        action = (self.backend.force_restart if force else self.backend.restart)(node.node_id)
        self._record(
            "restart",
            node,
            f"{kind} requested",
            reason,
            observed={**(observed or {}), "evidence_before": node.evidence_before},
            action=action,
            level=level,
        )

    def _request_restart(self, state: RollState, node: NodeProgress) -> None:
        """Record the evidence and the time before asking, and checkpoint: a run killed
        mid-restart resumes by waiting for evidence, never by restarting again."""
        node.evidence_before = self.observer.evidence(node.node_id, None)
        node.restart_observed = ""
        node.quorum_offset_at_restart = None
        self._enter(node, WAIT_BACK)
        node.restarts += 1
        node.restarted_at_ms = self.clock()
        self.checkpoint(state)
