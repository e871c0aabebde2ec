"""The reassignment's decisions in ``kafka_runbooks.failed_broker.runbook``, each tried alone."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path

import pytest

from kafka_runbooks.evidence import ClusterTimeouts
from kafka_runbooks.failed_broker import runbook
from kafka_runbooks.failed_broker.request import RequestError, build_request
from kafka_runbooks.model import Broker, ClusterState, PartitionState


def state(*parts: PartitionState) -> ClusterState:
    """Brokers 1-3 up, 4 fenced."""
    brokers = {b: Broker(broker_id=b) for b in (1, 2, 3)}
    brokers[4] = Broker(broker_id=4, fenced=True)
    return ClusterState(cluster_id="c", brokers=brokers, quorum=None, partitions=list(parts))


ON_4 = PartitionState("t", 0, 1, 1, (1, 4), (1,))
HEALED = PartitionState("t", 0, 1, 2, (1, 2), (1, 2))
MOVING = {"replicas": [1, 4, 2], "adding": [2], "removing": [4]}


def test_our_own_reassignment_in_flight_is_adopted():
    assert runbook.adopt_or_refuse({"t:0": MOVING}, {"t:0": [1, 2]}, dry_run=False) == {"t:0": [1, 2]}
    assert runbook.adopt_or_refuse({}, {"t:0": [1, 2]}, dry_run=False) == {}


def test_a_dry_run_refuses_to_plan_from_a_half_moved_cluster():
    with pytest.raises(RequestError, match="a dry run would plan from a half-moved cluster"):
        runbook.adopt_or_refuse({"t:0": MOVING}, {"t:0": [1, 2]}, dry_run=True)


def test_a_reassignment_to_another_target_than_ours_is_foreign():
    with pytest.raises(RequestError, match="1 partition reassignment"):
        runbook.adopt_or_refuse({"t:0": MOVING}, {"t:0": [1, 3]}, dry_run=False)


def test_nothing_to_do_when_no_failed_broker_hosts_a_replica():
    assert runbook.nothing_to_do(state(ON_4), [])
    assert runbook.nothing_to_do(state(HEALED), [4])
    assert not runbook.nothing_to_do(state(ON_4), [4])


def test_validate_records_the_adoption_and_where_it_came_from(caplog):
    caplog.set_level(logging.INFO)
    checked = runbook.validate(
        build_request({}),
        state(ON_4),
        [4],
        [1, 2, 3],
        {"t:0": MOVING},
        {"t:0": ([1, 2], Path("/data/run-a/adopt-state.json"))},
    )
    assert checked == runbook.Validation(
        [4],
        [1, 2, 3],
        {"t:0": [1, 2]},
        nothing_to_do=False,
        partitions_on_failed=1,
        adopted_from={"t:0": "run-a"},
    )
    assert not [r for r in caplog.records if "DECISION validate" in r.getMessage()]
    checked.record(build_request({}))
    record = next(r.getMessage() for r in caplog.records if "DECISION validate" in r.getMessage())
    assert "go on to the plan" in record and "run-a" in record


@pytest.mark.parametrize(
    ("part", "planned", "left", "what"),
    [
        (PartitionState("t", 0, 1, 1, (1, 4), (1, 4)), {}, {}, "naming_failed"),
        (PartitionState("t", 0, 1, 2, (1, 2), (1,)), {}, {}, "isr_short"),
        (HEALED, {"t:0": [1, 3]}, {}, "off_plan"),
        (
            HEALED,
            {"t:0": [2, 1]},
            {"broker-1": {"leader.replication.throttled.rate": "10"}},
            "throttles_left",
        ),
    ],
)
def test_each_part_of_the_healed_rule_can_fail_alone(caplog, part, planned, left, what):
    seen = runbook.healing(state(part), {4}, planned, left)
    assert not seen.healed and getattr(seen, what)
    assert [f for f in ("naming_failed", "isr_short", "off_plan", "throttles_left") if getattr(seen, f)] == [
        what
    ]
    caplog.set_level(logging.INFO)
    with pytest.raises(runbook.NotHealed, match="not healed"):
        runbook.verify(state(part), {4}, planned, left)
    assert any(
        "DECISION verify: NOT healed" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records
    )


def test_healed_when_every_part_holds(caplog):
    caplog.set_level(logging.INFO)
    seen = runbook.verify(state(HEALED), {4}, {"t:0": [2, 1]}, {})
    assert seen.healed and seen.partitions == 1
    assert any("DECISION verify: healed" in r.getMessage() for r in caplog.records)


def test_a_reassignment_no_run_of_ours_recorded_is_refused_not_a_key_error():
    """Someone else's reassignment of a partition we never touched: the clear refusal, nothing adopted."""
    with pytest.raises(RequestError, match="1 partition reassignment.*not started by this runbook"):
        runbook.adopt_or_refuse({"t:0": MOVING, "u:0": MOVING}, {"t:0": [1, 2]}, dry_run=False)


