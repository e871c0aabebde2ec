"""One sweep: read every node, compare with the last sweep, decide, remember, report.

Per counter: higher than last time -> *increased* (the node is flagged); no earlier value
(a node seen for the first time, or a counter it did not have) -> *based* (not flagged).

The counters live in the node's memory and start again from zero when its process
restarts. A restart is seen from the exporter's ``process_start_time_seconds`` (it moved
since the last sweep): then the last value no longer applies and the new value counts
from zero, so any error after the restart is an *increase* (3 errors, a restart, then 1
error: flagged, ``0 -> 1``), and a counter back at 0 is *re-based* (not flagged). Without
a process start time (an exporter that does not serve it), a counter lower than last time
can only mean a restart whose new errors are unknown: it is *re-based* (not flagged).

What a flag leads to:

- a flagged **broker**: a ``kafka_broker_restart`` run for it (that runbook's approval
  gate and safety checks apply), unless one this sweep started for it is still queued or
  running; and none at all when more than ``max_flagged_brokers`` are flagged at once
  (many brokers failing on the same metadata points at the log, not at one broker: a
  person decides);
- a flagged **controller** is reported. When it is the **active** controller and its
  counter went up in ``controller_escalate_after`` consecutive sweeps (default 2), the
  sweep asks a person (restart it, last, or leave it) instead of acting; the streak starts
  again after each question, and no new question is asked while one is still open.

A node whose metrics cannot be read is *unknown*, never healthy; so is one whose
exposition lacks the counters for its role. A broker whose state is not RUNNING is
reported as *not running*.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import BadInput
from kafka_runbooks.fleet import DEFAULT_CLUSTER, DEFAULT_PROBE
from kafka_runbooks.metadata_errors.discovery import BROKER, CONTROLLER, NodeRef, discover
from kafka_runbooks.metadata_errors.endpoints import MetricsEndpoints, NodeReading
from kafka_runbooks.metadata_errors.metrics import BROKER_COUNTERS, CONTROLLER_COUNTERS, NodeMetrics
from kafka_runbooks.metadata_errors.state import MetadataErrorStateStore, NodeState
from kafka_runbooks.metadata_errors.targets import DEFAULT_RESTART
from kafka_runbooks.paths import safe_name
from kafka_runbooks.probes import RUNNING, STATE_NAMES

log = logging.getLogger(__name__)

HEALTHY = "healthy"
FLAGGED = "flagged"
UNKNOWN = "unknown"
NOT_RUNNING = "not running"
ACTIVE_RUN_STATES = frozenset({"queued", "running"})


@dataclass(frozen=True)
class SweepOptions:
    """One sweep's settings; its field defaults are the DAG form's and an empty conf's too
    (``kafka_runbooks_airflow.metadata_errors.OPTION_DEFAULTS``)."""

    max_flagged_brokers: int = 2
    controller_escalate_after: int = 2
    restart_brokers: bool = True
    restart_dag_id: str = "kafka_broker_restart"
    sweep_dag_id: str = "kafka_metadata_error_sweep"
    # the swept cluster and its metrics connection: every restart run started is for them
    kafka_config_id: str = DEFAULT_CLUSTER
    metrics_conn_id: str = DEFAULT_PROBE
    # how the started restart runs reach this cluster's nodes (another cluster's back end would
    # restart that cluster's node with the same id)
    restart_conn_id: str = DEFAULT_RESTART

    def __post_init__(self) -> None:
        if self.max_flagged_brokers < 0:
            raise BadInput(f"max_flagged_brokers must be >= 0, got {self.max_flagged_brokers}")
        if self.controller_escalate_after < 1:
            raise BadInput(f"controller_escalate_after must be >= 1, got {self.controller_escalate_after}")

    def as_dict(self) -> dict[str, Any]:
        """The options in force, for the sweep's report and decision records."""
        return dict(self.__dict__)

    def restart_conf(self, node_id: int, reason: str) -> dict[str, Any]:
        """The conf of a restart run for ``node_id``: on the swept cluster, probed through the
        sweep's metrics connection (the restart's defaults name another cluster's), gated."""
        return {
            "node_ids": str(node_id),
            "reason": reason,
            "require_approval": True,
            "kafka_config_id": self.kafka_config_id,
            "probe_conn_id": self.metrics_conn_id,
            "restart_conn_id": self.restart_conn_id,
        }

    def restart_run_id(self, kind: str, node_id: int, run_id: str) -> str:
        """The id of a restart run this sweep starts: it names the cluster, the node and the sweep
        run (node ids repeat across clusters: without the cluster, a second cluster's run for its
        node 1 would be taken for the first's and skipped as already existing)."""
        return f"metadata_errors__{safe_name(self.kafka_config_id)}__{kind}_{node_id}__{safe_name(run_id)}"


