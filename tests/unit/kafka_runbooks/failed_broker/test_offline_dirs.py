"""Offline log dirs of live brokers in the sweep (issue #28): countdown persisted per (broker, dir),
alert, due after the threshold, unknown never healthy and never a trigger, forgotten when online
again or when the broker is down (the heal's case), and the start rules: alert-only by default,
the dead broker's heal first, one reassignment per cluster at a time."""

from __future__ import annotations

import pytest

from kafka_runbooks.failed_broker.failures import Thresholds
from kafka_runbooks.failed_broker.offline_dirs import (
    OfflineDirStore,
    OfflineDirTracker,
    choose_log_dir_start,
)
from kafka_runbooks.log_dirs import KAFKA_STORAGE_ERROR
from kafka_runbooks.model import Broker, ClusterState, LogDir, LogDirReplica, PartitionState

D1, D2, D3 = "/k/data", "/k/data-2", "/k/data-3"


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def cluster(
    offline: dict[int, tuple[str, ...]] | None = None,
    unknown: dict[int, str] | None = None,
    down: tuple[int, ...] = (),
) -> ClusterState:
    """Brokers 1-3 with dirs D1, D2, D3; partitions t-0..t-5 on all three brokers, t-i in dir
    i % 3 of each. ``offline``: broker -> failed dirs (they answer KAFKA_STORAGE_ERROR and list
    nothing); ``unknown``: broker -> why it did not answer; ``down``: fenced brokers (registered, so
    asked; their answer failed)."""
    offline, unknown = offline or {}, unknown or {}
    parts = [
        PartitionState("t", i, leader=i % 3 + 1, leader_epoch=1, replicas=r, isr=r)
        for i, r in enumerate((i % 3 + 1, (i + 1) % 3 + 1, (i + 2) % 3 + 1) for i in range(6))
    ]
    brokers = {b: Broker(broker_id=b, alive=True, fenced=b in down) for b in (1, 2, 3)}
    states, errors = {}, dict(unknown)
    for b in (1, 2, 3):
        if b in unknown or b in down:
            errors.setdefault(b, "fenced: not asked")
            continue
        dirs = []
        for n, path in enumerate((D1, D2, D3)):
            if path in offline.get(b, ()):
                dirs.append(LogDir(b, path, KAFKA_STORAGE_ERROR))
                continue
            mine = [p for p in parts if b in p.replicas and p.partition % 3 == n]
            dirs.append(LogDir(b, path, 0, tuple(LogDirReplica(b, "t", p.partition, 10, path) for p in mine)))
        states[b] = tuple(dirs)
    return ClusterState(
        cluster_id="c",
        brokers=brokers,
        quorum=None,
        partitions=parts,
        log_dir_states=states,
        log_dir_errors=errors,
    )


def tracker(tmp_path, clock, threshold_s: float = 300) -> OfflineDirTracker:
    th = Thresholds(alert_after_s=60, failure_threshold_s=threshold_s)
    return OfflineDirTracker(OfflineDirStore("kafka_default", tmp_path), th, clock=clock)


def decisions_of(a) -> list[str]:
    return [r.decision for r in a.records]


def test_an_offline_dir_is_counted_down_alerted_then_due_and_survives_a_new_tracker(tmp_path):
    clock = Clock()
    a = tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    assert list(a.offline) == [f"1:{D2}"] and a.due == [] and a.alerts == []
    # broker 1's replicas in D2 (t-1 and t-4 lay there): what no healthy dir of it lists
    assert a.replicas == {1: ["t-1", "t-4"]}
    assert decisions_of(a) == ["start the countdown", "wait"]
    clock.t += 61
    a = tracker(tmp_path, clock).observe(cluster({1: (D2,)}))  # a new tracker reads the file
    assert a.alerts == [f"1:{D2}"] and a.due == []
    assert a.offline[f"1:{D2}"].first_seen_ms == 1_000_000_000
    assert decisions_of(a) == ["alert", "wait"]
    clock.t += 240
    a = tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    assert a.due == [1]


