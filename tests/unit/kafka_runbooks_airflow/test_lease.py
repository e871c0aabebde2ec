"""The disruptive runbooks share the per-cluster lease instead of ``max_active_runs=1``:
taken first (before the plan reads the cluster), held through the gate, given back by a
teardown whatever happened; the steps that act renew it (and stop if it was lost)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DISRUPTIVE = {
    "kafka_broker_restart": ("plan_restart", "rolling_restart"),
    "kafka_unclean_recovery": ("plan_recovery", "run_elections"),
    "kafka_failed_broker_reassignment": ("validate", "execute_chunks"),
    "kafka_broker_decommission": ("validate", "execute_chunks"),
    "kafka_log_dir_failure": ("validate", "execute_chunks"),
    "kafka_rebalance": ("validate", "execute_chunks"),
    "kafka_controller_replace": ("plan_replacement", "replace"),
}


@pytest.fixture(scope="module")
def dags():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags


@pytest.mark.parametrize("dag_id", sorted(DISRUPTIVE))
def test_one_run_per_cluster_by_lease_not_one_run_per_dag(dags, dag_id):
    from kafka_runbooks_airflow.sensors.lease import ClusterLeaseSensor

    dag = dags[dag_id]
    plan, act = DISRUPTIVE[dag_id]
    # runs on other clusters must not queue behind this one (Airflow's default is 16)
    assert dag.max_active_runs > 1
    acquire, release = dag.get_task("acquire_lease"), dag.get_task("release_lease")
    assert isinstance(acquire, ClusterLeaseSensor) and acquire.mode == "reschedule"
    assert acquire.is_setup and release.is_teardown
    assert acquire.kafka_config_id == "{{ params.kafka_config_id }}"
    assert acquire.on_held == "{{ params.on_lease_held }}"
    # before the plan reads the cluster, and released only after the acting step
    assert "acquire_lease" in dag.get_task(plan).get_flat_relative_ids(upstream=True)
    assert act in release.get_flat_relative_ids(upstream=True)
    assert dag.params["on_lease_held"] == "wait"
    assert dag.params.get_param("on_lease_held").schema["enum"] == ["wait", "fail"]


def test_who_needs_the_lease():
    from kafka_runbooks_airflow.lease import lease_needed

    assert lease_needed("kafka_broker_restart", {"dry_run": False})
    assert not lease_needed("kafka_broker_restart", {"dry_run": True})
    assert not lease_needed("kafka_failed_broker_reassignment", {"dry_run": True})
    assert lease_needed("kafka_unclean_recovery", {"mode": "automated_recovery"})
    assert not lease_needed("kafka_unclean_recovery", {"mode": "manual_recovery_file"})
    assert not lease_needed("kafka_unclean_recovery", {"mode": "show_replica_info"})


class FakeTI:
    """The task instance's run-state look-up, as the Task SDK answers it."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states

    def get_dagrun_state(self, dag_id, run_id):
        if run_id not in self.states:
            raise RuntimeError("DagRun not found")
        return self.states[run_id]


def test_holder_state_from_airflow_run_states():
    from kafka_runbooks.lease import HOLDER_ACTIVE, HOLDER_FINISHED, HOLDER_UNKNOWN, Holder
    from kafka_runbooks_airflow.lease import holder_state_from

    state = holder_state_from(FakeTI({"a": "running", "b": "failed", "c": "success", "d": "queued"}))
    assert [state(Holder("x", r)) for r in "abcde"] == [
        HOLDER_ACTIVE,
        HOLDER_FINISHED,
        HOLDER_FINISHED,
        HOLDER_ACTIVE,
        HOLDER_UNKNOWN,
    ]


def test_reassignment_state_files_are_kept_per_cluster(tmp_path, monkeypatch):
    """Two clusters' reassignment runs now run at once: one run's leftover-throttle cleanup and
    in-flight adoption must only see its own cluster's runs (before, every run of the DAG)."""
    from kafka_runbooks_airflow import failed_broker as reassign

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    for run_id, cluster in (("run_a", "kafka_a"), ("run_b", "kafka_b"), ("old", None)):
        folder = reassign.run_dir(reassign.REASSIGN_DAG_ID, run_id)
        (folder / reassign.EXEC_STATE).write_text("{}")
        if cluster:
            reassign.mark_cluster(folder, cluster)
    names = {p.parent.name for p in reassign.state_files(reassign.REASSIGN_DAG_ID, "kafka_a")}
    assert names == {"run_a", "old"}  # an unmarked folder predates clusters: it counts for any
    assert len(reassign.state_files(reassign.REASSIGN_DAG_ID)) == 3


