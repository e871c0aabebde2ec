"""The health report's KRaft quorum (issue #28): lag on the leader's clock, unknown never caught up,
and whether the quorum has a spare voter."""

from __future__ import annotations

import logging

from kafka_runbooks.health import log_findings
from kafka_runbooks.model import Quorum, QuorumMember
from kafka_runbooks.quorum import quorum_report, spare

LEADER_NOW = 1_000_000  # the leader's clock: nothing here is compared with the worker's
FETCH_TIMEOUT_MS = 2000  # the cluster's controller.quorum.fetch.timeout.ms, read beside the answer


def quorum(*voters: tuple[int, int, int | None], observers=(), leader=9001) -> Quorum:
    """Voters as (node id, log end offset, last caught-up time on the leader's clock)."""
    return Quorum(
        leader_id=leader,
        leader_epoch=7,
        high_watermark=500,
        voters=tuple(QuorumMember(n, end, caught, caught) for n, end, caught in voters),
        observers=tuple(QuorumMember(n, end, None, fetch) for n, end, fetch in observers),
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
    )


def test_three_caught_up_voters_have_a_spare_and_lag_is_read_against_the_leader():
    q = quorum(
        (9001, 500, LEADER_NOW),
        (9002, 498, LEADER_NOW - 300),
        (9003, 500, LEADER_NOW - 100),
        observers=[(1, 499, LEADER_NOW - 50)],
    )
    report = quorum_report(q)
    assert (report["leader_id"], report["leader_epoch"], report["majority"]) == (9001, 7, 2)
    assert report["has_spare"] is True
    by_id = {v["node_id"]: v for v in report["voters"]}
    assert by_id[9002]["lag_offsets"] == 2 and by_id[9002]["caught_up_ms_ago"] == 300
    assert by_id[9001]["leader"] and by_id[9001]["state"] == "caught up"
    assert report["observers"] == [
        {"node_id": 1, "host": None, "log_end_offset": 499, "lag_offsets": 1, "last_fetch_ms_ago": 50}
    ]


def test_a_voter_gone_for_longer_than_the_lag_leaves_no_spare_and_is_named():
    q = quorum((9001, 900, LEADER_NOW), (9002, 900, LEADER_NOW - 200), (9003, 400, LEADER_NOW - 60_000))
    report = quorum_report(q)
    assert report["has_spare"] is False
    assert report["not_caught_up_voters"] == [9003] and report["caught_up_voters"] == [9001, 9002]
    assert {v["node_id"]: v["lag_offsets"] for v in report["voters"]}[9003] == 500


def test_a_voter_without_caught_up_time_is_unknown_never_caught_up():
    q = quorum((9001, 900, LEADER_NOW), (9002, 900, LEADER_NOW - 200), (9003, -1, None))
    report = quorum_report(q)
    assert report["unknown_voters"] == [9003]
    assert 9003 not in report["caught_up_voters"]
    assert report["has_spare"] is None  # depends on the unknown voter: not "spare", not "fine"
    by_id = {v["node_id"]: v for v in report["voters"]}
    assert by_id[9003]["lag_offsets"] is None and by_id[9003]["caught_up_ms_ago"] is None


def test_without_the_leaders_own_time_no_follower_is_judged_on_another_clock():
    q = quorum((9001, 900, None), (9002, 900, 123), (9003, 900, 456))
    report = quorum_report(q)
    assert report["unknown_voters"] == [9002, 9003]
    assert report["caught_up_voters"] == [9001]


def test_spare_counts_only_caught_up_voters():
    assert spare(caught_up=3, unknown=0, voters=3) is True
    assert spare(caught_up=2, unknown=0, voters=3) is False
    assert spare(caught_up=2, unknown=1, voters=3) is None
    assert spare(caught_up=3, unknown=0, voters=5) is False
    assert spare(caught_up=1, unknown=1, voters=3) is False


