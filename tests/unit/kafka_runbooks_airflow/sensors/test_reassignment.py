"""KafkaReassignmentSensor's decisions, one poke at a time, without a cluster or a running Airflow.

The execution state, its fence, the cluster's lease and the stop request are the real ones, in
the data store on a tmp folder; only the cluster is stood in for: broker 5 has failed and
partition t-0 (replicas 5, 1, 2) moves to 1, 2, 3 in one chunk. What is checked is what the
sensor decides around the executor: a poke whose claim was taken over or whose task was
killed sets no throttle and submits nothing, ``on_kill`` takes the throttle off only while the
run's state is still its own, and an operator's stop ends the run saying who asked.
"""

from __future__ import annotations

from types import SimpleNamespace

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks import decisions
from kafka_runbooks.failed_broker import execute
from kafka_runbooks.failed_broker.execute import MOVING, ChunkState, ExecState, load_state, save_state
from kafka_runbooks.model import Broker, PartitionState
from kafka_runbooks_airflow.hooks import kafka_admin
from kafka_runbooks_airflow.lease import cluster_lease
from kafka_runbooks_airflow.run_state import run_dir
from kafka_runbooks_airflow.sensors.reassignment import KafkaReassignmentSensor
from tests.config_fakes import ConfigStore

DAG_ID = "kafka_failed_broker_reassignment"
RUN_ID = "sweep__kafka_unit__2026-11-24T10:00:00+00:00"
CONN = "kafka_unit"


class FailedBrokerCluster:
    """Stands in for ClusterAdmin: broker 5 is gone; what the runbook sets and submits is recorded."""

    bootstrap_servers = "fake:9092"

    def __init__(self):
        self.acted: list[tuple] = []  # every call that changes the cluster, in order
        self.inflight: dict = {}
        self.closed = 0
        self.on_read = None
        self.silent: dict[int, str] = {}  # brokers whose own listener does not answer, with why
        self.store = ConfigStore()

    def describe_brokers(self):
        if self.on_read is not None:
            on_read, self.on_read = self.on_read, None
            on_read()
        return {b: Broker(b, alive=b != 5) for b in (1, 2, 3, 4, 5)}

    def broker_answers(self, broker_id, timeout_s=5.0):
        return self.silent.get(broker_id)

    def cluster_timeouts(self):
        """The local stack's settings (DescribeConfigs of the brokers); shorter than any settle here."""
        from kafka_runbooks.evidence import ClusterTimeouts

        return ClusterTimeouts(1, 2000, source="DescribeConfigs of broker(s) [1, 2, 3] (the largest value)")

    def describe_topic_partitions(self, topics):
        return self.describe_partitions(topics)

    def list_topics(self):
        return ["t"]

    isr = (1, 2)

    def describe_partitions(self, topics):
        return [PartitionState("t", 0, 1, 7, (5, 1, 2), self.isr)]

    def list_reassignments(self):
        return dict(self.inflight)

    def alter_partition_reassignments(self, pairs):
        self.acted.append(("reassign", dict(pairs)))
        for tp, target in pairs.items():
            if target is None:
                self.inflight.pop(tp, None)
            else:
                self.inflight[tp] = {"replicas": [5, 1, 2, 3], "adding": [3], "removing": [5]}
        return {tp: None for tp in pairs}

    def describe_config_values(self, kind, names, keys, asked_of=None):
        return self.store.values(kind, names, keys)

    def incremental_alter_configs(self, kind, changes):
        self.acted.append(("configs", kind, changes))
        return self.store.alter(kind, changes)

    def describe_log_dirs(self, broker_ids):
        return [], {}

    def close(self):
        self.closed += 1


