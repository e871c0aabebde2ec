"""The auto-restart sweep's rules, each tried alone on one connector, with a stand-in worker.

The stand-in only lists what it is given and answers a restart call as told (a restart, a
refusal, a 409, an unaddressable name, a deleted connector); it counts the calls. The
sweep over a real-wire worker is in test_client.py beside this file, over the real 4.3.1
worker in tests/integration/test_connect_autorestart.py.
"""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks import decisions
from kafka_runbooks.connect.autorestart import (
    _alert_if_errors_persist,
    _decide_all,
    _new_report,
    _one_connector,
    _Sweep,
)
from kafka_runbooks.connect.client import (
    ConnectError,
    ConnectorStatus,
    ConnectUnreachable,
    RestartOutcome,
    TaskStatus,
    UnaddressableConnector,
    UnknownConnector,
)
from kafka_runbooks.connect.policy import GIVE_UP, RestartPolicy, RestartState

MIN = 60.0
LOG = logging.getLogger("test")


class Worker:
    """Answers ``restart`` with ``answer``: None = restarted, an exception = raised."""

    url = "http://connect:8083"

    def __init__(self, answer: Exception | None = None) -> None:
        self.answer = answer
        self.restarts: list[str] = []
        self.calls = 0

    def restart(self, name, include_tasks=True, only_failed=True, known=None):
        self.calls += 1
        self.restarts.append(name)
        if self.answer is not None:
            raise self.answer
        return RestartOutcome(
            name, "kip-745", 1, known.connector_failed, tuple(known.failed_task_ids), (202,)
        )


def status(name: str = "sink", failed: bool = True, trace: str | None = None) -> ConnectorStatus:
    task = TaskStatus(0, "FAILED" if failed else "RUNNING", "w", trace if failed else None)
    return ConnectorStatus(name, "RUNNING", "sink", "w", None, (task,))


def sweep(worker: Worker, policy: RestartPolicy | None = None, exclude=(), now: float = 0.0) -> _Sweep:
    report = _new_report("c1", worker)
    return _Sweep("c1", worker, policy or RestartPolicy(), list(exclude), now, report, LOG)


@pytest.fixture(autouse=True)
def records():
    decisions.forget()
    yield
    decisions.forget()


def made() -> list[tuple[str, str]]:
    return [(r.subject, r.decision) for r in decisions.made()]


# -- which rule applies ----------------------------------------------------------------


def test_an_excluded_failed_connector_is_never_called_and_keeps_its_state():
    worker = Worker()
    previous = RestartState().after_restart(0.0)  # due again: the policy alone would restart it
    row, state = _one_connector(sweep(worker, exclude=["sin*"], now=10 * MIN), status(), previous)
    assert worker.restarts == [] and state is previous
    assert (row["action"], row["excluded_by"], row["restart_count"]) == ("excluded", "sin*", 1)
    assert made() == [("c1/sink", "not restarted")]
    assert "exclude pattern 'sin*'" in decisions.made()[0].reason


def test_an_excluded_healthy_connector_is_just_listed():
    row, state = _one_connector(sweep(Worker(), exclude=["sink"]), status(failed=False), None)
    assert (row["action"], row["excluded_by"], state) == ("none", "sink", None)
    assert made() == []


def test_the_exclusion_wins_over_a_known_unaddressable_name():
    previous = RestartState(unaddressable="HTTP 400")
    row, _ = _one_connector(sweep(Worker(), exclude=["*"]), status("a/b"), previous)
    assert row["action"] == "excluded"


def test_a_known_unaddressable_name_is_never_called_again_nor_alerted_again():
    worker = Worker()
    s = sweep(worker, now=60 * MIN)
    previous = RestartState(count=1, first_failure_at=0.0, last_restart_at=0.0, unaddressable="HTTP 400")
    row, state = _one_connector(s, status("a/b"), previous)
    assert worker.calls == 0 and state is previous and row["action"] == "unaddressable"
    assert s.report["alerts"] == [] and made() == [("c1/a/b", "not restarted")]
    assert decisions.made()[0].observed["worker_answer"] == "HTTP 400"


# -- what a restart call's answer does ---------------------------------------------------


def test_a_restart_is_counted_and_reported():
    s = sweep(Worker(), now=5.0)
    row, state = _one_connector(s, status(), None)
    assert (row["action"], state.count, state.last_restart_at) == ("restart", 1, 5.0)
    (restart,) = s.report["restarts"]
    assert restart["restart_count"] == 1 and restart["failed_tasks"] == [0]
    assert made() == [("c1/sink", "restarted (#1)")]


def test_a_refused_restart_is_counted_a_409_is_not():
    refused = sweep(Worker(ConnectError("HTTP 500: Failed to start task", 500)))
    row, state = _one_connector(refused, status(), None)
    assert (row["action"], state.count, state.error_streak) == ("restart_refused", 1, 1)
    busy = sweep(Worker(ConnectError("HTTP 409: rebalancing", 409)))
    row, state = _one_connector(busy, status(), None)
    assert (row["action"], state.count, state.error_streak) == ("restart_failed", 0, 1)
    assert state.last_error == "HTTP 409: rebalancing" and busy.report["restarts"] == []
    assert [d for _, d in made()] == ["restart refused", "restart call failed"]


def test_an_unaddressable_name_is_alerted_once_and_remembered():
    s = sweep(Worker(UnaddressableConnector("a/b", "HTTP 400: Ambiguous URI path separator")))
    row, state = _one_connector(s, status("a/b"), None)
    assert row["action"] == "unaddressable" and row["unaddressable"] is True
    assert state.unaddressable == "HTTP 400: Ambiguous URI path separator" and state.worth_keeping
    assert [a["alert"] for a in s.report["alerts"]] == ["unaddressable name"]


