"""
### Kafka unclean recovery from the longest log (break glass)

For partitions that are **offline** because every ISR and ELR replica is gone: ask each
surviving replica's broker for its log end offset and the epoch of its newest record,
choose per partition the replica with the newest epoch and then the longest log, and
show the table (every replica's epoch and log end offset, the offsets it holds beyond
the choice, which its broker truncates if the choice stands, the choice's loss against
the longest log, and what Kafka's own unclean election would take and lose).

Modes (`mode`): `show_replica_info` (default: dry run, the table only),
`manual_recovery_file` (also write `manual/`: the files and the exact commands, in order
with their checks, to do the same with Kafka's own CLI), `automated_recovery` (stop at
an **approval gate** showing the totals, then the table, then elect the chosen replicas; an election
counts only if the partition stays online, led by the chosen replica on an unfenced
broker, for `settle_period_s`; the original replica order is put back whatever happens;
a leader that is not the chosen replica is reported loudly as data loss). The approval is recorded with the run
and bound to the digest of the elections shown; `run_elections` refuses without an
approval of exactly its elections. Reject, or no answer within `approval_timeout_s`,
fails the run; a cleared run asks again.

In `automated_recovery` the run first takes the cluster's **lease** (shared with the broker
restart and the failed-broker reassignment: one disruptive runbook per cluster), holds it
through the gate and the elections, and gives it back in `release_lease` whatever
happened; `on_lease_held` says whether to wait for it or fail naming the holder. The
read-only modes take no lease.

Which partitions: `partitions_json` in the proposal's format
`{"partitions": [{"topic": "foo", "partitions": [0, 3]}]}`, or
`all_offline_partitions: true` (exactly one). Unknown topics or partitions fail before
anything is elected; partitions that are online are reported and left alone, so the
runbook is safe to run again. Artifacts: `unclean_recovery/<run id>/` in the data store.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, task

import kafka_runbooks_airflow.unclean  # noqa: F401 -- registers the gate's "unclean" action
from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.approvers import assigned_approvers
from kafka_runbooks_airflow.inputs import duration_schema, kafka_config_param, partition_items_schema
from kafka_runbooks_airflow.lease import on_lease_held_param
from kafka_runbooks_airflow.operators.gate import PlanApprovalOperator
from kafka_runbooks_airflow.sensors.lease import lease_tasks

MODES = ["show_replica_info", "manual_recovery_file", "automated_recovery"]
POKE_INTERVAL_S = dag_settings.poke_interval_s()

with DAG(
    dag_id="kafka_unclean_recovery",
    description="Recover offline partitions from the replica with the longest log, after approval.",
    doc_md=__doc__,
    **dag_settings.manual_runbook(tags=["kafka", "remediation", "unclean-election", "approval-gate"]),
    params={
        "kafka_config_id": kafka_config_param(),
        "all_offline_partitions": Param(
            False,
            type="boolean",
            description="On: recover every partition that is offline now (leave partitions and "
            "partitions_json empty). Off: only the partitions named in partitions or partitions_json.",
        ),
        "partitions": Param(
            None,
            **partition_items_schema(),
            description="Only when all_offline_partitions is off: the partitions to recover, one "
            "topic:partition per line, e.g. orders:0 and orders:3. Leave empty when partitions_json or "
            "all_offline_partitions is used. Unknown topics or partitions stop the run before anything is elected.",
        ),
        "partitions_json": Param(
            None,
            type=["null", "string"],
            description="Instead of partitions, only when all_offline_partitions is off: the partitions as JSON, e.g. "
            '{"partitions": [{"topic": "orders", "partitions": [0, 3]}]}. Leave empty with '
            "all_offline_partitions on. Unknown topics or partitions stop the run before anything is elected.",
        ),
        "mode": Param(
            "show_replica_info",
            type="string",
            enum=MODES,
            description="show_replica_info: dry run, only the table of replicas and the one that would be chosen. "
            "manual_recovery_file: also write manual/ (files and commands for Kafka's own CLI). automated_recovery: after an approval gate, "
            "elect the chosen replicas (data beyond each choice is lost).",
        ),
        "recovery_duration_ms": Param(
            "30s",
            **duration_schema("milliseconds", minimum=1, maximum=3600000),
            description="How long the brokers get to report their log end offsets, e.g. '30s', '2m' (or a "
            "number of milliseconds; at most 1h); a broker that answers later is not a candidate.",
        ),
        "recovery_election_attempts": Param(
            3,
            type="integer",
            minimum=1,
            maximum=20,
            description="Attempts per election when it fails transiently (e.g. the controller moved).",
        ),
        "settle_period_s": Param(
            "30s",
            **duration_schema(minimum=0, maximum=3600),
            description="How long each election must hold (online, chosen leader, unfenced) to count, e.g. "
            "'30s', '2m' (or a number of seconds; at most 1h)",
        ),
        "restore_replica_order": Param(
            True,
            type="boolean",
            description="On: after each election put the partition's original replica order back (so the "
            "preferred leader is unchanged). Off: the elected replica stays first.",
        ),
        "allow_committed_loss": Param(
            False,
            type="boolean",
            description="Off (default): a partition whose ISR/ELR/last known ELR names a replica holding every "
            "committed record, or names none, gets the clean path (bring that replica back), no election. "
            "On: the longest live log is elected anyway and the gate and outcome name the acknowledged records "
            "it loses; the run then ends failed with RecoveredWithLoss even when every election held.",
        ),
        "on_lease_held": on_lease_held_param(),
        "approval_timeout_s": Param(
            "2h",
            **duration_schema(minimum=1),
            description="No answer at the gate within this (e.g. '2h', '30m', or a number of seconds): "
            "the run fails",
        ),
    },
) as dag:

    @task
    def check_input(params=None, run_id=None, dag_run=None) -> dict:
        """Bad input fails here, before the run waits for the cluster's lease (then it joins the queue)."""
        from kafka_runbooks_airflow.inputs import check_runbook_input

        return check_runbook_input(dag_run.dag_id, run_id, params)

    @task
    def plan_recovery(params=None, run_id=None) -> dict:
        """Validate the input, gather every replica's log info, choose, write the table (read-only)."""
        from kafka_runbooks_airflow import unclean

        return unclean.plan_recovery(unclean.recovery_request(params), params["kafka_config_id"], run_id)

    @task.short_circuit
    def automated_recovery_requested(document: dict) -> bool:
        """Go on to the approval gate only in automated mode and when something can be elected."""
        from kafka_runbooks_airflow.unclean import automated_recovery_requested as requested

        return requested(document)

    approve = PlanApprovalOperator(
        task_id="approve_elections",
        action_kind="unclean",
        subject="Unclean recovery: elect the CHOSEN replicas? Other replicas lose what the table shows",
        body=(
            # the totals first (a plan made before they existed has none: the table alone then)
            "{{ ti.xcom_pull(task_ids='plan_recovery').get('totals_md', '') }}\n\n"
            "Offline partitions and the replica chosen for each (CHOSEN). "
            "`truncated_if_choice_stands`: the offsets that replica holds beyond the chosen one, "
            "which its broker truncates once it follows the chosen leader. SUMMARY: what the choice "
            "loses against the longest log, and what Kafka's own unclean election would take and lose. "
            "A SUMMARY starting LACKS COMMITTED RECORDS elects a replica the controller does not record as "
            "holding every committed record (allow_committed_loss): acknowledged records are lost."
            "\n\n{{ ti.xcom_pull(task_ids='plan_recovery')['table_md'] }}\n\n"
            "Unanswered brokers: {{ ti.xcom_pull(task_ids='plan_recovery')['unanswered_brokers'] }}"
        ),
        response_timeout=timedelta(hours=2),
        assigned_users=assigned_approvers(),  # KAFKA_RUNBOOKS_APPROVERS; unset = role-based only
    )

    @task
    def run_elections(document: dict, params=None, run_id=None) -> dict:
        """Elect each chosen replica (reorder + UNCLEAN election), verify it holds, fail unless all held.

        Refuses first unless the gate approved exactly these elections for this run.
        """
        from airflow.sdk import get_current_context

        from kafka_runbooks_airflow import unclean

        request = unclean.recovery_request(params)
        return unclean.run_elections(
            get_current_context(), document, request, params["kafka_config_id"], run_id
        )

    @task(trigger_rule="all_done")
    def restore_replica_order(params=None) -> dict:
        """Whatever happened to the elections, no replica order is left changed: what a killed or
        cleared try left reordered is put back (the run still holds the cluster's lease). Then the run
        fails unless the elections succeeded or were skipped: as its last step, its state is the run's."""
        from airflow.sdk import get_current_context

        from kafka_runbooks_airflow import unclean

        return unclean.restore_left_orders(params["kafka_config_id"], get_current_context())

    acquire_lease, release_lease = lease_tasks(POKE_INTERVAL_S)
    planned = plan_recovery()
    check_input() >> acquire_lease >> planned
    elections = run_elections(planned)
    automated_recovery_requested(planned) >> approve >> elections
    elections >> restore_replica_order() >> release_lease.as_teardown(setups=acquire_lease)
