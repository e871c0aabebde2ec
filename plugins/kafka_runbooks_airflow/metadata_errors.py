"""Task bodies of ``kafka_metadata_error_sweep``: params in, library calls, report out.

The DAG maps one ``cluster`` task group per cluster of the fleet; every task of the group
reads its own cluster's XComs (:func:`group_xcom`: the same map index), and the controller
gate and the tasks after it check for themselves whether they have anything to do (a skip
sent by a branch inside a mapped task group is not something to rely on on Airflow 3.3.2,
see :mod:`kafka_runbooks_airflow.operators.trigger`).

Each cluster's ``sweep`` reads the params (with its cluster's target) once, into
:class:`SweepOptions` (:func:`sweep_options`), and the sweep reads only those.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput, RunbookFailed
from kafka_runbooks.metadata_errors.state import MetadataErrorStateStore
from kafka_runbooks.metadata_errors.sweep import (
    ACTIVE_RUN_STATES,
    HEALTHY,
    NOT_RUNNING,
    UNKNOWN,
    SweepOptions,
    run_sweep,
    write_report,
)
from kafka_runbooks_airflow.gate import gate_action, run_xcom
from kafka_runbooks_airflow.inputs import refuse_bad_input

log = logging.getLogger(__name__)

GROUP = "cluster"  # the mapped task group, one per cluster


def group_xcom(context, task: str, key: str = "return_value") -> Any:
    """An XCom of ``task`` in the calling task's own group instance (same cluster).

    Inside a mapped task group ``xcom_pull`` without ``map_indexes`` returns the values of
    every map index (every cluster); here only the caller's own map index is read.
    """
    ti = context["ti"]
    prefix = ti.task_id.rpartition(".")[0]
    task_id = f"{prefix}.{task}" if prefix else task
    map_index = getattr(ti, "map_index", None)
    if isinstance(map_index, int) and map_index >= 0:
        return ti.xcom_pull(task_ids=task_id, key=key, map_indexes=map_index)
    return ti.xcom_pull(task_ids=task_id, key=key)


def sweep_targets_from_params(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``clusters`` task: the fleet (or the run's ``kafka_config_ids``), each cluster with its
    metrics and restart connections."""
    from kafka_runbooks.metadata_errors.targets import sweep_targets
    from kafka_runbooks_airflow.fleet import fleet_clusters

    clusters = fleet_clusters(params)
    try:
        targets = sweep_targets(clusters, params.get("metrics_conn_id"), params.get("restart_conn_id"))
    except Exception as exc:
        decisions.record(
            "fleet", "refuse the sweep: nothing was read", str(exc), logger=log, level=logging.ERROR
        )
        raise
    decisions.record(
        "fleet",
        f"sweep the metadata error counters of {len(targets)} cluster(s)",
        "one mapped cluster group each, with its own state, report, restart runs and controller gate",
        observed={t["kafka_config_id"]: t for t in targets},
        logger=log,
    )
    return targets


def collect_restart_requests(ti, count: int) -> list[dict[str, Any]]:
    """The broker restart runs every cluster's sweep asked for, in cluster order.

    A cluster whose sweep failed has none (its own alert says why); the others' still start.
    Each request's run id and conf name its cluster.
    """
    pulled = ti.xcom_pull(task_ids=f"{GROUP}.sweep", map_indexes=list(range(count))) if count else []
    requests = [request for per_cluster in pulled or [] for request in per_cluster or []]
    log.info("%d broker restart run(s) to start: %s", len(requests), [r["trigger_run_id"] for r in requests])
    return requests


# The sweep's defaults, in one place (kafka_runbooks.metadata_errors.sweep.SweepOptions): the DAG's
# form shows them and a param left out of a run's conf takes them.
OPTION_DEFAULTS = SweepOptions()


