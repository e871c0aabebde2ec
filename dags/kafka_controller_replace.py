"""
### Replace a KRaft controller lost for good (KIP-853 dynamic quorum)
Given the dead voter(s) (`remove_voters`: ids; their directory ids are read from
DescribeQuorum) and, for a replacement, a new controller already started as an **observer**
(formatted with `kafka-storage format --no-initial-controllers`; `new_controller_id` and its
`new_controller_endpoint`, e.g. `CONTROLLER://ctl4:9093`):

1. **plan_replacement** reads DescribeQuorum: the voters with their lag and caught-up age (on
   the quorum leader's clock), the observer's log end offset against the high watermark, the
   steps and the majority before and after each. A step that would leave fewer live,
   caught-up voters than a majority refuses the run here.
2. **approve_replacement**: the gate shows that plan; the approval is bound to its steps.
3. **replace**: waits until the observer has caught up, adds it (AddRaftVoter), waits until
   the quorum of N+1 has a leader and every live voter fetches, removes the dead voter(s)
   (RemoveRaftVoter), and after `settle_period_s` verifies the voter set by DescribeQuorum.
   Every step reads the quorum first and skips what is done, and re-checks the majority on
   that answer before it acts (a decision record with the numbers): clearing the task resumes.

Without `new_controller_id` it only removes the listed voters, with the same check. It never
adds a node that is not an observer of the quorum, never removes a voter when the voters left
would have fewer caught-up members than their majority, never counts a voter whose state is
unknown as caught up, and never changes a static (`controller.quorum.voters`) quorum.
Kafka's `kafka-metadata-quorum` runs from the jars named by the Variable
`kafka_runbooks_kafka_libs` (or `KAFKA_RUNBOOKS_KAFKA_LIBS`).

One disruptive runbook per cluster: the run first takes the cluster's **lease** (shared with
the restart, the unclean recovery and the reassigning runbooks), holds it through the gate,
renews it before it acts and gives it back in `release_lease` whatever happened;
`on_lease_held` says whether to wait for it or fail naming the holder.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, task

import kafka_runbooks_airflow.controller_replace  # noqa: F401 -- registers the gate's "controller_replace" action
from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.approvers import assigned_approvers
from kafka_runbooks_airflow.inputs import duration_schema, id_list_schema, kafka_config_param
from kafka_runbooks_airflow.lease import on_lease_held_param
from kafka_runbooks_airflow.operators.gate import PlanApprovalOperator
from kafka_runbooks_airflow.sensors.lease import lease_tasks

POKE_INTERVAL_S = dag_settings.poke_interval_s()

with DAG(
    dag_id="kafka_controller_replace",
    description="Replace a dead KRaft controller voter with an observer, or remove voters, never below a majority.",
    doc_md=__doc__,
    # one run per cluster through the lease, not one per DAG: runs on other clusters go on
    **dag_settings.manual_runbook(tags=["kafka", "remediation", "kraft", "approval-gate"], max_active_runs=4),
    params={
        "kafka_config_id": kafka_config_param("Airflow connection id of the Kafka cluster."),
        "remove_voters": Param(
            "",
            **id_list_schema(),
            description="Controller ids of the voters to remove (the dead one for a replacement), separated "
            "by commas, e.g. 9003. Their directory ids are read from DescribeQuorum.",
        ),
        "new_controller_id": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            description="The replacement: node id of a controller already running as an observer. Empty: "
            "only remove the listed voters.",
        ),
        "new_controller_endpoint": Param(
            None,
            type=["null", "string"],
            pattern=r"^[A-Za-z0-9_]+://[^:\s]+:[0-9]{1,5}$",
            description="The replacement's controller listener, e.g. CONTROLLER://ctl4:9093 (with new_controller_id).",
        ),
        "catch_up_timeout_s": Param(
            "5m",
            **duration_schema(minimum=1, maximum=7200),
            description="How long each wait on the quorum may take.",
        ),
        "settle_period_s": Param(
            "10s",
            **duration_schema(minimum=0, maximum=600),
            description="Wait before the final DescribeQuorum check.",
        ),
        "approval_timeout_s": Param(
            "2h",
            **duration_schema(minimum=1),
            description="No answer at the gate within this (e.g. '2h', '30m', or seconds): the run fails.",
        ),
        "on_lease_held": on_lease_held_param(),
    },
) as dag:

    @task
    def check_input(params=None, run_id=None, dag_run=None, ti=None) -> dict:
        """Bad input fails here, before the run waits for the cluster's lease (then it joins the queue);
        a voter id the cluster has nowhere too, on a first try (a cleared run's removal may be done)."""
        from kafka_runbooks_airflow.controller_replace import build_request
        from kafka_runbooks_airflow.inputs import check_before_lease, refuse_unknown_node_ids

        logger = "kafka_runbooks.controller_replace"
        checked = check_before_lease(dag_run.dag_id, params, build_request, ("kafka_config_id",), logger)
        remove = build_request(params).remove if ti.try_number == 1 else ()  # parses: checked above
        refuse_unknown_node_ids(params["kafka_config_id"], "remove_voters", remove, logger)
        return checked

    @task
    def plan_replacement(params=None) -> dict:
        """Read the quorum, plan the steps, refuse one that would break the majority (read-only)."""
        from kafka_runbooks_airflow.controller_replace import plan, replace_request

        return plan(replace_request(params), params["kafka_config_id"])

    approve = PlanApprovalOperator(
        task_id="approve_replacement",
        action_kind="controller_replace",
        subject="Change the KRaft controller voters as planned?",
        body=(
            "Voters (lag and caught-up age on the quorum leader's clock), the new controller, and each step "
            "with the voters, caught-up voters and majority before and after it.\n\n"
            "{{ ti.xcom_pull(task_ids='plan_replacement')['table_md'] }}"
        ),
        response_timeout=timedelta(hours=2),
        assigned_users=assigned_approvers(),
    )

    @task
    def replace(document: dict, params=None) -> dict:
        """Refuse unless this plan was approved; add, wait, remove, verify (skipping what is done)."""
        from airflow.sdk import get_current_context

        from kafka_runbooks_airflow.controller_replace import replace as run
        from kafka_runbooks_airflow.controller_replace import replace_request

        request = replace_request(params)
        return run(get_current_context(), document, request, params["kafka_config_id"])

    acquire_lease, release_lease = lease_tasks(POKE_INTERVAL_S)
    planned = plan_replacement()
    (
        check_input()
        >> acquire_lease
        >> planned
        >> approve
        >> replace(planned)
        >> release_lease.as_teardown(setups=acquire_lease)
    )
