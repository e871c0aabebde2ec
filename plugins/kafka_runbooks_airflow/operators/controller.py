"""The metadata-error sweep's per-cluster controller gate and the trigger after it.

Both run inside the sweep's mapped ``cluster`` task group and read their own cluster's
XComs (:func:`kafka_runbooks_airflow.metadata_errors.group_xcom`); the gate's record and
the approval check are :mod:`kafka_runbooks_airflow.gate`'s, the operators they extend
are in :mod:`kafka_runbooks_airflow.operators.gate`.
"""

from __future__ import annotations

from kafka_runbooks import approval as rules
from kafka_runbooks_airflow.gate import RECORD_KEY, run_xcom
from kafka_runbooks_airflow.metadata_errors import group_xcom
from kafka_runbooks_airflow.operators.gate import ApprovedTriggerDagRunOperator, PlanDecisionBranchOperator


class ControllerDecisionOperator(PlanDecisionBranchOperator):
    """One cluster's ``controller_decision``: asks only when that cluster's sweep escalated.

    Without an escalation of its own cluster it skips itself (its restart and leave tasks are
    then skipped by their trigger rule); with one, the question names the cluster, the node
    and the reason, and the approval is bound (digest) to that escalation's restart run.
    """

    def __init__(self, *, restart_it: str, leave_it: str, restart_dag_id: str, **kwargs) -> None:
        super().__init__(
            subject="Active controller: metadata errors keep increasing",  # replaced per cluster
            options=[restart_it, leave_it],
            approve_option=restart_it,
            **kwargs,
        )
        self.restart_it = restart_it
        self.leave_it = leave_it
        self.restart_dag_id = restart_dag_id

    def execute(self, context):
        """Ask a person whether to restart the active controller, with the sweep's reason; skipped when
        this cluster has no controller escalation."""
        from airflow.sdk.exceptions import AirflowSkipException

        escalation = group_xcom(context, "sweep", "controller_escalation")
        if not escalation:
            raise AirflowSkipException("no controller escalation for this cluster: nobody is asked")
        cluster = escalation.get("kafka_config_id") or (escalation.get("conf") or {}).get("kafka_config_id")
        self.subject = (
            f"{cluster}: active controller {escalation['node_id']}: metadata errors keep increasing"
        )
        self.body = (
            f"{escalation['reason']}\n\n"
            f"**{self.restart_it}** starts `{self.restart_dag_id}` for controller {escalation['node_id']} "
            f"of **{cluster}** (run `{escalation['trigger_run_id']}`; its approval gate and quorum checks "
            "apply; the active controller is restarted last).\n\n"
            f"**{self.leave_it}** does nothing; the sweep asks again if the counter keeps going up. "
            "No answer within an hour fails this cluster's gate and starts nothing."
        )
        return super().execute(context)


class ControllerRestartOperator(ApprovedTriggerDagRunOperator):
    """One cluster's ``restart_active_controller``: starts the approved restart run, nothing else.

    It skips itself only on a recorded 'Leave it' of its own cluster's gate; every other case
    goes through :func:`kafka_runbooks_airflow.gate.require_approval` (no record, a timeout, an
    approval of another plan: refused, nothing started).
    """

    def execute(self, context):
        """Start the controller's restart run unless the gate recorded a rejection (then skipped, with its
        reason)."""
        from airflow.sdk.exceptions import AirflowSkipException

        record = run_xcom(context, self.gate_task_id, RECORD_KEY)
        if isinstance(record, dict) and record.get("outcome") == rules.REJECTED:
            raise AirflowSkipException(f"not restarted: {record.get('reason')}")
        return super().execute(context)
