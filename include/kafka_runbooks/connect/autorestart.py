"""The auto-restart sweep over one Connect cluster: list, decide per connector, restart, persist.

One listing call per cluster, then (if any restart is due) one ``GET /`` for the worker's
version, then one restart call per connector that is due (on a worker with KIP-745). Every
decision is logged as a decision record; the returned report lists each connector with its
restart count and last restart time, the restarts made, the errors and the alerts.

A restart call can fail for one connector without changing anything for the others:

- the worker **refused** it (``500 Failed to start connector/task``: it tried and the start
  threw): counted as a restart, so the back-off schedule and the give-up alert apply;
- no restart happened (``409`` rebalance, a timeout): not counted, retried when next due;
- either way, ``errors_before_alert`` such answers in a row raise an alert on every
  further one (the ``raise_alerts`` task fails);
- the name cannot be addressed over REST (``/`` or ``%`` in it): reported once, with what
  to do, as an alert; never called again.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.connect.client import (
    ConnectClient,
    ConnectError,
    ConnectorStatus,
    RestartOutcome,
    UnaddressableConnector,
    UnknownConnector,
    unaddressable_advice,
)
from kafka_runbooks.connect.policy import (
    GIVE_UP,
    RESTART,
    RestartPolicy,
    RestartState,
    Verdict,
    decide,
    iso,
)
from kafka_runbooks.connect.state import JsonStateStore
from kafka_runbooks.errors import BadInput

log = logging.getLogger(__name__)
STEP = "connect-autorestart"


def validate_patterns(patterns: Iterable[str] | None) -> list[str]:
    """Connector names or shell-style patterns (``fnmatch``: ``*``, ``?``, ``[..]``)."""
    out = []
    for p in patterns or []:
        if not isinstance(p, str) or not p.strip():
            raise BadInput(f"exclude patterns must be non-empty strings, got {p!r}")
        out.append(p.strip())
    return out


def excluded_by(name: str, patterns: Iterable[str]) -> str | None:
    """The first exclusion pattern (fnmatch, case-sensitive) the connector name matches, or None: the sweep
    never restarts an excluded connector."""
    return next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)


@dataclass(frozen=True)
class _Sweep:
    """What every connector's decision in one sweep shares, passed as one instead of name by name.

    The report is the one the sweep returns: the decisions add their restarts, errors and
    alerts to it as they go. ``now`` is read once per sweep, after the listing call, so
    every connector of the sweep is judged at the same time.
    """

    cluster: str
    client: ConnectClient
    policy: RestartPolicy
    patterns: list[str]
    now: float
    report: dict[str, Any]
    logger: logging.Logger

    def subject(self, status: ConnectorStatus) -> str:
        """``cluster/connector``: the subject of this connector's decision records."""
        return f"{self.cluster}/{status.name}"


def sweep_cluster(
    cluster: str,
    client: ConnectClient,
    store: JsonStateStore,
    policy: RestartPolicy,
    *,
    exclude: Iterable[str] = (),
    clock: Callable[[], float] = time.time,
    logger: logging.Logger | None = None,
) -> dict[str, Any]:
    """Sweep one cluster; never raises for the cluster's own failures (they are reported).

    Under the state file's lock (one sweep of a cluster at a time): one listing call, a
    decision per connector, then the state worth keeping, written only when it changed.
    """
    logger = logger or log
    patterns = validate_patterns(exclude)
    started = time.monotonic()
    calls_before = client.calls
    report = _new_report(cluster, client)
    with store.locked():
        states = store.load()
        try:
            listing = client.list_connectors()
        except ConnectError as exc:
            _skip_unreachable(report, exc, logger)
            return _measured(report, client.calls - calls_before, started)
        sweep = _Sweep(cluster, client, policy, patterns, clock(), report, logger)
        new_states = _decide_all(sweep, listing, states)
        if new_states != states:
            store.save(new_states)
    _measured(report, client.calls - calls_before, started)
    report["counts"] = _counts(report)
    return report


def _new_report(cluster: str, client: ConnectClient) -> dict[str, Any]:
    """The report a sweep fills in: the decisions append rows, restarts, errors and alerts."""
    return {
        "cluster": cluster,
        "url": client.url,
        "reachable": True,
        "error": None,
        "connectors": [],
        "restarts": [],
        "alerts": [],
        "errors": [],
    }


