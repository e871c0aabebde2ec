"""The run settings every runbook DAG shares, in one place.

Thirteen DAGs repeated the same owner, start date, ``catchup=False`` and retry policy; a DAG
that drifted (a manual runbook created paused, a destructive task retried by Airflow) would
do so unseen. Each DAG now passes only what differs (its tags, how many runs at once, a
sweep's schedule variable and timeout) and spreads the result into ``DAG(...)``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, TypedDict

import pendulum

from kafka_runbooks_airflow.notify import notify_run_failed
from kafka_runbooks_airflow.task_failure import record_task_failure

OWNER = "kafka-platform"
START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")
MANUAL_ONLY = ("", "none")


class DagSettings(TypedDict, total=False):
    """The ``DAG(...)`` keywords this module sets (a subset of Airflow's own)."""

    schedule: str | None
    start_date: pendulum.DateTime
    catchup: bool
    is_paused_upon_creation: bool
    max_active_runs: int
    dagrun_timeout: timedelta
    tags: list[str]
    default_args: dict[str, Any]
    on_failure_callback: Any


def _common(tags: list[str], default_args: dict[str, Any]) -> DagSettings:
    """No backfill: a runbook acts on the cluster as it is now, never on a past interval. Every
    task's failure leaves its reason as a decision (``task_failure``: what the Kafka page shows), and
    a run that ends failed is notified where the Variable ``kafka_runbooks_notify`` says (``notify``)."""
    return {
        "on_failure_callback": notify_run_failed,
        "start_date": START_DATE,
        "catchup": False,
        "tags": list(tags),
        "default_args": {"owner": OWNER, "on_failure_callback": record_task_failure, **default_args},
    }


def manual_runbook(*, tags: list[str], max_active_runs: int | None = None) -> DagSettings:
    """A manual runbook: never scheduled, never retried by Airflow, and created unpaused.

    Nothing destructive happens before its gate (or, for a stop, it must act at once), and
    a run started into a paused DAG waits in the queue, unseen (FIELD_NOTES, Airflow 3.3.2).
    A retry would repeat a destructive step the runbook itself decides about.
    """
    settings = _common(tags, {"retries": 0})
    settings.update(schedule=None, is_paused_upon_creation=False)
    if max_active_runs is not None:
        settings["max_active_runs"] = max_active_runs
    return settings


def asset_intake(*, schedule: list, tags: list[str]) -> DagSettings:
    """A DAG run by asset events only (the alert intake): never retried, one run at a time (two
    runs would race to start the same incident), and created unpaused: it runs only on an event
    an authenticated post recorded, never on a clock."""
    settings = _common(tags, {"retries": 0})
    settings.update(schedule=schedule, is_paused_upon_creation=False, max_active_runs=1)
    return settings


def poke_interval_s() -> float:
    """How often the runbooks' reschedule sensors look (``KAFKA_RUNBOOKS_POKE_INTERVAL_S``, 30 s):
    one setting for the seven DAGs that wait on the cluster, read at parse time (no network)."""
    return float(os.environ.get("KAFKA_RUNBOOKS_POKE_INTERVAL_S", "30"))


def sweep_schedule(variable: str, default: str) -> str | None:
    """The sweep's schedule from its environment variable; empty or ``none`` = manual runs only."""
    value = os.environ.get(variable, default).strip()
    return None if value.lower() in MANUAL_ONLY else value


def sweep(
    *,
    schedule: str | None,
    tags: list[str],
    max_active_runs: int,
    dagrun_timeout: timedelta | None = None,
    retries: int = 0,
    retry_delay: timedelta | None = None,
) -> DagSettings:
    """A scheduled sweep: created paused, so a deployment turns on only the sweeps it wants."""
    default_args: dict[str, Any] = {"retries": retries}
    if retry_delay is not None:
        default_args["retry_delay"] = retry_delay
    settings = _common(tags, default_args)
    settings.update(schedule=schedule, is_paused_upon_creation=True, max_active_runs=max_active_runs)
    if dagrun_timeout is not None:
        settings["dagrun_timeout"] = dagrun_timeout
    return settings
