"""Every failed task leaves its reason where the operator looks (issue #39 point 4).

The Kafka page shows a failed run's newest ERROR decision; a task that failed on an exception no
runbook step had recorded (a missing Variable, a gate's own refusal, a library error) left the page
saying only "task(s) failed: X", the reason in the task log or nowhere. Every runbook DAG's tasks
get this ``on_failure_callback`` (``dag_settings``): when the failing try recorded no ERROR decision
of its own, it records one from the exception, secrets masked as in the task log. Light to import:
DAG files import it at parse time.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("kafka_runbooks.task_failure")


def failure_text(exception: BaseException | str | None) -> str:
    """The exception as one line of words: its class and message (an empty message says so)."""
    if exception is None:
        return "no exception was given to the failure callback (the task log has what happened)"
    if isinstance(exception, str):
        return exception
    message = str(exception).strip() or "(no message)"
    return f"{type(exception).__name__}: {message}"


def record_task_failure(context: dict[str, Any]) -> None:
    """The failed try's reason as its ERROR decision, unless the try recorded one itself (that one
    is the reason the page shows). Never raises: a callback's error would hide the task's."""
    try:
        from kafka_runbooks import decisions

        if any(r.level == "ERROR" for r in decisions.made()):  # this try's process: its own reason
            return
        from airflow.sdk.log import redact

        ti = context.get("ti")
        task_id = getattr(ti, "task_id", None) or "task"
        reason = str(redact(failure_text(context.get("exception"))))
        decisions.record(task_id, "task failed", reason, logger=log, level=logging.ERROR)
    except Exception:  # noqa: BLE001 - the callback must not mask the task's own failure
        log.exception("could not record the task's failure as a decision")
