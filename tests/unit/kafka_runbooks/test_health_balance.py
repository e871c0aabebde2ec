"""The health sweep proposes, never acts (issue #27): replicas, preferred leaders and bytes per live
broker judged against kafka_rebalance's target spreads with its own rule units, topics below the minimum
replication factor, and the one gated kafka_rebalance run the sweep may start (off by default).

The reports are report.json as the health job writes it, with the snapshot's log-dir section."""

from __future__ import annotations

import logging

from kafka_runbooks.balance_rules import (
    bytes_spread_limit,
    moves_lower_bound,
    spread_limit,
    within_bytes_spread,
)
from kafka_runbooks.health import (
    BALANCED,
    OUT_OF_SPREAD,
    UNKNOWN,
    LastProposal,
    ProposalInputs,
    judge_balance,
    log_findings,
    propose_rebalance,
)
from kafka_runbooks.rebalance import DEFAULT_BYTES_SPREAD_PERCENT, DEFAULT_SPREAD

TARGETS = {
    "max_replica_spread": DEFAULT_SPREAD,
    "max_leader_spread": DEFAULT_SPREAD,
    "max_bytes_spread_percent": DEFAULT_BYTES_SPREAD_PERCENT,
}
NOW_MS = 1_800_000_000_000


def broker(b, replicas, preferred, *, alive=True, fenced=False, size=1000):
    return {
        "size_bytes": size,
        "broker_id": b,
        "alive": alive,
        "fenced": fenced,
        "replica_count": replicas,
        "leader_count": preferred,
        "preferred_leader_count": preferred,
    }


def report(brokers, log_dirs=None, **extra):
    dirs = log_dirs or [{"broker_id": b["broker_id"], "state": "ok"} for b in brokers]
    offline = [d["broker_id"] for d in dirs if d["state"] == "offline dirs"]
    return {
        "partitions": 30,
        "counts": {},
        "brokers": brokers,
        "log_dirs": {"brokers": dirs, "brokers_with_offline_dirs": offline},
        **extra,
    }


SKEWED = [broker(1, 10, 4), broker(2, 10, 4), broker(3, 16, 4)]


def inputs(rep, *, enabled=True, last=None):
    return ProposalInputs(
        balance=judge_balance(rep, TARGETS),
        report=rep,
        enabled=enabled,
        targets=TARGETS,
        conn_id="kafka_default",
        run_id="health__kafka_default__scheduled_1",
        last=last,
        now_ms=NOW_MS,
        retrigger_after_s=3600,
    )


def no_runs_active():
    return []


def test_out_of_spread_is_judged_with_the_rebalances_own_rule_units():
    """10, 10, 16 replicas with the rebalance's default target 10%: the limit is 10% of the mean 12,
    at least 1 (spread_limit), the spread 6 is over it by 5, at least 4 moves bring it within
    (moves_lower_bound); preferred leaders 4, 4, 4 are within."""
    judged = judge_balance(report(SKEWED), TARGETS)
    replicas, preferred = judged.kinds
    assert (replicas.kind, replicas.limit, replicas.spread, replicas.over_by) == ("replicas", 1, 6, 5)
    assert replicas.limit == spread_limit(
        DEFAULT_SPREAD, 12
    ) and replicas.moves_at_least == moves_lower_bound([10, 10, 16], 1)
    assert (replicas.state, preferred.state, judged.state) == (OUT_OF_SPREAD, BALANCED, OUT_OF_SPREAD)
    assert judged.as_dict()["replicas"]["per_broker"] == {"1": 10, "2": 10, "3": 16}


def test_dead_and_fenced_brokers_are_out_of_scope_like_the_rebalances():
    """A dead or fenced broker is not a live broker: its count is neither judged nor in the mean."""
    rep = report(
        [broker(1, 10, 5), broker(2, 11, 5), broker(3, 0, 0, alive=False), broker(4, 0, 0, fenced=True)]
    )
    judged = judge_balance(rep, TARGETS)
    assert judged.live == [1, 2] and judged.state == BALANCED


def test_a_live_broker_whose_log_dirs_are_unknown_makes_the_balance_unknown_never_a_proposal(caplog):
    caplog.set_level(logging.INFO)
    dirs = [{"broker_id": 1, "state": "ok"}, {"broker_id": 2, "state": "ok"}]
    dirs.append({"broker_id": 3, "state": "unknown", "reason": "DescribeLogDirs timed out"})
    rep = report(SKEWED, log_dirs=dirs)
    judged = judge_balance(rep, TARGETS)
    assert judged.state == UNKNOWN and all(k.state == UNKNOWN for k in judged.kinds)
    assert judged.as_dict()["unknown_brokers"] == {"3": "log dirs unknown: DescribeLogDirs timed out"}
    rep["balance"] = judged.as_dict()
    assert "balance unknown" in [r.decision for r in log_findings(rep)]
    proposal = propose_rebalance(inputs(rep), no_runs_active)
    assert not proposal.start and proposal.decision == "no proposal: balance unknown"


