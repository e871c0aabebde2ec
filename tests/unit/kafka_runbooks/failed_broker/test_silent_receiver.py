"""A receiver that dies in the middle of a chunk (issue #37): said every poll, then decided on.

Through the executor, with a cluster that answers as Kafka does: broker 5 has failed; chunk 1
moves t:0 [5, 1, 2] -> [3, 1, 2] (receiver 3) and t:1 [2, 5, 4] -> [2, 1, 4] (receiver 1). While a
reassignment is in flight the metadata names the target's replicas first, then those being removed
([3, 1, 2, 5]); a cancel takes the added replica out and keeps that order ([1, 2, 5]: the set is
back, not the order, as Kafka 4.3.1 does); a broker's rates are changed by a request to the broker
itself, which a dead one never answers. Broker 3 is killed with kill -9 after the submission: it
stops answering itself at once, and its registration is fenced after broker.session.timeout.ms
(6 s here, as on the local stack). The cluster part: tests/integration/test_failed_broker_executor.py.
"""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks import decisions
from kafka_runbooks.errors import AdminError
from kafka_runbooks.evidence.settings import ClusterTimeouts
from kafka_runbooks.failed_broker.execute import (
    MOVING,
    ChunkExecutor,
    ChunkState,
    ExecState,
    ReassignError,
    ReassignStopped,
    load_state,
    save_state,
)
from kafka_runbooks.failed_broker.throttle import BROKER_KEYS, FOLLOWER_RATE, LEADER_RATE
from kafka_runbooks.model import Broker, LogDirReplica, PartitionState
from tests.config_fakes import ConfigStore

SESSION_MS = 6000
FROM = {("t", 0): [5, 1, 2], ("t", 1): [2, 5, 4]}
TO = {("t", 0): [3, 1, 2], ("t", 1): [2, 1, 4]}
KILLED = "KafkaConnectionError: [Errno 111] ECONNREFUSED"


