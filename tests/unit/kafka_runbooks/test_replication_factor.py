"""kafka_rebalance mode ``replication-factor`` (Airflow-free): its params, the topics it picks from
the cluster and its refusals before the gate, the planner's placement, and the plan check that
replays the same rule units on the snapshot (one rule, two callers).

The planner's driver part is pure Python: it is run here on the job's own dataclasses, without
Spark; the snapshot rows the check reads are the same cluster written the way the snapshot is.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

from kafka_runbooks.failed_broker.plan import (
    PartitionTarget,
    Plan,
    check_plan,
    plan_model,
)
from kafka_runbooks.failed_broker.request import RequestError
from kafka_runbooks.model import Broker, ClusterState, PartitionState
from kafka_runbooks.rebalance import build_rebalance_request, resolve_rebalance
from kafka_runbooks.replication_factor import (
    RF_RULES,
    RfBrokers,
    RfSummary,
    RfTargets,
    build_rf_request,
    check_lowering,
    judge_rf,
    rf_markdown,
    select_topics,
)

JOB_PATH = Path(__file__).resolve().parents[3] / "spark_jobs" / "failed_broker_plan.py"
RACKS = {1: "a", 2: "b", 3: "a", 4: "b"}


def _job():
    spec = importlib.util.spec_from_file_location("spark_jobs_failed_broker_plan_rf_unit", JOB_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


job = _job()


def cluster(assignment: dict[tuple[str, int], list[int]], racks=RACKS, down=()) -> ClusterState:
    brokers = {b: Broker(b, rack=r, fenced=b in down) for b, r in racks.items()}
    partitions = [
        PartitionState(t, p, leader=r[0], leader_epoch=0, replicas=tuple(r), isr=tuple(r))
        for (t, p), r in assignment.items()
    ]
    return ClusterState(cluster_id="c", brokers=brokers, quorum=None, partitions=partitions)


MIXED = {
    ("one", 0): [1],
    ("one", 1): [2],
    ("two", 0): [1, 2],
    ("three", 0): [1, 2, 3],
    ("__consumer_offsets", 0): [1],
}


# --- params and the selection: refusals before the gate ------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "needs replication_factor"),
        ({"replication_factor": 0}, "at least 1"),
        ({"replication_factor": "three"}, "must be an integer"),
        ({"replication_factor": 3, "topics": "a,b", "topic_regex": "a.*"}, "not both"),
        ({"replication_factor": 3, "topic_regex": "("}, "is not a regular expression"),
        ({"replication_factor": 3, "topics": "a b"}, "Kafka topic names"),
    ],
)
def test_bad_params_are_refused_before_any_cluster_call(params, message):
    with pytest.raises(RequestError, match=message):
        build_rf_request(params)
    with pytest.raises(RequestError, match=message):  # the rebalance's check_input refuses them too
        build_rebalance_request({"mode": "replication-factor", **params})


def test_the_mode_uses_every_live_broker_and_takes_no_new_brokers():
    with pytest.raises(RequestError, match="goes with mode add-brokers"):
        build_rebalance_request({"mode": "replication-factor", "replication_factor": 2, "new_brokers": "4"})
    request = build_rebalance_request({"mode": "replication-factor", "replication_factor": 2})
    assert request.rebalance == "replication-factor"
    assert resolve_rebalance(request, cluster(MIXED)) == ([1, 2, 3, 4], [1, 2, 3, 4])
    with pytest.raises(RequestError, match=r"broker\(s\) \[3\] hold replicas but are not live"):
        resolve_rebalance(request, cluster(MIXED, down=(3,)))


def test_a_target_above_the_live_brokers_is_refused_naming_both_numbers():
    request = build_rf_request({"replication_factor": 4})
    with pytest.raises(
        RequestError, match=r"replication factor 4 is above the 3 live broker\(s\) \[1, 2, 4\]"
    ):
        select_topics(request, cluster(MIXED, down=(3,)))


def test_by_default_every_topic_with_a_partition_below_the_target_and_no_internal_one():
    selection = select_topics(build_rf_request({"replication_factor": 2}), cluster(MIXED))
    assert selection.topics == ["one"] and selection.below == {"one": 2}
    selection = select_topics(build_rf_request({"replication_factor": 3}), cluster(MIXED))
    assert selection.topics == ["one", "two"] and selection.below == {"one": 2, "two": 1}


def test_named_topics_and_a_regex_pick_exactly_those_and_internal_ones_when_named():
    named = select_topics(
        build_rf_request({"replication_factor": 3, "topics": "two,__consumer_offsets"}), cluster(MIXED)
    )
    assert named.topics == ["__consumer_offsets", "two"] and named.below == {
        "__consumer_offsets": 1,
        "two": 1,
    }
    matched = select_topics(build_rf_request({"replication_factor": 3, "topic_regex": "t.*"}), cluster(MIXED))
    assert matched.topics == ["three", "two"] and matched.below == {"two": 1}  # "three" is at the target


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"topics": "one,nope"}, r"topic\(s\) \['nope'\] do not exist"),
        ({"topic_regex": "nope.*"}, "matches no topic"),
        ({"topic_regex": "o.*"}, None),  # 'one' only: fine
        ({"topics": "three,one"}, r"lowering the replication factor is refused: topic\(s\) \{'three': 3\}"),
        ({"topic_regex": "t.*"}, r"lowering the replication factor is refused: topic\(s\) \{'three': 3\}"),
    ],
)
def test_unknown_topics_a_regex_matching_none_and_lowering_are_refused(params, message):
    request = build_rf_request({"replication_factor": 2, **params})
    if message is None:
        assert select_topics(request, cluster(MIXED)).topics == ["one"]
        return
    with pytest.raises(RequestError, match=message):
        select_topics(request, cluster(MIXED))


# --- the planner's placement and the check replaying it -------------------------------------------


def _inputs(assignment, sizes, racks=RACKS):
    brokers = {b: job.BrokerInfo(b, r, True, True) for b, r in racks.items()}
    affected = []
    for (t, p), replicas in sorted(assignment.items()):
        for i, b in enumerate(replicas):
            brokers[b].replicas += 1
            brokers[b].bytes += sizes[(t, p)]
            brokers[b].leaders += i == 0
        n = len(replicas)
        affected.append(
            job.Affected(t, p, tuple(replicas), (sizes[(t, p)],) * n, (True,) * n, (True,) * n, sizes[(t, p)])
        )
    return job.Inputs(brokers=brokers, affected=affected)


def _rows(assignment, sizes, racks=RACKS):
    rows = [
        {
            "topic": t,
            "partition": p,
            "replica": b,
            "replica_index": i,
            "in_isr": True,
            "broker_alive": True,
            "broker_rack": racks[b],
            "size_bytes": sizes[(t, p)],
        }
        for (t, p), replicas in sorted(assignment.items())
        for i, b in enumerate(replicas)
    ]
    brokers = [{"broker_id": b, "rack": r, "alive": True, "fenced": False} for b, r in racks.items()]
    return rows, brokers


def _plan(moves, figures, scope, summary_extra=None) -> Plan:
    """The plan as load_plan reads the job's files: targets, one chunk, the summary's figures."""
    targets = tuple(PartitionTarget(m.topic, m.partition, tuple(m.target)) for m in moves)
    summary = {
        **figures,
        "failed_brokers": scope,
        "receivers": scope,
        "partitions": len(moves),
        "bytes": sum(m.size for m in moves),
        "replication_factor_kept": all(len(m.target) == len(m.current) for m in moves),
        "chunks": [
            {
                "index": 1,
                "file": "chunks/0001.json",
                "partitions": len(moves),
                "bytes": sum(m.size for m in moves),
            }
        ],
        "moves": [
            {
                "topic": m.topic,
                "partition": m.partition,
                "from": list(m.current),
                "to": list(m.target),
                "bytes": m.size,
                "chunk": 1,
            }
            for m in moves
        ],
        **(summary_extra or {}),
    }
    return Plan(Path("."), tuple(scope), tuple(scope), targets, (targets,), summary)


SKEWED = {("t", p): [1 + p % 2] for p in range(4)} | {("big", 0): [1], ("other", 0): [2, 4]}
SIZES = {k: 100 for k in SKEWED} | {("big", 0): 1000}


def test_the_planner_raises_every_partition_on_racks_it_lacks_and_the_least_loaded_brokers():
    moves, figures = job.raise_replication(_inputs(SKEWED, SIZES), 3, ["big", "t"], None)
    targets = {(m.topic, m.partition): m.target for m in moves}
    assert set(targets) == {("t", 0), ("t", 1), ("t", 2), ("t", 3), ("big", 0)}
    assert all(len(set(t)) == 3 and len({RACKS[b] for b in t}) == 2 for t in targets.values())
    assert all(
        targets[k][: len(SKEWED[k])] == SKEWED[k] for k in targets
    )  # existing replicas keep their places
    # the big partition goes first: onto rack b's least loaded broker (4 holds 1, 2 holds 3), then the emptiest
    assert targets[("big", 0)] == [1, 4, 3]
    per_broker = Counter(b for k, r in SKEWED.items() for b in r) + Counter(
        b for m in moves for b in m.target[len(m.current) :]
    )
    assert max(per_broker.values()) - min(per_broker.values()) <= 1  # 4+11 replicas over four brokers
    assert figures["replicas_added"] == 10 and figures["bytes_copied"] == 4 * 2 * 100 + 2 * 1000
    assert figures["raised"] == {"big": 1, "t": 4} and figures["topics"] == ["big", "t"]


def test_the_planner_refuses_what_no_broker_fits_a_target_above_the_brokers_and_lowering():
    with pytest.raises(job.PlanImpossible, match=r"cannot reach replication factor 3 on racks they lack"):
        job.raise_replication(_inputs(SKEWED, SIZES), 3, ["t"], {1: 10**6, 3: 10**6})  # rack b has no room
    with pytest.raises(job.PlanImpossible, match=r"replication factor 5 is above the 4 live broker\(s\)"):
        job.raise_replication(_inputs(SKEWED, SIZES), 5, ["t"], None)
    with pytest.raises(job.PlanImpossible, match=r"\['other'\] are above replication factor 1"):
        job.raise_replication(_inputs(SKEWED, SIZES), 1, ["other"], None)


def test_the_check_replays_the_planners_rule_on_the_snapshot_and_agrees():
    moves, figures = job.raise_replication(_inputs(SKEWED, SIZES), 3, ["big", "t"], {b: 10**6 for b in RACKS})
    plan = _plan(moves, figures, [1, 2, 3, 4])
    model = plan_model(plan, *_rows(SKEWED, SIZES))
    for rule in (RfBrokers(), RfTargets(), RfSummary()):
        assert rule.check(plan, model) == [], rule.name


def test_the_check_refuses_a_target_the_rule_does_not_give_a_forgotten_partition_and_wrong_figures():
    moves, figures = job.raise_replication(_inputs(SKEWED, SIZES), 3, ["big", "t"], None)
    rows = _rows(SKEWED, SIZES)
    big = next(m for m in moves if m.topic == "big")
    big.target[1:] = [2, 3]  # racks b and a still, but not the least loaded of rack b
    swapped = _plan(moves, figures, [1, 2, 3, 4])
    assert [v.message for v in RfTargets().check(swapped, plan_model(swapped, *rows))] == [
        "big-0: planned [1, 2, 3], the rule gives [1, 4, 3]"
    ]
    forgotten = _plan([m for m in moves if m.topic != "big"], figures, [1, 2, 3, 4])
    found = RfTargets().check(forgotten, plan_model(forgotten, *rows))
    assert [v.message for v in found] == ["big-0 is below the target but not planned"]
    wrong = _plan(moves, figures, [1, 2, 3, 4], {"replicas_added": 9})
    assert "replicas_added" in RfSummary().check(wrong, plan_model(wrong, *rows))[0].message
    low = _plan(moves, figures, [1, 2, 3, 4], {"replication_factor": 5})
    assert (
        "is not between 1 and the 4 live brokers" in RfBrokers().check(low, plan_model(low, *rows))[0].message
    )


def test_check_plan_holds_a_replication_factor_plan_to_its_own_rules():
    moves, figures = job.raise_replication(_inputs(SKEWED, SIZES), 3, ["t"], None)
    plan = _plan(moves, figures, [1, 2, 3, 4])
    rules = {v.rule for v in check_plan(plan, *_rows(SKEWED, SIZES), RF_RULES)}
    # no per-broker figures in this hand-made summary: only that family speaks, none of the rebalance's
    assert rules == {"per-broker figures"} and len(RF_RULES) == 6
    # the plan module does not know the replication-factor rules (they build on it): without them
    # such a plan is refused outright, never judged by the heal's or the rebalance's rules
    with pytest.raises(ValueError, match="RF_RULES"):
        check_plan(plan, *_rows(SKEWED, SIZES))


def _per_broker(assignment, sizes, inputs) -> dict[str, dict]:
    """The summary's per-broker figures as write_plan gives them: before from the cluster, after
    from the planner's brokers (raise_replication counts each new replica on its broker)."""
    before = _inputs(assignment, sizes).brokers
    return {
        str(b): {
            "replicas_before": before[b].replicas,
            "replicas_after": info.replicas,
            "bytes_before": before[b].bytes,
            "bytes_after": info.bytes,
            "leaders_before": before[b].leaders,
            "leaders_after": info.leaders,
            "rack": info.rack,
        }
        for b, info in inputs.brokers.items()
    }


