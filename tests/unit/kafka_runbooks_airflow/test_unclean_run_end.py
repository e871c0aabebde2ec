"""The unclean recovery's last step (restore_replica_order, all_done) decides the run's state: it
fails the run unless the elections succeeded or were skipped. Found by the fault campaign (unclean
seed 2): once the restore step existed, an automated run with nothing electable ended a success."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafka_runbooks_airflow.unclean import elections_ended

RUN = "manual__1"


def _context(answer):
    def get_task_states(dag_id, task_ids, run_ids):
        assert (dag_id, task_ids, run_ids) == ("kafka_unclean_recovery", ["run_elections"], [RUN])
        if isinstance(answer, Exception):
            raise answer
        return answer

    return {
        "ti": SimpleNamespace(get_task_states=get_task_states),
        "dag": SimpleNamespace(dag_id="kafka_unclean_recovery"),
        "run_id": RUN,
    }


@pytest.mark.parametrize("state", ["success", "skipped"])
def test_elections_that_held_or_were_not_needed_let_the_run_succeed(state):
    assert elections_ended(_context({RUN: {"run_elections": state}})) is None


@pytest.mark.parametrize("state", ["failed", "upstream_failed", None])
def test_elections_that_failed_or_never_ran_fail_the_run(state):
    why = elections_ended(_context({RUN: {"run_elections": state}}))
    assert why == f"run_elections ended {state or 'with no state'}"


def test_an_unreadable_state_is_not_success():
    assert "could not be read" in elections_ended(_context(RuntimeError("no supervisor")))
    assert "with no state" in elections_ended(_context({}))