def test_a_count_missing_from_the_report_is_unknown_not_zero():
    """A report without preferred leaders (an older job) leaves the preferred-leader count unknown."""
    rep = report([{k: v for k, v in b.items() if k != "preferred_leader_count"} for b in SKEWED])
    judged = judge_balance(rep, TARGETS)
    assert judged.state == UNKNOWN
    assert judged.unknown[1] == "no preferred_leader_count in the report"


def test_report_only_by_default_recorded_with_what_is_out(caplog):
    caplog.set_level(logging.INFO)
    rep = report(SKEWED)
    rep["balance"] = judge_balance(rep, TARGETS).as_dict()
    findings = log_findings(rep)
    assert [r.decision for r in findings] == [
        "out of the target spread: replicas spread 6 > 1 (target 10%), over by 5"
    ]
    assert "at least 4 replicas move(s)" in findings[0].reason
    proposal = propose_rebalance(inputs(rep, enabled=False), no_runs_active)
    assert (proposal.start, proposal.decision, proposal.conf) == (False, "report only", {})
    assert "start_rebalance is off (the default)" in proposal.why
    assert caplog.records[-1].levelno == logging.WARNING and "report only" in caplog.records[-1].getMessage()


def test_enabled_it_starts_one_gated_full_rebalance_with_the_targets_it_judged():
    proposal = propose_rebalance(inputs(report(SKEWED)), no_runs_active)
    assert proposal.start and proposal.run_id == "health__kafka_default__scheduled_1"
    assert proposal.conf == {
        "mode": "full",
        "max_replica_spread": "10%",
        "max_leader_spread": "10%",
        "max_bytes_spread_percent": 20.0,
        "require_approval": True,
        "dry_run": False,
        "kafka_config_id": "kafka_default",
    }


def test_never_while_a_reassignment_runs_on_the_cluster():
    asked = []

    def active():
        asked.append(1)
        return ["kafka_broker_decommission/manual__1"]

    proposal = propose_rebalance(inputs(report(SKEWED)), active)
    assert asked and not proposal.start
    assert proposal.decision == "do not start another reassignment"
    assert "kafka_broker_decommission/manual__1" in proposal.why


def test_held_back_by_a_failed_broker_an_offline_log_dir_or_a_recent_proposal():
    def must_not_ask():
        raise AssertionError("the active runs are read only when everything else allows a start")

    down = report([*SKEWED, broker(4, 3, 1, alive=False)])
    assert propose_rebalance(inputs(down), must_not_ask).decision == "no proposal: the heal goes first"
    dirs = [{"broker_id": b, "state": "ok"} for b in (1, 2)] + [{"broker_id": 3, "state": "offline dirs"}]
    offline = report(SKEWED, log_dirs=dirs)
    assert propose_rebalance(inputs(offline), must_not_ask).decision == (
        "no proposal: the log-dir failure goes first"
    )
    recent = inputs(report(SKEWED), last=LastProposal("health__kafka_default__x", NOW_MS - 60_000))
    assert propose_rebalance(recent, must_not_ask).decision == "wait"
    old = inputs(report(SKEWED), last=LastProposal("health__kafka_default__x", NOW_MS - 3_600_000))
    assert propose_rebalance(old, no_runs_active).start


def test_balanced_proposes_nothing():
    rep = report([broker(1, 10, 4), broker(2, 11, 4), broker(3, 10, 5)])
    proposal = propose_rebalance(inputs(rep), no_runs_active)
    assert not proposal.start and proposal.decision == "nothing to propose"


def test_topics_below_the_minimum_replication_factor_are_a_finding():
    rep = report(SKEWED[:1])
    rep["replication"] = {
        "minimum": 3,
        "minimum_from": "min(3, live brokers)",
        "below_minimum": 2,
        "listed": [{"topic": "audit", "replication_factor": 1}, {"topic": "logs", "replication_factor": 2}],
        "truncated": False,
    }
    (finding,) = [r for r in log_findings(rep) if "replication factor" in r.decision]
    assert finding.decision == "2 topic(s) below replication factor 3"
    assert finding.observed["topics"] == ["audit (RF 1)", "logs (RF 2)"]
    assert "min(3, live brokers)" in finding.reason


def _below(rep, minimum=3, count=2):
    rep["replication"] = {
        "minimum": minimum,
        "minimum_from": "min(3, live brokers)",
        "below_minimum": count,
        "listed": [{"topic": "audit", "replication_factor": 1}],
        "truncated": False,
    }
    return rep


def test_topics_below_the_minimum_rf_are_proposed_first_as_a_replication_factor_run():
    """Durability before balance: with topics below the minimum RF the one run proposed raises them
    (mode replication-factor, to the minimum), whether or not the spread is also out."""
    for brokers in (SKEWED, [broker(1, 10, 4), broker(2, 11, 4), broker(3, 10, 5)]):  # out, within
        proposal = propose_rebalance(inputs(_below(report(brokers))), no_runs_active)
        assert proposal.start and proposal.conf == {
            "mode": "replication-factor",
            "replication_factor": 3,
            "require_approval": True,
            "dry_run": False,
            "kafka_config_id": "kafka_default",
        }
        assert proposal.why.startswith("2 topic(s) below replication factor 3;")


