"""
### Move the replicas of a live broker's failed log directory (JBOD), in throttled chunks

A broker keeps running when one of its log directories fails (KIP-112/KIP-858): every replica
in that directory is offline on it, the partitions run under-replicated, and the failed-broker
sweep never fires. This runbook (issue #28) moves exactly those replicas to other brokers with
the heal's tasks, gate, executor, stop, lease and cleanup (`kafka_runbooks_airflow.reassign_dag`):

1. **validate**: `broker_id` is registered and live (a dead broker is
   `kafka_failed_broker_reassignment`'s case), its own DescribeLogDirs answer is read; no offline
   dir is "nothing to do" (a success), a `log_dir` that is not offline is refused. The replicas
   that sat in the failed dir(s) are the broker's replicas in the metadata that none of its
   healthy dirs lists; its replicas in healthy dirs never move. Every refusal is a DECISION record.
2. **snapshot** and **plan** with `spark_jobs/failed_broker_plan.py --drain-replicas` (only the
   selected replicas move; racks and preferred-leader balance kept).
3. **review_plan**: no receiver log dir may pass `max_disk_usage_percent` after the plan
   (DescribeLogDirs total and usable bytes; unknown is refused), then the independent plan check
   and the gate's summary.
4. **approval_gate**, **execute_chunks** (throttled chunks; `kafka_reassignment_stop` stops it),
   **remove_throttles** (always).
5. **verify_result**: after a settle period, read from the cluster: no moved partition names the
   broker, the healthy dirs' partitions still do, every partition in sync, no throttle left.

`mode=verify_replaced` (the disk was replaced and the broker restarted): nothing moves; validate
waits until every replica of the broker is in one of its healthy dirs (DescribeLogDirs) and in
the ISR, with no dir offline, for the settle period, or fails naming what is not.

It never moves a replica of a healthy dir, never restarts the broker and never starts while
another reassignment is in flight.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.reassign_dag import (
    CHECKED,
    ReassignmentRunbook,
    chunk_params,
    disk_ceiling_param,
    reassignment_tasks,
)

POKE_INTERVAL_S = dag_settings.poke_interval_s()
GLUE = "kafka_runbooks_airflow.log_dir_failure"

with DAG(
    dag_id="kafka_log_dir_failure",
    description="Move the replicas of a live broker's failed log dir to other brokers, in throttled chunks, "
    "after approval; or verify a replaced disk.",
    doc_md=__doc__,
    **dag_settings.manual_runbook(tags=["kafka", "runbook", "reassignment", "destructive"]),
    params={
        "broker_id": Param(
            None,
            # no default broker: an empty form is refused before anything waits or reads the cluster
            type=["null", "integer"],
            minimum=0,
            description="The live broker with the failed log dir (the health report's log-dir section names it).",
        ),
        "log_dir": Param(
            None,
            type=["null", "string"],
            description="The failed log dir's path as DescribeLogDirs reports it. Empty: every offline dir of the "
            "broker. A dir that is not offline is refused.",
        ),
        "mode": Param(
            "move",
            type="string",
            enum=["move", "verify_replaced"],
            description="'move': move the failed dir's replicas to other brokers. 'verify_replaced': the disk was "
            "replaced and the broker restarted; verify that its replicas are back in healthy dirs and in sync "
            "(nothing moves).",
        ),
        "max_disk_usage_percent": disk_ceiling_param(),
        **chunk_params("failed"),
    },
) as dag:
    reassignment_tasks(
        ReassignmentRunbook(
            check_input=f"{GLUE}:check_input",
            request=f"{GLUE}:log_dir_request",
            validate=f"{GLUE}:validate",
            review_plan=f"{GLUE}:review_plan",
            subject="Broker {{ {checked}['failed'] }} lost a log dir: move {{ {reviewed}['replicas'] }} "
            "replica(s) of {{ {reviewed}['partitions'] }} partition(s) off it?",
            plan_flags=("--drain-replicas", "{{ " + CHECKED + "['drain_replicas_csv'] }}"),
            verify=f"{GLUE}:verify",
        ),
        POKE_INTERVAL_S,
    )
