"""The plan check's bytes spread family (``RebalanceBytes``): it re-derives the bytes spread before
and after from the snapshot and the plan with the planner's own units (``bytes_spread_limit``,
``within_bytes_spread``), refuses a summary whose figures differ or that calls the targets reached
outside the spread, and never calls unknown bytes within (or 0)."""

from __future__ import annotations

from kafka_runbooks.failed_broker.plan import PartitionTarget, Plan, RebalanceBytes, plan_model

SIZES = {0: 100, 1: 100, 2: 500, 3: 500}  # partition -> bytes; RF 1: p0, p1 on broker 1, p2, p3 on 2


def rows(unreported: int | None = None) -> list[dict]:
    out = []
    for p, size in SIZES.items():
        b = 1 if p < 2 else 2
        out.append(
            {
                "topic": "t",
                "partition": p,
                "replica": b,
                "replica_index": 0,
                "in_isr": True,
                "broker_alive": True,
                "broker_rack": None,
                "size_bytes": None if b == unreported else size,
            }
        )
    return out


BROKERS = [{"broker_id": b, "rack": None, "alive": True, "fenced": False} for b in (1, 2)]


def plan(targets: dict[int, int], bytes_figures: dict, reached: bool = True) -> Plan:
    summary = {
        "rebalance": "full",
        "failed_brokers": [1, 2],
        "receivers": [1, 2],
        "reached": reached,
        "why_not": None if reached else "said why",
        "spread": {"bytes": bytes_figures},
    }
    partitions = tuple(PartitionTarget("t", p, (b,)) for p, b in targets.items())
    return Plan(None, (1, 2), (1, 2), partitions, (partitions,), summary)


def check(p: Plan, unreported: int | None = None) -> list[str]:
    return [v.message for v in RebalanceBytes().check(p, plan_model(p, rows(unreported), BROKERS))]


# swapping p2 (500) on broker 2 for p0 (100) on broker 1: 200 / 1000 before, 600 / 600 after
SWAP = {2: 1, 0: 2}
RIGHT = {"target": "20", "limit": 120, "unknown": [], "before": 800, "after": 0}


def test_a_plan_within_the_bytes_spread_with_true_figures_passes():
    assert check(plan(SWAP, RIGHT)) == []


def test_figures_the_snapshot_does_not_give_are_caught():
    said = check(plan(SWAP, {**RIGHT, "after": 10, "limit": 300}))
    assert said and "bytes spread figures wrong" in said[0] and "'limit': (300, 120)" in said[0]


def test_a_plan_said_to_reach_the_targets_outside_the_bytes_spread_is_caught():
    # nothing moved: 200 against 1000 stays, the summary (figures right) still says reached
    said = check(plan({}, {**RIGHT, "after": 800}))
    assert said == ["summary says the targets are reached, the bytes spread is 800"]
    assert check(plan({}, {**RIGHT, "after": 800}, reached=False)) == []


def test_unknown_bytes_are_named_and_never_called_within():
    unknown = {"target": "20", "limit": None, "unknown": [2], "before": None, "after": None}
    assert check(plan(SWAP, unknown, reached=False), unreported=2) == []
    said = check(plan(SWAP, unknown, reached=True), unreported=2)
    assert any("the targets are reached" in s for s in said)  # unknown is not within
    said = check(plan(SWAP, {**RIGHT}, reached=False), unreported=2)  # summary hides the unknown
    assert said and "'unknown': ([], [2])" in said[0]


def test_no_bytes_target_asked_is_not_judged():
    assert check(plan({}, {"target": None, "before": 800, "after": 800})) == []
