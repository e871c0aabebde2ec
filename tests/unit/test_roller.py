"""State-machine paths of the roller that the real stack cannot stage on demand
(a stuck broker that is not recovering, a run killed in the middle of a restart).
The real-stack paths are in tests/integration/test_broker_restart.py."""

from __future__ import annotations

import pytest

from kafka_runbooks.model import Broker, ClusterState, PartitionState, Quorum, QuorumMember
from kafka_runbooks.probes import BrokerStateReading
from kafka_runbooks.restart.roller import DONE, WAIT_BACK, Roller, RollFailed, RollOptions, RollState


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        self.now += 1  # time moves on between observations
        return self.now


class Cluster:
    """Stands in for ClusterAdmin: a cluster whose broker 2 the test can make stuck."""

    def __init__(self, clock):
        self.clock = clock
        self.stuck = set()

    def ping(self):
        return "cid"

    def describe_brokers(self):
        return {b: Broker(b, alive=b not in self.stuck) for b in (1, 2, 3)}

    def describe_quorum(self):
        now = self.clock()
        return Quorum(9001, 1, 5, tuple(QuorumMember(n, 5, now, now) for n in (9001, 9002, 9003)), ())

    def read_state(self, include_log_dirs=True):
        isr = tuple(b for b in (1, 2, 3) if b not in self.stuck)
        parts = [PartitionState("t", 0, 1, 1, (1, 2, 3), isr, min_insync_replicas=2)]
        return ClusterState("cid", self.describe_brokers(), self.describe_quorum(), parts)


class Backend:
    name = "fake"

    def __init__(self, cluster):
        self.cluster = cluster
        self.calls = []

    def is_running(self, node_id):
        return True

    def restart(self, node_id):
        self.calls.append(("restart", node_id))
        return "restarted"

    def force_restart(self, node_id):
        self.calls.append(("force_restart", node_id))
        self.cluster.stuck.discard(node_id)
        return "forced"


class Probe:
    def __init__(self, cluster):
        self.cluster = cluster

    def read(self, node_id):
        return BrokerStateReading(node_id, 1 if node_id in self.cluster.stuck else 3, source="fake")


@pytest.fixture
def rig():
    clock = Clock()
    cluster = Cluster(clock)
    backend = Backend(cluster)
    return clock, cluster, backend, Roller(cluster, backend, Probe(cluster), clock=clock)


def test_a_stuck_broker_that_is_not_recovering_is_not_forced_unless_allowed(rig):
    clock, cluster, backend, roller = rig
    cluster.stuck.add(2)
    state = roller.plan([2], "t", RollOptions(operation_timeout_s=10))
    assert not roller.step(state)
    clock.now += 11_000
    with pytest.raises(RollFailed, match="not in log recovery, and force restart is not allowed"):
        roller.step(state)
    assert backend.calls == []


def test_force_restart_when_allowed(rig):
    clock, cluster, backend, roller = rig
    cluster.stuck.add(2)
    state = roller.plan([2], "t", RollOptions(operation_timeout_s=10, allow_force_restart=True))
    roller.step(state)
    clock.now += 11_000
    assert roller.step(state) is True
    assert backend.calls == [("force_restart", 2)]


def test_dry_run_checks_everything_and_restarts_nothing(rig):
    _, _, backend, roller = rig
    state = roller.plan(None, "t", RollOptions(dry_run=True))
    assert state.order[-1] == 9001  # the active controller last
    assert roller.step(state) is True
    assert backend.calls == []
    assert all(p.phase == DONE for p in state.nodes.values())


def test_a_run_killed_during_a_restart_resumes_by_waiting_not_restarting(rig):
    _, _, backend, roller = rig
    saved = []
    roller.checkpoint = lambda s: saved.append(s.to_json())
    state = roller.plan([1], "t", RollOptions())
    roller.step(state)
    assert backend.calls == [("restart", 1)]
    resumed = RollState.from_json(saved[0])  # what the state file held when the restart was issued
    assert resumed.nodes[1].phase == WAIT_BACK
    assert roller.step(resumed) is True
    assert backend.calls == [("restart", 1)]


def test_every_node_rolls_in_order_and_each_once(rig):
    _, _, backend, roller = rig
    state = roller.plan(None, "t", RollOptions())
    assert roller.step(state) is True
    assert backend.calls == [("restart", n) for n in (1, 2, 3, 9002, 9003, 9001)]
