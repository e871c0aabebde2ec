"""Offline log directories in the health report (issue #28): DescribeLogDirs answers, encoded and
decoded by kafka-python's own protocol classes (the real wire format), turned into per-broker findings."""

from __future__ import annotations

import logging

from kafka.protocol.admin import DescribeLogDirsResponse

from kafka_runbooks.health import log_findings
from kafka_runbooks.log_dirs import KAFKA_STORAGE_ERROR, log_dirs_report, parse_describe_log_dirs
from kafka_runbooks.model import Broker, ClusterState, PartitionState

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
Partition = Topic.DescribeLogDirsPartition


def answer(
    dirs: dict[str, tuple[int, dict[str, list[int]]]], version: int = 4, future: frozenset = frozenset()
) -> list[dict]:
    """What kafka-python hands the facade for one broker: ``{path: (error code, {topic: [partitions]})}``
    through a real encode and decode of DescribeLogDirsResponse. ``future``: (path, topic, partition)
    listed as the future log of an intra-broker move (AlterReplicaLogDirs), ``is_future_key`` set."""
    results = [
        Result(
            error_code=code,
            log_dir=path,
            topics=[
                Topic(
                    name=t,
                    partitions=[
                        Partition(
                            partition_index=p,
                            partition_size=100,
                            offset_lag=0,
                            is_future_key=(path, t, p) in future,
                        )
                        for p in ps
                    ],
                )
                for t, ps in topics.items()
            ],
            total_bytes=-1 if code else 10_000,
            usable_bytes=-1 if code else 4_000,
        )
        for path, (code, topics) in dirs.items()
    ]
    wire = DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=0, results=results).encode(
        version=version
    )
    return [r.to_dict() for r in DescribeLogDirsResponse.decode(wire, version=version).results]


def partition(topic: str, p: int, replicas: tuple[int, ...], offline: tuple[int, ...] = ()) -> PartitionState:
    return PartitionState(topic, p, replicas[0], 3, replicas, replicas, offline_replicas=offline)


def state(dirs_by_broker: dict, errors: dict | None = None) -> ClusterState:
    return ClusterState(
        cluster_id="c",
        brokers={b: Broker(b) for b in (1, 2, 3)},
        quorum=None,
        partitions=[
            partition("orders", 0, (1, 2, 3)),
            partition("orders", 1, (2, 3, 1), offline=(1,)),
            partition("orders", 2, (3, 2)),
            partition("audit", 0, (1, 3)),
        ],
        log_dir_states={b: parse_describe_log_dirs(b, a) for b, a in dirs_by_broker.items()},
        log_dir_errors=errors or {},
    )


def test_a_failed_directory_is_read_with_its_error_and_no_replicas():
    dirs = parse_describe_log_dirs(1, answer({"/d1": (0, {"orders": [0]}), "/d2": (KAFKA_STORAGE_ERROR, {})}))
    assert [(d.path, d.online, len(d.replicas)) for d in dirs] == [("/d1", True, 1), ("/d2", False, 0)]
    assert (dirs[0].total_bytes, dirs[1].total_bytes) == (10_000, None)  # -1: the broker cannot tell
    old = parse_describe_log_dirs(2, answer({"/d": (0, {"orders": [1]})}, version=0))
    assert old[0].total_bytes is None and old[0].replicas[0].partition == 1


def test_replicas_in_no_healthy_directory_are_the_failed_directorys():
    report = log_dirs_report(
        state(
            {
                1: answer({"/d1": (0, {"orders": [0]}), "/d2": (KAFKA_STORAGE_ERROR, {})}),
                2: answer({"/d1": (0, {"orders": [0, 1, 2]})}),
                3: answer({"/d1": (0, {"orders": [0, 1, 2], "audit": [0]})}),
            }
        )
    )
    by_id = {b["broker_id"]: b for b in report["brokers"]}
    assert by_id[1]["state"] == "offline dirs"
    assert by_id[1]["offline_dirs"] == [{"path": "/d2", "error": "KAFKA_STORAGE_ERROR"}]
    assert by_id[1]["partitions"] == ["audit-0", "orders-1"]
    assert by_id[1]["metadata_offline"] == ["orders-1"]  # the controller's view, shown beside it
    assert by_id[2] == {**by_id[2], "state": "ok", "partitions": [], "offline_dirs": []}
    assert (report["offline_dirs"], report["partitions_in_offline_dirs"]) == (1, 2)
    assert report["brokers_with_offline_dirs"] == [1] and report["unknown_brokers"] == []


