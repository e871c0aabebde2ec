"""Which runbook an alert starts, one rule per alert name, and the decision per alert.

An alert never decides anything destructive: it starts the sweep that handles its incident now,
instead of at the sweep's next schedule. The sweep reads the cluster itself, decides as it always
does, and any destructive step still waits at its gate. So an alert that was wrong, stale or
repeated costs one read-only sweep run, never an action.

One incident, one run: the run id is the incident's (alert name, Alertmanager's fingerprint of
its labels, and when it started firing). A repeated notification of the same incident, or a
flapping one Alertmanager still counts as the same firing, names the same run id, and Airflow
refuses a second run of one id (the intake records "already started"). A new firing after a
resolve has a new start and starts a new run. The cluster's lease is the second guard: two
incidents on one cluster never run two runbooks over each other.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kafka_runbooks.alerts._payload import Alert

CLUSTER_LABEL = "kafka_config_id"  # the Airflow Kafka connection the alert is about (else the default)


def _cluster(labels: dict[str, str]) -> dict[str, Any]:
    """The sweep's ``kafka_config_ids`` when the alert names its cluster's connection."""
    conn = labels.get(CLUSTER_LABEL)
    return {"kafka_config_ids": [conn]} if conn else {}


def _connect(labels: dict[str, str]) -> dict[str, Any]:
    """The Connect sweep, on the Connect cluster the alert names (label ``connect_conn_id``) if any."""
    conn = labels.get("connect_conn_id")
    return {**_cluster(labels), **({"connect_conn_ids": [conn]} if conn else {})}


@dataclass(frozen=True)
class Route:
    """Alert ``alertname`` starts ``dag_id`` with the conf ``conf(labels)`` builds; ``why`` says what
    that run does about it (shown in the docs' table and in each record)."""

    alertname: str
    dag_id: str
    why: str
    conf: Callable[[dict[str, str]], dict[str, Any]] = _cluster


ROUTES: tuple[Route, ...] = (
    Route(
        "KafkaBrokerDown",
        "kafka_failed_broker_sweep",
        "the failed-broker sweep sees the broker failed, alerts, and past its threshold starts the gated heal",
    ),
    Route(
        "KafkaOfflineLogDirectory",
        "kafka_failed_broker_sweep",
        "the failed-broker sweep names the offline log dir (and starts the gated log-dir failure runbook when start_log_dir_failure is on)",
    ),
    Route(
        "KafkaOfflinePartitions",
        "kafka_cluster_health",
        "the health sweep reports the offline partitions and what holds them",
    ),
    Route(
        "KafkaUnderMinIsrPartitions",
        "kafka_cluster_health",
        "the health sweep reports the partitions under min ISR and the brokers they lack",
    ),
    Route(
        "KafkaQuorumVoterLost",
        "kafka_cluster_health",
        "the health sweep reports the quorum's voters, caught up or not, and its spare",
    ),
    Route(
        "KafkaBrokerInLogRecovery",
        "kafka_cluster_health",
        "the health sweep reports the broker's recovery; the restart runbook never restarts a broker in log recovery",
    ),
    Route(
        "KafkaMetadataErrors",
        "kafka_metadata_error_sweep",
        "the metadata error sweep reads every node's KIP-859 counters and starts the gated restart of a flagged broker",
    ),
    Route(
        "KafkaConnectFailedTask",
        "kafka_connect_autorestart",
        "the Connect sweep restarts the failed connector or tasks with its back-off, and alerts when it gives up",
        _connect,
    ),
)


def route_of(alert: Alert, routes: tuple[Route, ...] = ROUTES) -> Route | None:
    """The route of the alert's name, or None when no runbook handles it."""
    return next((r for r in routes if r.alertname == alert.name), None)


def incident_run_id(alert: Alert) -> str:
    """The run id of the alert's incident: its name, fingerprint and firing start (Airflow's run ids
    take letters, digits and ``_.+:-``; the start is hashed with the fingerprint so the id stays short)."""
    key = hashlib.sha256(f"{alert.fingerprint}|{alert.starts_at}".encode()).hexdigest()[:16]
    return f"alert__{re.sub(r'[^A-Za-z0-9_.+:-]', '_', alert.name)}__{alert.fingerprint[:16]}__{key}"


@dataclass(frozen=True)
class Dispatch:
    """What the intake does with one alert: ``start`` (``dag_id``, ``run_id``, ``conf``), ``covered``
    (another alert of the post starts the same run), ``resolved`` (recorded) or ``unrouted``
    (recorded and notified); ``why`` in words."""

    alert: Alert
    action: str
    why: str
    dag_id: str | None = None
    run_id: str | None = None
    conf: dict[str, Any] | None = None


def dispatch(alerts: list[Alert], routes: tuple[Route, ...] = ROUTES) -> list[Dispatch]:
    """One decision per alert, in the post's order. Alerts of one post that start the same sweep
    with the same conf (four brokers down, grouped by Alertmanager into one post) start one run: the
    first alert's; the others are ``covered`` by it (the sweep reads every broker anyway)."""
    out, first_of = [], {}
    for alert in alerts:
        d = _one(alert, routes)
        if d.action == "start":
            key = (d.dag_id, json.dumps(d.conf, sort_keys=True))
            if key in first_of:
                d = replace(
                    d,
                    action="covered",
                    run_id=first_of[key],
                    why=f"the run {first_of[key]} of {d.dag_id} covers it",
                )
            else:
                first_of[key] = d.run_id
        out.append(d)
    return out


def _one(alert: Alert, routes: tuple[Route, ...]) -> Dispatch:
    """The decision for one alert."""
    if not alert.firing:
        return Dispatch(
            alert, "resolved", f"{alert.name} resolved at {alert.ends_at or 'an unrecorded time'}"
        )
    route = route_of(alert, routes)
    if route is None:
        known = ", ".join(r.alertname for r in routes)
        return Dispatch(alert, "unrouted", f"no runbook handles the alert {alert.name} (routed: {known})")
    # the conf holds the sweep's own params only (the alert is in the intake's record and the run id)
    return Dispatch(alert, "start", route.why, route.dag_id, incident_run_id(alert), route.conf(alert.labels))