def assess(
    ref: NodeRef, reading: NodeReading, prev: NodeState | None, now_ms: int
) -> tuple[dict[str, Any], NodeState]:
    """Compare one node's reading with its last state: the report row and the new state.

    A node not read, or read without the counters of its role, is UNKNOWN (never healthy)
    and keeps its last known values, to be compared with next time. Otherwise each counter
    is compared (:func:`_compare_counters`) and the node judged (:func:`_status`).
    """
    prev_state = prev or NodeState()
    row = _new_row(ref, reading, prev_state)
    metrics = reading.metrics
    if metrics is None:
        row.update(status=UNKNOWN, change="not read")
        return row, prev_state  # keep the last known values: compare with them next time
    _learn_roles(ref, metrics, row)
    missing = _missing_counters(ref, metrics)
    _copy_reading(row, metrics, prev_state)
    if not metrics.counters or missing:
        row.update(status=UNKNOWN, change="not read", error=_missing_text(missing, metrics))
        return row, prev_state
    restarted = bool(row["restarted_since_last_sweep"])
    increased, rebased, based = _compare_counters(metrics.counters, prev_state.counters, restarted)
    row.update(increased=increased, rebased=rebased, based=sorted(based))
    new_state = NodeState(
        counters=dict(metrics.counters),
        seen_at_ms=now_ms,
        process_start_s=metrics.process_start_s,
        increase_streak=prev_state.increase_streak + 1 if increased else 0,
        restart_run_id=prev_state.restart_run_id,
        decision_run_id=prev_state.decision_run_id,
    )
    status, change = _status(prev, restarted, bool(increased), bool(rebased))
    if status == HEALTHY and BROKER in ref.roles and metrics.broker_state not in (None, RUNNING):
        status = NOT_RUNNING  # no counter went up, but a broker that is not RUNNING is not healthy
    if status == HEALTHY and BROKER in ref.roles and "broker_state" in metrics.unreadable:
        # a broker state that is there but unreadable (conflicting samples) is not "running"
        status, change = UNKNOWN, "broker state unreadable"
        row["error"] = metrics.unreadable["broker_state"]
    row.update(status=status, change=change, increase_streak=new_state.increase_streak)
    return row, new_state


def _new_row(ref: NodeRef, reading: NodeReading, prev_state: NodeState) -> dict[str, Any]:
    """The node's report row before anything is read from its metrics (every key, always there)."""
    return {
        "node_id": ref.node_id,
        "roles": sorted(ref.roles),
        "host": ref.host,
        "url": reading.url,
        "sources": sorted(ref.sources),
        "counters": {},
        "previous": dict(prev_state.counters),
        "metric_names": {},
        "increased": {},
        "rebased": {},
        "based": [],
        "broker_state": None,
        "broker_state_name": None,
        "active_controller_count": None,
        "error": reading.error,
        "restarted_since_last_sweep": None,
    }


def _learn_roles(ref: NodeRef, metrics: NodeMetrics, row: dict[str, Any]) -> None:
    """A node the cluster did not describe (a configured one) gets its roles from its exposition,
    so the counters its role must have are known."""
    if ref.roles:
        return
    if metrics.looks_like_broker:
        ref.roles.add(BROKER)
    if metrics.looks_like_controller:
        ref.roles.add(CONTROLLER)
    row["roles"] = sorted(ref.roles)


