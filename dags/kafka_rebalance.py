"""
### Rebalance: spread replicas and leaders evenly (onto new brokers, or over the whole cluster)

The planned counterpart of the decommission: the same tasks, gate, executor, stop,
lease and cleanup (`kafka_runbooks_airflow.reassign_dag`), with a rebalance's request:

1. **check_input**: `mode` `add-brokers` needs `new_brokers`; `full` uses every live broker;
   `remove-brokers` is refused (a DECISION record naming `kafka_broker_decommission`, which
   drains brokers with its own checks). The targets are a count (`2`) or a percentage of the
   mean per broker (`10%`).
2. **validate**: every broker holding replicas is live (a dead one is the heal's case); the new
   brokers are registered and live, not controllers.
   Within the target already: nothing to do. Each receiver's room under `max_disk_usage_percent`
   is read (DescribeLogDirs; unknown room is no room).
3. **snapshot** and **plan** with `spark_jobs/failed_broker_plan.py --rebalance`: replicas move
   from the most loaded broker to the least loaded (add-brokers: only onto the new brokers), the
   smallest partition that keeps its racks and the receiver's room, until replicas per broker
   are within `max_replica_spread`; then preferred leaderships are handed over by reordering
   only, until within `max_leader_spread`. The plan prints the lower bound of the moves the
   target needs beside its own count, and says why and how close when the target is out of reach
   (a plan that brings nothing closer is refused before the gate).
4. **review_plan**: the disk ceiling on the receivers, the independent plan check (the same rule
   units as the planner), the gate's summary: replica moves, leader moves, data to move, per
   broker before and after, the spreads before and after against the target, chunks, duration.
5. **approval_gate**, **execute_chunks** (throttled chunks; `kafka_reassignment_stop` stops
   it), **remove_throttles** (always).
6. **verify_result**: the moved partitions on their targets and in sync, no throttle left; the
   approved leader-only moves (a reorder, no data), the preferred-leader election; then the
   spreads read back within the target (or as close as the plan said), held for the settle period;
   then the bytes per broker read back from DescribeLogDirs against the target and the plan's
   prediction (a WARNING when not within or unknown, never a failure: the moves are verified).

Mode `replication-factor` raises topics to `replication_factor` through the same tasks: the
topics are `topics` (a list), `topic_regex`, or every topic with a partition below the target;
validate refuses a target above the live brokers (naming both numbers), unknown topics, a regex
matching none and any topic above the target (lowering); each missing replica goes to a live
broker on a rack the partition lacks first, then the fewest replicas, then the fewest bytes,
within its room under `max_disk_usage_percent` (the plan check replays the same rule); the gate
shows the topics, partitions, replicas added, data to copy and each broker before and after; the
run ends with every partition of the topics at the target, in sync, no throttle left.
With `allow_replication_factor_decrease` (off by default) it also lowers the topics above the
target: validate refuses a target below a topic's effective `min.insync.replicas` (unread: refused)
and a partition with fewer in-sync replicas than the target; each partition drops its out-of-sync
replicas first, never its preferred leader while another can go, keeping the most racks; the gate
names every dropped replica; the run submits the smaller replica set and reads it back.

It never moves a replica onto a broker that is not a new broker in add-brokers mode, never
drains a broker, never plans while a broker holding replicas is down, never starts while
another reassignment is in flight, never lowers a replication factor unless
`allow_replication_factor_decrease` is set (and then never below `min.insync.replicas`, never
keeping a replica out of the ISR), never moves or drops an existing replica when it raises one.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.inputs import broker_list_schema
from kafka_runbooks_airflow.reassign_dag import (
    CHECKED,
    ReassignmentRunbook,
    chunk_params,
    disk_ceiling_param,
    reassignment_tasks,
)
from kafka_runbooks_airflow.rebalance import DEFAULT_BYTES_SPREAD_PERCENT, DEFAULT_SPREAD

POKE_INTERVAL_S = dag_settings.poke_interval_s()
GLUE = "kafka_runbooks_airflow.rebalance"
SPREAD_SCHEMA = {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*%?\s*$"}


def _flag(name: str, key: str) -> str:
    """``--name=<validate's value>``: one argument, so an empty value stays an (empty) value."""
    return f"{name}={{{{ {CHECKED}['{key}'] }}}}"