def options_from_params(params: dict[str, Any], sweep_dag_id: str) -> SweepOptions:
    """The sweep's options from a run's params; what a conf leaves out is the default. BadInput names a
    param that is not what the form asks for."""
    d = OPTION_DEFAULTS
    return SweepOptions(
        max_flagged_brokers=_count(params, "max_flagged_brokers", d.max_flagged_brokers),
        controller_escalate_after=_count(params, "controller_escalate_after", d.controller_escalate_after),
        restart_brokers=bool(params.get("restart_brokers", d.restart_brokers)),
        restart_dag_id=str(params.get("restart_dag_id") or d.restart_dag_id),
        sweep_dag_id=sweep_dag_id,
        kafka_config_id=str(params.get("kafka_config_id") or d.kafka_config_id),
        metrics_conn_id=str(params.get("metrics_conn_id") or d.metrics_conn_id),
        restart_conn_id=str(params.get("restart_conn_id") or d.restart_conn_id),
    )


def _count(params: dict[str, Any], name: str, default: int) -> int:
    """A whole number from the form or a REST conf; BadInput naming the param otherwise."""
    value = params.get(name, default)
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise BadInput(f"{name} must be a whole number, not {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadInput(f"{name} must be a whole number, not {value!r}") from None


def sweep_options(params: dict[str, Any], sweep_dag_id: str) -> SweepOptions:
    """One cluster's sweep options, read once at the start of its ``sweep`` task (the run's params
    with the cluster's target); bad input is a DECISION record and a failed task, before any call."""
    return refuse_bad_input(lambda p: options_from_params(p, sweep_dag_id), params, log.name)


def run_metadata_error_sweep(options: SweepOptions, run_id: str, ti) -> dict[str, Any]:
    """Sweep, persist, write the report; return it (restart requests and escalation inside)."""
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.hooks.metrics import KafkaMetricsHook

    kafka_config_id = options.kafka_config_id
    try:
        endpoints = KafkaMetricsHook(options.metrics_conn_id).get_endpoints()
        admin = KafkaAdminHook(kafka_config_id=kafka_config_id, timeout_s=15).admin
    except Exception as exc:  # a missing or broken connection: this cluster's alert, not a crash
        return _unreachable_report(options, run_id, exc)

    try:
        report = run_sweep(
            admin,
            endpoints,
            MetadataErrorStateStore(kafka_config_id),
            options,
            run_id,
            is_run_active=_run_state_reader(ti),
            logger=log,
        )
    finally:
        admin.close()
    report["kafka_config_id"] = kafka_config_id
    if report["restart_requests"] or report["controller_escalation"]:
        _warn_if_paused(ti, options.restart_dag_id)
    report["report_path"] = write_report(report)
    _log_nodes(report)
    return report


def _run_state_reader(ti) -> Callable[[str, str], bool]:
    """Whether a run the sweep started earlier is still queued or running: a restart run is not
    started twice, a question to a person not asked twice. A run Airflow does not know is not active."""

    def is_run_active(target_dag: str, target_run: str) -> bool:
        """Whether Airflow reports the run queued or running; a run it cannot find is not active."""
        try:
            raw = ti.get_dagrun_state(target_dag, target_run)
        except Exception as exc:  # no such run (e.g. it was never created, or the DB was rebuilt)
            log.info("run %s/%s not found (%s): not active", target_dag, target_run, exc)
            return False
        state = str(getattr(raw, "value", raw))  # an enum: str() would give "DagRunState.RUNNING"
        log.info("run %s/%s is %s", target_dag, target_run, state)
        return state in ACTIVE_RUN_STATES

    return is_run_active


def _log_nodes(report: dict[str, Any]) -> None:
    """One line per node in the task log, then the summary and where the report is."""
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


def _unreachable_report(options: SweepOptions, run_id: str, exc: Exception) -> dict[str, Any]:
    """The report of a cluster whose connections could not be used: every node unknown, one alert."""
    why = f"cannot sweep {options.kafka_config_id}: {type(exc).__name__}: {exc}"
    decisions.record(
        "cluster",
        "unknown",
        why,
        observed={"kafka_config_id": options.kafka_config_id, "metrics_conn_id": options.metrics_conn_id},
        subject=f"cluster {options.kafka_config_id}",
        logger=log,
        level=logging.ERROR,
    )
    report: dict[str, Any] = {
        "run_id": run_id,
        "kafka_config_id": options.kafka_config_id,
        "options": options.as_dict(),
        "active_controller": None,
        "active_controller_by_metrics": [],
        "discovery_errors": [why],
        "nodes": [],
        "summary": {status: [] for status in (HEALTHY, "flagged", UNKNOWN, NOT_RUNNING)},
        "restart_requests": [],
        "controller_escalation": None,
        "alerts": [{"node_id": None, "alert": why}],
    }
    report["report_path"] = write_report(report)
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
    cluster = (escalation or {}).get("kafka_config_id") or ((escalation or {}).get("conf") or {}).get(
        "kafka_config_id"
    )
    by = ((answer or {}).get("by") or {}).get("name") or "a person"
    decisions.record(
        "controller",
        "left as it is",
        f"{by} chose 'Leave it': nothing is restarted; the sweep asks again if the counter keeps going up",
        observed={"escalation": escalation, "answer": answer},
        subject=f"controller {node} of {cluster}",
        logger=log,
    )
    return {"kafka_config_id": cluster, "node_id": node, "decision": "leave it"}


def raise_on_alerts(report: dict[str, Any], fail_on_alert: bool) -> dict[str, Any]:
    """Log every alert; with ``fail_on_alert`` a failed task says a person is needed (an alert in a
    log nobody reads is no alert)."""
    alerts = report.get("alerts") or []
    cluster = report.get("kafka_config_id")
    summary = {"kafka_config_id": cluster, "alerts": len(alerts), "summary": report.get("summary")}
    for alert in alerts:
        log.error("ALERT %s: %s", cluster, alert)
    if alerts and fail_on_alert:
        raise RunbookFailed(
            f"{cluster}: {len(alerts)} alert(s) need a person: {[a['alert'] for a in alerts]} "
            f"(report: {report.get('report_path')})"
        )
    return summary


# ------------------------------------------------------------------ the per-cluster controller gate
# (its operators: kafka_runbooks_airflow.operators.controller)


def leave_alone_if_chosen(context) -> dict[str, Any]:
    """``leave_active_controller``: record a 'Leave it' of this cluster's gate; skip otherwise."""
    from airflow.sdk.exceptions import AirflowSkipException

    from kafka_runbooks import approval as rules
    from kafka_runbooks_airflow.gate import RECORD_KEY

    answer = group_xcom(context, "controller_decision", RECORD_KEY)
    if not isinstance(answer, dict) or answer.get("outcome") != rules.REJECTED:
        raise AirflowSkipException("'Leave it' was not chosen at this cluster's gate")
    return record_left_alone(group_xcom(context, "sweep", "controller_escalation"), answer)


@gate_action("controller")
def controller_action(context) -> dict[str, Any]:
    """kafka_metadata_error_sweep: the restart run the sweep will start for one cluster's active controller.

    The whole conf the run is started with (which cluster, which node, why): the trigger task
    starts nothing unless what it would send is exactly this (:class:`ApprovedTriggerDagRunOperator`).
    """
    group = context["ti"].task_id.rpartition(".")[0]  # the sweep of the same (per-cluster) group
    escalation = run_xcom(context, f"{group}.sweep" if group else "sweep", "controller_escalation") or {}
    return {
        "runbook": context["dag"].dag_id,
        "run_id": context["run_id"],
        "node_id": escalation.get("node_id"),
        "trigger_run_id": escalation.get("trigger_run_id"),
        "conf": escalation.get("conf"),
        "reason": escalation.get("reason"),
        "dry_run": False,
        "require_approval": True,
    }
