"""
### Kafka cluster health sweep

Every 5 minutes, for **every cluster of the fleet** (one mapped `cluster` task group per
Kafka connection: the run's `kafka_conn_ids`, else the Variable `kafka_runbooks_clusters`,
else the environment `KAFKA_RUNBOOKS_CLUSTERS`, else `kafka_default`; read when the run
starts, never at parse time): snapshot the cluster (brokers, KRaft quorum, every
partition with its leader, ISR, leader epoch and effective `min.insync.replicas`, replica
sizes), run the Spark health job over the snapshot, and log what it found as decision
records:
**offline** partitions, partitions **under min ISR**, **at min ISR**, **under-replicated**,
and per-broker replica and leader counts; from the snapshot itself, the KRaft quorum (voters'
lag on the leader's clock, whether it has a **spare voter**) and **offline log directories**
per broker with the partitions whose replica sat in one. The report is published as the Asset
`kafka_cluster_health_report` (one event per cluster, naming it) and written per
cluster to `reports/cluster_health/by_connection/<conn_id>.json` in the data store.
An unreachable cluster fails its own mapped tasks; the other clusters still report.

It never changes the cluster. Created paused; unpause it, or trigger it by hand.

Params: `kafka_conn_ids` (null = the fleet setting above) and
`max_listed` (partitions listed per category in the report). The Spark job is submitted
through the `spark_default` connection (`local[*]` in the local stack; point it at any
Spark master when one machine is not enough).
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Asset, Param, task, task_group

from kafka_runbooks_airflow.fleet import kafka_conn_ids_param
from kafka_runbooks_airflow.operators.snapshot import KafkaClusterSnapshotOperator
from kafka_runbooks_airflow.operators.spark import SparkJobOperator
from kafka_runbooks_airflow.spark import spark_job_path

# cron or preset; "none" = manual runs only (the e2e tests trigger it: a scheduled run of this
# max_active_runs=1 DAG starts as soon as it is unpaused and the test's own run queues behind it)
SCHEDULE = os.environ.get("KAFKA_RUNBOOKS_HEALTH_SCHEDULE", "*/5 * * * *").strip()

HEALTH_REPORT = Asset(name="kafka_cluster_health_report", uri="kafka-runbooks://reports/cluster-health")

with DAG(
    dag_id="kafka_cluster_health",
    description="Snapshot every cluster of the fleet, analyse every partition with Spark, report; never acts.",
    doc_md=__doc__,
    schedule=SCHEDULE if SCHEDULE.lower() not in ("", "none") else None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=True,
    tags=["kafka", "sweep", "read-only", "fleet"],
    default_args={"owner": "kafka-platform", "retries": 1, "retry_delay": pendulum.duration(seconds=30)},
    params={
        "kafka_conn_ids": kafka_conn_ids_param(),
        "max_listed": Param(
            1000,
            type="integer",
            minimum=1,
            maximum=100000,
            description="At most this many partitions are listed per category (offline, under min ISR, ...); "
            "the counts are always complete.",
        ),
        "imbalance_threshold_pct": Param(
            10,
            type="number",
            exclusiveMinimum=0,
            maximum=1000,
            description="A live broker whose leader or replica count is more than this many percent away "
            "from the mean is flagged as imbalanced (reported only; nothing is moved).",
        ),
    },
) as dag:

    @task(retries=0)
    def clusters(params=None) -> list[str]:
        """The fleet setting, read now (never at parse time)."""
        from kafka_runbooks_airflow.fleet import fleet_clusters

        return fleet_clusters(dict(params))

    @task
    def spark_args(snapshot_info: dict, params=None) -> list[str]:
        """The health job's arguments for this cluster's snapshot."""
        from kafka_runbooks_airflow.reports import HEALTH_DIR

        return [
            "--snapshot",
            snapshot_info["path"],
            "--output",
            f"{snapshot_info['path']}/{HEALTH_DIR}",
            "--max-listed",
            str(params["max_listed"]),
            "--imbalance-threshold-pct",
            str(params["imbalance_threshold_pct"]),
        ]

    @task(outlets=[HEALTH_REPORT])
    def publish_report(snapshot_info: dict, kafka_conn_id: str, *, outlet_events=None) -> dict:
        """Log the findings as decision records and publish the report (also per connection, for the UI)."""
        from kafka_runbooks_airflow.reports import publish_health_report

        return publish_health_report(
            snapshot_info["path"], outlet_events[HEALTH_REPORT], conn_id=kafka_conn_id
        )

    @task_group
    def cluster(kafka_conn_id: str):
        """One cluster: its failure fails only this mapped group, the other clusters still report."""
        snapshot = KafkaClusterSnapshotOperator(task_id="snapshot_cluster", kafka_config_id=kafka_conn_id)
        analyse = SparkJobOperator(
            task_id="analyse_health",
            application=spark_job_path("cluster_health.py"),
            conn_id="spark_default",
            name="kafka-cluster-health",
            application_args=spark_args(snapshot.output),
        )
        analyse >> publish_report(snapshot.output, kafka_conn_id)

    cluster.expand(kafka_conn_id=clusters())