class Clock:
    """A clock the test moves: each sleep advances it, so the waits are exact and instant."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def reads(*parts: PartitionState, left=None):
    """One cluster read per call, in order; the last one repeats."""
    seq = list(parts)

    def read():
        part = seq.pop(0) if len(seq) > 1 else seq[0]
        return state(part), dict(left or {})

    return read


SHORT = PartitionState("t", 0, 1, 2, (1, 2), (1,))
QUICK = ClusterTimeouts(1, 2000, source="DescribeConfigs of broker(s) [1, 2] (the largest value)")
ASKED = {"timeouts": QUICK, "ask": lambda reading: {}}  # a session shorter than every settle here; all answer


def test_the_settle_is_never_shorter_than_the_session_timeout_and_a_silent_isr_member_is_not_healed(caplog):
    """Asked 5 s (the test suite's verify settle) on a cluster whose broker.session.timeout.ms is 9 s:
    the healed rule is held 9 s. Broker 2, killed a second ago, is still in t-0's ISR (its session has
    not timed out), so every read looks healed; the last read asks the ISR members themselves, 2 does
    not answer, and the run is not healed (the old rule called it healed after 5 s)."""
    caplog.set_level(logging.INFO)
    clock = Clock()
    asked: list[set[int]] = []

    def ask(reading):
        members = {b for p in reading[0].partitions for b in (p.leader, *p.isr)}
        asked.append(members)
        return {2: "KafkaConnectionError: [Errno 111] ECONNREFUSED"} if 2 in members else {}

    local = ClusterTimeouts(9000, 2000, source="DescribeConfigs of broker(s) [1, 2] (the largest value)")
    kw = {"timeouts": local, "ask": ask}
    taken = inspect.signature(runbook.await_healed).parameters
    with pytest.raises(runbook.NotHealed, match="do not answer themselves"):
        runbook.await_healed(
            reads(HEALED),
            {4},
            {"t:0": [1, 2]},
            timeout_s=30,
            settle_s=5,
            poll_s=1,
            clock=clock,
            sleep=clock.sleep,
            **{k: v for k, v in kw.items() if k in taken},
        )
    assert asked and asked[0] == {1, 2}
    assert asked and clock.now >= 9


def test_healed_only_after_the_rule_held_for_the_settle_period(caplog):
    caplog.set_level(logging.INFO)
    clock = Clock()
    read = reads(SHORT, SHORT, HEALED)  # a follower rejoining the ISR after two reads
    seen = runbook.await_healed(
        read,
        {4},
        {"t:0": [1, 2]},
        timeout_s=60,
        settle_s=10,
        poll_s=2,
        clock=clock,
        sleep=clock.sleep,
        **ASKED,
    )
    assert seen.healed and clock.now >= 4 + 10
    messages = [r.getMessage() for r in caplog.records]
    assert sum("DECISION verify: wait" in m for m in messages) == 1
    assert sum("DECISION verify: healed" in m for m in messages) == 1


def test_a_partition_falling_out_of_the_isr_during_the_settle_period_restarts_it(caplog):
    clock = Clock()
    read = reads(HEALED, HEALED, SHORT, HEALED)
    runbook.await_healed(
        read,
        {4},
        {"t:0": [1, 2]},
        timeout_s=60,
        settle_s=10,
        poll_s=2,
        clock=clock,
        sleep=clock.sleep,
        **ASKED,
    )
    assert clock.now >= 6 + 10  # held from the fourth read (t=6), not from the first


def test_not_healed_by_the_timeout_fails_with_what_was_seen_last(caplog):
    caplog.set_level(logging.INFO)
    clock = Clock()
    with pytest.raises(runbook.NotHealed, match=r"ISR short \['t-0'\]"):
        runbook.await_healed(
            reads(SHORT),
            {4},
            {"t:0": [1, 2]},
            timeout_s=30,
            settle_s=10,
            poll_s=5,
            clock=clock,
            sleep=clock.sleep,
            **ASKED,
        )
    assert 30 <= clock.now <= 35
    assert any("DECISION verify: NOT healed" in r.getMessage() for r in caplog.records)


def test_healed_then_broken_at_the_timeout_is_not_healed():
    """Healed on reads before the deadline but not held for the settle period: not healed."""
    clock = Clock()
    with pytest.raises(runbook.NotHealed):
        runbook.await_healed(
            reads(SHORT, HEALED, SHORT, HEALED, SHORT, HEALED, SHORT),
            {4},
            {"t:0": [1, 2]},
            timeout_s=12,
            settle_s=10,
            poll_s=2,
            clock=clock,
            sleep=clock.sleep,
            **ASKED,
        )