def test_a_dir_online_again_is_forgotten_and_a_new_failure_counts_from_then(tmp_path):
    clock = Clock()
    tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    clock.t += 400
    a = tracker(tmp_path, clock).observe(cluster())
    assert a.recovered == [f"1:{D2}"] and a.offline == {} and a.due == []
    assert decisions_of(a) == ["forget the offline log dir"]
    clock.t += 10
    a = tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    assert a.offline[f"1:{D2}"].first_seen_ms == int(clock.t * 1000) and a.due == []


def test_an_unknown_answer_is_never_healthy_and_never_a_trigger(tmp_path):
    clock = Clock()
    tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    clock.t += 400
    a = tracker(tmp_path, clock).observe(cluster(unknown={1: "KafkaTimeoutError: timed out"}))
    assert a.due == [] and a.recovered == []  # not due, and not forgotten either
    assert a.unknown == {1: "KafkaTimeoutError: timed out"}
    assert list(a.kept_unknown) == [f"1:{D2}"]
    assert decisions_of(a) == ["log dirs unknown"]
    assert a.records[0].subject == "broker 1"
    # the first-seen time was kept: when the broker answers again the dir is due at once
    a = tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    assert a.offline[f"1:{D2}"].first_seen_ms == 1_000_000_000 and a.due == [1]


def test_an_unknown_broker_without_history_starts_nothing_and_is_named(tmp_path):
    a = tracker(tmp_path, Clock(), threshold_s=0).observe(cluster(unknown={2: "NodeNotReadyError"}))
    assert a.offline == {} and a.due == [] and a.unknown == {2: "NodeNotReadyError"}
    assert choose_log_dir_start(a, [], lambda: [], enabled=True) is None


def test_a_broker_that_went_down_is_the_heals_case_its_dirs_are_forgotten(tmp_path):
    clock = Clock()
    tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    clock.t += 400
    a = tracker(tmp_path, clock).observe(cluster(down=(1,)))
    assert a.recovered == [f"1:{D2}"] and a.due == [] and a.unknown == {}
    assert "failed-broker heal's case" in a.records[0].reason
    assert OfflineDirStore("kafka_default", tmp_path).load() == {}


def test_several_offline_dirs_wait_for_the_youngest_and_the_run_names_no_single_dir(tmp_path):
    clock = Clock()
    tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    clock.t += 400
    a = tracker(tmp_path, clock).observe(cluster({1: (D2, D3)}))
    assert a.due == [] and "wait" in decisions_of(a)
    clock.t += 300
    a = tracker(tmp_path, clock).observe(cluster({1: (D2, D3)}))
    assert a.due == [1]
    start = choose_log_dir_start(a, [], lambda: [], enabled=True)
    assert start.offline_dirs == [D2, D3] and start.log_dir is None  # the runbook refuses one of several
    assert start.replicas == ["t-1", "t-2", "t-4", "t-5"]


def test_the_start_is_alert_only_by_default_and_the_conf_is_the_runbooks(tmp_path):
    clock = Clock()
    tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    clock.t += 400
    a = tracker(tmp_path, clock).observe(cluster({1: (D2,)}))

    def active():
        raise AssertionError("the runs were read although nothing may start")

    assert choose_log_dir_start(a, [], active, enabled=False) is None
    assert a.records[-1].decision == "alert only" and "broker_id 1 by hand" in a.records[-1].reason
    start = choose_log_dir_start(a, [], lambda: [], enabled=True)
    passed_on = {"max_partitions_per_chunk": 10, "require_approval": True}
    assert start.conf("kafka_a", passed_on) == {
        "broker_id": 1,
        "log_dir": D2,
        "mode": "move",
        "receivers": "all",
        "max_partitions_per_chunk": 10,
        "require_approval": True,
        "dry_run": False,
        "kafka_config_id": "kafka_a",
    }
    record = start.record("sweep__kafka_a__x", start.conf("kafka_a", passed_on), 300)
    assert record.decision == "start kafka_log_dir_failure" and "run sweep__kafka_a__x" in record.action