def _skip_unreachable(report: dict[str, Any], exc: ConnectError, logger: logging.Logger) -> None:
    """No listing, no decision: the cluster is an alert (never 'nothing failed'), the others go on."""
    cluster = report["cluster"]
    report.update(reachable=False, error=str(exc))
    report["alerts"].append({"cluster": cluster, "alert": "unreachable", "detail": str(exc)})
    decisions.record(
        STEP,
        "cluster skipped",
        "its Connect REST API did not answer the listing call; the other clusters go on",
        observed={"url": report["url"], "error": str(exc)},
        subject=cluster,
        logger=logger,
        level=logging.ERROR,
    )


def _decide_all(
    sweep: _Sweep, listing: dict[str, ConnectorStatus], states: dict[str, RestartState]
) -> dict[str, RestartState]:
    """Each listed connector's decision, in name order; returns the states worth keeping.

    A connector no longer listed has its state dropped, and that is said: its restart count
    is gone, so the same name created again starts a fresh schedule.
    """
    new_states: dict[str, RestartState] = {}
    for name in sorted(listing):
        row, state = _one_connector(sweep, listing[name], states.get(name))
        sweep.report["connectors"].append(row)
        if state is not None and state.worth_keeping:
            new_states[name] = state
    forgotten = sorted(set(states) - set(listing))
    if forgotten:
        decisions.record(
            STEP,
            "state forgotten",
            "these connectors no longer exist on the cluster",
            observed={"connectors": forgotten},
            subject=sweep.cluster,
            logger=sweep.logger,
        )
    return new_states


def _measured(report: dict[str, Any], http_calls: int, started: float) -> dict[str, Any]:
    """What the sweep cost: HTTP calls made and wall time (the report says both, reachable or not)."""
    report["http_calls"] = http_calls
    report["wall_s"] = round(time.monotonic() - started, 3)
    return report


def _counts(report: dict[str, Any]) -> dict[str, int]:
    """The cluster's totals, readable without walking every row of a large cluster."""
    return {
        "connectors": len(report["connectors"]),
        "failed": sum(1 for r in report["connectors"] if r["failed"]),
        "restarted": len(report["restarts"]),
        "errors": len(report["errors"]),
        "alerts": len(report["alerts"]),
    }


def _one_connector(
    sweep: _Sweep, status: ConnectorStatus, previous: RestartState | None
) -> tuple[dict[str, Any], RestartState | None]:
    """One connector's report row and the state to keep for it, by the first rule that applies.

    An exclusion comes first (an operator switched auto-restart off for it), then a name the
    REST API cannot address (no call can help), then the back-off policy's verdict.
    """
    pattern = excluded_by(status.name, sweep.patterns)
    if pattern is not None:
        return _excluded(sweep, status, previous, pattern)
    if previous is not None and previous.unaddressable:
        return _known_unaddressable(sweep, status, previous)
    verdict = decide(sweep.policy, previous, status.failed, sweep.now)
    if verdict.action == RESTART:
        return _restart(sweep, status, verdict)
    if verdict.action == GIVE_UP:
        return _give_up(sweep, status, verdict)
    return _no_call(sweep, status, previous, verdict)


def _excluded(
    sweep: _Sweep, status: ConnectorStatus, previous: RestartState | None, pattern: str
) -> tuple[dict[str, Any], RestartState | None]:
    """An excluded connector is never restarted and its state is kept as it was.

    A FAILED one is said at WARNING every sweep: auto-restart was switched off for it on
    purpose, but a connector left FAILED must not go unnoticed.
    """
    if not status.failed:
        return _row(status, previous, "none", pattern, None), previous
    decisions.record(
        STEP,
        "not restarted",
        f"auto-restart is switched off for it (exclude pattern {pattern!r})",
        observed=status.as_dict(),
        subject=sweep.subject(status),
        logger=sweep.logger,
        level=logging.WARNING,
    )
    return _row(status, previous, "excluded", pattern, None), previous


def _known_unaddressable(
    sweep: _Sweep, status: ConnectorStatus, previous: RestartState
) -> tuple[dict[str, Any], RestartState]:
    """A name the REST API cannot address was alerted on when first seen: never called again.

    A name cannot change, so every further call would fail the same way; while the
    connector is FAILED each sweep says why it is left alone (no new alert).
    """
    if status.failed:
        decisions.record(
            STEP,
            "not restarted",
            "Connect's REST API cannot address this name (reported when first seen); not retried",
            observed={**status.as_dict(), "worker_answer": previous.unaddressable},
            subject=sweep.subject(status),
            logger=sweep.logger,
        )
    return _row(status, previous, "unaddressable", None, None), previous


