"""One decision record by its id (what a DECISION line's ``(decision <id>)`` names), served by the
console app to users who may read the record's DAG, facts in full (issue #24: readable audit lines).

The record is made the way a runbook makes it (``decisions.record`` inside a task's environment) into
a real journal file; the app is called through FastAPI's test client. Airflow's auth manager needs a
running API server, so the logged-in user and the DAGs they may read are given to the app here.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from kafka_runbooks import decisions
from kafka_runbooks_airflow import console_app


@pytest.fixture
def made(tmp_path, monkeypatch):
    """A refusal and a decision with long facts, made in two runbooks' tasks, in a local journal."""
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "manual__1")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "plan_recovery")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "kafka_unclean_recovery")
    facts = {"replicas": {str(b): {"log_end_offset": 1000 + b, "epoch": 7} for b in range(40)}}
    unclean = decisions.record("choose", "elect broker 3", "it holds the longest log <b>", observed=facts)
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "kafka_broker_restart")
    restart = decisions.record("validate", "refuse the run: nothing was done", "node_ids is empty")
    return unclean, restart


@pytest.fixture
def client(monkeypatch):
    """The app as a user who may read only the unclean recovery runbook."""
    from airflow.api_fastapi.core_api.security import get_user

    monkeypatch.setattr(console_app, "_readable_dag_ids", lambda user: {"kafka_unclean_recovery"})
    console_app.app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(console_app.app)
    console_app.app.dependency_overrides.clear()


def test_a_decision_is_served_by_its_id_with_every_fact(made, client):
    unclean, _ = made
    assert len(unclean.facts_line()) < len(str(unclean.observed))  # the log line had to cut the facts
    answer = client.get(f"/decisions/{unclean.record_id}", headers={"accept": "application/json"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["record_id"], body["dag_id"], body["run_id"], body["task_id"]) == (
        unclean.record_id,
        "kafka_unclean_recovery",
        "manual__1",
        "plan_recovery",
    )
    assert body["observed"] == unclean.observed and body["decision"] == "elect broker 3"
    page = client.get(f"/decisions/{unclean.record_id}")
    assert (
        page.status_code == 200
        and "elect broker 3</b> because it holds the longest log &lt;b&gt;" in page.text
    )
    assert "&quot;log_end_offset&quot;: 1039" in page.text  # the last fact, cut from the log line, is here


def test_a_record_of_a_dag_the_user_may_not_read_is_not_served(made, client):
    _, restart = made
    answer = client.get(f"/decisions/{restart.record_id}", headers={"accept": "application/json"})
    assert answer.status_code == 404 and "no decision record" in answer.json()["detail"]
    assert client.get("/decisions/000000000000").status_code == 404
    assert client.get("/decisions/..%2Fjournal").status_code == 404
