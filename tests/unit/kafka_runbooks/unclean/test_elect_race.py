"""A partition that gets a leader between the runbook's last check and its election is
reported as already online, not as a wrong (data-losing) election. The window is too
short to stage on a real broker on demand, so the admin calls are stood in for here."""

from __future__ import annotations

import pytest

from kafka_runbooks.model import Broker, PartitionState
from kafka_runbooks.unclean import elect
from kafka_runbooks.unclean.choose import Choice


class Admin:
    """Stands in for the ClusterAdmin methods the election uses."""

    def __init__(self):
        self.leader = -1  # offline when the runbook looks

    def describe_brokers(self):
        return {b: Broker(b) for b in (1, 2, 3)}

    def describe_topic_partitions(self, topics):
        return [
            PartitionState("t", 0, self.leader, 5, (2, 1, 3), (self.leader,) if self.leader > 0 else (1,))
        ]

    def elect_unclean(self, keys):
        self.leader = 3  # an ELR replica came back just before: Kafka elected it itself
        return {k: "ElectionNotNeededError" for k in keys}

    def reorder_replicas(self, reorder):
        return dict.fromkeys(reorder)

    def elect_leaders_versions(self):
        return (0, 2)

    def list_replica_log_ends(self, by_broker, timeout_ms):
        return {b: [(t, p, 0, 200, 4) for t, p in keys] for b, keys in by_broker.items()}, len(by_broker)


@pytest.fixture
def admin():
    return Admin()


def test_election_not_needed_means_already_online(admin, tmp_path):
    choice = Choice("t", 0, (2, 1, 3), 5, (), chosen=2, reason="longest log", kafka_unclean_pick=1)
    report = elect.elect_chosen(
        admin,
        [choice],
        attempts=1,
        restore_order=False,
        settle_timeout_s=0.1,
        state_file=elect.ReorderState("t", directory=tmp_path),
    )
    [outcome] = report.outcomes
    assert outcome.status == elect.ALREADY_ONLINE, outcome
    assert "came online before the election" in outcome.detail and outcome.leader == 3
    assert report.failures == []
