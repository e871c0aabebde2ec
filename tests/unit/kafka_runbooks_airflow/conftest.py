"""Fixtures of the plugin layer's tests."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.unit.kafka_runbooks_airflow.airflow_clock import ApiServer


@pytest.fixture
def api_server(monkeypatch):
    """Airflow's execution API health route on 127.0.0.1, its clock at 2026-11-23 15:00 UTC until a
    test moves it (``api_server.now = ...``); workers' ``execution_api_server_url`` names it."""
    server = ApiServer(datetime(2026, 11, 23, 15, 0, tzinfo=UTC))
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", server.url)
    yield server
    server.close()