def test_below_the_minimum_rf_with_the_setting_off_reports_which_mode_to_trigger():
    proposal = propose_rebalance(inputs(_below(report(SKEWED)), enabled=False), no_runs_active)
    assert not proposal.start and proposal.decision == "report only"
    assert proposal.why.startswith("2 topic(s) below replication factor 3; start_rebalance is off")
    assert "(mode replication-factor)" in proposal.why


def test_below_the_minimum_rf_on_an_unknown_balance_is_no_proposal():
    dirs = [{"broker_id": 1, "state": "ok"}, {"broker_id": 2, "state": "ok"}]
    dirs.append({"broker_id": 3, "state": "unknown", "reason": "DescribeLogDirs timed out"})
    proposal = propose_rebalance(inputs(_below(report(SKEWED, log_dirs=dirs))), no_runs_active)
    assert not proposal.start and proposal.decision == "no proposal: balance unknown"


# ------------------------------------------------------------------ bytes per live broker

EVEN = [broker(1, 10, 4), broker(2, 10, 4), broker(3, 10, 4)]


def test_bytes_out_of_spread_alone_are_judged_with_the_planners_rule_and_proposed(caplog):
    """Counts even, bytes 1000 / 1000 / 1600: the limit is 20 % of the mean 1200 (bytes_spread_limit,
    the planner's and the plan check's unit), the spread 600 is over it by 360; the finding says so
    and the one run proposed is a full rebalance carrying the bytes target as kafka_rebalance's number."""
    caplog.set_level(logging.INFO)
    rep = report([*EVEN[:2], broker(3, 10, 4, size=1600)])
    judged = judge_balance(rep, TARGETS)
    sizes = {1: 1000, 2: 1000, 3: 1600}
    assert judged.bytes.limit == bytes_spread_limit("20", sizes, [1, 2, 3]) == 240
    assert within_bytes_spread(sizes, [1, 2, 3], 240) is False
    assert (judged.bytes.state, judged.bytes.spread, judged.bytes.over_by) == (OUT_OF_SPREAD, 600, 360)
    assert [k.state for k in judged.kinds] == [BALANCED, BALANCED] and judged.state == OUT_OF_SPREAD
    rep["balance"] = judged.as_dict()
    (finding,) = log_findings(rep)
    assert (
        finding.decision
        == "out of the target spread: bytes spread 600 > 240 (target 20% of the mean), over by 360"
    )
    assert finding.observed["bytes"]["per_broker"] == {"1": 1000, "2": 1000, "3": 1600}
    proposal = propose_rebalance(inputs(rep), no_runs_active)
    assert proposal.start and proposal.conf["mode"] == "full"
    assert proposal.conf["max_bytes_spread_percent"] == 20.0
    assert "bytes spread 600 above 240 (target 20% of the mean)" in proposal.why


def test_bytes_within_the_target_are_balanced():
    judged = judge_balance(report([*EVEN[:2], broker(3, 10, 4, size=1200)]), TARGETS)
    assert (judged.bytes.state, judged.bytes.spread, judged.bytes.limit) == (BALANCED, 200, 213)
    assert judged.state == BALANCED


def test_a_broker_without_a_size_leaves_the_bytes_unknown_never_zero_nor_balanced(caplog):
    """A live broker whose size the report lacks (a replica its log dirs did not list) or whose dir is
    offline: the bytes are unknown (no limit from a mean nobody read, no spread), named with why, a
    WARNING, and no proposal on it; counts out of spread are still judged and proposed on."""
    caplog.set_level(logging.INFO)
    rep = report([*EVEN[:2], broker(3, 10, 4, size=None)])
    judged = judge_balance(rep, TARGETS)
    assert (judged.bytes.state, judged.bytes.limit, judged.bytes.spread) == (UNKNOWN, None, None)
    assert judged.bytes.per_broker == {1: 1000, 2: 1000, 3: None}
    assert judged.bytes.unknown == {3: "no size_bytes in the report"} and judged.state == UNKNOWN
    rep["balance"] = judged.as_dict()
    assert [r.decision for r in log_findings(rep)] == ["bytes per broker unknown"]
    proposal = propose_rebalance(inputs(rep), no_runs_active)
    assert not proposal.start and proposal.decision == "no proposal: balance unknown"
    assert "the bytes of live broker(s) [3] are unknown" in proposal.why
    dirs = [{"broker_id": b, "state": "ok"} for b in (1, 2)] + [{"broker_id": 3, "state": "offline dirs"}]
    offline = judge_balance(report(EVEN, log_dirs=dirs), TARGETS)
    assert offline.bytes.state == UNKNOWN and offline.bytes.unknown[3].startswith("log dirs offline dirs")
    skewed = report([broker(1, 10, 4), broker(2, 10, 4), broker(3, 16, 4, size=None)])
    judged = judge_balance(skewed, TARGETS)
    assert (judged.state, judged.bytes.state) == (OUT_OF_SPREAD, UNKNOWN)
    skewed["balance"] = judged.as_dict()
    assert [r.decision for r in log_findings(skewed)][1:] == ["bytes per broker unknown"]
    assert propose_rebalance(inputs(skewed), no_runs_active).start
