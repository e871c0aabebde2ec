"""The planned decommission's request: which live brokers, what the rest can hold, the disk
ceiling from DescribeLogDirs numbers, and the drained rule of the verification."""

from __future__ import annotations

import pytest

from kafka_runbooks.failed_broker import runbook
from kafka_runbooks.failed_broker.decommission import (
    build_decommission_request,
    receiver_disk_use,
    refuse_over_ceiling,
    resolve_drain,
)
from kafka_runbooks.failed_broker.request import RequestError
from kafka_runbooks.log_dirs import parse_describe_log_dirs
from kafka_runbooks.model import Broker, ClusterState, PartitionState, Quorum, QuorumMember

RACK = {1: "a", 2: "b", 3: "a", 4: "b", 5: "c"}


def state(parts=None, brokers=(1, 2, 3, 4), fenced=()) -> ClusterState:
    """Brokers 1-4 in racks a, b, a, b; controller 9001; partitions (replicas) given, leader first."""
    parts = parts or [(1, 4), (2, 3), (4, 1, 2)]
    return ClusterState(
        cluster_id="c",
        brokers={b: Broker(broker_id=b, rack=RACK[b], fenced=b in fenced) for b in brokers},
        quorum=Quorum(9001, 1, 0, voters=(QuorumMember(9001, 0, None, None),), observers=()),
        partitions=[PartitionState("t", i, r[0], 1, tuple(r), tuple(r)) for i, r in enumerate(parts)],
    )


def drain(params: dict, cluster: ClusterState | None = None):
    return resolve_drain(build_decommission_request(params), cluster or state())


def test_named_live_brokers_are_drained_to_every_other_live_broker():
    assert drain({"broker_ids": "4"}) == ([4], [1, 2, 3])
    assert drain({"broker_ids": [4], "receivers": "2,3"}) == ([4], [2, 3])
    request = build_decommission_request({"broker_ids": "3,4", "max_disk_usage_percent": 70})
    assert request.drain and request.failed_brokers == (3, 4) and request.max_disk_usage_percent == 70
    assert build_decommission_request({"broker_ids": "4"}).max_disk_usage_percent == 85


def test_a_rack_drains_every_registered_broker_of_it():
    cluster = state(parts=[(1, 4), (3, 4)], brokers=(1, 2, 3, 4, 5))
    assert drain({"rack": "a"}, cluster) == ([1, 3], [2, 4, 5])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "name the brokers to drain"),
        ({"broker_ids": "4", "rack": "a"}, "not both"),
        ({"broker_ids": "four"}, "broker ids separated by commas"),
        ({"broker_ids": "4", "max_disk_usage_percent": 0}, "above 0 and at most 100"),
        ({"broker_ids": "4", "max_disk_usage_percent": 101}, "above 0 and at most 100"),
        ({"broker_ids": "4", "throttle_bytes_per_sec": 0}, "would stop replication"),
    ],
)
def test_bad_params_are_refused_before_any_cluster_call(params, message):
    with pytest.raises(RequestError, match=message):
        build_decommission_request(params)


@pytest.mark.parametrize(
    ("params", "cluster", "message"),
    [
        ({"broker_ids": "99"}, None, r"\[99\] to drain are not registered"),
        ({"broker_ids": "4"}, state(fenced=(4,)), r"\[4\] to drain are not live"),
        ({"broker_ids": "9001"}, None, "KRaft controllers"),
        ({"rack": "z"}, None, "no registered broker is in rack 'z'"),
        ({"broker_ids": "4", "receivers": "4,1"}, None, "among the brokers to drain"),
        ({"broker_ids": "4", "receivers": "1,99"}, None, "not live registered"),
    ],
)
def test_brokers_that_cannot_be_drained_are_refused(params, cluster, message):
    with pytest.raises(RequestError, match=message):
        drain(params, cluster)


def test_a_replication_factor_above_the_brokers_left_is_refused():
    """RF 3 on brokers 2, 3, 4 of four: draining 3 and 4 leaves 1 and 2, two brokers for three replicas."""
    with pytest.raises(
        RequestError, match=r"replication factor above the brokers left.*t-0: replication factor 3"
    ):
        drain({"broker_ids": "3,4"}, state(parts=[(2, 3, 4)]))


def test_a_rack_spread_that_cannot_be_kept_is_refused():
    """t-0 on racks a and b; draining both rack-b brokers leaves rack a only."""
    with pytest.raises(
        RequestError, match=r"rack rule that cannot be kept.*t-0: its replicas \[1, 4\] span 2 racks"
    ):
        drain({"rack": "b"}, state(parts=[(1, 4)]))
    # the same drain with a rack-c broker to take the replica keeps the spread
    assert drain({"rack": "b"}, state(parts=[(1, 4)], brokers=(1, 2, 3, 4, 5))) == ([2, 4], [1, 3, 5])