def test_a_connector_deleted_since_the_listing_is_forgotten():
    row, state = _one_connector(sweep(Worker(UnknownConnector("gone", 404))), status(), None)
    assert row["action"] == "deleted" and state is None
    assert made() == [("c1/sink", "not restarted: deleted")]
    assert "deleted between the listing and the restart call" in decisions.made()[0].reason


@pytest.mark.parametrize(
    "answer",
    [
        ConnectError("HTTP 400: Bad Request", 400),
        ConnectError("HTTP 403: Forbidden", 403),
        ConnectError("HTTP 503: Service Unavailable", 503),
        ConnectUnreachable("POST http://connect:8083/connectors/sink/restart: no answer (ReadTimeout)"),
    ],
    ids=["400", "403", "503", "timeout"],
)
def test_every_error_answer_but_409_backs_off_and_gives_up(answer):
    """Issue 23: only a 500 was counted, so a 400, 403 or 503 was retried every sweep forever."""
    policy = RestartPolicy(max_restarts=2)
    worker = Worker(answer)
    row, state = _one_connector(sweep(worker, policy, now=0.0), status(), None)
    assert (row["action"], state.count, state.error_streak) == ("restart_failed", 1, 1)
    row, state = _one_connector(sweep(worker, policy, now=1 * MIN), status(), state)
    assert row["action"] == "wait" and worker.calls == 1  # backed off
    row, state = _one_connector(sweep(worker, policy, now=2 * MIN), status(), state)
    assert (state.count, worker.calls) == (2, 2) and ("c1/sink", "last automatic restart") in made()
    s = sweep(worker, policy, now=60 * MIN)
    row, _ = _one_connector(s, status(), state)
    assert row["action"] == GIVE_UP and worker.calls == 2
    assert [a["alert"] for a in s.report["alerts"]] == ["restarts exhausted"]


def test_the_policys_last_restart_says_so():
    policy = RestartPolicy(max_restarts=2)
    previous = RestartState().after_restart(0.0)
    _one_connector(sweep(Worker(), policy, now=2 * MIN), status(), previous)
    assert made() == [("c1/sink", "restarted (#2)"), ("c1/sink", "last automatic restart")]
    decisions.forget()
    _one_connector(sweep(Worker(), RestartPolicy(max_restarts=3), now=2 * MIN), status(), previous)
    assert made() == [("c1/sink", "restarted (#2)")]


# -- no restart call -------------------------------------------------------------------


def test_restarts_used_up_leave_it_failed_with_an_alert_and_no_call():
    worker = Worker()
    s = sweep(worker, RestartPolicy(max_restarts=1), now=60 * MIN)
    previous = RestartState(first_failure_at=0.0).after_restart(0.0)
    row, _ = _one_connector(s, status(trace="java.lang.IllegalStateException: boom\n\tat X"), previous)
    assert worker.calls == 0 and row["action"] == GIVE_UP
    (alert,) = s.report["alerts"]
    assert alert["alert"] == "restarts exhausted" and alert["restart_count"] == 1
    assert alert["trace"] == "java.lang.IllegalStateException: boom"
    assert made() == [("c1/sink", "ALERT: left FAILED")]


def test_a_wait_says_when_the_next_restart_is_due():
    previous = RestartState().after_restart(0.0)
    row, _ = _one_connector(sweep(Worker(), now=1 * MIN), status(), previous)
    assert row["action"] == "wait" and row["next_due_at"] == "1970-01-01T00:02:00.000Z"
    assert made() == [("c1/sink", "wait")]


def test_a_connector_that_never_failed_leaves_no_record():
    row, state = _one_connector(sweep(Worker()), status(failed=False), None)
    assert row["action"] == "healthy" and not state.worth_keeping and made() == []
    _one_connector(sweep(Worker(), now=1 * MIN), status(failed=False), RestartState().after_restart(0.0))
    assert made() == [("c1/sink", "recovering")]  # restarted before: its recovery is explained


# -- persistent errors, forgotten connectors ------------------------------------------


def test_error_answers_alert_from_the_nth_in_a_row_on():
    policy = RestartPolicy(errors_before_alert=3)
    exc = ConnectError("HTTP 409: rebalancing", 409)
    s = sweep(Worker(), policy)
    _alert_if_errors_persist(s, status(), RestartState(error_streak=2), exc)
    assert s.report["alerts"] == [] and made() == []
    for streak in (3, 4):
        _alert_if_errors_persist(s, status(), RestartState(error_streak=streak), exc)
    assert [(a["alert"], a["error_streak"]) for a in s.report["alerts"]] == [
        ("restart calls failing", 3),
        ("restart calls failing", 4),
    ]
    refused = sweep(Worker(), policy)
    _alert_if_errors_persist(refused, status(), RestartState(error_streak=3), ConnectError("500", 500))
    assert refused.report["alerts"][0]["alert"] == "restart refused"


def test_the_state_of_a_connector_gone_from_the_cluster_is_dropped_and_said():
    s = sweep(Worker())
    kept = _decide_all(s, {"sink": status(failed=False)}, {"old": RestartState().after_restart(0.0)})
    assert kept == {} and [r["name"] for r in s.report["connectors"]] == ["sink"]
    assert made() == [("c1", "state forgotten")]
    assert decisions.made()[0].observed == {"connectors": ["old"]}
