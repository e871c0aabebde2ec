"""Alerts start runbooks on the real Airflow (issue #41): a real Prometheus scrapes the stack's JMX
exporters, the project's rule fires on a connector task Connect really failed, a real Alertmanager
posts it to the plugin's receiver, the intake DAG starts the incident's sweep; a repeated post of the
same firing starts none, a post without the token is refused, an alert no route knows is recorded,
and the alert resolved (the connector gone) is recorded as resolved.
"""

from __future__ import annotations

import copy

import pytest
import requests

from kafka_runbooks_dev import alertmanager, prometheus
from kafka_runbooks_dev.localstack.airflow_settings import TEST_ALERTS_TOKEN
from tests.connect_helpers import file_sink, task_failed, unique_name
from tests.helpers import create_topic, unique_topic, wait_until

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


def intake_run_saying(airflow, before: set[str], line: str, what: str) -> str:
    """The intake run, not among ``before``, whose record says ``line`` (Prometheus may post other
    alerts of the shared stack meanwhile: each its own run), once it ended a success."""

    def saying() -> str | None:
        for run_id in sorted(intake_runs(airflow) - before):
            ended = airflow.dag_run(INTAKE, run_id)["state"] == "success"
            if ended and line in airflow.task_log_text(INTAKE, run_id, "read_alerts"):
                return run_id
        return None

    return wait_until(saying, 240, 1, what)


def target_runs(airflow, prefix: str) -> list[str]:
    """The Connect sweep's run ids that start with ``prefix``."""
    runs = airflow.api("GET", f"/dags/{TARGET}/dagRuns", params={"limit": 100})["dag_runs"]
    return [r["dag_run_id"] for r in runs if r["dag_run_id"].startswith(prefix)]


def posted_bodies(airflow) -> list[dict]:
    """The Alertmanager posts the receiver recorded, oldest first: the asset events' extra."""
    [asset] = airflow.api("GET", "/assets", params={"name_pattern": "kafka_runbooks_alerts"})["assets"]
    events = airflow.api("GET", "/assets/events", params={"asset_id": asset["id"], "order_by": "timestamp"})
    return [e["extra"]["alertmanager"] for e in events["asset_events"]]


def firing_alert(am, name: str) -> dict:
    """Our connector's alert as Alertmanager holds it, once Prometheus's rule sent it (scrape, then
    the rule's ``for: 15s``)."""
    return wait_until(
        lambda: next((a for a in am.alerts() if a["labels"].get("connector") == name), None),
        120,
        0.5,
        "Prometheus's KafkaConnectFailedTask alert at Alertmanager",
    )


def test_a_failed_task_fires_its_rule_and_starts_its_incidents_sweep_once_and_a_repeat_starts_none(
    airflow_local, kafka_stack, connect, tmp_path
):
    assert alertmanager.available() and prometheus.available(), (
        "prometheus and prometheus-alertmanager are not installed: scripts/bootstrap.sh --browser installs them"
    )
    airflow = airflow_local
    airflow.wait_for_dag(INTAKE, timeout=120)
    airflow.wait_for_dag(TARGET, timeout=120)
    airflow.unpause(TARGET)  # sweeps ship paused: the intake refuses to start a run into a paused DAG
    receiver = f"{airflow.base_url}/kafka-alerts/alertmanager"
    assert requests.post(receiver, json={"version": "4", "alerts": []}, timeout=30).status_code == 401
    before = intake_runs(airflow)
    topic, name = unique_topic("alerting"), unique_name("e2e-alerting")
    create_topic(kafka_stack.bootstrap_servers, topic, 1, 3)
    with (
        alertmanager.Alertmanager(tmp_path / "am", receiver, TEST_ALERTS_TOKEN) as am,
        prometheus.Prometheus(tmp_path / "prom", kafka_stack.topology, am.url) as prom,
    ):
        file_sink(connect, name, tmp_path / name / "out.txt", topic)  # fails: its folder does not exist
        connect.created.append(name)
        connect.wait_for(name, task_failed)
        held = firing_alert(am, name)
        assert held["labels"]["alertname"] == "KafkaConnectFailedTask", held["labels"]
        assert held["labels"]["connect_conn_id"] == "kafka_connect_default", held["labels"]
        prefix = f"alert__KafkaConnectFailedTask__{held['fingerprint'][:16]}__"
        [run_id] = wait_until(lambda: target_runs(airflow, prefix), 180, 0.5, "the incident's sweep run")
        intake_run_saying(
            airflow,
            before,
            f"DECISION alert [KafkaConnectFailedTask]: start because {TARGET} run {run_id}",
            "the intake run that started it",
        )
        assert airflow.wait_for_run(TARGET, run_id, timeout=300) == "success"

        assert prom.targets_up()[kafka_stack.topology.connect_node.metrics_url]  # the rule's own source

    # Alertmanager's retry of the firing post (the body it sent, as Airflow recorded it), with an
    # alert no route knows beside it: the same incident starts no second run
    body = next(
        b
        for b in posted_bodies(airflow)
        if [(a["fingerprint"], a["status"]) for a in b["alerts"]] == [(held["fingerprint"], "firing")]
    )
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
    assert target_runs(airflow, prefix) == [run_id]
