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
    """Stands in for ClusterAdmin: a cluster whose broker 2 the test can make stuck.

    Its quorum answers as KRaft's does: every timestamp is the leader's clock (``skew_ms``
    away from the roller's), the leader's own entry carries its now, and the metadata log
    grows between answers (a no-op record every half second). A voter in ``not_fetching``
    keeps the offset and the caught-up time its old process was last seen with."""

    def __init__(self, clock):
        self.clock = clock
        self.stuck = set()
        self.extra_partitions: list[PartitionState] = []
        self.reassignments: dict = {}
        self.skew_ms = 0
        self.log_end = 5
        self.behind_ms: dict[int, int] = {}  # voter -> how long ago the leader saw it caught up
        self.not_fetching: dict[int, QuorumMember] = {}
        self.leader = 9001
        # brokers whose own listener does not answer (a new process refused registration while
        # DescribeCluster still shows its crashed predecessor's registration unfenced)
        self.silent: set[int] = set()

    def list_reassignments(self):
        return dict(self.reassignments)

    def ping(self):
        return "cid"

    def describe_brokers(self):
        return {b: Broker(b, alive=b not in self.stuck) for b in (1, 2, 3)}

    def broker_answers(self, broker_id, timeout_s=5.0):
        return "KafkaConnectionError: 111 ECONNREFUSED" if broker_id in self.silent else None

    def describe_quorum(self):
        now = self.clock() + self.skew_ms
        self.log_end += 1

        def member(n):
            if n in self.not_fetching:
                return self.not_fetching[n]
            seen = now - self.behind_ms.get(n, 0)
            return QuorumMember(n, self.log_end, seen, seen)

        voters = tuple(member(n) for n in (9001, 9002, 9003))
        return Quorum(
            self.leader, 1, self.log_end, voters, (), fetch_timeout_ms=2000
        )  # as the facade reads it

    def read_state(self, include_log_dirs=True):
        isr = tuple(b for b in (1, 2, 3) if b not in self.stuck)
        parts = [PartitionState("t", 0, 1, 1, (1, 2, 3), isr, min_insync_replicas=2), *self.extra_partitions]
        return ClusterState("cid", self.describe_brokers(), self.describe_quorum(), parts)


class Backend:
    """Restarts take effect at once (a new process identity) unless ``ignored``."""

    name = "fake"

    def __init__(self, cluster):
        self.cluster = cluster
        self.calls = []
        self.generation: dict[int, int] = {}
        self.ignored = False  # the request is answered, nothing restarts (a Strimzi pod not rolled yet)

    def is_running(self, node_id):
        return True

    def evidence(self, node_id):
        return {"source": "fake", "identity": f"process {node_id}.{self.generation.get(node_id, 0)}"}

    def _new_process(self, node_id):
        if not self.ignored:
            self.generation[node_id] = self.generation.get(node_id, 0) + 1

    def restart(self, node_id):
        self.calls.append(("restart", node_id))
        self._new_process(node_id)
        return "restarted"

    def force_restart(self, node_id):
        self.calls.append(("force_restart", node_id))
        self._new_process(node_id)
        self.cluster.stuck.discard(node_id)
        return "forced"


