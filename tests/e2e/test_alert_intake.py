"""Alerts start runbooks on the real Airflow (issue #41): a real Alertmanager posts a firing alert
to the plugin's receiver, the intake DAG starts the incident's sweep, a repeated post of the same
firing starts none, a post without the token is refused, an alert no route knows is recorded.
"""

from __future__ import annotations

import copy

import pytest
import requests

from kafka_runbooks_dev import alertmanager
from kafka_runbooks_dev.localstack.airflow_settings import TEST_ALERTS_TOKEN
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(900)
INTAKE = "kafka_alert_intake"
TARGET = "kafka_connect_autorestart"


def intake_runs(airflow) -> set[str]:
    """The intake's run ids."""
    runs = airflow.api("GET", f"/dags/{INTAKE}/dagRuns", params={"limit": 100})["dag_runs"]
    return {r["dag_run_id"] for r in runs}


def new_intake_run(airflow, before: set[str], what: str) -> str:
    """The one intake run not among ``before`` (by id: a queued run has no start time to order by)."""
    [run_id] = wait_until(lambda: intake_runs(airflow) - before, 120, 0.5, what)
    return run_id


def target_runs(airflow, prefix: str) -> list[str]:
    """The Connect sweep's run ids that start with ``prefix``."""
    runs = airflow.api("GET", f"/dags/{TARGET}/dagRuns", params={"limit": 100})["dag_runs"]
    return [r["dag_run_id"] for r in runs if r["dag_run_id"].startswith(prefix)]


def posted_bodies(airflow) -> list[dict]:
    """The Alertmanager posts the receiver recorded, oldest first: the asset events' extra."""
    [asset] = airflow.api("GET", "/assets", params={"name_pattern": "kafka_runbooks_alerts"})["assets"]
    events = airflow.api("GET", "/assets/events", params={"asset_id": asset["id"], "order_by": "timestamp"})
    return [e["extra"]["alertmanager"] for e in events["asset_events"]]


def test_a_firing_alert_starts_its_incidents_sweep_once_and_a_repeat_starts_none(
    airflow_local, kafka_stack, tmp_path
):
    assert alertmanager.available(), (
        "prometheus-alertmanager is not installed: scripts/bootstrap.sh --browser installs it"
    )
    airflow = airflow_local
    airflow.wait_for_dag(INTAKE, timeout=120)
    airflow.wait_for_dag(TARGET, timeout=120)
    airflow.unpause(TARGET)  # sweeps ship paused: the intake refuses to start a run into a paused DAG
    receiver = f"{airflow.base_url}/kafka-alerts/alertmanager"
    assert requests.post(receiver, json={"version": "4", "alerts": []}, timeout=30).status_code == 401
    before = intake_runs(airflow)

    with alertmanager.Alertmanager(tmp_path / "am", receiver, TEST_ALERTS_TOKEN) as am:
        am.fire(
            {"alertname": "KafkaConnectFailedTask", "connector": "e2e-alerting"}, {"summary": "a task FAILED"}
        )
        first = new_intake_run(airflow, before, "the intake run Alertmanager's post starts")
        [held] = am.alerts()
    assert airflow.wait_for_run(INTAKE, first, timeout=300) == "success"
    [run_id] = target_runs(airflow, f"alert__KafkaConnectFailedTask__{held['fingerprint'][:16]}__")
    log = airflow.task_log_text(INTAKE, first, "read_alerts")
    assert f"DECISION alert [KafkaConnectFailedTask]: start because {TARGET} run {run_id}" in log

    # Alertmanager's retry of the same post (the body it sent, as Airflow recorded it), with an
    # alert no route knows beside it: the same incident starts no second run
    body = posted_bodies(airflow)[-1]
    assert [a["fingerprint"] for a in body["alerts"]] == [held["fingerprint"]]
    unknown = copy.deepcopy(body["alerts"][0])
    unknown.update(labels={"alertname": "DiskAlmostFull"}, fingerprint="00e2e0000000unkn")
    before = intake_runs(airflow)
    auth = {"Authorization": f"Bearer {TEST_ALERTS_TOKEN}"}
    answer = requests.post(
        receiver, json={**body, "alerts": [*body["alerts"], unknown]}, headers=auth, timeout=30
    )
    assert answer.status_code == 202 and answer.json()["alerts"] == 2
    second = new_intake_run(airflow, before, "the intake run of the repeated post")
    assert airflow.wait_for_run(INTAKE, second, timeout=300) == "success"
    log = airflow.task_log_text(INTAKE, second, "read_alerts")
    assert (
        f"DECISION alert [KafkaConnectFailedTask]: already started because {TARGET} run {run_id} is this incident's run"
        in log
    )
    assert (
        "DECISION alert [DiskAlmostFull]: unrouted because no runbook handles the alert DiskAlmostFull" in log
    )
    assert target_runs(airflow, "alert__") == [run_id]
    assert airflow.wait_for_run(TARGET, run_id, timeout=300) == "success"
