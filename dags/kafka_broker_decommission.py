"""
### Drain live brokers (or a whole rack) of every replica, in throttled chunks

The planned counterpart of `kafka_failed_broker_reassignment`: the same tasks,
gate, executor, stop, lease and cleanup (`kafka_runbooks_airflow.reassign_dag`), with a
request for live brokers:

1. **validate**: the brokers to drain (`broker_ids`, or every registered broker of `rack`)
   are registered and live, not KRaft controllers; the brokers left can hold what moves (a
   replication factor above the brokers left, or a rack spread that cannot be kept, is
   refused with the partitions named). Every refusal is a DECISION record, before the gate.
2. **snapshot** and **plan** with `spark_jobs/failed_broker_plan.py --drain` (only the
   drained brokers' replicas move, once each; racks and preferred-leader balance kept).
3. **review_plan**: no receiver log dir may pass `max_disk_usage_percent` after the plan
   (DescribeLogDirs total and usable bytes; unknown is refused), then the independent plan
   check and the gate's summary: "Decommission brokers ...": replica moves, bytes, per broker
   before and after, chunks, estimated duration at the throttle.
4. **approval_gate**, **execute_chunks** (throttled chunks; `kafka_reassignment_stop` stops
   it), **remove_throttles** (always).
5. **verify_result**: after a settle period, read from the cluster: the drained brokers hold
   no replica (metadata and their own DescribeLogDirs) and lead no partition, full ISR, no
   throttle left; then the preferred leaders of the moved partitions are elected. Anything
   else fails the run naming what is left.

It never stops, restarts or unregisters the drained brokers, never moves a replica that is
not on a drained broker, and never starts while another reassignment is in flight.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.inputs import broker_list_schema
from kafka_runbooks_airflow.reassign_dag import (
    ReassignmentRunbook,
    chunk_params,
    disk_ceiling_param,
    reassignment_tasks,
)

POKE_INTERVAL_S = dag_settings.poke_interval_s()
GLUE = "kafka_runbooks_airflow.decommission"

with DAG(
    dag_id="kafka_broker_decommission",
    description="Drain live brokers (or a rack) of every replica and leadership, in throttled chunks, after approval.",
    doc_md=__doc__,
    **dag_settings.manual_runbook(tags=["kafka", "runbook", "reassignment", "destructive"]),
    params={
        "broker_ids": Param(
            None,
            # null allowed: the trigger form treats an empty string it may not send as missing
            anyOf=[{"type": "null"}, *broker_list_schema("")["anyOf"]],
            description="Live brokers to drain, ids separated by commas, e.g. '4' or '3,4'. Leave empty "
            "to drain a rack instead. A broker that is not registered or not live is refused.",
        ),
        "rack": Param(
            None,
            type=["null", "string"],
            description="Drain every registered broker of this rack (broker.rack), instead of broker_ids.",
        ),
        "max_disk_usage_percent": disk_ceiling_param(),
        **chunk_params("drained"),
    },
) as dag:
    reassignment_tasks(
        ReassignmentRunbook(
            check_input=f"{GLUE}:check_input",
            request=f"{GLUE}:decommission_request",
            validate=f"{GLUE}:validate",
            review_plan=f"{GLUE}:review_plan",
            subject="Decommission broker(s) {{ {checked}['failed'] }}: move {{ {reviewed}['replicas'] }} "
            "replica(s) of {{ {reviewed}['partitions'] }} partition(s)?",
            plan_flags=("--drain",),
        ),
        POKE_INTERVAL_S,
    )