def test_an_unread_quorum_is_unknown():
    report = quorum_report(None, error="ClusterUnreachable: no answer")
    assert report == {"state": "unknown", "error": "ClusterUnreachable: no answer", "has_spare": None}


def test_no_spare_is_a_warning_of_the_sweep_and_a_spare_is_not(caplog):
    caplog.set_level(logging.INFO)
    healthy = quorum_report(quorum((9001, 9, LEADER_NOW), (9002, 9, LEADER_NOW), (9003, 9, LEADER_NOW)))
    records = log_findings({"counts": {}, "quorum": healthy})
    assert [r.decision for r in records] == ["healthy"]
    lost = quorum_report(quorum((9001, 9, LEADER_NOW), (9002, 9, LEADER_NOW), (9003, 5, LEADER_NOW - 99_000)))
    records = log_findings({"counts": {}, "quorum": lost})
    assert [r.decision for r in records] == ["quorum has no spare voter: 2 of 3 caught up, 2 needed"]
    assert records[0].observed["not_caught_up_voters"] == [9003]
    assert any(r.levelno == logging.WARNING and "no spare voter" in r.getMessage() for r in caplog.records)


def test_each_voter_carries_its_directory_id_where_kafka_gives_one():
    """DescribeQuorum v2 (KIP-853) names each voter's metadata log directory: the id an operator
    needs to remove a dead voter (kafka-metadata-quorum remove-controller); None before v2."""
    q = Quorum(
        leader_id=9001,
        leader_epoch=7,
        high_watermark=500,
        voters=(
            QuorumMember(9001, 500, LEADER_NOW, LEADER_NOW, directory_id="pZ4ZtEBuQnyNRbzeZ0l8Ww"),
            QuorumMember(9002, 500, LEADER_NOW, LEADER_NOW),  # a static quorum's voter: no id
        ),
        observers=(),
    )
    report = quorum_report(q)
    assert {v["node_id"]: v["directory_id"] for v in report["voters"]} == {
        9001: "pZ4ZtEBuQnyNRbzeZ0l8Ww",
        9002: None,
    }


def test_the_health_report_on_the_page_shows_each_voters_directory_id():
    from kafka_runbooks import console

    q = Quorum(
        leader_id=9001,
        leader_epoch=7,
        high_watermark=500,
        voters=(
            QuorumMember(9001, 500, LEADER_NOW, LEADER_NOW, directory_id="pZ4ZtEBuQnyNRbzeZ0l8Ww"),
            QuorumMember(9002, 500, LEADER_NOW, LEADER_NOW),
        ),
        observers=(),
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
    )
    html = console._health_quorum(quorum_report(q))
    assert "9001 (leader): caught up, 0 behind, directory pZ4ZtEBuQnyNRbzeZ0l8Ww, 9002" in html
    assert "9002: caught up, 0 behind. Observers" in html  # no id given: none shown


def test_a_voter_killed_6_s_ago_is_not_caught_up_and_leaves_no_spare():
    """Issue #37, point 2: its lastCaughtUpTimestamp is 6 s old (within the old 10 s limit) and its
    last fetch as old; by the cluster's fetch timeout (2 s) it is not caught up."""
    q = quorum((9001, 900, LEADER_NOW), (9002, 900, LEADER_NOW - 100), (9003, 890, LEADER_NOW - 6000))
    report = quorum_report(q)
    assert report["not_caught_up_voters"] == [9003] and report["has_spare"] is False
    assert "no fetch for 6000 ms" in {v["node_id"]: v for v in report["voters"]}[9003]["why"]


def test_without_the_clusters_fetch_timeout_every_follower_is_unknown():
    q = Quorum(
        9001,
        7,
        500,
        (QuorumMember(9001, 500, LEADER_NOW, LEADER_NOW), QuorumMember(9002, 500, LEADER_NOW, LEADER_NOW)),
        (),
    )
    report = quorum_report(q)
    assert report["unknown_voters"] == [9002] and report["has_spare"] is False
