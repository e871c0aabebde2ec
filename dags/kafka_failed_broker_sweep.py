"""
### Failed-broker sweep (scheduled)

Every 5 minutes (created paused; `KAFKA_RUNBOOKS_FAILED_BROKER_SWEEP_SCHEDULE` changes
that, `none` = manual runs only), for **every cluster of the fleet** (one mapped `cluster`
task group per Kafka connection: the run's `kafka_config_ids`, else the Variable
`kafka_runbooks_clusters`, else the environment `KAFKA_RUNBOOKS_CLUSTERS`, else
`kafka_default`; an unreachable cluster fails only its own tasks): read the cluster and
track **failed brokers**: brokers
the assignments still name that are down or fenced. The time each was first seen failed
is kept in `state/failed_brokers/<kafka_config_id>.json` in the data store (it
survives a scheduler restart, an Airflow upgrade and a cleared run) and forgotten as
soon as the broker is back: **a bounce never starts a reassignment**.

- failed longer than `alert_after_minutes` (default 15): an alert record (WARNING);
- failed longer than `failure_threshold_minutes` (default 30; **-1 turns the automation
  off**): it starts `kafka_failed_broker_reassignment` for those brokers, with the
  approval gate on unless `require_approval` is false;
- more than `max_failed_fraction` of the brokers failed at once (default a third): an
  **outage, not a broker failure**; it refuses, and says so.

It never starts a second reassignment on a cluster while one is active there (runs on
other clusters do not count; the started run's id names the cluster), starts another for the same
broker only after `retrigger_after_minutes` (default: the failure threshold), and
removes throttles a dead reassignment run left behind.

**A failed log directory on a live broker** (JBOD): the same read asks every live broker for its
log dirs (DescribeLogDirs). A dir the broker answers with an error is offline; the time it was
first seen is kept in `state/offline_log_dirs/<kafka_config_id>.json`, it is alerted after
`alert_after_minutes`, and past `failure_threshold_minutes` it starts `kafka_log_dir_failure`
for that broker **only when `start_log_dir_failure` is true** (default false: alert only), no
broker is failed (the dead broker's heal goes first), and no reassignment of any kind runs on
the cluster; one broker per cluster at a time. A live broker that does not answer is
"unknown": never healthy, never a trigger.

Settings, first found wins: the run's params (null = not set), the Variable
`kafka_failed_broker_sweep` (a JSON object with the same keys), the environment
(`KAFKA_RUNBOOKS_FAILED_BROKER_<KEY>`, JSON values), the defaults. The chunk limits and
the throttle are passed on to the reassignment run.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, get_current_context, task, task_group

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.fleet import kafka_config_ids_param
from kafka_runbooks_airflow.inputs import duration_schema, size_schema
from kafka_runbooks_airflow.operators.trigger import TriggerWhenDueOperator

NULLABLE_NUMBER = ["null", "number"]
# cron or preset; "none" = manual runs only (the e2e tests sweep by hand: a scheduled sweep
# seeing a killed broker first would start its countdown before the test looks)
SCHEDULE = dag_settings.sweep_schedule("KAFKA_RUNBOOKS_FAILED_BROKER_SWEEP_SCHEDULE", "*/5 * * * *")

with DAG(
    dag_id="kafka_failed_broker_sweep",
    description="Track failed brokers and live brokers' offline log dirs; after the threshold start the "
    "throttled reassignment of their replicas.",
    doc_md=__doc__,
    **dag_settings.sweep(
        schedule=SCHEDULE,
        tags=["kafka", "sweep", "reassignment", "fleet"],
        max_active_runs=1,
        dagrun_timeout=pendulum.duration(minutes=10),
    ),
    params={
        "kafka_config_ids": kafka_config_ids_param(),
        "alert_after_minutes": Param(
            None,
            **duration_schema("minutes", allow_empty=True, allow_off=True),
            description="Alert after, e.g. '15m', '1h' (or a number of minutes); 'off' or -1: no alert",
        ),
        "failure_threshold_minutes": Param(
            None,
            **duration_schema("minutes", allow_empty=True, allow_off=True),
            description="Start the reassignment after, e.g. '30m', '2h' (or a number of minutes); 'off' or "
            "-1: automation off",
        ),
        "max_failed_fraction": Param(
            None,
            type=NULLABLE_NUMBER,
            exclusiveMinimum=0,
            maximum=1,
            description="More failed brokers than this share of the cluster is an outage",
        ),
        "retrigger_after_minutes": Param(
            None,
            **duration_schema("minutes", allow_empty=True),
            description="Wait before starting another run for the same broker, e.g. '1h' (or a number of minutes)",
        ),
        "max_partitions_per_chunk": Param(None, type=["null", "integer"], minimum=1, description="Passed on"),
        "max_bytes_per_chunk": Param(
            None,
            **size_schema(allow_empty=True),
            description="Passed on: e.g. '1 GiB' (or a number of bytes)",
        ),
        "throttle_bytes_per_sec": Param(
            None,
            **size_schema(allow_empty=True),
            description="Passed on: e.g. '50 MiB' (or a number of bytes)",
        ),
        "require_approval": Param(None, type=["null", "boolean"], description="Passed on (default true)"),
        "elect_preferred_leaders": Param(
            None,
            type=["null", "boolean"],
            description="Passed on (default true): after healing, elect the preferred leaders of the moved "
            "partitions, approved with the plan",
        ),
        "start_log_dir_failure": Param(
            None,
            type=["null", "boolean"],
            description="Default false (alert only): when true, a live broker's offline log dir past the failure "
            "threshold starts kafka_log_dir_failure for that broker",
        ),
    },
) as dag:

    @task(retries=0)
    def clusters(params=None) -> list[str]:
        """The fleet setting, read now (never at parse time)."""
        from kafka_runbooks_airflow.fleet import fleet_clusters

        return fleet_clusters(dict(params))

    @task(multiple_outputs=True)
    def sweep(kafka_config_id: str) -> dict:
        """Read, track, decide for one cluster; the decision records are the sweep's report."""
        from kafka_runbooks_airflow.failed_broker import checked_sweep_settings, run_sweep

        context = get_current_context()
        settings = checked_sweep_settings(dict(context["params"]))  # the run's params, read once here
        return run_sweep(settings, kafka_config_id, context["run_id"], context["ti"])

    @task_group
    def cluster(kafka_config_id: str):
        """One cluster: its failure fails only this mapped group, the other clusters still report."""
        result = sweep(kafka_config_id)
        # starts a run only when the sweep decided so (a broker past the threshold and nothing
        # else in the way); otherwise skipped, by the operator itself
        TriggerWhenDueOperator(
            task_id="start_reassignment",
            trigger_dag_id="kafka_failed_broker_reassignment",
            due=result["trigger"],
            trigger_run_id=result["run_id"],
            conf=result["conf"],
            wait_for_completion=False,
            skip_when_already_exists=True,
        )
        # a live broker's failed log dir: only when start_log_dir_failure is on, no broker is failed
        # (the heal goes first) and no reassignment runs on the cluster
        TriggerWhenDueOperator(
            task_id="start_log_dir_failure",
            trigger_dag_id="kafka_log_dir_failure",
            due=result["log_dir_trigger"],
            trigger_run_id=result["log_dir_run_id"],
            conf=result["log_dir_conf"],
            wait_for_completion=False,
            skip_when_already_exists=True,
        )

    cluster.expand(kafka_config_id=clusters())