def test_a_dead_broker_goes_first_and_a_running_reassignment_holds_it_back(tmp_path):
    clock = Clock()
    tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    clock.t += 400
    a = tracker(tmp_path, clock).observe(cluster({1: (D2,)}))
    assert choose_log_dir_start(a, [3], lambda: [], enabled=True) is None
    assert a.records[-1].decision == "the dead broker's heal goes first"
    assert "broker(s) [3] are failed" in a.records[-1].reason
    assert choose_log_dir_start(a, [], lambda: ["kafka_broker_decommission/manual__d"], enabled=True) is None
    assert a.records[-1].decision == "do not start kafka_log_dir_failure"
    assert "one reassignment per cluster at a time" in a.records[-1].reason


def test_one_broker_per_cluster_at_a_time_and_no_second_run_within_retrigger(tmp_path):
    clock = Clock()
    t = tracker(tmp_path, clock)
    t.observe(cluster({1: (D2,), 2: (D3,)}))
    clock.t += 400
    a = t.observe(cluster({1: (D2,), 2: (D3,)}))
    assert a.due == [1, 2]
    start = choose_log_dir_start(a, [], lambda: [], enabled=True)
    assert (
        start.broker_id == 1 and a.records[-1].decision == "wait" and a.records[-1].subject == "brokers [2]"
    )
    t.mark_triggered(1, "sweep__kafka_default__r1")
    clock.t += 60
    a = t.observe(cluster({1: (D2,), 2: (D3,)}))
    assert a.due == [2]
    assert "do not start another kafka_log_dir_failure" in decisions_of(a)
    assert (
        OfflineDirStore("kafka_default", tmp_path).load()[f"1:{D2}"].triggered_run_id
        == "sweep__kafka_default__r1"
    )


def test_an_offline_dir_that_held_no_replica_alerts_and_moves_nothing(tmp_path):
    clock = Clock()
    state = cluster({3: (D1,)})
    state.partitions = [p for p in state.partitions if not (3 in p.replicas and p.partition % 3 == 0)]
    t = tracker(tmp_path, clock)
    t.observe(state)
    clock.t += 400
    a = t.observe(state)
    assert a.due == [] and a.alerts == [f"3:{D1}"] and "nothing to move" in decisions_of(a)


def test_automation_off_alerts_and_never_makes_a_broker_due(tmp_path):
    clock = Clock()
    th = Thresholds(alert_after_s=0, failure_threshold_s=-1)
    t = OfflineDirTracker(OfflineDirStore("kafka_default", tmp_path), th, clock=clock)
    t.observe(cluster({1: (D2,)}))
    clock.t += 10_000
    a = t.observe(cluster({1: (D2,)}))
    assert a.alerts == [f"1:{D2}"] and a.due == [] and "do not move" in decisions_of(a)


@pytest.mark.parametrize("kind", ["unknown", "down"])
def test_neither_unknown_nor_down_is_ever_a_trigger_even_at_threshold_zero(tmp_path, kind):
    clock = Clock()
    t = tracker(tmp_path, clock, threshold_s=0)
    state = cluster(unknown={1: "timed out"}) if kind == "unknown" else cluster(down=(1,))
    assert t.observe(state).due == []


def _run_state(folder, run_id: str, stopped: str | None, by_operator: bool):
    """A log-dir run's exec-state.json as the run left it: stopped by an operator's request, by the
    executor itself (a failed broker came back), or not at all."""
    from kafka_runbooks.failed_broker.execute import ExecState, save_state

    state = ExecState(run_id=run_id, failed_brokers=[1], throttle_bytes_per_sec=1, chunks=[], stopped=stopped)
    state.stop_request = {"request_id": "stop-1", "by": "alice"} if by_operator else None
    (folder / run_id).mkdir(parents=True)
    save_state(folder / run_id / "exec-state.json", state)


