"""
### Kafka cluster health sweep

Every 5 minutes, for **every cluster of the fleet** (one mapped `cluster` task group per
Kafka connection: the run's `kafka_config_ids`, else the Variable `kafka_runbooks_clusters`,
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

**Balance and replication factor, the way `kafka_rebalance` judges them**: replicas,
preferred leaders and bytes per live broker against the rebalance's target spreads
(`max_replica_spread`, `max_leader_spread`, default the rebalance's own `10%`;
`max_bytes_spread_percent`, default its own 20 % of the mean; the same rule units), with how far
out and the fewest moves that would bring the counts within; and the topics whose replication
factor is below `min_replication_factor` (default 3, or the live brokers when there are fewer). A
live broker whose log dirs are unknown (no DescribeLogDirs answer) makes the balance **unknown**:
never "balanced", never a proposal; a broker whose size alone is unknown leaves the bytes unknown.

It never changes the cluster. **It proposes, never acts**: only when `start_rebalance` is true
(default false: report only, like the failed-broker sweep's `start_log_dir_failure`), replicas,
preferred leaders or bytes are out of the target spread, every broker holding replicas is live, no log dir
is offline and no reassigning run is active on the cluster (one per cluster at a time), it starts
ONE `kafka_rebalance` run (mode `full`, approval gate on) that waits at its gate for an operator;
another only after `retrigger_after_minutes` (default a day). The decision is recorded either way
and shown on the Kafka page.

Settings, first found wins: the run's params (null = not set), the Variable `kafka_cluster_health`
(a JSON object with the same keys), the environment (`KAFKA_RUNBOOKS_HEALTH_<KEY>`, JSON values),
the defaults.

Created paused; unpause it, or trigger it by hand.

Params: `kafka_config_ids` (null = the fleet setting above) and
`max_listed` (partitions listed per category in the report). The Spark job is submitted
through the `spark_default` connection (`local[*]` in the local stack; point it at any
Spark master when one machine is not enough).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Asset, Param, get_current_context, task, task_group

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.fleet import kafka_config_ids_param
from kafka_runbooks_airflow.inputs import duration_schema
from kafka_runbooks_airflow.operators.snapshot import KafkaClusterSnapshotOperator
from kafka_runbooks_airflow.operators.spark import SparkJobOperator
from kafka_runbooks_airflow.operators.trigger import TriggerWhenDueOperator
from kafka_runbooks_airflow.spark_connect import spark_job_path

# cron or preset; "none" = manual runs only (the e2e tests trigger it: a scheduled run of this
# max_active_runs=1 DAG starts as soon as it is unpaused and the test's own run queues behind it)
SCHEDULE = dag_settings.sweep_schedule("KAFKA_RUNBOOKS_HEALTH_SCHEDULE", "*/5 * * * *")

SPREAD_PATTERN = r"^\s*\d+(\.\d+)?\s*%?\s*$"  # kafka_rebalance's own (a count or a percentage)

HEALTH_REPORT = Asset(name="kafka_cluster_health_report", uri="kafka-runbooks://reports/cluster-health")

with DAG(
    dag_id="kafka_cluster_health",
    description="Snapshot every cluster of the fleet, analyse every partition with Spark, report; never acts "
    "(it may propose one gated kafka_rebalance run, off by default).",
    doc_md=__doc__,
    **dag_settings.sweep(
        schedule=SCHEDULE,
        tags=["kafka", "sweep", "read-only", "fleet"],
        max_active_runs=1,
        retries=1,
        retry_delay=pendulum.duration(seconds=30),
    ),
    params={
        "kafka_config_ids": kafka_config_ids_param(),
        "max_listed": Param(
            1000,
            type="integer",
            minimum=1,
            maximum=100000,
            description="At most this many partitions are listed per category (offline, under min ISR, ...); "
            "the counts are always complete.",
        ),
        "start_rebalance": Param(
            None,
            type=["null", "boolean"],
            description="Default false (report only): when true, replicas, preferred leaders or bytes out of the "
            "target spread start ONE kafka_rebalance run (mode full) that waits at its approval gate",
        ),
        "max_replica_spread": Param(
            None,
            type=["null", "string"],
            pattern=SPREAD_PATTERN,
            description="Target for replicas per live broker, as kafka_rebalance's: a count ('2') or a percentage "
            "of the mean ('10%'); null: kafka_rebalance's default",
        ),
        "max_leader_spread": Param(
            None,
            type=["null", "string"],
            pattern=SPREAD_PATTERN,
            description="Target for preferred leaders per live broker, the same way; null: kafka_rebalance's default",
        ),
        "max_bytes_spread_percent": Param(
            None,
            type=["null", "number"],
            minimum=0,
            description="Target for bytes per live broker (DescribeLogDirs), as kafka_rebalance's: most minus least "
            "within this percentage of the mean; null: kafka_rebalance's default (20)",
        ),
        "min_replication_factor": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            description="Topics below this replication factor are reported; null: 3, or the live brokers when fewer",
        ),
        "retrigger_after_minutes": Param(
            None,
            **duration_schema("minutes", allow_empty=True),
            description="Wait before proposing another rebalance on the same cluster, e.g. '1d', '12h' (or a number "
            "of minutes); null: a day",
        ),
    },
) as dag:

    @task(retries=0)
    def clusters(params=None) -> list[str]:
        """The fleet setting, read now (never at parse time)."""
        from kafka_runbooks_airflow.fleet import fleet_clusters

        return fleet_clusters(dict(params))

    @task(retries=0)
    def health_settings(params=None) -> dict:
        """The targets, the minimum replication factor and whether to propose, read now (a bad one fails
        here, before any cluster is read)."""
        from airflow.sdk import Variable

        from kafka_runbooks_airflow.health import HEALTH_VARIABLE
        from kafka_runbooks_airflow.health import health_settings as read

        return read(dict(params), Variable.get(HEALTH_VARIABLE, default=None))

    @task
    def spark_args(snapshot_info: dict, settings: dict, params=None) -> list[str]:
        """The health job's arguments for this cluster's snapshot."""
        from kafka_runbooks_airflow.reports import HEALTH_DIR

        rf = settings["min_replication_factor"]
        return [
            *([] if rf is None else ["--min-replication-factor", str(rf)]),
            "--snapshot",
            snapshot_info["path"],
            "--output",
            f"{snapshot_info['path']}/{HEALTH_DIR}",
            "--max-listed",
            str(params["max_listed"]),
        ]

    @task(outlets=[HEALTH_REPORT], multiple_outputs=True)
    def publish_report(
        snapshot_info: dict, kafka_config_id: str, settings: dict, *, outlet_events=None
    ) -> dict:
        """Log the findings as decision records, decide the proposal, publish the report (also per
        connection, for the Kafka page)."""
        from kafka_runbooks_airflow.health import typed_settings
        from kafka_runbooks_airflow.reports import ProposalContext, publish_health_report

        context = get_current_context()
        checked = typed_settings(settings)  # the health_settings task's XCom, typed once
        return publish_health_report(
            snapshot_info["path"],
            outlet_events[HEALTH_REPORT],
            conn_id=kafka_config_id,
            proposal=ProposalContext(checked, context["run_id"], context["ti"]),
        )

    @task_group
    def cluster(kafka_config_id: str, settings: dict):
        """One cluster: its failure fails only this mapped group, the other clusters still report."""
        snapshot = KafkaClusterSnapshotOperator(task_id="snapshot_cluster", kafka_config_id=kafka_config_id)
        analyse = SparkJobOperator(
            task_id="analyse_health",
            application=spark_job_path("cluster_health.py"),
            conn_id="spark_default",
            name="kafka-cluster-health",
            application_args=spark_args(snapshot.output, settings),
        )
        published = publish_report(snapshot.output, kafka_config_id, settings)
        analyse >> published
        # starts a run only when the report's proposal decided so (start_rebalance on, out of spread,
        # nothing in the way); otherwise skipped, by the operator itself
        TriggerWhenDueOperator(
            task_id="start_rebalance",
            trigger_dag_id="kafka_rebalance",
            due=published["rebalance_trigger"],
            trigger_run_id=published["rebalance_run_id"],
            conf=published["rebalance_conf"],
            wait_for_completion=False,
            skip_when_already_exists=True,
        )

    cluster.partial(settings=health_settings()).expand(kafka_config_id=clusters())
