"""The campaign's invariants on recorded observations: each finds what it names, and only that."""

from __future__ import annotations

from kafka_runbooks_dev.chaos import invariants as inv
from kafka_runbooks_dev.chaos.watch import PartitionSeen, Sample, Watch


def sample(at, leader=9001, **parts):
    return Sample(at, leader, {name: PartitionSeen(*p) for name, p in parts.items()})


def test_a_loss_counts_unless_named_and_allowed():
    lost = {"7": (0, 7)}
    assert inv.acknowledged_loss(lost, outcome_names_loss=False, loss_allowed=True)
    assert inv.acknowledged_loss(lost, outcome_names_loss=True, loss_allowed=False)
    assert inv.acknowledged_loss(lost, outcome_names_loss=True, loss_allowed=True) == []
    assert inv.acknowledged_loss({}, False, False) == []


def test_a_long_span_without_a_leader_is_a_violation_unless_a_majority_was_away():
    samples = [sample(0), sample(1, -1), sample(13, -1), sample(14)]
    assert inv.leaderless(samples, [], majority=2) == ["no quorum leader for 13.0 s (from +1.0 s)"]
    away = [inv.Away(9001, 0.5, 20, "kill"), inv.Away(9002, 0.8, 20, "freeze")]
    assert inv.leaderless(samples, away, majority=2) == []
    assert inv.leaderless([sample(0), sample(1, -1), sample(5, -1), sample(6)], [], 2) == []
    # an unanswered read is unknown, never "no leader"
    assert inv.leaderless([sample(0), sample(1, None), sample(30, None), sample(31)], [], 2) == []


def test_min_isr_is_broken_by_the_runbook_only_through_a_broker_no_fault_touched():
    in_sync = sample(1, **{"t-0": (1, (1, 2, 3), (1, 2, 3))})
    below = sample(3, **{"t-0": (1, (1, 2, 3), (1,))})
    assert inv.min_isr_broken([in_sync, below], {"t": 2}, [inv.Away(2, 0, None, "kill")]) == [
        "t-0 at +3.0 s: ISR [1] below min.insync.replicas=2, broker(s) [3] out of it that no fault touched"
    ]
    touched = [inv.Away(2, 0, None, "kill"), inv.Away(3, 1, 9, "stop")]
    assert inv.min_isr_broken([in_sync, below], {"t": 2}, touched) == []
    at_min = sample(3, **{"t-0": (1, (1, 2, 3), (1, 2))})
    assert inv.min_isr_broken([at_min], {"t": 2}, []) == []


def test_a_replica_being_added_was_never_in_the_isr_so_it_breaks_nothing():
    """Campaign stop:9 (round 3): a heal copying to broker 3 for a partition whose other replica the
    incident killed read as "broker 3 out of the ISR that no fault touched": it was never in it."""
    adding = [sample(t, **{"t-0": (2, (4, 2, 3), (2,))}) for t in (1, 2, 3)]
    assert inv.min_isr_broken(adding, {"t": 2}, [inv.Away(4, 0, None, "kill")]) == []


def test_a_success_the_cluster_disagrees_with_is_false():
    assert inv.false_success("success", ["t-0 offline"])
    assert inv.false_success("failed", ["t-0 offline"]) == []
    assert inv.false_success("success", []) == []


def test_writes_before_the_approval_or_without_one():
    changes = [(5.0, "t-0 replicas [1, 2] -> [1, 3]")]
    assert inv.unapproved_write(changes, approved_at=8.0) == [
        "t-0 replicas [1, 2] -> [1, 3] at +5.0 s, 3.0 s before the approval"
    ]
    assert inv.unapproved_write(changes, approved_at=None)[0].endswith("with no approval")
    assert inv.unapproved_write(changes, approved_at=4.0) == []


def test_replica_set_changes_are_read_from_the_samples():
    watch = Watch(
        samples=[sample(0, **{"t-0": (1, (1, 2), (1, 2))}), sample(1, **{"t-0": (1, (1, 3), (1,))})],
        reassigning=[(0.5, ("t-0",))],
    )
    assert [at for at, _ in inv.replica_set_changes(watch, [])] == [0.5, 1]
    assert inv.leftovers({"broker 1": {"leader.replication.throttled.rate": "1"}}, {}) != []
    assert inv.no_end(False, 900) and inv.no_end(True, 900) == []


def test_a_restart_no_fault_made_is_the_runbooks_write():
    watch = Watch(pids=[(0.0, {1: 100, 2: 200}), (5.0, {1: 101, 2: 200}), (6.0, {1: 101, 2: 201})])
    assert inv.restarts(watch, [inv.Away(2, 4.0, 7.0, "kill")]) == [
        (5.0, "node 1 restarted (pid 100 -> 101)")
    ]
    assert inv.unapproved_write(inv.restarts(watch, []), approved_at=5.5)[0].startswith("node 1 restarted")


def test_a_fault_that_began_after_the_runbooks_replica_left_takes_the_blame_one_before_does_not():
    """Campaign restart:27 (round 8): broker 1 restarted after its check (ISR 1,2,4 -> 2,4: at the
    floor), broker 4 frozen 1.1 s later (ISR 2): the runbook's action alone kept min ISR."""
    in_sync = sample(1, **{"t-0": (2, (1, 2, 4), (1, 2, 4))})
    restarting = sample(2, **{"t-0": (2, (1, 2, 4), (2, 4))})
    frozen = sample(4, **{"t-0": (2, (1, 2, 4), (2,))})
    later = [inv.Away(4, 3.1, 18, "freeze")]
    assert inv.min_isr_broken([in_sync, restarting, frozen], {"t": 2}, later) == []
    # broker 4 frozen first, then the runbook took broker 1 out: the runbook's own action broke it
    first = [inv.Away(4, 0.5, 18, "freeze")]
    frozen_first = sample(2, **{"t-0": (2, (1, 2, 4), (1, 2))})
    both_out = sample(4, **{"t-0": (2, (1, 2, 4), (2,))})
    assert inv.min_isr_broken([in_sync, frozen_first, both_out], {"t": 2}, first) == [
        "t-0 at +4.0 s: ISR [2] below min.insync.replicas=2, broker(s) [1] out of it that no fault touched"
    ]
