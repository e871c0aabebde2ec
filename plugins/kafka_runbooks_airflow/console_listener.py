"""Airflow listener (registered by ``console_plugin``): quiet client logs while a task runs,
and a closing summary of the task's decisions at the end of its log.

It runs in the task's own process (Airflow 3's task runner calls ``on_starting`` before
the task and ``before_stopping`` after it, whatever the outcome, reschedules of
sensors included), so the summary lands in that task's log.
"""

from __future__ import annotations

import logging

from airflow.listeners import hookimpl

log = logging.getLogger("kafka_runbooks.decisions")


def _is_task_runner(component) -> bool:
    return type(component).__name__ == "TaskRunnerMarker"


@hookimpl
def on_starting(component) -> None:
    """In a task runner only: quiet the client libraries' expected disconnect errors and start the task's
    decision list empty."""
    if not _is_task_runner(component):
        return
    from kafka_runbooks import decisions
    from kafka_runbooks.quiet_logs import quiet_client_logs

    quiet_client_logs()
    decisions.forget()


@hookimpl
def before_stopping(component) -> None:
    """In a task runner only: log the closing summary of the task's decisions, if it made any."""
    if not _is_task_runner(component):
        return
    from kafka_runbooks import decisions

    made = decisions.made()
    if made:  # tasks of other DAGs (and tasks that decide nothing) stay as they are
        log.info("%s", decisions.closing_summary(made))
