"""The rule the executor applies right before each submission to Kafka: only a try Airflow says is
``running`` submits; another state is a superseded try, no answer is unknown (never "running").
The executor and the sensor around it: tests/unit/kafka_runbooks_airflow/sensors/test_reassignment.py."""

from __future__ import annotations

import pytest

from kafka_runbooks import decisions
from kafka_runbooks.fence import Superseded
from kafka_runbooks.task_state import TaskStateReading, TaskStateUnknown, require_running


@pytest.fixture(autouse=True)
def _fresh_records():
    decisions.forget()


def test_running_lets_the_submission_through_and_records_nothing():
    require_running(lambda: TaskStateReading(state="running"), "submit chunk 1")
    assert decisions.made() == []


@pytest.mark.parametrize("state", ["restarting", "failed", "up_for_retry", "success", None])
def test_any_other_state_is_a_superseded_try_that_submits_nothing(state):
    with pytest.raises(Superseded, match="not running: nothing submitted \\(submit chunk 1\\)"):
        require_running(lambda: TaskStateReading(state=state), "submit chunk 1", subject="chunk 1")
    (record,) = decisions.made()
    assert record.decision == "refuse: this try was superseded" and record.subject == "chunk 1"
    assert record.observed == {"refused": "submit chunk 1", "task_state": state}


def test_no_answer_is_unknown_not_running_even_with_a_state_beside_it():
    reading = TaskStateReading(state="running", unknown="execution API timed out")
    assert not reading.running
    with pytest.raises(TaskStateUnknown, match="execution API timed out"):
        require_running(lambda: reading, "set the replication throttle")
    assert [r.decision for r in decisions.made()] == ["refuse: this try's state is unknown"]
