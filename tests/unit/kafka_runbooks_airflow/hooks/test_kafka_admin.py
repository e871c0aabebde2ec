"""KafkaAdminHook on its own: the connection read lazily, the facade built on first use, secrets kept out.

The e2e tests reach this hook through real task runs; here it is driven alone from a
connection given the way a deployment gives it (an ``AIRFLOW_CONN_*`` environment variable).
"""

from __future__ import annotations

import json
import socket

import pytest

from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

SECRET = "s3cret-password-9f2"


def _connection(monkeypatch, conn_id: str, conn_type: str, extra: dict) -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": conn_type, "extra": extra})
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_admin_hook_builds_the_facade_lazily_and_never_shows_the_password(monkeypatch):
    port = _closed_port()
    _connection(
        monkeypatch,
        "kafka_unit",
        "kafka",
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "runbooks",
            "sasl.password": SECRET,
        },
    )
    hook = KafkaAdminHook(kafka_config_id="kafka_unit", timeout_s=2)
    admin = hook.admin  # no broker listens: building it must not connect
    assert admin.bootstrap_servers == f"127.0.0.1:{port}"
    assert admin.timeout_s == 2
    assert hook.admin is admin  # one facade per hook
    assert SECRET not in repr(admin)
    assert hook.client_config()["sasl.password"] == SECRET  # passed through untouched to librdkafka
    assert "_kafka_python" not in admin.__dict__ and "confluent" not in admin.__dict__


def test_admin_hook_on_a_connection_without_bootstrap_servers_is_refused(monkeypatch):
    from kafka_runbooks.errors import BadInput

    _connection(monkeypatch, "kafka_empty", "kafka", {"security.protocol": "PLAINTEXT"})
    with pytest.raises((BadInput, ValueError), match="bootstrap"):
        _ = KafkaAdminHook(kafka_config_id="kafka_empty").admin