def test_the_review_passes_a_whole_plan_and_records_what_it_checked():
    from kafka_runbooks import decisions
    from kafka_runbooks.failed_broker import runbook

    inputs = _inputs(SKEWED, SIZES)
    moves, figures = job.raise_replication(inputs, 3, ["big", "t"], {b: 10**6 for b in RACKS})
    plan = _plan(moves, figures, [1, 2, 3, 4], {"per_broker": _per_broker(SKEWED, SIZES, inputs)})
    assert check_plan(plan, *_rows(SKEWED, SIZES), RF_RULES) == []
    decisions.forget()
    runbook.review(plan, *_rows(SKEWED, SIZES), plan.summary)
    reason = decisions.made()[-1].reason
    assert reason.startswith("every rule holds (each partition of the topics below the target raised exactly")


def test_the_gate_names_the_topics_partitions_replicas_added_data_and_each_broker():
    moves, figures = job.raise_replication(_inputs(SKEWED, SIZES), 3, ["big"], None)
    summary = _plan(moves, figures, [1, 2, 3, 4]).summary | {
        "per_broker": {
            "1": {
                "rack": "a",
                "replicas_before": 3,
                "replicas_after": 3,
                "bytes_before": 1200,
                "bytes_after": 1200,
            }
        }
        | {
            "4": {
                "rack": "b",
                "replicas_before": 1,
                "replicas_after": 2,
                "bytes_before": 100,
                "bytes_after": 1100,
            }
        },
    }
    text = rf_markdown(summary, 10 << 20, "/plans/x")
    assert (
        "Replication factor **3** for **1** topic(s): **1** partition(s) changed, **2** replica(s) added"
        in text
    )
    assert "| `big`-0 | [1] → [1, 4, 3] | - |" in text and "| 4 | b | 1 → 2 |" in text


