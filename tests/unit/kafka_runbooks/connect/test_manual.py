"""The manual restart's steps, each tried alone with a stand-in worker.

The stand-in lists one connector, records the restart calls it gets and answers the status
reads from a script. The manual restart over a real-wire worker is in test_client.py beside
this file, over the real 4.3.1 worker in tests/integration/test_connect_autorestart.py.
"""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks import decisions
from kafka_runbooks.connect.client import (
    ConnectorStatus,
    RestartOutcome,
    TaskStatus,
    UnknownConnector,
    UnknownTask,
)
from kafka_runbooks.connect.manual import (
    RestartNotSettled,
    Settled,
    _judge,
    _restart_scope,
    _status_before,
    settle_restart,
)

LOG = logging.getLogger("test")


def status(*tasks: str, connector: str = "RUNNING") -> ConnectorStatus:
    return ConnectorStatus(
        "sink",
        connector,
        "sink",
        "w",
        None,
        tuple(TaskStatus(i, s, "w", "boom\n\tat X" if s == "FAILED" else None) for i, s in enumerate(tasks)),
    )


class Worker:
    url = "http://connect:8083"

    def __init__(self, *reads: ConnectorStatus) -> None:
        self.reads = list(reads)  # status reads in order; the last one repeats
        self.posts: list[tuple] = []

    def list_connectors(self):
        return {"sink": status("FAILED", "RUNNING"), "other": status("RUNNING")}

    def restart_task(self, name, task_id):
        self.posts.append(("task", task_id))
        return 204

    def restart_connector(self, name):
        self.posts.append(("connector",))
        return 204

    def restart(self, name, include_tasks=True, only_failed=True, known=None):
        self.posts.append(("kip-745", include_tasks, only_failed))
        return RestartOutcome(name, "kip-745", 1, False, (0,), (202,))

    def connector_status(self, name):
        return self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]


@pytest.fixture(autouse=True)
def records():
    decisions.forget()
    yield
    decisions.forget()


def test_an_unknown_connector_or_task_fails_before_any_restart_naming_what_exists():
    worker = Worker()
    with pytest.raises(UnknownConnector, match=r"it has: \['other', 'sink'\]"):
        _status_before(worker, "snk", [])
    with pytest.raises(UnknownTask, match=r"has no task \[2\]; its tasks are \[0, 1\]"):
        _status_before(worker, "sink", [1, 2])
    assert worker.posts == []
    assert _status_before(worker, "sink", [1]).task_ids == [0, 1]


@pytest.mark.parametrize(
    ("scope", "ids", "posts", "restarted"),
    [
        ("tasks", [0, 1], [("task", 0), ("task", 1)], (False, [0, 1])),
        ("connector", [], [("connector",)], (True, [])),
        ("failed", [], [("kip-745", True, True)], (False, [0])),
        ("all", [], [("kip-745", True, False)], (False, [0])),
    ],
)
def test_each_scope_makes_its_own_calls_only(scope, ids, posts, restarted):
    worker = Worker()
    result = _restart_scope(worker, "sink", scope, ids, status("FAILED", "RUNNING"))
    assert worker.posts == posts
    assert (result["restarted_connector"], list(result["restarted_tasks"])) == restarted


def test_running_once_right_after_the_restart_is_not_settled():
    """The first read can still be the state from before the restart: it must hold ``stable_s``."""
    worker = Worker(status("RUNNING"), status("RESTARTING"), status("RUNNING"))
    settle = settle_restart(
        worker, "sink", [0], before=status("RUNNING"), timeout_s=5.0, stable_s=0.3, poll_s=0.05
    )
    assert settle.settled and settle.problem is None
    assert settle.seen == {"connector": ["RUNNING"], "task 0": ["RUNNING", "RESTARTING", "RUNNING"]}
    assert settle.waited_s >= 0.3


def test_a_running_read_from_before_the_restart_never_settles_it_however_long_it_lasts():
    """Issue 23.7: RUNNING reads from before the accepted restart counted as 'RUNNING for 5 s';
    the task then failed once the worker applied the restart. Only reads after it count."""
    reads = [status("RUNNING")] * 8 + [status("RESTARTING"), status("FAILED")]
    settle = settle_restart(
        Worker(*reads), "sink", [0], before=status("RUNNING"), timeout_s=5.0, stable_s=0.0, poll_s=0.01
    )
    assert not settle.settled
    assert settle.problem == "task 0 FAILED again after the restart (boom)"


def test_a_restart_that_never_shows_is_unknown_not_settled():
    """Same state, worker and trace in every read: Connect keeps no restart count, so unknown."""
    settle = settle_restart(
        Worker(status("RUNNING")), "sink", [0], before=status("RUNNING"), timeout_s=0.3, stable_s=0.0
    )
    assert not settle.settled and settle.seen == {"connector": ["RUNNING"], "task 0": ["RUNNING"]}
    assert settle.problem.startswith("task 0 read exactly as before the restart in every read for 0.3s")
    assert "whether the restart took effect is unknown" in settle.problem


def test_failed_again_after_the_restart_gives_up_at_once_a_stale_failed_read_does_not():
    worker = Worker(status("FAILED"), status("RESTARTING"), status("FAILED"))
    settle = settle_restart(
        worker, "sink", [0], before=status("FAILED"), timeout_s=10.0, stable_s=0.0, poll_s=0.01
    )
    assert not settle.settled and settle.waited_s < 5  # not the whole settle_timeout_s
    assert settle.problem == "task 0 FAILED again after the restart (boom)"
    assert settle.seen["task 0"] == ["FAILED", "RESTARTING", "FAILED"]


def test_a_watched_item_never_running_names_itself_when_the_time_runs_out():
    settle = settle_restart(
        Worker(status("RUNNING")),
        "sink",
        [0, 3],
        before=status("RUNNING"),
        timeout_s=0.1,
        stable_s=0.0,
        poll_s=0.02,
    )
    assert not settle.settled
    assert settle.problem == "task 3 MISSING not RUNNING after 0.1s (settle_timeout_s)"


def _settle(settled: bool) -> Settled:
    problem = None if settled else "task 0 RESTARTING not RUNNING after 1s (settle_timeout_s)"
    return Settled(settled, {"state": "RUNNING"}, {"task 0": ["RESTARTING"]}, 1.0, problem)


RESULT = {"method": "per-task", "restarted_connector": False, "restarted_tasks": [0], "http_statuses": [204]}


def test_only_a_settled_restart_is_restarted():
    _judge(Worker(), "sink", RESULT, _settle(True), 5.0, True, LOG)
    (record,) = decisions.made()
    assert record.decision == "restarted" and record.action == "per-task: connector=False tasks=[0]"


def test_not_settled_fails_with_what_was_seen_or_only_warns_when_asked(caplog):
    caplog.set_level(logging.INFO, logger="test")
    with pytest.raises(RestartNotSettled, match="the restart was made but task 0 RESTARTING") as err:
        _judge(Worker(), "sink", RESULT, _settle(False), 5.0, True, LOG)
    assert err.value.seen == {"task 0": ["RESTARTING"]}
    _judge(Worker(), "sink", RESULT, _settle(False), 5.0, False, LOG)  # no raise
    assert [r.decision for r in decisions.made()] == ["NOT SETTLED", "not settled (warning only)"]
    assert [r.levelname for r in caplog.records if r.name == "test"] == ["ERROR", "WARNING"]
