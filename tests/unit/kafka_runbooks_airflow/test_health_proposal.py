"""The health sweep's proposal glue: ONE kafka_rebalance run per cluster, remembered in the data store
so that the run it started counts as active while it is queued (before it holds the cluster's lease),
and a proposal whose run Airflow never created does not hold the next one back.

The task instance is a stand-in for Airflow's: only ``get_dagrun_state`` (dag id, run id), which
answers a state or raises for an unknown run, as the Task SDK's does."""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks.health import HealthSettings
from kafka_runbooks_airflow.health import health_settings, last_proposal, propose, typed_settings

SKEWED = {
    "brokers": [
        {"broker_id": b, "alive": True, "fenced": False, "replica_count": n, "preferred_leader_count": 3}
        for b, n in ((1, 3), (2, 3), (3, 9))
    ],
    "log_dirs": {"brokers": [], "brokers_with_offline_dirs": []},
}


class Runs:
    """Airflow's runs as the task instance sees them: (dag_id, run_id) -> state."""

    def __init__(self, states=None):
        self.states = dict(states or {})

    def get_dagrun_state(self, dag_id, run_id):
        if (dag_id, run_id) not in self.states:
            raise RuntimeError(f"DagRun {dag_id}/{run_id} not found")
        return self.states[(dag_id, run_id)]


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    return tmp_path


def test_one_run_per_cluster_the_started_one_counts_while_queued(store, caplog):
    caplog.set_level(logging.INFO)
    settings = HealthSettings.from_given(health_settings({"start_rebalance": True}, None))
    first = propose(SKEWED, "kafka_a", "scheduled__1", settings, Runs())
    assert first.start and first.run_id == "health__kafka_a__scheduled__1"
    assert last_proposal("kafka_a").run_id == first.run_id
    # the next sweep: the run is queued (no lease yet); retrigger set to 0 so only "active" holds it back
    now = HealthSettings.from_given({**settings.as_dict(), "retrigger_after_minutes": 0})
    queued = Runs({("kafka_rebalance", first.run_id): "queued"})
    second = propose(SKEWED, "kafka_a", "scheduled__2", now, queued)
    assert not second.start and second.decision == "do not start another reassignment"
    assert f"kafka_rebalance/{first.run_id}" in second.why
    # another cluster is another cluster
    assert propose(SKEWED, "kafka_b", "scheduled__2", now, queued).start


def test_a_rejected_proposal_is_not_asked_again_at_once_one_never_created_is(store):
    settings = HealthSettings.from_given(health_settings({"start_rebalance": True}, None))
    first = propose(SKEWED, "kafka_a", "scheduled__1", settings, Runs())
    rejected = Runs({("kafka_rebalance", first.run_id): "failed"})
    assert propose(SKEWED, "kafka_a", "scheduled__2", settings, rejected).decision == "wait"
    never_created = Runs()  # its trigger failed (e.g. the DAG paused): nothing to wait for
    assert propose(SKEWED, "kafka_a", "scheduled__3", settings, never_created).start


def test_the_publish_task_judges_and_proposes_from_the_settings_typed_once(store):
    """What the DAG's publish task does with the health_settings task's XCom: typed once
    (``HealthSettings.from_given``), the balance judged against its targets and the proposal decided;
    a value the settings task would refuse is refused here too, before the report is read."""
    import json

    from kafka_runbooks.errors import BadInput
    from kafka_runbooks.snapshot_contract import REPORT_FILE
    from kafka_runbooks_airflow.reports import HEALTH_DIR, ProposalContext, publish_health_report

    xcom = json.loads(
        json.dumps(health_settings({"start_rebalance": True, "max_leader_spread": " 2 "}, None))
    )
    assert xcom["max_leader_spread"] == "2"  # checked and stripped by the settings task
    (store / "snap" / HEALTH_DIR).mkdir(parents=True)
    (store / "snap" / HEALTH_DIR / REPORT_FILE).write_text(json.dumps(SKEWED))
    checked = typed_settings(xcom)  # as the DAG's publish task does
    out = publish_health_report(
        str(store / "snap"), conn_id="kafka_a", proposal=ProposalContext(checked, "scheduled__1", Runs())
    )
    assert out["rebalance_trigger"] and out["rebalance_run_id"] == "health__kafka_a__scheduled__1"
    report = json.loads((store / "reports/cluster_health/by_connection/kafka_a.json").read_text())
    assert (
        report["balance"]["replicas"]["target"] == "10%"
        and report["balance"]["preferred_leaders"]["target"] == "2"
    )
    assert report["balance"]["state"] == "out of spread" and report["rebalance_proposal"]["start"]
    with pytest.raises(BadInput, match="min_replication_factor"):
        HealthSettings.from_given({**xcom, "min_replication_factor": 0})
