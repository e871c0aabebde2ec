"""Throttle changes count only once every broker's own answer shows them.

Seen on Kafka 3.9.2 (tests/integration/test_failed_broker_executor.py, three tests): a broker answers
DescribeConfigs from its own copy of the metadata, which lags the controller's answer to
IncrementalAlterConfigs. The removal read a topic's throttled replicas as unset just after they were
appended, edited what it read, took nothing off and said "removed". Here each broker's copy lags the
controller by a number of reads, as a broker that has not applied the latest records yet.
"""

from __future__ import annotations

import copy

import pytest

from kafka_runbooks.failed_broker import throttle
from tests.config_fakes import ConfigStore

LISTS = [throttle.LEADER_REPLICAS, throttle.FOLLOWER_REPLICAS]


class LaggingCluster:
    """The controller's configs, and per broker a copy that catches up ``lag`` reads after a change."""

    def __init__(self, brokers=(1, 2, 3), lag=3):
        self.controller = ConfigStore()
        self.brokers = list(brokers)
        self.lag = lag
        self.copies = {b: ConfigStore() for b in self.brokers}
        self.behind = dict.fromkeys(self.brokers, 0)
        self.acted: list[tuple] = []

    def incremental_alter_configs(self, kind, changes):
        self.acted.append((kind, copy.deepcopy(changes)))
        result = self.controller.alter(kind, changes)
        self.behind = dict.fromkeys(self.brokers, self.lag)
        return result

    def describe_config_values(self, kind, names, keys, asked_of=None):
        broker = (
            asked_of if asked_of is not None else (int(names[0]) if kind == "broker" else self.brokers[-1])
        )
        if self.behind[broker] > 0:
            self.behind[broker] -= 1
        else:
            self.copies[broker].configs = copy.deepcopy(self.controller.configs)
        return self.copies[broker].values(kind, names, keys)

    def broker_answers(self, broker_id, timeout_s=None):
        return None


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(throttle.time, "sleep", lambda s: None)
    monkeypatch.setattr(throttle, "READ_BACK_S", 0.5)


def record():
    return throttle.throttle_plan([("t", 0, (1, 4), (1, 2)), ("t", 1, (4, 3), (3, 2))], {1, 2, 3}, 1000)


def test_a_removal_whose_reads_lag_the_append_still_takes_the_items_off():
    """The fault seen on 3.9.2: no broker's copy shows the append yet when the removal starts (its
    task killed before the append was read back). The items come off at the controller all the same,
    and another tool's item stays."""
    cluster = LaggingCluster(lag=50)
    rec = record()
    cluster.controller.alter("topic", {"t": {throttle.LEADER_REPLICAS: ("APPEND", "9:9")}})  # someone else's
    cluster.controller.alter(
        "topic",
        {"t": {k: ("APPEND", ",".join(items)) for k, items in throttle._lists(rec.topics["t"])}},
    )
    for b in rec.brokers:
        rec.brokers[b]["previous"] = dict.fromkeys(throttle.BROKER_KEYS)
    cluster.lag = 2
    assert throttle.remove(cluster, rec, live={1, 2, 3}) == {}
    now = cluster.controller.values("topic", ["t"], LISTS)["t"]
    assert now[throttle.LEADER_REPLICAS] == "9:9" and not now.get(throttle.FOLLOWER_REPLICAS)


def test_a_list_emptied_is_deleted_and_nothing_counts_as_done_before_every_broker_reads_it():
    cluster = LaggingCluster(lag=2)
    rec = record()
    cluster.controller.alter("topic", {"t": {throttle.LEADER_REPLICAS: ("APPEND", "9:9")}})  # someone else's
    throttle.read_previous_rates(cluster, rec)
    throttle.apply(cluster, rec)  # returns only once every broker's copy shows it
    for b in cluster.brokers:
        assert (
            cluster.copies[b].values("topic", ["t"], LISTS)["t"]
            == cluster.controller.values("topic", ["t"], LISTS)["t"]
        )
    assert throttle.remove(cluster, rec, live={1, 2, 3}) == {}
    assert cluster.controller.values("topic", ["t"], LISTS) == {"t": {throttle.LEADER_REPLICAS: "9:9"}}
    topic_ops = [op for kind, ch in cluster.acted if kind == "topic" for op, _ in ch["t"].values()]
    assert topic_ops[-3:] == ["SUBTRACT", "SUBTRACT", "DELETE"]  # the follower list "" deleted, once
    for b in cluster.brokers:
        assert cluster.copies[b].values("topic", ["t"], LISTS) == cluster.controller.values(
            "topic", ["t"], LISTS
        )
    assert cluster.controller.values("broker", ["1", "2", "3"], throttle.BROKER_KEYS) == {
        "1": {},
        "2": {},
        "3": {},
    }


def test_a_change_that_never_reads_back_is_named_left_not_done():
    cluster = LaggingCluster(lag=10**9)  # brokers whose copies never catch up
    rec = record()
    for b in rec.brokers:
        rec.brokers[b]["previous"] = dict.fromkeys(throttle.BROKER_KEYS)
    with pytest.raises(throttle.ThrottleError, match="does not read back"):
        throttle.apply(cluster, rec)
    for b in cluster.brokers:  # the copies took the throttle, then nothing newer
        cluster.copies[b].configs = copy.deepcopy(cluster.controller.configs)
    left = throttle.remove(cluster, rec, live={1, 2, 3})
    assert set(left) == {"broker 1", "broker 2", "broker 3", "topic t"}
    assert "restored, but its own answer reads" in left["broker 1"]


def test_a_late_second_removal_of_the_same_items_leaves_no_empty_list():
    """Seen on 3.9.2 (resume after a kill): a new run took its throttle off, then the killed run's late
    cleanup subtracted the same items from lists no longer set. Kafka's SUBTRACT sets "" on an unset
    list; the lagging copies still read it unset, which the removal took as clean: "" stayed."""
    cluster = LaggingCluster(lag=2)
    rec = record()
    throttle.read_previous_rates(cluster, rec)
    throttle.apply(cluster, rec)
    assert throttle.remove(cluster, rec, live={1, 2, 3}) == {}
    assert throttle.remove(cluster, rec, live={1, 2, 3}) == {}  # the late one
    assert cluster.controller.values("topic", ["t"], LISTS) == {"t": {}}
