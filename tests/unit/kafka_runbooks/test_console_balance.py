"""The Kafka page says what the health sweep judged against kafka_rebalance's target spread (what is out,
by how much), which topics are below the minimum replication factor, and what it decided (issue #27)."""

from __future__ import annotations

import re

from kafka_runbooks import console
from kafka_runbooks.health import judge_balance
from kafka_runbooks.rebalance import DEFAULT_BYTES_SPREAD_PERCENT, DEFAULT_SPREAD

TARGETS = {
    "max_replica_spread": DEFAULT_SPREAD,
    "max_leader_spread": "2",
    "max_bytes_spread_percent": DEFAULT_BYTES_SPREAD_PERCENT,
}


def _report(dirs_state="ok", sizes=(1000, 1000, 1000)):
    brokers = [
        {"broker_id": b, "alive": True, "fenced": False, "replica_count": n, "leader_count": 4}
        | {"preferred_leader_count": 4, "size_bytes": size}
        for (b, n), size in zip(((1, 10), (2, 10), (3, 16)), sizes)
    ]
    dirs = [{"broker_id": b, "state": "ok"} for b in (1, 2)] + [{"broker_id": 3, "state": dirs_state}]
    report = {
        "kafka_config_id": "kafka_default",
        "partitions": 12,
        "counts": {},
        "brokers": brokers,
        "log_dirs": {"brokers": dirs, "unknown_brokers": [3] if dirs_state == "unknown" else []},
        "replication": {
            "minimum": 3,
            "minimum_from": "min(3, live brokers)",
            "below_minimum": 1,
            "listed": [{"topic": "audit", "replication_factor": 1, "partitions": 3}],
            "truncated": False,
        },
    }
    report["balance"] = judge_balance(report, TARGETS).as_dict()
    return report


def test_the_page_says_what_is_out_of_spread_by_how_much_and_the_proposal():
    report = _report()
    report["rebalance_proposal"] = {
        "start": False,
        "decision": "report only",
        "why": "replicas spread 6 above 1 (target 10%); start_rebalance is off (the default)",
        "run_id": None,
    }
    page = console._health(report)
    assert re.search(
        r"data-balance='replicas'><b>out of spread</b>replicas per live broker: target 10% \(at most 1\), "
        r"spread 6, over by 5: at least 4 move\(s\)",
        page,
    )
    assert "data-balance='preferred_leaders'><b>balanced</b>" in page
    assert re.search(
        r"data-balance='bytes'><b>balanced</b>bytes per live broker: target 20% of the mean", page
    )
    assert "data-proposal><b>report only</b>" in page and "start_rebalance is off" in page
    assert re.search(r"data-below-min-rf='1'><b>1</b>topic\(s\) below replication factor, minimum 3", page)
    assert "audit (RF 1)" in page


def test_an_unknown_broker_is_shown_unknown_never_balanced():
    page = console._health(_report("unknown"))
    assert "data-balance='replicas'><b>unknown</b>" in page
    assert "data-balance='preferred_leaders'><b>unknown</b>" in page
    assert "data-balance='bytes'><b>unknown</b>" in page
    assert "data-balance-unknown" in page and "<b>balanced</b>" not in page


def test_bytes_out_of_spread_and_unknown_bytes_are_shown_beside_the_counts():
    """Bytes per live broker on the Kafka page where replicas and preferred leaders are: out of
    spread with the limit, the spread and by how much; a broker without a size named "unknown"."""
    page = console._health(_report(sizes=(1000, 1000, 1600)))
    assert re.search(
        r"data-balance='bytes'><b>out of spread</b>bytes per live broker: target 20% of the mean "
        r"\(at most 240 B\), spread 600 B, over by 360 B",
        page,
    )
    page = console._health(_report(sizes=(1000, 1000, None)))
    assert re.search(
        r"data-balance='bytes'><b>unknown</b>bytes per live broker: target 20% of the mean; "
        r"unknown on broker\(s\) 3",
        page,
    )