def _missing_counters(ref: NodeRef, metrics: NodeMetrics) -> list[str]:
    """The counters the node's roles must have that its exposition lacks (then it is unknown:
    an error count that cannot be read must never read as no errors)."""
    expected = [
        c
        for role, cs in ((BROKER, BROKER_COUNTERS), (CONTROLLER, CONTROLLER_COUNTERS))
        for c in cs
        if role in ref.roles
    ]
    return [c for c in expected if c not in metrics.counters]


def _missing_text(missing: list[str], metrics: NodeMetrics) -> str:
    """Why the node's counters are unknown: present but unreadable (+Inf, NaN), or absent."""
    bad = [metrics.unreadable[c] for c in missing if c in metrics.unreadable]
    absent = [c for c in missing if c not in metrics.unreadable]
    if not missing:
        absent = ["any KIP-859 counter"]
    parts = [f"unreadable: {'; '.join(bad)}"] if bad else []
    if absent:
        parts.append(
            f"the exposition has no {', '.join(absent)} (Kafka < 3.3, or the exporter rules drop it: "
            "see stack/jmx-exporter/kafka.yml)"
        )
    return "; ".join(parts)


def _copy_reading(row: dict[str, Any], metrics: NodeMetrics, prev_state: NodeState) -> None:
    """What the row shows of the reading, and whether the process restarted since the last sweep
    (its start time moved by more than a second; None when either reading lacks it)."""
    row.update(
        counters=dict(metrics.counters),
        metric_names=dict(metrics.names),
        broker_state=metrics.broker_state,
        broker_state_name=None
        if metrics.broker_state is None
        else STATE_NAMES.get(metrics.broker_state, f"state {metrics.broker_state}"),
        active_controller_count=metrics.active_controller_count,
    )
    if prev_state.process_start_s is not None and metrics.process_start_s is not None:
        row["restarted_since_last_sweep"] = abs(metrics.process_start_s - prev_state.process_start_s) > 1


def _compare_counters(
    counters: dict[str, float], previous: dict[str, float], restarted: bool
) -> tuple[dict[str, list[float]], dict[str, list[float]], list[str]]:
    """Each counter against its last value: (increased, re-based, based), each ``name: [before, now]``.

    No last value: *based* (nothing to compare with, not flagged). After a restart the
    counter started again from zero, so it is compared with zero: any error since is an
    increase, even below the old value. Lower than last time without a restart seen:
    *re-based* (the process restarted unseen; its new errors are unknown).
    """
    increased: dict[str, list[float]] = {}
    rebased: dict[str, list[float]] = {}
    based: list[str] = []
    for name, value in counters.items():
        before = previous.get(name)
        if before is None:
            based.append(name)
            continue
        # after a restart the counter started again from zero: compare with zero
        since = 0.0 if restarted else before
        if value > since:
            increased[name] = [since, value]
        elif value < before:
            rebased[name] = [before, value]
    return increased, rebased, based


def _status(prev: NodeState | None, restarted: bool, increased: bool, rebased: bool) -> tuple[str, str]:
    """(status, what changed): FLAGGED when a counter went up, else HEALTHY, saying why."""
    if increased:
        return FLAGGED, "increased since its restart (counted from zero)" if restarted else "increased"
    if prev is None or not prev.counters:
        return HEALTHY, "first seen"
    if restarted:
        return HEALTHY, "re-based (restarted, no error since)"
    if rebased:
        return (
            HEALTHY,
            "re-based (a counter went down: the node restarted; no process start time to tell "
            "the errors since)",
        )
    return HEALTHY, "unchanged"


def _counter_text(row: dict[str, Any]) -> str:
    text = ", ".join(
        f"{name} {int(before)} -> {int(after)} ({row['metric_names'].get(name, name)})"
        for name, (before, after) in sorted(row["increased"].items())
    )
    return f"{text} since its restart" if text and row.get("restarted_since_last_sweep") else text


