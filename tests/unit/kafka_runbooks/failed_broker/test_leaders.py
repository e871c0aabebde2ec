"""Preferred-leader election after a move: what is asked is decided on every read, only as the
run's approval approved it, never of a partition whose preferred replica does not answer itself or
that is under-replicated, and settled for a period that can see a death."""

from __future__ import annotations

import inspect

import pytest

from kafka_runbooks import approval as rules

try:
    from kafka_runbooks import approval_proof as proofs
except ImportError:  # the code before issue #37 took no proof (``call`` drops it)
    proofs = None
from kafka_runbooks.evidence import ClusterTimeouts
from kafka_runbooks.failed_broker.leaders import elect_preferred_leaders
from kafka_runbooks.model import PartitionState

QUICK = ClusterTimeouts(1, 2000, source="DescribeConfigs of broker(s) [1, 2, 3] (the largest value)")
LOCAL = ClusterTimeouts(9000, 2000, source="DescribeConfigs of broker(s) [1, 2, 3] (the largest value)")


def proof(keys, elect: bool = True, **action) -> proofs.ApprovedAction:
    """What the approval check hands out for a reassignment whose one chunk moved ``keys``."""
    action = {
        "runbook": "kafka_failed_broker_reassignment",
        "chunks": [{k: [1, 2, 3] for k in sorted(keys)}],
        "elect_preferred_leaders": elect,
        "dry_run": False,
        **action,
    }
    digest = rules.plan_digest(action)
    if proofs is None:
        return None
    return proofs.approved_action(
        {"outcome": rules.APPROVED, "digest": digest, "by": {"id": "alice", "name": "alice"}}, digest, action
    )


def call(fn, *args, **kwargs):
    """``fn`` with the keyword arguments it takes (the code before the approval and the silence
    checks took neither: run against it, a test fails on what it does, not on a TypeError)."""
    taken = inspect.signature(fn).parameters
    return fn(*args, **{k: v for k, v in kwargs.items() if k in taken})


