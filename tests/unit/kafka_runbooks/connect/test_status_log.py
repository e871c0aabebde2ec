"""Connect's status topic read back (issue #39 point 7): a restart whose task fails again at once,
with the very trace it had, reads exactly as before in every REST read; the workers' own status
records say RESTARTING (or RUNNING) then FAILED since the restart, and the settle ends at once.

The topic stand-in answers as the admin facade's reads do (end offsets per partition, the raw
values written under each key since a mark, Connect's JSON); the facade's consumer reads the real
topic of a real 4.3.1 worker in tests/integration/test_connect_autorestart.py.
"""

from __future__ import annotations

import json
from collections import namedtuple

import pytest

from kafka_runbooks.connect.manual import settle_restart
from kafka_runbooks.connect.status_log import StatusLog, StatusWatch, failed_again, restart_shown, status_key

Record = namedtuple("Record", "topic partition offset key value")
TOPIC = "connect-status"


class Topic:
    """The status topic's records per partition, answered as the admin facade's two reads do
    (``topic_end_offsets``, ``values_since``); ``asked`` counts the reads."""

    def __init__(self, partitions: int = 2) -> None:
        self.records: dict[int, list[Record]] = {p: [] for p in range(partitions)}
        self.asked = 0

    def write(self, key: str, state: str | None, partition: int = 0) -> None:
        value = (
            None
            if state is None
            else json.dumps({"state": state, "trace": None, "worker_id": "w", "generation": 3}).encode()
        )
        log = self.records[partition]
        log.append(Record(TOPIC, partition, len(log), key.encode(), value))

    def topic_end_offsets(self, topic):
        self.asked += 1
        assert topic == TOPIC
        return {p: len(r) for p, r in self.records.items()}

    def values_since(self, topic, since, keys):
        self.asked += 1
        out = {k: [] for k in keys}
        for p, start in since.items():
            for r in self.records[p][start:]:
                if r.key.decode() in out:
                    out[r.key.decode()].append(r.value)
        return out


def test_the_states_written_since_the_mark_are_read_per_key_in_write_order():
    topic = Topic()
    topic.write("status-task-sink-0", "FAILED")  # before the mark: old news
    log = StatusLog(TOPIC, topic)
    mark = log.mark()
    assert mark == {0: 1, 1: 0}
    topic.write("status-task-sink-0", "RESTARTING")
    topic.write("status-task-other-0", "RUNNING", partition=1)
    topic.write("status-task-sink-0", "FAILED")
    topic.write("status-connector-sink", None, partition=1)  # a tombstone
    written = log.since(mark, [status_key("sink", "task 0"), status_key("sink", "connector")])
    assert written == {"status-task-sink-0": ["RESTARTING", "FAILED"], "status-connector-sink": ["DELETED"]}
    assert log.since(log.mark(), ["status-task-sink-0"]) == {"status-task-sink-0": []}


def test_only_a_restart_state_then_failed_is_failed_again():
    assert failed_again(["RESTARTING", "FAILED"]) and failed_again(["RUNNING", "FAILED"])
    assert not failed_again(["FAILED"]), "a FAILED alone may be written for another reason: not proof"
    assert not failed_again(["RESTARTING", "FAILED", "RUNNING"]) and not failed_again([])
    assert restart_shown(["UNASSIGNED"]) and not restart_shown(["FAILED"])


def _status(state: str):
    from kafka_runbooks.connect.client import ConnectorStatus, TaskStatus

    return ConnectorStatus("sink", "RUNNING", "sink", "w", None, (TaskStatus(0, state, "w", "boom\n\tat X"),))


class Worker:
    """The REST status: task 0 FAILED with the same trace in every read (its restart unseen)."""

    url = "http://connect:8083"

    def __init__(self, topic: Topic, after_reads: int) -> None:
        self.topic, self.after_reads, self.reads = topic, after_reads, 0

    def connector_status(self, name):
        self.reads += 1
        if self.reads == self.after_reads:  # the worker restarts it and it fails at once
            self.topic.write("status-task-sink-0", "RESTARTING")
            self.topic.write("status-task-sink-0", "RUNNING")
            self.topic.write("status-task-sink-0", "FAILED")
        return _status("FAILED")


def _settle_failed_task(topic: Topic, timeout_s: float, watch: StatusWatch | None = None):
    """Restart task 0, FAILED before, whose REST status reads FAILED the same in every read."""
    worker = Worker(topic, after_reads=3)
    before = _status("FAILED")
    return settle_restart(
        worker, "sink", [0], before=before, timeout_s=timeout_s, stable_s=0.0, poll_s=0.01, watch=watch
    )


def test_a_task_that_fails_again_at_once_with_the_same_trace_ends_the_settle_at_once():
    topic = Topic()
    blind = _settle_failed_task(topic, 0.5)  # the REST reads alone: only the end of the settle period ends it
    assert blind.problem == "task 0 FAILED (boom) not RUNNING after 0.5s (settle_timeout_s)"
    watch = StatusWatch(StatusLog(TOPIC, topic), "sink", every_s=0.0)  # marked before the restart
    settle = _settle_failed_task(topic, 30.0, watch)
    assert not settle.settled
    assert settle.problem == (
        "task 0 (RESTARTING -> RUNNING -> FAILED) FAILED again at once after the restart, as the workers "
        "wrote it to their status topic 'connect-status' since the restart"
    )
    assert watch.written == {"task 0": ["RESTARTING", "RUNNING", "FAILED"]} and watch.error is None


def test_a_status_topic_that_cannot_be_read_is_said_and_the_rest_reads_decide_alone():
    from kafka_runbooks.errors import NotAuthorized

    class Refused:
        def topic_end_offsets(self, topic):
            raise NotAuthorized("READ", "topic connect-status", "ListOffsets")

    watch = StatusWatch(StatusLog(TOPIC, Refused()), "sink")
    assert watch.mark is None and watch.error.startswith("NotAuthorized: ")
    assert "lacks READ on topic connect-status" in watch.error
    shown = {"task 0": False}
    assert watch.failed_again(["task 0"], shown) is None and shown == {"task 0": False}


def test_the_log_is_read_at_most_every_period():
    topic, now = Topic(), [0.0]
    watch = StatusWatch(StatusLog(TOPIC, topic), "sink", every_s=1.0, clock=lambda: now[0])
    asked = topic.asked
    shown = {"task 0": False}
    for t in (0.0, 0.2, 0.9, 1.0, 1.5):
        now[0] = t
        watch.failed_again(["task 0"], shown)
    assert topic.asked - asked == 2


@pytest.mark.parametrize(
    "item, key", [("connector", "status-connector-a-b"), ("task 12", "status-task-a-b-12")]
)
def test_status_keys_are_connects_own(item, key):
    assert status_key("a-b", item) == key
