"""Operator: start a runbook's run only when the decision read at run time says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk.exceptions import AirflowSkipException

from kafka_runbooks.errors import BadInput


class TriggerWhenDueOperator(TriggerDagRunOperator):
    """``TriggerDagRunOperator`` that checks the sweep's decision itself before it starts a run.

    Why not a short-circuit upstream: inside a mapped task group on Airflow 3.3.2 a
    short-circuit that returned False logged "Skipping downstream tasks", and the mapped
    trigger still ran and started a reassignment with an empty conf after a "wait"
    decision (that run then held the cluster's lease). Here the trigger refuses by itself:
    it starts a run only when ``due`` is exactly True and the run id and conf are there.

    :param due: the decision (templated, usually an XComArg): True starts the run.
    """

    template_fields: Sequence[str] = (*TriggerDagRunOperator.template_fields, "due")

    def __init__(self, *, due: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.due = due

    def execute(self, context):
        if self.due is not True:
            raise AirflowSkipException(f"not due (decision: {self.due!r}); no run started")
        if not self.trigger_run_id or not isinstance(self.conf, dict) or not self.conf:
            raise BadInput(
                f"due, but without a run id or conf (run id {self.trigger_run_id!r}, conf {self.conf!r}); "
                "no run started"
            )
        return super().execute(context)
