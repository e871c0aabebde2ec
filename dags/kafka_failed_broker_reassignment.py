"""
### Move a failed broker's replicas elsewhere, in throttled chunks

Started by `kafka_failed_broker_sweep` when a broker stays failed past the threshold, or
by hand. For every replica on a failed broker (one that the assignments still name but
that is down or fenced), a live broker gets a new replica, chunk after chunk, under a
replication throttle, the way `kafka-reassign-partitions` would be run by a careful
engineer:

1. **validate**: the failed brokers are known and not available (or `detect` them), the
   receivers are known, available and not failed, the throttle is above zero; a
   reassignment in flight that this runbook did not start is refused. Bad input fails
   here, before anything moves. Throttles left by a dead run are removed.
2. **finish_earlier_run**: partitions an earlier (killed) run submitted are waited for,
   throttled, so nothing moves twice.
3. **snapshot** (sizes included) and **plan** with the Spark job
   `spark_jobs/failed_broker_plan.py` (RF kept, racks respected, receivers balanced,
   preferred leader kept, ordered chunks; `kafka-reassign-partitions` JSON).
4. **review_plan**: an independent check of the plan; the summary (partitions, bytes,
   per-broker before and after) goes to the log and to the **approval gate** (a
   `dry_run` stops here). The approval is recorded with the run and bound to the digest
   of the chunks shown; `execute_chunks` refuses without an approval of exactly its
   chunks. Reject, or no answer within `approval_timeout_s`, fails the run; a cleared run
   asks again. `require_approval=false` is refused unless the deployment allows ungated
   runs (Variable `kafka_runbooks_allow_ungated`).
5. **execute_chunks** (reschedule sensor, no worker slot): per chunk, stop if a failed
   broker came back, drop what is already in place, set the throttle, submit, log
   progress (partitions, bytes, rate, time left), verify target replicas and full ISR,
   remove the throttle. Resumable: clear the task (or run the DAG again) to go on.
   Before every step it reads the stop request of its connection (`kafka_reassignment_stop`):
   it then cancels what this run has in flight, removes its throttle and fails the run
   with "stopped by <user>: <reason>"; a stopped run is final.
6. **remove_throttles** (always runs), then **verify_result** (when the execution
   succeeded): no partition names a failed broker, full RF and ISR everywhere, every planned
   partition on its target, no throttle config left; read back until that holds for a
   settle period (`KAFKA_RUNBOOKS_VERIFY_SETTLE_S`, 15 s) or fails with what was seen after
   `KAFKA_RUNBOOKS_VERIFY_TIMEOUT_S` (600 s).

One disruptive runbook per cluster: before **validate** the run takes the cluster's
**lease** (shared with the broker restart and the unclean recovery), holds it through the
gate and every chunk (renewed at each poke) and gives it back in `release_lease` after
the cleanup, whatever happened. `on_lease_held`: `wait` (reschedule mode) or `fail`
naming the holder. Runs on other clusters proceed in parallel; a dry run takes no lease.

It never moves a replica that is not on a failed broker, never runs two chunks at once,
and never starts while another reassignment is in flight.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from kafka_runbooks_airflow.approvers import assigned_approvers
from kafka_runbooks_airflow.gate import PlanApprovalOperator
from kafka_runbooks_airflow.inputs import broker_list_schema
from kafka_runbooks_airflow.lease import lease_tasks
from kafka_runbooks_airflow.operators.snapshot import KafkaClusterSnapshotOperator
from kafka_runbooks_airflow.operators.spark import SparkJobOperator
from kafka_runbooks_airflow.reassign_dag import chunk_params
from kafka_runbooks_airflow.sensors.reassignment import KafkaReassignmentSensor
from kafka_runbooks_airflow.spark import spark_job_path

POKE_INTERVAL_S = float(os.environ.get("KAFKA_RUNBOOKS_POKE_INTERVAL_S", "30"))
CHECKED = "ti.xcom_pull(task_ids='validate')"

with DAG(
    dag_id="kafka_failed_broker_reassignment",
    description="Move the replicas of failed brokers to live ones in throttled chunks, after approval.",
    doc_md=__doc__,
    schedule=None,
    # manual and gated: nothing destructive happens before its gate, so it ships unpaused
    # (a run started into a paused DAG waits in the queue, unseen: FIELD_NOTES, Airflow 3.3.2)
    is_paused_upon_creation=False,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka", "runbook", "reassignment", "destructive"],
    default_args={"owner": "kafka-platform", "retries": 0},
    params={
        "failed_brokers": Param(
            "detect",
            **broker_list_schema("detect"),
            description="Which brokers failed: 'detect' takes every broker that hosts replicas and is "
            "down or fenced; or broker ids separated by commas, e.g. '4' or '4,5'. "
            "A named broker that is alive is refused (nothing moves).",
        ),
        **chunk_params("failed", elect_after="healing"),
    },
) as dag:

    @task
    def check_input(params=None, run_id=None, dag_run=None) -> dict:
        """Bad input fails here, before the run waits for the cluster's lease (then it joins the queue)."""
        from kafka_runbooks_airflow.inputs import check_runbook_input

        return check_runbook_input(dag_run.dag_id, run_id, params)

    @task
    def validate(params=None, run_id=None, dag_run=None) -> dict:
        """Check the params against the cluster; nothing moves if anything is wrong."""
        from kafka_runbooks_airflow.failed_broker import validate as check
        from kafka_runbooks_airflow.gate import refuse_ungated_run

        refuse_ungated_run(dag_run.dag_id, bool(params["require_approval"]), bool(params["dry_run"]))
        return check(dict(params), dag_run.dag_id, run_id)

    @task.short_circuit
    def anything_to_move(checked: dict) -> bool:
        """No failed broker hosting replicas: the run ends here, successfully."""
        return not checked["nothing_to_do"]

    finish_earlier = KafkaReassignmentSensor(
        task_id="finish_earlier_run",
        kafka_config_id="{{ params.kafka_conn_id }}",
        state_file="adopt-state.json",
        poke_interval=POKE_INTERVAL_S,
        timeout=timedelta(hours=24).total_seconds(),
    )

    snapshot = KafkaClusterSnapshotOperator(
        task_id="snapshot_cluster",
        kafka_config_id="{{ params.kafka_conn_id }}",
    )

    plan = SparkJobOperator(
        task_id="plan_reassignment",
        application=spark_job_path("failed_broker_plan.py"),
        conn_id="spark_default",
        name="kafka-failed-broker-plan",
        application_args=[
            "--snapshot",
            "{{ ti.xcom_pull(task_ids='snapshot_cluster')['path'] }}",
            "--failed",
            "{{ " + CHECKED + "['failed_csv'] }}",
            "--receivers",
            "{{ " + CHECKED + "['receivers_csv'] }}",
            "--max-partitions-per-chunk",
            "{{ params.max_partitions_per_chunk }}",
            "--max-bytes-per-chunk",
            "{{ " + CHECKED + "['max_bytes_per_chunk'] }}",
            "--out",
            "{{ " + CHECKED + "['plan_dir'] }}",
        ],
    )

    @task(trigger_rule="all_done")
    def review_plan(checked: dict, snapshot_info: dict, run_id=None, dag_run=None) -> dict:
        """Independent check of the plan; the summary for the log and the gate; execution state."""
        from kafka_runbooks_airflow.failed_broker import review_plan as review

        return review(checked, snapshot_info, dag_run.dag_id, run_id)

    @task.branch
    def gate_or_go(reviewed: dict) -> list[str]:
        """Dry runs stop after the plan; every other run goes through the gate (it asks, or
        records why no answer is needed: an ungated run the deployment allows)."""
        return [] if reviewed["dry_run"] else ["approval_gate"]

    approval = PlanApprovalOperator(
        task_id="approval_gate",
        action_kind="reassign",
        subject="Move {{ ti.xcom_pull(task_ids='review_plan')['replicas'] }} replica(s) of "
        "{{ ti.xcom_pull(task_ids='review_plan')['partitions'] }} partition(s) off failed broker(s) "
        "{{ " + CHECKED + "['failed'] }}?",
        # Markdown tables: the UI renders them (a fenced block is shown as one run-on line)
        body="{{ ti.xcom_pull(task_ids='review_plan')['markdown'] }}",
        response_timeout=timedelta(hours=12),
        assigned_users=assigned_approvers(),  # KAFKA_RUNBOOKS_APPROVERS; unset = role-based only
    )

    execute = KafkaReassignmentSensor(
        task_id="execute_chunks",
        kafka_config_id="{{ params.kafka_conn_id }}",
        state_file="exec-state.json",
        approval_gate_task_id="approval_gate",  # refuses to move anything without an approval of its plan
        poke_interval=POKE_INTERVAL_S,
        timeout=timedelta(hours=72).total_seconds(),
    )

    @task(trigger_rule="all_done")
    def remove_throttles(params=None, run_id=None, dag_run=None) -> dict:
        """Whatever happened (done, failed, stopped), this run's throttles come off."""
        from kafka_runbooks_airflow.failed_broker import remove_run_throttles

        return remove_run_throttles(dict(params), dag_run.dag_id, run_id)

    @task
    def verify_result(checked: dict, params=None, run_id=None, dag_run=None) -> dict:
        """No partition names a failed broker, full RF and ISR, no throttle config left."""
        from kafka_runbooks_airflow.failed_broker import verify

        return verify(dict(params), checked, dag_run.dag_id, run_id)

    acquire_lease, release_lease = lease_tasks(POKE_INTERVAL_S)
    checked = validate()
    check_input() >> acquire_lease >> checked
    reviewed = review_plan(checked, snapshot.output)
    anything_to_move(checked) >> finish_earlier >> snapshot >> plan >> reviewed
    gate_or_go(reviewed) >> approval >> execute
    cleanup = remove_throttles()
    verified = verify_result(checked)
    execute >> cleanup >> verified  # verified after the cleanup: no throttle may be left
    execute >> verified  # and only when the execution itself succeeded
    [cleanup, verified] >> release_lease.as_teardown(setups=acquire_lease)
