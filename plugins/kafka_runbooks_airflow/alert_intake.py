"""The intake DAG's task: the alerts of the asset events that triggered the run, each decided
(:func:`kafka_runbooks.alerts.dispatch`), recorded, and the runs to start handed to the mapped
trigger. Light to import: the DAG file imports it at parse time.

One incident, one run: a run the incident's run id already names (started by an earlier post of
the same alert) is recorded "already started" and not started again; the trigger also skips a run
id that exists (``skip_when_already_exists``), for two posts racing. An alert no route knows is
recorded and notified (``kafka_runbooks_airflow.notify``), never dropped; a resolved one recorded.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import Asset

log = logging.getLogger("kafka_runbooks.alert_intake")

ALERTS_NAME = "kafka_runbooks_alerts"
ALERTS = Asset(name=ALERTS_NAME, uri="kafka-runbooks://alerts")
EXTRA_KEY = "alertmanager"  # the asset event's extra holds the post under this key


def read_alerts() -> list[dict[str, Any]]:
    """The trigger's kwargs for each run to start (``trigger_dag_id``, ``trigger_run_id``, ``conf``)."""
    from airflow.sdk import get_current_context

    from kafka_runbooks.alerts import dispatch

    context = get_current_context()
    alerts = _alerts_of(context["triggering_asset_events"])
    starts: dict[str, dict[str, Any]] = {}
    for d in dispatch(alerts):
        if d.action == "start" and d.run_id not in starts and not _started(context, d.dag_id, d.run_id):
            starts[d.run_id] = {"trigger_dag_id": d.dag_id, "trigger_run_id": d.run_id, "conf": d.conf}
            _record(d, "start", f"{d.dag_id} run {d.run_id}: {d.why}")
        elif d.action == "start":
            _record(
                d,
                "already started",
                f"{d.dag_id} run {d.run_id} is this incident's run; this post adds to its record",
            )
        elif d.action == "covered":
            _record(d, "covered", d.why)
        elif d.action == "unrouted":
            _record(d, "unrouted", d.why, logging.WARNING)
            _notify_unrouted(context, d)
        else:
            _record(d, "resolved", d.why)
    return list(starts.values())


def _alerts_of(events_by_asset) -> list:
    """The alerts of every triggering event's post; a post that cannot be read is recorded and skipped."""
    from kafka_runbooks import decisions
    from kafka_runbooks.alerts import parse_webhook
    from kafka_runbooks.errors import BadInput

    alerts = []
    for events in events_by_asset.values():
        for event in events:
            try:
                alerts.extend(parse_webhook((event.extra or {}).get(EXTRA_KEY)))
            except BadInput as exc:
                decisions.record("alert", "unreadable", str(exc), logger=log, level=logging.WARNING)
    return alerts


def _started(context, dag_id: str, run_id: str) -> bool:
    """Whether ``dag_id`` already has the run ``run_id`` (asked of Airflow through the task SDK)."""
    return context["ti"].get_dr_count(dag_id=dag_id, run_ids=[run_id]) > 0


def _record(d, decision: str, reason: str, level: int = logging.INFO) -> None:
    """One alert's decision, with the alert's identity and labels."""
    from kafka_runbooks import decisions

    decisions.record(
        "alert", decision, reason, subject=d.alert.name, observed=d.alert.as_dict(), logger=log, level=level
    )


def _notify_unrouted(context, d) -> None:
    """Tell the on-call about an alert no runbook handles (with the link Alertmanager gave)."""
    from kafka_runbooks.notify import Notice
    from kafka_runbooks_airflow import notify

    labels = ", ".join(f"{k}={v}" for k, v in sorted(d.alert.labels.items()))
    lines = (d.why, f"labels: {labels}", *(f"{k}: {v}" for k, v in sorted(d.alert.annotations.items())))
    notice = Notice(
        kind="alert unrouted",
        title=f"[alert unrouted] {d.alert.name}",
        lines=lines,
        link=d.alert.generator_url,
        dag_id="kafka_alert_intake",
        run_id=context["run_id"],
        link_text="Open the alert's source",
    )
    notify.send_notice(context, notice)
