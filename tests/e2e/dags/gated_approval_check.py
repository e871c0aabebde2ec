"""Test-only DAG: one task, an approval gate, one task after the gate.

The end-to-end tests drive it through a running Airflow's REST API to check that an
approval gate holds a run until someone answers, and that the answer decides whether the
work after the gate runs. It touches no network at parse time or run time.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, task

AFTER_GATE_MARKER = "E2E-AFTER-GATE-RAN"

log = logging.getLogger(__name__)

with DAG(
    dag_id="e2e_gated_approval_check",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    default_args={"owner": "kafka-runbooks-tests", "retries": 0},
    tags=["e2e", "test-only", "approval-gate"],
    doc_md=__doc__,
):

    @task
    def before_gate(dag_run=None) -> dict:
        """Stands in for the diagnosis a runbook does before asking for approval."""
        log.info("before the gate, conf=%s", dag_run.conf)
        return {"checked": True}

    gate = ApprovalOperator(
        task_id="approval_gate",
        subject="e2e: approve the gated step?",
        body="Test-only approval gate; the e2e tests answer it through the REST API.",
        response_timeout=timedelta(minutes=15),
    )

    @task
    def after_gate(dag_run=None) -> None:
        """Stands in for the remediation; its log line proves it ran, and for which run."""
        log.info("%s run_id=%s", AFTER_GATE_MARKER, dag_run.run_id)

    before_gate() >> gate >> after_gate()