def _restart(
    sweep: _Sweep, status: ConnectorStatus, verdict: Verdict
) -> tuple[dict[str, Any], RestartState | None]:
    """The policy says restart: one restart call, and the worker's answer decides what is counted.

    A connector deleted since the listing is forgotten; an unaddressable name is alerted on
    once and remembered; an error answer goes by :func:`_restart_error`. When the restart
    made is the policy's last, that is said now (the next failure is a give-up alert).
    """
    state, action = verdict.state, verdict.action
    observed = {**status.as_dict(), "restart_count": verdict.state.count}
    try:
        outcome = sweep.client.restart(status.name, include_tasks=True, only_failed=True, known=status)
    except UnknownConnector as exc:
        decisions.record(
            STEP,
            "not restarted: deleted",
            "the connector was deleted between the listing and the restart call; its state is forgotten",
            observed={**observed, "error": str(exc)},
            subject=sweep.subject(status),
            logger=sweep.logger,
            level=logging.WARNING,
        )
        return _row(status, None, "deleted", None, None), None
    except UnaddressableConnector as exc:
        action = "unaddressable"
        state = replace(state, unaddressable=exc.answer)
        _unaddressable(sweep, status, exc, observed)
    except ConnectError as exc:
        state, action = _restart_error(sweep, status, state, exc, verdict.reason, observed)
    else:
        state = _restarted(sweep, status, state, outcome, verdict.reason, observed)
    if state.count > verdict.state.count and sweep.policy.exhausted(state.count):
        decisions.record(
            STEP,
            "last automatic restart",
            f"restart #{state.count} is the policy's last; if it fails again it stays FAILED",
            subject=sweep.subject(status),
            logger=sweep.logger,
        )
    return _row(status, state, action, None, None), state


def _restarted(
    sweep: _Sweep,
    status: ConnectorStatus,
    state: RestartState,
    outcome: RestartOutcome,
    why: str,
    observed: dict[str, Any],
) -> RestartState:
    """The worker restarted it: counted (the back-off grows), listed in the report's restarts."""
    state = state.after_restart(sweep.now)
    entry = {
        **outcome.as_dict(),
        "restart_count": state.count,
        "at": iso(sweep.now),
        "failed_tasks": status.failed_task_ids,
        "connector_state": status.state,
    }
    sweep.report["restarts"].append(entry)
    decisions.record(
        STEP,
        f"restarted (#{state.count})",
        why,
        observed=observed,
        action=f"{outcome.method} restart: connector={outcome.restarted_connector} "
        f"tasks={list(outcome.restarted_tasks)} in {outcome.calls} call(s)",
        subject=sweep.subject(status),
        logger=sweep.logger,
    )
    return state


def _give_up(sweep: _Sweep, status: ConnectorStatus, verdict: Verdict) -> tuple[dict[str, Any], RestartState]:
    """The policy's restarts are used up: left FAILED, and an alert gives a person what to look at."""
    state = verdict.state
    alert = {
        "cluster": sweep.cluster,
        "connector": status.name,
        "alert": "restarts exhausted",
        "restart_count": state.count,
        "first_failure_at": iso(state.first_failure_at),
        "last_restart_at": iso(state.last_restart_at),
        "failed_tasks": status.failed_task_ids,
        "connector_state": status.state,
        "trace": _first_line(status),
        "last_error": state.last_error,
    }
    sweep.report["alerts"].append(alert)
    decisions.record(
        STEP,
        "ALERT: left FAILED",
        verdict.reason,
        observed={**status.as_dict(), "restart_count": state.count},
        subject=sweep.subject(status),
        logger=sweep.logger,
        level=logging.ERROR,
    )
    return _row(status, state, verdict.action, None, None), state


def _no_call(
    sweep: _Sweep, status: ConnectorStatus, previous: RestartState | None, verdict: Verdict
) -> tuple[dict[str, Any], RestartState]:
    """WAIT, RESET, RECOVERING, HEALTHY: no call; the row says when the next restart is due.

    A record only when there is history to explain (it is FAILED, or has been restarted):
    a sweep over hundreds of healthy connectors logs nothing about them.
    """
    if status.failed or (previous is not None and previous.count):
        decisions.record(
            STEP,
            verdict.action,
            verdict.reason,
            observed={**status.as_dict(), "restart_count": verdict.state.count},
            subject=sweep.subject(status),
            logger=sweep.logger,
        )
    return _row(status, verdict.state, verdict.action, None, verdict.due_at), verdict.state


