"""KafkaRollingRestartSensor's decisions, one poke at a time, without a cluster or a running Airflow.

The roll state, the fence and the cluster's lease are the real ones, in the data store on a
tmp folder; only the cluster is stood in for, by the roller tests' fakes
(tests/unit/kafka_runbooks/restart/test_roller.py): three brokers that restart at once when
asked. What matters here is what the sensor decides around the roller: a poke whose claim
was taken over (a newer attempt Airflow started while this one still runs) or whose task
was killed restarts nothing, and a roll already done touches no cluster at all.
"""

from __future__ import annotations

from types import SimpleNamespace

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks import decisions, fence, storage
from kafka_runbooks.restart.roller import DONE, Roller, RollOptions, RollState
from kafka_runbooks_airflow.hooks import kafka_admin, restart
from kafka_runbooks_airflow.lease import cluster_lease
from kafka_runbooks_airflow.run_state import read_roll_state, roll_state_key, write_roll_state
from kafka_runbooks_airflow.sensors.rolling_restart import KafkaRollingRestartSensor
from tests.unit.kafka_runbooks.restart.test_roller import Backend, Clock, Cluster, Probe

DAG_ID = "kafka_broker_restart"
RUN_ID = "manual__2026-11-24T10:00:00+00:00"
CONN = "kafka_unit"


class ObservedCluster(Cluster):
    """The roller tests' cluster, closable like the admin facade, with a hook on its state reads
    (something else happens while this poke is between its claim and its next write)."""

    def __init__(self, clock):
        super().__init__(clock)
        self.closed = 0
        self.on_read = None

    def read_state(self, include_log_dirs=True):
        if self.on_read is not None:
            on_read, self.on_read = self.on_read, None
            on_read()
        return super().read_state(include_log_dirs)

    def close(self):
        self.closed += 1


class FakeTI:
    try_number = 1

    def get_dagrun_state(self, dag_id, run_id):  # what the lease asks of a holder's run
        return "running"


