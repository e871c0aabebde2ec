"""Ask Airflow, through the task's own Task SDK client, what state this try's task instance is in.

:mod:`kafka_runbooks.task_state` says why (a cleared or failed try may run on for seconds and must
submit nothing meanwhile); this is the Airflow side: ``RuntimeTaskInstance.get_task_states``, one
call to the execution API through the task's supervisor, never the metadata database. Airflow
3.3's answer is ``{run_id: {task_id: state}}`` (a mapped task's key is ``<task_id>_<map_index>``).
"""

from __future__ import annotations

import logging

from kafka_runbooks.task_state import StillCurrent, TaskStateReading

log = logging.getLogger("kafka_runbooks.task_state")


def still_current_from(context, dag_id: str, task_id: str) -> StillCurrent:
    """A callable that asks Airflow for the state of this try's task instance (of the run of
    ``context``) each time it is called; an error or an answer without this task instance reads as
    unknown, never as running."""
    ti = context["ti"]
    run_id = context["run_id"]
    map_index = getattr(ti, "map_index", None)
    mapped = map_index is not None and map_index >= 0
    listed_as = f"{task_id}_{map_index}" if mapped else task_id

    def ask() -> TaskStateReading:
        """Airflow's state of this task instance now, or why it could not be had."""
        try:
            answer = ti.get_task_states(
                dag_id=dag_id, task_ids=[task_id], run_ids=[run_id], map_index=map_index if mapped else None
            )
        except Exception as exc:  # the supervisor or the API server did not answer: unknown
            log.warning("could not ask Airflow for the state of %s: %s", listed_as, exc)
            return TaskStateReading(unknown=f"{type(exc).__name__}: {exc}")
        states = (answer or {}).get(run_id) or {}
        if listed_as not in states:
            return TaskStateReading(unknown=f"Airflow does not list {listed_as} in run {run_id}")
        raw = states[listed_as]
        return TaskStateReading(state=None if raw is None else str(getattr(raw, "value", raw)))

    return ask