def answer(total: int, usable: int, path: str = "/k/data") -> dict:
    """One log dir as kafka-python's DescribeLogDirs v4 result has it."""
    return {"error_code": 0, "log_dir": path, "topics": [], "total_bytes": total, "usable_bytes": usable}


def summary(gains: dict[int, int]) -> dict:
    return {
        "receivers": sorted(gains),
        "per_broker": {str(b): {"bytes_before": 1000, "bytes_after": 1000 + g} for b, g in gains.items()},
    }


def test_the_disk_ceiling_refuses_a_receiver_dir_the_plan_would_fill_past_it():
    """Broker 1: 80 of 100 GB used, gains 6 GB -> 86 % > 85 %; broker 2: 50 %, gains 6 GB -> 56 %."""
    gb = 10**9
    dirs = {
        1: parse_describe_log_dirs(1, [answer(100 * gb, 20 * gb)]),
        2: parse_describe_log_dirs(2, [answer(100 * gb, 50 * gb)]),
    }
    uses = receiver_disk_use(summary({1: 6 * gb, 2: 6 * gb}), dirs)
    with pytest.raises(RequestError, match=r"broker 1 log dir /k/data: .* -> 86\.0 %") as refused:
        refuse_over_ceiling(uses, 85)
    assert "broker 2" not in str(refused.value)
    refuse_over_ceiling(uses, 90)  # the same plan under a ceiling of 90 %
    # a receiver that gains nothing is not judged; one whose dir size is unknown (-1) is refused
    unknown = {1: parse_describe_log_dirs(1, [answer(-1, -1)])}
    refuse_over_ceiling(receiver_disk_use(summary({1: 0}), unknown), 85)
    with pytest.raises(RequestError, match="size unknown"):
        refuse_over_ceiling(receiver_disk_use(summary({1: 1}), unknown), 85)
    with pytest.raises(RequestError, match="size unknown"):  # a receiver that did not answer at all
        refuse_over_ceiling(receiver_disk_use(summary({3: 1}), dirs), 85)


def test_drained_means_no_replica_no_leadership_and_nothing_left_on_disk():
    """The heal's rule does not look at leaders or disks; the drained rule does, and unknown fails it."""
    cluster = state(parts=[(1, 2), (2, 3)])
    cluster.log_dir_states = {4: parse_describe_log_dirs(4, [answer(10, 5)])}
    assert runbook.healing(cluster, {4}, {}, {}, drain=True).healed
    led = state(parts=[(4, 2)])  # a replica and the leadership still on 4
    led.log_dir_states = {4: ()}
    seen = runbook.healing(led, {4}, {}, {}, drain=True)
    assert seen.naming_failed == ["t-0"] and seen.led_by_failed == ["t-0"]
    unanswered = state(parts=[(1, 2)])  # 4 did not answer DescribeLogDirs
    seen = runbook.healing(unanswered, {4}, {}, {}, drain=True)
    assert seen.on_disk == ["broker 4: log dirs unknown (not read)"] and not seen.healed
    assert runbook.healing(unanswered, {4}, {}, {}).healed  # the heal does not read a dead broker's disks
    with pytest.raises(runbook.NotHealed, match=r"not drained: .*led by drained brokers \['t-0'\]"):
        runbook.verify(led, {4}, {}, {}, drain=True)


def test_a_drain_beside_a_dead_broker_that_leaves_fewer_live_brokers_than_the_rf_is_refused():
    """Broker 3 already dead, broker 4 drained: brokers 1 and 2 are left for an RF 3 topic. Every
    partition still has enough brokers counting the dead one (the plan would keep it), so this was
    shown at the gate; now refused naming the topic and its RF, the live brokers left and the dead."""
    cluster = state(parts=[(1, 3, 4), (4, 3, 2), (1, 2)], fenced=(3,))
    with pytest.raises(RequestError) as refused:
        drain({"broker_ids": "4"}, cluster)
    message = str(refused.value)
    assert "draining [4] is refused: it leaves 2 live broker(s) [1, 2] (dead: [3])" in message
    assert "replication factor of 1 topic(s) it moves: t (RF 3)" in message
    # RF 2 is held by the two left
    assert drain({"broker_ids": "4"}, state(parts=[(1, 4), (4, 3)], fenced=(3,))) == ([4], [1, 2])
