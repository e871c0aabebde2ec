"""
### Kafka Connect auto-restart (scheduled sweep)

Every minute (created paused), for every Kafka cluster of the fleet (`kafka_config_ids` param,
else Variable `kafka_runbooks_clusters`, else env `KAFKA_RUNBOOKS_CLUSTERS`, else
`kafka_default`), one mapped `cluster` task group: its Connect clusters are the Airflow http
connections its Kafka connection's extra names (`"connect_conn_ids": ["connect_eu1"]`;
`kafka_default` without it: `kafka_connect_default`). A run's `connect_conn_ids` param
replaces all that with exactly the Connect clusters it lists, as one group. One Kafka
cluster's failure fails only its own group. For each Connect cluster, list every
connector with its status and tasks in **one call**, and restart each connector or task in
**FAILED** when the back-off policy says it is due: by default at minutes **0, 2, 6, 12, 20
and 30** after the first failure (Strimzi proposal 007), then no more: it stays FAILED and
the sweep raises an **alert** (in its log, in its report, and by failing the `raise_alerts`
task so Airflow's usual failure notifications fire). The count resets once the connector
has been healthy for longer than its current interval.

A restart is one KIP-745 call (`POST /connectors/{name}/restart?includeTasks=true&onlyFailed=true`:
the connector only if it failed, and only its failed tasks); on workers older than 3.0 (told
once per sweep by the worker's version) the per-connector and per-task calls. MirrorMaker 2
connectors are connectors like any other.

A restart the worker **refuses** (`500 Failed to start ...`) counts as a restart: same
back-off, same give-up alert. From `errors_before_alert` error answers in a row (refused,
409, timeout) every further one alerts. A name Connect's REST API **cannot address** (`/`
or `%` in it) is reported once, with what to do, and never called again.

Per connector, the restart count and last restart time are kept in
`state/connect_autorestart/<conn_id>.json` in the data store (they survive an
Airflow restart) and shown in the report,
`reports/connect_autorestart/by_connection/<kafka conn id>.json` in the data store
(and `latest.json`, the last group's), which names its Kafka cluster.

Switch auto-restart off per connector with `exclude` (names or shell patterns, e.g.
`mm2-*`), or for good with the Variable `kafka_connect_autorestart_exclude` (a JSON list).
An unreachable cluster is reported and does not stop the others. It never deletes, pauses
or reconfigures a connector, and never restarts one that is not FAILED.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, get_current_context, task, task_group

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.fleet import kafka_config_ids_param
from kafka_runbooks_airflow.inputs import duration_schema

SCHEDULE = dag_settings.sweep_schedule("KAFKA_RUNBOOKS_CONNECT_AUTORESTART_SCHEDULE", "* * * * *")

with DAG(
    dag_id="kafka_connect_autorestart",
    description="Restart FAILED Kafka Connect connectors and tasks with back-off; alert when it gives up.",
    doc_md=__doc__,
    **dag_settings.sweep(
        schedule=SCHEDULE,
        tags=["kafka", "connect", "sweep", "remediation"],
        max_active_runs=1,
        dagrun_timeout=pendulum.duration(minutes=10),
    ),
    params={
        "kafka_config_ids": kafka_config_ids_param(),
        "connect_conn_ids": Param(
            None,
            type=["null", "array"],
            items={"type": "string", "minLength": 1},
            minItems=1,
            description="null: the Connect clusters of every Kafka cluster of the fleet (each Kafka "
            "connection's extra connect_conn_ids). A list: exactly these Airflow http connections, one "
            "per Connect cluster, as one group",
        ),
        "exclude": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            description="Connector names or shell patterns never auto-restarted (also: Variable "
            "kafka_connect_autorestart_exclude)",
        ),
        "max_restarts": Param(
            6,
            type=["null", "integer"],
            minimum=0,
            description="Restarts before giving up and alerting; null = unlimited (Strimzi today)",
        ),
        "max_interval_minutes": Param(
            "30m",
            **duration_schema("minutes", minimum=0.001),
            description="Cap on the wait between two restarts, e.g. '30m', '1h' (or a number of minutes)",
        ),
        "step_minutes": Param(
            "2m",
            **duration_schema("minutes", minimum=0.001),
            description="The wait grows by this much after each restart, e.g. '2m', '90s' (or a number of minutes)",
        ),
        "minute_seconds": Param(
            "60s",
            **duration_schema(minimum=0.001),
            description="How long one policy minute is: '60s' (or a number of seconds); lower it only to test "
            "the schedule",
        ),
        "errors_before_alert": Param(
            3,
            type="integer",
            minimum=1,
            description="Restart calls in a row answered with an error (refused, rebalance, timeout) "
            "before each further one raises an alert",
        ),
        "fail_on_alert": Param(
            True, type="boolean", description="Fail the raise_alerts task when something needs a person"
        ),
    },
) as dag:

    @task(retries=0)
    def clusters(params=None) -> list[dict]:
        """The groups to sweep (per Kafka cluster, its Connect clusters), read now (never at parse time)."""
        from kafka_runbooks_airflow.fleet import connect_fleet

        return connect_fleet(dict(params))

    @task
    def sweep(group: dict) -> dict:
        """List, decide, restart what is due, persist the counts, write the report."""
        from kafka_runbooks_airflow.connect import run_autorestart_sweep, sweep_request

        context = get_current_context()
        return run_autorestart_sweep(sweep_request(context["params"]), context["run_id"], group=group)

    @task
    def raise_alerts(report: dict) -> dict:
        """Fail (so notifications fire) when a connector was given up on or a cluster is unreachable."""
        from kafka_runbooks_airflow.connect import raise_on_alerts, sweep_request

        return raise_on_alerts(report, sweep_request(get_current_context()["params"]).fail_on_alert)

    @task_group
    def cluster(group: dict):
        """One Kafka cluster's Connect clusters: a failure fails only this mapped group."""
        raise_alerts(sweep(group))

    cluster.expand(group=clusters())
