"""kafka_log_dir_failure's own rules (issue #28): which replicas move (exactly those of the failed
dirs, never a healthy dir's), every refusal before the gate, the end state of a move and of a
disk replacement. DescribeLogDirs answers go through kafka-python's real encode and decode."""

from __future__ import annotations

import pytest

from kafka_runbooks.failed_broker.request import RequestError
from kafka_runbooks.log_dir_failure import (
    MOVE,
    VERIFY_REPLACED,
    await_holding,
    build_log_dir_request,
    failed_dir_replicas,
    moved_off,
    replaced,
)
from kafka_runbooks.log_dirs import KAFKA_STORAGE_ERROR, parse_describe_log_dirs
from kafka_runbooks.model import Broker, ClusterState, PartitionState
from tests.unit.kafka_runbooks.test_log_dirs import answer

GOOD, BAD = "/data/1", "/data/2"


def part(topic: str, p: int, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None) -> PartitionState:
    return PartitionState(topic, p, replicas[0], 3, replicas, replicas if isr is None else isr)


def cluster(dirs: dict | None, brokers=None, partitions=None) -> ClusterState:
    """Broker 1 holds t-0 and t-1 in its healthy dir, t-2 and u-0 sat in its failed one."""
    state = ClusterState(
        cluster_id="c",
        brokers=brokers or {b: Broker(b) for b in (1, 2, 3)},
        quorum=None,
        partitions=partitions
        or [
            part("t", 0, (1, 2)),
            part("t", 1, (2, 1)),
            part("t", 2, (1, 3), (3,)),
            part("u", 0, (3, 1), (3,)),
        ]
        + [part("v", 0, (2, 3))],
    )
    if dirs is not None:
        state.log_dir_states = {1: parse_describe_log_dirs(1, answer(dirs))}
    return state


FAILED = {GOOD: (0, {"t": [0, 1]}), BAD: (KAFKA_STORAGE_ERROR, {})}


def test_exactly_the_failed_dirs_replicas_are_selected_never_a_healthy_dirs():
    found = failed_dir_replicas(cluster(FAILED), 1, None)
    assert found.replicas == [("t", 2), ("u", 0)]
    assert found.in_healthy_dirs == [("t", 0), ("t", 1)]
    assert found.offline_dirs == {BAD: "KAFKA_STORAGE_ERROR"} and found.chosen_dirs == [BAD]
    assert found.selection_csv == "t:2@1,u:0@1"
    assert not found.nothing_to_do
    # naming the dir gives the same selection
    assert failed_dir_replicas(cluster(FAILED), 1, BAD).replicas == found.replicas


def test_a_broker_without_an_offline_dir_has_nothing_to_do():
    found = failed_dir_replicas(cluster({GOOD: (0, {"t": [0, 1, 2], "u": [0]}), BAD: (0, {})}), 1, None)
    assert found.nothing_to_do and found.replicas == [] and found.chosen_dirs == []


@pytest.mark.parametrize(
    "brokers, why",
    [
        ({2: Broker(2), 3: Broker(3)}, "not registered"),
        ({1: Broker(1, fenced=True), 2: Broker(2), 3: Broker(3)}, "not live"),
    ],
)
def test_a_broker_that_is_not_live_is_the_failed_broker_runbooks_case(brokers, why):
    with pytest.raises(RequestError, match=f"{why}.*kafka_failed_broker_reassignment"):
        failed_dir_replicas(cluster(FAILED, brokers=brokers), 1, None)


def test_unknown_log_dirs_are_refused_not_taken_for_healthy():
    state = cluster(None)
    state.log_dir_errors = {1: "timed out"}
    with pytest.raises(RequestError, match="unknown .timed out."):
        failed_dir_replicas(state, 1, None)


def test_a_named_dir_that_is_not_offline_is_refused():
    with pytest.raises(RequestError, match="'/data/1' of broker 1 is not offline"):
        failed_dir_replicas(cluster(FAILED), 1, GOOD)


