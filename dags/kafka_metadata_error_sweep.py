"""
### KRaft metadata-error sweep (KIP-859), scheduled, every cluster of the fleet

Every 5 minutes (created paused; the environment variable `KAFKA_RUNBOOKS_METADATA_SWEEP_SCHEDULE`
changes it, `none` for manual runs only), for **every cluster of the fleet**: one mapped
`cluster` task group per Kafka connection (the run's `kafka_config_ids`, else the Variable
`kafka_runbooks_clusters`, else the environment `KAFKA_RUNBOOKS_CLUSTERS`, else
`kafka_default`; read when the run starts). Each cluster is read through its own
connections: metrics `kafka_broker_probe_default` for `kafka_default`, `<id>_probe` for any
other, and its restart back end `kafka_restart_default` / `<id>_restart` (a run that sweeps
exactly one cluster may name `metrics_conn_id` / `restart_conn_id` itself). One cluster's
failure fails only its own group; the others still sweep, report and ask.

Per cluster, it reads **every node's** Prometheus endpoint (brokers from DescribeCluster,
controllers from DescribeQuorum, plus every node the metrics connection names) and its
KIP-859 counters: broker `metadata-load-error-count` / `metadata-apply-error-count`,
controller `MetadataErrorCount` (the KIP's proposed names `listener-batch-load-error-count`,
`publisher-error-count`, `ForceRenounceCount` are accepted too), the broker state and the
active controller.

Each node's last values are kept in `state/metadata_errors/<kafka_config_id>.json` (data store),
so "went up since the last sweep" survives restarts. A node seen for the first time is
based (not flagged). After the node's process restarted (`process_start_time_seconds`
moved) its counters count from zero: any error since the restart flags it.

- a **broker** whose counter went up: a `kafka_broker_restart` run for it on its cluster
  (`node_ids=<id>` and the cluster's `kafka_config_id`, `probe_conn_id`, `restart_conn_id`; a
  reason naming the cluster and the counters; that runbook's **approval gate** and safety
  checks apply), started by `start_broker_restarts` (one mapped instance per run, every
  cluster's; run id `metadata_errors__<conn id>__broker_<id>__<sweep run>`). Not while a run
  this sweep started for it is still queued or running; none when more than
  `max_flagged_brokers` of that cluster are flagged at once (a person decides).
- a **controller** whose counter went up is reported. When it is its cluster's **active
  controller** and its counter went up in `controller_escalate_after` consecutive sweeps
  (default 2), that cluster's `cluster.controller_decision` gate asks: **Restart it (last)**
  starts `kafka_broker_restart` for it on that cluster (its own gate and quorum checks
  apply), **Leave it** does nothing. The answer is recorded with that cluster's gate (who,
  when, digest of the escalation shown); the restart is started only with a "Restart it"
  answer of that cluster's gate for exactly that escalation. No answer within an hour fails
  that cluster's gate and starts nothing. A cluster without an escalation skips its gate.
- a node whose metrics cannot be read is **unknown**, never healthy; a cluster whose
  connections cannot be used is that cluster's alert.

Every cluster's sweep writes `reports/metadata_errors/by_connection/<kafka_config_id>.json`
(and `latest.json`, the last cluster's; every node's counters, status and action; the report
names its cluster) and an event on the Asset `kafka_metadata_error_report`. Its
`raise_alerts` fails (so notifications fire) on unknown nodes, controllers with increasing
errors, too many flagged brokers, a failed discovery or an unusable connection.

It never restarts anything itself and never edits the metadata log.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Asset, Param, get_current_context, task, task_group

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.approvers import assigned_approvers
from kafka_runbooks_airflow.fleet import kafka_config_ids_param
from kafka_runbooks_airflow.metadata_errors import OPTION_DEFAULTS
from kafka_runbooks_airflow.operators.controller import ControllerDecisionOperator, ControllerRestartOperator
from kafka_runbooks_airflow.operators.trigger import UnpausedTriggerDagRunOperator

RESTART_DAG_ID = "kafka_broker_restart"
REPORT_ASSET = Asset(name="kafka_metadata_error_report")
GROUP = "cluster"
# this cluster's escalation: the sweep of the same group instance (map index), never another's
ESCALATION = "ti.xcom_pull(task_ids='cluster.sweep', key='controller_escalation', map_indexes=ti.map_index)"
RESTART_IT = "Restart it (last)"
LEAVE_IT = "Leave it"
# cron or preset; "none" = manual runs only (the end-to-end tests drive it run by run)
SCHEDULE = dag_settings.sweep_schedule("KAFKA_RUNBOOKS_METADATA_SWEEP_SCHEDULE", "*/5 * * * *")

with DAG(
    dag_id="kafka_metadata_error_sweep",
    description="Watch KIP-859 metadata error counters on every KRaft node of every cluster; route "
    "flagged nodes to a restart.",
    doc_md=__doc__,
    **dag_settings.sweep(
        schedule=SCHEDULE,
        tags=["kafka", "kraft", "sweep", "remediation", "fleet"],
        # one run may wait at a controller gate while the next sweep runs
        max_active_runs=2,
        dagrun_timeout=pendulum.duration(hours=2),
    ),
    params={
        "kafka_config_ids": kafka_config_ids_param(),
        "metrics_conn_id": Param(
            None,
            type=["null", "string"],
            minLength=1,
            description="Only when exactly one cluster is swept: its metrics connection (kind prometheus). "
            "null = each cluster's own (kafka_default: kafka_broker_probe_default; X: X_probe)",
        ),
        "restart_conn_id": Param(
            None,
            type=["null", "string"],
            minLength=1,
            description="Only when exactly one cluster is swept: its restart back end, passed to the "
            "kafka_broker_restart runs. null = each cluster's own (kafka_default: kafka_restart_default; "
            "X: X_restart)",
        ),
        "restart_brokers": Param(
            OPTION_DEFAULTS.restart_brokers,
            type="boolean",
            description="Start kafka_broker_restart for flagged brokers (off: report only)",
        ),
        "max_flagged_brokers": Param(
            OPTION_DEFAULTS.max_flagged_brokers,
            type="integer",
            minimum=0,
            description="More brokers of one cluster flagged at once than this: no automatic restart, "
            "a person decides",
        ),
        "controller_escalate_after": Param(
            OPTION_DEFAULTS.controller_escalate_after,
            type="integer",
            minimum=1,
            description="Consecutive sweeps with an increase on the active controller before asking a person",
        ),
        "fail_on_alert": Param(
            True, type="boolean", description="Fail raise_alerts when something needs a person"
        ),
    },
) as dag:

    @task(retries=0)
    def clusters(params=None) -> list[dict]:
        """The clusters to sweep, each with its connections: read now (never at parse time)."""
        from kafka_runbooks_airflow.metadata_errors import sweep_targets_from_params

        return sweep_targets_from_params(dict(params))

    @task(max_active_tis_per_dag=1, outlets=[REPORT_ASSET])
    def sweep(target: dict) -> list[dict]:
        """Read every node of one cluster, compare with its last sweep, decide, persist, report.

        Returns the restart runs to start (one per flagged broker); the report and the
        controller escalation go to XCom under ``report`` and ``controller_escalation``.
        """
        from kafka_runbooks_airflow.metadata_errors import run_metadata_error_sweep, sweep_options

        context = get_current_context()
        ti = context["ti"]
        options = sweep_options({**context["params"], **target}, context["dag"].dag_id)
        report = run_metadata_error_sweep(options, context["run_id"], ti)
        context["outlet_events"][REPORT_ASSET].extra = {
            "kafka_config_id": report["kafka_config_id"],
            "path": report["report_path"],
            "summary": report["summary"],
            "active_controller": report["active_controller"],
        }
        ti.xcom_push(key="report", value=report)
        ti.xcom_push(key="controller_escalation", value=report["controller_escalation"])
        return report["restart_requests"]

    @task
    def leave_active_controller() -> dict:
        """Record this cluster's 'Leave it' and who chose it (the gate's record); else skipped."""
        from kafka_runbooks_airflow.metadata_errors import leave_alone_if_chosen

        return leave_alone_if_chosen(get_current_context())

    @task
    def raise_alerts() -> dict:
        """Fail (so notifications fire) when a node of this cluster is unknown or a controller keeps failing."""
        from kafka_runbooks_airflow.metadata_errors import group_xcom, raise_on_alerts

        context = get_current_context()
        report = group_xcom(context, "sweep", "report")
        return raise_on_alerts(report, bool(context["params"]["fail_on_alert"]))

    @task_group(group_id=GROUP)
    def cluster(target: dict):
        """One cluster: its sweep, its alerts, its controller gate; a failure fails only this group."""
        swept = sweep(target)
        # skips itself unless this cluster's sweep escalated (no branch before it: a skip sent
        # from inside a mapped task group is not relied on)
        controller_decision = ControllerDecisionOperator(
            task_id="controller_decision",
            action_kind="controller",
            restart_it=RESTART_IT,
            leave_it=LEAVE_IT,
            restart_dag_id=RESTART_DAG_ID,
            options_mapping={
                RESTART_IT: f"{GROUP}.restart_active_controller",
                LEAVE_IT: f"{GROUP}.leave_active_controller",
            },
            response_timeout=timedelta(hours=1),
            assigned_users=assigned_approvers(),  # KAFKA_RUNBOOKS_APPROVERS; unset = role-based only
        )
        restart_active_controller = ControllerRestartOperator(
            task_id="restart_active_controller",
            action_kind="controller",
            # starts nothing without a "Restart it" of this cluster's gate for this escalation
            gate_task_id=f"{GROUP}.controller_decision",
            trigger_dag_id=RESTART_DAG_ID,
            trigger_run_id="{{ " + ESCALATION + "['trigger_run_id'] }}",
            # the approved conf, field by field: the task refuses if what it renders differs from it
            conf={
                "node_ids": "{{ " + ESCALATION + "['conf']['node_ids'] }}",
                "reason": "{{ " + ESCALATION + "['conf']['reason'] }}",
                "require_approval": True,
                "kafka_config_id": "{{ " + ESCALATION + "['conf']['kafka_config_id'] }}",
                "probe_conn_id": "{{ " + ESCALATION + "['conf']['probe_conn_id'] }}",
                "restart_conn_id": "{{ " + ESCALATION + "['conf']['restart_conn_id'] }}",
            },
            logical_date=None,
            skip_when_already_exists=True,
        )
        swept >> [controller_decision, raise_alerts()]
        controller_decision >> [restart_active_controller, leave_active_controller()]

    targets = clusters()
    cluster.expand(target=targets)

    @task(trigger_rule="all_done")
    def broker_restart_requests(targets: list[dict]) -> list[dict]:
        """Every cluster's broker restart runs, in cluster order (a failed cluster adds none)."""
        from kafka_runbooks_airflow.metadata_errors import collect_restart_requests

        return collect_restart_requests(get_current_context()["ti"], len(targets))

    requests = broker_restart_requests(targets)
    # after the sweeps only: a controller gate waiting for an hour never holds the broker restarts
    dag.get_task(f"{GROUP}.sweep") >> requests

    # one mapped instance per restart run (each names its cluster): nested mapping inside the
    # mapped cluster group would multiply, not follow, each cluster's own count
    start_broker_restarts = UnpausedTriggerDagRunOperator.partial(
        task_id="start_broker_restarts",
        trigger_dag_id=RESTART_DAG_ID,
        logical_date=None,
        skip_when_already_exists=True,
    ).expand_kwargs(requests)
