"""kafka_rebalance's request, broker choice, disk room and read-back judgement (Airflow-free).

Every refusal happens before the gate with a reason that says what to do: remove-brokers names
the decommission's DAG, add-brokers needs live new brokers, a broker holding replicas that is down
stops the plan; unknown disk room
is no room; the read-back holds the cluster to the target, or to the plan's own figure when the
plan said the target is out of reach.
"""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks.failed_broker.request import RequestError
from kafka_runbooks.model import Broker, ClusterState, LogDir, PartitionState
from kafka_runbooks.rebalance import build_rebalance_request, judge_spread, resolve_rebalance, room

RACKS = {1: "a", 2: "b", 3: "a", 4: "b"}


def cluster(assignment: dict[int, list[int]], racks=RACKS, down=()) -> ClusterState:
    brokers = {b: Broker(b, rack=r, fenced=b in down) for b, r in racks.items()}
    partitions = [
        PartitionState("t", p, leader=r[0], leader_epoch=0, replicas=tuple(r), isr=tuple(r))
        for p, r in assignment.items()
    ]
    return ClusterState(cluster_id="c", brokers=brokers, quorum=None, partitions=partitions)


ON_THREE = {p: [[1, 2], [2, 3], [3, 1]][p % 3] for p in range(12)}


def test_remove_brokers_is_refused_naming_the_decommission():
    with pytest.raises(RequestError, match="run kafka_broker_decommission with broker_ids = 4"):
        build_rebalance_request({"mode": "remove-brokers", "new_brokers": "4"})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mode": "add-brokers"}, "needs new_brokers"),
        ({"mode": "full", "new_brokers": "4"}, "goes with mode add-brokers"),
        ({"mode": "shuffle"}, "mode must be one of"),
        ({"mode": "full", "max_replica_spread": "a lot"}, "max_replica_spread"),
        ({"mode": "full", "max_leader_spread": "-1"}, "max_leader_spread"),
        ({"mode": "add-brokers", "new_brokers": "4,4"}, "more than once"),
    ],
)
def test_bad_params_are_refused_before_any_cluster_call(params, message):
    with pytest.raises(RequestError, match=message):
        build_rebalance_request(params)


def test_a_request_carries_the_mode_the_new_brokers_and_the_targets():
    request = build_rebalance_request({"mode": "add-brokers", "new_brokers": "4", "max_replica_spread": "2"})
    assert (request.rebalance, request.new_brokers, request.max_replica_spread) == ("add-brokers", (4,), "2")
    assert request.max_leader_spread == "10%" and request.drain and request.max_disk_usage_percent == 85


def test_the_runs_request_is_read_once_with_the_replication_factor_modes_own():
    """The validate task builds one RebalanceRequest: the pipeline's request and, in mode
    replication-factor only, the mode's own (before, its glue read the params a second time)."""
    from kafka_runbooks.rebalance import build_rebalance_run

    rf = build_rebalance_run({"mode": "replication-factor", "replication_factor": 3, "topics": "a,b"})
    assert rf.reassign.rebalance == "replication-factor"
    assert (rf.replication_factor.replication_factor, rf.replication_factor.topics) == (3, ("a", "b"))
    add = build_rebalance_run({"mode": "add-brokers", "new_brokers": "4"})
    assert add.replication_factor is None and add.reassign.new_brokers == (4,)


def test_the_brokers_of_each_mode():
    add = build_rebalance_request({"mode": "add-brokers", "new_brokers": "4"})
    assert resolve_rebalance(add, cluster(ON_THREE)) == ([1, 2, 3], [4])
    full = build_rebalance_request({"mode": "full"})
    assert resolve_rebalance(full, cluster(ON_THREE)) == ([1, 2, 3, 4], [1, 2, 3, 4])


@pytest.mark.parametrize(
    ("new", "down", "message"),
    [
        ("99", (), r"new broker\(s\) \[99\] are not registered"),
        ("4", (4,), r"new broker\(s\) \[4\] are not live"),
        ("4", (2,), r"broker\(s\) \[2\] hold replicas but are not live"),
    ],
)
def test_unknown_dead_new_brokers_and_a_down_holder_are_refused(new, down, message):
    request = build_rebalance_request({"mode": "add-brokers", "new_brokers": new})
    with pytest.raises(RequestError, match=message):
        resolve_rebalance(request, cluster(ON_THREE, down=down))