def test_the_read_back_wants_every_partition_of_the_topics_at_the_target_and_in_sync():
    state = cluster({("t", 0): [1, 2, 3], ("t", 1): [1, 2], ("u", 0): [1]})
    seen = judge_rf(state, ["t"], 3)
    assert not seen.done and seen.off_target == ["t-1 [1, 2]"]
    assert judge_rf(state, ["u"], 1).done
    lagging = cluster({("t", 0): [1, 2, 3]})
    lagging.partitions[0] = PartitionState("t", 0, leader=1, leader_epoch=0, replicas=(1, 2, 3), isr=(1, 2))
    assert judge_rf(lagging, ["t"], 3).isr_short == ["t-0"]


# --- lowering: only when asked, never below min.insync.replicas, only in-sync replicas kept --------

LOWER = {"replication_factor": 2, "allow_replication_factor_decrease": True}


def test_lowering_is_asked_for_with_a_boolean_and_then_selects_the_topics_above():
    assert build_rf_request({"replication_factor": 2}).allow_decrease is False
    for bad in ("yes", 1, "true"):
        with pytest.raises(RequestError, match="allow_replication_factor_decrease must be true or false"):
            build_rebalance_request(
                {
                    "mode": "replication-factor",
                    "replication_factor": 2,
                    "allow_replication_factor_decrease": bad,
                }
            )
    selection = select_topics(build_rf_request({**LOWER, "topic_regex": "t.*|one"}), cluster(MIXED))
    assert selection.above == {"three": 1} and selection.below == {"one": 2}
    assert selection.changed == ["one", "three"]