def test_a_reassignment_on_one_cluster_does_not_count_as_active_on_another(tmp_path, monkeypatch):
    """The sweep used to count every active run of the runbook, whichever cluster it was on:
    a reassignment on A held back the one B needed. Now: the lease holder of that cluster,
    and the runs the sweep started for that cluster's brokers."""
    from kafka_runbooks.failed_broker.failures import FailedBroker, FailureStore
    from kafka_runbooks.lease import ClusterLease, Holder
    from kafka_runbooks_airflow.failed_broker import reassignment_active_on
    from kafka_runbooks_airflow.lease import lease_store
    from kafka_runbooks_airflow.run_state import REASSIGN_DAG_ID

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    ClusterLease(lease_store(), "kafka_a", Holder(REASSIGN_DAG_ID, "manual__a")).acquire()
    FailureStore("kafka_b").save(
        {4: FailedBroker(4, 0, triggered_ms=1, triggered_run_id="sweep__kafka_b__1")}
    )
    ti = FakeTI({"manual__a": "running", "sweep__kafka_b__1": "success"})
    assert reassignment_active_on(ti, "kafka_a") == ["manual__a"]
    assert reassignment_active_on(ti, "kafka_b") == []  # its own run is finished
    ti.states["sweep__kafka_b__1"] = "queued"  # e.g. waiting for B's lease
    assert reassignment_active_on(ti, "kafka_b") == ["sweep__kafka_b__1"]


