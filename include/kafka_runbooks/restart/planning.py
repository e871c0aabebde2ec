"""Planning a rolling restart: check the request against the live cluster, order the nodes,
put each in its lane, and say what the availability check sees now (the gate shows it).

Planning touches nothing; the plan it returns is the roll's first checkpoint.
"""

from __future__ import annotations

from kafka_runbooks import decisions
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.restart.lanes import lane_of, stages_text
from kafka_runbooks.restart.observe import NodeObserver
from kafka_runbooks.restart.progress import (
    BROKER,
    CONTROLLER,
    NodeProgress,
    NodeWork,
    RollInputError,
    RollOptions,
    RollState,
    ms_text,
)
from kafka_runbooks.restart.safety import (
    broker_verdict,
    controller_verdict,
    restart_order,
    with_reassignments,
)


class RollPlanner(NodeWork):
    """Turns the requested node ids into a :class:`RollState`: order, lanes, the gate's rows."""

    def __init__(self, admin: ClusterAdmin, observer: NodeObserver, clock=None, logger=None) -> None:
        super().__init__(clock, logger)
        self.admin = admin
        self.observer = observer

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
        seen = {n: self.observer.observe(n, roles[n]) for n in requested}
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
        state = with_reassignments(state, self.admin.list_reassignments())
        rows = [self._gate_row(state, n, roles[n], ready[n], options) | {"lane": lanes[n]} for n in order]
        self._record_plan(reason, order, lanes, ready, state.active_controller, rows, options)
        now = self.clock()
        nodes = {n: NodeProgress(n, roles[n], phase_since_ms=now, lane=lanes[n]) for n in order}
        for n, progress in nodes.items():  # counts seen now are the first progress report
            self.observer.remember_counts(progress, seen[n][2])
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
            v = controller_verdict(state.quorum, node_id)
            lags = ", ".join(f"{k}: {ms_text(x)}" for k, x in v.observed["others_lag_ms"].items())
            row["controller_lag"] = f"{ms_text(v.observed['lag_ms'])} (others {lags})"
        else:
            row["controller_lag"] = "-"
        if not ready:
            row["verdict"] = "not ready: waited for first"
        elif v.safe:
            row["verdict"] = "yes"
        else:
            row["verdict"] = "would wait: " + "; ".join(v.reasons[:3])
        return row
