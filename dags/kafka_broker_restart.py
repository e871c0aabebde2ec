"""
### Safe broker / controller restart (rolling restart)

Restarts the nodes you name the way a careful Kafka engineer would: **one broker and one
follower controller at a time at most** (two lanes stepped side by side, each one node at a
time; the active controller, a combined broker+controller node and a node not ready at
planning time restart alone), or strictly one node at a time with `one_node_at_a_time`:

1. waits for each node to be ready first (sensor in reschedule mode: no worker slot held);
2. if it does not get ready, reads its **broker state** (JMX exporter or Strimzi's agent):
   a broker **recovering its logs** is never restarted: the run logs the remaining logs
   and segments, retries, and finally fails with the log-recovery reason. A node that is
   stuck but not recovering is force-restarted only if `allow_force_restart` is on;
3. before touching a ready broker, checks availability: no partition it hosts may be below
   `min.insync.replicas`, or at it with this broker in the ISR (topics with RF <= min ISR
   ignored); a controller only while a majority of all voters stays caught up without it
   (lag by the quorum leader's own clock, no other voter's process down).
   It waits for this to clear (up to the operation timeout) instead of failing at once;
4. restarts it cleanly, waits until it is ready (logging recovery progress, never
   restarting it again), then until it is back in the ISR of every partition it hosts;
   a controller counts as back only once its new process fetches past the leader's log
   end offset read when that process was first seen (never on a timestamp).

Order: unready nodes first, then ready ones, the active controller last. Every
observation and decision is a `DECISION` record in the task logs. An approval gate comes
before the first restart: the approval is recorded with the run and bound to the digest of
the plan it showed, and the roll refuses to start without an approval of exactly its plan.
Reject or no answer within `approval_timeout_s` fails the run; a cleared or resumed run
asks again. `require_approval=false` is refused unless the deployment allows ungated runs
(Variable `kafka_runbooks_allow_ungated`). A cleared run resumes where it stopped, after
a new approval.

One disruptive runbook per cluster: the run first takes the cluster's **lease**
(`acquire_lease`; restart, unclean recovery and failed-broker reassignment share it), so
the plan is made on a cluster no other runbook is changing; it holds it through the gate
and the roll (renewed before every step) and gives it back in `release_lease`, whatever
happened. Held by another run: `on_lease_held=wait` waits (reschedule mode), `fail` fails
naming the holder. Runs on other clusters run in parallel; a dry run takes no lease.

It will never restart two brokers or two controllers at once, never restart the active
controller beside anything, never restart a broker in log recovery, and never force-restart
anything unless the run allows it.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, task

import kafka_runbooks_airflow.broker_restart  # noqa: F401 -- registers the gate's "restart" action
from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.approvers import assigned_approvers
from kafka_runbooks_airflow.inputs import duration_schema, kafka_config_param, node_list_schema
from kafka_runbooks_airflow.lease import on_lease_held_param
from kafka_runbooks_airflow.operators.gate import PlanApprovalOperator
from kafka_runbooks_airflow.sensors.lease import lease_tasks
from kafka_runbooks_airflow.sensors.rolling_restart import KafkaRollingRestartSensor

POKE_INTERVAL_S = dag_settings.poke_interval_s()

with DAG(
    dag_id="kafka_broker_restart",
    description="Rolling restart that never breaks min ISR and never restarts a broker in log recovery.",
    doc_md=__doc__,
    **dag_settings.manual_runbook(tags=["kafka", "runbook", "restart", "destructive"]),
    params={
        "node_ids": Param(
            None,
            **node_list_schema(),
            description="Required. Node ids to restart, separated by commas, e.g. '2' or '1,2,9001' (brokers "
            "and/or controllers); 'all' restarts every node of the cluster. An unknown id stops "
            "the run before anything is restarted; left empty, the run refuses at once (a DECISION record "
            "says so) and restarts nothing.",
        ),
        "reason": Param(
            "planned rolling restart",
            type="string",
            minLength=3,
            description="Why the nodes are restarted (at least 3 characters); written in every decision record.",
        ),
        "operation_timeout_s": Param(
            "5m",
            **duration_schema(minimum=5),
            description="How long each step may wait (node ready, partitions back in sync, safe to restart) "
            "before it counts as a timeout: e.g. '5m', '90s' (or a number of seconds); at least 5 s.",
        ),
        "max_attempts": Param(
            10,
            type="integer",
            minimum=1,
            description="Timeouts tolerated per node; after that the run fails with what it saw.",
        ),
        "require_approval": Param(
            True,
            type="boolean",
            description="On: the run stops at an approval gate showing the order before the first restart. "
            "Off is refused unless the deployment allows ungated runs (Variable kafka_runbooks_allow_ungated).",
        ),
        "approval_timeout_s": Param(
            "12h",
            **duration_schema(minimum=1),
            description="How long the approval gate waits for an answer, e.g. '12h', '30m' (or a number of "
            "seconds); no answer by then fails the run.",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            description="On: check readiness and availability for each node and log it; restart nothing.",
        ),
        "one_node_at_a_time": Param(
            False,
            type="boolean",
            description="On: strictly one node at a time. Off (default): a broker and a follower controller "
            "restart side by side (at most one broker and one voter away, each checked before its restart); "
            "the active controller, combined and unready nodes restart alone. The gate shows which overlap.",
        ),
        "allow_force_restart": Param(
            False,
            type="boolean",
            description="On: a node that stays not ready and is NOT recovering its logs may be force-restarted. "
            "A node in log recovery is never restarted.",
        ),
        "kafka_config_id": kafka_config_param(),
        "probe_conn_id": Param(
            "kafka_broker_probe_default",
            type=["null", "string"],
            description="Connection of the broker-state probe (JMX exporter or Strimzi agent) that tells log "
            "recovery apart from a stuck node; empty: no probe (log recovery then cannot be seen: keep allow_force_restart off).",
        ),
        "on_lease_held": on_lease_held_param(),
        "restart_conn_id": Param(
            "kafka_restart_default",
            type="string",
            minLength=1,
            description="Connection of the restart back-end (local stack, systemd, Docker or Kubernetes).",
        ),
    },
) as dag:

    @task
    def check_input(params=None, run_id=None, dag_run=None) -> dict:
        """Bad input fails here, before the run waits for the cluster's lease (then it joins the queue)."""
        from kafka_runbooks_airflow.inputs import check_runbook_input

        return check_runbook_input(dag_run.dag_id, run_id, params)

    @task
    def plan_restart(params=None, run_id=None, dag_run=None) -> dict:
        """Refuse an ungated run the deployment does not allow; validate and write the roll plan."""
        from kafka_runbooks_airflow import broker_restart
        from kafka_runbooks_airflow.gate import refuse_ungated_run

        request = broker_restart.restart_request(params)
        refuse_ungated_run(dag_run.dag_id, request.require_approval, request.dry_run)
        return broker_restart.plan_roll(
            request,
            params["kafka_config_id"],
            dag_run.dag_id,
            run_id,
            probe_conn_id=params["probe_conn_id"] or None,
            restart_conn_id=params["restart_conn_id"],
        )

    # always runs: it asks, or records why no answer is needed (dry run, allowed ungated run)
    approval = PlanApprovalOperator(
        task_id="approval_gate",
        action_kind="restart",
        subject="Restart Kafka nodes {{ ti.xcom_pull(task_ids='plan_restart')['order'] }}?",
        body=(
            "Reason: {{ params.reason }}\n\n"
            "Order: {{ ti.xcom_pull(task_ids='plan_restart')['order'] }}\n\n"
            "As it will be executed (stages in order; within a stage the two lanes side by side):\n\n"
            "{{ ti.xcom_pull(task_ids='plan_restart')['stages'] }}\n\n"
            "Force restart of stuck nodes allowed: {{ params.allow_force_restart }}\n\n"
            "What the availability check saw, per node in restart order (it is checked again "
            "right before each restart):\n\n"
            "{{ ti.xcom_pull(task_ids='plan_restart')['gate_markdown'] }}"
        ),
        response_timeout=timedelta(hours=12),
        assigned_users=assigned_approvers(),  # KAFKA_RUNBOOKS_APPROVERS; unset = role-based only
    )

    roll = KafkaRollingRestartSensor(
        task_id="rolling_restart",
        kafka_config_id="{{ params.kafka_config_id }}",
        probe_conn_id="{{ params.probe_conn_id or '' }}",
        restart_conn_id="{{ params.restart_conn_id }}",
        approval_gate_task_id="approval_gate",  # refuses to restart without an approval of its plan
        poke_interval=POKE_INTERVAL_S,
        timeout=timedelta(hours=24).total_seconds(),
    )

    acquire_lease, release_lease = lease_tasks(POKE_INTERVAL_S)
    (
        check_input()
        >> acquire_lease
        >> plan_restart()
        >> approval
        >> roll
        >> release_lease.as_teardown(setups=acquire_lease)
    )