def _unaddressable(
    sweep: _Sweep, status: ConnectorStatus, exc: UnaddressableConnector, observed: dict[str, Any]
) -> None:
    """Report, once, a connector that no REST call can reach, and what to do about it."""
    sweep.report["errors"].append({"connector": status.name, "error": exc.answer, "unaddressable": True})
    sweep.report["alerts"].append(
        {
            "cluster": sweep.cluster,
            "connector": status.name,
            "alert": "unaddressable name",
            "detail": unaddressable_advice(status.name),
            "failed_tasks": status.failed_task_ids,
            "connector_state": status.state,
        }
    )
    decisions.record(
        STEP,
        "ALERT: cannot be restarted over REST",
        unaddressable_advice(status.name),
        observed={**observed, "error": exc.answer},
        subject=sweep.subject(status),
        logger=sweep.logger,
        level=logging.ERROR,
    )


def _restart_error(
    sweep: _Sweep,
    status: ConnectorStatus,
    state: RestartState,
    exc: ConnectError,
    why: str,
    observed: dict[str, Any],
) -> tuple[RestartState, str]:
    """A restart call answered with an error: count it if the worker tried, alert if it persists.

    A refused restart (the worker tried, the start threw) is a restart that failed at once;
    any other error answer (400, 403, 503, a timeout, a refused connection) is counted the
    same way, so the back-off and the give-up alert apply to it instead of a retry every
    sweep forever. Only the documented no-op 409 (rebalancing) is not counted: retried when
    next due, alerted when it persists.
    """
    error = str(exc)
    if exc.refused:
        state = state.after_refused_restart(sweep.now, error)
        action = "restart_refused"
        outcome = (
            f"the worker tried and the start failed: counted as restart #{state.count}, the back-off applies"
        )
    elif exc.counts_as_restart:
        state = state.after_refused_restart(sweep.now, error)
        action = "restart_failed"
        outcome = f"an error answer: counted as restart #{state.count}, the back-off and the give-up apply"
    else:
        state = state.after_error(error)
        action = "restart_failed"
        outcome = "a rebalance: nothing was restarted, not counted, retried when next due"
    sweep.report["errors"].append(
        {"connector": status.name, "error": error, "refused": exc.refused, "error_streak": state.error_streak}
    )
    decisions.record(
        STEP,
        "restart refused" if exc.refused else "restart call failed",
        f"{why}; {outcome} ({state.error_streak} error answer(s) in a row)",
        observed={**observed, "restart_count": state.count, "error": error},
        subject=sweep.subject(status),
        logger=sweep.logger,
        level=logging.ERROR,
    )
    _alert_if_errors_persist(sweep, status, state, exc)
    return state, action


def _alert_if_errors_persist(
    sweep: _Sweep, status: ConnectorStatus, state: RestartState, exc: ConnectError
) -> None:
    """``errors_before_alert`` error answers in a row: an alert on this one and every further one.

    One 409 during a rebalance is normal and retried; the same answer sweep after sweep is
    not, and must reach a person (the ``raise_alerts`` task fails) instead of going on silently.
    """
    if state.error_streak < sweep.policy.errors_before_alert:
        return
    error = str(exc)
    sweep.report["alerts"].append(
        {
            "cluster": sweep.cluster,
            "connector": status.name,
            "alert": "restart refused" if exc.refused else "restart calls failing",
            "error_streak": state.error_streak,
            "error": error,
            "restart_count": state.count,
            "failed_tasks": status.failed_task_ids,
            "connector_state": status.state,
        }
    )
    decisions.record(
        STEP,
        "ALERT: restart calls keep failing",
        f"{state.error_streak} restart calls in a row answered with an error "
        f"(errors_before_alert={sweep.policy.errors_before_alert})",
        observed={"error": error},
        subject=sweep.subject(status),
        logger=sweep.logger,
        level=logging.ERROR,
    )


def _first_line(status: ConnectorStatus) -> str | None:
    trace = status.trace or next((t.trace for t in status.tasks if t.failed and t.trace), None)
    return trace.splitlines()[0][:300] if trace else None


def _row(
    status: ConnectorStatus,
    state: RestartState | None,
    action: str,
    pattern: str | None,
    next_due: float | None,
) -> dict[str, Any]:
    state = state or RestartState()
    return {
        **status.as_dict(),
        "failed": status.failed,
        "action": action,
        "excluded_by": pattern,
        "restart_count": state.count,
        "total_restarts": state.total_restarts,
        "last_restart_at": iso(state.last_restart_at),
        "first_failure_at": iso(state.first_failure_at),
        "healthy_since": iso(state.healthy_since),
        "next_due_at": iso(next_due),
        "error_streak": state.error_streak,
        "last_error": state.last_error,
        "unaddressable": bool(state.unaddressable),
    }
