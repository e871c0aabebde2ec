"""Task bodies of ``kafka_metadata_error_sweep``: params in, library calls, report out."""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.errors import RunbookFailed
from kafka_runbooks.metadata_errors.state import MetadataErrorStateStore
from kafka_runbooks.metadata_errors.sweep import ACTIVE_RUN_STATES, SweepOptions, run_sweep, write_report

log = logging.getLogger(__name__)


def options_from_params(params: dict[str, Any], sweep_dag_id: str) -> SweepOptions:
    return SweepOptions(
        max_flagged_brokers=int(params.get("max_flagged_brokers", 2)),
        controller_escalate_after=int(params.get("controller_escalate_after", 2)),
        restart_brokers=bool(params.get("restart_brokers", True)),
        restart_dag_id=str(params.get("restart_dag_id") or "kafka_broker_restart"),
        sweep_dag_id=sweep_dag_id,
        kafka_conn_id=str(params.get("kafka_conn_id") or "kafka_default"),
        metrics_conn_id=str(params.get("metrics_conn_id") or "kafka_broker_probe_default"),
        restart_conn_id=str(params.get("restart_conn_id") or "kafka_restart_default"),
    )


def run_metadata_error_sweep(params: dict[str, Any], run_id: str, ti, dag_id: str) -> dict[str, Any]:
    """Sweep, persist, write the report; return it (restart requests and escalation inside)."""
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.hooks.metrics import KafkaMetricsHook

    options = options_from_params(params, dag_id)  # bad params fail here, before any call
    kafka_conn_id = options.kafka_conn_id
    endpoints = KafkaMetricsHook(options.metrics_conn_id).get_endpoints()

    def is_run_active(target_dag: str, target_run: str) -> bool:
        try:
            raw = ti.get_dagrun_state(target_dag, target_run)
        except Exception as exc:  # no such run (e.g. it was never created, or the DB was rebuilt)
            log.info("run %s/%s not found (%s): not active", target_dag, target_run, exc)
            return False
        state = str(getattr(raw, "value", raw))  # an enum: str() would give "DagRunState.RUNNING"
        log.info("run %s/%s is %s", target_dag, target_run, state)
        return state in ACTIVE_RUN_STATES

    admin = KafkaAdminHook(kafka_config_id=kafka_conn_id, timeout_s=15).admin
    try:
        report = run_sweep(
            admin,
            endpoints,
            MetadataErrorStateStore(kafka_conn_id),
            options,
            run_id,
            is_run_active=is_run_active,
            logger=log,
        )
    finally:
        admin.close()
    report["kafka_conn_id"] = kafka_conn_id
    if report["restart_requests"] or report["controller_escalation"]:
        _warn_if_paused(ti, options.restart_dag_id)
    report["report_path"] = write_report(report)
    for row in report["nodes"]:
        log.info(
            "node %s %s: %s (%s) counters=%s broker_state=%s active_controller=%s action=%s",
            row["node_id"],
            "/".join(row["roles"]) or "?",
            row["status"],
            row["change"],
            {k: int(v) for k, v in row["counters"].items()},
            row["broker_state_name"],
            row["active_controller"],
            row["action"],
        )
    log.info("summary %s; report %s", report["summary"], report["report_path"])
    return report


def _warn_if_paused(ti, dag_id: str) -> None:
    try:
        paused = ti.get_dag(dag_id).is_paused
    except Exception as exc:
        log.warning("could not tell whether %s is paused: %s", dag_id, exc)
        return
    if paused:
        decisions.record(
            "restart-dag",
            "warn",
            f"{dag_id} is paused: the runs started for flagged nodes wait until someone unpauses it",
            logger=log,
            level=logging.WARNING,
        )


def record_left_alone(
    escalation: dict[str, Any] | None, answer: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The 'Leave it' answer as a decision record naming who gave it (``answer``: the gate's record)."""
    node = (escalation or {}).get("node_id")
    by = ((answer or {}).get("by") or {}).get("name") or "a person"
    decisions.record(
        "controller",
        "left as it is",
        f"{by} chose 'Leave it': nothing is restarted; the sweep asks again if the counter keeps going up",
        observed={"escalation": escalation, "answer": answer},
        subject=f"controller {node}",
        logger=log,
    )
    return {"node_id": node, "decision": "leave it"}


def raise_on_alerts(report: dict[str, Any], fail_on_alert: bool) -> dict[str, Any]:
    alerts = report.get("alerts") or []
    summary = {"alerts": len(alerts), "summary": report.get("summary")}
    for alert in alerts:
        log.error("ALERT %s", alert)
    if alerts and fail_on_alert:
        raise RunbookFailed(
            f"{len(alerts)} alert(s) need a person: {[a['alert'] for a in alerts]} "
            f"(report: {report.get('report_path')})"
        )
    return summary
