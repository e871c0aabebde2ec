"""The campaign's answerer counts the approval a gate acted on, also when a retry took it."""

from __future__ import annotations

from kafka_runbooks.approval import APPROVE_OPTION
from kafka_runbooks_dev.chaos.answer import Answerer


class Airflow:
    """The gate's task instance as Airflow's REST API gives it, one state after another."""

    def __init__(self, states):
        self.states = list(states)
        self.sent = []

    def task_instance(self, dag_id, run_id, task_id):
        try_number, state = self.states[0] if len(self.states) == 1 else self.states.pop(0)
        return {"try_number": try_number, "state": state}

    def wait_for_approval(self, *a, **k):
        return None

    def answer(self, dag_id, run_id, gate, options):
        self.sent.append(options)


def test_a_retry_that_acts_on_the_kept_answer_counts_it_as_the_approval():
    """Round 3, rebalance:13: approved as try 1 asked; Airflow failed try 1 (apache/airflow#67287); try 2
    took the kept answer and succeeded. The answerer saw no approval of try 2 and the campaign read every
    move as a write with no approval."""
    airflow = Airflow([(1, "awaiting_input"), (1, "failed"), (2, "success")])
    answerer = Answerer(airflow, "d", "r", "approval_gate", "approve", 0)
    for _ in range(3):
        answerer._step()
    assert airflow.sent == [[APPROVE_OPTION]]
    assert answerer.answers.approved_at is not None
    assert answerer.answers.approved_at == answerer.answers.sent[0][0]


def test_a_gate_that_succeeded_with_no_answer_taken_counts_no_approval():
    airflow = Airflow([(1, "success")])
    answerer = Answerer(airflow, "d", "r", "approval_gate", "approve", 0)
    answerer._step()
    assert answerer.answers.approved_at is None and airflow.sent == []
