"""Failure tracking: countdown persisted, bounce forgotten, thresholds, outage refusal."""

from __future__ import annotations

import pytest

from kafka_runbooks.model import Broker, ClusterState, PartitionState
from kafka_runbooks.reassign.failures import FailureStore, FailureTracker, Thresholds, failed_brokers


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def cluster(down: dict[int, str], brokers=(1, 2, 3, 4, 5, 6)) -> ClusterState:
    """Six brokers; ``down`` maps broker -> "fenced" or "gone" (unregistered)."""
    known = {
        b: Broker(broker_id=b, alive=True, fenced=down.get(b) == "fenced")
        for b in brokers
        if down.get(b) != "gone"
    }
    parts = [
        PartitionState("t", i, leader=brokers[i % len(brokers)], leader_epoch=1, replicas=r, isr=r)
        for i, r in enumerate(
            [(brokers[i % len(brokers)], brokers[(i + 1) % len(brokers)]) for i in range(len(brokers))]
        )
    ]
    for p in parts:
        for r in p.replicas:
            known.setdefault(r, Broker(broker_id=r, alive=False))
    return ClusterState(cluster_id="c", brokers=known, quorum=None, partitions=parts)


def tracker(tmp_path, clock, **kw) -> FailureTracker:
    th = Thresholds(alert_after_s=60, failure_threshold_s=300, **kw)
    return FailureTracker(FailureStore("kafka_default", tmp_path), th, clock=clock)


def test_fenced_and_unregistered_brokers_that_host_replicas_are_failed():
    state = cluster({2: "fenced", 5: "gone"})
    assert failed_brokers(state) == [2, 5]
    # a fenced broker that hosts nothing is not a failed broker
    state.partitions = [p for p in state.partitions if 2 not in p.replicas]
    assert failed_brokers(state) == [5]


def test_countdown_alert_then_due_and_it_survives_a_new_tracker(tmp_path):
    clock = Clock()
    a = tracker(tmp_path, clock).observe(cluster({3: "fenced"}))
    assert list(a.failed) == [3] and a.due == [] and a.alerts == []
    clock.t += 61
    # a new tracker (scheduler restarted) reads the first-seen time from the file
    a = tracker(tmp_path, clock).observe(cluster({3: "gone"}))
    assert a.alerts == [3] and a.due == []
    assert a.failed[3].first_seen_ms == 1_000_000_000
    clock.t += 240
    a = tracker(tmp_path, clock).observe(cluster({3: "gone"}))
    assert a.due == [3]
    assert any(
        r.decision == "wait"
        for r in tracker(tmp_path, Clock(1_000_100)).observe(cluster({3: "gone"})).records
    )


def test_a_bounce_is_forgotten_and_never_due(tmp_path):
    clock = Clock()
    t = tracker(tmp_path, clock)
    t.observe(cluster({4: "fenced"}))
    clock.t += 200
    a = t.observe(cluster({}))
    assert a.recovered == [4] and a.failed == {}
    assert "a bounce" in a.records[0].reason
    clock.t += 200  # 400 s after the first failure: had it been remembered, it would be due
    a = t.observe(cluster({4: "fenced"}))
    assert a.due == [] and a.failed[4].first_seen_ms == int(clock.t * 1000)


def test_outage_refuses_and_says_so(tmp_path):
    clock = Clock()
    t = tracker(tmp_path, clock)
    t.observe(cluster({1: "gone", 2: "gone", 3: "fenced"}))
    clock.t += 1000
    a = t.observe(cluster({1: "gone", 2: "gone", 3: "fenced"}))
    assert a.outage and a.due == []
    assert any("outage, not a broker failure" in r.reason for r in a.records)
    # two of six is exactly a third: not more than a third, so it is acted on
    a = tracker(tmp_path, clock).observe(cluster({1: "gone", 2: "gone"}))
    assert not a.outage and a.due == [1, 2]


def test_threshold_minus_one_turns_automation_off(tmp_path):
    clock = Clock()
    th = Thresholds(alert_after_s=10, failure_threshold_s=-1)
    t = FailureTracker(FailureStore("c", tmp_path), th, clock=clock)
    t.observe(cluster({6: "gone"}))
    clock.t += 10_000
    a = t.observe(cluster({6: "gone"}))
    assert a.due == [] and a.alerts == [6]
    assert any("automatic reassignment is off" in r.reason for r in a.records)


def test_a_started_run_is_not_started_again_until_retrigger_time(tmp_path):
    clock = Clock()
    t = tracker(tmp_path, clock)
    t.observe(cluster({2: "gone"}))
    clock.t += 300
    assert t.observe(cluster({2: "gone"})).due == [2]
    t.mark_triggered([2], "sweep__2")
    clock.t += 100
    a = t.observe(cluster({2: "gone"}))
    assert a.due == [] and a.failed[2].triggered_run_id == "sweep__2"
    clock.t += 201
    assert t.observe(cluster({2: "gone"})).due == [2]


def test_bad_thresholds_and_corrupt_state_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="failure_threshold"):
        Thresholds(failure_threshold_s=-5)
    with pytest.raises(ValueError, match="max_failed_fraction"):
        Thresholds(max_failed_fraction=0)
    store = FailureStore("c", tmp_path)
    store.path.write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        store.load()
