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

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from kafka_runbooks import decisions
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import AdminError, BadInput, RunbookFailed
from kafka_runbooks.probes import BrokerStateReading
from kafka_runbooks.restart.backends import restart_observed
from kafka_runbooks.restart.lanes import ALONE, in_turn, lane_of, stages_text
from kafka_runbooks.restart.quorum import QuorumReadings
from kafka_runbooks.restart.safety import (
    broker_verdict,
    controller_verdict,
    restart_order,
    with_reassignments,
)
from kafka_runbooks.restart.states import WAIT_STARTING, assess

BROKER = "broker"
CONTROLLER = "controller"
WAIT_READY, CHECK, RESTART, WAIT_BACK, WAIT_ISR, DONE = (
    "wait_ready",
    "check_availability",
    "restart",
    "wait_back",
    "wait_isr",
    "done",
)


class RollFailed(RunbookFailed):
    """The roll stopped; the message is the reason an operator reads first."""


class RollInputError(BadInput):
    """The request itself is wrong (unknown node, empty list): nothing was touched."""


@dataclass
class RollOptions:
    operation_timeout_s: float = 300.0
    max_attempts: int = 10
    allow_force_restart: bool = False
    dry_run: bool = False
    quorum_max_lag_ms: int = 5_000
    # a broker and a follower controller in flight together (restart.lanes); False: one node
    # at a time. A state file without it was planned one node at a time (see from_json)
    overlap: bool = True


@dataclass
class NodeProgress:
    node_id: int
    role: str
    phase: str = WAIT_READY
    phase_since_ms: int = 0
    attempts: int = 0
    restarts: int = 0
    restarted_at_ms: int = 0
    last_reading: dict = field(default_factory=dict)
    # the last recovery counts any source reported, with when (they come and go)
    last_counts: dict = field(default_factory=dict)
    # restart evidence read just before the restart request, and the latest
    evidence_before: dict = field(default_factory=dict)
    last_evidence: dict = field(default_factory=dict)
    # partitions whose ISR it was in just before its restart (None: not known)
    isr_before: list[str] | None = None
    # why the restart counts as observed (empty until there is evidence)
    restart_observed: str = ""
    # when it was last seen starting: "stuck" needs a whole operation timeout after that
    last_starting_ms: int = 0
    # a controller: the quorum leader's log end offset once its new process was seen (None:
    # not yet); it is back when the leader reports it fetching past this offset
    quorum_offset_at_restart: int | None = None
    # restart.lanes: "broker", "controller" or "alone"; nodes of an old state file roll alone
    lane: str = ALONE


