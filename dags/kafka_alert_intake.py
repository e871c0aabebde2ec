"""
### Alert intake: Alertmanager's alerts start the runbook of their incident

Alertmanager posts to `/kafka-alerts/alertmanager` on Airflow's API server (a shared secret,
`KAFKA_RUNBOOKS_ALERTS_TOKEN`, as a bearer token); each post is an asset event of
`kafka_runbooks_alerts`, and each event runs this DAG. Per alert (`read_alerts`, a decision record
each): a firing alert with a route starts its sweep now (the failed-broker sweep for a broker down
or an offline log dir, the health sweep for offline or under-min-ISR partitions, a lost voter or a
broker in log recovery, the metadata error sweep, the Connect sweep for a failed task), with the
cluster (label `kafka_config_id`) and Connect cluster (label `connect_conn_id`) the labels name;
a resolved alert is recorded; an alert no route knows is recorded and notified
(`kafka_runbooks_notify`), never dropped. Alerts of one post that start the same sweep with the
same conf (four brokers down, grouped into one post) start one run; the others are recorded as
covered by it.

An alert never acts by itself: the sweep it starts reads the cluster and decides as on its
schedule, and anything destructive still waits at its gate. One incident is one run: the run id
is the incident's (alert name, Alertmanager's fingerprint, when it started firing), so a repeated
or flapping post of the same firing starts nothing more ("already started"); the cluster's lease
keeps two incidents' runbooks apart. The sweeps stay on their schedules as the back-stop when
alerting is down. A target sweep that is paused is refused by name (a run would wait unseen).
"""

from __future__ import annotations

from airflow.sdk import DAG, task

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.alert_intake import ALERTS, read_alerts
from kafka_runbooks_airflow.operators.trigger import UnpausedTriggerDagRunOperator

with DAG(
    dag_id="kafka_alert_intake",
    description="Alertmanager's alerts start the sweep of their incident, one run per incident.",
    doc_md=__doc__,
    **dag_settings.asset_intake(schedule=[ALERTS], tags=["kafka", "alerts", "intake"]),
):
    starts = task(task_id="read_alerts")(read_alerts)()
    UnpausedTriggerDagRunOperator.partial(
        task_id="start_runbook", skip_when_already_exists=True, wait_for_completion=False
    ).expand_kwargs(starts)