@pytest.fixture
def rig(tmp_path, monkeypatch):
    """A planned roll of broker 2 whose run holds the cluster's lease; hooks hand out the fakes."""
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    decisions.forget()
    cluster = ObservedCluster(Clock())
    backend = Backend(cluster)
    built: list[str] = []

    class AdminHook:
        def __init__(self, kafka_config_id):
            built.append(f"admin {kafka_config_id}")
            self.admin = cluster

    class ProbeHook:
        def __init__(self, probe_conn_id):
            built.append(f"probe {probe_conn_id}")

        def get_probe(self):
            return Probe(cluster)

    class BackendHook:
        def __init__(self, restart_conn_id):
            built.append(f"backend {restart_conn_id}")

        def get_backend(self):
            return backend

    monkeypatch.setattr(kafka_admin, "KafkaAdminHook", AdminHook)
    monkeypatch.setattr(restart, "BrokerProbeHook", ProbeHook)
    monkeypatch.setattr(restart, "RestartBackendHook", BackendHook)
    with DAG(DAG_ID, schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        sensor = KafkaRollingRestartSensor(
            task_id="rolling_restart", kafka_config_id=CONN, max_poke_s=5, step_interval_s=0
        )
    context = {
        "dag": SimpleNamespace(dag_id=DAG_ID),
        "run_id": RUN_ID,
        "ti": FakeTI(),
        "params": {"dry_run": False},
    }
    cluster_lease(context, CONN).acquire()
    plan = Roller(cluster, backend, Probe(cluster), clock=Clock()).plan([2], "unit", RollOptions())
    write_roll_state(DAG_ID, RUN_ID, plan.to_json())
    return SimpleNamespace(cluster=cluster, backend=backend, built=built, sensor=sensor, context=context)


def _stopped_acting() -> list[str]:
    return [r.reason for r in decisions.made() if r.step == "roll" and r.decision == "stop acting"]


def test_a_poke_that_keeps_its_claim_restarts_the_planned_broker_and_saves_the_roll(rig):
    """The baseline the refusals below are measured against: the fakes do let a poke restart."""
    assert rig.sensor.poke(rig.context) is True
    assert rig.backend.calls == [("restart", 2)]
    state = RollState.from_json(read_roll_state(DAG_ID, RUN_ID))
    assert state.finished and state.nodes[2].phase == DONE
    assert rig.cluster.closed == 1


def test_a_poke_superseded_by_a_newer_attempt_restarts_nothing(rig):
    """Airflow 3.3.2 lets a task it marked failed run on for a few seconds beside the new attempt:
    once the new attempt has claimed the roll, the old poke's next write fails before any restart."""
    store, key = storage.store(), roll_state_key(DAG_ID, RUN_ID)
    rig.cluster.on_read = lambda: fence.claim(store, key, f"{RUN_ID} rolling_restart try 2")
    with pytest.raises(AirflowFailException, match="claimed"):
        rig.sensor.poke(rig.context)
    assert rig.backend.calls == []
    assert _stopped_acting(), decisions.made()
    assert "try 2" in read_roll_state(DAG_ID, RUN_ID)  # the newer claimant's state is left to it
    assert rig.cluster.closed == 1


def test_on_kill_during_a_poke_stops_it_before_the_restart(rig):
    """SIGTERM only calls on_kill (Airflow 3.3.2): the poke goes on, and its next write must fail."""
    rig.cluster.on_read = rig.sensor.on_kill
    with pytest.raises(AirflowFailException, match="killed"):
        rig.sensor.poke(rig.context)
    assert rig.backend.calls == []
    assert _stopped_acting() and "on_kill" in _stopped_acting()[0]


def test_a_roll_already_done_succeeds_without_building_a_client(rig):
    """A cleared task whose roll finished: nothing to do, and no connection is even read."""
    state = RollState.from_json(read_roll_state(DAG_ID, RUN_ID))
    for node in state.nodes.values():
        node.phase = DONE
    write_roll_state(DAG_ID, RUN_ID, state.to_json())
    assert rig.sensor.poke(rig.context) is True
    assert rig.built == [] and rig.backend.calls == []


def test_a_run_without_a_planned_roll_fails_and_names_where_it_looked(rig):
    storage.store().delete(roll_state_key(DAG_ID, RUN_ID))
    with pytest.raises(AirflowFailException, match="no roll planned for this run .*roll-state.json"):
        rig.sensor.poke(rig.context)
    assert rig.built == []


def test_a_run_that_lost_the_lease_restarts_nothing_and_claims_nothing(rig):
    """Another runbook holds the cluster now (this run's lease expired and was taken over)."""
    cluster_lease(rig.context, CONN).release()
    other = {**rig.context, "dag": SimpleNamespace(dag_id="kafka_unclean_recovery"), "run_id": "other"}
    cluster_lease(other, CONN).acquire()
    before = read_roll_state(DAG_ID, RUN_ID)
    with pytest.raises(AirflowFailException, match="lease"):
        rig.sensor.poke(rig.context)
    assert rig.backend.calls == [] and rig.built == []
    assert read_roll_state(DAG_ID, RUN_ID) == before


# ---------------------------------------------------------------- how long one poke goes on


class _Node:
    def __init__(self, phase):
        self.phase = phase


class _Roll:
    """A roll of one node whose phase the stand-in roller walks through, one step at a time
    (``beside``: the phase of a node in the other lane, which stays where it is)."""

    def __init__(self, phases, beside=None):
        self.phases = list(phases)
        self.beside = beside
        self.steps = 0

    def current(self):
        return _Node(self.phases[0]) if self.phases else None

    def in_turn(self):
        nodes = [_Node(self.phases[0])] if self.phases and self.phases[0] != DONE else []
        return nodes + ([_Node(self.beside)] if self.beside else [])

    def step(self, state):
        self.steps += 1
        if len(self.phases) > 1:
            self.phases.pop(0)
        return self.phases == [DONE]


def _sensor(max_poke_s, max_hold_s):
    with DAG(DAG_ID, schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        return KafkaRollingRestartSensor(
            task_id="rolling_restart", max_poke_s=max_poke_s, max_hold_s=max_hold_s, step_interval_s=0
        )


def test_a_poke_past_its_time_goes_on_while_the_node_it_restarted_comes_back():
    """Its time is up (max_poke_s 0) while the node restarts: the poke keeps stepping until the node
    is back and in sync, instead of noticing it only a reschedule (poke_interval) later."""
    from kafka_runbooks.restart.roller import CHECK, RESTART, WAIT_BACK, WAIT_ISR

    roll = _Roll([CHECK, RESTART, WAIT_BACK, WAIT_BACK, WAIT_ISR, DONE])
    assert _sensor(max_poke_s=0, max_hold_s=60)._steps(roll, roll, lambda s: None) is True
    assert roll.steps == 5


def test_a_poke_past_its_time_ends_before_a_node_is_asked_to_restart():
    """Waiting for the next node to be ready (it may be in log recovery for minutes) is what the
    reschedule is for: a poke whose time is up ends there."""
    from kafka_runbooks.restart.roller import WAIT_READY

    roll = _Roll([WAIT_READY, WAIT_READY, WAIT_READY, DONE])
    assert _sensor(max_poke_s=0, max_hold_s=60)._steps(roll, roll, lambda s: None) is False
    assert roll.steps == 1


def test_a_node_that_does_not_come_back_ends_the_poke_at_max_hold_s():
    from kafka_runbooks.restart.roller import WAIT_BACK

    roll = _Roll([WAIT_BACK] * 1_000_000)
    sensor = _sensor(max_poke_s=0, max_hold_s=0.2)
    assert sensor._steps(roll, roll, lambda s: None) is False
    assert 1 < roll.steps < 1_000_000


def test_a_poke_past_its_time_goes_on_while_the_node_in_the_other_lane_comes_back():
    """Two lanes (issue #25): the broker in turn waits to be ready, the controller beside it was
    restarted: the poke goes on until it is back, as for a roll of one node at a time."""
    from kafka_runbooks.restart.roller import WAIT_BACK, WAIT_READY

    roll = _Roll([WAIT_READY, WAIT_READY, WAIT_READY, DONE], beside=WAIT_BACK)
    assert _sensor(max_poke_s=0, max_hold_s=60)._steps(roll, roll, lambda s: None) is True
    assert roll.steps == 3