def test_one_named_dir_among_several_offline_is_refused():
    both = {GOOD: (KAFKA_STORAGE_ERROR, {}), BAD: (KAFKA_STORAGE_ERROR, {})}
    with pytest.raises(RequestError, match="cannot be told apart"):
        failed_dir_replicas(cluster(both), 1, BAD)
    assert len(failed_dir_replicas(cluster(both), 1, None).replicas) == 4  # all of them, together


@pytest.mark.parametrize(
    "params, message",
    [
        ({}, "broker_id must be"),
        ({"broker_id": "x"}, "broker_id must be a broker id"),
        ({"broker_id": 1, "mode": "heal"}, "mode must be one of"),
        ({"broker_id": 1, "max_disk_usage_percent": 0}, "max_disk_usage_percent"),
        ({"broker_id": 1, "log_dir": 3}, "log_dir must be"),
    ],
)
def test_bad_params_are_refused_before_any_cluster_call(params, message):
    with pytest.raises(RequestError, match=message):
        build_log_dir_request(params)


def test_the_request_is_a_drain_of_one_live_broker_with_the_disk_ceiling():
    request = build_log_dir_request({"broker_id": "1", "log_dir": " /data/2 ", "max_disk_usage_percent": 70})
    assert (request.broker_id, request.log_dir, request.mode) == (1, BAD, MOVE)
    assert request.reassign.failed_brokers == (1,) and request.reassign.drain
    assert request.reassign.max_disk_usage_percent == 70
    assert build_log_dir_request({"broker_id": 1, "mode": VERIFY_REPLACED}).mode == VERIFY_REPLACED


def test_moved_means_off_the_broker_in_sync_and_the_healthy_dirs_untouched():
    moved, kept = [("t", 2), ("u", 0)], [("t", 0), ("t", 1)]
    before = cluster(FAILED)
    assert moved_off(before, 1, moved, kept).still_on_broker == ["t-2", "u-0"]
    after = cluster(
        None,
        partitions=[part("t", 0, (1, 2)), part("t", 1, (2, 1)), part("t", 2, (2, 3)), part("u", 0, (3, 2))],
    )
    assert moved_off(after, 1, moved, kept).done
    touched = cluster(
        None,
        partitions=[
            part("t", 0, (3, 2)),
            part("t", 1, (2, 1)),
            part("t", 2, (2, 3)),
            part("u", 0, (3, 2), (3,)),
        ],
    )
    seen = moved_off(touched, 1, moved, kept)
    assert seen.healthy_moved == ["t-0"] and seen.isr_short == ["u-0"] and not seen.done


def test_replaced_means_every_replica_back_in_a_healthy_dir_and_in_sync():
    assert not replaced(cluster(FAILED), 1).done  # still offline, two replicas in no dir, out of the ISR
    seen = replaced(cluster(FAILED), 1)
    assert (
        seen.offline_dirs == [BAD]
        and seen.not_in_a_dir == ["t-2", "u-0"]
        and seen.not_in_isr == ["t-2", "u-0"]
    )
    back = cluster(
        {GOOD: (0, {"t": [0, 1]}), BAD: (0, {"t": [2], "u": [0]})},
        partitions=[part("t", 0, (1, 2)), part("t", 1, (2, 1)), part("t", 2, (1, 3)), part("u", 0, (3, 1))],
    )
    assert replaced(back, 1).done
    unknown = cluster(None)
    unknown.log_dir_errors = {1: "no answer"}
    assert not replaced(unknown, 1).done and replaced(unknown, 1).unknown == "no answer"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Seen:
    def __init__(self, done: bool) -> None:
        self.done = done


def test_the_end_state_must_hold_for_the_settle_period():
    clock = Clock()
    reads = iter([True, False, True, True, True, True])
    seen = await_holding(
        lambda: next(reads), Seen, timeout_s=100, settle_s=10, poll_s=5, clock=clock, sleep=clock.sleep
    )
    assert seen.done and clock.now == 20  # the good read at 0 did not count: held from 10 to 20
    clock = Clock()
    seen = await_holding(
        lambda: False, Seen, timeout_s=12, settle_s=5, poll_s=5, clock=clock, sleep=clock.sleep
    )
    assert not seen.done and clock.now == 15


