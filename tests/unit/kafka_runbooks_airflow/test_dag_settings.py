"""The sweeps' schedule variables: a deployment turns a sweep to manual runs with ``none``."""

from __future__ import annotations

import pytest

from kafka_runbooks_airflow import dag_settings

VARIABLE = "KAFKA_RUNBOOKS_TEST_SWEEP_SCHEDULE"


@pytest.mark.parametrize("value", ["", "none", " None ", "NONE"])
def test_an_empty_or_none_schedule_means_manual_runs_only(monkeypatch, value):
    monkeypatch.setenv(VARIABLE, value)
    assert dag_settings.sweep_schedule(VARIABLE, "*/5 * * * *") is None


def test_a_schedule_is_taken_as_given_and_the_default_applies_when_unset(monkeypatch):
    monkeypatch.setenv(VARIABLE, " @hourly ")
    assert dag_settings.sweep_schedule(VARIABLE, "*/5 * * * *") == "@hourly"
    monkeypatch.delenv(VARIABLE)
    assert dag_settings.sweep_schedule(VARIABLE, "*/5 * * * *") == "*/5 * * * *"


def test_a_manual_runbook_is_never_retried_and_a_sweep_only_as_asked():
    """A retry of a manual runbook's task would repeat a step its gate approved once."""
    never_retried = {
        "owner": "kafka-platform",
        "retries": 0,
        "on_failure_callback": dag_settings.record_task_failure,
    }
    assert dag_settings.manual_runbook(tags=["kafka"])["default_args"] == never_retried
    settings = dag_settings.sweep(schedule=None, tags=["kafka"], max_active_runs=1)
    assert settings["default_args"] == never_retried
    assert settings["is_paused_upon_creation"] and "dagrun_timeout" not in settings


def test_every_runbook_dag_notifies_a_failed_run_once():
    """The DAG's failure callback (once per run), not each task's: a run with three failed tasks
    is one message (docs/notifications.md)."""
    from kafka_runbooks_airflow.notify import notify_run_failed

    for settings in (
        dag_settings.manual_runbook(tags=["k"]),
        dag_settings.sweep(schedule=None, tags=["k"], max_active_runs=1),
    ):
        assert settings["on_failure_callback"] is notify_run_failed
        assert settings["default_args"]["on_failure_callback"] is not notify_run_failed
