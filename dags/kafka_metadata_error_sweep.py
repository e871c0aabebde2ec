"""
### KRaft metadata-error sweep (KIP-859), scheduled

Every 5 minutes (created paused; the environment variable `KAFKA_RUNBOOKS_METADATA_SWEEP_SCHEDULE`
changes it, `none` for manual runs only): reads
**every node's** Prometheus endpoint (brokers from DescribeCluster, controllers from
DescribeQuorum, plus every node the metrics connection names) and its KIP-859 counters:
broker `metadata-load-error-count` / `metadata-apply-error-count`, controller
`MetadataErrorCount` (the KIP's proposed names `listener-batch-load-error-count`,
`publisher-error-count`, `ForceRenounceCount` are accepted too), the broker state and the
active controller.

Each node's last values are kept in `$KAFKA_RUNBOOKS_DATA_DIR/state/metadata_errors/<kafka_conn_id>.json`,
so "went up since the last sweep" survives restarts. A node seen for the first time is
based (not flagged). After the node's process restarted (`process_start_time_seconds`
moved) its counters count from zero: any error since the restart flags it.

- a **broker** whose counter went up: a `kafka_broker_restart` run for it
  (`node_ids=<id>`, a reason naming the counters; that runbook's **approval gate** and
  safety checks apply). Not while a run this sweep started for it is still queued or
  running; none when more than `max_flagged_brokers` are flagged at once (a person decides).
- a **controller** whose counter went up is reported. When it is the **active controller**
  and its counter went up in `controller_escalate_after` consecutive sweeps (default 2), the
  sweep asks at the `controller_decision` gate: **Restart it (last)** starts
  `kafka_broker_restart` for it (its own gate and quorum checks apply), **Leave it** does
  nothing. The answer is recorded with the run (who, when, digest of the escalation
  shown); the restart is started only with a "Restart it" answer for exactly that
  escalation. No answer within an hour fails the run and starts nothing.
- a node whose metrics cannot be read is **unknown**, never healthy.

Every sweep writes `$KAFKA_RUNBOOKS_DATA_DIR/reports/metadata_errors/latest.json` (every
node's counters, status and action) and updates the Asset `kafka_metadata_error_report`.
`raise_alerts` fails (so notifications fire) on unknown nodes, controllers with increasing
errors, too many flagged brokers, or a failed discovery.

It never restarts anything itself and never edits the metadata log.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, Asset, Param, get_current_context, task

from kafka_runbooks_airflow.approvers import assigned_approvers
from kafka_runbooks_airflow.gate import ApprovedTriggerDagRunOperator, PlanDecisionBranchOperator

RESTART_DAG_ID = "kafka_broker_restart"
REPORT_ASSET = Asset(name="kafka_metadata_error_report")
ESCALATION = "ti.xcom_pull(task_ids='sweep', key='controller_escalation')"
RESTART_IT = "Restart it (last)"
LEAVE_IT = "Leave it"
# cron or preset; "none" = manual runs only (the end-to-end tests drive it run by run)
SCHEDULE = os.environ.get("KAFKA_RUNBOOKS_METADATA_SWEEP_SCHEDULE", "*/5 * * * *").strip()

with DAG(
    dag_id="kafka_metadata_error_sweep",
    description="Watch KIP-859 metadata error counters on every KRaft node; route flagged nodes to a restart.",
    doc_md=__doc__,
    schedule=SCHEDULE if SCHEDULE.lower() not in ("", "none") else None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    # one run may wait at the controller gate while the next sweep runs
    max_active_runs=2,
    dagrun_timeout=pendulum.duration(hours=2),
    is_paused_upon_creation=True,
    tags=["kafka", "kraft", "sweep", "remediation"],
    default_args={"owner": "kafka-platform", "retries": 0},
    params={
        "kafka_conn_id": Param("kafka_default", type="string", minLength=1, description="Kafka connection"),
        "metrics_conn_id": Param(
            "kafka_broker_probe_default",
            type="string",
            minLength=1,
            description="Connection (kind prometheus) saying where each node's metrics are",
        ),
        "restart_conn_id": Param(
            "kafka_restart_default",
            type="string",
            minLength=1,
            description="Restart back-end connection of this cluster, passed to the kafka_broker_restart runs "
            "the sweep starts (with kafka_conn_id, and metrics_conn_id as their probe)",
        ),
        "restart_brokers": Param(
            True,
            type="boolean",
            description="Start kafka_broker_restart for flagged brokers (off: report only)",
        ),
        "max_flagged_brokers": Param(
            2,
            type="integer",
            minimum=0,
            description="More brokers flagged at once than this: no automatic restart, a person decides",
        ),
        "controller_escalate_after": Param(
            2,
            type="integer",
            minimum=1,
            description="Consecutive sweeps with an increase on the active controller before asking a person",
        ),
        "fail_on_alert": Param(
            True, type="boolean", description="Fail raise_alerts when something needs a person"
        ),
    },
) as dag:

    @task(max_active_tis_per_dag=1, outlets=[REPORT_ASSET])
    def sweep() -> list[dict]:
        """Read every node, compare with the last sweep, decide, persist, write the report.

        Returns the restart runs to start (one per flagged broker); the report and the
        controller escalation go to XCom under ``report`` and ``controller_escalation``.
        """
        from kafka_runbooks_airflow.metadata_errors import run_metadata_error_sweep

        context = get_current_context()
        ti = context["ti"]
        report = run_metadata_error_sweep(
            dict(context["params"]), context["run_id"], ti, context["dag"].dag_id
        )
        context["outlet_events"][REPORT_ASSET].extra = {
            "path": report["report_path"],
            "summary": report["summary"],
            "active_controller": report["active_controller"],
        }
        ti.xcom_push(key="report", value=report)
        ti.xcom_push(key="controller_escalation", value=report["controller_escalation"])
        return report["restart_requests"]

    restart_requests = sweep()

    start_broker_restarts = TriggerDagRunOperator.partial(
        task_id="start_broker_restarts",
        trigger_dag_id=RESTART_DAG_ID,
        logical_date=None,
        skip_when_already_exists=True,
    ).expand_kwargs(restart_requests)

    @task.branch
    def controller_gate_or_not() -> list[str]:
        """Ask a person only when the active controller keeps failing."""
        escalation = get_current_context()["ti"].xcom_pull(task_ids="sweep", key="controller_escalation")
        return ["controller_decision"] if escalation else []

    controller_decision = PlanDecisionBranchOperator(
        task_id="controller_decision",
        action_kind="controller",
        approve_option=RESTART_IT,
        subject="Active controller {{ " + ESCALATION + "['node_id'] }}: metadata errors keep increasing",
        body=(
            "{{ " + ESCALATION + "['reason'] }}\n\n"
            f"**{RESTART_IT}** starts `{RESTART_DAG_ID}` for this controller (its approval gate and "
            "quorum checks apply; the active controller is restarted last).\n\n"
            f"**{LEAVE_IT}** does nothing; the sweep asks again if the counter keeps going up. "
            "No answer within an hour fails this run and starts nothing."
        ),
        options=[RESTART_IT, LEAVE_IT],
        options_mapping={RESTART_IT: "restart_active_controller", LEAVE_IT: "leave_active_controller"},
        response_timeout=timedelta(hours=1),
        assigned_users=assigned_approvers(),  # KAFKA_RUNBOOKS_APPROVERS; unset = role-based only
    )

    restart_active_controller = ApprovedTriggerDagRunOperator(
        task_id="restart_active_controller",
        action_kind="controller",
        gate_task_id="controller_decision",  # starts nothing without a "Restart it" for this escalation
        trigger_dag_id=RESTART_DAG_ID,
        trigger_run_id="{{ " + ESCALATION + "['trigger_run_id'] }}",
        # the approved conf, field by field: the task refuses if what it renders differs from it
        conf={
            "node_ids": "{{ " + ESCALATION + "['conf']['node_ids'] }}",
            "reason": "{{ " + ESCALATION + "['conf']['reason'] }}",
            "require_approval": True,
            "kafka_conn_id": "{{ " + ESCALATION + "['conf']['kafka_conn_id'] }}",
            "probe_conn_id": "{{ " + ESCALATION + "['conf']['probe_conn_id'] }}",
            "restart_conn_id": "{{ " + ESCALATION + "['conf']['restart_conn_id'] }}",
        },
        logical_date=None,
        skip_when_already_exists=True,
    )

    @task
    def leave_active_controller() -> dict:
        """Record the choice to leave the controller alone, and who made it (the gate's record)."""
        from kafka_runbooks_airflow.gate import RECORD_KEY
        from kafka_runbooks_airflow.metadata_errors import record_left_alone

        ti = get_current_context()["ti"]
        return record_left_alone(
            ti.xcom_pull(task_ids="sweep", key="controller_escalation"),
            ti.xcom_pull(task_ids="controller_decision", key=RECORD_KEY),
        )

    @task
    def raise_alerts() -> dict:
        """Fail (so notifications fire) when a node is unknown or a controller keeps failing."""
        from kafka_runbooks_airflow.metadata_errors import raise_on_alerts

        context = get_current_context()
        report = context["ti"].xcom_pull(task_ids="sweep", key="report")
        return raise_on_alerts(report, bool(context["params"]["fail_on_alert"]))

    gate = controller_gate_or_not()
    restart_requests >> [gate, raise_alerts()]
    gate >> controller_decision >> [restart_active_controller, leave_active_controller()]