def _lagging(isr):
    state = cluster({("three", 0): [1, 2, 3], ("three", 1): [2, 3, 4]})
    state.partitions[0] = PartitionState("three", 0, leader=1, leader_epoch=0, replicas=(1, 2, 3), isr=isr)
    return state


def test_a_lowering_is_refused_below_min_insync_replicas_and_when_it_is_unknown():
    state = _lagging((1, 2, 3))
    selection = select_topics(build_rf_request({**LOWER, "topics": "three"}), state)
    check_lowering(selection, state, {"three": 2})  # at min.insync.replicas: allowed
    with pytest.raises(
        RequestError, match=r"below the effective min.insync.replicas of topic\(s\) \{'three': 3\}"
    ):
        check_lowering(selection, state, {"three": 3})
    for unread in ({}, {"three": None}):  # unknown is refused, never taken as 1
        with pytest.raises(
            RequestError, match=r"min.insync.replicas of topic\(s\) \['three'\] could not be read"
        ):
            check_lowering(selection, state, unread)


def test_a_lowering_is_refused_when_a_partition_has_fewer_in_sync_replicas_than_the_target():
    selection = select_topics(build_rf_request({**LOWER, "topics": "three"}), _lagging((1, 3)))
    check_lowering(selection, _lagging((1, 3)), {"three": 1})  # drops 2 (out of sync), keeps 1 and 3
    with pytest.raises(RequestError, match=r"three-0 replicas \[1, 2, 3\] ISR \[3\]"):
        check_lowering(selection, _lagging((3,)), {"three": 1})  # would keep 1 or 2, out of sync


