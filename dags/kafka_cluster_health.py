"""
### Kafka cluster health sweep

Every 5 minutes: snapshot the cluster (brokers, KRaft quorum, every partition with its
leader, ISR, leader epoch and effective `min.insync.replicas`, replica sizes), run the
Spark health job over the snapshot, and log what it found as decision records:
**offline** partitions, partitions **under min ISR**, **at min ISR**, **under-replicated**,
and per-broker replica and leader counts. The report is published as the Asset
`kafka_cluster_health_report`.

It never changes the cluster. Created paused; unpause it, or trigger it by hand.

Params: `kafka_conn_id` (Airflow Kafka connection, default `kafka_default`) and
`max_listed` (partitions listed per category in the report). The Spark job is submitted
through the `spark_default` connection (`local[*]` in the local stack; point it at any
Spark master when one machine is not enough).
"""

from __future__ import annotations

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Asset, Param, task

from kafka_runbooks_airflow.operators.snapshot import KafkaClusterSnapshotOperator
from kafka_runbooks_airflow.spark import spark_job_path

HEALTH_REPORT = Asset(name="kafka_cluster_health_report", uri="kafka-runbooks://reports/cluster-health")

with DAG(
    dag_id="kafka_cluster_health",
    description="Snapshot the cluster, analyse every partition with Spark, report; never acts.",
    doc_md=__doc__,
    schedule="*/5 * * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=True,
    tags=["kafka", "sweep", "read-only"],
    default_args={"owner": "kafka-platform", "retries": 1, "retry_delay": pendulum.duration(seconds=30)},
    params={
        "kafka_conn_id": Param(
            "kafka_default",
            type="string",
            minLength=1,
            description="Airflow connection id of the Kafka cluster to report on (Admin > Connections).",
        ),
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
    snapshot = KafkaClusterSnapshotOperator(
        task_id="snapshot_cluster",
        kafka_config_id="{{ params.kafka_conn_id }}",
    )

    analyse = SparkSubmitOperator(
        task_id="analyse_health",
        application=spark_job_path("cluster_health.py"),
        conn_id="spark_default",
        name="kafka-cluster-health",
        application_args=[
            "--snapshot",
            "{{ ti.xcom_pull(task_ids='snapshot_cluster')['path'] }}",
            "--output",
            "{{ ti.xcom_pull(task_ids='snapshot_cluster')['path'] }}/health",
            "--max-listed",
            "{{ params.max_listed }}",
            "--imbalance-threshold-pct",
            "{{ params.imbalance_threshold_pct }}",
        ],
    )

    @task(outlets=[HEALTH_REPORT])
    def publish_report(snapshot_info: dict, *, outlet_events=None, params=None) -> dict:
        """Log the findings as decision records and publish the report (also per connection, for the UI)."""
        from kafka_runbooks_airflow.reports import publish_health_report

        return publish_health_report(
            snapshot_info["path"], outlet_events[HEALTH_REPORT], conn_id=params["kafka_conn_id"]
        )

    snapshot >> analyse >> publish_report(snapshot.output)