def test_room_is_the_fullest_dirs_headroom_and_unknown_is_none():
    gib = 1 << 30
    dirs = {
        4: (LogDir(4, "/d1", 0, total_bytes=100 * gib, usable_bytes=60 * gib),  # 40 used: 45 to 85 %
            LogDir(4, "/d2", 0, total_bytes=100 * gib, usable_bytes=20 * gib)),  # 80 used: 5 to 85 %
        5: (LogDir(5, "/d1", 0, total_bytes=None, usable_bytes=None),),
        6: (LogDir(6, "/d1", 0, total_bytes=100 * gib, usable_bytes=5 * gib),),  # past the ceiling already
    }  # fmt: skip
    assert room(dirs, [4, 5, 6, 7], 85.0) == {4: 5 * gib, 6: 0}


def _summary(reached: bool, after: int) -> dict:
    return {
        "reached": reached,
        "why_not": None if reached else "rack rule",
        "spread": {
            "replicas": {"target": "1", "limit": 1, "after": after},
            "leaders": {"target": "1", "limit": 1, "after": 1},
        },
    }


def test_the_read_back_holds_the_cluster_to_the_target_or_to_the_plans_own_figure():
    even = cluster({0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]})
    skewed = cluster(ON_THREE)  # 8, 8, 8, 0
    assert judge_spread(even, _summary(True, 0)).done
    assert not judge_spread(skewed, _summary(True, 1)).done
    # the plan said it gets to 8 only (out of reach): the cluster is held to that, not to 1
    assert not judge_spread(skewed, _summary(False, 8)).done  # preferred leaders 4, 4, 4, 0: spread 4
    leaders_ok = _summary(False, 8)
    leaders_ok["spread"]["leaders"]["after"] = 4
    assert judge_spread(skewed, leaders_ok).done


@pytest.mark.parametrize(
    ("value", "text"), [(None, "20"), ("", "20"), (15, "15"), ("12.5%", "12.5"), (0, "0")]
)
def test_the_bytes_spread_is_a_percentage_of_the_mean_default_20(value, text):
    request = build_rebalance_request({"mode": "full", "max_bytes_spread_percent": value})
    assert request.max_bytes_spread_percent == text


@pytest.mark.parametrize("value", ["ten", "-1", "1 GiB", "nan"])
def test_a_bytes_spread_that_is_not_a_percentage_is_refused(value):
    with pytest.raises(RequestError, match="max_bytes_spread_percent"):
        build_rebalance_request({"mode": "full", "max_bytes_spread_percent": value})


def _with_dirs(state: ClusterState, sizes: dict[int, int], failed: tuple[int, ...] = ()) -> ClusterState:
    """``state`` with each broker's log dir answering DescribeLogDirs with one replica of ``sizes[b]``
    bytes (a broker in ``failed`` did not answer)."""
    from kafka_runbooks.model import LogDirReplica

    for b, n in sizes.items():
        if b in failed:
            state.log_dir_errors[b] = "NodeNotReadyError"
            continue
        replica = LogDirReplica(b, "t", 0, n, "/data")
        state.log_dir_states[b] = (LogDir(b, "/data", 0, (replica,), 100 << 30, 50 << 30),)
    return state


def test_the_spread_now_judges_bytes_from_describe_log_dirs_and_unknown_is_not_within():
    from kafka_runbooks.rebalance import spread_now

    even = {0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]}  # replicas and leaders even
    texts = ("1", "1", "20")
    skewed = spread_now(_with_dirs(cluster(even), {1: 100, 2: 100, 3: 100, 4: 500}), texts)
    assert skewed.bytes_limit == 40 and skewed.figures["bytes"] == 400  # 20 % of the mean 200
    assert not skewed.within(*skewed.limits)  # replicas even, bytes not: a plan, not "nothing to do"
    level = spread_now(_with_dirs(cluster(even), {1: 190, 2: 200, 3: 210, 4: 200}), texts)
    assert level.within(*level.limits) and level.observed()["per_broker"]["4"]["bytes"] == 200
    unknown = spread_now(_with_dirs(cluster(even), {1: 200, 2: 200, 3: 200, 4: 200}, failed=(4,)), texts)
    assert unknown.bytes[4] is None and unknown.figures["bytes"] is None and unknown.bytes_limit is None
    assert not unknown.within(*unknown.limits)  # unknown is never within, never 0
    # no bytes target (the verify's read-back, or an older request): bytes are not judged
    assert spread_now(_with_dirs(cluster(even), {1: 100, 2: 100, 3: 100, 4: 500}), ("1", "1")).within(1, 1)


def _planned(after: int | None, limit: int | None = 40) -> dict:
    """A rebalance summary's bytes figures (the plan's prediction at the snapshot's mean 200)."""
    return {"spread": {"bytes": {"target": "20", "limit": limit, "before": 400, "after": after}}}