LOWERED = {("t", 0): [1, 2, 3], ("t", 1): [2, 3, 4], ("u", 0): [1]}
LOWERED_SIZES = {k: 100 for k in LOWERED}


def test_the_planner_lowers_only_when_asked_keeping_the_preferred_leader_and_the_racks():
    with pytest.raises(job.PlanImpossible, match="without --allow-replication-factor-decrease=true"):
        job.raise_replication(_inputs(LOWERED, LOWERED_SIZES), 2, ["t", "u"], None)
    moves, figures = job.raise_replication(_inputs(LOWERED, LOWERED_SIZES), 2, ["t", "u"], None, True)
    targets = {(m.topic, m.partition): m.target for m in moves}
    # u-0 raised first (rack b, the fewest replicas); then t-0 drops 3 (rack a twice), t-1 drops 4 (rack b twice)
    assert targets == {("u", 0): [1, 4], ("t", 0): [1, 2], ("t", 1): [2, 3]}
    assert figures["replicas_removed"] == 2 and figures["replicas_added"] == 1
    assert figures["lowered"] == {"t": 2} and figures["raised"] == {"u": 1}
    assert figures["allow_replication_factor_decrease"] is True and figures["bytes_copied"] == 100


def test_the_planner_refuses_a_lowering_that_would_keep_a_replica_out_of_the_isr():
    inputs = _inputs(LOWERED, LOWERED_SIZES)
    t0 = next(p for p in inputs.affected if (p.topic, p.partition) == ("t", 0))
    inputs.affected[inputs.affected.index(t0)] = job.Affected(
        "t", 0, t0.replicas, t0.sizes, (False, False, True), t0.alive, t0.size
    )
    with pytest.raises(job.PlanImpossible, match=r"cannot be lowered to replication factor 2 keeping only"):
        job.raise_replication(inputs, 2, ["t"], None, True)