def test_a_broker_that_did_not_answer_is_unknown_never_without_offline_dirs():
    report = log_dirs_report(
        state({1: answer({"/d1": (0, {"orders": [0, 1], "audit": [0]})})}, errors={2: "RequestTimedOutError"})
    )
    by_id = {b["broker_id"]: b for b in report["brokers"]}
    # its one dir is online, but the controller names it offline for orders-1: the cluster's word
    assert (by_id[1]["state"], by_id[1]["offline_dirs"], by_id[1]["partitions"]) == (
        "offline dirs",
        [],
        ["orders-1"],
    )
    assert by_id[2] == {"broker_id": 2, "state": "unknown", "reason": "RequestTimedOutError"}
    assert by_id[3]["state"] == "unknown"  # not read at all
    assert report["unknown_brokers"] == [2, 3] and report["offline_dirs"] == 0


def test_offline_dirs_and_unknown_brokers_are_warnings_of_the_sweep(caplog):
    caplog.set_level(logging.INFO)
    report = log_dirs_report(
        state(
            {
                1: answer({"/d1": (0, {}), "/d2": (KAFKA_STORAGE_ERROR, {})}),
                3: answer({"/d1": (0, {"orders": [0, 1, 2], "audit": [0]})}),
            },
            errors={2: "NodeNotReadyError"},
        )
    )
    records = log_findings({"counts": {}, "log_dirs": report})
    assert [r.decision for r in records] == [
        "broker 1: 1 log dir(s) offline, 3 replica(s) in them",
        "log dirs unknown on broker(s) [2]",
    ]
    assert records[0].observed["partitions"] == ["audit-0", "orders-0", "orders-1"]
    assert [r.levelno for r in caplog.records if "log dir" in r.getMessage()] == [logging.WARNING] * 2


def test_a_future_log_in_a_healthy_directory_leaves_the_replica_offline_and_the_report_says_both():
    """Broker 1 was moving orders-0 from /d2 to /d1 (AlterReplicaLogDirs) when /d2 failed: the
    future log is listed in /d1, its current log went with /d2, and the controller names broker 1
    offline for it. orders-1's current log is in /d1 while the controller names it offline too."""
    dirs = answer(
        {"/d1": (0, {"orders": [0, 1], "audit": [0]}), "/d2": (KAFKA_STORAGE_ERROR, {})},
        future=frozenset({("/d1", "orders", 0)}),
    )
    st = state({1: dirs})
    st.partitions[0] = partition("orders", 0, (1, 2, 3), offline=(1,))
    report = log_dirs_report(st)
    broker = {b["broker_id"]: b for b in report["brokers"]}[1]
    assert broker["partitions"] == ["orders-0", "orders-1"]  # audit-0 alone is healthy
    assert broker["metadata_offline"] == ["orders-0", "orders-1"]
    assert broker["disagreements"] == {
        "orders-1": {
            "describe_log_dirs": "its current log is in online dir /d1",
            "offline_replicas": "names this broker offline",
        }
    }
    [finding] = log_findings({"counts": {}, "log_dirs": report})[:1]
    assert finding.decision == "broker 1: 1 log dir(s) offline, 2 replica(s) in them"
    assert finding.observed["disagreements"]["orders-1"]["offline_replicas"] == "names this broker offline"


def test_the_page_names_replicas_the_controller_calls_offline_and_where_the_answers_disagree():
    from kafka_runbooks.console import _health_log_dirs

    st = state({b: answer({"/d1": (0, {"orders": [0, 1, 2], "audit": [0]})}) for b in (1, 2, 3)})
    report = log_dirs_report(st)  # orders-1: the controller names broker 1 offline, /d1 lists it
    [finding] = log_findings({"counts": {}, "log_dirs": report})
    assert (
        finding.decision
        == "broker 1: the controller names 1 replica(s) offline, no log dir offline in its own answer"
    )
    tile = _health_log_dirs(report)
    assert (
        "broker 1: no dir offline in its own answer, yet the controller names 1 replica(s) offline: orders-1"
        in tile
    )
    assert "orders-1: its current log is in online dir /d1, the controller names this broker offline" in tile