EVEN = {0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]}


def test_the_bytes_read_back_are_judged_with_the_planners_rule_beside_the_plans_prediction(caplog):
    """After the settle period the bytes per live broker (DescribeLogDirs) are judged with
    within_bytes_spread at the mean now: within is INFO; a plan that said it reaches the target and a
    cluster that disagrees is a WARNING that says so, with the prediction beside the spread now."""
    from kafka_runbooks.balance_rules import bytes_spread_limit, within_bytes_spread
    from kafka_runbooks.rebalance import BYTES_OFF_PLAN, BYTES_WITHIN, judge_bytes, record_bytes

    caplog.set_level(logging.INFO)
    level = {1: 190, 2: 200, 3: 210, 4: 200}
    judged = judge_bytes(_with_dirs(cluster(EVEN), level), _planned(20))
    assert judged.limit == bytes_spread_limit("20", level, [1, 2, 3, 4]) == 40
    assert within_bytes_spread(level, [1, 2, 3, 4], 40) and (judged.state, judged.spread) == (
        BYTES_WITHIN,
        20,
    )
    seen = record_bytes(judged)
    assert (
        caplog.records[-1].levelno == logging.INFO
        and "DECISION verify bytes" in caplog.records[-1].getMessage()
    )
    assert seen["planned"] == {"before": 400, "after": 20, "limit": 40} and seen["plan_reached"] is True

    drifted = judge_bytes(_with_dirs(cluster(EVEN), {1: 100, 2: 100, 3: 100, 4: 500}), _planned(20))
    assert (drifted.state, drifted.spread, drifted.limit, drifted.plan_reached) == (
        BYTES_OFF_PLAN,
        400,
        40,
        True,
    )
    seen = record_bytes(drifted)
    message = caplog.records[-1].getMessage()
    assert caplog.records[-1].levelno == logging.WARNING and BYTES_OFF_PLAN in message
    assert "bytes spread now 400, limit 40" in message and "the plan predicted 20" in message
    assert seen["per_broker"] == {"1": 100, "2": 100, "3": 100, "4": 500}


def test_a_plan_that_said_it_cannot_reach_the_bytes_target_is_not_held_to_it(caplog):
    from kafka_runbooks.rebalance import BYTES_NOT_PROMISED, judge_bytes, record_bytes

    caplog.set_level(logging.INFO)
    judged = judge_bytes(_with_dirs(cluster(EVEN), {1: 100, 2: 100, 3: 100, 4: 300}), _planned(200))
    assert (judged.state, judged.plan_reached, judged.spread) == (BYTES_NOT_PROMISED, False, 200)
    assert record_bytes(judged)["planned"]["after"] == 200
    assert (
        caplog.records[-1].levelno == logging.WARNING
        and "the plan predicted 200" in caplog.records[-1].getMessage()
    )
    # the plan could not judge its bytes (a size unknown in the snapshot): nothing was promised either
    assert judge_bytes(
        _with_dirs(cluster(EVEN), {1: 100, 2: 100, 3: 100, 4: 300}), _planned(None, None)
    ).state == (BYTES_NOT_PROMISED)


def test_bytes_unknown_at_the_read_back_are_unjudged_never_within(caplog):
    """A broker whose log dirs did not answer, a state read without log dirs, a plan without a bytes
    target: unjudged (no limit, no spread), a WARNING, never success by default."""
    from kafka_runbooks.rebalance import BYTES_UNJUDGED, judge_bytes, record_bytes

    caplog.set_level(logging.INFO)
    failed = judge_bytes(
        _with_dirs(cluster(EVEN), {1: 200, 2: 200, 3: 200, 4: 200}, failed=(4,)), _planned(20)
    )
    assert (failed.state, failed.limit, failed.spread, failed.within, failed.done) == (
        BYTES_UNJUDGED,
        None,
        None,
        None,
        False,
    )
    assert failed.sizes[4] is None and record_bytes(failed)["state"] == BYTES_UNJUDGED
    assert (
        caplog.records[-1].levelno == logging.WARNING and "broker(s) ['4']" in caplog.records[-1].getMessage()
    )
    assert judge_bytes(cluster(EVEN), _planned(20)).state == BYTES_UNJUDGED  # no log dirs read
    no_target = _with_dirs(cluster(EVEN), {1: 200, 2: 200, 3: 200, 4: 200})
    assert judge_bytes(no_target, {"spread": {"bytes": {"target": None}}}).state == BYTES_UNJUDGED
