"""The alert receiver's refusals, before anything is recorded: off without its token, 401 without
the right bearer token, 400 for a body that is not Alertmanager's (the recording itself is
exercised on the real Airflow: tests/e2e/test_alert_intake.py)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from kafka_runbooks_airflow import alert_app

PATH = "/alertmanager"


@pytest.fixture
def client():
    return TestClient(alert_app.app)


def test_off_until_a_token_is_set(client, monkeypatch):
    monkeypatch.delenv(alert_app.TOKEN_ENV, raising=False)
    answer = client.post(PATH, json={"version": "4", "alerts": []})
    assert answer.status_code == 503 and alert_app.TOKEN_ENV in answer.json()["error"]


@pytest.mark.parametrize("header", [None, "Bearer wrong", "secret-1", "Basic c2VjcmV0LTE="])
def test_a_post_without_the_token_is_refused(client, monkeypatch, header):
    monkeypatch.setenv(alert_app.TOKEN_ENV, "secret-1")
    answer = client.post(
        PATH, json={"version": "4", "alerts": []}, headers={"Authorization": header} if header else {}
    )
    assert answer.status_code == 401 and "secret-1" not in answer.text


def test_a_body_that_is_not_a_webhook_is_refused_with_its_field(client, monkeypatch):
    monkeypatch.setenv(alert_app.TOKEN_ENV, "secret-1")
    auth = {"Authorization": "Bearer secret-1"}
    assert client.post(PATH, content=b"{nope", headers=auth).status_code == 400
    answer = client.post(
        PATH, json={"version": "4", "alerts": [{"status": "firing", "labels": {}}]}, headers=auth
    )
    assert answer.status_code == 400 and "alerts[0].labels.alertname: missing" in answer.json()["error"]
