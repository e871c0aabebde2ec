"""Preferred-leader election after a move: what is asked is decided on every read."""

from __future__ import annotations

from kafka_runbooks.failed_broker.leaders import elect_preferred_leaders
from kafka_runbooks.model import PartitionState


class FakeCluster:
    """A controller that elects the first replica when it is in the ISR, and metadata reads that
    can lag behind it (``stale_reads`` first reads show the replica order before the reorder)."""

    def __init__(self, order: dict[int, list[int]], leaders: dict[int, int], stale_reads: int = 0):
        self.order, self.leaders, self.stale_reads = order, leaders, stale_reads
        self.old_order = {p: sorted(r, key=lambda b: b != leaders[p]) for p, r in order.items()}
        self.asked: list[list[tuple[str, int]]] = []
        self.now = 0.0

    def read(self) -> list[PartitionState]:
        stale = self.stale_reads > 0
        self.stale_reads -= 1
        order = self.old_order if stale else self.order
        return [PartitionState("t", p, self.leaders[p], 1, tuple(r), tuple(r)) for p, r in order.items()]

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
    return elect_preferred_leaders(
        cluster.read,
        cluster.elect,
        keys,
        settle_s=4,
        poll_s=1,
        timeout_s=30,
        clock=lambda: cluster.now,
        sleep=cluster.sleep,
        **kw,
    )


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
