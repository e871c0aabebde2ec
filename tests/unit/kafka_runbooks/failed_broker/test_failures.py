"""Failure tracking: countdown persisted, bounce forgotten, thresholds, outage refusal."""

from __future__ import annotations

import pytest

from kafka_runbooks.failed_broker.failures import FailureStore, FailureTracker, Thresholds, failed_brokers
from kafka_runbooks.model import Broker, ClusterState, PartitionState


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
    assert a.new_alerts == [3]  # told once: the first sweep the alert is due in (notify)
    assert a.failed[3].first_seen_ms == 1_000_000_000
    clock.t += 240
    a = tracker(tmp_path, clock).observe(cluster({3: "gone"}))
    assert a.due == [3] and a.alerts == [3] and a.new_alerts == []
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


def with_quorum(state: ClusterState, epoch: int, fetches: dict[int, int], now_ms: int) -> ClusterState:
    """The metadata quorum's answer: controller 9001 leads; brokers in ``fetches`` are observers."""
    from kafka_runbooks.model import Quorum, QuorumMember

    state.quorum = Quorum(
        leader_id=9001,
        leader_epoch=epoch,
        high_watermark=100,
        voters=(QuorumMember(9001, 100, now_ms, now_ms), QuorumMember(9002, 100, now_ms, now_ms)),
        observers=tuple(QuorumMember(b, 100, t, t) for b, t in fetches.items()),
        fetch_timeout_ms=2000,  # the cluster's controller.quorum.fetch.timeout.ms, as the facade reads it
    )
    return state


def test_a_bounce_between_sweeps_restarts_the_countdown(tmp_path):
    """Broker 3 is failed at every sweep; its metadata fetches show whether it ran in between."""
    clock = Clock()
    t = tracker(tmp_path, clock)
    killed_at = 999_990_000  # controller clock, just before the first sweep
    first = t.observe(with_quorum(cluster({3: "fenced"}), 5, {3: killed_at}, 1_000_000_000))
    assert first.failed[3].first_seen_ms == 1_000_000_000 and first.bounced == []

    # same epoch, same last fetch (or the observer expired): it did not run; the countdown goes on
    clock.t += 200
    a = t.observe(with_quorum(cluster({3: "fenced"}), 5, {3: killed_at}, 1_000_200_000))
    assert a.failed[3].first_seen_ms == 1_000_000_000 and a.bounced == []
    clock.t += 200
    a = t.observe(with_quorum(cluster({3: "fenced"}), 5, {}, 1_000_400_000))
    assert a.failed[3].first_seen_ms == 1_000_000_000 and a.bounced == []

    # it came back between two sweeps and was killed again: a newer fetch
    clock.t += 200
    a = t.observe(with_quorum(cluster({3: "fenced"}), 5, {3: 1_000_500_000}, 1_000_600_000))
    assert a.bounced == [3] and a.failed[3].first_seen_ms == 1_000_600_000 and a.due == []
    record = next(r for r in a.records if r.decision == "restart the countdown")
    assert "ran between two sweeps (a bounce)" in record.reason

    # controller leadership moved: any fetch the new leader reports came after the last sweep
    clock.t += 200
    a = t.observe(with_quorum(cluster({3: "fenced"}), 6, {3: 1_000_700_000}, 1_000_800_000))
    assert a.bounced == [3] and a.failed[3].first_seen_ms == 1_000_800_000
    # ... while a new leader that has not heard from it says nothing
    clock.t += 200
    a = t.observe(with_quorum(cluster({3: "fenced"}), 7, {}, 1_001_000_000))
    assert a.bounced == [] and a.failed[3].first_seen_ms == 1_000_800_000


def test_a_fenced_broker_whose_process_runs_is_not_counted_down_and_says_so(tmp_path):
    clock = Clock()
    t = tracker(tmp_path, clock)
    t.observe(with_quorum(cluster({3: "fenced"}), 5, {3: 999_999_500}, 1_000_000_000))
    clock.t += 400
    a = t.observe(with_quorum(cluster({3: "fenced"}), 5, {3: 1_000_399_800}, 1_000_400_000))
    assert a.bounced == [3] and a.due == []
    record = next(r for r in a.records if r.decision == "restart the countdown")
    assert "fenced but its process runs" in record.reason


def test_an_old_state_file_without_a_baseline_only_records_one(tmp_path):
    clock = Clock()
    store = FailureStore("kafka_default", tmp_path)
    from kafka_runbooks.failed_broker.failures import FailedBroker

    store.save({3: FailedBroker(broker_id=3, first_seen_ms=990_000_000)})
    a = tracker(tmp_path, clock).observe(
        with_quorum(cluster({3: "fenced"}), 5, {3: 999_000_000}, 1_000_000_000)
    )
    assert a.bounced == [] and a.failed[3].first_seen_ms == 990_000_000
    assert (a.failed[3].quorum_epoch, a.failed[3].seen_fetch_ms) == (5, 999_000_000)


