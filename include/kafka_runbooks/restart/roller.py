"""The rolling-restart state machine: one node at a time, never below min ISR,
never restarting a broker that is recovering its logs.

Per node: ``wait_ready`` -> ``check_availability`` -> ``restart`` -> ``wait_back`` ->
``wait_isr`` -> ``done``. Each call to :meth:`Roller.step` advances as far as the cluster
allows and returns; the caller (an Airflow sensor in reschedule mode, so no worker slot
is held while waiting) persists the :class:`RollState` between calls, which also makes a
cleared run resume where it stopped. Every observation and decision is a decision record.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from kafka_runbooks import decisions
from kafka_runbooks.admin import AdminError
from kafka_runbooks.probes import BrokerStateReading
from kafka_runbooks.restart.safety import broker_verdict, controller_verdict, restart_order

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


class RollFailed(RuntimeError):
    """The roll stopped; the message is the reason an operator reads first."""


class RollInputError(ValueError):
    """The request itself is wrong (unknown node, empty list): nothing was touched."""


@dataclass
class RollOptions:
    operation_timeout_s: float = 300.0
    max_attempts: int = 10
    allow_force_restart: bool = False
    dry_run: bool = False
    quorum_max_lag_ms: int = 5_000


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


@dataclass
class RollState:
    reason: str
    order: list[int]
    nodes: dict[int, NodeProgress]
    options: RollOptions

    def current(self) -> NodeProgress | None:
        return next((self.nodes[n] for n in self.order if self.nodes[n].phase != DONE), None)

    @property
    def finished(self) -> bool:
        return self.current() is None

    def to_json(self) -> str:
        return json.dumps(
            {
                "reason": self.reason,
                "order": self.order,
                "nodes": {str(k): asdict(v) for k, v in self.nodes.items()},
                "options": asdict(self.options),
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> RollState:
        data = json.loads(text)
        return cls(
            reason=data["reason"],
            order=[int(n) for n in data["order"]],
            nodes={int(k): NodeProgress(**v) for k, v in data["nodes"].items()},
            options=RollOptions(**data["options"]),
        )


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
        admin,
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
        ready = {n: self.observe(n, roles[n])[0] for n in requested}
        order = restart_order(requested, ready, state.active_controller)
        decisions.record(
            "plan",
            f"restart {len(order)} node(s) in this order: {order}",
            "unready nodes first, then ready ones, the active controller last; one at a time",
            observed={
                "ready": {str(k): v for k, v in ready.items()},
                "active_controller": state.active_controller,
            },
            action="dry run: nothing will be restarted" if options.dry_run else None,
            subject=reason,
            logger=self.log,
        )
        now = self.clock()
        return RollState(
            reason=reason,
            order=order,
            nodes={n: NodeProgress(n, roles[n], phase_since_ms=now) for n in order},
            options=options,
        )

    # -- observing -----------------------------------------------------------------
    def observe(
        self, node_id: int, role: str, since_ms: int = 0, max_lag_ms: int = 5_000
    ) -> tuple[bool, dict, BrokerStateReading | None]:
        """Is the node ready (the roller's own definition), with the facts and the probe reading.

        A controller is ready when the quorum leader saw it caught up within ``max_lag_ms``
        and, after a restart, later than ``since_ms``: DescribeQuorum keeps reporting the
        old process's last caught-up time for a while after it is gone.
        """
        running = self.backend.is_running(node_id)
        if role == CONTROLLER:
            quorum = self.admin.describe_quorum()
            member = next((v for v in quorum.voters if v.node_id == node_id), None)
            fresh = member is not None and (member.last_caught_up_ms or 0) > since_ms
            caught_up = node_id in quorum.caught_up_voters(self.clock(), max_lag_ms) and (
                fresh or node_id == quorum.leader_id and not since_ms
            )
            facts = {
                "process_running": running,
                "caught_up_in_quorum": caught_up,
                "quorum_leader": quorum.leader_id,
            }
            return bool(caught_up and running is not False), facts, None
        brokers = self.admin.describe_brokers()
        broker = brokers.get(node_id)
        registered = bool(broker and broker.available)
        reading = self.probe.read(node_id) if self.probe is not None else None
        facts = {
            "process_running": running,
            "registered_unfenced": registered,
            "broker_state": reading.as_dict() if reading else None,
        }
        state_ok = reading is None or not reading.known or reading.running
        return bool(registered and state_ok and running is not False), facts, reading

    # -- stepping ------------------------------------------------------------------
    def step(self, state: RollState) -> bool:
        """Advance as far as possible; True once every node is done. Raises RollFailed."""
        for _ in range(50):  # bounded: each pass either waits (returns) or changes a phase
            node = state.current()
            if node is None:
                return True
            before = (node.node_id, node.phase)
            try:
                self._advance(state, node)
            except AdminError as exc:
                # Reads fail while a node restarts (a controller election, a broker
                # going away): that is a reason to look again, never to act or give up.
                self._record(
                    "observe", node, "wait", f"the cluster could not be read: {exc}", level=logging.WARNING
                )
                return False
            if (node.node_id, node.phase) == before:
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
        opts = state.options
        if node.phase == WAIT_READY:
            ready, facts, reading = self.observe(node.node_id, node.role, 0, opts.quorum_max_lag_ms)
            if ready:
                self._record("readiness", node, "ready", "it can be checked for availability", observed=facts)
                self._enter(node, CHECK)
                return
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
        elif node.phase == CHECK:
            if node.role == BROKER:
                verdict = broker_verdict(self.admin.read_state(include_log_dirs=False), node.node_id)
            else:
                verdict = controller_verdict(
                    self.admin.describe_quorum(), node.node_id, self.clock(), opts.quorum_max_lag_ms
                )
            if verdict.safe:
                self._record(
                    "availability",
                    node,
                    "safe to restart",
                    "no partition it hosts would drop below min.insync.replicas"
                    if node.role == BROKER
                    else "a majority of the other voters is caught up",
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
        elif node.phase == RESTART:
            if opts.dry_run:
                self._record("restart", node, "would restart (dry run)", "the run is a dry run")
                self._enter(node, DONE)
                return
            self._enter(node, WAIT_BACK)
            node.restarts += 1
            node.restarted_at_ms = self.clock()
            self.checkpoint(state)  # a run killed mid-restart resumes by waiting, not by restarting again
            action = self.backend.restart(node.node_id)
            self._record("restart", node, "restarted", f"requested: {state.reason}", action=action)
        elif node.phase == WAIT_BACK:
            ready, facts, reading = self.observe(
                node.node_id, node.role, node.restarted_at_ms, opts.quorum_max_lag_ms
            )
            if ready:
                self._record("readiness", node, "back", "ready again after the restart", observed=facts)
                self._enter(node, WAIT_ISR)
                return
            if reading is not None and reading.recovering:
                node.last_reading = reading.as_dict()
                self._record(
                    "broker-state",
                    node,
                    "recovering: waiting, never restarting it again",
                    "a restart now would send it back to the start of its log recovery",
                    observed=reading.as_dict(),
                )
            if self._elapsed_s(node) >= opts.operation_timeout_s:
                node.attempts += 1
                node.phase_since_ms = self.clock()
                if node.attempts >= opts.max_attempts:
                    raise RollFailed(self._not_back_reason(node, reading))
        elif node.phase == WAIT_ISR:
            missing = self._missing_from_isr(node, opts)
            if not missing:
                self._record(
                    "isr",
                    node,
                    "done",
                    "back in the ISR of every partition it hosts"
                    if node.role == BROKER
                    else "caught up with the metadata quorum",
                )
                self._enter(node, DONE)
                return
            if self._elapsed_s(node) >= opts.operation_timeout_s * max(1, opts.max_attempts):
                raise RollFailed(f"{node.role} {node.node_id} is not back in the ISR of: {missing[:20]}")
            self._record(
                "isr",
                node,
                "wait",
                f"not yet back in the ISR of {len(missing)} partition(s)",
                observed={"partitions": missing[:20]},
            )

    def _not_ready_after_timeout(self, state, node, facts, reading) -> None:
        opts = state.options
        if reading is not None and reading.recovering:
            node.attempts += 1
            node.last_reading = reading.as_dict()
            self._record(
                "broker-state",
                node,
                "do not restart: log recovery in progress",
                f"remaining logs to recover {reading.remaining_logs}, segments {reading.remaining_segments} "
                f"(attempt {node.attempts} of {opts.max_attempts})",
                observed=reading.as_dict(),
            )
            if node.attempts >= opts.max_attempts:
                raise RollFailed(
                    f"broker {node.node_id} is in log recovery (state {reading.state_name}): "
                    f"{reading.remaining_logs} logs and {reading.remaining_segments} segments still to recover "
                    f"after {node.attempts} attempts of {opts.operation_timeout_s:.0f}s; not restarting it"
                )
            node.phase_since_ms = self.clock()
            return
        state_name = reading.state_name if reading is not None else "not probed"
        if not opts.allow_force_restart:
            self._record(
                "readiness",
                node,
                "give up",
                "not ready, not recovering, and force restart is off",
                observed=facts,
                level=logging.ERROR,
            )
            raise RollFailed(
                f"{node.role} {node.node_id} did not become ready within {opts.operation_timeout_s:.0f}s "
                f"(broker state: {state_name}); it is not in log recovery, and force restart is not allowed"
            )
        if opts.dry_run:
            self._record("restart", node, "would force-restart (dry run)", "stuck and not recovering")
            self._enter(node, DONE)
            return
        self._enter(node, WAIT_BACK)
        node.restarts += 1
        node.restarted_at_ms = self.clock()
        self.checkpoint(state)
        action = self.backend.force_restart(node.node_id)
        self._record(
            "restart",
            node,
            "force-restarted",
            f"stuck for {opts.operation_timeout_s:.0f}s in state {state_name}, not recovering, "
            "and the run allows force",
            observed=facts,
            action=action,
            level=logging.WARNING,
        )

    def _not_back_reason(self, node: NodeProgress, reading: BrokerStateReading | None) -> str:
        if reading is not None and reading.recovering:
            return (
                f"broker {node.node_id} is still in log recovery after its restart: "
                f"{reading.remaining_logs} logs and {reading.remaining_segments} segments to recover; "
                "not restarting it again"
            )
        return f"{node.role} {node.node_id} did not come back after its restart ({node.attempts} timeouts)"

    def _missing_from_isr(self, node: NodeProgress, opts: RollOptions) -> list[str]:
        if node.role == CONTROLLER:
            ready, _, _ = self.observe(node.node_id, node.role, node.restarted_at_ms, opts.quorum_max_lag_ms)
            return [] if ready else ["__cluster_metadata-0"]
        state = self.admin.read_state(include_log_dirs=False)
        return [p.name for p in state.hosted_by(node.node_id) if p.has_leader and node.node_id not in p.isr]