class FakeTI:
    """Stands in for the Task SDK's RuntimeTaskInstance: answers as Airflow 3.3's execution API does."""

    try_number = 1
    map_index = -1

    def __init__(self):
        self.states = ["running"]  # what get_task_states answers, in turn (the last one stays)
        self.asked: list[dict] = []

    def get_dagrun_state(self, dag_id, run_id):  # what the lease asks of a holder's run
        return "running"

    def get_task_states(self, dag_id, map_index=None, task_ids=None, task_group_id=None, run_ids=None):
        """``{run_id: {task_id: state}}`` as ``TaskStatesResponse`` has it; an exception raised."""
        self.asked.append(
            {"dag_id": dag_id, "task_ids": task_ids, "run_ids": run_ids, "map_index": map_index}
        )
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if isinstance(state, Exception):
            raise state
        return {run_ids[0]: {task_id: state for task_id in task_ids}}


@pytest.fixture
def rig(tmp_path, monkeypatch):
    """A validated, approved-elsewhere run: its state file with one pending chunk, the lease held."""
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    decisions.forget()
    cluster = FailedBrokerCluster()
    built: list[str] = []

    class AdminHook:
        def __init__(self, kafka_config_id):
            built.append(kafka_config_id)
            self.admin = cluster

    monkeypatch.setattr(kafka_admin, "KafkaAdminHook", AdminHook)
    with DAG(DAG_ID, schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        sensor = KafkaReassignmentSensor(task_id="execute_chunks", kafka_config_id=CONN, max_poke_s=0)
    context = {
        "dag": SimpleNamespace(dag_id=DAG_ID),
        "run_id": RUN_ID,
        "ti": FakeTI(),
        "params": {"dry_run": False},
        "dag_run": SimpleNamespace(start_date=pendulum.datetime(2026, 11, 24, 10)),
    }
    cluster_lease(context, CONN).acquire()
    path = run_dir(DAG_ID, RUN_ID) / "exec-state.json"
    chunk = ChunkState(0, {"t:0": [1, 2, 3]}, bytes={"t:0": 1000})
    save_state(path, ExecState(RUN_ID, [5], 10_000_000, [chunk]))
    return SimpleNamespace(cluster=cluster, built=built, sensor=sensor, context=context, path=path)


def _stopped_acting() -> list[str]:
    return [r.reason for r in decisions.made() if r.step == "execute" and r.decision == "stop acting"]


def _reassigned(cluster) -> list[dict]:
    return [call[1] for call in cluster.acted if call[0] == "reassign"]


def test_a_poke_that_keeps_its_claim_throttles_then_submits_the_chunk(rig):
    """The baseline the refusals below are measured against: the fake cluster does take a chunk."""
    assert rig.sensor.poke(rig.context) is False  # copying: the next poke goes on
    assert [call[0] for call in rig.cluster.acted] == ["configs", "configs", "reassign"]
    assert _reassigned(rig.cluster) == [{("t", 0): [1, 2, 3]}]
    state = load_state(rig.path)
    assert state.chunks[0].status == MOVING and state.throttle is not None
    assert rig.cluster.closed == 1


def test_a_poke_superseded_before_its_first_write_sets_no_throttle_and_submits_nothing(rig):
    """The cleanup task (or a newer attempt) claimed the run while this poke read the cluster."""
    rig.cluster.on_read = lambda: execute.claim(rig.path, f"throttle cleanup of {RUN_ID}")
    with pytest.raises(AirflowFailException, match="claimed"):
        rig.sensor.poke(rig.context)
    assert rig.cluster.acted == []
    assert _stopped_acting(), decisions.made()
    assert load_state(rig.path).claimed_by == f"throttle cleanup of {RUN_ID}"


def test_on_kill_during_a_poke_stops_it_before_anything_is_set(rig):
    """SIGTERM only calls on_kill (Airflow 3.3.2): the poke goes on, and its next write must fail."""
    rig.cluster.on_read = rig.sensor.on_kill
    with pytest.raises(AirflowFailException, match="killed"):
        rig.sensor.poke(rig.context)
    assert rig.cluster.acted == []
    assert _stopped_acting() and "on_kill" in _stopped_acting()[0]


def test_on_kill_after_a_poke_takes_its_own_throttle_off(rig):
    """Killed while the copy runs: the throttle this poke set must not outlive it."""
    rig.sensor.poke(rig.context)
    rig.cluster.acted.clear()
    rig.sensor.on_kill()
    # each broker's rates by a request of its own (a dead one keeps none of the others back), then the
    # topic: its items subtracted, then each list SUBTRACT left empty ("") deleted
    topic_calls = [call[2]["t"] for call in rig.cluster.acted[3:]]
    assert [call[:2] for call in rig.cluster.acted[:3]] == [("configs", "broker")] * 3
    assert [{op for op, _ in c.values()} for c in topic_calls] == [{"SUBTRACT"}] + [{"DELETE"}] * len(
        topic_calls[0]
    )
    assert rig.cluster.store.values("topic", ["t"], ["leader.replication.throttled.replicas"]) == {"t": {}}
    assert [list(call[2]) for call in rig.cluster.acted[:3]] == [["1"], ["2"], ["3"]]
    assert load_state(rig.path).throttle is None
    assert _reassigned(rig.cluster) == []  # the copy itself goes on; a re-run adopts it


def test_on_kill_leaves_the_throttle_to_whoever_claimed_the_run_since(rig):
    """A newer attempt claimed the state after this poke: the throttle is now that attempt's."""
    rig.sensor.poke(rig.context)
    rig.cluster.acted.clear()
    execute.claim(rig.path, f"{RUN_ID} execute_chunks try 2")
    built = list(rig.built)
    rig.sensor.on_kill()
    assert rig.cluster.acted == [] and rig.built == built
    assert load_state(rig.path).throttle is not None


def test_every_chunk_done_succeeds_without_building_a_client(rig):
    state = load_state(rig.path)
    state.finished = True
    save_state(rig.path, state)
    assert rig.sensor.poke(rig.context) is True
    assert rig.built == [] and rig.cluster.acted == []


def test_a_run_without_a_state_file_fails_and_names_it(rig):
    rig.path.unlink()
    with pytest.raises(AirflowFailException, match="nothing to execute for this run .*exec-state.json"):
        rig.sensor.poke(rig.context)
    assert rig.built == []


def test_a_run_that_lost_the_lease_moves_nothing_and_claims_nothing(rig):
    cluster_lease(rig.context, CONN).release()
    other = {**rig.context, "dag": SimpleNamespace(dag_id="kafka_broker_restart"), "run_id": "other"}
    cluster_lease(other, CONN).acquire()
    before = rig.path.read_text()
    with pytest.raises(AirflowFailException, match="lease"):
        rig.sensor.poke(rig.context)
    assert rig.cluster.acted == [] and rig.built == []
    assert rig.path.read_text() == before


def test_a_stop_asked_after_the_run_started_cancels_its_moves_and_names_who_asked(rig):
    """kafka_reassignment_stop wrote a request for this connection: the next poke cancels what this
    run has in flight, takes its throttle off and fails the run with the operator's words."""
    from kafka_runbooks.failed_broker.stop import StopRequest, request_path, write_request
    from kafka_runbooks_airflow.run_state import runbook_dir

    rig.sensor.poke(rig.context)
    rig.cluster.acted.clear()
    asked_ms = int(pendulum.datetime(2026, 11, 24, 11).timestamp() * 1000)  # after the run's start
    write_request(
        request_path(runbook_dir(DAG_ID), CONN), StopRequest(CONN, "alice", "copy hurts producers", asked_ms)
    )
    with pytest.raises(AirflowFailException, match="alice.*copy hurts producers"):
        rig.sensor.poke(rig.context)
    assert _reassigned(rig.cluster) == [{("t", 0): None}]  # cancelled, nothing new submitted
    assert rig.cluster.inflight == {}
    assert load_state(rig.path).throttle is None


def _refused() -> list[tuple[str, str]]:
    return [(r.decision, r.reason) for r in decisions.made() if r.decision.startswith("refuse: this try")]


@pytest.mark.parametrize("state", ["restarting", "failed", None])
def test_a_poke_whose_try_airflow_says_is_not_running_submits_nothing(rig, state):
    """Cleared (``restarting``), marked failed, or reset: the newer try has not claimed yet (it is only
    queued) and the supervisor's SIGTERM has not come; Airflow already knows, and is asked."""
    rig.context["ti"].states = [state]
    with pytest.raises(AirflowFailException, match="not running: nothing submitted"):
        rig.sensor.poke(rig.context)
    assert rig.cluster.acted == []
    shown = state or "without a state"
    assert _refused() == [
        (
            "refuse: this try was superseded",
            f"Airflow says this try is {shown}, not running: nothing submitted",
        )
    ]
    assert rig.context["ti"].asked[0] == {
        "dag_id": DAG_ID,
        "task_ids": ["execute_chunks"],
        "run_ids": [RUN_ID],
        "map_index": None,
    }


def test_a_try_cleared_between_its_throttle_and_its_submission_submits_no_chunk(rig):
    """Asked again right before the submission itself: the throttle went on while Airflow still said
    running; the Clear landed after, and the chunk is not submitted (the throttle is the cleanup's)."""
    rig.context["ti"].states = ["running", "restarting"]
    with pytest.raises(AirflowFailException, match="restarting, not running"):
        rig.sensor.poke(rig.context)
    assert [call[0] for call in rig.cluster.acted] == ["configs", "configs"]
    assert _reassigned(rig.cluster) == []
    assert load_state(rig.path).throttle is not None  # recorded: remove_throttles takes it off


@pytest.mark.parametrize(
    "answer", [TimeoutError("execution API timed out"), "not listed"], ids=["error", "not listed"]
)
def test_a_poke_that_cannot_ask_airflow_submits_nothing_and_fails(rig, answer):
    """Unknown is not running: nothing is set or submitted, and the poke fails saying so (the next
    poke or try asks again)."""
    from kafka_runbooks.task_state import TaskStateUnknown

    ti = rig.context["ti"]
    if answer == "not listed":
        ti.get_task_states = lambda **kw: {RUN_ID: {"another_task": "running"}}
    else:
        ti.states = [answer]
    with pytest.raises(TaskStateUnknown, match="could not say whether this try is still running"):
        rig.sensor.poke(rig.context)
    assert rig.cluster.acted == []
    assert [d for d, _ in _refused()] == ["refuse: this try's state is unknown"]


def test_a_chunk_whose_receiver_does_not_answer_itself_sets_and_submits_nothing(rig):
    """Broker 3 was killed a moment ago: DescribeCluster still shows it registered and unfenced
    until its session times out. New replicas on it would never copy and the chunk would wait
    under its throttle: refused before any throttle or submission, saying why."""
    rig.cluster.silent[3] = "KafkaConnectionError: 111 ECONNREFUSED"
    with pytest.raises(Exception, match=r"broker 3 does not answer itself"):
        rig.sensor.poke(rig.context)
    assert rig.cluster.acted == []
    refused = [r for r in decisions.made() if r.decision == "refuse the chunk"]
    assert refused and refused[0].observed["not_answering"] == {3: "KafkaConnectionError: 111 ECONNREFUSED"}


def test_a_removal_that_would_keep_a_replica_out_of_the_isr_is_not_submitted(rig):
    """A chunk that only removes the failed broker's replica (nothing added): the controller completes
    it at once, so the replicas kept must be in the ISR and answer. Broker 2 fell out of the ISR
    since the plan: refused, nothing set or submitted."""
    chunk = ChunkState(0, {"t:0": [1, 2]}, bytes={"t:0": 1000}, planned_from={"t:0": [5, 1, 2]})
    save_state(rig.path, ExecState(RUN_ID, [5], 10_000_000, [chunk]))
    rig.cluster.isr = (1,)
    with pytest.raises(Exception, match=r"t:0: kept replica\(s\) \[2\] not in the ISR"):
        rig.sensor.poke(rig.context)
    assert rig.cluster.acted == []
    rig.cluster.isr = (1, 2)  # back in sync: the same removal is submitted
    decisions.forget()
    rig.sensor.poke(rig.context)
    assert _reassigned(rig.cluster) == [{("t", 0): [1, 2]}]