def test_the_check_replays_the_drop_rule_and_refuses_another_drop_or_a_lowering_not_allowed():
    moves, figures = job.raise_replication(_inputs(LOWERED, LOWERED_SIZES), 2, ["t", "u"], None, True)
    rows = _rows(LOWERED, LOWERED_SIZES)
    plan = _plan(moves, figures, [1, 2, 3, 4])
    for rule in (RfBrokers(), RfTargets(), RfSummary()):
        assert rule.check(plan, plan_model(plan, *rows)) == [], rule.name
    t0 = next(m for m in moves if (m.topic, m.partition) == ("t", 0))
    t0.target[:] = [2, 3]  # drops the preferred leader instead
    swapped = _plan(moves, figures, [1, 2, 3, 4])
    assert [v.message for v in RfTargets().check(swapped, plan_model(swapped, *rows))] == [
        "t-0: planned [2, 3], the rule gives [1, 2]"
    ]
    t0.target[:] = [1, 2]
    unasked = _plan(moves, figures, [1, 2, 3, 4], {"allow_replication_factor_decrease": False})
    found = [v.message for v in RfTargets().check(unasked, plan_model(unasked, *rows))]
    assert "t-0: the rules find no broker, too few racks, or no safe lowering for it" in found


def test_the_review_passes_a_lowering_with_its_per_broker_figures():
    from kafka_runbooks.failed_broker import runbook

    inputs = _inputs(LOWERED, LOWERED_SIZES)
    moves, figures = job.raise_replication(inputs, 2, ["t", "u"], {b: 10**6 for b in RACKS}, True)
    per_broker = _per_broker(LOWERED, LOWERED_SIZES, inputs)
    assert per_broker["3"]["replicas_after"] == 1 and per_broker["4"]["replicas_after"] == 1  # 3 dropped one
    plan = _plan(moves, figures, [1, 2, 3, 4], {"per_broker": per_broker})
    assert check_plan(plan, *_rows(LOWERED, LOWERED_SIZES), RF_RULES) == []
    runbook.review(plan, *_rows(LOWERED, LOWERED_SIZES), plan.summary)


def test_the_gate_names_every_dropped_replica():
    moves, figures = job.raise_replication(_inputs(LOWERED, LOWERED_SIZES), 2, ["t"], None, True)
    summary = _plan(moves, figures, [1, 2, 3, 4]).summary | {"per_broker": {}}
    text = rf_markdown(summary, 10 << 20, "/plans/x")
    assert "**Lowering** (allow_replication_factor_decrease): **2** replica(s) dropped" in text
    assert "| `t`-0 | [1, 2, 3] → [1, 2] | [3] |" in text and "| `t`-1 | [2, 3, 4] → [2, 3] | [4] |" in text