class Clock:
    """The worker's time.time(), moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class Cluster:
    """Stands in for ClusterAdmin with Kafka's answers (see the module's docstring)."""

    def __init__(self) -> None:
        self.replicas = {tp: list(r) for tp, r in FROM.items()}
        self.isr = {tp: [b for b in r if b != 5] for tp, r in FROM.items()}
        self.inflight: dict[tuple[str, int], dict[str, list[int]]] = {}
        self.silent: dict[int, str] = {}
        self.fenced: set[int] = set()
        self.store = ConfigStore()
        self.acted: list[tuple] = []
        self.log_dirs_asked: list[list[int]] = []

    # reads
    def describe_brokers(self):
        return {b: Broker(b, alive=b != 5, fenced=b in self.fenced) for b in (1, 2, 3, 4, 5)}

    def broker_answers(self, broker_id, timeout_s=5.0):
        return "broker 5 is not registered" if broker_id == 5 else self.silent.get(broker_id)

    def cluster_timeouts(self):
        return ClusterTimeouts(SESSION_MS, 2000, "DescribeConfigs of broker(s) [1, 2, 4] (the largest value)")

    def list_topics(self):
        return ["t"]

    def describe_partitions(self, topics):
        return [
            PartitionState("t", p, r[0], 7, tuple(r), tuple(self.isr[("t", p)]))
            for (_, p), r in sorted(self.replicas.items())
        ]

    def list_reassignments(self):
        return {tp: dict(v) for tp, v in self.inflight.items()}

    def describe_log_dirs(self, broker_ids):
        self.log_dirs_asked.append(list(broker_ids))
        errors = {b: why for b, why in self.silent.items() if b in broker_ids}
        return [LogDirReplica(b, "t", 1, 100, "/d") for b in broker_ids if b == 1], errors

    def describe_config_values(self, kind, names, keys, asked_of=None):
        return self.store.values(kind, names, keys)

    # changes
    def alter_partition_reassignments(self, pairs):
        self.acted.append(("reassign", dict(pairs)))
        for tp, target in pairs.items():
            if target is None:
                moving = self.inflight.pop(tp)
                self.replicas[tp] = [b for b in moving["replicas"] if b not in moving["adding"]]
            else:
                now = self.replicas[tp]
                removing = [b for b in now if b not in target]
                self.inflight[tp] = {
                    "replicas": list(target) + removing,
                    "adding": [b for b in target if b not in now],
                    "removing": removing,
                }
                self.replicas[tp] = list(target) + removing
        return dict.fromkeys(pairs)

    def reorder_replicas(self, orders):
        self.acted.append(("reorder", dict(orders)))
        for tp, order in orders.items():
            assert set(order) == set(self.replicas[tp]) and tp not in self.inflight
            self.replicas[tp] = list(order)
        return dict.fromkeys(orders)

    def incremental_alter_configs(self, kind, changes):
        self.acted.append(("configs", kind, changes))
        if kind == "broker":
            dead = [n for n in changes if int(n) in self.silent]
            if dead:  # sent to that broker itself: kafka-python raises, nothing of the call comes back
                raise AdminError(f"IncrementalAlterConfigs failed: broker {dead[0]}: {KILLED}")
        return self.store.alter(kind, changes)

    def finish(self, tp):
        """The controller completes a move: its new replica caught up and joined the ISR."""
        moving = self.inflight.pop(tp)
        self.replicas[tp] = [b for b in moving["replicas"] if b not in moving["removing"]]
        self.isr[tp] = list(self.replicas[tp])

    def throttled(self) -> dict:
        keys = set(BROKER_KEYS) | {
            "leader.replication.throttled.replicas",
            "follower.replication.throttled.replicas",
        }
        return {f"{kind} {n}": v for (kind, n), v in self.store.configs.items() if set(v) & keys}


@pytest.fixture
def rig(tmp_path):
    decisions.forget()
    cluster, clock = Cluster(), Clock()
    path = tmp_path / "exec-state.json"
    chunk = ChunkState(
        1,
        {"t:0": [3, 1, 2], "t:1": [2, 1, 4]},
        bytes={"t:0": 4_000_000, "t:1": 1_000_000},
        receivers=[1, 3],
        planned_from={"t:0": [5, 1, 2], "t:1": [2, 5, 4]},
    )
    save_state(path, ExecState("r", [5], 50_000, [chunk, ChunkState(2, {"u:0": [1, 2]})]))
    executor = ChunkExecutor(
        cluster, checkpoint=lambda s: save_state(path, s), clock=clock, progress_every_s=0
    )
    return cluster, clock, executor, path


def _said(decision: str) -> list:
    return [r for r in decisions.made() if r.decision == decision]


def _reassigned(cluster) -> list[dict]:
    return [call[1] for call in cluster.acted if call[0] == "reassign"]


def test_a_receiver_killed_mid_chunk_is_said_every_poll_then_its_moves_are_cancelled_and_the_run_fails(rig):
    cluster, clock, executor, path = rig
    state = load_state(path)
    executor.step(state)
    assert state.chunks[0].status == MOVING and _reassigned(cluster) == [
        {("t", 0): [3, 1, 2], ("t", 1): [2, 1, 4]}
    ]
    assert cluster.store.configs[("broker", "3")][FOLLOWER_RATE] == "50000"

    cluster.silent[3] = KILLED  # kill -9: no answer at once; fenced after the session timeout
    clock.now += 1
    assert executor.step(state) is False
    first = _said("a receiver does not answer itself")
    assert len(first) == 1 and first[0].observed["broker"] == 3 and first[0].observed["silent_for_s"] == 0
    assert first[0].observed["bytes_waiting"] == 4_000_000 and first[0].observed["partitions"] == ["t:0"]
    assert first[0].observed["limit_s"] == 66.0  # broker.session.timeout.ms + the bound

    cluster.fenced.add(3)
    for _ in range(6):  # every poll says it, with how long; nothing is cancelled before the limit
        clock.now += 10
        assert executor.step(state) is False
    said = _said("a receiver does not answer itself")
    assert (
        len(said) == 7
        and said[-1].observed["silent_for_s"] == 60
        and "KafkaConnectionError" in said[-1].reason
    )
    assert len(_reassigned(cluster)) == 1 and ("t", 0) in cluster.inflight
    assert cluster.log_dirs_asked[-1] == [1]  # a silent receiver's log dirs are not asked for
    line = _said("progress")[-1].reason  # the progress line says what the chunk waits on
    assert "0% bytes" in line and line.endswith("receiver(s) not answering: broker 3 silent 60 s"), line

    clock.now += 7  # 67 s: past 6 s + 60 s
    with pytest.raises(ReassignError, match=r"receiver\(s\) \[3\] stopped answering .* for 67 s"):
        executor.step(state)
    # only the move to broker 3 is cancelled; its replica order put back (the cancel kept [1, 2, 5])
    assert _reassigned(cluster)[1:] == [{("t", 0): None}]
    assert [c[1] for c in cluster.acted if c[0] == "reorder"] == [{("t", 0): [5, 1, 2]}]
    assert cluster.replicas[("t", 0)] == [5, 1, 2] and ("t", 1) in cluster.inflight
    gave_up = _said("give up on the silent receiver")
    assert gave_up and gave_up[0].observed["cancel"] == ["t:0"]
    # the throttle came off every broker that answers, and off the topic; broker 3's stays recorded
    assert cluster.throttled() == {"broker 3": {LEADER_RATE: "50000", FOLLOWER_RATE: "50000"}}
    saved = load_state(path)
    assert saved.gave_up and "broker 3" in saved.gave_up
    assert list(saved.throttle.brokers) == ["3"] and saved.throttle.topics == {}
    assert saved.chunks[0].moving == ["t:1"] and saved.chunks[0].cancelled == {
        "t:0": "receiver(s) [3] silent"
    }
    assert saved.in_flight_targets() == {"t:1": [2, 1, 4]}  # what a new run adopts; never the cancelled move

    # a cleared try goes no further (no chunk 2), and the throttle left on broker 3 comes off once it answers
    with pytest.raises(ReassignStopped, match="does not go on"):
        executor.step(saved)
    assert len(_reassigned(cluster)) == 2
    del cluster.silent[3]
    cluster.fenced.discard(3)
    live = {b for b, info in cluster.describe_brokers().items() if info.available}
    assert executor.remove_throttle(saved, live) == {}
    assert cluster.throttled() == {} and load_state(path).throttle is None


def test_a_receiver_that_answers_again_before_the_limit_keeps_its_moves(rig):
    cluster, clock, executor, path = rig
    state = load_state(path)
    executor.step(state)
    cluster.silent[3] = KILLED
    for _ in range(5):
        clock.now += 10
        executor.step(state)
    assert _said("a receiver does not answer itself")[-1].observed["silent_for_s"] == 40
    del cluster.silent[3]  # restarted by its supervisor within the bound
    clock.now += 10
    assert executor.step(state) is False
    back = _said("a receiver answers again")
    assert back and "after 50 s of silence" in back[0].reason
    assert load_state(path).silent == {}
    cluster.silent[3] = KILLED  # a new spell counts from its own start
    clock.now += 50
    executor.step(state)
    assert _said("a receiver does not answer itself")[-1].observed["silent_for_s"] == 0
    assert len(_reassigned(cluster)) == 1, "nothing cancelled"


def test_a_spell_another_worker_recorded_is_not_aged_on_this_clock(rig):
    """Pokes may run on different workers: a time another clock stamped tells no age here, so the spell
    starts again (longer, never shorter), and the moves are not given up on early."""
    cluster, clock, executor, path = rig
    state = load_state(path)
    executor.step(state)
    cluster.silent[3] = KILLED
    clock.now += 1
    executor.step(state)
    elsewhere = ChunkExecutor(
        cluster,
        checkpoint=lambda s: save_state(path, s),
        clock=clock,
        progress_every_s=0,
        clock_name="worker b",
    )
    clock.now += 100
    state = load_state(path)
    assert elsewhere.step(state) is False
    assert _said("a receiver does not answer itself")[-1].observed["silent_for_s"] == 0
    assert len(_reassigned(cluster)) == 1


def test_an_unknown_session_timeout_is_never_passed(rig, caplog):
    cluster, clock, executor, path = rig
    from kafka_runbooks.errors import SafetyRefusal

    def unknown():
        raise SafetyRefusal("could not read broker.session.timeout.ms from any broker (DescribeConfigs)")

    cluster.cluster_timeouts = unknown
    state = load_state(path)
    executor.step(state)
    cluster.silent[3] = KILLED
    caplog.set_level(logging.WARNING, logger="kafka_runbooks")
    for _ in range(3):
        clock.now += 1000
        assert executor.step(state) is False
    assert "could not be read" in _said("a receiver does not answer itself")[-1].reason
    assert len(_reassigned(cluster)) == 1


def test_no_further_chunk_starts_onto_a_receiver_while_one_is_silent(rig):
    """Overlapping chunks: the next one would start while a receiver has room; not while a receiver of
    the run is silent (the decision on it comes first)."""
    cluster, clock, _, path = rig
    executor = ChunkExecutor(
        cluster, checkpoint=lambda s: save_state(path, s), clock=clock, progress_every_s=0, receiver_slots=2
    )
    state = load_state(path)
    state.chunks[1] = ChunkState(2, {"t:1": [2, 1, 4]}, receivers=[1], planned_from={"t:1": [2, 5, 4]})
    state.chunks[0].targets = {"t:0": [3, 1, 2]}
    state.chunks[0].receivers = [3]
    executor.step(state)
    cluster.silent[3] = KILLED
    clock.now += 1
    executor.step(state)
    assert state.chunks[1].status == "pending" and _said("start the next chunk") == []


def test_a_throttle_removal_with_a_broker_killed_a_moment_ago_cleans_the_rest(rig):
    """Still registered and unfenced (its session has not timed out), so counted live; the removal
    asks each broker itself: the others' rates and the topic's items come off, its own stays recorded."""
    cluster, clock, executor, path = rig
    state = load_state(path)
    executor.step(state)
    cluster.silent[3] = KILLED
    live = {b for b, info in cluster.describe_brokers().items() if info.available}
    assert 3 in live
    left = executor.remove_throttle(state, live)
    assert list(left) == ["broker 3"] and "does not answer itself" in left["broker 3"]
    assert cluster.throttled() == {"broker 3": {LEADER_RATE: "50000", FOLLOWER_RATE: "50000"}}
    assert list(load_state(path).throttle.brokers) == ["3"]