def test_a_run_an_operator_stopped_is_not_started_again_for_the_same_failure(tmp_path):
    """The sweep re-triggered kafka_log_dir_failure after retrigger_after even when its last run was
    stopped on purpose: the stop must stand for that failure, and the record says why."""
    from kafka_runbooks.failed_broker.stop import stopped_on_purpose

    runs = tmp_path / "runs"
    clock = Clock()
    th = Thresholds(alert_after_s=60, failure_threshold_s=300, retrigger_after_s=600)

    def t():
        store = OfflineDirStore("kafka_default", tmp_path)
        return OfflineDirTracker(
            store, th, clock=clock, stopped_runs=lambda r: stopped_on_purpose([runs / r / "exec-state.json"])
        )

    t().observe(cluster({1: (D2,)}))
    clock.t += 400
    assert t().observe(cluster({1: (D2,)})).due == [1]
    t().mark_triggered(1, "sweep__r1")
    _run_state(runs, "sweep__r1", "stopped by alice: wrong disk", by_operator=True)
    clock.t += 10_000  # long past retrigger_after: still not started again
    a = t().observe(cluster({1: (D2,)}))
    assert a.due == [] and a.records[-1].decision == "do not start another kafka_log_dir_failure"
    assert (
        "run sweep__r1, started for this same failure, was stopped by alice: wrong disk"
        in a.records[-1].reason
    )
    # the dir back online, then offline again: a new failure, counted and started afresh
    t().observe(cluster())
    t().observe(cluster({1: (D2,)}))
    clock.t += 400
    assert t().observe(cluster({1: (D2,)})).due == [1]


def test_only_an_operators_stop_holds_the_sweep_back(tmp_path):
    """A run stopped by the executor itself (a failed broker came back) or never stopped is started
    again after retrigger_after as before; a state that cannot be read is not taken for "not
    stopped"."""
    from kafka_runbooks.failed_broker.stop import stopped_on_purpose

    _run_state(tmp_path, "by-executor", "failed broker(s) [1] came back before chunk 2", by_operator=False)
    _run_state(tmp_path, "by-alice", "stopped by alice: why", by_operator=True)
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "exec-state.json").write_text("{not json")
    assert stopped_on_purpose([tmp_path / "by-executor" / "exec-state.json"]) is None
    assert stopped_on_purpose([tmp_path / "never-ran" / "exec-state.json"]) is None
    assert stopped_on_purpose([tmp_path / "by-alice" / "exec-state.json"]) == "stopped by alice: why"
    assert "unknown" in stopped_on_purpose([tmp_path / "garbled" / "exec-state.json"])


def test_a_replica_moving_into_a_healthy_dir_when_its_dir_failed_is_due_not_nothing_to_move(tmp_path):
    """Broker 3's t-0 sat in D1 and was being moved into D2 (AlterReplicaLogDirs) when D1 failed: D2
    lists only its future log, and the controller names broker 3 offline for t-0 (issue #37, 1)."""
    clock = Clock()
    state = cluster({3: (D1,)})
    d2 = next(d for d in state.log_dir_states[3] if d.path == D2)
    future = LogDirReplica(3, "t", 0, 10, D2, is_future=True)
    state.log_dir_states[3] = tuple(
        LogDir(3, d.path, d.error_code, d.replicas + (future,)) if d is d2 else d
        for d in state.log_dir_states[3]
    )
    state.partitions = [p for p in state.partitions if not (3 in p.replicas and p.partition % 3 == 0)] + [
        PartitionState(
            "t", 0, leader=1, leader_epoch=1, replicas=(1, 2, 3), isr=(1, 2), offline_replicas=(3,)
        )
    ]
    t = tracker(tmp_path, clock)
    t.observe(state)
    clock.t += 400
    a = t.observe(state)
    assert a.replicas[3] == ["t-0"] and a.due == [3]
    assert "nothing to move" not in decisions_of(a)


def test_replicas_the_controller_names_offline_without_an_offline_dir_are_a_warning(tmp_path):
    state = cluster()
    state.partitions[0] = PartitionState("t", 0, 1, 1, (1, 2, 3), (1, 2), offline_replicas=(3,))
    a = tracker(tmp_path, Clock()).observe(state)
    [record] = [r for r in a.records if r.decision == "offline replicas without an offline dir"]
    assert record.subject == "broker 3" and record.observed["partitions"] == ["t-0"]
    assert (
        record.observed["disagreements"]["t-0"]["describe_log_dirs"]
        == f"its current log is in online dir {D1}"
    )
    assert a.offline == {} and a.due == []  # no failed dir to count down: nothing starts on its own
