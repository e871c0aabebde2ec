"""The Connect runbooks' task bodies: a checked request in, library calls, report out (thin on purpose).

The params are read once, at the start of each task, into the typed requests of
:mod:`kafka_runbooks.connect.request` (:func:`restart_request`, :func:`sweep_request`); nothing
below goes back to the params.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from kafka_runbooks import decisions, storage
from kafka_runbooks.connect.autorestart import sweep_cluster, validate_patterns
from kafka_runbooks.connect.manual import manual_restart
from kafka_runbooks.connect.policy import RestartPolicy
from kafka_runbooks.connect.request import (
    AutoRestartRequest,
    ConnectorRestartRequest,
    build_restart_request,
    build_sweep_request,
    parse_connect_conn_ids,
)
from kafka_runbooks.connect.state import JsonStateStore
from kafka_runbooks.errors import BadInput, RunbookFailed
from kafka_runbooks_airflow.inputs import refuse_bad_input

log = logging.getLogger(__name__)
EXCLUDE_VARIABLE = "kafka_connect_autorestart_exclude"


LATEST_REPORT = "reports/connect_autorestart/latest.json"


def sweep_request(params: dict[str, Any]) -> AutoRestartRequest:
    """The sweep's params as its request, read once at the start of a task; bad input is a DECISION
    record and a failed task (no retry), before any call to a worker."""
    return refuse_bad_input(build_sweep_request, params, "kafka_runbooks.connect")


def restart_request(params: dict[str, Any]) -> ConnectorRestartRequest:
    """The manual restart's params as its request (no network); bad input is a DECISION record and a
    failed task (no retry), before the cluster is listed."""
    return refuse_bad_input(build_restart_request, params, "kafka_runbooks.connect")


def conn_ids_from_params(params: dict[str, Any]) -> list[str]:
    """The run's ``connect_conn_ids`` for the fleet's groups (:func:`kafka_runbooks_airflow.fleet.connect_fleet`):
    stripped, without duplicates; BadInput when none or a blank one is given."""
    return parse_connect_conn_ids(params.get("connect_conn_ids"))


def excluded_from_variable() -> list[str]:
    """Patterns an operator switched off for good: Airflow Variable ``kafka_connect_autorestart_exclude``
    (a JSON list of names or fnmatch patterns). Read at run time, never at parse time."""
    from airflow.sdk import Variable

    raw = Variable.get(EXCLUDE_VARIABLE, default=None)
    if raw in (None, ""):
        return []
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise BadInput(f"Variable {EXCLUDE_VARIABLE} must be a JSON list of patterns: {exc}") from exc
    if isinstance(value, str):
        value = [value]
    return validate_patterns(value)


def run_autorestart_sweep(
    request: AutoRestartRequest,
    run_id: str,
    logger: logging.Logger | None = None,
    group: dict[str, Any] | None = None,
) -> dict:
    """Sweep the Connect clusters of one group (one Kafka cluster's, from
    :func:`kafka_runbooks_airflow.fleet.connect_fleet`; without a group, the request's
    ``connect_conn_ids``); one that fails is reported, the others go on."""
    logger = logger or log
    policy = request.policy
    group = group or {"kafka_config_id": None, "connect_conn_ids": _named_clusters(request)}
    kafka_config_id = group.get("kafka_config_id")
    conn_ids = list(group.get("connect_conn_ids") or [])
    exclude = list(request.exclude) + excluded_from_variable()
    started = time.monotonic()
    decisions.record(
        "connect-autorestart",
        "sweep",
        "every FAILED connector or task is restarted when the back-off policy says it is due",
        observed={
            "kafka_cluster": kafka_config_id,
            "clusters": conn_ids,
            "policy": policy.as_dict(),
            "exclude": exclude,
        },
        subject=f"Kafka cluster {kafka_config_id}" if kafka_config_id else None,
        logger=logger,
    )
    clusters = _group_problems(group, logger) + _sweep_each(conn_ids, policy, exclude, logger)
    report = {
        "run_id": run_id,
        "kafka_config_id": kafka_config_id,
        "policy": policy.as_dict(),
        "exclude": exclude,
        "clusters": clusters,
        "alerts": [a for c in clusters for a in c["alerts"]],
        "errors": [{"cluster": c["cluster"], **e} for c in clusters for e in c.get("errors") or []],
        "restarts": [{"cluster": c["cluster"], **r} for c in clusters for r in c["restarts"]],
        "http_calls": sum(c.get("http_calls", 0) for c in clusters),
        "wall_s": round(time.monotonic() - started, 3),
    }
    report["report_path"] = _write_report(report, kafka_config_id)
    _log_report(report, logger)
    return report


def _named_clusters(request: AutoRestartRequest) -> list[str]:
    """The Connect clusters a sweep without a group sweeps: only those the request names (no
    fleet to fall back on here)."""
    if request.connect_conn_ids is None:
        raise BadInput("connect_conn_ids must be a non-empty list of connection ids, got None")
    return list(request.connect_conn_ids)


def _sweep_each(
    conn_ids: list[str], policy: RestartPolicy, exclude: list[str], logger: logging.Logger
) -> list[dict]:
    """Each Connect cluster's sweep report, in order; a cluster that cannot be swept is its own
    failed report (an alert), never the end of the others' sweeps."""
    from kafka_runbooks_airflow.hooks.kafka_connect import KafkaConnectHook

    clusters = []
    for conn_id in conn_ids:
        try:
            client = KafkaConnectHook(conn_id).get_conn()
        except Exception as exc:  # a broken or missing connection: report it, sweep the others
            clusters.append(_failed_cluster(conn_id, "bad connection", exc, logger))
            continue
        with client:
            try:
                store = JsonStateStore(conn_id)
                clusters.append(sweep_cluster(conn_id, client, store, policy, exclude=exclude, logger=logger))
            except Exception as exc:  # e.g. a corrupt state file: this cluster fails, the others go on
                clusters.append(_failed_cluster(conn_id, "sweep failed", exc, logger))
    return clusters


