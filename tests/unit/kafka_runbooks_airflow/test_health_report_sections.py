"""The health sweep carries the snapshot's quorum and log-dir sections into the published report,
its decision records and the Kafka page (issue #28), without a round through Spark."""

from __future__ import annotations

import json
import logging

from kafka.protocol.admin import DescribeLogDirsResponse

from kafka_runbooks import console
from kafka_runbooks.log_dirs import KAFKA_STORAGE_ERROR, parse_describe_log_dirs
from kafka_runbooks.model import Broker, ClusterState, PartitionState, Quorum, QuorumMember
from kafka_runbooks.snapshot import write_snapshot
from kafka_runbooks.snapshot_contract import REPORT_FILE
from kafka_runbooks_airflow.reports import HEALTH_DIR, publish_health_report

Result = DescribeLogDirsResponse.DescribeLogDirsResult


def _cluster() -> ClusterState:
    """Three voters, one not caught up for a minute on the leader's clock; broker 1 with a failed dir."""
    wire = DescribeLogDirsResponse(
        version=4,
        throttle_time_ms=0,
        error_code=0,
        results=[
            Result(error_code=0, log_dir="/k/data", topics=[], total_bytes=1, usable_bytes=1),
            Result(
                error_code=KAFKA_STORAGE_ERROR,
                log_dir="/k/data-2",
                topics=[],
                total_bytes=-1,
                usable_bytes=-1,
            ),
        ],
    ).encode(version=4)
    results = [r.to_dict() for r in DescribeLogDirsResponse.decode(wire, version=4).results]
    return ClusterState(
        cluster_id="c1",
        brokers={1: Broker(1), 2: Broker(2)},
        quorum=Quorum(
            leader_id=9001,
            leader_epoch=4,
            high_watermark=100,
            voters=(
                QuorumMember(9001, 100, 500_000, 500_000),
                QuorumMember(9002, 100, 499_900, 499_900),
                QuorumMember(9003, 40, 440_000, 440_000),
            ),
            observers=(QuorumMember(1, 100, None, 499_990),),
            fetch_timeout_ms=2000,  # as the admin facade reads it
        ),
        partitions=[PartitionState("orders", 0, 2, 1, (2, 1), (2,))],
        log_dir_states={1: parse_describe_log_dirs(1, results)},
        log_dir_errors={2: "NodeNotReadyError"},
        taken_at_ms=1,
    )


def test_the_published_report_and_the_page_carry_quorum_and_offline_dirs(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    caplog.set_level(logging.INFO)
    snap = write_snapshot(_cluster(), tmp_path / "store" / "snap", "b:1")
    (snap / HEALTH_DIR).mkdir()
    (snap / HEALTH_DIR / REPORT_FILE).write_text(
        json.dumps({"cluster_id": "c1", "counts": {}, "brokers": []})
    )

    publish_health_report(str(snap), conn_id="kafka_default")

    report = json.loads(
        (tmp_path / "store/reports/cluster_health/by_connection/kafka_default.json").read_text()
    )
    assert report["quorum"]["has_spare"] is False and report["quorum"]["not_caught_up_voters"] == [9003]
    assert report["log_dirs"]["brokers"][0]["partitions"] == ["orders-0"]
    assert report["log_dirs"]["unknown_brokers"] == [2]
    latest = json.loads((tmp_path / "store/reports/cluster_health/latest.json").read_text())
    assert latest["quorum"] == report["quorum"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("quorum has no spare voter" in m for m in warnings)
    assert any("broker 1: 1 log dir(s) offline, 1 replica(s) in them" in m for m in warnings)

    page = console.render_page(console.overview([], [], root=tmp_path / "store"))
    assert "data-quorum-spare='false'><b>no spare voter</b>" in page
    assert "9003: not caught up, 60 behind" in page
    assert (
        "data-offline-dirs='1'>broker 1: /k/data-2 (KAFKA_STORAGE_ERROR); 1 replica(s) in them: orders-0"
        in page
    )
    assert "log dirs unknown on broker(s) [2]" in page
