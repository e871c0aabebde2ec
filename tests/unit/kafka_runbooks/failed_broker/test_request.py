"""Reassignment input checks (before anything moves) and the throttle a chunk needs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kafka_runbooks.failed_broker import request
from kafka_runbooks.failed_broker.execute import ChunkState, ExecState
from kafka_runbooks.failed_broker.request import RequestError, build_request, foreign_reassignments, resolve
from kafka_runbooks.failed_broker.throttle import throttle_plan
from kafka_runbooks.model import Broker, ClusterState, PartitionState


def state() -> ClusterState:
    """Brokers 1-3 up, 4 fenced, 5 registered nowhere but named by a partition."""
    brokers = {b: Broker(broker_id=b) for b in (1, 2, 3)}
    brokers[4] = Broker(broker_id=4, fenced=True)
    brokers[5] = Broker(broker_id=5, alive=False)
    parts = [
        PartitionState("t", 0, 1, 1, (1, 4), (1,)),
        PartitionState("t", 1, 2, 1, (2, 5), (2,)),
        PartitionState("t", 2, 3, 1, (3, 1), (3, 1)),
    ]
    return ClusterState(cluster_id="c", brokers=brokers, quorum=None, partitions=parts)


def test_detect_and_default_receivers():
    failed, receivers = resolve(build_request({}), state())
    assert failed == [4, 5] and receivers == [1, 2, 3]
    failed, receivers = resolve(build_request({"failed_brokers": "4", "receivers": [2, 3]}), state())
    assert failed == [4] and receivers == [2, 3]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"failed_brokers": [9]}, "unknown to the cluster"),
        ({"failed_brokers": [1]}, "are alive"),
        ({"failed_brokers": [4], "receivers": [4, 1]}, "among the failed"),
        ({"failed_brokers": [4], "receivers": [5]}, "not available"),
        ({"failed_brokers": [4], "receivers": "1,7"}, "unknown to the cluster"),
    ],
)
def test_bad_brokers_are_refused_with_a_clear_error(params, message):
    with pytest.raises(RequestError, match=message):
        resolve(build_request(params), state())


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"throttle_bytes_per_sec": 0}, "would stop replication"),
        ({"max_partitions_per_chunk": 0}, "must be > 0"),
        ({"max_bytes_per_chunk": "lots"}, "must be a size such as"),
        ({"failed_brokers": "four"}, "'detect' or broker ids"),
        ({"receivers": [-1]}, "broker ids are >= 0"),
    ],
)
def test_bad_params_fail_before_any_cluster_call(params, message):
    with pytest.raises(RequestError, match=message):
        build_request(params)


def test_only_reassignments_to_exactly_our_target_are_ours():
    inflight = {
        "t:0": {"replicas": [1, 2, 4], "adding": [2], "removing": [4]},
        "t:1": {"replicas": [2, 3, 5], "adding": [3], "removing": [5]},
        "u:0": {"replicas": [1, 2], "adding": [2], "removing": []},
    }
    owned = {"t:0": [1, 2], "t:1": [2, 1]}
    assert set(foreign_reassignments(inflight, owned)) == {"t:1", "u:0"}
    run = ExecState(
        "r", [4], 1, [ChunkState(1, {"t:0": [1, 2], "t:1": [2, 1]}, status="moving", moving=["t:0"])]
    )
    assert run.in_flight_targets() == {"t:0": [1, 2]}


def test_throttle_covers_live_sources_and_new_replicas_only():
    plan = throttle_plan(
        [("t", 0, (1, 4), (1, 2)), ("t", 1, (4, 3), (2, 3)), ("u", 0, (1, 2), (1, 2))], {1, 2, 3}, 1000
    ).as_dict()
    assert plan["rate"] == 1000
    assert sorted(plan["brokers"]) == ["1", "2", "3"]
    assert plan["topics"] == {"t": {"leader": ["0:1", "1:3"], "follower": ["0:2", "1:2"]}}


def with_controllers() -> ClusterState:
    """The same cluster seen with its KRaft quorum: dedicated controllers 9001-9003."""
    from kafka_runbooks.model import Quorum, QuorumMember

    s = state()
    s.quorum = Quorum(
        leader_id=9001,
        leader_epoch=3,
        high_watermark=10,
        voters=tuple(QuorumMember(n, 10, None, None) for n in (9001, 9002, 9003)),
        observers=(),
    )
    return s


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"failed_brokers": [9002]},
            "broker(s) named as failed [9002]: node(s) [9002] are KRaft controllers",
        ),
        ({"failed_brokers": "4,9001"}, "node(s) [9001] are KRaft controllers"),
        ({"failed_brokers": [4], "receivers": [1, 9003]}, "receiver(s) [9003]: node(s) [9003] are KRaft"),
    ],
)
def test_a_controller_id_is_named_as_a_controller(params, message):
    with pytest.raises(RequestError) as err:
        resolve(build_request(params), with_controllers())
    assert message in str(err.value)
    assert "unknown" not in str(err.value)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"failed_brokers": "4,4"}, "failed_brokers names broker(s) [4] more than once"),
        ({"failed_brokers": [4, 5, 4]}, "failed_brokers names broker(s) [4] more than once"),
        ({"receivers": "1, 2,1"}, "receivers names broker(s) [1] more than once"),
        ({"receivers": ["2", 2, 3]}, "receivers names broker(s) [2] more than once"),
    ],
)
def test_a_broker_named_twice_is_refused_not_merged(params, message):
    with pytest.raises(RequestError) as err:
        build_request(params)
    assert message in str(err.value)


def _planner_constants() -> dict[str, object]:
    """The module-level constants of the Spark planner, read from its source (it imports pyspark)."""
    path = Path(__file__).resolve().parents[4] / "spark_jobs" / "failed_broker_plan.py"
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                code = compile(ast.Expression(node.value), str(path), "eval")
                found[node.targets[0].id] = eval(code, {"__builtins__": {}})  # literals and << only
            except (NameError, TypeError):
                continue
    return found


def test_the_chunk_defaults_are_one_constant_each_and_the_spark_planner_repeats_them():
    """The request, the forms and the sweep import the defaults; the planner cannot import the
    package, so its literals are held equal here."""
    parsed = build_request({})
    assert parsed.max_partitions_per_chunk == request.DEFAULT_MAX_PARTITIONS_PER_CHUNK == 50
    assert parsed.max_bytes_per_chunk == request.DEFAULT_MAX_BYTES_PER_CHUNK
    assert parsed.throttle_bytes_per_sec == request.DEFAULT_THROTTLE_BYTES_PER_SEC
    planner = _planner_constants()
    assert planner["DEFAULT_MAX_PARTITIONS"] == request.DEFAULT_MAX_PARTITIONS_PER_CHUNK
    assert planner["DEFAULT_MAX_BYTES"] == request.DEFAULT_MAX_BYTES_PER_CHUNK


def test_a_heal_whose_receivers_cannot_hold_the_replication_factor_is_refused_before_the_gate():
    """Brokers 3 and 4 dead, two live: an RF 3 partition on [1, 3, 4] has one replica kept and two
    receivers, one of them already its replica. The planner refused this after the snapshot and the
    Spark job; validate refuses it now, naming the topic and its RF, the receivers and the dead."""
    brokers = {b: Broker(broker_id=b, fenced=b in (3, 4)) for b in (1, 2, 3, 4)}
    parts = [
        PartitionState("orders", 0, 1, 1, (1, 3, 4), (1,)),
        PartitionState("orders", 1, 2, 1, (2, 4, 3), (2,)),
        PartitionState("logs", 0, 4, 1, (4, 3), ()),  # no live replica to copy from: not moved, not counted
    ]
    cluster = ClusterState(cluster_id="c", brokers=brokers, quorum=None, partitions=parts)
    with pytest.raises(RequestError) as refused:
        resolve(build_request({}), cluster)
    message = str(refused.value)
    assert "cannot hold the replication factor of 2 partition(s)" in message
    assert "orders (RF 3: partition(s) [0, 1])" in message and "logs" not in message
    assert "receivers [1, 2] (live brokers: [1, 2], dead: [3, 4])" in message
    # broker 3 alone: [1, 3, 4] onto 2 and [2, 4, 3] onto 1 keep their RF (broker 4's replica stays)
    assert resolve(build_request({"failed_brokers": "3"}), cluster) == ([3], [1, 2])