def _write_report(report: dict[str, Any], kafka_config_id: str | None) -> str:
    """Write the report to the data store; returns where this group's report is.

    ``latest.json`` is the last group's; with a Kafka cluster named, each also keeps its own
    (``by_connection/<conn id>.json``), so one cluster's report is not lost to the next's.
    """
    store = storage.store()
    text = json.dumps(report, indent=1, sort_keys=True)
    store.write_text(LATEST_REPORT, text)
    if not kafka_config_id:
        return store.url_of(LATEST_REPORT)
    from kafka_runbooks.paths import safe_name

    key = f"reports/connect_autorestart/by_connection/{safe_name(kafka_config_id)}.json"
    store.write_text(key, text)
    return store.url_of(key)


def _log_report(report: dict[str, Any], logger: logging.Logger) -> None:
    """The task log's summary: a line per cluster, a line per connector with a history, then
    every error (WARNING) and alert (ERROR), so the log alone says what needs a person."""
    for c in report["clusters"]:
        logger.info(
            "cluster %s: reachable=%s connectors=%d restarted=%d alerts=%d http_calls=%s",
            c["cluster"],
            c["reachable"],
            len(c["connectors"]),
            len(c["restarts"]),
            len(c["alerts"]),
            c.get("http_calls"),
        )
        for row in c["connectors"]:
            if row["failed"] or row["restart_count"] or row["total_restarts"]:
                logger.info(
                    "  %s: %s failed_tasks=%s restart_count=%d last_restart_at=%s next_due_at=%s action=%s",
                    row["name"],
                    row["state"],
                    row["failed_tasks"],
                    row["restart_count"],
                    row["last_restart_at"],
                    row["next_due_at"],
                    row["action"],
                )
    for error in report["errors"]:
        logger.warning("ERROR %s", json.dumps(error, sort_keys=True))
    for alert in report["alerts"]:
        logger.error("ALERT %s", json.dumps(alert, sort_keys=True))


def _group_problems(group: dict[str, Any], logger: logging.Logger) -> list[dict]:
    """What keeps a Kafka cluster's Connect clusters from being swept, each reported as a failed
    cluster (an alert): its connection unreadable, a Connect cluster also named by another."""
    kafka_config_id = group.get("kafka_config_id")
    problems = []
    if group.get("error"):
        problems.append(
            _failed_cluster(kafka_config_id, "Connect clusters unknown", RuntimeError(group["error"]), logger)
        )
    for conn_id, first in sorted((group.get("shared") or {}).items()):
        problems.append(
            _failed_cluster(
                conn_id,
                f"also named by Kafka cluster {first}",
                RuntimeError(f"swept with {first} only; fix the extra connect_conn_ids of {kafka_config_id}"),
                logger,
            )
        )
    if not problems and not group.get("connect_conn_ids"):
        decisions.record(
            "connect-autorestart",
            "nothing to sweep",
            "no Connect cluster is named for this Kafka cluster (extra connect_conn_ids of its connection)",
            subject=f"Kafka cluster {kafka_config_id}",
            logger=logger,
        )
    return problems


def _failed_cluster(conn_id: str, what: str, exc: Exception, logger: logging.Logger) -> dict:
    error = f"{type(exc).__name__}: {exc}"
    decisions.record(
        "connect-autorestart",
        "cluster skipped",
        f"{what}; the other clusters go on",
        observed={"error": error},
        subject=conn_id,
        logger=logger,
        level=logging.ERROR,
    )
    return {
        "cluster": conn_id,
        "reachable": False,
        "error": error,
        "connectors": [],
        "restarts": [],
        "alerts": [{"cluster": conn_id, "alert": what, "detail": error}],
        "errors": [],
        "http_calls": 0,
    }


def raise_on_alerts(report: dict, fail_on_alert: bool) -> dict:
    """Fail when something needs a person: a connector given up on, a cluster unreachable, a
    restart call that keeps failing, a name Connect cannot address.

    Errors are listed here too. One that is not (yet) an alert, e.g. a single 409 during a
    rebalance, is logged as a warning; the sweep turns it into an alert once it repeats
    (``errors_before_alert``), so no error goes on silently sweep after sweep.
    """
    alerts = report.get("alerts") or []
    errors = report.get("errors") or []
    summary = {"alerts": len(alerts), "errors": len(errors), "restarts": len(report.get("restarts") or [])}
    for error in errors:
        log.warning(
            "restart error %s/%s: %s", error.get("cluster"), error.get("connector"), error.get("error")
        )
    if alerts and fail_on_alert:
        names = [f"{a['cluster']}/{a.get('connector', '-')}: {a['alert']}" for a in alerts]
        raise RunbookFailed(
            f"{len(alerts)} alert(s) need a person: {names} (report: {report.get('report_path')})"
        )
    return summary


def run_manual_restart(request: ConnectorRestartRequest, logger: logging.Logger | None = None) -> dict:
    """Restart, then fail (or warn, if the request's ``fail_if_not_settled`` is off) unless it settled
    RUNNING."""
    from kafka_runbooks_airflow.hooks.kafka_connect import KafkaConnectHook

    hook = KafkaConnectHook(request.connect_conn_id)
    with hook.get_conn() as client:
        return manual_restart(
            client,
            request.connector,
            request.scope,
            list(request.task_ids),
            settle_timeout_s=request.settle_timeout_s,
            fail_if_not_settled=request.fail_if_not_settled,
            logger=logger or log,
            status_log=hook.get_status_log(),
        )
