"""``check_plan``'s rules one at a time: each family is a unit of its own behind ``PlanRule``.

The plans and snapshot are the hand-made ones of test_plan.py (beside this file) (broker 5 failed);
a defect is put in the plan in memory and only the rule that owns it may report it.
"""

from __future__ import annotations

import dataclasses

import pytest

from kafka_runbooks.failed_broker import plan as planning
from kafka_runbooks.failed_broker.plan import RULES, PartitionTarget, check_plan, plan_model
from tests.unit.kafka_runbooks.failed_broker.test_plan import (
    GOOD_TARGETS,
    broker_rows,
    good_plan,
    replica_rows,
)


def only_rule_reporting(plan) -> dict[str, list[str]]:
    """{rule name: its violations} for the rules that report anything, each run alone."""
    model = plan_model(plan, replica_rows(), broker_rows())
    return {rule.name: found for rule in RULES if (found := rule.check(plan, model))}


def with_target(plan, key, replicas):
    """``plan`` with one partition's target changed in plan.json and its chunk alike."""
    swap = {key: PartitionTarget(key[0], key[1], tuple(replicas))}
    return dataclasses.replace(
        plan,
        partitions=tuple(swap.get(t.key, t) for t in plan.partitions),
        chunks=tuple(tuple(swap.get(t.key, t) for t in chunk) for chunk in plan.chunks),
    )


def test_the_rules_have_names_of_their_own_and_pass_a_good_plan(tmp_path):
    assert len({rule.name for rule in RULES}) == len(RULES) == 8
    assert only_rule_reporting(good_plan(tmp_path)) == {}


def test_check_plan_runs_the_rules_it_is_given_in_order(tmp_path):
    class Always:
        name = "always"

        def __init__(self, text):
            self.text = text

        def check(self, plan, model):
            return [self.text]

    plan = dataclasses.replace(good_plan(tmp_path), receivers=(1, 5))
    assert check_plan(plan, replica_rows(), broker_rows(), rules=[]) == []
    assert check_plan(plan, replica_rows(), broker_rows(), rules=[Always("b"), Always("a")]) == ["b", "a"]
    assert check_plan(plan, replica_rows(), broker_rows(), rules=[Always(str(i)) for i in range(60)])[-1] == (
        "... and 10 more violations"
    )


def test_a_violation_names_its_rule_and_partition_and_reads_as_its_sentence(tmp_path):
    plan = good_plan(tmp_path)
    plan = dataclasses.replace(plan, partitions=tuple(t for t in plan.partitions if t.key != ("t", 0)))
    (found,) = planning.PlannedPartitions().check(plan, plan_model(plan, replica_rows(), broker_rows()))
    sentence = "t-0 [5, 1, 2] has a replica on a failed broker but is not planned"
    assert (found.rule, found.topic, found.partition, found.message) == (
        "which partitions move",
        "t",
        0,
        sentence,
    )
    assert str(found) == sentence and found == sentence and "failed broker" in found
    assert repr([found]) == repr([sentence]) and {found} == {sentence}
    assert found != planning.Violation("chunks", "t", 0, sentence)


def test_a_violation_about_a_broker_names_no_partition(tmp_path):
    plan = dataclasses.replace(good_plan(tmp_path), receivers=(1, 5))
    found = planning.NamedBrokers().check(plan, plan_model(plan, replica_rows(), broker_rows()))
    assert [(v.rule, v.topic, v.partition) for v in found] == [("brokers named by the plan", None, None)] * 2
    assert [str(v) for v in found] == [
        "receivers include failed broker(s) [5]",
        "receiver(s) [5] not live brokers",
    ]


def test_named_brokers(tmp_path):
    plan = dataclasses.replace(good_plan(tmp_path), receivers=(1, 2, 3, 4, 5), failed_brokers=(5, 9))
    assert only_rule_reporting(plan)["brokers named by the plan"] == [
        "failed broker(s) [9] unknown to the snapshot",
        "receivers include failed broker(s) [5]",
        "receiver(s) [5] not live brokers",
    ]


def test_planned_partitions(tmp_path):
    plan = good_plan(tmp_path)
    plan = dataclasses.replace(plan, partitions=tuple(t for t in plan.partitions if t.key != ("t", 0)))
    found = only_rule_reporting(plan)
    assert found["which partitions move"] == [
        "t-0 [5, 1, 2] has a replica on a failed broker but is not planned"
    ]
    assert "each partition's target" not in found


def test_partition_targets(tmp_path):
    found = only_rule_reporting(with_target(good_plan(tmp_path), ("t", 2), [2, 3, 3]))
    assert found["each partition's target"] == ["t-2: target [2, 3, 3] names a broker twice"]
    found = only_rule_reporting(with_target(good_plan(tmp_path), ("t", 2), [2, 3]))
    assert found["each partition's target"] == ["t-2: replication factor 3 becomes 2"]


def test_receiver_balance_counts_the_replaced_slots(tmp_path):
    plan = good_plan(tmp_path)
    model = plan_model(plan, replica_rows(), broker_rows())
    assert sorted(model.replaced()) == [(("t", 0), 0, 3), (("t", 1), 1, 2), (("t", 2), 2, 1)]
    assert planning.ReceiverBalance().check(plan, model) == []
    unbalanced = with_target(with_target(plan, ("t", 1), [1, 3, 4]), ("t", 2), [2, 3, 4])
    model = plan_model(unbalanced, replica_rows(), broker_rows())
    assert planning.ReceiverBalance().check(unbalanced, model) == [
        "unbalanced: receiver 3 gets 2 replicas, t-1 could go to receiver 2 with 0"
    ]


def test_preferred_leader_balance(tmp_path):
    plan = with_target(good_plan(tmp_path), ("t", 0), [1, 3, 2])
    model = plan_model(plan, replica_rows(), broker_rows())
    assert model.leaders_after()[1] == 2 and model.leaders_after()[3] == 0
    assert planning.PreferredLeaderBalance().check(plan, model) == [
        "preferred leaders unbalanced: t-0 gets preferred leader 1 with 2 preferred leaderships, "
        "its replica 3 has 0"
    ]


def test_chunks(tmp_path):
    plan = good_plan(tmp_path)
    plan = dataclasses.replace(plan, chunks=plan.chunks[:1])
    found = only_rule_reporting(plan)
    assert found == {"chunks": ["summary lists 2 chunks, 1 read", "t-2 is in no chunk"]}


@pytest.mark.parametrize(
    ("change", "rule", "expected"),
    [
        ({"partitions": 7}, "summary figures", "summary says 7 partitions, plan.json has 3"),
        ({"per_broker": {}}, "per-broker figures", "summary has no per-broker entry for broker 1"),
    ],
)
def test_summary_and_per_broker_figures(tmp_path, change, rule, expected):
    plan = good_plan(tmp_path)
    plan = dataclasses.replace(plan, summary={**plan.summary, **change})
    found = only_rule_reporting(plan)
    assert list(found) == [rule] and found[rule][0] == expected


def test_the_model_reads_a_one_shot_iterator_of_rows(tmp_path):
    model = plan_model(good_plan(tmp_path), iter(replica_rows()), broker_rows())
    assert model.current[("t", 0)] == (5, 1, 2) and model.size[("t", 0)] == 100
    assert model.count[5] == 4 and model.leaders[5] == 2 and model.alive[5] is False
    assert ("t", 3) not in model.rows_of  # untouched partitions are not kept
    assert set(GOOD_TARGETS) <= set(model.planned)