def _sensor_and_context(run_id: str, params: dict, states: dict):
    from types import SimpleNamespace

    import pendulum
    from airflow.sdk import DAG

    from kafka_runbooks_airflow.sensors.lease import ClusterLeaseSensor

    with DAG("kafka_broker_restart", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        sensor = ClusterLeaseSensor(
            task_id="acquire_lease", kafka_config_id="kafka_a", on_held=params["on_lease_held"]
        )
    context = {
        "dag": SimpleNamespace(dag_id="kafka_broker_restart"),
        "run_id": run_id,
        "ti": FakeTI(states),
        "params": params,
    }
    return sensor, context


def _decided() -> str:
    from kafka_runbooks import decisions

    return "\n".join(r.summary() for r in decisions.made())


def test_the_sensor_waits_or_fails_naming_the_holder(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.lease import renew_lease

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    states = {"first": "running", "second": "running", "third": "running"}
    first, ctx1 = _sensor_and_context("first", {"on_lease_held": "wait", "dry_run": False}, states)
    assert first.poke(ctx1) is True
    second, ctx2 = _sensor_and_context("second", {"on_lease_held": "wait", "dry_run": False}, states)
    assert second.poke(ctx2) is False
    assert (
        "wait for the lease because cluster kafka_a is held by kafka_broker_restart run first" in _decided()
    )
    third, ctx3 = _sensor_and_context("third", {"on_lease_held": "fail", "dry_run": False}, states)
    with pytest.raises(AirflowFailException, match="held by kafka_broker_restart run first since"):
        third.poke(ctx3)
    # a dry run neither waits nor takes it
    dry, ctx4 = _sensor_and_context("dry", {"on_lease_held": "fail", "dry_run": True}, states)
    assert dry.poke(ctx4) is True
    renew_lease(ctx1, "kafka_a")  # the holder's step goes on
    with pytest.raises(AirflowFailException, match="does not hold the lease"):
        renew_lease(ctx2, "kafka_a")  # a run without the lease never acts
    # the holder's run ended without its teardown: the waiting run takes it over at its next poke
    states["first"] = "failed"
    assert second.poke(ctx2) is True
    assert "take over a stale lease" in _decided()
    with pytest.raises(AirflowFailException, match="does not hold the lease"):
        renew_lease(ctx1, "kafka_a")


def test_a_manual_reassignment_waiting_for_the_lease_counts_as_active_on_its_cluster(tmp_path, monkeypatch):
    """Today's main: a manual run queued behind another runbook's lease was neither the holder nor
    a sweep-started run, so the sweep saw nothing active and started a second reassignment."""
    from kafka_runbooks.lease import ClusterLease, Holder
    from kafka_runbooks_airflow.failed_broker import reassignment_active_on
    from kafka_runbooks_airflow.inputs import check_runbook_input
    from kafka_runbooks_airflow.lease import lease_store
    from kafka_runbooks_airflow.run_state import REASSIGN_DAG_ID

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_A", '{"conn_type": "generic"}')
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_B", '{"conn_type": "generic"}')
    # a restart holds A; a manual reassignment on A passes its input check, then waits for the lease
    ClusterLease(lease_store(), "kafka_a", Holder("kafka_broker_restart", "manual__r")).acquire()
    check_runbook_input(REASSIGN_DAG_ID, "manual__m", {"kafka_config_id": "kafka_a"})
    check_runbook_input(REASSIGN_DAG_ID, "manual__dry", {"kafka_config_id": "kafka_a", "dry_run": True})
    ti = FakeTI({"manual__m": "running", "manual__r": "running", "manual__dry": "running"})
    assert reassignment_active_on(ti, "kafka_a") == ["manual__m"]  # a dry run takes no lease
    assert reassignment_active_on(ti, "kafka_b") == []  # another cluster
    ti.states["manual__m"] = "failed"
    assert reassignment_active_on(ti, "kafka_a") == []  # finished: no longer counts


def test_the_lease_queue_keeps_each_run_once_and_forgets_old_entries():
    from kafka_runbooks.lease import Holder, LeaseQueue

    class Store:  # compare-and-set over a dict, as the data store's Records
        def __init__(self):
            self.data = {}

        def create(self, key, text):
            return self.data.setdefault(key, text) == text

        def read(self, key):
            return self.data.get(key)

        def swap(self, key, expected, text):
            if self.data.get(key) != expected:
                return False
            self.data[key] = text
            return True

    now = [1000.0]
    queue = LeaseQueue(Store(), keep_s=100, clock=lambda: now[0])
    queue.register("a", Holder("d", "r1"))
    queue.register("a", Holder("d", "r1"))
    queue.register("a", Holder("e", "r2"))
    assert queue.runs("a", "d") == ["r1"] and queue.runs("a", "e") == ["r2"] and queue.runs("b", "d") == []
    now[0] += 150
    queue.register("a", Holder("d", "r3"))
    assert queue.runs("a", "d") == ["r3"] and queue.runs("a", "e") == []


def test_the_sensor_takes_the_lease_for_as_long_as_the_gate_may_wait(tmp_path, monkeypatch):
    """Nothing renews the lease while the approval gate waits: it must hold that long past its TTL."""
    from kafka_runbooks_airflow.lease import cluster_lease

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KAFKA_RUNBOOKS_LEASE_TTL_S", "60")
    sensor, ctx = _sensor_and_context(
        "gated", {"on_lease_held": "wait", "dry_run": False}, {"gated": "running"}
    )
    sensor.hold_for_s = "3600"  # rendered from {{ params.approval_timeout_s }}
    assert sensor.poke(ctx) is True
    record, _ = cluster_lease(ctx, "kafka_a").current()
    assert (record.run_id, record.expires_at - record.renewed_at) == ("gated", 3660.0)
    sensor, ctx = _sensor_and_context("ungated", {"on_lease_held": "wait", "dry_run": False}, {})
    sensor.kafka_config_id = "kafka_b"
    assert sensor.poke(ctx) is True
    record, _ = cluster_lease(ctx, "kafka_b").current()
    assert record.expires_at - record.renewed_at == 60.0  # no gate wait: the TTL alone


def test_an_on_held_choice_it_does_not_know_fails_before_touching_the_lease(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.lease import cluster_lease

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    sensor, ctx = _sensor_and_context("r1", {"on_lease_held": "steal", "dry_run": False}, {"r1": "running"})
    with pytest.raises(
        AirflowFailException, match=r"on_lease_held must be one of \('wait', 'fail'\), not 'steal'"
    ):
        sensor.poke(ctx)
    assert cluster_lease(ctx, "kafka_a").current() == (None, None)
