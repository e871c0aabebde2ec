"""The health sweep's findings: one decision record per category, or healthy."""

import logging

from kafka_runbooks.health import judge_balance, log_findings


def test_findings_one_record_per_category_or_healthy(caplog):
    caplog.set_level(logging.INFO)
    report = {
        "partitions": 10,
        "counts": {"offline": 1, "under_replicated": 2, "under_min_isr": 0, "at_min_isr": 2},
        "offline": [{"topic": "t", "partition": 0}],
        "under_replicated": [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 2}],
        "at_min_isr": [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 2}],
    }
    recs = log_findings(report)
    assert [r.decision for r in recs] == [
        "1 partition(s) offline",
        "2 partition(s) at min isr",
        "2 partition(s) under replicated",
    ]
    assert recs[0].observed["partitions"] == ["t-0"]
    healthy = log_findings({"partitions": 3, "counts": {}, "brokers": [{}, {}]})
    assert [r.decision for r in healthy] == ["healthy"]


def test_leadership_now_is_judged_by_the_preferred_leaders_rule_and_never_proposes_a_move(caplog):
    """The issue's cluster: 21 to 31 leaders per broker on 103 partitions, while the preferred
    leaders and the replicas are even. One rule (kafka_rebalance's max_leader_spread, its rule
    units) judges both leader kinds; no second threshold, and no rebalance proposed for it."""
    caplog.set_level(logging.INFO)
    brokers = [
        {
            "broker_id": b,
            "alive": True,
            "fenced": False,
            "leader_count": n,
            "preferred_leader_count": 26,
            "replica_count": 77,
            "size_bytes": 1000,
        }
        for b, n in ((1, 21), (2, 25), (3, 26), (4, 31))
    ]
    report = {"partitions": 103, "counts": {}, "brokers": brokers}
    targets = {"max_replica_spread": "2", "max_leader_spread": "10%", "max_bytes_spread_percent": "20"}
    balance = judge_balance(report, targets)
    assert balance.state == "balanced" and balance.out_of_spread() == []  # nothing to propose
    leaders = balance.as_dict()["leaders"]
    assert (leaders["state"], leaders["spread"], leaders["limit"]) == ("out of spread", 10, 2)
    recs = log_findings({**report, "balance": balance.as_dict()})
    assert [r.decision for r in recs] == [
        "leaders out of the target spread: spread 10 > 2 (target 10%), over by 8"
    ]
    assert "preferred-leader election" in recs[0].reason and recs[0].observed["per_broker"]["4"] == 31
    assert caplog.records[-1].levelno == logging.WARNING
    # a live broker whose leader count is unknown leaves leadership unknown, never balanced
    brokers[0]["leader_count"] = None
    assert judge_balance(report, targets).as_dict()["leaders"]["state"] == "unknown"


def test_partitions_whose_min_isr_was_not_read_are_a_finding_never_healthy(caplog):
    """The health job counts online partitions whose min.insync.replicas is unread apart: the
    sweep says so and never logs "healthy" over them."""
    caplog.set_level(logging.INFO)
    report = {
        "partitions": 3,
        "counts": {
            "offline": 0,
            "under_replicated": 0,
            "under_min_isr": 0,
            "at_min_isr": 0,
            "min_isr_unknown": 2,
        },
        "min_isr_unknown": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}],
    }
    recs = log_findings(report)
    assert [r.decision for r in recs] == ["2 partition(s) min isr unknown"]
    assert "not read" in recs[0].reason and recs[0].observed["partitions"] == ["t-0", "t-1"]