# ------------------------------------------------------------------ the steps of observe, alone


def decide(tmp_path, entry, *, outage=False, now_s=1_000_000.0, **kw):
    """``_decide`` on one failed broker, from a fresh assessment."""
    from kafka_runbooks.failed_broker.failures import Assessment

    a = Assessment(now_ms=int(now_s * 1000), brokers=6, failed={entry.broker_id: entry}, outage=outage)
    tracker(tmp_path, Clock(now_s), **kw)._decide(a, entry.broker_id, entry)
    return a


@pytest.mark.parametrize(
    ("failed_for_s", "kw", "outage", "alerts", "due", "decision"),
    [
        (30, {}, False, [], [], "wait"),
        (120, {}, False, [3], [], "wait"),  # alert after 60 s, reassign after 300 s
        (400, {}, False, [3], [3], "alert"),
        (400, {}, True, [3], [], "alert"),  # an outage holds every reassignment back
        (400, {"retrigger_after_s": None}, False, [3], [3], "alert"),
    ],
)
def test_decide_one_failed_broker(tmp_path, failed_for_s, kw, outage, alerts, due, decision):
    from kafka_runbooks.failed_broker.failures import FailedBroker

    entry = FailedBroker(broker_id=3, first_seen_ms=int((1_000_000.0 - failed_for_s) * 1000))
    a = decide(tmp_path, entry, outage=outage, **kw)
    assert (a.alerts, a.due) == (alerts, due)
    assert a.records[-1].decision == decision
    assert (entry.alerted_ms is not None) == bool(alerts)


def test_decide_holds_back_a_broker_given_a_run_within_retrigger_after(tmp_path):
    from kafka_runbooks.failed_broker.failures import FailedBroker

    entry = FailedBroker(
        broker_id=3, first_seen_ms=0, triggered_ms=1_000_000_000 - 10_000, triggered_run_id="r1"
    )
    a = decide(tmp_path, entry, retrigger_after_s=3600)
    assert a.due == [] and a.records[-1].decision == "do not start another reassignment"
    assert "run r1" in a.records[-1].reason


def test_decide_with_automation_off_only_alerts(tmp_path):
    from kafka_runbooks.failed_broker.failures import FailedBroker, Thresholds

    entry = FailedBroker(broker_id=3, first_seen_ms=0)
    t = FailureTracker(FailureStore("kafka_default", tmp_path), Thresholds(60, -1), clock=Clock())
    from kafka_runbooks.failed_broker.failures import Assessment

    a = Assessment(now_ms=1_000_000_000, brokers=6, failed={3: entry})
    t._decide(a, 3, entry)
    assert a.alerts == [3] and a.due == [] and a.records[-1].decision == "do not reassign"


def test_check_outage_counts_failed_against_all_brokers(tmp_path):
    from kafka_runbooks.failed_broker.failures import Assessment

    t = tracker(tmp_path, Clock())
    a = Assessment(now_ms=0, brokers=6, failed={})
    t._check_outage(a, [1, 2])
    assert not a.outage and a.records == []
    t._check_outage(a, [1, 2, 3])
    assert a.outage and a.records[-1].decision == "refuse to move replicas"


def test_a_heal_an_operator_stopped_is_not_started_again_for_the_same_failure(tmp_path):
    """The rule the log-dir sweep shares (SweepTracker): a stopped run's failure waits for a human."""
    clock = Clock()
    th = Thresholds(alert_after_s=60, failure_threshold_s=300)
    stopped = {"sweep__2": "stopped by alice: maintenance"}
    t = FailureTracker(FailureStore("kafka_default", tmp_path), th, clock=clock, stopped_runs=stopped.get)
    t.observe(cluster({2: "gone"}))
    clock.t += 300
    assert t.observe(cluster({2: "gone"})).due == [2]
    t.mark_triggered([2], "sweep__2")
    clock.t += 10_000
    a = t.observe(cluster({2: "gone"}))
    assert a.due == [] and "was stopped by alice: maintenance" in a.records[-1].reason


def test_the_fetch_seen_is_kept_under_its_old_name_in_the_state_file(tmp_path):
    """State files written before the evidence room keep working: ``last_fetch_ms`` on disk."""
    store = FailureStore("c", tmp_path)
    store.path.write_text(
        '{"version": 1, "brokers": {"3": {"broker_id": 3, "first_seen_ms": 5, "quorum_epoch": 7, "last_fetch_ms": 99}}}'
    )
    entry = store.load()[3]
    assert (entry.quorum_epoch, entry.seen_fetch_ms) == (7, 99)
    store.save({3: entry})
    assert '"last_fetch_ms": 99' in store.path.read_text() and "seen_fetch_ms" not in store.path.read_text()
