"""The health sweep's findings: one decision record per category, or healthy."""

import logging

from kafka_runbooks.health import log_findings


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


def test_leader_imbalance_is_a_finding_with_its_threshold(caplog):
    """The issue's cluster: 21 to 31 leaders per broker on 103 partitions."""
    caplog.set_level(logging.INFO)
    brokers = [
        {"broker_id": b, "alive": True, "fenced": False, "leader_count": n, "replica_count": 77}
        for b, n in ((1, 21), (2, 25), (3, 26), (4, 31))
    ]
    figures = {"threshold_pct": 10.0, "mean": 25.75, "min": 21, "max": 31, "upper": 29, "lower": 23}
    report = {
        "partitions": 103,
        "counts": {},
        "brokers": brokers,
        "imbalance": {
            "leaders": {**figures, "imbalanced": True, "over": [4], "under": [1]},
            "replicas": {"imbalanced": False},
        },
    }
    recs = log_findings(report)
    assert [r.decision for r in recs] == ["leaders imbalanced: 21 to 31 per broker (mean 25.75)"]
    assert "more than 10% from the mean" in recs[0].reason and "[4] above 29" in recs[0].reason
    assert recs[0].observed["per_broker"] == {1: 21, 2: 25, 3: 26, 4: 31}
    assert caplog.records[-1].levelno == logging.WARNING


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