def run_sweep(
    admin: ClusterAdmin,
    endpoints: MetricsEndpoints,
    store: MetadataErrorStateStore,
    options: SweepOptions,
    run_id: str,
    is_run_active: Callable[[str, str], bool] | None = None,
    logger: logging.Logger | None = None,
) -> dict[str, Any]:
    """Sweep every node; return the report (restart requests and an escalation included).

    Discover the nodes, read their metrics, then under the state lock (one sweep's view, saved
    whole): assess each node, find the active controller, decide the broker restarts and the
    controller escalation. ``is_run_active(dag_id, run_id)``: is an Airflow run queued or running
    (None: nothing is known to be active)."""
    logger = logger or log
    active = is_run_active or (lambda _dag, _run: False)
    started = time.monotonic()
    now_ms = int(time.time() * 1000)
    found = discover(admin, endpoints.configured_ids)
    _record_discovery_errors(found.errors, endpoints, logger)
    readings = endpoints.read_all([(n.node_id, n.is_controller, n.host) for n in found.nodes.values()])
    alerts: list[dict[str, Any]] = [{"node_id": None, "alert": e} for e in found.errors]
    with store.locked():
        states = store.load()
        rows = [_assess_into(ref, readings[node_id], states, now_ms) for node_id, ref in found.nodes.items()]
        active_controller, active_by_metrics = _active_controller(found.quorum_leader, rows)
        for row in rows:
            _record_node(row, logger)
        restart_requests = _broker_restarts(rows, states, options, run_id, active, alerts, logger)
        escalation = _controller_escalation(
            rows, states, active_controller, options, run_id, active, alerts, logger
        )
        store.save(states)
    _alert_unknown(rows, alerts)
    _warn_on_two_answers(found.quorum_leader, active_by_metrics, logger)
    return {
        "run_id": run_id,
        "taken_at_ms": now_ms,
        "options": options.as_dict(),
        "active_controller": active_controller,
        "active_controller_by_metrics": active_by_metrics,
        "discovery_errors": found.errors,
        "nodes": rows,
        "summary": _summary(rows),
        "restart_requests": restart_requests,
        "controller_escalation": escalation,
        "alerts": alerts,
        "wall_s": round(time.monotonic() - started, 3),
    }


def _assess_into(
    ref: NodeRef, reading: NodeReading, states: dict[int, NodeState], now_ms: int
) -> dict[str, Any]:
    """One node's row; its new state goes into ``states`` (saved with the others under the lock)."""
    row, states[ref.node_id] = assess(ref, reading, states.get(ref.node_id), now_ms)
    return row


def _alert_unknown(rows: list[dict[str, Any]], alerts: list[dict[str, Any]]) -> None:
    """A node whose metrics are unknown is an alert (never healthy); every row gets an action key."""
    for row in rows:
        if row["status"] == UNKNOWN:
            alerts.append({"node_id": row["node_id"], "alert": f"metrics unknown: {row['error']}"})
        row.setdefault("action", None)


def _warn_on_two_answers(quorum_leader: int | None, by_metrics: list[int], logger: logging.Logger) -> None:
    """DescribeQuorum and the nodes' own ActiveControllerCount disagree: worth a line in the log
    (the quorum's answer is the one used)."""
    if quorum_leader is not None and by_metrics and by_metrics != [quorum_leader]:
        logger.warning(
            "active controller: DescribeQuorum says %s, ActiveControllerCount says %s",
            quorum_leader,
            by_metrics,
        )


