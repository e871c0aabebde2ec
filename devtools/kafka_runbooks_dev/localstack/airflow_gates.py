"""What a failed test leaves at its gates, answered: every waiting gate rejected, its run ended.

A failed test's run at its gate holds the cluster's lease, and the next test's run waits on it until
that test fails too (seen: one browser test's failure became three). Rejected, the run goes its own
way out (the lease released, the cluster untouched), as an operator's Reject would.
"""

from __future__ import annotations

from kafka_runbooks_dev.localstack.airflow import AirflowError, AirflowLocal


def reject_waiting(airflow: AirflowLocal, timeout: float = 120) -> list[str]:
    """Answer every gate still waiting with its Reject option (the first option starting with
    "Reject"; one without is left) and wait until each run ends; return the runs answered."""
    answered = []
    for request in airflow.pending_approvals():
        ti = request["task_instance"]
        reject = next((o for o in request.get("options") or [] if str(o).startswith("Reject")), None)
        if reject is None:
            continue
        dag_id, run_id, task_id, index = ti["dag_id"], ti["dag_run_id"], ti["task_id"], ti["map_index"]
        try:
            airflow.wait_for_approval(dag_id, run_id, task_id, timeout, index)
            airflow.answer(dag_id, run_id, task_id, [reject], map_index=index)
            airflow.wait_for_run(dag_id, run_id, timeout)
        except AirflowError as exc:  # gone by now, or answered meanwhile: said, not raised
            print(f"rejecting {dag_id}/{run_id}/{task_id}: {exc}")
            continue
        answered.append(f"{dag_id}/{run_id}")
    return answered
