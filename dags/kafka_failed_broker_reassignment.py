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

from airflow.sdk import DAG, Param

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.inputs import broker_list_schema
from kafka_runbooks_airflow.reassign_dag import ReassignmentRunbook, chunk_params, reassignment_tasks

POKE_INTERVAL_S = dag_settings.poke_interval_s()
GLUE = "kafka_runbooks_airflow.failed_broker"

with DAG(
    dag_id="kafka_failed_broker_reassignment",
    description="Move the replicas of failed brokers to live ones in throttled chunks, after approval.",
    doc_md=__doc__,
    **dag_settings.manual_runbook(tags=["kafka", "runbook", "reassignment", "destructive"]),
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
    reassignment_tasks(
        ReassignmentRunbook(
            check_input="kafka_runbooks_airflow.inputs:check_runbook_input",
            request=f"{GLUE}:reassign_request",
            validate=f"{GLUE}:validate",
            review_plan=f"{GLUE}:review_plan",
            subject="Move {{ {reviewed}['replicas'] }} replica(s) of {{ {reviewed}['partitions'] }} "
            "partition(s) off failed broker(s) {{ {checked}['failed'] }}?",
            verify=f"{GLUE}:verify_reassignment",
        ),
        POKE_INTERVAL_S,
    )
