"""Test-only DAGs: a starter that starts a run of a target DAG the way the sweeps do, and the
target, which is paused at creation (Airflow's default for a DAG that does not say).

The end-to-end test checks that the starter refuses, with a decision record, to start a run
into the paused target instead of leaving one queued there unseen. No network, no Kafka.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from kafka_runbooks_airflow.operators.trigger import UnpausedTriggerDagRunOperator

STARTER = "e2e_paused_target_starter"
TARGET = "e2e_paused_target"

with DAG(
    dag_id=TARGET,
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    is_paused_upon_creation=True,
    default_args={"owner": "kafka-runbooks-tests", "retries": 0},
    tags=["e2e", "test-only"],
    doc_md=__doc__,
):

    @task
    def target_ran() -> str:
        return "ran"

    target_ran()

with DAG(
    dag_id=STARTER,
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    is_paused_upon_creation=False,
    default_args={"owner": "kafka-runbooks-tests", "retries": 0},
    tags=["e2e", "test-only"],
    doc_md=__doc__,
):
    UnpausedTriggerDagRunOperator(
        task_id="start_target",
        trigger_dag_id=TARGET,
        trigger_run_id="{{ run_id }}__target",
        logical_date=None,
    )