class Probe:
    """A stuck broker reads ``stuck_reading`` (default: RUNNING but not registered)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.stuck_reading = lambda node_id: BrokerStateReading(node_id, 3, source="fake")

    def read(self, node_id):
        if node_id in self.cluster.stuck:
            return self.stuck_reading(node_id)
        return BrokerStateReading(node_id, 3, source="fake")


def _until_done(roller, state, steps: int = 10) -> bool:
    """Step as a sensor pokes: a controller needs a poke to be seen restarted and another to
    be seen fetching past the leader's offset (the fake's log grows between answers)."""
    return any(roller.step(state) for _ in range(steps))


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
    state = roller.plan(None, "t", RollOptions(overlap=False))
    assert _until_done(roller, state)
    assert backend.calls == [("restart", n) for n in (1, 2, 3, 9002, 9003, 9001)]


# -- lanes: a broker and a follower controller in flight together, nothing else ------------------

IN_FLIGHT = ("restart", "wait_back", "wait_isr")


def _watch_in_flight(roller) -> list[tuple[int, ...]]:
    """What was in flight each time the roller checkpointed (it does before every restart
    request): read from the phases, as the state file shows them."""
    seen: list[tuple[int, ...]] = []
    roller.checkpoint = lambda s: seen.append(tuple(n for n in s.order if s.nodes[n].phase in IN_FLIGHT))
    return seen


def _never_more_than_the_lanes_allow(seen, active=9001) -> None:
    for flight in seen:
        brokers = [n for n in flight if n < 9000]
        voters = [n for n in flight if n >= 9000]
        assert len(brokers) <= 1 and len(voters) <= 1, flight
        assert active not in flight or flight == (active,), flight


def test_a_broker_and_a_follower_controller_roll_side_by_side(rig):
    """Issue #25: with dedicated controllers, broker 1 and follower 9002 are in flight
    together (one of each at most); the active controller 9001 restarts alone, last."""
    _, _, backend, roller = rig
    seen = _watch_in_flight(roller)
    state = roller.plan(None, "t", RollOptions())
    assert _until_done(roller, state)
    assert (1, 9002) in seen  # the overlap happened
    _never_more_than_the_lanes_allow(seen)
    assert backend.calls[-1] == ("restart", 9001)
    assert sorted(c[1] for c in backend.calls) == sorted(state.order)


def test_one_node_at_a_time_when_the_run_asks_for_it(rig):
    _, _, backend, roller = rig
    seen = _watch_in_flight(roller)
    state = roller.plan(None, "t", RollOptions(overlap=False))
    assert _until_done(roller, state)
    assert seen and all(len(flight) == 1 for flight in seen), seen


def test_the_lane_rule():
    from kafka_runbooks.restart.lanes import ALONE, BROKER_LANE, CONTROLLER_LANE, lane_of

    def lane(node, **kw):
        given = dict(is_broker=node < 9000, is_controller=node >= 9000, ready=True, active_controller=9001)
        return lane_of(node, **{**given, "overlap": True, **kw})

    assert lane(1) == BROKER_LANE and lane(9002) == CONTROLLER_LANE
    assert lane(9001) == ALONE  # the active controller
    assert lane(9002, active_controller=None) == ALONE  # leader unknown: never overlapped
    assert lane(5, is_controller=True) == ALONE  # a combined node is in both lanes
    assert lane(1, ready=False) == ALONE and lane(9002, ready=False) == ALONE
    assert lane(1, overlap=False) == ALONE and lane(9002, overlap=False) == ALONE


def test_nodes_in_turn_follow_the_lanes_and_an_alone_node_waits_for_both():
    from types import SimpleNamespace as Node

    from kafka_runbooks.restart.lanes import in_turn, stages_text

    lanes = {7: "alone", 1: "broker", 2: "broker", 9002: "controller", 9003: "controller", 9001: "alone"}
    order = [7, 1, 2, 9002, 9003, 9001]
    nodes = {n: Node(node_id=n, phase="wait_ready", lane=lane) for n, lane in lanes.items()}

    def turn():
        return [n.node_id for n in in_turn(order, nodes, "done")]

    assert turn() == [7]  # unready first, alone
    nodes[7].phase = "done"
    assert turn() == [1, 9002]
    nodes[9002].phase = nodes[9003].phase = "done"
    assert turn() == [1]  # 9001 waits for the broker lane too
    nodes[1].phase = nodes[2].phase = "done"
    assert turn() == [9001]
    assert stages_text(order, lanes).splitlines() == [
        "1. node 7 alone",
        "2. brokers 1 -> 2 side by side with controllers 9002 -> 9003 (one node at a time in each lane)",
        "3. node 9001 alone",
    ]


def test_a_controller_that_took_over_leadership_waits_for_the_broker_in_flight(rig):
    """Planned in the controller lane, 9002 leads the quorum by the time its turn comes:
    it restarts only with nothing else in flight."""
    _, cluster, backend, roller = rig
    seen = _watch_in_flight(roller)
    state = roller.plan(None, "t", RollOptions())
    assert state.nodes[9002].lane == "controller"
    cluster.leader = 9002
    assert _until_done(roller, state)
    assert all(flight == (9002,) for flight in seen if 9002 in flight), seen
    _never_more_than_the_lanes_allow(seen)


def test_a_state_file_of_a_one_node_at_a_time_roll_resumes_one_node_at_a_time(rig):
    """A state file written before lanes (no lane per node, no overlap option), killed with
    broker 1 mid-restart: it loads, waits for broker 1's evidence instead of restarting it
    again, and rolls the rest one node at a time, as it was approved."""
    import json

    _, _, backend, roller = rig
    data = json.loads(roller.plan(None, "t", RollOptions()).to_json())
    del data["options"]["overlap"]
    for node in data["nodes"].values():
        del node["lane"]
    data["nodes"]["1"].update(
        phase="wait_back", evidence_before={"source": "fake", "identity": "process 1.0"}
    )
    backend.generation[1] = 1  # its restart happened before the kill
    resumed = RollState.from_json(json.dumps(data))
    assert resumed.options.overlap is False
    assert [n.node_id for n in resumed.in_turn()] == [1]
    seen = _watch_in_flight(roller)
    assert _until_done(roller, resumed)
    assert seen and all(len(flight) == 1 for flight in seen), seen
    assert backend.calls == [("restart", n) for n in (2, 3, 9002, 9003, 9001)]


# -- the broker-state table (restart.states) as the roller applies it ---------------------------


@pytest.mark.parametrize(
    "reading",
    [
        BrokerStateReading(2, 1, source="prometheus"),  # STARTING, gauges not registered at that moment
        BrokerStateReading(2, 1, 0, 0, source="prometheus"),  # STARTING, counts 0: between log dirs
        BrokerStateReading(2, 2, source="strimzi-agent"),  # RECOVERY, no counts
        BrokerStateReading(
            2, None, source="prometheus", state_not_registered=True
        ),  # BrokerState not yet there
    ],
    ids=["starting-no-gauges", "starting-zero-counts", "recovery-no-counts", "state-not-registered"],
)
def test_a_starting_broker_is_never_forced_even_when_force_is_allowed(rig, reading):
    clock, cluster, backend, roller = rig
    cluster.stuck.add(2)
    roller.probe.stuck_reading = lambda node_id: reading
    state = roller.plan(
        [2], "t", RollOptions(operation_timeout_s=10, max_attempts=3, allow_force_restart=True)
    )
    with pytest.raises(RollFailed, match=r"broker 2 is (starting|in log recovery) \(state ") as failed:
        for _ in range(10):
            roller.step(state)
            clock.now += 11_000
    assert "not restarting it" in str(failed.value)
    assert backend.calls == []
    assert state.nodes[2].attempts == 3


def test_counts_seen_earlier_are_reported_when_the_gauges_are_gone(rig):
    clock, cluster, backend, roller = rig
    cluster.stuck.add(2)
    readings = iter([BrokerStateReading(2, 1, 12, 345, source="prometheus")] * 2)  # plan, first step
    roller.probe.stuck_reading = lambda node_id: next(readings, BrokerStateReading(2, 1, source="prometheus"))
    state = roller.plan(
        [2], "t", RollOptions(operation_timeout_s=10, max_attempts=2, allow_force_restart=True)
    )
    with pytest.raises(RollFailed) as failed:
        for _ in range(10):
            roller.step(state)
            clock.now += 11_000
    message = str(failed.value)
    assert "broker 2 is in log recovery (state STARTING)" in message
    assert "recovery counts unknown now; last seen" in message and "12 logs and 345 segments" in message
    assert backend.calls == []


@pytest.mark.parametrize(
    "reading,kind",
    [
        (BrokerStateReading(2, 3, source="x"), "stuck"),
        (BrokerStateReading(2, 0, source="x"), "stuck"),
        (BrokerStateReading(2, 127, source="x"), "stuck"),
        (BrokerStateReading(2, None, source="x", error="HTTP 503"), "unknown"),
    ],
)
def test_only_stuck_or_unknown_brokers_may_be_forced(rig, reading, kind):
    from kafka_runbooks.restart.states import assess

    assert assess(reading).kind == kind and assess(reading).may_force
    clock, cluster, backend, roller = rig
    cluster.stuck.add(2)
    roller.probe.stuck_reading = lambda node_id: reading
    state = roller.plan([2], "t", RollOptions(operation_timeout_s=10, allow_force_restart=True))
    roller.step(state)
    clock.now += 11_000
    assert roller.step(state) is True
    assert backend.calls == [("force_restart", 2)]


@pytest.mark.parametrize(
    "body",
    [b'{"brokerState": 1e300}', b'{"brokerState": -1}', b'{"brokerState": 4}', b'{"brokerState": "3"}'],
)
def test_an_answer_that_is_no_broker_state_is_never_forced(rig, body):
    """A Strimzi agent answering ``brokerState: 1e300`` was read as a state and judged stuck: with
    allow_force_restart the broker was force-restarted on a value Kafka never sends (issue #37, 2)."""
    from kafka_runbooks.probes import parse_agent_body
    from kafka_runbooks.restart.states import assess

    reading = parse_agent_body(2, body)
    assert assess(reading).kind == "unknown" and not assess(reading).may_force and not reading.running
    clock, cluster, backend, roller = rig
    cluster.stuck.add(2)
    roller.probe.stuck_reading = lambda node_id: reading
    state = roller.plan([2], "t", RollOptions(operation_timeout_s=10, allow_force_restart=True))
    roller.step(state)
    clock.now += 11_000
    with pytest.raises(RollFailed, match="is not one of Kafka's states"):
        roller.step(state)
    assert backend.calls == []


# -- a restart is observed, never assumed --------------------------------------------------------


def test_a_restart_that_did_not_happen_is_not_counted_and_the_roll_stops_there(rig):
    clock, cluster, backend, roller = rig
    backend.ignored = True  # the request is answered; no new process appears
    state = roller.plan([1, 3], "t", RollOptions(operation_timeout_s=10, max_attempts=2))
    assert roller.step(state) is False
    assert backend.calls == [("restart", 1)]
    assert state.nodes[1].phase == WAIT_BACK
    for _ in range(3):
        assert roller.step(state) is False
    clock.now += 11_000
    roller.step(state)
    clock.now += 11_000
    with pytest.raises(RollFailed, match=r"broker 1: its restart was requested but never observed"):
        roller.step(state)
    assert backend.calls == [("restart", 1)]  # broker 3 never touched


def test_the_next_node_waits_until_the_restart_is_observed(rig):
    clock, cluster, backend, roller = rig
    backend.ignored = True
    state = roller.plan([1, 3], "t", RollOptions())
    roller.step(state)
    roller.step(state)
    assert backend.calls == [("restart", 1)]
    backend.ignored = False
    backend.generation[1] = 1  # the operator rolled it at last
    assert roller.step(state) is True
    assert backend.calls == [("restart", 1), ("restart", 3)]
    assert "identity changed from process 1.0" in state.nodes[1].restart_observed


def test_restart_evidence_rules():
    from kafka_runbooks.restart.backends import restart_observed

    before = {"identity": "uid a", "started_at_ms": 1000, "restart_count": 0}
    assert restart_observed(before, dict(before))[0] is False
    assert restart_observed(before, {**before, "started_at_ms": 2001})[0] is True
    assert restart_observed(before, {**before, "identity": "uid b"})[0] is True
    assert restart_observed(before, {**before, "restart_count": 1})[0] is True
    pending = {"identity": "uid b", "started_at_ms": 3000, "roll_pending": True}
    assert restart_observed(before, pending) == (
        False,
        "the roll is still pending (the pod still carries the roll annotation)",
    )
    observed, why = restart_observed({}, {"error": "no such pod (being replaced)"})
    assert not observed and "no such pod" in why
    # nothing read before the request: a start time alone proves nothing, whatever its value
    observed, why = restart_observed({"error": "timeout"}, {"process_start_ms": 2500})
    assert not observed and "nothing" not in why and "timeout" in why
    # a crashed node force-restarted: the same source said no process ran, and names one now
    dead = {"running": False, "error": "no process running"}
    assert restart_observed(dead, {"identity": "pid 42", "started_at_ms": 5})[0] is True
    assert restart_observed(dead, {"running": False, "error": "no process running"})[0] is False
    assert restart_observed({"error": "unreadable"}, {"identity": "pid 42"})[0] is False


@pytest.mark.parametrize("skew_ms", [120_000, -120_000], ids=["host-ahead", "host-behind"])
def test_restart_evidence_never_compares_a_remote_start_time_with_the_workers_clock(skew_ms):
    """A broker host 2 minutes ahead of the worker: its unchanged process started "after"
    the request by the worker's clock, and must not count (today's main counted it); a host
    behind: a new process started "before" the request, and must count."""
    from kafka_runbooks.restart.backends import restart_observed

    worker_now = 1_000_000_000
    old_start = worker_now - 60_000 + skew_ms  # an hour of uptime is the same: host clock
    before = {"process_start_ms": old_start, "started_at_ms": old_start}
    assert restart_observed(before, dict(before))[0] is False
    new_start = worker_now + 5_000 + skew_ms
    observed, why = restart_observed(before, {"process_start_ms": new_start, "started_at_ms": new_start})
    assert observed and "changed from" in why


# -- ISR waits that understand reassignments -----------------------------------------------------


def test_an_adding_replica_is_followed_not_waited_for_as_an_isr_member(rig, caplog):
    caplog.set_level("INFO", logger="kafka_runbooks.restart.roller")
    clock, cluster, backend, roller = rig
    # broker 3 is being added to "moving-0" and has not caught up (throttled): not in its ISR
    cluster.extra_partitions = [PartitionState("moving", 0, 1, 1, (1, 2, 3), (1, 2), min_insync_replicas=1)]
    cluster.reassignments = {("moving", 0): {"replicas": [1, 2, 3], "adding": [3], "removing": []}}
    state = roller.plan([3], "t", RollOptions(operation_timeout_s=10, max_attempts=1))
    assert roller.step(state) is True
    assert state.nodes[3].isr_before == ["t-0"]
    [done] = [
        r.decision_record for r in caplog.records if getattr(r, "decision_record", {}).get("step") == "isr"
    ]
    assert "1 still catching up" in done["reason"] and done["observed"]["catching_up"] == ["moving-0"]


def test_the_isr_wait_is_for_the_partitions_it_was_in_before(rig):
    clock, cluster, backend, roller = rig
    state = roller.plan([1], "t", RollOptions(operation_timeout_s=10, max_attempts=1))
    original = backend.restart

    def restart_and_drop(node_id):  # the restarted broker is out of t-0's ISR until the test lets it back
        cluster.stuck_isr = True
        return original(node_id)

    backend.restart = restart_and_drop
    read_state = cluster.read_state

    def read_state_without_1(include_log_dirs=True):
        s = read_state(include_log_dirs)
        if getattr(cluster, "stuck_isr", False):
            s.partitions[0] = PartitionState("t", 0, 2, 2, (1, 2, 3), (2, 3), min_insync_replicas=2)
        return s

    cluster.read_state = read_state_without_1
    assert roller.step(state) is False
    assert state.nodes[1].phase == "wait_isr"
    clock.now += 11_000
    with pytest.raises(
        RollFailed, match=r"broker 1 is not back in the ISR of 1 partition\(s\) it was in .*t-0"
    ):
        roller.step(state)


def test_a_broker_that_just_left_starting_is_not_judged_stuck_before_a_whole_timeout(rig):
    """STARTING for most of the operation timeout, then RUNNING but not yet unfenced when
    the timeout runs out: "stuck" needs a whole timeout after the last STARTING reading."""
    clock, cluster, backend, roller = rig
    cluster.stuck.add(2)
    readings = iter([BrokerStateReading(2, 1, source="x")] * 3)
    roller.probe.stuck_reading = lambda node_id: next(readings, BrokerStateReading(2, 3, source="x"))
    state = roller.plan(
        [2], "t", RollOptions(operation_timeout_s=10, max_attempts=5, allow_force_restart=True)
    )
    roller.step(state)  # STARTING
    clock.now += 9_000
    roller.step(state)  # STARTING, 9 s into the timeout
    clock.now += 2_000
    roller.step(state)  # RUNNING, not unfenced, the timeout is over: but it was starting 2 s ago
    clock.now += 5_000
    roller.step(state)
    assert backend.calls == []
    clock.now += 5_000
    assert roller.step(state) is True  # RUNNING and not registered for a whole timeout: stuck
    assert backend.calls == [("force_restart", 2)]


def test_listing_reassignments_survives_the_cached_controller_broker_going_away(monkeypatch):
    """Seen on the real stack: kafka-python sent ListPartitionReassignments to the broker
    the roll had just restarted and raised UnknownBrokerIdError, which crashed the roll."""
    from kafka.errors import UnknownBrokerIdError

    import kafka_runbooks._kafka_python as kafka_python
    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.errors import ClusterUnreachable

    answers = [UnknownBrokerIdError(3), {("t", 0): {"replicas": [1, 2, 3], "adding": [3], "removing": []}}]

    def fake_list(client, send):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    forgotten = []
    monkeypatch.setattr(
        kafka_python, "list_reassignments", lambda client, send: send("List", lambda: fake_list(client, send))
    )
    monkeypatch.setattr("time.sleep", lambda s: None)
    admin = ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"})
    admin.__dict__["_kafka_python"] = type(
        "Client", (), {"forget_controller": lambda self: forgotten.append(1)}
    )()
    assert admin.list_reassignments() == {("t", 0): {"replicas": [1, 2, 3], "adding": [3], "removing": []}}
    assert forgotten == [1]  # the failed request forgot the cached controller: the retry asks a live one
    answers[:] = [UnknownBrokerIdError(3)] * 4
    with pytest.raises(ClusterUnreachable, match="after 4 attempts: UnknownBrokerIdError"):
        admin.list_reassignments()


def test_a_registered_broker_whose_probe_cannot_answer_is_not_ready_and_not_restarted(rig):
    """A crashed broker back within the session timeout: the metadata still shows the old
    process registered and unfenced, while the new JVM's exporter refuses connections (seen
    on the real stack). Restarting it then would hit a broker about to load its logs: wait
    until the probe reads RUNNING."""
    clock, cluster, backend, roller = rig
    answers = {"reading": BrokerStateReading(2, None, source="prometheus", error="connection refused")}
    real_read = roller.probe.read
    roller.probe.read = lambda node_id: answers["reading"] if node_id == 2 else real_read(node_id)
    state = roller.plan([2], "t", RollOptions(operation_timeout_s=10))
    for _ in range(3):
        assert not roller.step(state)
        clock.now += 1_000
    assert backend.calls == []
    answers["reading"] = BrokerStateReading(2, 3, source="prometheus")  # RUNNING
    assert roller.step(state) is True
    assert backend.calls == [("restart", 2)]


# ------------------------------------------------------------------ one phase step at a time


def test_the_availability_check_alone_waits_then_gives_up_without_restarting(rig):
    """_check_availability on broker 1 while broker 2 is out of the ISR (min ISR 2 of t-0)."""
    from kafka_runbooks.restart.roller import CHECK, RESTART

    clock, cluster, backend, roller = rig
    state = roller.plan([1], "t", RollOptions(operation_timeout_s=10))
    node = state.nodes[1]
    roller._enter(node, CHECK)
    cluster.stuck.add(2)
    roller.availability.check(state, node)
    assert node.phase == CHECK and backend.calls == []
    clock.now += 11_000
    with pytest.raises(RollFailed, match="restarting it would hurt availability"):
        roller.availability.check(state, node)
    cluster.stuck.clear()
    roller._enter(node, CHECK)
    roller.availability.check(state, node)
    assert node.phase == RESTART and node.isr_before == ["t-0"] and backend.calls == []


def test_the_restart_step_alone_in_a_dry_run_only_records(rig):
    from kafka_runbooks.restart.roller import RESTART

    _, _, backend, roller = rig
    state = roller.plan([1], "t", RollOptions(dry_run=True))
    node = state.nodes[1]
    roller._enter(node, RESTART)
    roller._restart(state, node)
    assert node.phase == DONE and backend.calls == []


def restart_decisions(caplog) -> list[tuple]:
    """(decision, level, action, observed keys) of every restart asked for (or, dry, not)."""
    return [
        (d["decision"], r.levelname, d["action"], list(d["observed"]))
        for r in caplog.records
        if (d := getattr(r, "decision_record", {})).get("step") == "restart" and d["decision"] != "restarted"
    ]


def roll_one_then_force_one(rig, dry_run: bool) -> None:
    """Broker 1 rolled while healthy, then broker 2 stuck and not starting, force allowed."""
    clock, cluster, _, roller = rig
    options = RollOptions(operation_timeout_s=10, allow_force_restart=True, dry_run=dry_run)
    assert roller.step(roller.plan([1], "t", options)) is True
    cluster.stuck.add(2)
    state = roller.plan([2], "t", options)
    roller.step(state)
    clock.now += 11_000
    assert roller.step(state) is True


def test_a_restart_and_a_force_restart_are_recorded_with_the_evidence_they_must_beat(rig, caplog):
    caplog.set_level("INFO", logger="kafka_runbooks.restart.roller")
    roll_one_then_force_one(rig, dry_run=False)
    assert rig[2].calls == [("restart", 1), ("force_restart", 2)]
    restart, forced = restart_decisions(caplog)
    assert restart == ("restart requested", "INFO", "restarted", ["evidence_before"])
    assert forced[:3] == ("force-restart requested", "WARNING", "forced")
    assert forced[3][-1] == "evidence_before" and len(forced[3]) > 1  # the readiness facts first


def test_a_dry_run_says_which_restart_it_would_ask_for(rig, caplog):
    caplog.set_level("INFO", logger="kafka_runbooks.restart.roller")
    roll_one_then_force_one(rig, dry_run=True)
    assert rig[2].calls == []
    assert restart_decisions(caplog) == [
        ("would restart (dry run)", "INFO", None, []),
        ("would force-restart (dry run)", "INFO", None, []),
    ]


# -- controllers: one clock per comparison, quorum progress from the new process ------------------


@pytest.mark.parametrize("skew_ms", [120_000, -120_000, 0], ids=["cluster-ahead", "cluster-behind", "same"])
def test_a_lagging_voter_blocks_the_others_restart_whatever_the_workers_clock(rig, skew_ms):
    """9003 is a minute behind by the leader's clock: 9002 must not restart (two voters away).
    Judged with the worker's clock, a cluster 2 minutes ahead made 9003 look caught up and a
    cluster 2 minutes behind made every voter look a minute and more behind."""
    clock, cluster, backend, roller = rig
    cluster.skew_ms = skew_ms
    cluster.behind_ms = {9003: 60_000}
    state = roller.plan([9002], "t", RollOptions(operation_timeout_s=10, max_attempts=1))
    assert roller.step(state) is False
    assert backend.calls == [] and state.nodes[9002].phase == "check_availability"
    cluster.behind_ms = {}  # 9003 caught up again
    assert _until_done(roller, state)
    assert backend.calls == [("restart", 9002)]


def test_a_voter_with_no_caught_up_time_is_not_caught_up():
    from kafka_runbooks.evidence import QuorumView
    from kafka_runbooks.model import Quorum, QuorumMember

    quorum = Quorum(
        9001, 1, 10, (QuorumMember(9001, 10, 5_000, 5_000), QuorumMember(9002, 10, None, None)), ()
    )
    assert QuorumView(quorum, 2000).caught_up_voters() == {9001}
    no_leader_time = Quorum(
        9001, 1, 10, (QuorumMember(9001, 10, None, None), QuorumMember(9002, 10, 5_000, 5_000)), ()
    )
    assert QuorumView(no_leader_time, 2000).caught_up_voters() == {9001}  # the leader itself only
    assert QuorumView(no_leader_time, 2000).voter(9002).caught_up_ms_ago is None


def test_a_controller_is_back_only_when_its_new_process_fetches_past_the_leaders_offset(rig, caplog):
    """The incident of issue #23: the old process's caught-up time (fresh, newer than the
    request) stays in DescribeQuorum while the new JVM starts. 9002 must not count as back,
    and 9003 must not be restarted, until the leader reports 9002 fetching past the offset
    the leader had when the new process was seen."""
    caplog.set_level("INFO", logger="kafka_runbooks.restart.roller")
    clock, cluster, backend, roller = rig
    state = roller.plan([9002, 9003], "t", RollOptions(operation_timeout_s=600))
    restart = backend.restart

    def restart_then_stall(node_id):
        out = restart(node_id)
        if node_id == 9002:  # the old process's last fetch, with a caught-up time that keeps looking fresh
            cluster.not_fetching[9002] = _FreshStall(cluster, cluster.log_end)
        return out

    backend.restart = restart_then_stall
    for _ in range(5):
        assert roller.step(state) is False
    assert backend.calls == [("restart", 9002)]
    node = state.nodes[9002]
    assert node.restart_observed and node.quorum_offset_at_restart is not None
    resumed = RollState.from_json(state.to_json())  # the offset is in the checkpointed state
    assert resumed.nodes[9002].quorum_offset_at_restart == node.quorum_offset_at_restart
    del cluster.not_fetching[9002]  # the new process fetches
    assert _until_done(roller, resumed)
    assert backend.calls == [("restart", 9002), ("restart", 9003)]


class _FreshStall(QuorumMember):
    """A voter entry stuck at one offset whose caught-up time always reads as just now."""

    def __new__(cls, cluster, offset):
        return object.__new__(cls)

    def __init__(self, cluster, offset):
        object.__setattr__(self, "_cluster", cluster)
        object.__setattr__(self, "node_id", 9002)
        object.__setattr__(self, "log_end_offset", offset)

    @property
    def last_caught_up_ms(self):
        return self._cluster.clock.now + self._cluster.skew_ms

    @property
    def last_fetch_ms(self):
        return self.last_caught_up_ms


def test_a_state_file_from_before_the_quorum_offset_is_read_and_resumed_safely(rig):
    """An old state file (no quorum_offset_at_restart) of a controller whose restart was
    already observed: it waits for quorum progress from now on, it is not declared back on
    the caught-up time it reads; a key this roller does not know is dropped, not fatal."""
    import json

    clock, cluster, backend, roller = rig
    state = roller.plan([9002], "t", RollOptions())
    data = json.loads(state.to_json())
    node = data["nodes"]["9002"]
    del node["quorum_offset_at_restart"]
    node.update(phase="wait_isr", restart_observed="identity changed", future_key=1)
    resumed = RollState.from_json(json.dumps(data))
    assert resumed.nodes[9002].quorum_offset_at_restart is None
    cluster.not_fetching[9002] = _FreshStall(cluster, cluster.log_end)
    assert roller.step(resumed) is False
    assert resumed.nodes[9002].quorum_offset_at_restart is not None
    del cluster.not_fetching[9002]
    assert _until_done(roller, resumed)


def test_without_a_probe_a_restarted_broker_is_back_only_once_it_answers_itself(rig):
    """No probe: a broker whose old process died without a controlled shutdown keeps its
    registration unfenced in DescribeCluster (and its place in the ISRs) until its session
    times out, while the controller refuses its new process (DUPLICATE_BROKER_REGISTRATION):
    taken for back, the next broker would go down beside it. Only the broker answering on its
    own listener, which it opens once unfenced, says its new process serves."""
    clock, cluster, backend, _ = rig
    roller = Roller(cluster, backend, None, clock=clock)
    restart = backend.restart

    def restart_refused_registration(node_id):
        if node_id == 1:
            cluster.silent.add(1)
        return restart(node_id)

    backend.restart = restart_refused_registration
    state = roller.plan([1, 3], "t", RollOptions(operation_timeout_s=60))
    for _ in range(5):
        assert not roller.step(state)
        clock.now += 1_000
    assert backend.calls == [("restart", 1)] and state.nodes[1].phase == WAIT_BACK
    cluster.silent.clear()  # registered and unfenced: its listener opens
    assert _until_done(roller, state)
    assert backend.calls == [("restart", 1), ("restart", 3)]


def test_a_broker_is_not_restarted_beside_an_isr_member_that_does_not_answer_itself(rig):
    """Broker 3 died a moment ago without a controlled shutdown: still in the ISR, registered and
    unfenced, but its listener refuses. Restarting broker 1 would leave the partition one in-sync
    replica (min ISR 2): the check waits, then gives up, and nothing is restarted."""
    clock, cluster, backend, roller = rig
    cluster.silent.add(3)
    state = roller.plan([1], "t", RollOptions(operation_timeout_s=5))
    roller.step(state)
    roller.step(state)
    assert backend.calls == [] and state.nodes[1].phase == "check_availability"
    clock.now += 6_000
    with pytest.raises(RollFailed, match=r"broker\(s\) \[3\] do not answer themselves"):
        _until_done(roller, state)
    assert backend.calls == []


def test_a_broker_back_in_its_isrs_is_not_done_while_it_does_not_answer_itself(rig):
    """Issue #37, point 7: the roll marked a broker done on the metadata ISR alone. Broker 1 came
    back (it answered itself: back), rejoined its ISRs, and died at once (a bad config being
    rolled): the ISR keeps it until its session times out. It is done only once it answers again."""
    clock, cluster, backend, roller = rig
    answers = cluster.broker_answers
    asked_after_restart = []

    def answers_once_then_dies(broker_id, timeout_s=5.0):
        if broker_id == 1 and backend.calls:
            asked_after_restart.append(clock.now)
            if len(asked_after_restart) > 1 and 1 in cluster.silent:
                return "KafkaConnectionError: 111 ECONNREFUSED"
            cluster.silent.add(1)  # answered once (back), silent from then on
            return None
        return answers(broker_id, timeout_s)

    cluster.broker_answers = answers_once_then_dies
    state = roller.plan([1], "t", RollOptions(operation_timeout_s=60))
    for _ in range(6):
        assert not roller.step(state)
        clock.now += 1_000
    assert state.nodes[1].phase == "wait_isr" and backend.calls == [("restart", 1)]
    cluster.silent.clear()
    cluster.broker_answers = answers
    assert _until_done(roller, state)