class FakeCluster:
    """A controller that elects the first replica when it is in the ISR, and metadata reads that
    can lag behind it (``stale_reads`` first reads show the replica order before the reorder)."""

    def __init__(self, order: dict[int, list[int]], leaders: dict[int, int], stale_reads: int = 0):
        self.order, self.leaders, self.stale_reads = order, leaders, stale_reads
        self.isr: dict[int, tuple[int, ...]] = {}  # a partition's ISR when not all its replicas
        self.dead: set[int] = set()  # brokers whose own listener does not answer (still registered)
        self.silent_asked: list[set[int]] = []
        self.old_order = {p: sorted(r, key=lambda b: b != leaders[p]) for p, r in order.items()}
        self.asked: list[list[tuple[str, int]]] = []
        self.now = 0.0

    def read(self) -> list[PartitionState]:
        stale = self.stale_reads > 0
        self.stale_reads -= 1
        order = self.old_order if stale else self.order
        return [
            PartitionState("t", p, self.leaders[p], 1, tuple(r), self.isr.get(p, tuple(r)))
            for p, r in order.items()
        ]

    def silent(self, brokers) -> dict[int, str]:
        """``evidence.silent_brokers``' answer: the dead ones, each with why."""
        self.silent_asked.append(set(brokers))
        return {b: "KafkaConnectionError: [Errno 111] ECONNREFUSED" for b in sorted(set(brokers) & self.dead)}

    def elect(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        self.asked.append(keys)
        answers = {}
        for _, p in keys:
            if self.leaders[p] == self.order[p][0]:
                answers[("t", p)] = "ElectionNotNeededError"
            else:
                self.leaders[p] = self.order[p][0]
                answers[("t", p)] = None
        return answers

    def sleep(self, s: float) -> None:
        self.now += s


def _elect(cluster: FakeCluster, keys: set[str], **kw):
    options = {
        "approval": proof(keys),
        "silent": cluster.silent,
        "timeouts": QUICK,
        "settle_s": 4,
        "poll_s": 1,
        "timeout_s": 30,
        "clock": lambda: cluster.now,
        "sleep": cluster.sleep,
        **kw,
    }
    return call(elect_preferred_leaders, cluster.read, cluster.elect, keys, **options)


def test_a_partition_led_by_another_replica_is_elected_and_settles():
    cluster = FakeCluster({0: [2, 1], 1: [3, 2], 2: [3, 1]}, {0: 1, 1: 2, 2: 3})
    result = _elect(cluster, {"t:0", "t:1", "t:2"})
    assert result.ok and sorted(result.asked) == ["t:0", "t:1"] and result.errors == {}
    assert cluster.asked == [[("t", 0), ("t", 1)]]
    assert result.leaders_before == {1: 1, 2: 1, 3: 1} and result.leaders_after == {2: 1, 3: 2}


def test_a_first_read_from_a_lagging_broker_does_not_decide_that_nothing_needs_electing():
    """The CI failure of 2026-11-26: the first read showed the order before the reorder (each
    partition led by its then-preferred replica), nothing was asked, the run failed after 120 s."""
    cluster = FakeCluster({0: [2, 1], 1: [3, 2]}, {0: 1, 1: 2}, stale_reads=2)
    result = _elect(cluster, {"t:0", "t:1"})
    assert result.ok, result
    assert sorted(result.asked) == ["t:0", "t:1"]
    assert cluster.leaders == {0: 2, 1: 3}


def test_a_refused_election_is_asked_again_and_reported_with_the_last_error():
    cluster = FakeCluster({0: [2, 1]}, {0: 1})
    refusals = []

    def refuse(keys):
        refusals.append(cluster.now)
        return {k: "PreferredLeaderNotAvailableError" for k in keys}

    result = elect_preferred_leaders(
        cluster.read,
        refuse,
        {"t:0"},
        proof({"t:0"}),
        silent=cluster.silent,
        timeouts=QUICK,
        settle_s=4,
        poll_s=1,
        timeout_s=30,
        clock=lambda: cluster.now,
        sleep=cluster.sleep,
        reask_s=10,
    )
    assert not result.ok and result.not_led == ["t:0"]
    assert result.errors == {"t:0": "PreferredLeaderNotAvailableError"}
    assert refusals == [0.0, 10.0, 20.0, 30.0]


# ------------------------------------------------------------------ issue #37


def test_a_preferred_replica_that_does_not_answer_itself_is_never_elected_nor_a_failure():
    """Broker 2 was killed a second ago: still registered, unfenced and in t-0's ISR (its session has
    not timed out), so Kafka would make it leader. The election skips t-0 and names why; t-1, whose
    preferred replica 3 answers, is elected; the run's election is no failure."""
    cluster = FakeCluster({0: [2, 1, 3], 1: [3, 1, 2]}, {0: 1, 1: 1})
    cluster.dead = {2}
    result = _elect(cluster, {"t:0", "t:1"})
    assert [k for keys in cluster.asked for k in keys] == [("t", 1)]
    assert cluster.leaders == {0: 1, 1: 3}
    assert result.ok and result.not_led == []
    assert "t:0" in result.skipped and "preferred replica 2 does not answer itself" in result.skipped["t:0"]
    assert "skipped" in result.records[0].observed and "t:0" in result.records[0].observed["skipped"]


def test_an_under_replicated_partition_is_never_elected_nor_a_failure():
    """t-0's preferred replica 2 is out of its ISR (it fell behind): the election leaves it alone."""
    cluster = FakeCluster({0: [2, 1, 3], 1: [3, 1, 2]}, {0: 1, 1: 1})
    cluster.isr = {0: (1, 3)}
    result = _elect(cluster, {"t:0", "t:1"})
    assert [k for keys in cluster.asked for k in keys] == [("t", 1)]
    assert result.ok and "under-replicated" in result.skipped["t:0"]


def test_the_settle_is_never_shorter_than_the_session_timeout_and_its_end_asks_the_leaders():
    """Asked 3 s (the test suite's election settle), the cluster's broker.session.timeout.ms is 9 s:
    the leaders are read back for 9 s, then the leaders and ISR members are asked themselves."""
    cluster = FakeCluster({0: [2, 1, 3]}, {0: 1})
    reads: list[float] = []
    read = cluster.read
    cluster.read = lambda: reads.append(cluster.now) or read()
    result = _elect(cluster, {"t:0"}, settle_s=3, timeouts=LOCAL)
    assert result.ok
    assert reads[-1] - reads[1] >= 9.0, reads
    assert cluster.silent_asked and cluster.silent_asked[-1] == {1, 2, 3}
    settle = result.records[0].observed["settle"]
    assert (
        settle["asked_s"] == 3
        and settle["held_s"] == 9.0
        and "because broker.session.timeout.ms" in result.records[0].reason
    )


def test_a_leader_that_dies_during_the_settle_is_named_and_left_alone():
    """Elected, then killed before the settle's end: its own listener does not answer at the last read.
    Its partition is skipped from then on (never elected again); the others settle."""
    cluster = FakeCluster({0: [2, 1, 3], 1: [3, 1, 2]}, {0: 1, 1: 1})
    elect = cluster.elect

    def elect_then_kill(keys):
        answers = elect(keys)
        cluster.dead = {2}
        return answers

    result = call(
        elect_preferred_leaders,
        cluster.read,
        elect_then_kill,
        {"t:0", "t:1"},
        approval=proof({"t:0", "t:1"}),
        silent=cluster.silent,
        timeouts=QUICK,
        settle_s=4,
        poll_s=1,
        timeout_s=60,
        clock=lambda: cluster.now,
        sleep=cluster.sleep,
    )
    assert result.ok and "t:0" in result.skipped and "do not answer themselves" in result.skipped["t:0"]


def test_the_election_refuses_without_an_approval_of_exactly_it():
    """No proof of an approved election, an election turned off in the approved plan, or a partition
    the plan did not move: nothing is asked of the controller."""
    cluster = FakeCluster({0: [2, 1]}, {0: 1})
    options = dict(silent=cluster.silent, timeouts=QUICK, settle_s=1, poll_s=1, timeout_s=5)
    with pytest.raises(TypeError):
        elect_preferred_leaders(cluster.read, cluster.elect, {"t:0"}, **options)
    with pytest.raises(rules.NotApproved, match="elect_preferred_leaders"):
        elect_preferred_leaders(cluster.read, cluster.elect, {"t:0"}, proof({"t:0"}, elect=False), **options)
    with pytest.raises(rules.NotApproved, match="not part of the approved plan"):
        elect_preferred_leaders(cluster.read, cluster.elect, {"t:0"}, proof({"t:1"}), **options)
    with pytest.raises(rules.NotApproved, match="dry run"):
        elect_preferred_leaders(cluster.read, cluster.elect, {"t:0"}, proof({"t:0"}, dry_run=True), **options)
    with pytest.raises(rules.NotApproved, match="handed out by the approval check only"):
        proofs.ApprovedAction("sha256:x", {}, rules.APPROVED, "alice")
    assert cluster.asked == []
