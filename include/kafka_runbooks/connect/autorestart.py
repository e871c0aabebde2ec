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
    UnaddressableConnector,
    UnknownConnector,
    unaddressable_advice,
)
from kafka_runbooks.connect.policy import GIVE_UP, RESTART, RestartPolicy, RestartState, decide, iso
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
    """Sweep one cluster; never raises for the cluster's own failures (they are reported)."""
    logger = logger or log
    patterns = validate_patterns(exclude)
    started = time.monotonic()
    calls_before = client.calls
    report: dict[str, Any] = {
        "cluster": cluster,
        "url": client.url,
        "reachable": True,
        "error": None,
        "connectors": [],
        "restarts": [],
        "alerts": [],
        "errors": [],
    }
    with store.locked():
        states = store.load()
        try:
            listing = client.list_connectors()
        except ConnectError as exc:
            report.update(reachable=False, error=str(exc))
            report["alerts"].append({"cluster": cluster, "alert": "unreachable", "detail": str(exc)})
            decisions.record(
                STEP,
                "cluster skipped",
                "its Connect REST API did not answer the listing call; the other clusters go on",
                observed={"url": client.url, "error": str(exc)},
                subject=cluster,
                logger=logger,
                level=logging.ERROR,
            )
            report.update(http_calls=client.calls - calls_before, wall_s=round(time.monotonic() - started, 3))
            return report
        sweep = _Sweep(cluster, client, policy, patterns, clock(), report, logger)
        new_states: dict[str, RestartState] = {}
        for name in sorted(listing):
            row, state = _one_connector(sweep, listing[name], states.get(name))
            report["connectors"].append(row)
            if state is not None and state.worth_keeping:
                new_states[name] = state
        forgotten = sorted(set(states) - set(listing))
        if forgotten:
            decisions.record(
                STEP,
                "state forgotten",
                "these connectors no longer exist on the cluster",
                observed={"connectors": forgotten},
                subject=cluster,
                logger=logger,
            )
        if new_states != states:
            store.save(new_states)
    report["http_calls"] = client.calls - calls_before
    report["wall_s"] = round(time.monotonic() - started, 3)
    report["counts"] = {
        "connectors": len(report["connectors"]),
        "failed": sum(1 for r in report["connectors"] if r["failed"]),
        "restarted": len(report["restarts"]),
        "errors": len(report["errors"]),
        "alerts": len(report["alerts"]),
    }
    return report


def _one_connector(
    sweep: _Sweep, status: ConnectorStatus, previous: RestartState | None
) -> tuple[dict[str, Any], RestartState | None]:
    cluster, client, policy, now = sweep.cluster, sweep.client, sweep.policy, sweep.now
    report, logger, subject = sweep.report, sweep.logger, sweep.subject(status)
    observed = status.as_dict()
    pattern = excluded_by(status.name, sweep.patterns)
    state = previous
    action = "none"
    next_due = None
    if pattern is None and previous is not None and previous.unaddressable:
        action = "unaddressable"
        if status.failed:
            decisions.record(
                STEP,
                "not restarted",
                "Connect's REST API cannot address this name (reported when first seen); not retried",
                observed={**observed, "worker_answer": previous.unaddressable},
                subject=subject,
                logger=logger,
            )
    elif pattern is not None and status.failed:
        action = "excluded"
        decisions.record(
            STEP,
            "not restarted",
            f"auto-restart is switched off for it (exclude pattern {pattern!r})",
            observed=observed,
            subject=subject,
            logger=logger,
            level=logging.WARNING,
        )
    elif pattern is None:
        verdict = decide(policy, previous, status.failed, now)
        state = verdict.state
        action = verdict.action
        observed = {**observed, "restart_count": verdict.state.count}
        if verdict.action == RESTART:
            try:
                outcome = client.restart(status.name, include_tasks=True, only_failed=True, known=status)
            except UnknownConnector:
                return _row(status, None, "deleted", None, None), None
            except UnaddressableConnector as exc:
                action = "unaddressable"
                state = replace(state, unaddressable=exc.answer)
                _unaddressable(sweep, status, exc, observed)
            except ConnectError as exc:
                state, action = _restart_error(sweep, status, state, exc, verdict.reason, observed)
            else:
                state = state.after_restart(now)
                entry = {
                    **outcome.as_dict(),
                    "restart_count": state.count,
                    "at": iso(now),
                    "failed_tasks": status.failed_task_ids,
                    "connector_state": status.state,
                }
                report["restarts"].append(entry)
                decisions.record(
                    STEP,
                    f"restarted (#{state.count})",
                    verdict.reason,
                    observed=observed,
                    action=f"{outcome.method} restart: connector={outcome.restarted_connector} "
                    f"tasks={list(outcome.restarted_tasks)} in {outcome.calls} call(s)",
                    subject=subject,
                    logger=logger,
                )
            if action in ("restart", "restart_refused") and policy.exhausted(state.count):
                decisions.record(
                    STEP,
                    "last automatic restart",
                    f"restart #{state.count} is the policy's last; if it fails again it stays FAILED",
                    subject=subject,
                    logger=logger,
                )
        elif verdict.action == GIVE_UP:
            alert = {
                "cluster": cluster,
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
            report["alerts"].append(alert)
            decisions.record(
                STEP,
                "ALERT: left FAILED",
                verdict.reason,
                observed=observed,
                subject=subject,
                logger=logger,
                level=logging.ERROR,
            )
        else:  # WAIT, RESET, RECOVERING, HEALTHY: a record only when there is history to explain
            next_due = verdict.due_at
            if status.failed or (previous is not None and previous.count):
                decisions.record(
                    STEP, verdict.action, verdict.reason, observed=observed, subject=subject, logger=logger
                )
    return _row(status, state, action, pattern, next_due), state


def _unaddressable(
    sweep: _Sweep, status: ConnectorStatus, exc: UnaddressableConnector, observed: dict[str, Any]
) -> None:
    """Report, once, a connector that no REST call can reach, and what to do about it."""
    cluster, report, subject, logger = sweep.cluster, sweep.report, sweep.subject(status), sweep.logger
    report["errors"].append({"connector": status.name, "error": exc.answer, "unaddressable": True})
    report["alerts"].append(
        {
            "cluster": cluster,
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
        subject=subject,
        logger=logger,
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
    """A restart call answered with an error: count it if the worker tried, alert if it persists."""
    cluster, policy, now, report = sweep.cluster, sweep.policy, sweep.now, sweep.report
    subject, logger = sweep.subject(status), sweep.logger
    error = str(exc)
    if exc.refused:
        state = state.after_refused_restart(now, error)
        action = "restart_refused"
        outcome = (
            f"the worker tried and the start failed: counted as restart #{state.count}, the back-off applies"
        )
    else:
        state = state.after_error(error)
        action = "restart_failed"
        outcome = "nothing was restarted: not counted, retried when next due"
    report["errors"].append(
        {"connector": status.name, "error": error, "refused": exc.refused, "error_streak": state.error_streak}
    )
    decisions.record(
        STEP,
        "restart refused" if exc.refused else "restart call failed",
        f"{why}; {outcome} ({state.error_streak} error answer(s) in a row)",
        observed={**observed, "restart_count": state.count, "error": error},
        subject=subject,
        logger=logger,
        level=logging.ERROR,
    )
    if state.error_streak >= policy.errors_before_alert:
        report["alerts"].append(
            {
                "cluster": cluster,
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
            f"(errors_before_alert={policy.errors_before_alert})",
            observed={"error": error},
            subject=subject,
            logger=logger,
            level=logging.ERROR,
        )
    return state, action


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
