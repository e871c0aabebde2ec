"""Test-only DAG: the runbooks' own approval gate (PlanApprovalOperator) and the check after it.

The end-to-end tests answer its gate through a running Airflow's REST API at once, twice, or
with Reject, and read what the gate recorded and whether the task after it acted
(tests/e2e/test_gate_answers.py). Its plan is the run's own params: no Kafka, no network.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, get_current_context, task

from kafka_runbooks_airflow.gate import gate_action, require_approval
from kafka_runbooks_airflow.operators.gate import PlanApprovalOperator

ACTED_MARKER = "E2E-ACTED-ON-APPROVAL"

log = logging.getLogger(__name__)


@gate_action("e2e_plan_check")
def plan_to_approve(context) -> dict:
    """What the gate approves and the task after it acts on: the run and its params."""
    return {
        "runbook": "e2e_plan_gate_check",
        "run_id": context["run_id"],
        "what": context["params"].get("what"),
        "dry_run": False,
        "require_approval": True,
    }


with DAG(
    dag_id="e2e_plan_gate_check",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    default_args={"owner": "kafka-runbooks-tests", "retries": 0},
    params={
        "what": Param("nothing", type="string", description="what the plan says (bound into its digest)"),
        "approval_timeout_s": Param(900, type="integer", description="seconds the gate waits for an answer"),
    },
    tags=["e2e", "test-only", "approval-gate"],
    doc_md=__doc__,
):
    gate = PlanApprovalOperator(
        task_id="approval_gate",
        action_kind="e2e_plan_check",
        subject="e2e: approve the plan?",
        body="Test-only gate; the e2e tests answer it through the REST API.",
        response_timeout=timedelta(minutes=15),
    )

    @task
    def act() -> dict:
        """Stands in for a destructive task: acts only on an approval of this run's plan."""
        approved = require_approval(get_current_context(), "e2e_plan_check", "approval_gate")
        log.info("%s by=%s at=%s", ACTED_MARKER, approved["by"]["id"], approved["at"])
        return {"by": approved["by"]["id"], "at": approved["at"]}

    gate >> act()