@dataclass
class RollState:
    reason: str
    order: list[int]
    nodes: dict[int, NodeProgress]
    options: RollOptions
    # what the availability check saw per node at planning time (the gate shows it)
    gate_rows: list[dict] = field(default_factory=list)

    def current(self) -> NodeProgress | None:
        """The first node in roll order not yet done, or None when the roll is over."""
        return next((self.nodes[n] for n in self.order if self.nodes[n].phase != DONE), None)

    def in_turn(self) -> list[NodeProgress]:
        """The nodes the roll works on now: one, or a broker and a controller (``restart.lanes``)."""
        return in_turn(self.order, self.nodes, DONE)

    def in_flight(self) -> list[NodeProgress]:
        """Nodes asked to restart (or about to be) and not yet back in sync."""
        return [self.nodes[n] for n in self.order if self.nodes[n].phase in (RESTART, WAIT_BACK, WAIT_ISR)]

    @property
    def stages_text(self) -> str:
        """The plan as it will be executed: which nodes roll alone, which side by side."""
        return stages_text(self.order, {n: p.lane for n, p in self.nodes.items()})

    @property
    def finished(self) -> bool:
        """Whether every node of the roll is done."""
        return self.current() is None

    def to_json(self) -> str:
        """The roll's progress as the state file keeps it between tasks (read back by :meth:`from_json`)."""
        return json.dumps(
            {
                "reason": self.reason,
                "order": self.order,
                "nodes": {str(k): asdict(v) for k, v in self.nodes.items()},
                "options": asdict(self.options),
                "gate_rows": self.gate_rows,
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> RollState:
        """Read the state file written by :meth:`to_json`. Older files lack ``gate_rows``, and
        lanes and ``overlap``: their roll was planned (and approved) one node at a time, so it
        resumes that way."""
        data = json.loads(text)
        return cls(
            reason=data["reason"],
            order=[int(n) for n in data["order"]],
            nodes={int(k): _node_progress(v) for k, v in data["nodes"].items()},
            options=RollOptions(**{"overlap": False, **data["options"]}),
            gate_rows=data.get("gate_rows", []),
        )


def _node_progress(data: dict) -> NodeProgress:
    """A node's progress from a state file, old or new: keys a newer roller added take their
    defaults, keys this roller does not know are dropped."""
    known = set(NodeProgress.__dataclass_fields__)
    return NodeProgress(**{k: v for k, v in data.items() if k in known})


def _ms(value) -> str:
    return "unknown" if value is None else str(value)


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


class Roller:
    def __init__(
        self,
        admin: ClusterAdmin,
        backend,
        probe=None,
        clock: Callable[[], int] | None = None,
        logger: logging.Logger | None = None,
        checkpoint: Callable[[RollState], None] | None = None,
    ) -> None:
        self.admin = admin
        self.backend = backend
        self.probe = probe
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.log = logger or logging.getLogger(__name__)
        self.checkpoint = checkpoint or (lambda state: None)
        self.quorum = QuorumReadings(admin, backend)

    # -- planning ---------------------------------------------------------------
    def plan(self, node_ids: list[int] | None, reason: str, options: RollOptions) -> RollState:
        """Validate the request against the live cluster and order the nodes; touches nothing."""
        self.admin.ping()  # ClusterUnreachable before anything else
        state = self.admin.read_state(include_log_dirs=False)
        brokers = set(state.brokers)
        controllers = {v.node_id for v in state.quorum.voters} if state.quorum else set()
        known = brokers | controllers
        requested = sorted(known) if node_ids is None else list(dict.fromkeys(node_ids))
        unknown = [n for n in requested if n not in known]
        if unknown:
            raise RollInputError(
                f"unknown node id(s) {unknown}: brokers are {sorted(brokers)}, controllers {sorted(controllers)}"
            )
        if not requested:
            raise RollInputError("the cluster reports no nodes to restart")
        roles = {n: CONTROLLER if n in controllers else BROKER for n in requested}
        seen = {n: self.observe(n, roles[n]) for n in requested}
        ready = {n: seen[n][0] for n in requested}
        order = restart_order(requested, ready, state.active_controller)
        lanes = {
            n: lane_of(
                n,
                is_broker=n in brokers,
                is_controller=n in controllers,
                ready=ready[n],
                active_controller=state.active_controller,
                overlap=options.overlap,
            )
            for n in order
        }
        state = with_reassignments(state, self._reassignments())
        rows = [self._gate_row(state, n, roles[n], ready[n], options) | {"lane": lanes[n]} for n in order]
        self._record_plan(reason, order, lanes, ready, state.active_controller, rows, options)
        now = self.clock()
        nodes = {n: NodeProgress(n, roles[n], phase_since_ms=now, lane=lanes[n]) for n in order}
        for n, progress in nodes.items():  # counts seen now are the first progress report
            self._remember_counts(progress, seen[n][2])
        return RollState(reason=reason, order=order, nodes=nodes, options=options, gate_rows=rows)

    def _record_plan(self, reason, order, lanes, ready, active_controller, rows, options) -> None:
        """The plan's decision record: the order and the stages as they will be executed."""
        decisions.record(
            "plan",
            f"restart {len(order)} node(s) in this order: {order}; stages: "
            + stages_text(order, lanes).replace("\n", "; "),
            "unready nodes first, then ready ones, the active controller last; a broker and a "
            "follower controller side by side (at most one of each away), the active controller, "
            "combined and unready nodes alone"
            if options.overlap
            else "unready nodes first, then ready ones, the active controller last; one at a time",
            observed={
                "ready": {str(k): v for k, v in ready.items()},
                "active_controller": active_controller,
                "lanes": {str(k): v for k, v in lanes.items()},
                "availability": rows,
            },
            action="dry run: nothing will be restarted" if options.dry_run else None,
            subject=reason,
            logger=self.log,
        )

    def _gate_row(self, state, node_id: int, role: str, ready: bool, options: RollOptions) -> dict:
        """What the availability check sees for one node now, for the approver."""
        row: dict = {
            "node": node_id,
            "role": role if node_id != state.active_controller else f"{role} (active)",
        }
        if role == BROKER or node_id in state.brokers:
            v = broker_verdict(state, node_id)
            o = v.observed
            row.update(
                partitions_hosted=o["partitions_hosted"],
                leaders=o["leaders"],
                under_replicated=o["under_replicated"],
                at_min_isr=o["at_min_isr"],
                reassigning=f"adding {o['adding_replica_of']}, removing {o['removing_replica_of']}",
            )
        else:
            row.update(
                partitions_hosted="-", leaders="-", under_replicated="-", at_min_isr="-", reassigning="-"
            )
        if role == CONTROLLER and state.quorum is not None:
            v = controller_verdict(state.quorum, node_id, options.quorum_max_lag_ms)
            lags = ", ".join(f"{k}: {_ms(x)}" for k, x in v.observed["others_lag_ms"].items())
            row["controller_lag"] = f"{_ms(v.observed['lag_ms'])} (others {lags})"
        else:
            row["controller_lag"] = "-"
        if not ready:
            row["verdict"] = "not ready: waited for first"
        elif v.safe:
            row["verdict"] = "yes"
        else:
            row["verdict"] = "would wait: " + "; ".join(v.reasons[:3])
        return row

    def _reassignments(self) -> dict:
        """Reassignments in flight (ListPartitionReassignments)."""
        return self.admin.list_reassignments()

    def _read_state(self):
        return with_reassignments(self.admin.read_state(include_log_dirs=False), self._reassignments())

    # -- observing -----------------------------------------------------------------
    def observe(
        self, node_id: int, role: str, past_offset: int | None = None, max_lag_ms: int = 5_000
    ) -> tuple[bool, dict, BrokerStateReading | None]:
        """Is the node ready (the roller's own definition), with the facts and the probe reading.

        A controller is ready when the quorum leader saw it caught up within ``max_lag_ms``
        by the leader's own clock and, after a restart, fetching past ``past_offset`` (the
        leader's log end offset once the new process was seen): DescribeQuorum keeps the
        old process's caught-up time for a while after it is gone.
        """
        running = self.backend.is_running(node_id)
        if role == CONTROLLER:
            ready, facts = self.quorum.readiness(node_id, running, past_offset, max_lag_ms)
            return ready, facts, None
        brokers = self.admin.describe_brokers()
        broker = brokers.get(node_id)
        registered = bool(broker and broker.available)
        reading = self.probe.read(node_id) if self.probe is not None else None
        facts = {
            "process_running": running,
            "registered_unfenced": registered,
            "broker_state": reading.as_dict() if reading else None,
        }
        # With a probe, only a RUNNING reading is ready: a probe that cannot answer may be a
        # new JVM whose exporter is not up yet, while stale metadata still shows the crashed
        # process registered and unfenced (seen on the real stack); acting then would restart
        # a broker that is about to load its logs.
        state_ok = reading is None or (reading.known and reading.running)
        return bool(registered and state_ok and running is not False), facts, reading

    def _mark_quorum_offset(self, state: RollState, node: NodeProgress) -> None:
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

    # -- stepping ------------------------------------------------------------------
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

    def _elapsed_s(self, node: NodeProgress) -> float:
        return (self.clock() - node.phase_since_ms) / 1000

    def _enter(self, node: NodeProgress, phase: str) -> None:
        node.phase = phase
        node.phase_since_ms = self.clock()

    def _record(self, step: str, node: NodeProgress, decision: str, reason: str, **kw) -> None:
        decisions.record(step, decision, reason, subject=f"{node.role} {node.node_id}", logger=self.log, **kw)

    def _advance(self, state: RollState, node: NodeProgress) -> None:
        """One step of the node's phase: each phase is a method of its own."""
        step = {
            WAIT_READY: self._wait_ready,
            CHECK: self._check_availability,
            RESTART: self._restart,
            WAIT_BACK: self._wait_back,
            WAIT_ISR: self._wait_isr,
        }.get(node.phase)
        if step is not None:
            step(state, node)

    def _wait_ready(self, state: RollState, node: NodeProgress) -> None:
        """Wait until the node is ready to be checked (never restart one that is starting)."""
        opts = state.options
        ready, facts, reading = self.observe(node.node_id, node.role, None, opts.quorum_max_lag_ms)
        self._remember_counts(node, reading)
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

    def _check_availability(self, state: RollState, node: NodeProgress) -> None:
        """Restart only when availability holds without the node; wait, then give up, otherwise."""
        opts = state.options
        if node.role == BROKER:
            cluster = self._read_state()
            verdict = broker_verdict(cluster, node.node_id)
            node.isr_before = sorted(p.name for p in cluster.hosted_by(node.node_id) if node.node_id in p.isr)
        else:
            quorum = self.quorum.describe()
            verdict = controller_verdict(
                quorum, node.node_id, opts.quorum_max_lag_ms, self.quorum.voters_down(quorum, node.node_id)
            )
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

    def _wait_back(self, state: RollState, node: NodeProgress) -> None:
        """Wait for restart evidence changed since the request, then for the node to be ready
        (a controller: for quorum progress only its new process can make)."""
        opts = state.options
        ready, facts, reading = self.observe(
            node.node_id, node.role, node.quorum_offset_at_restart, opts.quorum_max_lag_ms
        )
        self._remember_counts(node, reading)
        evidence = self._evidence(node.node_id, reading)
        node.last_evidence = evidence
        restarted, why = restart_observed(node.evidence_before, evidence)
        if node.role == CONTROLLER and node.quorum_offset_at_restart is None:
            ready = False  # no offset to pass yet: the answer above may be the old process's
            if restarted:
                self._mark_quorum_offset(state, node)
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
                f"restarted ({why}), state {assess(reading).state_name}, {self._counts_text(node, reading)}; "
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

    def _wait_isr(self, state: RollState, node: NodeProgress) -> None:
        """Done when the node is back in every ISR it was in (a controller: caught up with the quorum)."""
        opts = state.options
        if node.role == CONTROLLER and node.quorum_offset_at_restart is None:
            self._mark_quorum_offset(state, node)  # a state file from before the offset was kept
        missing, following = self._missing_from_isr(node, opts)
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

    def _not_ready_after_timeout(self, state, node, facts, reading) -> None:
        """The table in ``restart.states``: starting -> wait (never force); stuck or
        unknown -> fail, or force-restart if the run allows it."""
        opts = state.options
        self._remember_counts(node, reading)
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
        if not opts.allow_force_restart:
            self._record(
                "readiness",
                node,
                "give up",
                f"not ready, broker state {verdict.state_name} ({verdict.kind}), and force restart is off",
                observed=facts,
                level=logging.ERROR,
            )
            raise RollFailed(
                f"{node.role} {node.node_id} did not become ready within {opts.operation_timeout_s:.0f}s "
                f"(broker state: {verdict.state_name}); it is not starting and not in log recovery, "
                "and force restart is not allowed"
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
            f"state {verdict.state_name}, {self._counts_text(node, reading)} "
            f"(attempt {node.attempts} of {opts.max_attempts}); a restart would send it back to "
            "the start of its log recovery",
            observed=facts,
        )
        if node.attempts >= opts.max_attempts:
            raise RollFailed(
                f"broker {node.node_id} {self._starting_headline(node, reading)} "
                f"(state {verdict.state_name}): {self._counts_text(node, reading)} "
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
        node.evidence_before = self._evidence(node.node_id, None)
        node.restart_observed = ""
        node.quorum_offset_at_restart = None
        self._enter(node, WAIT_BACK)
        node.restarts += 1
        node.restarted_at_ms = self.clock()
        self.checkpoint(state)

    def _evidence(self, node_id: int, reading: BrokerStateReading | None) -> dict:
        """The back end's evidence plus the exporter's process start time, if it has one."""
        try:
            evidence = dict(self.backend.evidence(node_id) or {})
        except Exception as exc:  # evidence is read, never trusted to be there
            evidence = {"error": f"{type(exc).__name__}: {exc}"}
        if reading is None and self.probe is not None:
            try:
                reading = self.probe.read(node_id)
            except Exception:  # a probe never raises; a foreign one might
                reading = None
        if reading is not None and reading.process_start_ms is not None:
            evidence["process_start_ms"] = reading.process_start_ms
        return evidence

    def _remember_counts(self, node: NodeProgress, reading: BrokerStateReading | None) -> None:
        if reading is not None and reading.counts_known:
            node.last_counts = {
                "remaining_logs_to_recover": reading.remaining_logs,
                "remaining_segments_to_recover": reading.remaining_segments,
                "source": reading.source,
                "at_ms": self.clock(),
            }

    def _counts_text(self, node: NodeProgress, reading: BrokerStateReading | None) -> str:
        """Counts now, else the last ones any source reported, else "unknown"; never "0"."""
        if reading is not None and reading.counts_known:
            return reading.recovery_text()
        if node.last_counts:
            ago = (self.clock() - node.last_counts["at_ms"]) / 1000
            return (
                f"recovery counts unknown now; last seen {ago:.0f}s ago: "
                f"{_ms(node.last_counts['remaining_logs_to_recover'])} logs and "
                f"{_ms(node.last_counts['remaining_segments_to_recover'])} segments still to recover"
            )
        return "recovery counts unknown (no source reports them)"

    def _starting_headline(self, node: NodeProgress, reading: BrokerStateReading | None) -> str:
        if (reading is not None and reading.recovering) or any(
            (node.last_counts.get(k) or 0) > 0
            for k in ("remaining_logs_to_recover", "remaining_segments_to_recover")
        ):
            return "is in log recovery"
        return "is starting"

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
                f"broker {node.node_id} {self._starting_headline(node, reading)} after its restart "
                f"(state {assess(reading).state_name}): {self._counts_text(node, reading)}; "
                "not restarting it again"
            )
        return f"{node.role} {node.node_id} was restarted ({why}) but did not become ready ({waited})"

    def _missing_from_isr(self, node: NodeProgress, opts: RollOptions) -> tuple[list[str], dict]:
        """Partitions whose ISR it was in before its restart and is not in now, and how the
        partitions it is being added to (not in their ISR before) are getting on."""
        if node.role == CONTROLLER:
            if node.quorum_offset_at_restart is None:  # not recorded yet: nothing proves it is back
                return ["__cluster_metadata-0"], {}
            ready, _, _ = self.observe(
                node.node_id, node.role, node.quorum_offset_at_restart, opts.quorum_max_lag_ms
            )
            return ([] if ready else ["__cluster_metadata-0"]), {}
        me = node.node_id
        hosted = self._read_state().hosted_by(me)
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
