"""A failed task's reason reaches the page as a decision (issue #39 point 4): once the page said
only "task(s) failed: replace" (a missing Variable) or nothing at all (an early approval)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from kafka_runbooks import console, decisions
from kafka_runbooks_airflow.task_failure import record_task_failure


@pytest.fixture(autouse=True)
def fresh():
    decisions.forget()
    yield
    decisions.forget()


def _context(exc):
    return {"exception": exc, "ti": SimpleNamespace(task_id="replace")}


def test_a_failure_no_step_recorded_becomes_the_runs_error_decision():
    record_task_failure(_context(KeyError("Variable kafka_runbooks_kafka_libs does not exist")))
    made = decisions.made()
    assert [(r.step, r.decision, r.level) for r in made] == [("replace", "task failed", "ERROR")]
    assert made[0].reason == "KeyError: 'Variable kafka_runbooks_kafka_libs does not exist'"
    # what the page shows for the failed run: that record, not "task(s) failed: replace"
    journal = [{**made[0].as_dict(), "dag_id": "d", "run_id": "r"}]
    assert console.failure_reason("d", "r", journal) == (
        "replace: task failed because KeyError: 'Variable kafka_runbooks_kafka_libs does not exist'"
    )


def test_a_try_that_recorded_its_own_reason_keeps_it():
    decisions.record("plan", "refuse", "the plan breaks the majority", level=logging.ERROR)
    record_task_failure(_context(RuntimeError("refused")))
    assert [r.decision for r in decisions.made()] == ["refuse"]


def test_an_empty_message_and_no_exception_are_said_so():
    record_task_failure(_context(TimeoutError()))
    record_task_failure({"exception": None})
    # the first failure recorded an ERROR: the second try's process would start empty
    assert decisions.made()[0].reason == "TimeoutError: (no message)"


def test_every_runbook_dags_tasks_record_their_failure():
    from kafka_runbooks_airflow.dag_settings import manual_runbook, sweep

    for settings in (manual_runbook(tags=["t"]), sweep(schedule=None, tags=["t"], max_active_runs=1)):
        assert settings["default_args"]["on_failure_callback"] is record_task_failure
