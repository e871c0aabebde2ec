"""Operators: start a runbook's run only into a DAG that will run it, and only when due."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput

log = logging.getLogger(__name__)


def refuse_paused_target(context, dag_id: str) -> None:
    """Fail, with a decision record, rather than start a run into a paused DAG.

    Airflow queues a run started into a paused DAG and says nothing: a heal or a restart
    a sweep decided on would wait there, unseen, until someone unpaused the DAG (and then
    act on a decision hours old). Refusing makes the sweep's task fail where the operator
    looks, naming the DAG to unpause; the next sweep decides again from the cluster.
    """
    paused = context["ti"].get_dag(dag_id).is_paused
    if not paused:
        return
    why = (
        f"the DAG {dag_id} is paused: a run started now would wait in the queue, unseen, until "
        "someone unpauses it; unpause it (the toggle on its page) and the next sweep starts the run"
    )
    decisions.record(
        "start-run",
        f"not started: {dag_id} is paused",
        why,
        subject=context["ti"].task_id,
        observed={"dag_id": dag_id, "is_paused": True},
        logger=log,
        level=logging.ERROR,
    )
    raise AirflowFailException(f"no run started: {why}")


class UnpausedTriggerDagRunOperator(TriggerDagRunOperator):
    """``TriggerDagRunOperator`` that refuses to start a run into a paused DAG
    (:func:`refuse_paused_target`)."""

    def execute(self, context):
        """Refuse (with a decision record) to start a run into a paused DAG, where Airflow would queue it
        silently; else start it."""
        refuse_paused_target(context, self.trigger_dag_id)
        return super().execute(context)


class TriggerWhenDueOperator(UnpausedTriggerDagRunOperator):
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
        """Start the run only when the upstream decision is exactly True (skipped otherwise) and names a
        run id and conf."""
        if self.due is not True:
            raise AirflowSkipException(f"not due (decision: {self.due!r}); no run started")
        if not self.trigger_run_id or not isinstance(self.conf, dict) or not self.conf:
            raise BadInput(
                f"due, but without a run id or conf (run id {self.trigger_run_id!r}, conf {self.conf!r}); "
                "no run started"
            )
        return super().execute(context)