# -- issue #37, 1: a future log in a healthy dir is not the replica; the controller's word wins ----


def moving(offline: tuple[int, ...] = (1,), extra=None) -> ClusterState:
    """Broker 1 was moving t-2 from its failed dir to its healthy one (AlterReplicaLogDirs) when the
    failed dir went: only the future log of t-2 is listed, in the healthy dir; the controller names
    broker 1 offline for t-2 (``offline``). t-0 and t-1 have their current logs in the healthy dir."""
    partitions = [
        part("t", 0, (1, 2)),
        part("t", 1, (2, 1)),
        PartitionState("t", 2, 3, 3, (1, 3), (3,), offline_replicas=offline),
        part("v", 0, (2, 3)),
        *(extra or []),
    ]
    state = cluster(None, partitions=partitions)
    dirs = {GOOD: (0, {"t": [0, 1, 2]}), BAD: (KAFKA_STORAGE_ERROR, {})}
    state.log_dir_states = {1: parse_describe_log_dirs(1, answer(dirs, future=frozenset({(GOOD, "t", 2)})))}
    return state


def test_a_replica_whose_future_log_sits_in_a_healthy_dir_is_moved_not_nothing_to_do():
    from kafka_runbooks_airflow.log_dir_failure import _nothing_to_move

    found = failed_dir_replicas(moving(), 1, None)
    assert found.replicas == [("t", 2)] and found.selection_csv == "t:2@1"
    assert found.in_healthy_dirs == [("t", 0), ("t", 1)]
    assert found.observed()["replicas_in_failed_dirs"] == ["t-2"]
    assert _nothing_to_move(1, found) is None  # the run goes on to its plan
    # without the controller's word the rule is the same: no online dir holds its current log
    assert failed_dir_replicas(moving(offline=()), 1, None).replicas == [("t", 2)]


def test_where_the_dirs_and_the_controller_disagree_the_replica_is_offline_and_both_are_recorded():
    # t-1's current log is listed in the healthy dir, yet the controller names broker 1 offline for it
    state = moving()
    state.partitions[1] = PartitionState("t", 1, 2, 3, (2, 1), (2,), offline_replicas=(1,))
    found = failed_dir_replicas(state, 1, None)
    assert found.replicas == [("t", 1), ("t", 2)] and found.in_healthy_dirs == [("t", 0)]
    said = found.observed()["disagreements"]["t-1"]
    assert said == {
        "describe_log_dirs": f"its current log is in online dir {GOOD}",
        "offline_replicas": "names this broker offline",
    }
    assert found.observed()["offline_replicas_named_by_controller"] == ["t-1", "t-2"]


def test_replicas_the_controller_names_offline_without_an_offline_dir_are_not_nothing_to_do():
    state = cluster({GOOD: (0, {"t": [0, 1, 2], "u": [0]}), BAD: (0, {})})
    state.partitions[2] = PartitionState("t", 2, 3, 3, (1, 3), (3,), offline_replicas=(1,))
    found = failed_dir_replicas(state, 1, None)
    assert not found.nothing_to_do and found.replicas == [("t", 2)] and found.chosen_dirs == []
    assert found.observed()["disagreements"]["t-2"]["offline_replicas"] == "names this broker offline"


def test_replaced_is_not_done_while_only_a_future_log_is_back_or_the_controller_names_the_broker():
    future = replaced(moving(offline=()), 1)
    assert "t-2" in future.not_in_a_dir and not future.done
    back = cluster({GOOD: (0, {"t": [0, 1]}), BAD: (0, {"t": [2], "u": [0]})})
    back.partitions = [
        part("t", 0, (1, 2)),
        part("t", 1, (2, 1)),
        PartitionState("t", 2, 1, 3, (1, 3), (1, 3), offline_replicas=(1,)),
        part("u", 0, (3, 1)),
    ]
    seen = replaced(back, 1)
    assert seen.not_in_a_dir == ["t-2"] and not seen.done