def _summary(rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    return {
        status: sorted(r["node_id"] for r in rows if r["status"] == status)
        for status in (HEALTHY, FLAGGED, UNKNOWN, NOT_RUNNING)
    }


def _record_discovery_errors(errors: list[str], endpoints: MetricsEndpoints, logger: logging.Logger) -> None:
    """A node discovery could not reach leaves the sweep with a partial view: say so first."""
    for error in errors:
        decisions.record(
            "discover",
            "partial view",
            error,
            observed={"configured": endpoints.configured_ids},
            logger=logger,
            level=logging.ERROR,
        )


def _active_controller(quorum_leader: int | None, rows: list[dict[str, Any]]) -> tuple[int | None, list[int]]:
    """(the active controller, the nodes whose ActiveControllerCount says they are it); marks the rows.

    DescribeQuorum's leader wins; without it, a single node counting itself active.
    """
    by_metrics = sorted(r["node_id"] for r in rows if (r["active_controller_count"] or 0) >= 1)
    active_controller = quorum_leader
    if active_controller is None and len(by_metrics) == 1:
        active_controller = by_metrics[0]
    for row in rows:
        row["active_controller"] = row["node_id"] == active_controller
    return active_controller, by_metrics


def _broker_restarts(
    rows: list[dict[str, Any]],
    states: dict,
    options: SweepOptions,
    run_id: str,
    active: Callable[[str, str], bool],
    alerts: list[dict[str, Any]],
    logger: logging.Logger,
) -> list[dict[str, Any]]:
    """The restart runs to start for flagged brokers; each flagged broker's action on its row.

    Too many flagged at once looks like a bad record in the metadata log, which a restart
    does not fix: then nothing is restarted and an alert says why. A broker whose restart
    run is still active gets no second one.
    """
    flagged = [r for r in rows if r["status"] == FLAGGED and BROKER in r["roles"]]
    too_many = len(flagged) > options.max_flagged_brokers
    requests: list[dict[str, Any]] = []
    for row in flagged:
        node_id = row["node_id"]
        state = states[node_id]
        counters = _counter_text(row)
        if not options.restart_brokers:
            row["action"] = "reported (restart_brokers is off)"
        elif too_many:
            row["action"] = "reported: too many brokers flagged at once for an automatic restart"
        elif state.restart_run_id and active(options.restart_dag_id, state.restart_run_id):
            row["action"] = f"none: restart run {state.restart_run_id} for it is still active"
        else:
            requests.append(_restart_request(node_id, state, counters, options, run_id))
            row["action"] = (
                f"start {options.restart_dag_id} run {state.restart_run_id} (its approval gate applies)"
            )
        decisions.record(
            "broker-restart",
            row["action"],
            f"metadata load/apply errors increased since the last sweep: {counters}",
            observed={"increased": row["increased"], "flagged_brokers": [r["node_id"] for r in flagged]},
            subject=f"broker {node_id}",
            logger=logger,
            level=logging.WARNING,
        )
    if too_many:
        alerts.append(_too_many_flagged(flagged, options))
    return requests


def _restart_request(
    node_id: int, state: NodeState, counters: str, options: SweepOptions, run_id: str
) -> dict[str, Any]:
    """The gated kafka_broker_restart run for one flagged broker; its run id is remembered in the
    node's state, so the next sweep starts no second one while it is active."""
    restart_run = options.restart_run_id("broker", node_id, run_id)
    reason = (
        f"KIP-859 metadata errors increasing on broker {node_id} of {options.kafka_config_id}: "
        f"{counters} (kafka_metadata_error_sweep run {run_id})"
    )
    state.restart_run_id = restart_run
    return {"trigger_run_id": restart_run, "conf": options.restart_conf(node_id, reason)}


def _too_many_flagged(flagged: list[dict[str, Any]], options: SweepOptions) -> dict[str, Any]:
    """The alert instead of restarts: many brokers failing on the same metadata points at the log."""
    return {
        "node_id": None,
        "alert": f"{len(flagged)} brokers flagged at once (more than max_flagged_brokers="
        f"{options.max_flagged_brokers}): a bad record in the metadata log would do this, and "
        "restarting brokers would not fix it; no restart started",
        "nodes": [r["node_id"] for r in flagged],
    }


def _controller_escalation(
    rows: list[dict[str, Any]],
    states: dict,
    active_controller: int | None,
    options: SweepOptions,
    run_id: str,
    active: Callable[[str, str], bool],
    alerts: list[dict[str, Any]],
    logger: logging.Logger,
) -> dict[str, Any] | None:
    """Whether to ask a person about the active controller; each flagged controller's action.

    Only the active controller is escalated, after ``controller_escalate_after`` consecutive
    sweeps of increases, and not while an earlier sweep run still waits for a decision.
    """
    escalation: dict[str, Any] | None = None
    for row in (r for r in rows if r["status"] == FLAGGED and CONTROLLER in r["roles"]):
        node_id = row["node_id"]
        state = states[node_id]
        counters = _counter_text(row)
        if node_id != active_controller:
            action = "reported (not the active controller)"
        elif state.increase_streak < options.controller_escalate_after:
            action = (
                f"reported (active controller; increased in {state.increase_streak} consecutive sweep(s), "
                f"a person is asked after {options.controller_escalate_after})"
            )
        elif state.decision_run_id and active(options.sweep_dag_id, state.decision_run_id):
            action = f"none: sweep run {state.decision_run_id} is still waiting for a decision about it"
        else:
            escalation = _escalation(row, state, counters, options, run_id)
            action = "ask a person: restart it (last) or leave it"
        row["action"] = action
        alerts.append({"node_id": node_id, "alert": f"controller metadata errors increasing: {counters}"})
        decisions.record(
            "controller",
            action,
            f"controller metadata errors increased since the last sweep: {counters}",
            observed={"increased": row["increased"], "active_controller": active_controller},
            subject=f"controller {node_id}",
            logger=logger,
            level=logging.WARNING,
        )
    return escalation


def _escalation(
    row: dict[str, Any], state: NodeState, counters: str, options: SweepOptions, run_id: str
) -> dict[str, Any]:
    """The question to a person about the active controller; this sweep run is remembered as the
    open question and the streak starts again, so it is asked again only after another run of
    increases."""
    node_id = row["node_id"]
    reason = (
        f"KIP-859 metadata errors increasing on the active controller {node_id} of "
        f"{options.kafka_config_id} in {state.increase_streak} consecutive sweeps: {counters} "
        f"(kafka_metadata_error_sweep run {run_id})"
    )
    escalation = {
        "node_id": node_id,
        "counters": row["counters"],
        "increased": row["increased"],
        "streak": state.increase_streak,
        "reason": reason,
        "kafka_config_id": options.kafka_config_id,
        "trigger_run_id": options.restart_run_id("controller", node_id, run_id),
        "conf": options.restart_conf(node_id, reason),
    }
    state.decision_run_id = run_id
    state.increase_streak = 0
    return escalation


def _record_node(row: dict[str, Any], logger: logging.Logger) -> None:
    subject = f"{'/'.join(row['roles']) or 'node'} {row['node_id']}"
    observed = {
        k: row[k]
        for k in ("counters", "previous", "increased", "rebased", "broker_state_name", "url", "error")
        if row.get(k) not in (None, {}, [])
    }
    if row["status"] == UNKNOWN:
        reason = f"its metrics could not be read: {row['error']}"
        level = logging.ERROR
    elif row["status"] == FLAGGED:
        reason = f"metadata error counter(s) went up: {_counter_text(row)}"
        level = logging.WARNING
    elif row["status"] == NOT_RUNNING:
        reason = f"no counter went up, but its broker state is {row['broker_state_name']}"
        level = logging.WARNING
    else:
        reason = f"no metadata error counter went up ({row['change']})"
        level = logging.INFO
    decisions.record(
        "node", row["status"], reason, observed=observed, subject=subject, logger=logger, level=level
    )


def write_report(report: dict[str, Any]) -> str:
    """``reports/metadata_errors/latest.json`` and, per cluster, ``by_connection/<conn id>.json``
    in the data store (whole); returns where this cluster's report is."""
    import json

    from kafka_runbooks import storage
    from kafka_runbooks.paths import safe_name

    store = storage.store()
    text = json.dumps(report, indent=1, sort_keys=True, default=str)
    store.write_text("reports/metadata_errors/latest.json", text)
    if report.get("kafka_config_id"):  # several clusters: each keeps its own latest report
        key = f"reports/metadata_errors/by_connection/{safe_name(report['kafka_config_id'])}.json"
        store.write_text(key, text)
        return store.url_of(key)
    return store.url_of("reports/metadata_errors/latest.json")