with DAG(
    dag_id="kafka_rebalance",
    description="Even out replicas and leaders per broker (onto new brokers, or over the cluster), in "
    "throttled chunks, after approval.",
    doc_md=__doc__,
    **dag_settings.manual_runbook(tags=["kafka", "runbook", "reassignment", "destructive"]),
    params={
        "mode": Param(
            "add-brokers",
            type="string",
            enum=["add-brokers", "full", "remove-brokers", "replication-factor"],
            description="'add-brokers': move replicas only onto new_brokers. 'full': even out every live "
            "broker. 'remove-brokers' is kafka_broker_decommission: refused here, naming it. "
            "'replication-factor': raise topics to replication_factor.",
        ),
        "replication_factor": Param(
            None,
            anyOf=[{"type": "null"}, {"type": "integer", "minimum": 1}],
            description="replication-factor: the target replication factor (at most the live brokers). "
            "Topics above it are refused unless allow_replication_factor_decrease is set.",
        ),
        "allow_replication_factor_decrease": Param(
            False,
            type="boolean",
            description="replication-factor: also lower the topics above the target (off by default: it "
            "deletes replicas). Never below a topic's min.insync.replicas; each partition keeps only "
            "in-sync replicas, and the gate names every replica dropped.",
        ),
        "topics": Param(
            None,
            anyOf=[{"type": "null"}, {"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            description="replication-factor: the topics to raise, names separated by commas. Leave empty "
            "(and topic_regex empty) for every topic with a partition below the target (internal '__' "
            "topics only when named).",
        ),
        "topic_regex": Param(
            None,
            anyOf=[{"type": "null"}, {"type": "string"}],
            description="replication-factor: the topics to raise as a regular expression matching the whole "
            "name, instead of topics.",
        ),
        "new_brokers": Param(
            None,
            # null allowed: the trigger form treats an empty string it may not send as missing
            anyOf=[{"type": "null"}, *broker_list_schema("")["anyOf"]],
            description="add-brokers: the brokers just added, ids separated by commas, e.g. '4' or '4,5'. "
            "Each must be registered and live. Leave empty for a full rebalance.",
        ),
        "max_replica_spread": Param(
            DEFAULT_SPREAD,
            **SPREAD_SCHEMA,
            description="Target: the most loaded broker holds at most this many replicas more than the least "
            "loaded; a count ('2') or a percentage of the mean replicas per broker ('10%', at least 1).",
        ),
        "max_leader_spread": Param(
            DEFAULT_SPREAD,
            **SPREAD_SCHEMA,
            description="Target for preferred leaders per broker, the same way: a count ('2') or a percentage "
            "of the mean ('10%', at least 1). Leadership moves by reordering replicas only (no data).",
        ),
        "max_bytes_spread_percent": Param(
            float(DEFAULT_BYTES_SPREAD_PERCENT),
            type="number",
            minimum=0,
            description="Target for bytes per broker (DescribeLogDirs): the broker holding the most data holds "
            "at most this percentage of the mean bytes per broker more than the one holding the least (20: "
            "Cruise Control's disk.balance.threshold 1.10, each broker within 10 % of the mean). Reached by "
            "moving or swapping replicas without breaking the replica spread; a broker whose log dirs do "
            "not answer leaves it unknown (refused, never taken as empty).",
        ),
        "max_disk_usage_percent": disk_ceiling_param(),
        **chunk_params(None),  # no receivers param: the mode picks the receivers
    },
) as dag:
    reassignment_tasks(
        ReassignmentRunbook(
            check_input=f"{GLUE}:check_input",
            request=f"{GLUE}:rebalance_request",
            validate=f"{GLUE}:validate",
            review_plan=f"{GLUE}:review_plan",
            subject="Rebalance ({{ {checked}['rebalance'] }}): move {{ {reviewed}['replicas'] }} replica(s) "
            "of {{ {reviewed}['partitions'] }} partition(s)?",
            plan_flags=(
                _flag("--rebalance", "rebalance"),
                _flag("--new-brokers", "new_brokers_csv"),
                _flag("--max-replica-spread", "max_replica_spread"),
                _flag("--max-leader-spread", "max_leader_spread"),
                _flag("--max-bytes-spread-percent", "max_bytes_spread_percent"),
                _flag("--room", "room_csv"),
                _flag("--replication-factor", "replication_factor"),
                _flag("--topics", "topics_csv"),
                _flag("--allow-replication-factor-decrease", "allow_replication_factor_decrease"),
            ),
            verify=f"{GLUE}:verify",
        ),
        POKE_INTERVAL_S,
    )
