"""
### Stop a running failed-broker reassignment cleanly

The Airflow counterpart of Cruise Control's `stop_proposal_execution` and Strimzi's
`strimzi.io/rebalance: stop`: not a kill that leaves the copy running under a throttle.

1. **request_stop**: writes a stop request for the Kafka connection (who asked, why, when)
   in the runbook's state directory. Refused without a reason.
2. **wait_for_executing_task**: a `kafka_failed_broker_reassignment` task that is executing
   reads the request before every step and stops its own run: it cancels the reassignments
   its run submitted (AlterPartitionReassignments with a null target, only for partitions
   still in flight to its own target), takes its throttle off, reads that back and fails
   its run with "stopped by <user>: <reason>". This task waits for that (up to
   `wait_for_task_s`).
3. **stop_and_verify**: whatever happened above (no run executing, worker dead, run
   killed), stops what the state files record in flight the same way, then reads the
   cluster back: none of the runbook's reassignments in flight, none of its throttle
   configs set, still so after a settle period. Anything left fails this run, naming it.

The Kafka page's **Stop** button on a run (`/kafka-console/runs/<dag>/<run>/stop`) writes the
same request and stops that run at once under its fence, without waiting for a poke; this
runbook stays for API and CLI users.

It never cancels a reassignment the runbook did not start. The chunks already done stay
where they are; the partitions of the stopped chunk go back to their replicas before the
move, in their order (Kafka's cancel restores the set only: the stop puts the order back, no
data copied). A stopped run is final: clearing it does not resume it, and a new run of the
reassignment plans afresh (it never adopts what was stopped). A run still waiting at its
approval gate stops as soon as its execution would start.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, task

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.inputs import duration_schema, kafka_config_param

with DAG(
    dag_id="kafka_reassignment_stop",
    description="Stop the running failed-broker reassignment: cancel what it has in flight, remove its throttles.",
    doc_md=__doc__,
    # manual: a stop undoes the reassignment's changes and must act at once (unpaused, like every runbook)
    **dag_settings.manual_runbook(tags=["kafka", "runbook", "reassignment", "stop"], max_active_runs=1),
    params={
        "kafka_config_id": kafka_config_param(
            "Airflow connection id of the Kafka cluster whose reassignment is stopped."
        ),
        "reason": Param(
            None,
            type=["null", "string"],
            minLength=1,
            description="Required. Why it is stopped: recorded in the decision records, the state file "
            "and the stopped run's failure message. Left empty, the run refuses and stops nothing.",
        ),
        "wait_for_task_s": Param(
            "3m",
            **duration_schema(minimum=0),
            description="How long (e.g. '3m', '90s', or a number of seconds) to let an executing reassignment task stop its own run (it checks before "
            "every step, at most a poke interval apart) before this runbook stops what is recorded itself.",
        ),
    },
) as dag:

    @task
    def request_stop(params=None, run_id=None, dag_run=None, ti=None) -> dict:
        """Write the stop request; nothing else happens if the params are wrong."""
        from kafka_runbooks_airflow.failed_broker import reassignment_active_on
        from kafka_runbooks_airflow.failed_broker import request_stop as ask

        user = getattr(dag_run, "triggering_user_name", None)
        active = reassignment_active_on(ti, params["kafka_config_id"]) if params["kafka_config_id"] else []
        return ask(dict(params), run_id, user, len(active))

    @task
    def wait_for_executing_task(requested: dict, params=None, ti=None) -> dict:
        """Let an executing task stop its own run first; go on when it did, or none is there."""
        from kafka_runbooks_airflow.failed_broker import config_id_of, reassignment_active_on
        from kafka_runbooks_airflow.failed_broker import wait_for_executing_task as wait
        from kafka_runbooks_airflow.inputs import parse_duration

        conn_id = config_id_of(requested["request"])
        wait_s = parse_duration(params["wait_for_task_s"], "wait_for_task_s")
        return wait(requested, lambda: len(reassignment_active_on(ti, conn_id)), wait_s)

    @task
    def stop_and_verify(requested: dict, waited: dict) -> dict:
        """Cancel what is recorded in flight, remove the throttles, read the cluster back."""
        from kafka_runbooks_airflow.failed_broker import stop_and_verify as stop

        return stop(requested)

    requested = request_stop()
    stop_and_verify(requested, wait_for_executing_task(requested))
